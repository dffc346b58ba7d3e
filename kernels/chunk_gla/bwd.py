"""chunk_gla's backward kernels by chunk: dq, dk and dg (and dv where one K block covers K), and
dv, from the chunk states and the gradients of the chunk end states (walks.py)."""

import triton
import triton.language as tl

from .common import (
    _cast,
    _causal_decay,
    _chunk_tokens,
    _dot,
    _head_ptr,
    _head_ptr_t,
    _rows,
    _slot_chunk,
    _slot_uncovered,
    _span,
    _stored_decay,
    _zero_block,
)


@triton.jit
def _item(it, NXS, NX, PERSIST: tl.constexpr):
    # (block, state slot, head) of item it of a pass over NXS * H items, NX blocks a slot: from
    # it with PERSIST, else from the program's place in the grid (blocks x slots, H).
    if PERSIST:
        i_xs = it % NXS
        i_h = it // NXS
    else:
        i_xs = tl.program_id(0)
        i_h = tl.program_id(1)
    return i_xs % NX, i_xs // NX, i_h


@triton.jit
def _gla_bwd_dqk_kernel(
    q, k, v, gc, h, dh, do, dq, dk, dv, dg, dg_part, cu, flag, scale, T, H, N, NT, NTOK, NKS,
    q_st, k_st, v_st, do_st, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, USE_CU: tl.constexpr, FUSE_DV: tl.constexpr,
    MODE: tl.constexpr, PERSIST: tl.constexpr,
):  # fmt: skip
    # An item is K block i_k of state slot i_s, head i_h: one program per item, grid (K blocks x
    # slots, H); or, with PERSIST, a fixed number of programs that take the NKS * H items in
    # turn (item it: K block and slot it % NKS, head it // NKS), so that the compiler pipelines
    # the next item's loads behind this item's products (Note [persistent passes]).
    # An item computes one chunk's [BT, BK] blocks of dq and dk from the state at its start
    # h[slot], the gradient of the state at its end dh[slot] and the in-chunk attention, walking
    # the V blocks; and the chunk's part of dg from this K block (into dg itself when there is one
    # K block, else into dg_part[K block], summed by _gla_bwd_dv_kernel).
    #
    # With G the in-chunk cumulative log-decay (G_L at the chunk's last token), a token's g
    # enters G_s for every later token s of its chunk, and G_L; dL/dG_s = q_s.dq_s - k_s.dk_s,
    # and G_L also carries sum_s k_s.dk'_s + exp(G_L) <h, dh> (dk' the part of dk through dh,
    # which holds exp(G_L - G_s)). So
    #   dg_t = sum_{s >= t} (q_s.dq_s - k_s.dk''_s) + sum_{s < t} k_s.dk'_s + exp(G_L) <h, dh>
    # (dk'' the in-chunk part of dk), which never subtracts the large terms through dh.
    #
    # FUSE_DV (one K block, BK >= K): the item also computes the chunk's dv, one V block per
    # step of its walk, as _gla_bwd_dv_kernel does: dv = (scale * exp(G_i - G_j) q_i.k_j)^T do
    # + (k * exp(G_L - G)) dh. q, k and the in-chunk attention are then loaded and formed once
    # before the walk, and q, k, do and dh are read once for all four gradients.
    NK: tl.constexpr = (K + BK - 1) // BK
    tl.static_assert(not FUSE_DV or NK == 1)
    DT = q.dtype.element_ty
    o_t = tl.arange(0, BT)
    if PERSIST:
        lo, hi, step = tl.program_id(0), NKS * H, tl.num_programs(0)
    else:
        lo, hi, step = 0, 1, 1
    for it in tl.range(lo, hi, step):
        i_k, i_s, i_h = _item(it, NKS, NK, PERSIST)
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        i_b, bos, eos, i_c, live, ordered = _slot_chunk(cu, flag, i_s, T, N, NT, BT, USE_CU)
        if USE_CU:
            r, m_z = _slot_uncovered(cu, ordered, i_s, N, T, o_t, BT)
            _zero_block(dq, r, m_z, i_h, H, K, o_k, m_k, BT, BK)
            _zero_block(dk, r, m_z, i_h, H, K, o_k, m_k, BT, BK)
            if i_k == 0:
                tl.store(dg + r * H + i_h, tl.zeros([BT], dtype=tl.float32), mask=m_z)
            if FUSE_DV:
                for i_z in tl.static_range(0, (V + BV - 1) // BV):
                    o_zv = i_z * BV + tl.arange(0, BV)
                    _zero_block(dv, r, m_z, i_h, H, V, o_zv, o_zv < V, BT, BV)

        if live:
            t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
            p_g0 = gc + (i_b * H + i_h) * (2 * T)
            b_G, b_C, b_GL, b_CL = _stored_decay(p_g0, t, m_t, bos, eos, i_c, T, BT)
            p_s = (i_s.to(tl.int64) * H + i_h) * (K * V) + o_k[:, None] * V
            p_q = _head_ptr(q, i_b, i_h, q_st, o_k) + t[:, None] * q_st[1]
            p_k = _head_ptr(k, i_b, i_h, k_st, o_k) + t[:, None] * k_st[1]
            m_tk = m_t[:, None] & m_k[None, :]
            row = i_b * T + t
            # [i, j] = scale * exp(G_i - G_j) for tokens j <= i of the sequence (no padding:
            # there G is 0 and the exponent unbounded)
            both = m_t[:, None] & m_t[None, :]
            causal = (o_t[:, None] >= o_t[None, :]) & both
            # q and k are loaded before the V walk even where they are used only after it:
            # their loads are then in flight behind the walk's (docs/performance.md).
            b_q = tl.load(p_q, mask=m_tk, other=0.0)
            b_k = tl.load(p_k, mask=m_tk, other=0.0)
            if FUSE_DV:
                b_qk = _dot(b_q, tl.trans(b_k), DT, MODE)
                b_D = _causal_decay(b_G, b_C, causal, False) * scale
                b_AtD = _cast(tl.trans(b_qk * b_D), DT, MODE)
                b_dec = tl.where(m_t, tl.exp(_span(b_GL, b_CL, b_G, b_C)), 0.0)
                b_kd = _cast(b_k.to(tl.float32) * b_dec[:, None], DT, MODE)
            b_dA = tl.zeros([BT, BT], dtype=tl.float32)
            b_dqs = tl.zeros([BT, BK], dtype=tl.float32)
            b_dks = tl.zeros([BT, BK], dtype=tl.float32)
            b_hdh = tl.zeros([BK], dtype=tl.float32)
            for i_v in range(0, (V + BV - 1) // BV):
                o_v = i_v * BV + tl.arange(0, BV)
                m_v = o_v < V
                m_tv = m_t[:, None] & m_v[None, :]
                m_s = m_k[:, None] & m_v[None, :]
                p_v = _head_ptr(v, i_b, i_h, v_st, o_v) + t[:, None] * v_st[1]
                p_do = _head_ptr(do, i_b, i_h, do_st, o_v) + t[:, None] * do_st[1]
                b_v = tl.load(p_v, mask=m_tv, other=0.0)
                b_do = tl.load(p_do, mask=m_tv, other=0.0)
                b_h = tl.load(h + p_s + o_v[None, :], mask=m_s, other=0.0)
                b_dh = tl.load(dh + p_s + o_v[None, :], mask=m_s, other=0.0)
                b_dA += _dot(b_do, tl.trans(b_v), DT, MODE)
                b_dqs += _dot(b_do, tl.trans(b_h), DT, MODE)
                b_dks += _dot(b_v, tl.trans(b_dh), DT, MODE)
                b_hdh += tl.sum(b_h.to(tl.float32) * b_dh.to(tl.float32), axis=1)
                if FUSE_DV:
                    b_dv = _dot(b_AtD, b_do, DT, MODE) + _dot(b_kd, b_dh, DT, MODE)
                    p_dv = dv + _rows(row, i_h, H, V, o_v)
                    tl.store(p_dv, _cast(b_dv, dv.dtype.element_ty, MODE), mask=m_tv)

            if not FUSE_DV:
                b_qk = _dot(b_q, tl.trans(b_k), DT, MODE)
                b_D = _causal_decay(b_G, b_C, causal, False) * scale
            b_dA = b_dA * b_D
            b_dqs = b_dqs * (tl.exp(b_G) * scale)[:, None]
            b_dks = b_dks * tl.where(m_t, tl.exp(_span(b_GL, b_CL, b_G, b_C)), 0.0)[:, None]
            b_dq = _dot(b_dA, b_k, DT, MODE) + b_dqs
            b_dk = _dot(tl.trans(b_dA), b_q, DT, MODE) + b_dks

            # In-chunk part of q.dq - k.dk taken pairwise: query i gains and key j loses
            # P[i, j] = dA[i, j] * (q_i . k_j); the diagonal cancels exactly.
            strict = (o_t[:, None] > o_t[None, :]) & both
            b_P = tl.where(strict, b_dA * b_qk, 0.0)
            b_gq = tl.sum(b_P, axis=1) - tl.sum(b_P, axis=0)
            b_gq += tl.sum(b_q.to(tl.float32) * b_dqs, axis=1)
            b_gk = tl.sum(b_k.to(tl.float32) * b_dks, axis=1)
            b_last = tl.sum(b_hdh, axis=0) * tl.exp(b_GL)
            b_dg = tl.sum(b_gq, axis=0) - tl.cumsum(b_gq, axis=0) + b_gq
            b_dg = b_dg + tl.cumsum(b_gk, axis=0) - b_gk + b_last

            p_out = _rows(row, i_h, H, K, o_k)
            tl.store(dq + p_out, _cast(b_dq, dq.dtype.element_ty, MODE), mask=m_tk)
            tl.store(dk + p_out, _cast(b_dk, dk.dtype.element_ty, MODE), mask=m_tk)
            if NK == 1:
                tl.store(dg + row * H + i_h, b_dg, mask=m_t)
            else:
                tl.store(dg_part + (i_k * NTOK + row) * H + i_h, b_dg, mask=m_t)


@triton.jit
def _gla_bwd_dv_kernel(
    q, k, gc, dh, do, dv, dg, dg_part, cu, flag, scale, T, H, N, NT, NTOK, NVS, q_st, k_st,
    do_st, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    BV: tl.constexpr, NKG: tl.constexpr, USE_CU: tl.constexpr, MODE: tl.constexpr,
    PERSIST: tl.constexpr,
):  # fmt: skip
    # An item is V block i_v of state slot i_s, head i_h: one program per item, grid (V blocks x
    # slots, H); or, with PERSIST, a fixed number of programs that take the NVS * H items in
    # turn, as in _gla_bwd_dqk_kernel. An item computes one chunk's [BT, BV] block of
    # dv = (scale * exp(G_i - G_j) q_i.k_j)^T do + (k * exp(G_L - G)) dh[slot], walking the K
    # blocks; the items of the first V block also sum the NKG partial dg of _gla_bwd_dqk_kernel
    # when there are several.
    NV: tl.constexpr = (V + BV - 1) // BV
    DT = q.dtype.element_ty
    o_t = tl.arange(0, BT)
    if PERSIST:
        lo, hi, step = tl.program_id(0), NVS * H, tl.num_programs(0)
    else:
        lo, hi, step = 0, 1, 1
    for it in tl.range(lo, hi, step):
        i_v, i_s, i_h = _item(it, NVS, NV, PERSIST)
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = o_v < V
        i_b, bos, eos, i_c, live, ordered = _slot_chunk(cu, flag, i_s, T, N, NT, BT, USE_CU)
        if USE_CU:
            r, m_z = _slot_uncovered(cu, ordered, i_s, N, T, o_t, BT)
            _zero_block(dv, r, m_z, i_h, H, V, o_v, m_v, BT, BV)

        if live:
            t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
            p_g0 = gc + (i_b * H + i_h) * (2 * T)
            b_G, b_C, b_GL, b_CL = _stored_decay(p_g0, t, m_t, bos, eos, i_c, T, BT)
            b_dec = tl.where(m_t, tl.exp(_span(b_GL, b_CL, b_G, b_C)), 0.0)
            p_s = (i_s.to(tl.int64) * H + i_h) * (K * V) + o_v[None, :]
            b_At = tl.zeros([BT, BT], dtype=tl.float32)
            b_dv = tl.zeros([BT, BV], dtype=tl.float32)
            for i_k in range(0, (K + BK - 1) // BK):
                o_k = i_k * BK + tl.arange(0, BK)
                m_k = o_k < K
                p_qT = _head_ptr_t(q, i_b, i_h, q_st, o_k) + t[None, :] * q_st[1]
                p_k = _head_ptr(k, i_b, i_h, k_st, o_k) + t[:, None] * k_st[1]
                b_qT = tl.load(p_qT, mask=m_k[:, None] & m_t[None, :], other=0.0)
                b_k = tl.load(p_k, mask=m_t[:, None] & m_k[None, :], other=0.0)
                m_kv = m_k[:, None] & m_v[None, :]
                b_dh = tl.load(dh + p_s + o_k[:, None] * V, mask=m_kv, other=0.0)
                b_At += _dot(b_k, b_qT, DT, MODE)
                b_kg = b_k.to(tl.float32) * b_dec[:, None]
                b_dv += _dot(b_kg, b_dh, DT, MODE)

            # [j, i] = scale * exp(G_i - G_j) for tokens j <= i of the sequence
            both = m_t[:, None] & m_t[None, :]
            causal_t = (o_t[:, None] <= o_t[None, :]) & both
            b_Dt = _causal_decay(b_G, b_C, causal_t, True) * scale
            p_do = _head_ptr(do, i_b, i_h, do_st, o_v) + t[:, None] * do_st[1]
            m_tv = m_t[:, None] & m_v[None, :]
            b_do = tl.load(p_do, mask=m_tv, other=0.0)
            b_dv += _dot(b_At * b_Dt, b_do, DT, MODE)
            row = i_b * T + t
            p_dv = dv + _rows(row, i_h, H, V, o_v)
            tl.store(p_dv, _cast(b_dv, dv.dtype.element_ty, MODE), mask=m_tv)

            if NKG > 1:
                if i_v == 0:
                    b_dg = tl.zeros([BT], dtype=tl.float32)
                    for i_p in tl.static_range(NKG):
                        p_dg = dg_part + (i_p * NTOK + row) * H + i_h
                        b_dg += tl.load(p_dg, mask=m_t, other=0.0)
                    tl.store(dg + row * H + i_h, b_dg, mask=m_t)
