"""chunk_gla's forward kernels: the cumulative log-decay by chunk (which the backward launches
too) and the output by chunk from the chunk states (the state walk that stores them is in
walks.py), or the whole forward in one walk of each sequence."""

import triton
import triton.language as tl

from .common import (
    _cast,
    _causal_decay,
    _chunk_decay,
    _chunk_tokens,
    _cumulative,
    _descents,
    _dot,
    _floored,
    _head_ptr,
    _head_ptr_t,
    _load_state,
    _program_seq,
    _rows,
    _slot_chunk,
    _slot_owner,
    _slot_uncovered,
    _span,
    _state_offsets,
    _tile_offsets,
    _uncovered,
    _zero_block,
    _zero_uncovered,
)


@triton.jit
def _gla_fwd_g_kernel(
    g, gc, cu, flag, T, H, N, NT, g_st, BT: tl.constexpr, BH: tl.constexpr, USE_CU: tl.constexpr
):
    # Grid (state slots, head blocks). gc[b, h, 0, t] (contiguous [B, H, 2, T]) gets the
    # cumulative log-decay of token t within its chunk, chunks starting at each sequence's first
    # token, for every token that a sequence covers, and gc[b, h, 1, t] its compensation (Note
    # [log-decay floor]); with packed sequences the first program also records in flag whether
    # the offsets ever fall.
    i_s = tl.program_id(0)
    i_hb = tl.program_id(1)
    if USE_CU:
        if (i_s == 0) & (i_hb == 0):
            tl.store(flag, _descents(cu, N, T, 1024))
        i_b, bos, eos, i_c, live = _slot_owner(cu, i_s, N, T, BT)
    else:
        i_b = (i_s // NT).to(tl.int64)
        i_c = i_s % NT
        bos = i_b * 0
        eos = bos + T
        live = True

    if live:
        o_h = i_hb * BH + tl.arange(0, BH)
        t, m_t = _chunk_tokens(bos, eos, i_c, tl.arange(0, BT), BT)
        m = m_t[:, None] & (o_h < H)[None, :]
        p_g = g + i_b * g_st[0] + t[:, None] * g_st[1] + o_h[None, :] * g_st[2]
        b_g = _floored(tl.load(p_g, mask=m, other=0.0).to(tl.float32))
        p_gc = gc + (i_b * H + o_h[None, :]) * (2 * T) + t[:, None]
        b_G, b_C = _cumulative(b_g)
        tl.store(p_gc, b_G, mask=m)
        tl.store(p_gc + T, b_C, mask=m)


@triton.jit
def _gla_fwd_o_kernel(
    q, k, v, gc, h, o, cu, flag, scale, T, H, N, NT, q_st, k_st, v_st,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_CU: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # Grid (V blocks x state slots, H), V blocks fastest so that the programs of a chunk, which
    # read the same q and k, run side by side. Each program computes one chunk's [BT, BV] output
    # from the state at the chunk's start, h[slot], and the causal in-chunk attention. Offsets
    # that fall somewhere are left to _gla_fwd_fused_kernel, which reads flag likewise.
    NV = (V + BV - 1) // BV
    DT = q.dtype.element_ty
    i_v = tl.program_id(0) % NV
    i_s = tl.program_id(0) // NV
    i_h = tl.program_id(1)
    o_t = tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    i_b, bos, eos, i_c, live, ordered = _slot_chunk(cu, flag, i_s, T, N, NT, BT, USE_CU)
    if USE_CU:
        r, m_z = _slot_uncovered(cu, ordered, i_s, N, T, o_t, BT)
        _zero_block(o, r, m_z, i_h, H, V, o_v, m_v, BT, BV)

    if live:
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        p_g0 = gc + (i_b * H + i_h) * (2 * T)
        b_G = tl.load(p_g0 + t, mask=m_t, other=0.0)
        b_C = tl.load(p_g0 + T + t, mask=m_t, other=0.0)
        p_v = _head_ptr(v, i_b, i_h, v_st, o_v) + t[:, None] * v_st[1]
        b_v = tl.load(p_v, mask=m_t[:, None] & m_v[None, :], other=0.0)
        p_h = h + (i_s.to(tl.int64) * H + i_h) * (K * V) + o_v[None, :]
        b_o = tl.zeros([BT, BV], dtype=tl.float32)
        b_A = tl.zeros([BT, BT], dtype=tl.float32)
        for i_k in range(0, (K + BK - 1) // BK):
            o_k = i_k * BK + tl.arange(0, BK)
            m_k = o_k < K
            p_q = _head_ptr(q, i_b, i_h, q_st, o_k) + t[:, None] * q_st[1]
            p_k = _head_ptr_t(k, i_b, i_h, k_st, o_k) + t[None, :] * k_st[1]
            b_q = tl.load(p_q, mask=m_t[:, None] & m_k[None, :], other=0.0)
            b_kT = tl.load(p_k, mask=m_k[:, None] & m_t[None, :], other=0.0)
            m_kv = m_k[:, None] & m_v[None, :]
            b_h = tl.load(p_h + o_k[:, None] * V, mask=m_kv, other=0.0)
            b_o += _dot(b_q, b_h, DT, MODE)
            b_A += _dot(b_q, b_kT, DT, MODE)

        b_D = _causal_decay(b_G, b_C, o_t[:, None] >= o_t[None, :], False)
        b_A = b_A * b_D * scale
        b_o = b_o * (tl.exp(b_G) * scale)[:, None] + _dot(b_A, b_v, DT, MODE)
        p_o = o + _rows(i_b * T + t, i_h, H, V, o_v)
        tl.store(p_o, _cast(b_o, o.dtype.element_ty, MODE), mask=m_t[:, None] & m_v[None, :])


@triton.jit
def _gla_fwd_fused_kernel(
    q, k, v, g, s0, h, o, ht, cu, flag, scale, T, H, NT, CPS, NSEG, q_st, k_st, v_st, g_st,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_CU: tl.constexpr, FALLEN_ONLY: tl.constexpr, USE_S0: tl.constexpr,
    STORE_H: tl.constexpr, STORE_HT: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # The forward in one walk. Grid (sequences x heads x segments, V blocks): each program walks
    # the chunks of its segment in order with the state in registers, from s0 (the initial
    # state; with segments, equal-length sequences only, the state at the segment's start),
    # and writes each chunk's [BT, BV] output from the state at the chunk's start and the
    # causal in-chunk attention; with STORE_H that state into h[slot] too. Packed sequences are
    # walked whole whatever their offsets, and tokens outside every sequence get zeros; with
    # FALLEN_ONLY the programs do nothing unless the offsets fall somewhere (flag, set by
    # _gla_fwd_g_kernel), behind the chunk-parallel passes that produced everything else.
    i_seg = tl.program_id(0) % NSEG
    i_n, i_h, i_v, i_b, bos, eos, fallen = _program_seq(
        tl.program_id(0) // NSEG, cu, flag, T, H, USE_CU, FALLEN_ONLY
    )
    if USE_CU:
        c0 = bos // BT + i_n
        c_lo = 0
        c_hi = tl.cdiv(eos - bos, BT)
    else:
        c0 = i_n.to(tl.int64) * NT
        c_lo = i_seg * CPS
        c_hi = tl.minimum(c_lo + CPS, NT)
    DT = q.dtype.element_ty
    o_t, o_k, o_v, m_k, m_v = _tile_offsets(i_v, K, V, BT, BK, BV)
    causal = o_t[:, None] >= o_t[None, :]
    p_q0 = _head_ptr(q, i_b, i_h, q_st, o_k)
    p_k0 = _head_ptr(k, i_b, i_h, k_st, o_k)
    p_v0 = _head_ptr(v, i_b, i_h, v_st, o_v)
    p_g0 = g + i_b * g_st[0] + i_h * g_st[2]
    s_off, m_s = _state_offsets(i_n * NSEG + i_seg, i_h, H, K, V, o_k, o_v, m_k, m_v)
    m_s = tl.where(fallen, m_s, False)
    b_s = _load_state(s0, s_off, m_s, USE_S0, BK, BV)
    o_s = o_k[:, None] * V + o_v[None, :]

    for i_c in range(c_lo, c_hi):
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        b_q = tl.load(p_q0 + t[:, None] * q_st[1], mask=m_t[:, None] & m_k[None, :], other=0.0)
        b_k = tl.load(p_k0 + t[:, None] * k_st[1], mask=m_t[:, None] & m_k[None, :], other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * v_st[1], mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_G, b_C, b_GL, b_CL = _chunk_decay(p_g0, t, g_st[1], m_t, o_t, BT)
        if STORE_H:
            p_h = h + ((c0 + i_c) * H + i_h) * (K * V) + o_s
            tl.store(p_h, b_s.to(h.dtype.element_ty), mask=m_s)

        b_A = _dot(b_q, tl.trans(b_k), DT, MODE) * _causal_decay(b_G, b_C, causal, False)
        b_o = _dot(b_q, b_s, DT, MODE) * tl.exp(b_G)[:, None] + _dot(b_A, b_v, DT, MODE)
        p_o = o + _rows(i_b * T + t, i_h, H, V, o_v)
        b_o = _cast(b_o * scale, o.dtype.element_ty, MODE)
        tl.store(p_o, b_o, mask=m_t[:, None] & m_v[None, :])

        b_kg = b_k.to(tl.float32) * tl.exp(_span(b_GL, b_CL, b_G, b_C))[:, None]
        b_s = b_s * tl.exp(b_GL) + _dot(tl.trans(b_kg), b_v, DT, MODE)

    if STORE_HT:
        tl.store(ht + s_off, b_s, mask=m_s)
    if USE_CU:
        head, tail = _uncovered(i_n, bos, eos, T, H, fallen)
        _zero_uncovered(o, head, tail, T, i_h, H, V, o_v, m_v, o_t, BT, BV)
