import functools

import triton
import triton.language as tl
from torch import Tensor

from .._triton import cdiv, launchable, next_power_of_2


@triton.jit
def _recurrent_gla_step_kernel(
    s_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    o_ptr,
    scale,
    H,
    K,
    V,
    s_sb,
    s_sh,
    s_sk,
    s_sv,
    q_sb,
    q_sh,
    q_sk,
    k_sb,
    k_sh,
    k_sk,
    v_sb,
    v_sh,
    v_sv,
    g_sb,
    g_sh,
    o_sb,
    o_sh,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    pid_bh = tl.program_id(0).to(tl.int64)
    pid_v = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H

    offs_k = tl.arange(0, BK)
    offs_v = pid_v * BV + tl.arange(0, BV)
    mask_k = offs_k < K
    mask_v = offs_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]

    s_ptrs = s_ptr + b * s_sb + h * s_sh + offs_k[:, None] * s_sk + offs_v[None, :] * s_sv
    s = tl.load(s_ptrs, mask=mask_kv, other=0.0).to(tl.float32)
    q = tl.load(q_ptr + b * q_sb + h * q_sh + offs_k * q_sk, mask=mask_k, other=0.0).to(tl.float32)
    k = tl.load(k_ptr + b * k_sb + h * k_sh + offs_k * k_sk, mask=mask_k, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + b * v_sb + h * v_sh + offs_v * v_sv, mask=mask_v, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + b * g_sb + h * g_sh).to(tl.float32)

    # Rank-1 update and q @ S as broadcast-reduce (no tl.dot): exact fp32, and one query row
    # is far below tl.dot's minimum tile size anyway.
    s = tl.exp(g) * s + k[:, None] * v[None, :]
    tl.store(s_ptrs, s, mask=mask_kv)
    o = tl.sum(q[:, None] * s, axis=0) * scale
    tl.store(
        o_ptr + b * o_sb + h * o_sh + offs_v,
        o.to(o_ptr.dtype.element_ty),
        mask=mask_v,
    )


@functools.cache
def _blocks(K: int, V: int) -> tuple[int, int, int]:
    """(BK, BV, number of V blocks) for a launch."""
    BK = max(16, next_power_of_2(K))
    # Keep the fp32 state tile at <= 4096 elements per program (register budget on GPU).
    BV = max(16, min(next_power_of_2(V), 4096 // BK))
    return BK, BV, cdiv(V, BV)


def recurrent_gla_step(state, q, k, v, g, scale: float) -> Tensor:
    """One decode step of gated linear attention, updating ``state`` in place.

    Per batch and head: ``state <- exp(g) * state + k^T v``, then
    ``output = scale * q @ state`` with the updated state.

    Args:
        state: ``[B, H, K, V]`` float32, any strides. **Mutated**: overwritten with the new state.
        q: ``[B, H, K]``, bfloat16, float16 or float32, any strides.
        k: ``[B, H, K]``, ``q``'s dtype.
        v: ``[B, H, V]``, ``q``'s dtype.
        g: ``[B, H]`` float32, the log-decay (``<= 0`` in practice).
        scale: multiplies the output.

    Returns:
        ``output``: ``[B, H, V]`` in ``q``'s dtype, newly allocated and contiguous; computed in
        float32 from the updated state.

    One program holds a whole ``K`` (``next_power_of_2(K)``, at least 16) against a V block of at
    most ``4096 // BK`` (at least 16) columns, so very large ``K`` costs registers.
    """
    B, H, K, V = state.shape
    o = q.new_empty((B, H, V))
    if B * H * V == 0:
        return o
    BK, BV, NV = _blocks(K, V)
    launchable(_recurrent_gla_step_kernel, o)[(B * H, NV)](
        state,
        q,
        k,
        v,
        g,
        o,
        float(scale),
        H,
        K,
        V,
        *state.stride(),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *g.stride(),
        H * V,  # o is new and contiguous: strides (H * V, V, 1)
        V,
        BK=BK,
        BV=BV,
        num_warps=4,
    )
    return o
