import functools

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .._triton import cdiv, interpreted, launchable, next_power_of_2

_KINDS = {"softplus": 0, "lower_bound": 1}
# Elements per program (forward) and per loop step (backward), over 4 warps: 32 (8) a thread.
# The backward's step is small because its two fp32 column accumulators live in registers across
# the loop (~100 registers at 8 elements a thread: 4-5 programs an SM). Its loop is pipelined:
# the loads of _BWD_STAGES - 1 further steps are in flight (async copies to shared memory) while
# a step computes. Without that a warp waits on its own loads every step: ptxas schedules a
# register prefetch of the next step after the current step's math.
_FWD_TILE = 4096
_FWD_WARPS = 4
_BWD_TILE = 1024
_BWD_WARPS = 4
_BWD_STAGES = 3
_MAX_BLOCK_K = 1024
# Backward: (split, head) programs in all, enough for several waves on a large GPU while each
# split still covers ~100+ rows, so that its partial sums stay ~1% of the traffic.
_BWD_TARGET_PROGRAMS = 4096
# Final sum of the backward's partials: [BLOCK_S, BLOCK_C] tiles, one program per column block.
_SUM_BLOCK_S = 64
_SUM_BLOCK_C = 32

_LOG2E = tl.constexpr(1.4426950408889634)
_LN2 = tl.constexpr(0.6931471805599453)


def _kind_id(kind: str) -> int:
    if kind not in _KINDS:
        raise ValueError(f"unknown gate kind {kind!r}; expected one of {list(_KINDS)}")
    return _KINDS[kind]


@triton.jit
def _probe():
    # Never launched: what @triton.jit returned for it tells whether the interpreter is on.
    pass


# The hardware's approximate log2 and reciprocal (lg2.approx, div.approx: a few ulp, arguments in
# [1, 2] here) cost one instruction where libdevice's exact log2 costs ~20, which would make the
# forward compute-bound. Triton's interpreter has no libdevice, so it keeps the exact forms.
_FAST_MATH = tl.constexpr(not interpreted(_probe))


@triton.jit
def _log2(x):
    if _FAST_MATH:
        return libdevice.fast_log2f(x)
    else:
        return tl.log2(x)


@triton.jit
def _rcp(x):
    # Only called on x in [1, 2].
    if _FAST_MATH:
        return libdevice.fast_dividef(1.0, x)
    else:
        return 1.0 / x


@triton.jit
def _softplus(x, t):
    # t = exp(-|x|) in (0, 1]: log(1 + t) never overflows, and x > 20 (torch's threshold, where
    # torch returns x) gives log2(1 + t) == 0 in fp32, so the result is x there too.
    return tl.maximum(x, 0.0) + _LN2 * _log2(1.0 + t)


@triton.jit
def _gate_fwd_kernel(
    g_ptr,
    a_log_ptr,
    dt_bias_ptr,
    out_ptr,
    N,
    K,
    n_col_blocks,
    n_k_blocks,
    stride_gn,
    stride_gh,
    stride_gk,
    stride_on,
    lower_bound,
    KIND: tl.constexpr,
    HAS_A_LOG: tl.constexpr,
    HAS_DT_BIAS: tl.constexpr,
    G_UNIT_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # One program: BLOCK_N rows x BLOCK_K columns of one head, so exp(A_log[h]) is one scalar.
    # Heads vary fastest across programs: concurrent programs cover whole rows of memory.
    pid = tl.program_id(0)
    pid_c = pid % n_col_blocks
    pid_n = pid // n_col_blocks
    h = pid_c // n_k_blocks
    kb = pid_c - h * n_k_blocks
    rows = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    k_mask = k < K
    mask = (rows < N)[:, None] & k_mask[None, :]
    col = h * K + k

    g_off = rows[:, None] * stride_gn + (h.to(tl.int64) * stride_gh + k * stride_gk)[None, :]
    if G_UNIT_K:
        # Loads of 4 elements per thread, as wide as the fp32 stores: 8-wide 16-bit loads would
        # take a layout conversion through shared memory before the stores.
        g_off = tl.max_contiguous(g_off, [1, 4])
    x = tl.load(g_ptr + g_off, mask=mask, other=0.0).to(tl.float32)
    if HAS_DT_BIAS:
        x += tl.load(dt_bias_ptr + col, mask=k_mask, other=0.0)[None, :]
    if KIND == 0:
        if HAS_A_LOG:
            neg_a = -tl.exp(tl.load(a_log_ptr + h))
        else:
            neg_a = -1.0
        out = neg_a * _softplus(x, tl.exp2(-tl.abs(x) * _LOG2E))
    else:
        # Inductor passes Python floats to user kernels as fp64 scalars; keep the math in fp32.
        lb = tl.cast(lower_bound, tl.float32)
        if HAS_A_LOG:
            x *= tl.exp(tl.load(a_log_ptr + h))
        # sigmoid(z) = 1 / (1 + exp(-z)): exp(-z) may overflow to inf, giving 0 as it should.
        out = lb / (1.0 + tl.exp2(-x * _LOG2E))
    tl.store(out_ptr + rows[:, None] * stride_on + col[None, :], out, mask=mask)


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
    stride_dn,
    lower_bound,
    KIND: tl.constexpr,
    HAS_A_LOG: tl.constexpr,
    HAS_DT_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # One program: one head (all its K columns) over one slab of n_iters * BLOCK_N rows. Writes
    # dg, and the slab's column sums of dg (-> grad of dt_bias) and its total of
    # grad_out * d out / d A_log (-> grad of A_log) as fp32 partials, summed by
    # _gate_bwd_sum_kernel in a fixed order (deterministic, no atomics).
    pid = tl.program_id(0)
    h = pid % H
    pid_s = pid // H
    h64 = h.to(tl.int64)
    if HAS_A_LOG:
        a = tl.exp(tl.load(a_log_ptr + h))
    else:
        a = 1.0
    if KIND == 1:
        lb = tl.cast(lower_bound, tl.float32)
    row_start = pid_s.to(tl.int64) * n_iters * BLOCK_N
    row_end = tl.minimum(row_start + n_iters * BLOCK_N, N)
    acc_a_total = tl.zeros([], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k_mask = k < K
        col = h * K + k
        g_col = h64 * stride_gh + k * stride_gk
        o_col = h64 * stride_oh + k * stride_ok
        if HAS_DT_BIAS:
            b = tl.load(dt_bias_ptr + col, mask=k_mask, other=0.0)
        # Column sums accumulate in 2D and are reduced once after the loop: no cross-warp
        # reduction per step.
        acc_a = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        acc_b = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        # Masked entries read grad_out as 0, so they add exactly 0 to both sums.
        for i in tl.range(0, n_iters, num_stages=NUM_STAGES):
            rows = row_start + i * BLOCK_N + tl.arange(0, BLOCK_N)
            mask = (rows < row_end)[:, None] & k_mask[None, :]
            x = tl.load(g_ptr + rows[:, None] * stride_gn + g_col[None, :], mask=mask, other=0.0)
            x = x.to(tl.float32)
            go = tl.load(
                grad_ptr + rows[:, None] * stride_on + o_col[None, :], mask=mask, other=0.0
            )
            go = go.to(tl.float32)
            if HAS_DT_BIAS:
                x += b[None, :]
            if KIND == 0:
                # d/dx = -a * sigmoid(x); d/dA_log = out = -a * softplus(x).
                t = tl.exp2(-tl.abs(x) * _LOG2E)
                r = _rcp(1.0 + t)
                sig = tl.where(x >= 0.0, r, t * r)
                go_a = go * a
                dg = -go_a * sig
                if HAS_A_LOG:
                    acc_a -= go_a * _softplus(x, t)
            else:
                # s = sigmoid(z), z = a * x: d/dz = lb * s * (1 - s) = lb * t / (1 + t)^2 with
                # t = exp(-|z|), symmetric in z and accurate where s rounds to 1.
                z = x * a
                t = tl.exp2(-tl.abs(z) * _LOG2E)
                r = _rcp(1.0 + t)
                dz = go * (lb * (t * r * r))
                dg = dz * a
                if HAS_A_LOG:
                    acc_a += dz * z
            tl.store(
                dg_ptr + rows[:, None] * stride_dn + col[None, :],
                dg.to(dg_ptr.dtype.element_ty),
                mask=mask,
            )
            if HAS_DT_BIAS:
                acc_b += dg
        if HAS_DT_BIAS:
            tl.store(
                db_part_ptr + pid_s.to(tl.int64) * H * K + col, tl.sum(acc_b, axis=0), mask=k_mask
            )
        if HAS_A_LOG:
            acc_a_total += tl.sum(tl.sum(acc_a, axis=1), axis=0)
    if HAS_A_LOG:
        tl.store(da_part_ptr + pid_s.to(tl.int64) * H + h, acc_a_total)


@triton.jit
def _column_sum(part_ptr, out_ptr, S, C, c_block, BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    # out[c] = sum over s of part[s, c] (part: [S, C] fp32, contiguous), for one column block,
    # rows added in a fixed order.
    c = c_block * BLOCK_C + tl.arange(0, BLOCK_C)
    c_mask = c < C
    acc = tl.zeros([BLOCK_S, BLOCK_C], dtype=tl.float32)
    for s0 in range(0, S, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        m = (s < S)[:, None] & c_mask[None, :]
        acc += tl.load(part_ptr + s.to(tl.int64)[:, None] * C + c[None, :], mask=m, other=0.0)
    tl.store(out_ptr + c, tl.sum(acc, axis=0), mask=c_mask)


@triton.jit
def _gate_bwd_sum_kernel(
    da_part_ptr,
    db_part_ptr,
    da_ptr,
    db_ptr,
    S,
    H,
    HK,
    n_db_blocks,
    HAS_A_LOG: tl.constexpr,
    HAS_DT_BIAS: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    # Programs [0, n_db_blocks): grad of dt_bias, one column block each; the rest: grad of A_log.
    pid = tl.program_id(0)
    if HAS_DT_BIAS:
        if pid < n_db_blocks:
            _column_sum(db_part_ptr, db_ptr, S, HK, pid, BLOCK_S, BLOCK_C)
    if HAS_A_LOG:
        if pid >= n_db_blocks:
            _column_sum(da_part_ptr, da_ptr, S, H, pid - n_db_blocks, BLOCK_S, BLOCK_C)


def _block_sizes(K, tile):
    block_k = min(next_power_of_2(K), _MAX_BLOCK_K)
    return max(tile // block_k, 1), block_k


_block_sizes_cached = functools.cache(_block_sizes)


def _blocks(K, tile):
    """(BLOCK_N, BLOCK_K) for heads of ``K`` columns and ``tile`` elements per step.

    Cached per ``K``; under tracing (gate is a triton_op, traced by torch.compile) ``K`` may be
    a SymInt, which cannot be a cache key and is computed with as it always was.
    """
    if type(K) is int:
        return _block_sizes_cached(K, tile)
    return _block_sizes(K, tile)


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
    block_n, block_k = _blocks(K, _FWD_TILE)
    k_blocks = cdiv(K, block_k)
    col_blocks = H * k_blocks
    launchable(_gate_fwd_kernel, out)[(cdiv(N, block_n) * col_blocks,)](
        g3,
        a_log,
        dt_b,
        out,
        N,
        K,
        col_blocks,
        k_blocks,
        s_n,
        s_h,
        s_k,
        HK,
        float(lower_bound),
        KIND=kind_id,
        HAS_A_LOG=A_log is not None,
        HAS_DT_BIAS=dt_bias is not None,
        G_UNIT_K=s_k == 1 and block_k >= 4,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        num_warps=_FWD_WARPS,
    )
    return out


def gate_bwd(
    g, A_log, dt_bias, grad_out, kind: str, lower_bound: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backward of ``gate``, with the parameter gradients already reduced over the leading dims.

    Two launches: the elementwise pass (``grad_g``, and fp32 partial sums of the parameter
    gradients per slab of rows), then the sum of the partials in a fixed order.

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
    has_a, has_b = A_log is not None, dt_bias is not None
    # An absent parameter, or an empty g, has an all-zero gradient; otherwise the sum kernel
    # writes every entry.
    if numel == 0 or not has_a:
        dA_log = g.new_zeros((H,), dtype=torch.float32)
    else:
        dA_log = g.new_empty((H,), dtype=torch.float32)
    if numel == 0 or not has_b:
        ddt_bias = g.new_zeros((HK,), dtype=torch.float32)
    else:
        ddt_bias = g.new_empty((HK,), dtype=torch.float32)
    if numel == 0:
        return dg, dA_log, ddt_bias

    N = numel // HK
    g3, s_gn, s_gh, s_gk = _rows(g, H, K)
    go3, s_on, s_oh, s_ok = _rows(grad_out, H, K)
    block_n, block_k = _blocks(K, _BWD_TILE)
    n_blocks = cdiv(N, block_n)
    n_iters = cdiv(n_blocks, cdiv(_BWD_TARGET_PROGRAMS, H))
    splits = cdiv(n_blocks, n_iters)

    a_log = _contiguous(A_log)
    dt_b = _contiguous(dt_bias)
    da_part = g.new_empty((splits, H), dtype=torch.float32) if has_a else None
    db_part = g.new_empty((splits, HK), dtype=torch.float32) if has_b else None
    launchable(_gate_bwd_kernel, dg)[(splits * H,)](
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
        HK,
        float(lower_bound),
        KIND=kind_id,
        HAS_A_LOG=has_a,
        HAS_DT_BIAS=has_b,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        NUM_STAGES=_BWD_STAGES,
        num_warps=_BWD_WARPS,
    )
    if has_a or has_b:
        n_db = cdiv(HK, _SUM_BLOCK_C) if has_b else 0
        n_da = cdiv(H, _SUM_BLOCK_C) if has_a else 0
        launchable(_gate_bwd_sum_kernel, dg)[(n_db + n_da,)](
            da_part,
            db_part,
            dA_log if has_a else None,
            ddt_bias if has_b else None,
            splits,
            H,
            HK,
            n_db,
            HAS_A_LOG=has_a,
            HAS_DT_BIAS=has_b,
            BLOCK_S=_SUM_BLOCK_S,
            BLOCK_C=_SUM_BLOCK_C,
            num_warps=_BWD_WARPS,
        )
    return dg, dA_log, ddt_bias
