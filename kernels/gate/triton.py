import functools

import torch
import triton
import triton.language as tl

from .._triton import cdiv, launchable, next_power_of_2

_KINDS = {"softplus": 0, "lower_bound": 1}
_TILE = 4096
_MAX_BLOCK_HK = 256
_MAX_BLOCK_N = 128
# Backward: enough (split, column-block) programs to fill a GPU; each split loops over row blocks.
_BWD_TARGET_PROGRAMS = 1024


def _kind_id(kind: str) -> int:
    if kind not in _KINDS:
        raise ValueError(f"unknown gate kind {kind!r}; expected one of {list(_KINDS)}")
    return _KINDS[kind]


@triton.jit
def _log1p(e):
    # log(1 + e) is 0 for e < 2^-24; Goldberg's correction keeps full relative precision.
    u = 1.0 + e
    d = u - 1.0
    is_one = d == 0.0
    return tl.where(is_one, e, tl.log(u) * (e / tl.where(is_one, 1.0, d)))


@triton.jit
def _gate_tile(x, a, lower_bound, KIND: tl.constexpr):
    # Returns (out, d out / d x, d out / d A_log) for x = g + dt_bias and a = exp(A_log).
    if KIND == 0:
        e = tl.exp(-tl.abs(x))
        sig = tl.where(x >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e))
        # torch.nn.functional.softplus default: beta=1, threshold=20.
        big = x > 20.0
        sp = tl.where(big, x, tl.maximum(x, 0.0) + _log1p(e))
        out = -a * sp
        dx = -a * tl.where(big, 1.0, sig)
        da = out
    else:
        # Inductor passes Python floats to user kernels as fp64 scalars; keep the math in fp32
        # (loop-carried accumulators must not change type, and fp64 is slow on GPUs).
        lower_bound = tl.cast(lower_bound, tl.float32)
        z = a * x
        e = tl.exp(-tl.abs(z))
        s = tl.where(z >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e))
        # s * (1 - s) written symmetric in |z| so it stays accurate where s rounds to 1.
        ds = lower_bound * (e / ((1.0 + e) * (1.0 + e)))
        out = lower_bound * s
        dx = ds * a
        da = ds * z
    return out, dx, da


@triton.jit
def _gate_fwd_kernel(
    g_ptr,
    a_log_ptr,
    dt_bias_ptr,
    out_ptr,
    N,
    H,
    K,
    stride_gn,
    stride_gh,
    stride_gk,
    lower_bound,
    KIND: tl.constexpr,
    HAS_A_LOG: tl.constexpr,
    HAS_DT_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_HK: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_c = tl.program_id(1)
    HK = H * K
    rows = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    cols = pid_c * BLOCK_HK + tl.arange(0, BLOCK_HK)
    col_mask = cols < HK
    h = cols // K
    k = cols - h * K
    mask = (rows < N)[:, None] & col_mask[None, :]

    g_col = h.to(tl.int64) * stride_gh + k.to(tl.int64) * stride_gk
    x = tl.load(g_ptr + rows[:, None] * stride_gn + g_col[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    if HAS_DT_BIAS:
        b = tl.load(dt_bias_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        x = x + b[None, :]
    if HAS_A_LOG:
        a = tl.exp(tl.load(a_log_ptr + h, mask=col_mask, other=0.0).to(tl.float32))
    else:
        a = tl.full([BLOCK_HK], 1.0, tl.float32)
    out, dx, da = _gate_tile(x, a[None, :], lower_bound, KIND)
    tl.store(out_ptr + rows[:, None] * HK + cols[None, :], out, mask=mask)


@triton.jit
def _gate_bwd_kernel(
    g_ptr,
    a_log_ptr,
    dt_bias_ptr,
    grad_ptr,
    dg_ptr,
    da_part_ptr,
    db_part_ptr,
    N,
    H,
    K,
    n_iters,
    stride_gn,
    stride_gh,
    stride_gk,
    stride_on,
    stride_oh,
    stride_ok,
    lower_bound,
    KIND: tl.constexpr,
    HAS_A_LOG: tl.constexpr,
    HAS_DT_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_HK: tl.constexpr,
):
    pid_s = tl.program_id(0)
    pid_c = tl.program_id(1)
    HK = H * K
    cols = pid_c * BLOCK_HK + tl.arange(0, BLOCK_HK)
    col_mask = cols < HK
    h = cols // K
    k = cols - h * K
    h64 = h.to(tl.int64)
    k64 = k.to(tl.int64)
    g_col = h64 * stride_gh + k64 * stride_gk
    o_col = h64 * stride_oh + k64 * stride_ok

    if HAS_DT_BIAS:
        b = tl.load(dt_bias_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    if HAS_A_LOG:
        a = tl.exp(tl.load(a_log_ptr + h, mask=col_mask, other=0.0).to(tl.float32))
    else:
        a = tl.full([BLOCK_HK], 1.0, tl.float32)

    acc_a = tl.zeros([BLOCK_HK], dtype=tl.float32)
    acc_b = tl.zeros([BLOCK_HK], dtype=tl.float32)
    row_start = pid_s.to(tl.int64) * n_iters * BLOCK_N
    for i in range(0, n_iters):
        rows = row_start + i * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rows < N)[:, None] & col_mask[None, :]
        x = tl.load(g_ptr + rows[:, None] * stride_gn + g_col[None, :], mask=mask, other=0.0)
        x = x.to(tl.float32)
        if HAS_DT_BIAS:
            x = x + b[None, :]
        go = tl.load(grad_ptr + rows[:, None] * stride_on + o_col[None, :], mask=mask, other=0.0)
        go = go.to(tl.float32)
        out, dx, da = _gate_tile(x, a[None, :], lower_bound, KIND)
        dg = go * dx
        tl.store(
            dg_ptr + rows[:, None] * HK + cols[None, :],
            dg.to(dg_ptr.dtype.element_ty),
            mask=mask,
        )
        if HAS_DT_BIAS:
            acc_b += tl.sum(tl.where(mask, dg, 0.0), axis=0)
        if HAS_A_LOG:
            acc_a += tl.sum(tl.where(mask, go * da, 0.0), axis=0)

    part = pid_s.to(tl.int64) * HK + cols
    if HAS_DT_BIAS:
        tl.store(db_part_ptr + part, acc_b, mask=col_mask)
    if HAS_A_LOG:
        tl.store(da_part_ptr + part, acc_a, mask=col_mask)


def _block_sizes(HK):
    block_hk = min(next_power_of_2(HK), _MAX_BLOCK_HK)
    block_n = min(_TILE // block_hk, _MAX_BLOCK_N)
    return block_n, block_hk


_block_sizes_cached = functools.cache(_block_sizes)


def _blocks(HK):
    """(BLOCK_N, BLOCK_HK) for ``H * K`` columns.

    Cached per ``HK``; under tracing (gate is a triton_op, traced by torch.compile) ``HK`` may be
    a SymInt, which cannot be a cache key and is computed with as it always was.
    """
    if type(HK) is int:
        return _block_sizes_cached(HK)
    return _block_sizes(HK)


def _rows(x, H, K):
    """``x`` (``[..., H, K]``, non-empty) as ``[N, H, K]`` rows: (tensor, its three strides).

    A contiguous ``x`` is passed as it is with the strides of that view, sparing a ``reshape``.
    """
    if x.is_contiguous():
        return x, H * K, K, 1
    x3 = x.reshape(-1, H, K)
    return (x3, *x3.stride())


def _contiguous(x):
    """None, or ``x`` with unit stride (the kernels index the parameters as flat arrays)."""
    if x is None or x.is_contiguous():
        return x
    return x.contiguous()


def gate_fwd(g, A_log, dt_bias, kind: str, lower_bound: float) -> torch.Tensor:
    """Forward of ``gate``, in float32, with ``x = g + dt_bias`` and ``a = exp(A_log[h])``.

    ``kind="softplus"``: ``out = -a * softplus(x)``; ``kind="lower_bound"``:
    ``out = lower_bound * sigmoid(a * x)``.

    Args:
        g: ``[..., H, K]``, bfloat16, float16 or float32, any number of leading dims, any strides.
        A_log: ``[H]`` float32, or None (``a = 1``).
        dt_bias: ``[H * K]`` float32, or None (zero bias).
        kind: ``"softplus"`` or ``"lower_bound"``; anything else raises ``ValueError``.
        lower_bound: the scale of the ``"lower_bound"`` variant (unused by ``"softplus"``).

    Returns:
        ``out``: ``[..., H, K]`` float32, newly allocated and contiguous.

    Mutates nothing.
    """
    kind_id = _kind_id(kind)
    shape = g.shape
    H, K = shape[-2], shape[-1]
    out = g.new_empty(shape, dtype=torch.float32)
    numel = g.numel()
    if numel == 0:
        return out
    HK = H * K
    N = numel // HK
    g3, s_n, s_h, s_k = _rows(g, H, K)
    # Absent operands are passed as None (constexpr-specialized) rather than as an aliasing dummy
    # tensor: functionalization under torch.compile would otherwise treat the alias as mutated.
    a_log = _contiguous(A_log)
    dt_b = _contiguous(dt_bias)
    block_n, block_hk = _blocks(HK)
    launchable(_gate_fwd_kernel, out)[(cdiv(N, block_n), cdiv(HK, block_hk))](
        g3,
        a_log,
        dt_b,
        out,
        N,
        H,
        K,
        s_n,
        s_h,
        s_k,
        float(lower_bound),
        KIND=kind_id,
        HAS_A_LOG=A_log is not None,
        HAS_DT_BIAS=dt_bias is not None,
        BLOCK_N=block_n,
        BLOCK_HK=block_hk,
    )
    return out


def gate_bwd(
    g, A_log, dt_bias, grad_out, kind: str, lower_bound: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backward of ``gate``, with the parameter gradients already reduced over the leading dims.

    Args:
        g, A_log, dt_bias, kind, lower_bound: as for :func:`gate_fwd` (``g: [..., H, K]``,
            ``A_log: [H]`` float32 or None, ``dt_bias: [H * K]`` float32 or None).
        grad_out: ``[..., H, K]``, the gradient of ``out`` (float32, or any floating dtype),
            any strides.

    Returns:
        ``(grad_g, grad_A_log, grad_dt_bias)``, newly allocated and contiguous: ``grad_g`` is
        ``[..., H, K]`` in ``g``'s dtype; ``grad_A_log`` is ``[H]`` float32 and ``grad_dt_bias``
        ``[H * K]`` float32, each all zeros when the parameter is None.

    Mutates nothing. Unknown ``kind`` raises ``ValueError``.
    """
    kind_id = _kind_id(kind)
    shape = g.shape
    H, K = shape[-2], shape[-1]
    HK = H * K
    dg = g.new_empty(shape)
    numel = g.numel()
    if numel == 0 or A_log is None:
        dA_log = g.new_zeros((H,), dtype=torch.float32)
    if numel == 0 or dt_bias is None:
        ddt_bias = g.new_zeros((HK,), dtype=torch.float32)
    if numel == 0:
        return dg, dA_log, ddt_bias

    N = numel // HK
    g3, s_gn, s_gh, s_gk = _rows(g, H, K)
    go3, s_on, s_oh, s_ok = _rows(grad_out, H, K)
    block_n, block_hk = _blocks(HK)
    n_blocks = cdiv(N, block_n)
    hk_blocks = cdiv(HK, block_hk)
    n_iters = cdiv(n_blocks, cdiv(_BWD_TARGET_PROGRAMS, hk_blocks))
    splits = cdiv(n_blocks, n_iters)

    a_log = _contiguous(A_log)
    dt_b = _contiguous(dt_bias)
    da_part = None if A_log is None else g.new_empty((splits, HK), dtype=torch.float32)
    db_part = None if dt_bias is None else g.new_empty((splits, HK), dtype=torch.float32)
    launchable(_gate_bwd_kernel, dg)[(splits, hk_blocks)](
        g3,
        a_log,
        dt_b,
        go3,
        dg,
        da_part,
        db_part,
        N,
        H,
        K,
        n_iters,
        s_gn,
        s_gh,
        s_gk,
        s_on,
        s_oh,
        s_ok,
        float(lower_bound),
        KIND=kind_id,
        HAS_A_LOG=A_log is not None,
        HAS_DT_BIAS=dt_bias is not None,
        BLOCK_N=block_n,
        BLOCK_HK=block_hk,
    )
    if A_log is not None:
        dA_log = da_part.sum(0).reshape(H, K).sum(1)
    if dt_bias is not None:
        ddt_bias = db_part.sum(0)
    return dg, dA_log, ddt_bias
