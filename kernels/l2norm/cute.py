"""L2 normalization over the last dim in CuTeDSL: y = x / sqrt(sum(x^2) + eps).

Same contract as the Triton launchers in ``triton.py``. Note [l2norm CuTe tiling]: rows are
short (D of 64 to 256 is the common case), so one row per CTA or per warp leaves most of the
bandwidth unused. A row is shared by ``threads_per_row`` consecutive lanes of a warp (a power of
two up to 32), one 128-bit vector each where the row allows, so that one warp access covers whole
contiguous rows; each thread then takes a second row (forward) or reads two tensors (backward),
for two loads in flight per thread; a CTA of 128 threads covers 16 rows at D = 128 in bfloat16.
Sums are in float32, per thread and then by a butterfly shuffle among the row's lanes. A row
longer than what its threads can keep in registers is processed in chunks, reading ``x`` twice
(the second read mostly from L2).

Note [l2norm CuTe signatures]: two compiled signatures per dtype and D. ``compact``: every tensor
row-major, 16-byte aligned and ``D * element_size % 16 == 0``, so each thread moves 128-bit
vectors. ``general``: only the last mode contiguous, one dynamic row stride per tensor, element
alignment, scalar accesses. Leading dims collapse into the row mode when their strides allow it;
a tensor whose leading dims do not collapse (or whose last mode is not contiguous) is copied to a
compact one. Each comes in an int32 and an int64 ABI (``_abi.requires_int64_abi``).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass import Float32, Int32, Int64, const_expr
from torch import Tensor

from .. import _abi
from .._cute import CompileCache, TensorArg

# Tuning, from benchmarks/l2norm_cute_check.py --sweep on the H200: at D = 64, 128, 256 in
# bfloat16 and float32 these defaults were the fastest forward or within 0.6 us of it, and every
# tiling tried gave the backward within 0.5%. Threads of a CTA (rows per CTA follow):
_CTA_THREADS = 128
# Vector loads each thread has in flight, all tensors together (several rows, or several
# vectors of one row, per tensor).
_LOADS_IN_FLIGHT = 2
# True: a row's threads take one vector each (up to a warp) and each thread takes several rows,
# so one warp access covers whole contiguous rows. False: each thread takes several vectors of
# one row and fewer threads share a row.
_SPREAD_ROWS = True
# float32 values of one tensor a thread keeps in registers; longer rows are chunked.
_MAX_VALUES = 64
_VECTOR_BYTES = 16


@dataclasses.dataclass(frozen=True, slots=True)
class _Tiling:
    """How a CTA covers rows of ``D`` elements (Note [l2norm CuTe tiling])."""

    vec: int  # elements per access
    threads_per_row: int  # a power of two up to 32: consecutive lanes of one warp
    vecs_per_thread: int  # of one row, per chunk
    chunks: int  # passes over a row too long to keep in registers
    rows_per_thread: int
    rows_per_cta: int

    @property
    def row_step(self) -> int:
        """Distance between the rows of one thread: the rows one pass of the CTA covers."""
        return self.rows_per_cta // self.rows_per_thread


def _tiling(D: int, vec: int, tensors: int) -> _Tiling:
    """The tiling for rows of ``D`` elements read ``vec`` at a time from ``tensors`` inputs."""
    nvec = -(-D // vec)
    per_tensor = max(1, _LOADS_IN_FLIGHT // tensors)
    wanted = nvec if _SPREAD_ROWS else -(-nvec // per_tensor)
    threads = min(32, 1 << (wanted - 1).bit_length())
    per_thread = -(-nvec // threads)
    cap = max(1, _MAX_VALUES // tensors // vec)
    chunks = -(-per_thread // cap)
    per_thread = -(-per_thread // chunks)
    rows = max(1, per_tensor // per_thread) if chunks == 1 else 1
    return _Tiling(vec, threads, per_thread, chunks, rows, rows * max(1, _CTA_THREADS // threads))


# ---------------------------------------------------------------------------------------------
# Device code
# ---------------------------------------------------------------------------------------------


@cute.jit
def _first_row(tiling: cutlass.Constexpr, idx64: cutlass.Constexpr):
    """(row, lane): this thread's first row and its rank among the row's threads; its other rows
    follow every ``tiling.row_step`` rows."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = tidx % tiling.threads_per_row
    local = tidx // tiling.threads_per_row
    # The row offset (row * row stride) is computed in the index type of the row coordinate.
    if const_expr(idx64):
        row = Int64(bidx) * tiling.rows_per_cta + Int64(local)
    else:
        row = Int32(bidx) * tiling.rows_per_cta + local
    return row, lane


@cute.jit
def _row_vectors(m: cute.Tensor, row, vec: cutlass.Constexpr) -> cute.Tensor:
    """Row ``row`` of ``m`` as ``((vec), D / vec)``: one mode-1 index per vector access."""
    return cute.zipped_divide(m[row, None], (vec,))


@cute.jit
def _load(
    vecs: cute.Tensor,
    chunk,
    lane,
    row_ok,
    D: cutlass.Constexpr,
    tiling: cutlass.Constexpr,
) -> cute.TensorSSA:
    """This thread's vectors of one chunk of a row as float32 ``(vec, vecs_per_thread)``; zeros
    for vectors past the row's end or of a row past the last."""
    frag = cute.make_rmem_tensor((tiling.vec, tiling.vecs_per_thread), vecs.element_type)
    frag.fill(0)
    nvec = D // tiling.vec
    for k in cutlass.range_constexpr(tiling.vecs_per_thread):
        v = (chunk * tiling.vecs_per_thread + k) * tiling.threads_per_row + lane
        if row_ok and v < nvec:
            cute.autovec_copy(vecs[None, v], frag[None, k])
    return frag.load().to(Float32)


@cute.jit
def _store(
    vals: cute.TensorSSA,
    vecs: cute.Tensor,
    chunk,
    lane,
    row_ok,
    D: cutlass.Constexpr,
    tiling: cutlass.Constexpr,
):
    """Write float32 ``(vec, vecs_per_thread)`` values to this thread's vectors of one chunk."""
    frag = cute.make_rmem_tensor((tiling.vec, tiling.vecs_per_thread), vecs.element_type)
    frag.store(vals.to(vecs.element_type))
    nvec = D // tiling.vec
    for k in cutlass.range_constexpr(tiling.vecs_per_thread):
        v = (chunk * tiling.vecs_per_thread + k) * tiling.threads_per_row + lane
        if row_ok and v < nvec:
            cute.autovec_copy(frag[None, k], vecs[None, v])


@cute.jit
def _load_rstd(mRstd: cute.Tensor, row, row_ok) -> Float32:
    """``rstd`` of one row, zero past the last row."""
    rstd = Float32(0)
    if row_ok:
        rstd = mRstd[row, 0]
    return rstd


@cute.jit
def _dot(a: cute.TensorSSA, b: cute.TensorSSA) -> Float32:
    """This thread's share of a row's dot product."""
    return (a * b).reduce(cute.ReductionOp.ADD, Float32(0), 0)


@cute.jit
def _row_sum(partial: Float32, tiling: cutlass.Constexpr) -> Float32:
    """Sum of ``partial`` over the threads of a row (consecutive lanes of one warp)."""
    return cute.arch.warp_reduction(partial, operator.add, threads_in_group=tiling.threads_per_row)


def _launch(kernel, rows, tiling: _Tiling, stream) -> None:
    kernel.launch(
        grid=[cute.ceil_div(rows, tiling.rows_per_cta), 1, 1],
        block=[tiling.row_step * tiling.threads_per_row, 1, 1],
        stream=stream,
    )


class _Fwd:
    """``y = x * rstd``, ``rstd = rsqrt(sum(x**2) + eps)`` over rows of ``D`` (static)."""

    def __init__(self, D: int, tiling: _Tiling, idx64: bool) -> None:
        self.D, self.tiling, self.idx64 = D, tiling, idx64

    @cute.jit
    def __call__(
        self,
        mX: cute.Tensor,
        mY: cute.Tensor,
        mRstd: cute.Tensor,
        eps: Float32,
        stream: cuda.CUstream,
    ):
        _launch(self.kernel(mX, mY, mRstd, eps), mX.shape[0], self.tiling, stream)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mY: cute.Tensor, mRstd: cute.Tensor, eps: Float32):
        D, t = self.D, self.tiling
        first, lane = _first_row(t, self.idx64)
        if const_expr(t.chunks == 1):
            # Loads of every row first, so that they are all in flight together.
            rows, oks, xs = [], [], []
            for j in cutlass.range_constexpr(t.rows_per_thread):
                rows.append(first + j * t.row_step)
                oks.append(rows[j] < mX.shape[0])
                xs.append(_load(_row_vectors(mX, rows[j], t.vec), 0, lane, oks[j], D, t))
            for j in cutlass.range_constexpr(t.rows_per_thread):
                rstd = cute.math.rsqrt(_row_sum(_dot(xs[j], xs[j]), t) + eps)
                _store(xs[j] * rstd, _row_vectors(mY, rows[j], t.vec), 0, lane, oks[j], D, t)
                if oks[j] and lane == 0:
                    mRstd[rows[j]] = rstd
        else:
            row_ok = first < mX.shape[0]
            vx = _row_vectors(mX, first, t.vec)
            vy = _row_vectors(mY, first, t.vec)
            ss = Float32(0)
            for c in cutlass.range(t.chunks):
                xc = _load(vx, c, lane, row_ok, D, t)
                ss += _dot(xc, xc)
            rstd = cute.math.rsqrt(_row_sum(ss, t) + eps)
            for c in cutlass.range(t.chunks):
                _store(_load(vx, c, lane, row_ok, D, t) * rstd, vy, c, lane, row_ok, D, t)
            if row_ok and lane == 0:
                mRstd[first] = rstd


class _Bwd:
    """``dx = rstd * (dy - y * <dy, y>)``, ``y = x * rstd``, over rows of ``D`` (static)."""

    def __init__(self, D: int, tiling: _Tiling, idx64: bool) -> None:
        self.D, self.tiling, self.idx64 = D, tiling, idx64

    @cute.jit
    def __call__(
        self,
        mDY: cute.Tensor,
        mX: cute.Tensor,
        mRstd: cute.Tensor,
        mDX: cute.Tensor,
        stream: cuda.CUstream,
    ):
        _launch(self.kernel(mDY, mX, mRstd, mDX), mX.shape[0], self.tiling, stream)

    @cute.kernel
    def kernel(self, mDY: cute.Tensor, mX: cute.Tensor, mRstd: cute.Tensor, mDX: cute.Tensor):
        D, t = self.D, self.tiling
        first, lane = _first_row(t, self.idx64)
        # d/dx of x * rsqrt(|x|^2 + eps) is rstd * (dy - y * <dy, y>) with y = x * rstd, so
        # dx = rstd * (dy - x * (rstd^2 * <dy, x>)).
        if const_expr(t.chunks == 1):
            rows, oks, xs, dys, rstds = [], [], [], [], []
            for j in cutlass.range_constexpr(t.rows_per_thread):
                rows.append(first + j * t.row_step)
                oks.append(rows[j] < mX.shape[0])
                xs.append(_load(_row_vectors(mX, rows[j], t.vec), 0, lane, oks[j], D, t))
                dys.append(_load(_row_vectors(mDY, rows[j], t.vec), 0, lane, oks[j], D, t))
                rstds.append(_load_rstd(mRstd, rows[j], oks[j]))
            for j in cutlass.range_constexpr(t.rows_per_thread):
                scale = _row_sum(_dot(dys[j], xs[j]), t) * rstds[j] * rstds[j]
                dx = (dys[j] - xs[j] * scale) * rstds[j]
                _store(dx, _row_vectors(mDX, rows[j], t.vec), 0, lane, oks[j], D, t)
        else:
            row_ok = first < mX.shape[0]
            vx = _row_vectors(mX, first, t.vec)
            vdy = _row_vectors(mDY, first, t.vec)
            vdx = _row_vectors(mDX, first, t.vec)
            rstd = _load_rstd(mRstd, first, row_ok)
            dot = Float32(0)
            for c in cutlass.range(t.chunks):
                dot += _dot(_load(vdy, c, lane, row_ok, D, t), _load(vx, c, lane, row_ok, D, t))
            scale = _row_sum(dot, t) * rstd * rstd
            for c in cutlass.range(t.chunks):
                xc = _load(vx, c, lane, row_ok, D, t)
                dyc = _load(vdy, c, lane, row_ok, D, t)
                _store((dyc - xc * scale) * rstd, vdx, c, lane, row_ok, D, t)


# ---------------------------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------------------------


def _build_fwd(key):
    dtype, D, compact, int64 = key
    tiling = _tiling(D, _vector_width(compact, dtype), 1)
    x = _row_arg(dtype, D, compact, output=False)
    y = _row_arg(dtype, D, compact, output=True)
    rstd = TensorArg(torch.float32, ("rows",), compact=True)
    return _Fwd(D, tiling, int64), (x, y, rstd), (Float32(0.0),), int64


def _build_bwd(key):
    dy_dtype, x_dtype, D, compact, int64 = key
    tiling = _tiling(D, _vector_width(compact, dy_dtype, x_dtype), 2)
    dy = _row_arg(dy_dtype, D, compact, output=False)
    x = _row_arg(x_dtype, D, compact, output=False)
    dx = _row_arg(x_dtype, D, compact, output=True)
    rstd = TensorArg(torch.float32, ("rows", 1), compact=compact)
    return _Bwd(D, tiling, int64), (dy, x, rstd, dx), (), int64


def _row_arg(dtype: torch.dtype, D: int, compact: bool, output: bool) -> TensorArg:
    """A ``(rows, D)`` tensor: 16-byte aligned row-major on the compact signature; a dynamic row
    stride and element alignment on the general one, except for outputs, which are allocated
    here and so stay row-major."""
    align = _VECTOR_BYTES if compact else None
    return TensorArg(dtype, ("rows", D), compact=compact or output, align=align)


_FWD = CompileCache("l2norm_fwd", _build_fwd)
_BWD = CompileCache("l2norm_bwd", _build_bwd)


def _collapsed_stride(shape: Sequence[int], stride: Sequence[int], inner: int) -> int | None:
    """The stride of ``shape``'s modes collapsed into one (row-major walk), or None when they do
    not collapse; ``inner`` when at most one element is addressed (any stride serves)."""
    result = expected = None
    for size, st in zip(reversed(shape), reversed(stride), strict=True):
        if size == 1:
            continue
        if expected is None:
            result = st
        elif st != expected:
            return None
        expected = st * size
    return inner if result is None else result


def _as_rows(t: Tensor, D: int) -> tuple[Tensor, bool]:
    """``t`` (``[..., D]``) as a ``(rows, D)`` view with stride 1 along D, and whether that view
    is row-major. Copies only when the leading dims do not collapse into one mode or D is not
    contiguous (Note [l2norm CuTe signatures])."""
    if t.is_contiguous():
        rows = t.view(-1, D)
        # view keeps whatever stride a size-1 mode had; the compact signature states (D, 1).
        return (rows if D > 1 else rows.as_strided(rows.shape, (1, 1))), True
    if D > 1 and t.stride(-1) != 1:
        return t.contiguous().view(-1, D), True
    stride = _collapsed_stride(t.shape[:-1], t.stride()[:-1], D)
    if stride is None:
        return t.contiguous().view(-1, D), True
    return t.as_strided((t.numel() // D, D), (stride, 1)), stride == D


def _as_column(t: Tensor) -> tuple[Tensor, bool]:
    """``rstd`` as a ``(rows, 1)`` view and whether it is compact, copying only when its dims
    do not collapse. A column gives its general signature what every ``from_dlpack`` tensor has,
    a contiguous last mode and a dynamic stride (Note [CuTe launch paths])."""
    if t.is_contiguous():
        return t.view(-1, 1), True
    stride = _collapsed_stride(t.shape, t.stride(), 1)
    if stride is None:
        return t.contiguous().view(-1, 1), True
    return t.as_strided((t.numel(), 1), (stride, 1)), stride == 1


def _aligned(t: Tensor, row_bytes: int) -> bool:
    """Base and row length multiples of 16 bytes: every row admits 128-bit accesses."""
    return t.data_ptr() % _VECTOR_BYTES == 0 and row_bytes % _VECTOR_BYTES == 0


_SIGNATURES = {
    (compact, int64): f"{'compact' if compact else 'general'}/{'int64' if int64 else 'int32'}"
    for compact in (False, True)
    for int64 in (False, True)
}


def _vector_width(compact: bool, *dtypes: torch.dtype) -> int:
    """Elements per access: 128 bits of the widest dtype on the compact signature, else one."""
    if not compact:
        return 1
    return _VECTOR_BYTES // max(d.itemsize for d in dtypes)


def l2norm_fwd(x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """Forward of ``l2norm``: ``y = x * rstd`` with ``rstd = 1 / sqrt(sum(x**2, -1) + eps)``.

    Args:
        x: ``[..., D]`` CUDA tensor, bfloat16, float16 or float32, any number of leading dims,
            any strides (leading dims that do not collapse into one strided mode, or a last
            dim that is not contiguous, are copied to a compact tensor first).
        eps: added to the sum of squares of each row.

    Returns:
        ``(y, rstd)``, both newly allocated and contiguous: ``y`` is ``[..., D]`` in ``x``'s
        dtype, ``rstd`` is ``[...]`` float32 (kept for the backward). With no rows or ``D == 0``
        nothing is launched and ``rstd`` is ``eps ** -0.5``.

    Mutates nothing. Compiles once per dtype, ``D`` and signature (Note [l2norm CuTe
    signatures]); any ``D >= 1`` (long rows are processed in chunks).
    """
    shape = x.shape
    D = shape[-1]
    numel = x.numel()
    # Note [l2norm CuTe host cost]: outputs come from empty_like and an integer size (3.9 us for
    # both on the H200's host, against 6.7 us for new_empty with torch.Size shapes); their
    # alignment is the caching allocator's (512 bytes), and TVM-FFI checks it on every call.
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    if numel == 0:
        # As the reference computes it, in float32 on the device: rsqrt(0 + eps), inf for
        # eps == 0 and nan below.
        return y, x.new_empty(shape[:-1], dtype=torch.float32).fill_(eps).rsqrt_()
    rows = numel // D
    rstd = x.new_empty(rows, dtype=torch.float32)
    x2, row_major = _as_rows(x, D)
    compact = row_major and _aligned(x2, D * x.element_size())
    y2 = y.view(rows, D)
    # A compact x spans what y spans; a strided one may span more or less.
    int64 = _abi.requires_int64_abi(x2) if compact else _abi.requires_int64_abi(x2, y2)
    _abi.note_signature("l2norm_fwd", _SIGNATURES[compact, int64])
    _FWD.get((x.dtype, D, compact, int64))(x2, y2, rstd, eps)
    # Sizes as separate ints: a torch.Size argument costs twice the view itself.
    return y, rstd.view(*shape[:-1]) if len(shape) > 1 else rstd.view(())


def l2norm_bwd(grad_y: Tensor, x: Tensor, rstd: Tensor) -> Tensor:
    """Backward of ``l2norm``: ``grad_x = rstd * (grad_y - y * <grad_y, y>)`` with ``y = x * rstd``.

    Args:
        grad_y: ``[..., D]``, the gradient of ``y``, bfloat16, float16 or float32, any strides.
        x: ``[..., D]``, the forward input, bfloat16, float16 or float32, any strides.
        rstd: ``[...]`` float32, the second output of :func:`l2norm_fwd`, any strides.

    Returns:
        ``grad_x``: ``[..., D]`` in ``x``'s dtype, newly allocated and contiguous.

    Mutates nothing. Layouts as in :func:`l2norm_fwd`; all three inputs choose one signature.
    """
    D = x.shape[-1]
    dx = torch.empty_like(x, memory_format=torch.contiguous_format)
    numel = x.numel()
    if numel == 0:
        return dx
    dy2, dy_row_major = _as_rows(grad_y, D)
    x2, x_row_major = _as_rows(x, D)
    rstd2, rstd_compact = _as_column(rstd)
    compact = (
        dy_row_major
        and x_row_major
        and rstd_compact
        and _aligned(dy2, D * grad_y.element_size())
        and _aligned(x2, D * x.element_size())
    )
    dx2 = dx.view(numel // D, D)
    # Compact, all of them span what x spans.
    tensors = (x2,) if compact else (dy2, x2, rstd2, dx2)
    int64 = _abi.requires_int64_abi(*tensors)
    _abi.note_signature("l2norm_bwd", _SIGNATURES[compact, int64])
    _BWD.get((grad_y.dtype, x.dtype, D, compact, int64))(dy2, x2, rstd2, dx2)
    return dx


__all__ = ["l2norm_bwd", "l2norm_fwd"]
