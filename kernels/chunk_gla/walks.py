"""chunk_gla's state walks: the forward one storing the state at the start of each chunk, the
reverse one storing the gradient of the state at the end of each chunk, both whole (one program
per sequence, head and state tile) or split into segments of chunks (_walk, STEP)."""

import triton
import triton.language as tl

from .common import (
    _chunk_tokens,
    _cumulative,
    _dot,
    _floored,
    _head_ptr,
    _head_ptr_t,
    _load_state,
    _seq_bounds,
    _span,
    _state_offsets,
    _stored_decay,
)


@triton.jit
def _state_tile(pid, H, NSEG, K, V, BK: tl.constexpr, BV: tl.constexpr):
    # Program pid of a grid over (sequence, head, segment, [BK, BV] state tile), tiles fastest:
    # (sequence, head, segment, tile, K offsets, V offsets, and their masks).
    NV = (V + BV - 1) // BV
    NKV = (K + BK - 1) // BK * NV
    i_kv = pid % NKV
    i_seg = (pid // NKV) % NSEG
    i_nh = pid // (NKV * NSEG)
    o_k = i_kv // NV * BK + tl.arange(0, BK)
    o_v = pid % NV * BV + tl.arange(0, BV)
    return i_nh // H, i_nh % H, i_seg, i_kv, o_k, o_v, o_k < K, o_v < V


@triton.jit
def _segment_decay(
    pid, g, gc, g_st, T, H, NT, CPS, NSEG, K, V, BT: tl.constexpr, BK: tl.constexpr,
    BV: tl.constexpr, CB: tl.constexpr,
):  # fmt: skip
    # Note [decay in the first step]: where the first step of a split walk runs in Triton, it
    # computes the in-chunk cumulative log-decay of its own segment's chunks from g itself and
    # stores it into gc as _gla_fwd_g_kernel would (the same floor and float64 sum along each
    # chunk, G then C), instead of a launch of that kernel before it: at B1 T8192 H4 that launch
    # took 2.7 us of a 37 us forward. Every program of a segment (each state tile, and both walks
    # of the backward's launch) writes the same values; a barrier then lets each program read
    # them back as the walk reads gc, and the later launches (the carry, the second step, the
    # output or gradients' passes) read them as they read the g kernel's. Blocks of CB chunks at
    # once, so that the sums are off the walk's chain. Equal-length sequences only.
    i_n, i_h, i_seg, _, _, _, _, _ = _state_tile(pid, H, NSEG, K, V, BK, BV)
    i_b = i_n.to(tl.int64)
    p_g = g + i_b * g_st[0] + i_h * g_st[2]
    p_gc = gc + (i_b * H + i_h) * (2 * T)
    c_lo = i_seg * CPS
    c_hi = tl.minimum(c_lo + CPS, NT)
    o_t = tl.arange(0, BT)
    for c0 in range(c_lo, c_hi, CB):
        # [BT, CB]: each column one chunk's tokens, summed down the column as the g kernel sums.
        o_c = c0 + tl.arange(0, CB)
        t = o_c.to(tl.int64)[None, :] * BT + o_t[:, None]
        m = (o_c < c_hi)[None, :] & (t < T)
        b_g = tl.load(p_g + t * g_st[1], mask=m, other=0.0).to(tl.float32)
        b_G, b_C = _cumulative(_floored(b_g))
        tl.store(p_gc + t, b_G, mask=m)
        tl.store(p_gc + T + t, b_C, mask=m)
    tl.debug_barrier()


@triton.jit
def _walk(
    pid, a, b, gc, s0, out, s_end, gseg, cu, scale, T, H, NT, CPS, NSEG, a_st, b_st,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_CU: tl.constexpr, USE_S0: tl.constexpr, STORE_END: tl.constexpr, STEP: tl.constexpr,
    REVERSE: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # Forward (a, b = k, v): the state S, from s0, is stored into out[slot] at the start of
    # each chunk, before the chunk is added. Reverse (a, b = q, do): the gradient of the state,
    # from s0 = dht, is stored into out[slot] at the end of each chunk, walking from the last,
    # then stepped to the chunk's start: dS <- exp(G_L) dS + scale * (q * exp(G))^T do. Only S
    # is carried from one chunk to the next, and the chunk's product does not depend on it.
    # STEP 0: the whole sequence (what is left at its end into s_end when STORE_END: the final
    # state, or the gradient of the initial state). For equal-length sequences split into NSEG
    # segments of CPS chunks: STEP 1 walks its segment from a zero state, storing only what is
    # left at the segment's end into s_end and its total log-decay into gseg; _gla_seg_carry_kernel
    # then carries those across segments; STEP 2 walks the segment again from that (s0), storing
    # into out[slot] as STEP 0 does. (Each segment is walked twice, but every walk is short: the
    # passes that read out need no change.)
    i_n, i_h, i_seg, i_kv, o_k, o_v, m_k, m_v = _state_tile(pid, H, NSEG, K, V, BK, BV)
    i_b, bos, eos = _seq_bounds(cu, i_n, T, USE_CU)
    if USE_CU:
        c0 = bos // BT + i_n
    else:
        c0 = i_n.to(tl.int64) * NT
    if STEP == 0:
        i_st = i_n
        c_lo = 0
        c_hi = tl.cdiv(eos - bos, BT)
    else:
        i_st = i_n * NSEG + i_seg
        c_lo = i_seg * CPS
        c_hi = tl.minimum(c_lo + CPS, NT)

    s_off, m_s = _state_offsets(i_st, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_s = _load_state(s0, s_off, m_s, USE_S0, BK, BV)
    p_a = _head_ptr_t(a, i_b, i_h, a_st, o_k)
    p_b = _head_ptr(b, i_b, i_h, b_st, o_v)
    p_g = gc + (i_b * H + i_h) * (2 * T)
    o_s = o_k[:, None] * V + o_v[None, :]
    DT = a.dtype.element_ty
    b_acc = tl.zeros((), dtype=tl.float32)
    for i_r in range(0, c_hi - c_lo):
        if REVERSE:
            i_c = c_hi - 1 - i_r
        else:
            i_c = c_lo + i_r
        if STEP != 1:
            p_out = out + ((c0 + i_c) * H + i_h) * (K * V) + o_s
            tl.store(p_out, b_s.to(out.dtype.element_ty), mask=m_s)
        # S <- exp(G_L) S + (a * w)^T b over the chunk's tokens, with w = exp(G_L - G) forward
        # and scale * exp(G) in reverse.
        t, m_t = _chunk_tokens(bos, eos, i_c, tl.arange(0, BT), BT)
        b_aT = tl.load(p_a + t[None, :] * a_st[1], mask=m_k[:, None] & m_t[None, :], other=0.0)
        b_b = tl.load(p_b + t[:, None] * b_st[1], mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_G, b_C, b_GL, b_CL = _stored_decay(p_g, t, m_t, bos, eos, i_c, T, BT)
        if REVERSE:
            b_w = tl.exp(b_G) * scale
        else:
            b_w = tl.exp(_span(b_GL, b_CL, b_G, b_C))
        b_s = b_s * tl.exp(b_GL) + _dot(b_aT.to(tl.float32) * b_w[None, :], b_b, DT, MODE)
        if STEP == 1:
            b_acc += b_GL

    if STORE_END:
        tl.store(s_end + s_off, b_s, mask=m_s)
    if STEP == 1:
        if i_kv == 0:
            tl.store(gseg + i_st * H + i_h, b_acc)


@triton.jit
def _gla_fwd_h_kernel(
    k, v, gc, h0, h, ht, cu, T, H, NT, k_st, v_st, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, USE_CU: tl.constexpr,
    USE_H0: tl.constexpr, STORE_HT: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # Grid (sequences x heads x state tiles,): the forward walk (_walk), h the chunk states.
    _walk(tl.program_id(0), k, v, gc, h0, h, ht, None, cu, 1.0, T, H, NT, 0, 1, k_st, v_st,
          K, V, BT, BK, BV, USE_CU, USE_H0, STORE_HT, 0, False, MODE)  # fmt: skip


@triton.jit
def _gla_bwd_dh_kernel(
    q, do, gc, dht, dh, dh0, cu, scale, T, H, NT, q_st, do_st, K: tl.constexpr,
    V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_CU: tl.constexpr, USE_DHT: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # Grid (sequences x heads x state tiles,): the reverse walk (_walk), dh the gradients of the
    # chunk end states, dh0 those of the initial states.
    _walk(tl.program_id(0), q, do, gc, dht, dh, dh0, None, cu, scale, T, H, NT, 0, 1, q_st,
          do_st, K, V, BT, BK, BV, USE_CU, USE_DHT, True, 0, True, MODE)  # fmt: skip


@triton.jit
def _gla_bwd_states_kernel(
    k, v, q, do, gc, h0, h, dht, dh, dh0, cu, scale, T, H, NT, NP, k_st, v_st, q_st, do_st,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_CU: tl.constexpr, USE_H0: tl.constexpr, USE_DHT: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    # The two walks of the backward in one launch, side by side: programs below NP (sequences x
    # heads x state tiles) recompute the chunk states h as _gla_fwd_h_kernel, the others the
    # gradients of the chunk end states dh as _gla_bwd_dh_kernel. Few sequences and heads leave
    # most of the GPU idle in either walk alone.
    pid = tl.program_id(0)
    if pid < NP:
        _walk(pid, k, v, gc, h0, h, h, None, cu, scale, T, H, NT, 0, 1, k_st, v_st,
              K, V, BT, BK, BV, USE_CU, USE_H0, False, 0, False, MODE)  # fmt: skip
    else:
        _walk(pid - NP, q, do, gc, dht, dh, dh0, None, cu, scale, T, H, NT, 0, 1, q_st, do_st,
              K, V, BT, BK, BV, USE_CU, USE_DHT, True, 0, True, MODE)  # fmt: skip


@triton.jit
def _gla_fwd_hseg_kernel(
    k, v, gc, h, hend, gseg, hstart, T, H, NT, CPS, NSEG, k_st, v_st, g, g_st,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    MODE: tl.constexpr, STEP: tl.constexpr, RAW_G: tl.constexpr,
):  # fmt: skip
    # Grid (sequences x heads x segments x state tiles,): the forward walk split into segments
    # (_walk STEP 1: each segment's own end state into hend; STEP 2: the chunk states from the
    # state at each segment's start, hstart). Equal-length sequences only. RAW_G (STEP 1): gc
    # from g first (Note [decay in the first step]).
    if RAW_G:
        _segment_decay(tl.program_id(0), g, gc, g_st, T, H, NT, CPS, NSEG, K, V, BT, BK, BV, 8)
    _walk(tl.program_id(0), k, v, gc, hstart, h, hend, gseg, None, 1.0, T, H, NT, CPS, NSEG,
          k_st, v_st, K, V, BT, BK, BV, False, STEP == 2, STEP == 1, STEP, False, MODE)  # fmt: skip


@triton.jit
def _gla_bwd_dhseg_kernel(
    q, do, gc, dh, dhown, gseg, dhend, scale, T, H, NT, CPS, NSEG, q_st, do_st, g, g_st,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    MODE: tl.constexpr, STEP: tl.constexpr, RAW_G: tl.constexpr,
):  # fmt: skip
    # The reverse walk split into segments as _gla_fwd_hseg_kernel splits the forward one
    # (STEP 1: each segment's own part of the gradient at its start into dhown; STEP 2: the
    # gradients of the chunk end states from that at each segment's end, dhend).
    if RAW_G:
        _segment_decay(tl.program_id(0), g, gc, g_st, T, H, NT, CPS, NSEG, K, V, BT, BK, BV, 8)
    _walk(tl.program_id(0), q, do, gc, dhend, dh, dhown, gseg, None, scale, T, H, NT, CPS, NSEG,
          q_st, do_st, K, V, BT, BK, BV, False, STEP == 2, STEP == 1, STEP, True, MODE)  # fmt: skip


@triton.jit
def _gla_bwd_states_seg_kernel(
    k, v, q, do, gc, h, hown, hgseg, hstart, dh, dhown, dhgseg, dhstart, scale, T, H, NT, CPS,
    NSEG, NPS, k_st, v_st, q_st, do_st, g, g_st, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, MODE: tl.constexpr,
    STEP: tl.constexpr, RAW_G: tl.constexpr,
):  # fmt: skip
    # The backward's two split walks side by side, one step of each per launch: programs below
    # NPS (sequences x heads x segments x state tiles) as _gla_fwd_hseg_kernel, the others as
    # _gla_bwd_dhseg_kernel. Split walks have few programs each, and a launch's length is that
    # of its longest program, so each step of the two costs about what one alone does. RAW_G
    # (STEP 1): gc from g first (Note [decay in the first step]).
    pid = tl.program_id(0)
    if RAW_G:
        _segment_decay(pid % NPS, g, gc, g_st, T, H, NT, CPS, NSEG, K, V, BT, BK, BV, 8)
    if pid < NPS:
        _walk(pid, k, v, gc, hstart, h, hown, hgseg, None, 1.0, T, H, NT, CPS, NSEG, k_st, v_st,
              K, V, BT, BK, BV, False, STEP == 2, STEP == 1, STEP, False, MODE)  # fmt: skip
    else:
        _walk(pid - NPS, q, do, gc, dhstart, dh, dhown, dhgseg, None, scale, T, H, NT, CPS, NSEG,
              q_st, do_st, K, V, BT, BK, BV, False, STEP == 2, STEP == 1, STEP, True,
              MODE)  # fmt: skip


@triton.jit
def _affine(a1, b1, a2, b2):
    # x -> a1 x + b1, then x -> a2 x + b2: the composition, for the carry's scan.
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _carry(
    pid, s0, own, gseg, start, s_end, H, NSEG, KV: tl.constexpr, BE: tl.constexpr,
    P: tl.constexpr, USE_S0: tl.constexpr, STORE_END: tl.constexpr, REVERSE: tl.constexpr,
    EVERY: tl.constexpr,
):  # fmt: skip
    # Program pid of a grid (sequences x heads x blocks of BE state elements,): between the two
    # steps of a split walk, the state (reverse: its gradient) at the start (reverse: the end) of
    # each segment, into start, from s0 (the initial state; reverse: dht) and the segments' own
    # parts and log-decays (STEP 1), last segment first in reverse; what is left after the last,
    # into s_end when STORE_END (the final state; reverse: the gradient of the initial state).
    # Forward, only every EVERY-th segment's start is stored, compact (cdiv(NSEG, EVERY) a
    # sequence): the starts of segments EVERY times longer, from a walk of finer ones.
    # Note [carry across segments]: each element's carry is its own recurrence x -> exp(g) x + own
    # over the segments, whose inputs do not depend on x; so every segment's part is loaded at
    # once (row r of a [P, BE] block holds the segment walked r-th, counting from one; row 0 and
    # the rows past NSEG the identity) and the compositions come from one scan, not a loop that
    # waits on memory at each segment (docs/performance.md, "The carry across segments").
    NB = (KV + BE - 1) // BE
    i_nh = pid // NB
    i_n = i_nh // H
    i_h = i_nh % H
    o_e = (pid % NB) * BE + tl.arange(0, BE)
    m_e = o_e < KV
    r = tl.arange(0, P)
    # Row r: the segment walked r-th (row 0: the identity); after the scan, the first r composed.
    m_r = (r >= 1) & (r <= NSEG)
    walked = r - 1
    if REVERSE:
        walked = NSEG - 1 - walked
    i_ns = tl.where(m_r, i_n * NSEG + walked, 0).to(tl.int64)
    p_own = own + (i_ns * H + i_h)[:, None] * KV + o_e[None, :]
    b = tl.load(p_own, mask=m_r[:, None] & m_e[None, :], other=0.0)
    a = tl.exp(tl.load(gseg + i_ns * H + i_h, mask=m_r, other=0.0))
    a, b = tl.associative_scan((tl.broadcast_to(a[:, None], (P, BE)), b), 0, _affine)
    if USE_S0:
        x0 = tl.load(s0 + (i_n.to(tl.int64) * H + i_h) * KV + o_e, mask=m_e, other=0.0)
        b = a * x0[None, :] + b
    # Row s is the start of the s-th segment walked (s < NSEG), row NSEG what is left after all.
    i_st = r
    if REVERSE:
        i_st = NSEG - 1 - r
    m_st = (r < NSEG) & (i_st % EVERY == 0)
    i_st = tl.where(m_st, i_n * ((NSEG + EVERY - 1) // EVERY) + i_st // EVERY, 0).to(tl.int64)
    p_st = start + (i_st * H + i_h)[:, None] * KV + o_e[None, :]
    tl.store(p_st, b, mask=m_st[:, None] & m_e[None, :])
    if STORE_END:
        x_end = tl.sum(tl.where((r == NSEG)[:, None], b, 0.0), axis=0)
        tl.store(s_end + (i_n.to(tl.int64) * H + i_h) * KV + o_e, x_end, mask=m_e)


@triton.jit
def _gla_seg_carry_kernel(
    s0, own, gseg, start, s_end, H, NSEG, KV: tl.constexpr, BE: tl.constexpr, P: tl.constexpr,
    USE_S0: tl.constexpr, STORE_END: tl.constexpr, REVERSE: tl.constexpr, EVERY: tl.constexpr,
):  # fmt: skip
    # Grid (sequences x heads x blocks of BE state elements,): one split walk's carry (_carry).
    _carry(tl.program_id(0), s0, own, gseg, start, s_end, H, NSEG, KV, BE, P, USE_S0,
           STORE_END, REVERSE, EVERY)  # fmt: skip


@triton.jit
def _gla_bwd_seg_carry_kernel(
    h0, hown, hgseg, hstart, dht, dhown, dhgseg, dhstart, dh0, H, NSEG, NP, KV: tl.constexpr,
    BE: tl.constexpr, P: tl.constexpr, USE_H0: tl.constexpr, USE_DHT: tl.constexpr,
):  # fmt: skip
    # The carries of the backward's two split walks side by side (_gla_bwd_states_seg_kernel):
    # programs below NP (sequences x heads x element blocks) carry the states forward, the
    # others their gradients backward, the last into dh0.
    pid = tl.program_id(0)
    if pid < NP:
        _carry(pid, h0, hown, hgseg, hstart, None, H, NSEG, KV, BE, P, USE_H0, False,
               False, 1)  # fmt: skip
    else:
        _carry(pid - NP, dht, dhown, dhgseg, dhstart, dh0, H, NSEG, KV, BE, P, USE_DHT, True,
               True, 1)  # fmt: skip
