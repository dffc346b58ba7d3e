"""chunk_gla's sequential backward kernels: one program per sequence, head and V block walking
every chunk with the state in registers. With packed sequences they do the work only where the
clamped offsets fall somewhere (flag != 0, set by _gla_fwd_g_kernel): the chunks and state slots
of different sequences may then overlap, which the chunk-parallel passes cannot handle; otherwise
those produce everything and these do nothing. Without packed sequences they always do the work
(chunk_gla_bwd_sequential, for comparisons). The forward's walk of the same kind is
_gla_fwd_fused_kernel (fwd.py)."""

import triton
import triton.language as tl

from .common import (
    _cast,
    _causal_decay,
    _chunk_decay,
    _chunk_tokens,
    _dot,
    _head_ptr,
    _load_state,
    _program_seq,
    _rows,
    _span,
    _state_offsets,
    _tile_offsets,
    _uncovered,
    _zero_uncovered,
)


@triton.jit
def _part_index(row, i_v, NTOK, H, i_h):
    # Row index of (V block i_v, token row, head i_h) in a per-V-block partial [NV, B, T, H, ...].
    return (row + i_v * NTOK) * H + i_h


@triton.jit
def _gla_bwd_dkv_kernel(
    q, k, v, g, do, dht, dk_part, dg_part, dv, dh0, cu, flag, scale, T, H, NTOK, q_st, k_st,
    v_st, g_st, do_st, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    BV: tl.constexpr, USE_CU: tl.constexpr, USE_DHT: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # dv, and the partial dk and dg of this V block, walking the chunks from the last; dh0.
    i_n, i_h, i_v, i_b, bos, eos, fallen = _program_seq(
        tl.program_id(0), cu, flag, T, H, USE_CU, USE_CU
    )
    DT = q.dtype.element_ty
    o_t, o_k, o_v, m_k, m_v = _tile_offsets(i_v, K, V, BT, BK, BV)
    # transposed causal mask: row j (key) <= column i (query)
    causal_t = o_t[:, None] <= o_t[None, :]
    strict_t = o_t[:, None] < o_t[None, :]

    p_q0 = _head_ptr(q, i_b, i_h, q_st, o_k)
    p_k0 = _head_ptr(k, i_b, i_h, k_st, o_k)
    p_v0 = _head_ptr(v, i_b, i_h, v_st, o_v)
    p_do0 = _head_ptr(do, i_b, i_h, do_st, o_v)
    p_g0 = g + i_b * g_st[0] + i_h * g_st[2]
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    if USE_CU:
        m_s = tl.where(fallen, m_s, False)
    b_ds = _load_state(dht, s_off, m_s, USE_DHT, BK, BV)

    NC = tl.cdiv(eos - bos, BT)
    for i_r in range(0, NC):
        t, m_t = _chunk_tokens(bos, eos, NC - 1 - i_r, o_t, BT)
        m_tk = m_t[:, None] & m_k[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_q = tl.load(p_q0 + t[:, None] * q_st[1], mask=m_tk, other=0.0)
        b_k = tl.load(p_k0 + t[:, None] * k_st[1], mask=m_tk, other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * v_st[1], mask=m_tv, other=0.0)
        b_do = tl.load(p_do0 + t[:, None] * do_st[1], mask=m_tv, other=0.0)
        b_G, b_C, b_GL, b_CL = _chunk_decay(p_g0, t, g_st[1], m_t, o_t, BT)

        # [j, i] = scale * exp(G_i - G_j) for j <= i
        b_Dt = _causal_decay(b_G, b_C, causal_t, True) * scale
        b_At = _dot(b_k, tl.trans(b_q), DT, MODE) * b_Dt
        b_W = _dot(b_v, tl.trans(b_do), DT, MODE)
        b_dAt = b_W * b_Dt
        b_dec = tl.exp(_span(b_GL, b_CL, b_G, b_C))

        b_kg = b_k.to(tl.float32) * b_dec[:, None]
        b_dv = _dot(b_At, b_do, DT, MODE) + _dot(b_kg, b_ds, DT, MODE)
        b_dk_inter = _dot(b_v, tl.trans(b_ds), DT, MODE) * b_dec[:, None]
        b_dk = _dot(b_dAt, b_q, DT, MODE) + b_dk_inter

        # dL/dG = q.dq - k.dk, with the in-chunk part taken pairwise: query t gains and key t
        # loses P[j, i] = A[i, j] * (do_i . v_j). The diagonal cancels exactly, which the
        # vector form would only do up to rounding (large error under strong decay).
        b_P = tl.where(strict_t, b_At * b_W, 0.0)
        b_dG = tl.sum(b_P, axis=0) - tl.sum(b_P, axis=1)
        b_dG -= tl.sum(b_k.to(tl.float32) * b_dk_inter, axis=1)

        row = i_b * T + t
        tl.store(dv + _rows(row, i_h, H, V, o_v), _cast(b_dv, dv.dtype.element_ty, MODE), mask=m_tv)
        p_dk = dk_part + _part_index(row[:, None], i_v, NTOK, H, i_h) * K + o_k[None, :]
        tl.store(p_dk, b_dk, mask=m_tk)
        tl.store(dg_part + _part_index(row, i_v, NTOK, H, i_h), b_dG, mask=m_t)

        b_qg = b_q.to(tl.float32) * (tl.exp(b_G) * scale)[:, None]
        b_ds = b_ds * tl.exp(b_GL) + _dot(tl.trans(b_qg), b_do, DT, MODE)

    tl.store(dh0 + s_off, b_ds, mask=m_s)
    if USE_CU:
        head, tail = _uncovered(i_n, bos, eos, T, H, fallen)
        _zero_uncovered(dv, head, tail, T, i_h, H, V, o_v, m_v, o_t, BT, BV)


@triton.jit
def _gla_bwd_dq_kernel(
    q, k, v, g, do, h0, dht, dq_part, dg_part, dhs_part, cu, flag, scale, T, H, N, NTOK, q_st,
    k_st, v_st, g_st, do_st, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, USE_CU: tl.constexpr, USE_H0: tl.constexpr,
    USE_DHT: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # The partial dq of this V block, its part of dg (added to the dkv kernel's), and
    # <dht, S_T> for dg, walking the chunks in order.
    i_n, i_h, i_v, i_b, bos, eos, fallen = _program_seq(
        tl.program_id(0), cu, flag, T, H, USE_CU, USE_CU
    )
    DT = k.dtype.element_ty
    o_t, o_k, o_v, m_k, m_v = _tile_offsets(i_v, K, V, BT, BK, BV)
    causal = o_t[:, None] >= o_t[None, :]

    p_q0 = _head_ptr(q, i_b, i_h, q_st, o_k)
    p_k0 = _head_ptr(k, i_b, i_h, k_st, o_k)
    p_v0 = _head_ptr(v, i_b, i_h, v_st, o_v)
    p_do0 = _head_ptr(do, i_b, i_h, do_st, o_v)
    p_g0 = g + i_b * g_st[0] + i_h * g_st[2]
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_s = _load_state(h0, s_off, m_s, USE_H0, BK, BV)

    NC = tl.cdiv(eos - bos, BT)
    for i_c in range(0, NC):
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        m_tk = m_t[:, None] & m_k[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_k = tl.load(p_k0 + t[:, None] * k_st[1], mask=m_tk, other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * v_st[1], mask=m_tv, other=0.0)
        b_do = tl.load(p_do0 + t[:, None] * do_st[1], mask=m_tv, other=0.0)
        b_G, b_C, b_GL, b_CL = _chunk_decay(p_g0, t, g_st[1], m_t, o_t, BT)

        b_D = _causal_decay(b_G, b_C, causal, False) * scale
        b_dA = _dot(b_do, tl.trans(b_v), DT, MODE) * b_D
        b_dq_inter = _dot(b_do, tl.trans(b_s), DT, MODE) * (tl.exp(b_G) * scale)[:, None]
        b_dq = _dot(b_dA, b_k, DT, MODE) + b_dq_inter

        row = i_b * T + t
        p_dq = dq_part + _part_index(row[:, None], i_v, NTOK, H, i_h) * K + o_k[None, :]
        tl.store(p_dq, b_dq, mask=m_tk)
        b_q = tl.load(p_q0 + t[:, None] * q_st[1], mask=m_tk, other=0.0).to(tl.float32)
        # same program (n, h, v-block) as the one in the dkv kernel that wrote this slot
        p_dg = dg_part + _part_index(row, i_v, NTOK, H, i_h)
        b_dG = tl.load(p_dg, mask=m_t, other=0.0) + tl.sum(b_q * b_dq_inter, axis=1)
        tl.store(p_dg, b_dG, mask=m_t)

        b_kg = b_k.to(tl.float32) * tl.exp(_span(b_GL, b_CL, b_G, b_C))[:, None]
        b_s = b_s * tl.exp(b_GL) + _dot(tl.trans(b_kg), b_v, DT, MODE)

    if USE_DHT:
        b_dht = tl.load(dht + s_off, mask=m_s, other=0.0).to(tl.float32)
        if MODE != 1:
            # <dht, S_T> largely cancels against k.dk, whose dot saw dht rounded to the input
            # dtype; round it the same way here so the cancellation is exact.
            b_dht = _cast(b_dht, DT, MODE).to(tl.float32)
        b_dhs = tl.sum(tl.sum(b_dht * b_s, axis=1), axis=0)
        tl.store(dhs_part + (i_v * N + i_n) * H + i_h, b_dhs)


@triton.jit
def _gla_bwd_dg_kernel(
    dq_part, dk_part, dg_part, dhs_part, dq, dk, dg, cu, flag, T, H, N, NTOK, K: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, NV: tl.constexpr, USE_CU: tl.constexpr,
    USE_DHT: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # dq, dk and dg from the V blocks' partials, walking the chunks from the last.
    i_n, i_h, _, i_b, bos, eos, fallen = _program_seq(
        tl.program_id(0), cu, flag, T, H, USE_CU, USE_CU
    )
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    m_k = o_k < K

    # dL/dG_T carries <dht, S_T>; the reverse cumsum spreads it over every token.
    b_carry = tl.zeros([], dtype=tl.float32)
    if USE_DHT:
        for i_v in tl.static_range(NV):
            b_carry += tl.load(dhs_part + (i_v * N + i_n) * H + i_h)

    NC = tl.cdiv(eos - bos, BT)
    for i_r in range(0, NC):
        t, m_t = _chunk_tokens(bos, eos, NC - 1 - i_r, o_t, BT)
        m_tk = m_t[:, None] & m_k[None, :]
        row = i_b * T + t
        o_out = _rows(row, i_h, H, K, o_k)
        b_dq = tl.zeros([BT, BK], dtype=tl.float32)
        b_dk = tl.zeros([BT, BK], dtype=tl.float32)
        b_dG = tl.zeros([BT], dtype=tl.float32)
        for i_v in tl.static_range(NV):
            o_part = _part_index(row[:, None], i_v, NTOK, H, i_h) * K + o_k[None, :]
            b_dq += tl.load(dq_part + o_part, mask=m_tk, other=0.0)
            b_dk += tl.load(dk_part + o_part, mask=m_tk, other=0.0)
            b_dG += tl.load(dg_part + _part_index(row, i_v, NTOK, H, i_h), mask=m_t, other=0.0)
        b_tot = tl.sum(b_dG, axis=0)
        b_dg = b_tot - tl.cumsum(b_dG, axis=0) + b_dG + b_carry
        b_carry += b_tot

        tl.store(dq + o_out, _cast(b_dq, dq.dtype.element_ty, MODE), mask=m_tk)
        tl.store(dk + o_out, _cast(b_dk, dk.dtype.element_ty, MODE), mask=m_tk)
        tl.store(dg + row * H + i_h, b_dg, mask=m_t)

    if USE_CU:
        head, tail = _uncovered(i_n, bos, eos, T, H, fallen)
        _zero_uncovered(dq, head, tail, T, i_h, H, K, o_k, m_k, o_t, BT, BK)
        _zero_uncovered(dk, head, tail, T, i_h, H, K, o_k, m_k, o_t, BT, BK)
        _zero_uncovered(dg, head, tail, T, i_h, H, 0, o_k, m_k, o_t, BT, BK)
