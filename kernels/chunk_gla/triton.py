import functools
import math

import torch
import triton
import triton.language as tl

from .._triton import cdiv, launchable, next_power_of_2

_BT = 64
_BH = 16  # heads per program of the forward's cumulative-decay pass
_MAX_K = 256
# Note [log-decay floor]: every pass reads g through _floored, which raises a log-decay below
# _G_FLOOR to it. Any g <= -104 already gives exp(g) == 0 in float32 (below half the smallest
# subnormal, 2**-150), so for log-decays in the declared domain [-inf, 0] the floor changes no
# decay: the decay over a range of tokens that holds a floored one is exp(sum of its g) with
# every other g <= 0, so exp(<= _G_FLOOR) == 0 before and after. What the floor prevents is
# what the in-chunk cumulative log-decay G does with such values: g = -inf makes
# G_i - G_j = -inf - (-inf) = NaN for two tokens after it, and a large finite g (-1e4, -1e10)
# leaves G_i - G_j for those tokens as the difference of two numbers of that size, whose
# rounding (an ulp of 1e10 is 1024) makes the decay between them anything from 0 to inf.
# Floored, every G within a chunk stays above 64 * _G_FLOOR = -7040. That is still far from
# small: after a run of 40 floored tokens G is near -4400, where a float32 ulp is 4.9e-4, and a
# float32 cumulative sum rounds every later g to it, so the decays between the later ordinary
# tokens of the chunk came out up to 8e-4 wrong (so did a run of g = -100, which is no reset).
# So G is summed in float64 and kept as two float32 numbers, G (the nearest float32) and C
# (what G leaves out, at most half an ulp of G), and every difference is taken as
# (G_i - G_j) + (C_i - C_j) (_span): where the decay is not 0 the two G are within 104 of each
# other, so their difference is exact or small, and the result is right to about 1e-6 wherever
# the chunk's G lies. A decay from the chunk's start, exp(G), needs no C: where it is not 0,
# G is small. A NaN g stays NaN. dg is assembled from the decays, as if nothing were floored: at
# a token whose decay is 0 it is 0 up to rounding, as the reference's exp(g) * (...) is. The
# cost is one compare and select per token and head where g is read, a float64 cumulative sum
# per chunk, a second float32 row per chunk where G is stored and read, and two more additions
# per element of the in-chunk decay matrix; none in the inner products.
_G_FLOOR = tl.constexpr(-110.0)


# MODE 0: dot operands rounded to the 16-bit input dtype (tensor cores), fp32 accumulation.
# MODE 1: fp32 inputs, exact fp32 products.
# MODE 2: bf16 under the interpreter, which multiplies raw bf16 bits in tl.dot and truncates
# fp32 -> bf16 casts; emulates MODE 0 with explicit round-to-nearest-even and fp32 dots.


@triton.jit
def _rne_bf16(x):
    b = x.to(tl.uint32, bitcast=True)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.to(tl.float32, bitcast=True)


@triton.jit
def _cast(x, DT: tl.constexpr, MODE: tl.constexpr):
    if MODE == 2:
        r = _rne_bf16(x.to(tl.float32)).to(DT)
    else:
        r = x.to(DT)
    return r


@triton.jit
def _dot(a, b, DT: tl.constexpr, MODE: tl.constexpr):
    if MODE == 1:
        r = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    elif MODE == 2:
        a = _rne_bf16(a.to(tl.float32))
        b = _rne_bf16(b.to(tl.float32))
        r = tl.dot(a, b, input_precision="ieee")
    else:
        r = tl.dot(a.to(DT), b.to(DT))
    return r


@triton.jit
def _seq_bounds(cu, i_n, T, USE_CU: tl.constexpr):
    # (batch row, first token, end token) of sequence i_n: packed sequences share batch row 0.
    # Offsets are clamped so that 0 <= bos <= eos <= T whatever cu holds: every token index a
    # program touches then lies inside the tensors (valid offsets are unchanged).
    if USE_CU:
        i_b = (i_n * 0).to(tl.int64)
        bos = tl.load(cu + i_n).to(tl.int64)
        eos = tl.load(cu + i_n + 1).to(tl.int64)
        bos = tl.minimum(tl.maximum(bos, 0), T)
        eos = tl.minimum(tl.maximum(eos, bos), T)
    else:
        i_b = i_n.to(tl.int64)
        bos = (i_n * 0).to(tl.int64)
        eos = bos + T
    return i_b, bos, eos


@triton.jit
def _program_seq(cu, T, H, USE_CU: tl.constexpr):
    # Grid axis 0 enumerates (sequence, head) pairs, head fastest; axis 1, where there is one,
    # the V blocks. Returns (sequence, head, V block, batch row, first token, end token).
    i_nh = tl.program_id(0)
    i_v = tl.program_id(1)
    i_n = i_nh // H
    i_h = i_nh % H
    i_b, bos, eos = _seq_bounds(cu, i_n, T, USE_CU)
    return i_n, i_h, i_v, i_b, bos, eos


@triton.jit
def _uncovered(i_n, bos, eos, T, H):
    # Rows of the packed batch that no sequence may cover, zero-filled by the programs of the
    # first and the last sequence: [0, head) before sequence 0 and [tail, T) after sequence
    # N - 1 (head = 0 and tail = T for the others; valid offsets make both ranges empty).
    # With the clamping of _seq_bounds, each row in [bos_0, eos_{N-1}) lies in some sequence
    # (the offsets must rise across it somewhere between), so these ranges hold every
    # uncovered row.
    N = tl.num_programs(0) // H
    head = tl.where(i_n == 0, bos, 0)
    tail = tl.where(i_n == N - 1, eos, T)
    return head, tail


@triton.jit
def _zero_rows(
    x, lo, hi, i_h, H, D: tl.constexpr, o_d, m_d, o_t, BT: tl.constexpr, BD: tl.constexpr
):
    # Store zeros into x[0, t, i_h, o_d] (contiguous [1, T, H, D]) for tokens t in [lo, hi).
    b_z = tl.zeros([BT, BD], dtype=x.dtype.element_ty)
    for i_c in range(0, tl.cdiv(tl.maximum(hi - lo, 0), BT)):
        t = lo + i_c * BT + o_t
        p = x + (t[:, None] * H + i_h) * D + o_d[None, :]
        tl.store(p, b_z, mask=(t < hi)[:, None] & m_d[None, :])


@triton.jit
def _zero_rows_1d(x, lo, hi, i_h, H, o_t, BT: tl.constexpr):
    # Store zeros into x[0, t, i_h] (contiguous [1, T, H]) for tokens t in [lo, hi).
    b_z = tl.zeros([BT], dtype=x.dtype.element_ty)
    for i_c in range(0, tl.cdiv(tl.maximum(hi - lo, 0), BT)):
        t = lo + i_c * BT + o_t
        tl.store(x + t * H + i_h, b_z, mask=t < hi)


@triton.jit
def _tile_offsets(
    i_v, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr
):
    # Token offsets within a chunk, the K block, and V block i_v, with their bounds masks.
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    return o_t, o_k, o_v, o_k < K, o_v < V


@triton.jit
def _head_ptr(x, i_b, i_h, s_b, s_h, o_d, s_d):
    # [1, BD] pointers to x[i_b, 0, i_h, o_d]; add t[:, None] * s_t for the rows of a chunk.
    return x + i_b * s_b + i_h * s_h + o_d[None, :] * s_d


@triton.jit
def _state_offsets(i_n, i_h, H, K: tl.constexpr, V: tl.constexpr, o_k, o_v, m_k, m_v):
    # Offsets and mask of this program's [BK, BV] tile of a contiguous [N, H, K, V] state.
    s_off = (i_n.to(tl.int64) * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]
    return s_off, m_k[:, None] & m_v[None, :]


@triton.jit
def _load_state(s, s_off, m_s, USE: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    # The state tile from s in float32, or zeros when there is none (s is None).
    if USE:
        b_s = tl.load(s + s_off, mask=m_s, other=0.0).to(tl.float32)
    else:
        b_s = tl.zeros([BK, BV], dtype=tl.float32)
    return b_s


@triton.jit
def _chunk_tokens(bos, eos, i_c, o_t, BT: tl.constexpr):
    # Token indices of chunk i_c of the sequence [bos, eos) and their mask.
    t = bos + i_c * BT + o_t
    return t, t < eos


@triton.jit
def _floored(b_g):
    # g raised to _G_FLOOR where below it, NaN kept (Note [log-decay floor]).
    return tl.where(b_g < _G_FLOOR, _G_FLOOR, b_g)


@triton.jit
def _cumulative(b_g):
    # Cumulative sum of b_g along axis 0 as G + C: G the float32 nearest the float64 sum, C
    # what G leaves out (Note [log-decay floor]).
    b_S = tl.cumsum(b_g.to(tl.float64), axis=0)
    b_G = b_S.to(tl.float32)
    return b_G, (b_S - b_G.to(tl.float64)).to(tl.float32)


@triton.jit
def _span(b_Gi, b_Ci, b_Gj, b_Cj):
    # G_i - G_j of two compensated cumulative log-decays (Note [log-decay floor]).
    return (b_Gi - b_Gj) + (b_Ci - b_Cj)


@triton.jit
def _chunk_decay(p_g0, t, s_gt, m_t, o_t, BT: tl.constexpr):
    # In-chunk cumulative log-decay G + C and its last entry G_L + C_L (padding has g = 0, so
    # exp(G_L - G_t) is exactly 1 at the last token).
    b_g = _floored(tl.load(p_g0 + t * s_gt, mask=m_t, other=0.0).to(tl.float32))
    b_G, b_C = _cumulative(b_g)
    last = o_t == BT - 1
    b_GL = tl.sum(tl.where(last, b_G, 0.0), axis=0)
    b_CL = tl.sum(tl.where(last, b_C, 0.0), axis=0)
    return b_G, b_C, b_GL, b_CL


@triton.jit
def _stored_decay(p_g0, t, m_t, bos, eos, i_c, T, BT: tl.constexpr):
    # _chunk_decay's four values of chunk i_c as the cumulative pass stored them at p_g0.
    b_G = tl.load(p_g0 + t, mask=m_t, other=0.0)
    b_C = tl.load(p_g0 + T + t, mask=m_t, other=0.0)
    p_L = p_g0 + tl.minimum(bos + i_c * BT + BT, eos) - 1
    return b_G, b_C, tl.load(p_L), tl.load(p_L + T)


@triton.jit
def _in_chunk_decay(b_G, b_C, causal):
    # [i, j] = exp(G_i - G_j) where causal holds, else 0.
    span = _span(b_G[:, None], b_C[:, None], b_G[None, :], b_C[None, :])
    return tl.exp(tl.where(causal, span, float("-inf")))


@triton.jit
def _part_index(row, i_v, NTOK, H, i_h):
    # Row index of (V block i_v, token row, head i_h) in a per-V-block partial [NV, B, T, H, ...].
    return (row + i_v * NTOK) * H + i_h


@triton.jit
def _clamped(cu, i, T):
    # cu[i] clamped into [0, T], as _seq_bounds reads it.
    return tl.minimum(tl.maximum(tl.load(cu + i).to(tl.int64), 0), T)


@triton.jit
def _descents(cu, N, T, BLOCK: tl.constexpr):
    # How many times the clamped offsets fall from one to the next: zero for valid offsets.
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i0 in range(0, N, BLOCK):
        i = i0 + tl.arange(0, BLOCK)
        m = i < N
        lo = tl.minimum(tl.maximum(tl.load(cu + i, mask=m, other=0).to(tl.int64), 0), T)
        hi = tl.minimum(tl.maximum(tl.load(cu + i + 1, mask=m, other=0).to(tl.int64), 0), T)
        acc += (m & (hi < lo)).to(tl.int32)
    return tl.sum(acc, axis=0)


@triton.jit
def _slot_owner(cu, i_s, N, T, BT: tl.constexpr):
    # Packed sequences: (batch row, first token, end token, chunk i_c, whether it is one) of the
    # sequence n whose chunk state slot i_s holds.
    # Sequence n keeps its chunk states from slot f(n) = clamp(cu[n], 0, T) // BT + n on. For
    # nondecreasing offsets f(n + 1) - f(n) >= 1 + (chunks of n), so f rises strictly, the slots
    # of different sequences never meet, every slot is below cdiv(T, BT) + N - 1 (whatever cu
    # holds), and the owner of i_s is the last n with f(n) <= i_s: found by bisection.
    lo = i_s * 0
    hi = lo + N
    while hi - lo > 1:
        mid = (lo + hi) // 2
        below = _clamped(cu, mid, T) // BT + mid <= i_s
        lo = tl.where(below, mid, lo)
        hi = tl.where(below, hi, mid)
    i_b, bos, eos = _seq_bounds(cu, lo, T, True)
    i_c = i_s - (bos // BT + lo)
    return i_b, bos, eos, i_c, (i_c >= 0) & (i_c * BT < eos - bos)


@triton.jit
def _gla_fwd_g_kernel(
    g,
    gc,
    cu,
    flag,
    T,
    H,
    N,
    NT,
    s_gb,
    s_gt,
    s_gh,
    BT: tl.constexpr,
    BH: tl.constexpr,
    USE_CU: tl.constexpr,
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
        p_g = g + i_b * s_gb + t[:, None] * s_gt + o_h[None, :] * s_gh
        b_g = _floored(tl.load(p_g, mask=m, other=0.0).to(tl.float32))
        p_gc = gc + (i_b * H + o_h[None, :]) * (2 * T) + t[:, None]
        b_G, b_C = _cumulative(b_g)
        tl.store(p_gc, b_G, mask=m)
        tl.store(p_gc + T, b_C, mask=m)


@triton.jit
def _h_walk(
    pid,
    k,
    v,
    gc,
    h0,
    h,
    ht,
    cu,
    T,
    H,
    NT,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    MODE: tl.constexpr,
):
    # One program per (sequence, head, [BK, BV] state tile), tiles fastest so that the programs
    # reading the same k and v rows run side by side. It walks its sequence's chunks, storing the
    # state at the start of each into h[slot] before adding the chunk. Only the state is carried
    # from one chunk to the next, and the chunk's product does not depend on it.
    NV = (V + BV - 1) // BV
    NKV = (K + BK - 1) // BK * NV
    DT = k.dtype.element_ty
    i_nh = pid // NKV
    i_k = pid % NKV // NV
    i_v = pid % NV
    i_n = i_nh // H
    i_h = i_nh % H
    i_b, bos, eos = _seq_bounds(cu, i_n, T, USE_CU)
    if USE_CU:
        c0 = bos // BT + i_n
    else:
        c0 = i_n.to(tl.int64) * NT

    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_s = _load_state(h0, s_off, m_s, USE_H0, BK, BV)

    p_k0 = k + i_b * s_kb + i_h * s_kh + o_k[:, None] * s_kk
    p_v0 = _head_ptr(v, i_b, i_h, s_vb, s_vh, o_v, s_vv)
    p_g0 = gc + (i_b * H + i_h) * (2 * T)
    o_s = o_k[:, None] * V + o_v[None, :]

    NC = tl.cdiv(eos - bos, BT)
    for i_c in range(0, NC):
        p_h = h + ((c0 + i_c) * H + i_h) * (K * V) + o_s
        tl.store(p_h, b_s.to(h.dtype.element_ty), mask=m_s)
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        b_kT = tl.load(p_k0 + t[None, :] * s_kt, mask=m_k[:, None] & m_t[None, :], other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * s_vt, mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_G, b_C, b_GL, b_CL = _stored_decay(p_g0, t, m_t, bos, eos, i_c, T, BT)
        b_kg = b_kT.to(tl.float32) * tl.exp(_span(b_GL, b_CL, b_G, b_C))[None, :]
        b_s = b_s * tl.exp(b_GL) + _dot(b_kg, b_v, DT, MODE)

    if STORE_HT:
        tl.store(ht + s_off, b_s, mask=m_s)


@triton.jit
def _gla_fwd_h_kernel(
    k,
    v,
    gc,
    h0,
    h,
    ht,
    cu,
    T,
    H,
    NT,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    MODE: tl.constexpr,
):
    # Grid (sequences x heads x state tiles,): see _h_walk.
    _h_walk(
        tl.program_id(0),
        k,
        v,
        gc,
        h0,
        h,
        ht,
        cu,
        T,
        H,
        NT,
        s_kb,
        s_kt,
        s_kh,
        s_kk,
        s_vb,
        s_vt,
        s_vh,
        s_vv,
        K,
        V,
        BT,
        BK,
        BV,
        USE_CU,
        USE_H0,
        STORE_HT,
        MODE,
    )


@triton.jit
def _gla_fwd_hseg_kernel(
    k,
    v,
    gc,
    h,
    hend,
    gseg,
    hstart,
    T,
    H,
    NT,
    CPS,
    NSEG,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    MODE: tl.constexpr,
    STEP: tl.constexpr,
):
    # The state pass of a long sequence split into segments of CPS chunks (equal-length sequences
    # only); grid (sequences x heads x segments x state tiles,), tiles fastest. Each program walks
    # the chunks of its segment. STEP 1: from a zero state, storing only the segment's own end state
    # into hend and its total log-decay into gseg; _gla_fwd_hcomb_kernel then carries the states
    # across segments into hstart, the state at each segment's start. STEP 2: from that state,
    # storing into h[slot] the state at each chunk's start, as the single walk does. (Each segment
    # is walked twice, but every walk is short: the passes that read h need no change.)
    pid = tl.program_id(0)
    NV = (V + BV - 1) // BV
    NKV = (K + BK - 1) // BK * NV
    DT = k.dtype.element_ty
    i_kv = pid % NKV
    i_seg = (pid // NKV) % NSEG
    i_nh = pid // (NKV * NSEG)
    i_k = i_kv // NV
    i_v = i_kv % NV
    i_n = i_nh // H
    i_h = i_nh % H
    i_b = i_n.to(tl.int64)
    bos = i_b * 0
    eos = bos + T
    c_lo = i_seg * CPS
    c_hi = tl.minimum(c_lo + CPS, NT)

    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_s = m_k[:, None] & m_v[None, :]
    o_s = o_k[:, None] * V + o_v[None, :]
    p_k0 = k + i_b * s_kb + i_h * s_kh + o_k[:, None] * s_kk
    p_v0 = _head_ptr(v, i_b, i_h, s_vb, s_vh, o_v, s_vv)
    p_g0 = gc + (i_b * H + i_h) * (2 * T)
    i_ns = i_n * NSEG + i_seg
    s_off, m_seg = _state_offsets(i_ns, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_s = _load_state(hstart, s_off, m_seg, STEP == 2, BK, BV)
    b_acc = tl.zeros((), dtype=tl.float32)
    for i_c in range(c_lo, c_hi):
        slot = i_b * NT + i_c
        if STEP == 2:
            p_h = h + (slot * H + i_h) * (K * V) + o_s
            tl.store(p_h, b_s.to(h.dtype.element_ty), mask=m_s)
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        b_kT = tl.load(p_k0 + t[None, :] * s_kt, mask=m_k[:, None] & m_t[None, :], other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * s_vt, mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_G, b_C, b_GL, b_CL = _stored_decay(p_g0, t, m_t, bos, eos, i_c, T, BT)
        b_kg = b_kT.to(tl.float32) * tl.exp(_span(b_GL, b_CL, b_G, b_C))[None, :]
        b_s = b_s * tl.exp(b_GL) + _dot(b_kg, b_v, DT, MODE)
        b_acc += b_GL

    if STEP == 1:
        tl.store(hend + s_off, b_s, mask=m_seg)
        if i_kv == 0:
            tl.store(gseg + i_ns * H + i_h, b_acc)


@triton.jit
def _gla_fwd_hcomb_kernel(
    h0,
    hend,
    gseg,
    hstart,
    ht,
    H,
    NSEG,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
):
    # Grid (sequences x heads x state tiles,): the state at the start of each segment, from the
    # initial state and the segments' own end states and log-decays (_gla_fwd_hseg_kernel
    # STEP 1), and the final state.
    pid = tl.program_id(0)
    NV = (V + BV - 1) // BV
    NKV = (K + BK - 1) // BK * NV
    i_kv = pid % NKV
    i_nh = pid // NKV
    i_k = i_kv // NV
    i_v = i_kv % NV
    i_n = i_nh // H
    i_h = i_nh % H
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_s = _load_state(h0, s_off, m_s, USE_H0, BK, BV)
    for i_seg in range(0, NSEG):
        i_ns = i_n * NSEG + i_seg
        p_off, m_p = _state_offsets(i_ns, i_h, H, K, V, o_k, o_v, m_k, m_v)
        tl.store(hstart + p_off, b_s, mask=m_p)
        b_g = tl.load(gseg + i_ns * H + i_h)
        b_s = b_s * tl.exp(b_g) + tl.load(hend + p_off, mask=m_p, other=0.0)
    if STORE_HT:
        tl.store(ht + s_off, b_s, mask=m_s)


@triton.jit
def _gla_fwd_o_kernel(
    q,
    k,
    v,
    gc,
    h,
    o,
    cu,
    flag,
    scale,
    T,
    H,
    N,
    NT,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    MODE: tl.constexpr,
):
    # Grid (V blocks x state slots, H), V blocks fastest so that the programs of a chunk, which
    # read the same q and k, run side by side. Each program computes one chunk's [BT, BV] output
    # from the state at the chunk's start, h[slot], and the causal in-chunk attention.
    NV = (V + BV - 1) // BV
    DT = q.dtype.element_ty
    i_v = tl.program_id(0) % NV
    i_s = tl.program_id(0) // NV
    i_h = tl.program_id(1)
    o_t = tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    if USE_CU:
        # Offsets that fall somewhere are left to _gla_fwd_kernel, which reads flag likewise.
        ordered = tl.load(flag) == 0
        i_b, bos, eos, i_c, live = _slot_owner(cu, i_s, N, T, BT)
        live = live & ordered
        # Zeros into the rows of this slot's BT-row window that precede the first sequence or
        # follow the last (the windows of all slots cover [0, T)).
        z_b, head, z_e = _seq_bounds(cu, i_s * 0, T, True)
        z_b, z_s, tail = _seq_bounds(cu, i_s * 0 + N - 1, T, True)
        head = tl.where(ordered, head, 0)
        tail = tl.where(ordered, tail, T)
        r = i_s.to(tl.int64) * BT + o_t
        m_z = (r < head) | ((r >= tail) & (r < T))
        p_z = o + (r[:, None] * H + i_h) * V + o_v[None, :]
        b_z = tl.zeros([BT, BV], dtype=o.dtype.element_ty)
        tl.store(p_z, b_z, mask=m_z[:, None] & m_v[None, :])
    else:
        i_b = (i_s // NT).to(tl.int64)
        i_c = i_s % NT
        bos = i_b * 0
        eos = bos + T
        live = True

    if live:
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        p_g0 = gc + (i_b * H + i_h) * (2 * T)
        b_G = tl.load(p_g0 + t, mask=m_t, other=0.0)
        b_C = tl.load(p_g0 + T + t, mask=m_t, other=0.0)
        p_v = _head_ptr(v, i_b, i_h, s_vb, s_vh, o_v, s_vv) + t[:, None] * s_vt
        b_v = tl.load(p_v, mask=m_t[:, None] & m_v[None, :], other=0.0)
        p_h = h + (i_s.to(tl.int64) * H + i_h) * (K * V) + o_v[None, :]
        b_o = tl.zeros([BT, BV], dtype=tl.float32)
        b_A = tl.zeros([BT, BT], dtype=tl.float32)
        for i_k in range(0, (K + BK - 1) // BK):
            o_k = i_k * BK + tl.arange(0, BK)
            m_k = o_k < K
            p_q = _head_ptr(q, i_b, i_h, s_qb, s_qh, o_k, s_qk) + t[:, None] * s_qt
            p_k = k + i_b * s_kb + i_h * s_kh + o_k[:, None] * s_kk + t[None, :] * s_kt
            b_q = tl.load(p_q, mask=m_t[:, None] & m_k[None, :], other=0.0)
            b_kT = tl.load(p_k, mask=m_k[:, None] & m_t[None, :], other=0.0)
            m_kv = m_k[:, None] & m_v[None, :]
            b_h = tl.load(p_h + o_k[:, None] * V, mask=m_kv, other=0.0)
            b_o += _dot(b_q, b_h, DT, MODE)
            b_A += _dot(b_q, b_kT, DT, MODE)

        causal = o_t[:, None] >= o_t[None, :]
        b_D = _in_chunk_decay(b_G, b_C, causal)
        b_A = b_A * b_D * scale
        b_o = b_o * (tl.exp(b_G) * scale)[:, None] + _dot(b_A, b_v, DT, MODE)
        row = i_b * T + t
        p_o = o + (row[:, None] * H + i_h) * V + o_v[None, :]
        tl.store(p_o, _cast(b_o, o.dtype.element_ty, MODE), mask=m_t[:, None] & m_v[None, :])


@triton.jit
def _gla_fwd_kernel(
    q,
    k,
    v,
    g,
    h0,
    o,
    ht,
    cu,
    flag,
    scale,
    T,
    H,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_gb,
    s_gt,
    s_gh,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    MODE: tl.constexpr,
):
    # Packed sequences whose clamped offsets fall somewhere (flag != 0, set by
    # _gla_fwd_g_kernel): the chunks and state slots of different sequences may then overlap,
    # so each program walks its whole sequence with the state in registers and rewrites output
    # and final_state. Otherwise it does nothing.
    i_n, i_h, i_v, i_b, bos, eos = _program_seq(cu, T, H, True)
    DT = q.dtype.element_ty
    fallen = tl.load(flag) != 0
    eos = tl.where(fallen, eos, bos)

    o_t, o_k, o_v, m_k, m_v = _tile_offsets(i_v, K, V, BT, BK, BV)
    causal = o_t[:, None] >= o_t[None, :]

    p_q0 = _head_ptr(q, i_b, i_h, s_qb, s_qh, o_k, s_qk)
    p_k0 = _head_ptr(k, i_b, i_h, s_kb, s_kh, o_k, s_kk)
    p_v0 = _head_ptr(v, i_b, i_h, s_vb, s_vh, o_v, s_vv)
    p_g0 = g + i_b * s_gb + i_h * s_gh
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    m_s = tl.where(fallen, m_s, False)
    b_s = _load_state(h0, s_off, m_s, USE_H0, BK, BV)

    NC = tl.cdiv(eos - bos, BT)
    for i_c in range(0, NC):
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        b_q = tl.load(p_q0 + t[:, None] * s_qt, mask=m_t[:, None] & m_k[None, :], other=0.0)
        b_k = tl.load(p_k0 + t[:, None] * s_kt, mask=m_t[:, None] & m_k[None, :], other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * s_vt, mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_G, b_C, b_GL, b_CL = _chunk_decay(p_g0, t, s_gt, m_t, o_t, BT)

        b_D = _in_chunk_decay(b_G, b_C, causal)
        b_A = _dot(b_q, tl.trans(b_k), DT, MODE) * b_D * scale
        b_qg = b_q.to(tl.float32) * (tl.exp(b_G) * scale)[:, None]
        b_o = _dot(b_qg, b_s, DT, MODE) + _dot(b_A, b_v, DT, MODE)

        row = i_b * T + t
        p_o = o + (row[:, None] * H + i_h) * V + o_v[None, :]
        tl.store(p_o, _cast(b_o, o.dtype.element_ty, MODE), mask=m_t[:, None] & m_v[None, :])

        b_kg = b_k.to(tl.float32) * tl.exp(_span(b_GL, b_CL, b_G, b_C))[:, None]
        b_s = b_s * tl.exp(b_GL) + _dot(tl.trans(b_kg), b_v, DT, MODE)

    if STORE_HT:
        tl.store(ht + s_off, b_s, mask=m_s)

    head, tail = _uncovered(i_n, bos, eos, T, H)
    head = tl.where(fallen, head, 0)
    tail = tl.where(fallen, tail, T)
    _zero_rows(o, 0, head, i_h, H, V, o_v, m_v, o_t, BT, BV)
    _zero_rows(o, tail, T, i_h, H, V, o_v, m_v, o_t, BT, BV)


@triton.jit
def _gla_bwd_dkv_kernel(
    q,
    k,
    v,
    g,
    do,
    dht,
    dk_part,
    dg_part,
    dv,
    dh0,
    cu,
    flag,
    scale,
    T,
    H,
    NTOK,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_gb,
    s_gt,
    s_gh,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_DHT: tl.constexpr,
    MODE: tl.constexpr,
):
    i_n, i_h, i_v, i_b, bos, eos = _program_seq(cu, T, H, USE_CU)
    if USE_CU:
        # Only for packed offsets that fall somewhere (flag != 0, set by _gla_fwd_g_kernel);
        # otherwise the chunk-parallel kernels produce everything and this does nothing.
        fallen = tl.load(flag) != 0
        eos = tl.where(fallen, eos, bos)
    DT = q.dtype.element_ty

    o_t, o_k, o_v, m_k, m_v = _tile_offsets(i_v, K, V, BT, BK, BV)
    # transposed causal mask: row j (key) <= column i (query)
    causal_t = o_t[:, None] <= o_t[None, :]
    strict_t = o_t[:, None] < o_t[None, :]

    p_q0 = _head_ptr(q, i_b, i_h, s_qb, s_qh, o_k, s_qk)
    p_k0 = _head_ptr(k, i_b, i_h, s_kb, s_kh, o_k, s_kk)
    p_v0 = _head_ptr(v, i_b, i_h, s_vb, s_vh, o_v, s_vv)
    p_do0 = _head_ptr(do, i_b, i_h, s_db, s_dh, o_v, s_dv)
    p_g0 = g + i_b * s_gb + i_h * s_gh
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    if USE_CU:
        m_s = tl.where(fallen, m_s, False)
    b_ds = _load_state(dht, s_off, m_s, USE_DHT, BK, BV)

    NC = tl.cdiv(eos - bos, BT)
    for i_r in range(0, NC):
        t, m_t = _chunk_tokens(bos, eos, NC - 1 - i_r, o_t, BT)
        m_tk = m_t[:, None] & m_k[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_q = tl.load(p_q0 + t[:, None] * s_qt, mask=m_tk, other=0.0)
        b_k = tl.load(p_k0 + t[:, None] * s_kt, mask=m_tk, other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * s_vt, mask=m_tv, other=0.0)
        b_do = tl.load(p_do0 + t[:, None] * s_dt, mask=m_tv, other=0.0)
        b_G, b_C, b_GL, b_CL = _chunk_decay(p_g0, t, s_gt, m_t, o_t, BT)

        # [j, i] = scale * exp(G_i - G_j) for j <= i
        span_t = _span(b_G[None, :], b_C[None, :], b_G[:, None], b_C[:, None])
        b_Dt = tl.exp(tl.where(causal_t, span_t, float("-inf"))) * scale
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
        p_dv = dv + (row[:, None] * H + i_h) * V + o_v[None, :]
        tl.store(p_dv, _cast(b_dv, dv.dtype.element_ty, MODE), mask=m_tv)
        p_dk = dk_part + _part_index(row[:, None], i_v, NTOK, H, i_h) * K + o_k[None, :]
        tl.store(p_dk, b_dk, mask=m_tk)
        tl.store(dg_part + _part_index(row, i_v, NTOK, H, i_h), b_dG, mask=m_t)

        b_qg = b_q.to(tl.float32) * (tl.exp(b_G) * scale)[:, None]
        b_ds = b_ds * tl.exp(b_GL) + _dot(tl.trans(b_qg), b_do, DT, MODE)

    tl.store(dh0 + s_off, b_ds, mask=m_s)

    if USE_CU:
        head, tail = _uncovered(i_n, bos, eos, T, H)
        head = tl.where(fallen, head, 0)
        tail = tl.where(fallen, tail, T)
        _zero_rows(dv, 0, head, i_h, H, V, o_v, m_v, o_t, BT, BV)
        _zero_rows(dv, tail, T, i_h, H, V, o_v, m_v, o_t, BT, BV)


@triton.jit
def _gla_bwd_dq_kernel(
    q,
    k,
    v,
    g,
    do,
    h0,
    dht,
    dq_part,
    dg_part,
    dhs_part,
    cu,
    flag,
    scale,
    T,
    H,
    N,
    NTOK,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_gb,
    s_gt,
    s_gh,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_H0: tl.constexpr,
    USE_DHT: tl.constexpr,
    MODE: tl.constexpr,
):
    i_n, i_h, i_v, i_b, bos, eos = _program_seq(cu, T, H, USE_CU)
    if USE_CU:
        # Only for packed offsets that fall somewhere (flag != 0, set by _gla_fwd_g_kernel);
        # otherwise the chunk-parallel kernels produce everything and this does nothing.
        fallen = tl.load(flag) != 0
        eos = tl.where(fallen, eos, bos)
    DT = k.dtype.element_ty

    o_t, o_k, o_v, m_k, m_v = _tile_offsets(i_v, K, V, BT, BK, BV)
    causal = o_t[:, None] >= o_t[None, :]

    p_q0 = _head_ptr(q, i_b, i_h, s_qb, s_qh, o_k, s_qk)
    p_k0 = _head_ptr(k, i_b, i_h, s_kb, s_kh, o_k, s_kk)
    p_v0 = _head_ptr(v, i_b, i_h, s_vb, s_vh, o_v, s_vv)
    p_do0 = _head_ptr(do, i_b, i_h, s_db, s_dh, o_v, s_dv)
    p_g0 = g + i_b * s_gb + i_h * s_gh
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_s = _load_state(h0, s_off, m_s, USE_H0, BK, BV)

    NC = tl.cdiv(eos - bos, BT)
    for i_c in range(0, NC):
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        m_tk = m_t[:, None] & m_k[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_k = tl.load(p_k0 + t[:, None] * s_kt, mask=m_tk, other=0.0)
        b_v = tl.load(p_v0 + t[:, None] * s_vt, mask=m_tv, other=0.0)
        b_do = tl.load(p_do0 + t[:, None] * s_dt, mask=m_tv, other=0.0)
        b_G, b_C, b_GL, b_CL = _chunk_decay(p_g0, t, s_gt, m_t, o_t, BT)

        b_D = _in_chunk_decay(b_G, b_C, causal) * scale
        b_dA = _dot(b_do, tl.trans(b_v), DT, MODE) * b_D
        b_dq_inter = _dot(b_do, tl.trans(b_s), DT, MODE) * (tl.exp(b_G) * scale)[:, None]
        b_dq = _dot(b_dA, b_k, DT, MODE) + b_dq_inter

        row = i_b * T + t
        p_dq = dq_part + _part_index(row[:, None], i_v, NTOK, H, i_h) * K + o_k[None, :]
        tl.store(p_dq, b_dq, mask=m_tk)
        b_q = tl.load(p_q0 + t[:, None] * s_qt, mask=m_tk, other=0.0).to(tl.float32)
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
    dq_part,
    dk_part,
    dg_part,
    dhs_part,
    dq,
    dk,
    dg,
    cu,
    flag,
    T,
    H,
    N,
    NTOK,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    NV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_DHT: tl.constexpr,
    MODE: tl.constexpr,
):
    i_n, i_h, _, i_b, bos, eos = _program_seq(cu, T, H, USE_CU)
    if USE_CU:
        # Only for packed offsets that fall somewhere (flag != 0, set by _gla_fwd_g_kernel);
        # otherwise the chunk-parallel kernels produce everything and this does nothing.
        fallen = tl.load(flag) != 0
        eos = tl.where(fallen, eos, bos)

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
        o_out = (row[:, None] * H + i_h) * K + o_k[None, :]
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
        head, tail = _uncovered(i_n, bos, eos, T, H)
        head = tl.where(fallen, head, 0)
        tail = tl.where(fallen, tail, T)
        _zero_rows(dq, 0, head, i_h, H, K, o_k, m_k, o_t, BT, BK)
        _zero_rows(dq, tail, T, i_h, H, K, o_k, m_k, o_t, BT, BK)
        _zero_rows(dk, 0, head, i_h, H, K, o_k, m_k, o_t, BT, BK)
        _zero_rows(dk, tail, T, i_h, H, K, o_k, m_k, o_t, BT, BK)
        _zero_rows_1d(dg, 0, head, i_h, H, o_t, BT)
        _zero_rows_1d(dg, tail, T, i_h, H, o_t, BT)


@triton.jit
def _slot_chunk(cu, flag, i_s, T, N, NT, BT: tl.constexpr, USE_CU: tl.constexpr):
    # (batch row, first token, end token, chunk, whether this program works, whether the offsets
    # are ordered) of state slot i_s, as _gla_fwd_o_kernel finds them. With packed sequences
    # whose clamped offsets fall somewhere (flag != 0) no slot is live: the sequential fallback
    # kernels then produce every result.
    if USE_CU:
        ordered = tl.load(flag) == 0
        i_b, bos, eos, i_c, live = _slot_owner(cu, i_s, N, T, BT)
        live = live & ordered
    else:
        ordered = True
        i_b = (i_s // NT).to(tl.int64)
        i_c = i_s % NT
        bos = i_b * 0
        eos = bos + T
        live = True
    return i_b, bos, eos, i_c, live, ordered


@triton.jit
def _slot_uncovered(cu, ordered, i_s, N, T, o_t, BT: tl.constexpr):
    # Mask of the rows of slot i_s's BT-row window that precede the first packed sequence or
    # follow the last (the windows of all slots cover [0, T)); none when the offsets fall.
    z_b, head, z_e = _seq_bounds(cu, i_s * 0, T, True)
    z_b, z_s, tail = _seq_bounds(cu, i_s * 0 + N - 1, T, True)
    head = tl.where(ordered, head, 0)
    tail = tl.where(ordered, tail, T)
    r = i_s.to(tl.int64) * BT + o_t
    return r, (r < head) | ((r >= tail) & (r < T))


@triton.jit
def _dh_walk(
    pid,
    q,
    do,
    gc,
    dht,
    dh,
    dh0,
    cu,
    scale,
    T,
    H,
    NT,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_DHT: tl.constexpr,
    MODE: tl.constexpr,
):
    # The reverse of _gla_fwd_h_kernel: one program per (sequence, head, [BK, BV] tile) walks
    # its sequence's chunks from the last, storing into dh[slot] the gradient of the state at
    # the end of the chunk (dht after the last), then stepping to the chunk's start:
    # dS <- exp(G_L) dS + scale * (q * exp(G))^T do. What is left is the gradient of the initial
    # state, stored into dh0.
    NV = (V + BV - 1) // BV
    NKV = (K + BK - 1) // BK * NV
    DT = q.dtype.element_ty
    i_nh = pid // NKV
    i_k = pid % NKV // NV
    i_v = pid % NV
    i_n = i_nh // H
    i_h = i_nh % H
    i_b, bos, eos = _seq_bounds(cu, i_n, T, USE_CU)
    if USE_CU:
        c0 = bos // BT + i_n
    else:
        c0 = i_n.to(tl.int64) * NT

    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_dh = _load_state(dht, s_off, m_s, USE_DHT, BK, BV)

    p_q0 = q + i_b * s_qb + i_h * s_qh + o_k[:, None] * s_qk
    p_do0 = _head_ptr(do, i_b, i_h, s_db, s_dh, o_v, s_dv)
    p_g0 = gc + (i_b * H + i_h) * (2 * T)
    o_s = o_k[:, None] * V + o_v[None, :]

    NC = tl.cdiv(eos - bos, BT)
    for i_r in range(0, NC):
        i_c = NC - 1 - i_r
        p_dh = dh + ((c0 + i_c) * H + i_h) * (K * V) + o_s
        tl.store(p_dh, b_dh.to(dh.dtype.element_ty), mask=m_s)
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        b_qT = tl.load(p_q0 + t[None, :] * s_qt, mask=m_k[:, None] & m_t[None, :], other=0.0)
        b_do = tl.load(p_do0 + t[:, None] * s_dt, mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_G = tl.load(p_g0 + t, mask=m_t, other=0.0)
        b_GL = tl.load(p_g0 + tl.minimum(bos + i_c * BT + BT, eos) - 1)
        b_qg = b_qT.to(tl.float32) * (tl.exp(b_G) * scale)[None, :]
        b_dh = b_dh * tl.exp(b_GL) + _dot(b_qg, b_do, DT, MODE)

    tl.store(dh0 + s_off, b_dh, mask=m_s)


@triton.jit
def _gla_bwd_dh_kernel(
    q,
    do,
    gc,
    dht,
    dh,
    dh0,
    cu,
    scale,
    T,
    H,
    NT,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_DHT: tl.constexpr,
    MODE: tl.constexpr,
):
    # Grid (sequences x heads x state tiles,): see _dh_walk.
    _dh_walk(
        tl.program_id(0),
        q,
        do,
        gc,
        dht,
        dh,
        dh0,
        cu,
        scale,
        T,
        H,
        NT,
        s_qb,
        s_qt,
        s_qh,
        s_qk,
        s_db,
        s_dt,
        s_dh,
        s_dv,
        K,
        V,
        BT,
        BK,
        BV,
        USE_CU,
        USE_DHT,
        MODE,
    )


@triton.jit
def _gla_bwd_states_kernel(
    k,
    v,
    q,
    do,
    gc,
    h0,
    h,
    dht,
    dh,
    dh0,
    cu,
    scale,
    T,
    H,
    NT,
    NP,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    USE_H0: tl.constexpr,
    USE_DHT: tl.constexpr,
    MODE: tl.constexpr,
):
    # The two sequential walks of the backward in one launch, side by side: programs below NP
    # (sequences x heads x state tiles) recompute the chunk states h as _gla_fwd_h_kernel, the
    # others the gradients of the chunk end states dh as _gla_bwd_dh_kernel. Few sequences and
    # heads leave most of the GPU idle in either walk alone.
    pid = tl.program_id(0)
    if pid < NP:
        _h_walk(
            pid,
            k,
            v,
            gc,
            h0,
            h,
            h,
            cu,
            T,
            H,
            NT,
            s_kb,
            s_kt,
            s_kh,
            s_kk,
            s_vb,
            s_vt,
            s_vh,
            s_vv,
            K,
            V,
            BT,
            BK,
            BV,
            USE_CU,
            USE_H0,
            False,
            MODE,
        )
    else:
        _dh_walk(
            pid - NP,
            q,
            do,
            gc,
            dht,
            dh,
            dh0,
            cu,
            scale,
            T,
            H,
            NT,
            s_qb,
            s_qt,
            s_qh,
            s_qk,
            s_db,
            s_dt,
            s_dh,
            s_dv,
            K,
            V,
            BT,
            BK,
            BV,
            USE_CU,
            USE_DHT,
            MODE,
        )


@triton.jit
def _gla_bwd_dhseg_kernel(
    q,
    do,
    gc,
    dh,
    dhown,
    gseg,
    dhend,
    scale,
    T,
    H,
    NT,
    CPS,
    NSEG,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    MODE: tl.constexpr,
    STEP: tl.constexpr,
):
    # The reverse walk (_dh_walk) split into segments of CPS chunks as _gla_fwd_hseg_kernel splits
    # the forward one (equal-length sequences only); grid (sequences x heads x segments x state
    # tiles,), tiles fastest. Each program walks its segment's chunks from the last. STEP 1: from a
    # zero gradient, storing only the segment's own part of the gradient at its start into dhown and
    # its total log-decay into gseg; _gla_bwd_dhcomb_kernel then carries the gradients across
    # segments into dhend, the gradient at each segment's end. STEP 2: from that gradient, storing
    # into dh[slot] the gradient of the state at each chunk's end, as the single walk does.
    pid = tl.program_id(0)
    NV = (V + BV - 1) // BV
    NKV = (K + BK - 1) // BK * NV
    DT = q.dtype.element_ty
    i_kv = pid % NKV
    i_seg = (pid // NKV) % NSEG
    i_nh = pid // (NKV * NSEG)
    i_k = i_kv // NV
    i_v = i_kv % NV
    i_n = i_nh // H
    i_h = i_nh % H
    i_b = i_n.to(tl.int64)
    bos = i_b * 0
    eos = bos + T
    c_lo = i_seg * CPS
    c_hi = tl.minimum(c_lo + CPS, NT)

    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_s = m_k[:, None] & m_v[None, :]
    o_s = o_k[:, None] * V + o_v[None, :]
    p_q0 = q + i_b * s_qb + i_h * s_qh + o_k[:, None] * s_qk
    p_do0 = _head_ptr(do, i_b, i_h, s_db, s_dh, o_v, s_dv)
    p_g0 = gc + (i_b * H + i_h) * (2 * T)
    i_ns = i_n * NSEG + i_seg
    s_off, m_seg = _state_offsets(i_ns, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_dh = _load_state(dhend, s_off, m_seg, STEP == 2, BK, BV)
    b_acc = tl.zeros((), dtype=tl.float32)
    for i_r in range(0, c_hi - c_lo):
        i_c = c_hi - 1 - i_r
        if STEP == 2:
            slot = i_b * NT + i_c
            p_dh = dh + (slot * H + i_h) * (K * V) + o_s
            tl.store(p_dh, b_dh.to(dh.dtype.element_ty), mask=m_s)
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        b_qT = tl.load(p_q0 + t[None, :] * s_qt, mask=m_k[:, None] & m_t[None, :], other=0.0)
        b_do = tl.load(p_do0 + t[:, None] * s_dt, mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_G = tl.load(p_g0 + t, mask=m_t, other=0.0)
        b_GL = tl.load(p_g0 + tl.minimum(bos + i_c * BT + BT, eos) - 1)
        b_qg = b_qT.to(tl.float32) * (tl.exp(b_G) * scale)[None, :]
        b_dh = b_dh * tl.exp(b_GL) + _dot(b_qg, b_do, DT, MODE)
        b_acc += b_GL

    if STEP == 1:
        tl.store(dhown + s_off, b_dh, mask=m_seg)
        if i_kv == 0:
            tl.store(gseg + i_ns * H + i_h, b_acc)


@triton.jit
def _gla_bwd_dhcomb_kernel(
    dht,
    dhown,
    gseg,
    dhend,
    dh0,
    H,
    NSEG,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_DHT: tl.constexpr,
):
    # Grid (sequences x heads x state tiles,): the gradient of the state at the end of each
    # segment, from dht and the segments' own parts and log-decays (_gla_bwd_dhseg_kernel
    # STEP 1), last segment first; what is left is the gradient of the initial state, into dh0.
    pid = tl.program_id(0)
    NV = (V + BV - 1) // BV
    NKV = (K + BK - 1) // BK * NV
    i_kv = pid % NKV
    i_nh = pid // NKV
    i_k = i_kv // NV
    i_v = i_kv % NV
    i_n = i_nh // H
    i_h = i_nh % H
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    s_off, m_s = _state_offsets(i_n, i_h, H, K, V, o_k, o_v, m_k, m_v)
    b_s = _load_state(dht, s_off, m_s, USE_DHT, BK, BV)
    for i_r in range(0, NSEG):
        i_ns = i_n * NSEG + NSEG - 1 - i_r
        p_off, m_p = _state_offsets(i_ns, i_h, H, K, V, o_k, o_v, m_k, m_v)
        tl.store(dhend + p_off, b_s, mask=m_p)
        b_g = tl.load(gseg + i_ns * H + i_h)
        b_s = b_s * tl.exp(b_g) + tl.load(dhown + p_off, mask=m_p, other=0.0)
    tl.store(dh0 + s_off, b_s, mask=m_s)


@triton.jit
def _gla_bwd_dqk_kernel(
    q,
    k,
    v,
    gc,
    h,
    dh,
    do,
    dq,
    dk,
    dv,
    dg,
    dg_part,
    cu,
    flag,
    scale,
    T,
    H,
    N,
    NT,
    NTOK,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    NKS,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    FUSE_DV: tl.constexpr,
    MODE: tl.constexpr,
    PERSIST: tl.constexpr,
):
    # One program per item (K block and state slot, head): grid (K blocks x slots, H); or, with
    # PERSIST, a fixed number of programs that take the NKS * H items in turn (item it: K block
    # and slot it % NKS, head it // NKS), so that the compiler pipelines the next item's loads
    # behind this item's products (Note [persistent passes]).
    NK: tl.constexpr = (K + BK - 1) // BK
    if PERSIST:
        for it in tl.range(tl.program_id(0), NKS * H, tl.num_programs(0)):
            _gla_bwd_dqk_item(
                it % NKS % NK,
                it % NKS // NK,
                it // NKS,
                q,
                k,
                v,
                gc,
                h,
                dh,
                do,
                dq,
                dk,
                dv,
                dg,
                dg_part,
                cu,
                flag,
                scale,
                T,
                H,
                N,
                NT,
                NTOK,
                s_qb,
                s_qt,
                s_qh,
                s_qk,
                s_kb,
                s_kt,
                s_kh,
                s_kk,
                s_vb,
                s_vt,
                s_vh,
                s_vv,
                s_db,
                s_dt,
                s_dh,
                s_dv,
                K,
                V,
                BT,
                BK,
                BV,
                USE_CU,
                FUSE_DV,
                MODE,
            )
    else:
        _gla_bwd_dqk_item(
            tl.program_id(0) % NK,
            tl.program_id(0) // NK,
            tl.program_id(1),
            q,
            k,
            v,
            gc,
            h,
            dh,
            do,
            dq,
            dk,
            dv,
            dg,
            dg_part,
            cu,
            flag,
            scale,
            T,
            H,
            N,
            NT,
            NTOK,
            s_qb,
            s_qt,
            s_qh,
            s_qk,
            s_kb,
            s_kt,
            s_kh,
            s_kk,
            s_vb,
            s_vt,
            s_vh,
            s_vv,
            s_db,
            s_dt,
            s_dh,
            s_dv,
            K,
            V,
            BT,
            BK,
            BV,
            USE_CU,
            FUSE_DV,
            MODE,
        )


@triton.jit
def _gla_bwd_dqk_item(
    i_k,
    i_s,
    i_h,
    q,
    k,
    v,
    gc,
    h,
    dh,
    do,
    dq,
    dk,
    dv,
    dg,
    dg_part,
    cu,
    flag,
    scale,
    T,
    H,
    N,
    NT,
    NTOK,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_CU: tl.constexpr,
    FUSE_DV: tl.constexpr,
    MODE: tl.constexpr,
):
    # One item of _gla_bwd_dqk_kernel: K block i_k of state slot i_s, head i_h. It computes one
    # chunk's [BT, BK] blocks of dq and dk from the state at its start h[slot], the gradient of
    # the state at its end dh[slot] and the in-chunk attention, walking the V blocks; and the
    # chunk's part of dg from this K block (into dg itself when there is one K block, else into
    # dg_part[K block], summed by _gla_bwd_dv_kernel).
    #
    # With G the in-chunk cumulative log-decay (G_L at the chunk's last token), a token's g
    # enters G_s for every later token s of its chunk, and G_L; dL/dG_s = q_s.dq_s - k_s.dk_s,
    # and G_L also carries sum_s k_s.dk'_s + exp(G_L) <h, dh> (dk' the part of dk through dh,
    # which holds exp(G_L - G_s)). So
    #   dg_t = sum_{s >= t} (q_s.dq_s - k_s.dk''_s) + sum_{s < t} k_s.dk'_s + exp(G_L) <h, dh>
    # (dk'' the in-chunk part of dk), which never subtracts the large terms through dh.
    #
    # FUSE_DV (one K block, BK >= K): the program also computes the chunk's dv, one V block per
    # step of its walk, as _gla_bwd_dv_kernel does: dv = (scale * exp(G_i - G_j) q_i.k_j)^T do
    # + (k * exp(G_L - G)) dh. q, k and the in-chunk attention are then loaded and formed once
    # before the walk, and q, k, do and dh are read once for all four gradients.
    NK: tl.constexpr = (K + BK - 1) // BK
    tl.static_assert(not FUSE_DV or NK == 1)
    DT = q.dtype.element_ty
    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    m_k = o_k < K
    i_b, bos, eos, i_c, live, ordered = _slot_chunk(cu, flag, i_s, T, N, NT, BT, USE_CU)
    if USE_CU:
        r, m_z = _slot_uncovered(cu, ordered, i_s, N, T, o_t, BT)
        p_z = (r[:, None] * H + i_h) * K + o_k[None, :]
        m_zk = m_z[:, None] & m_k[None, :]
        tl.store(dq + p_z, tl.zeros([BT, BK], dtype=dq.dtype.element_ty), mask=m_zk)
        tl.store(dk + p_z, tl.zeros([BT, BK], dtype=dk.dtype.element_ty), mask=m_zk)
        if i_k == 0:
            tl.store(dg + r * H + i_h, tl.zeros([BT], dtype=tl.float32), mask=m_z)
        if FUSE_DV:
            for i_z in tl.static_range(0, (V + BV - 1) // BV):
                o_zv = i_z * BV + tl.arange(0, BV)
                p_zv = (r[:, None] * H + i_h) * V + o_zv[None, :]
                b_zv = tl.zeros([BT, BV], dtype=dv.dtype.element_ty)
                tl.store(dv + p_zv, b_zv, mask=m_z[:, None] & (o_zv < V)[None, :])

    if live:
        t, m_t = _chunk_tokens(bos, eos, i_c, o_t, BT)
        p_g0 = gc + (i_b * H + i_h) * (2 * T)
        b_G, b_C, b_GL, b_CL = _stored_decay(p_g0, t, m_t, bos, eos, i_c, T, BT)
        p_s = (i_s.to(tl.int64) * H + i_h) * (K * V) + o_k[:, None] * V
        p_q = _head_ptr(q, i_b, i_h, s_qb, s_qh, o_k, s_qk) + t[:, None] * s_qt
        p_k = _head_ptr(k, i_b, i_h, s_kb, s_kh, o_k, s_kk) + t[:, None] * s_kt
        m_tk = m_t[:, None] & m_k[None, :]
        row = i_b * T + t
        # [i, j] = scale * exp(G_i - G_j) for tokens j <= i of the sequence (no padding: there
        # G is 0 and the exponent unbounded)
        both = m_t[:, None] & m_t[None, :]
        causal = (o_t[:, None] >= o_t[None, :]) & both
        # q and k are loaded before the V walk even where they are used only after it: their
        # loads are then in flight behind the walk's (on the H200, B4 T4096 H16 K = V = 128:
        # this pass 283 -> 262 us). In the dv pass the same for do measured slower (127 -> 154).
        b_q = tl.load(p_q, mask=m_tk, other=0.0)
        b_k = tl.load(p_k, mask=m_tk, other=0.0)
        if FUSE_DV:
            b_qk = _dot(b_q, tl.trans(b_k), DT, MODE)
            b_D = _in_chunk_decay(b_G, b_C, causal) * scale
            b_AtD = _cast(tl.trans(b_qk * b_D), DT, MODE)
            b_kd = _cast(
                b_k.to(tl.float32)
                * tl.where(m_t, tl.exp(_span(b_GL, b_CL, b_G, b_C)), 0.0)[:, None],
                DT,
                MODE,
            )
        b_dA = tl.zeros([BT, BT], dtype=tl.float32)
        b_dqs = tl.zeros([BT, BK], dtype=tl.float32)
        b_dks = tl.zeros([BT, BK], dtype=tl.float32)
        b_hdh = tl.zeros([BK], dtype=tl.float32)
        for i_v in range(0, (V + BV - 1) // BV):
            o_v = i_v * BV + tl.arange(0, BV)
            m_v = o_v < V
            m_tv = m_t[:, None] & m_v[None, :]
            m_s = m_k[:, None] & m_v[None, :]
            p_v = _head_ptr(v, i_b, i_h, s_vb, s_vh, o_v, s_vv) + t[:, None] * s_vt
            p_do = _head_ptr(do, i_b, i_h, s_db, s_dh, o_v, s_dv) + t[:, None] * s_dt
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
                p_dv = dv + (row[:, None] * H + i_h) * V + o_v[None, :]
                tl.store(p_dv, _cast(b_dv, dv.dtype.element_ty, MODE), mask=m_tv)

        if not FUSE_DV:
            b_qk = _dot(b_q, tl.trans(b_k), DT, MODE)
            b_D = _in_chunk_decay(b_G, b_C, causal) * scale
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
        b_dg = (
            tl.sum(b_gq, axis=0)
            - tl.cumsum(b_gq, axis=0)
            + b_gq
            + tl.cumsum(b_gk, axis=0)
            - b_gk
            + b_last
        )

        p_out = (row[:, None] * H + i_h) * K + o_k[None, :]
        tl.store(dq + p_out, _cast(b_dq, dq.dtype.element_ty, MODE), mask=m_tk)
        tl.store(dk + p_out, _cast(b_dk, dk.dtype.element_ty, MODE), mask=m_tk)
        if NK == 1:
            tl.store(dg + row * H + i_h, b_dg, mask=m_t)
        else:
            tl.store(dg_part + (i_k * NTOK + row) * H + i_h, b_dg, mask=m_t)


@triton.jit
def _gla_bwd_dv_kernel(
    q,
    k,
    gc,
    dh,
    do,
    dv,
    dg,
    dg_part,
    cu,
    flag,
    scale,
    T,
    H,
    N,
    NT,
    NTOK,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    NVS,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    NKG: tl.constexpr,
    USE_CU: tl.constexpr,
    MODE: tl.constexpr,
    PERSIST: tl.constexpr,
):
    # One program per item (V block and state slot, head): grid (V blocks x slots, H); or, with
    # PERSIST, a fixed number of programs that take the NVS * H items in turn, as in
    # _gla_bwd_dqk_kernel.
    NV: tl.constexpr = (V + BV - 1) // BV
    if PERSIST:
        for it in tl.range(tl.program_id(0), NVS * H, tl.num_programs(0)):
            _gla_bwd_dv_item(
                it % NVS % NV,
                it % NVS // NV,
                it // NVS,
                q,
                k,
                gc,
                dh,
                do,
                dv,
                dg,
                dg_part,
                cu,
                flag,
                scale,
                T,
                H,
                N,
                NT,
                NTOK,
                s_qb,
                s_qt,
                s_qh,
                s_qk,
                s_kb,
                s_kt,
                s_kh,
                s_kk,
                s_db,
                s_dt,
                s_dh,
                s_dv,
                K,
                V,
                BT,
                BK,
                BV,
                NKG,
                USE_CU,
                MODE,
            )
    else:
        _gla_bwd_dv_item(
            tl.program_id(0) % NV,
            tl.program_id(0) // NV,
            tl.program_id(1),
            q,
            k,
            gc,
            dh,
            do,
            dv,
            dg,
            dg_part,
            cu,
            flag,
            scale,
            T,
            H,
            N,
            NT,
            NTOK,
            s_qb,
            s_qt,
            s_qh,
            s_qk,
            s_kb,
            s_kt,
            s_kh,
            s_kk,
            s_db,
            s_dt,
            s_dh,
            s_dv,
            K,
            V,
            BT,
            BK,
            BV,
            NKG,
            USE_CU,
            MODE,
        )


@triton.jit
def _gla_bwd_dv_item(
    i_v,
    i_s,
    i_h,
    q,
    k,
    gc,
    dh,
    do,
    dv,
    dg,
    dg_part,
    cu,
    flag,
    scale,
    T,
    H,
    N,
    NT,
    NTOK,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_db,
    s_dt,
    s_dh,
    s_dv,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    NKG: tl.constexpr,
    USE_CU: tl.constexpr,
    MODE: tl.constexpr,
):
    # One item of _gla_bwd_dv_kernel: V block i_v of state slot i_s, head i_h. It computes one
    # chunk's [BT, BV] block of dv = (scale * exp(G_i - G_j) q_i.k_j)^T do + (k * exp(G_L - G))
    # dh[slot], walking the K blocks; the items of the first V block also sum the NKG partial dg of
    # _gla_bwd_dqk_kernel when there are several.
    DT = q.dtype.element_ty
    o_t = tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    i_b, bos, eos, i_c, live, ordered = _slot_chunk(cu, flag, i_s, T, N, NT, BT, USE_CU)
    if USE_CU:
        r, m_z = _slot_uncovered(cu, ordered, i_s, N, T, o_t, BT)
        p_z = (r[:, None] * H + i_h) * V + o_v[None, :]
        b_z = tl.zeros([BT, BV], dtype=dv.dtype.element_ty)
        tl.store(dv + p_z, b_z, mask=m_z[:, None] & m_v[None, :])

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
            p_qT = q + i_b * s_qb + i_h * s_qh + o_k[:, None] * s_qk + t[None, :] * s_qt
            p_k = _head_ptr(k, i_b, i_h, s_kb, s_kh, o_k, s_kk) + t[:, None] * s_kt
            b_qT = tl.load(p_qT, mask=m_k[:, None] & m_t[None, :], other=0.0)
            b_k = tl.load(p_k, mask=m_t[:, None] & m_k[None, :], other=0.0)
            b_dh = tl.load(dh + p_s + o_k[:, None] * V, mask=m_k[:, None] & m_v[None, :], other=0.0)
            b_At += _dot(b_k, b_qT, DT, MODE)
            b_kg = b_k.to(tl.float32) * b_dec[:, None]
            b_dv += _dot(b_kg, b_dh, DT, MODE)

        # [j, i] = scale * exp(G_i - G_j) for tokens j <= i of the sequence
        both = m_t[:, None] & m_t[None, :]
        causal_t = (o_t[:, None] <= o_t[None, :]) & both
        span_t = _span(b_G[None, :], b_C[None, :], b_G[:, None], b_C[:, None])
        b_Dt = tl.exp(tl.where(causal_t, span_t, float("-inf"))) * scale
        p_do = _head_ptr(do, i_b, i_h, s_db, s_dh, o_v, s_dv) + t[:, None] * s_dt
        m_tv = m_t[:, None] & m_v[None, :]
        b_do = tl.load(p_do, mask=m_tv, other=0.0)
        b_dv += _dot(b_At * b_Dt, b_do, DT, MODE)
        row = i_b * T + t
        p_dv = dv + (row[:, None] * H + i_h) * V + o_v[None, :]
        tl.store(p_dv, _cast(b_dv, dv.dtype.element_ty, MODE), mask=m_tv)

        if NKG > 1:
            if i_v == 0:
                b_dg = tl.zeros([BT], dtype=tl.float32)
                for i_p in tl.static_range(NKG):
                    b_dg += tl.load(dg_part + (i_p * NTOK + row) * H + i_h, mask=m_t, other=0.0)
                tl.store(dg + row * H + i_h, b_dg, mask=m_t)


_INTERPRETED = type(_gla_fwd_kernel).__name__ == "InterpretedFunction"


@functools.cache
def _mode(dtype):
    if dtype == torch.float32:
        return 1
    return 2 if _INTERPRETED and dtype == torch.bfloat16 else 0


@functools.cache
def _config(K, V, dtype, bwd):
    """(BK, BV, num_warps, num_stages) for a launch."""
    if K > _MAX_K:
        raise ValueError(f"chunk_gla: K={K} exceeds the supported maximum {_MAX_K}")
    BK = max(64, next_power_of_2(K))
    if dtype == torch.float32:
        # ieee fp32 dots run on FMA units, not wgmma; smaller V blocks were faster on H200.
        return BK, 32, 4, 1
    # BV=32 next to BK>=64 hit sporadic illegal shared-memory accesses in wgmma code from
    # Triton 3.6 on H200 (num_warps 4 and 8); BK>=64 with BV=64 ran clean, so small K/V are
    # padded up rather than given smaller blocks.
    return BK, 64, 8 if bwd or BK <= 64 else 4, 1


@functools.cache
def _fwd_config(K, V, dtype):
    """Forward launch configs: (chunk size BT of the state and output passes, then each as
    (BK, BV, num_warps, num_stages): the state pass, the output pass, and _gla_fwd_kernel)."""
    fallback = _config(K, V, dtype, False)
    if dtype == torch.float32:
        return _BT, (64, 32, 4, 1), (64, 32, 4, 1), fallback
    # 16-bit blocks stay at 64 or more (see _config). On the H200, chunks of 128 made the output
    # pass slower than they made the state pass faster; three stages hide the state pass's loads.
    BV = 128 if V > 64 else 64
    return _BT, (64, 64, 4, 3), (64, BV, 8 if BV > 64 else 4, 2), fallback


@functools.cache
def _bwd_config(K, V, dtype):
    """Backward launch configs: (chunk size BT, then each as (BK, BV, num_warps, num_stages): the
    two state walks (the forward's state pass recomputing the chunk states and the reverse one),
    the dq/dk/dg pass and the dv pass, each with a fifth entry (programs per SM of a persistent
    grid, Note [persistent passes]; 0: one program per item), and the sequential fallback
    kernels). When the dq/dk/dg pass's BK covers K, it computes dv as well and the dv pass is not
    launched."""
    BT, state, _, _ = _fwd_config(K, V, dtype)
    fallback = _config(K, V, dtype, True)
    if dtype == torch.float32:
        return BT, state, (64, 32, 4, 1, 0), (64, 32, 4, 1, 0), fallback
    # 16-bit blocks stay at 64 or more (see _config).
    # On the H200 (bf16, B4 T4096 H16 K = V = 128 and B8 T2048 H32 K = V = 64, backward µs,
    # benchmarks/chunk_gla_bwd_tune.py; "xN": N programs per SM on a persistent grid): K = V = 64
    # is fastest with dv in the dq/dk/dg pass on a persistent grid ((BV, warps, stages) 64/4/2 x2:
    # 380; one program per item: 430; x1: 560; 64/8/2 x1: 702; dv apart, 64/64/4/2 both: 468, the
    # dv pass 64/64/4/2 x3: 457); K = V = 128 with dv apart, four warps, and the dv pass over all
    # of K at once (64/64/4/3, dv 128/64/4/2: 575; dv 64/64/4/3: 582; dv 128/64/4/2 x2: 597, x1:
    # 688; dq/dk/dg pass 64/64/4/3 x2, dv 64/64/4/3 x2: 644; over all of K, 0/64/8/2: 614; dv in
    # the dq/dk/dg pass, 64/8/3: 619, 64/4/2: 1024). The dq/dk/dg pass at K = 128 walks two V
    # blocks, so a persistent grid cannot pipeline across its items (and spills there).
    BK = max(64, next_power_of_2(K))
    if _BWD_FUSED_DV and BK <= _BWD_FUSED_MAX_K:
        return BT, state, (BK, 64, 4, 2, 2), None, fallback
    if BK == 128:
        return BT, state, (64, 64, 4, 3, 0), (128, 64, 4, 2, 0), fallback
    return BT, state, (64, 64, 8, 2, 0), (64, 64, 4, 2, 0), fallback


# The forward's state pass walks each sequence's chunks in order, one program per (sequence, head,
# state tile): with very few of them (one long sequence, few heads) most of the GPU idles.
# Equal-length sequences are then split into segments of whole chunks, for about _SEG_PROGRAMS
# programs with at least _SEG_MIN_CHUNKS chunks a segment, each walked twice side by side
# (_launch_h_walk): the walks are short, but there are three launches and twice the products, so the
# split only pays where the single walk has at most _SEG_MAX_PROGRAMS programs. On the H200 (bf16;
# forward µs by CUDA-graph replay, one walk against split,
# benchmarks/chunk_gla_split_sweep.py): B1 T8192 H4 K=V=128 (16 programs) 99.9
# against 51.4 with 16 segments; B1 T32768 H16 K=V=128 (64) 547.8 against 477.8 with 4, 479.8 with
# 8, 494.1 with 16; B4 T4096 H16 K=V=128 (256) 190.9 against 243.4 with 2; B8 T2048 H32 K=V=64 (256)
# 143.2 against 193.7 with 2.
_SEG_MAX_PROGRAMS = 64
_SEG_PROGRAMS = 256
_SEG_MIN_CHUNKS = 8


def _launch_h_walk(like, k, v, gc, h0, h, ht, cu, N, NT, BT, cfg, mode, segments=(0, 1)):
    """The state walk writing the state at the start of each chunk into ``h`` (and the final
    states into ``ht`` unless it is None): the forward's state pass, and the backward's where it
    recomputes the states. ``cfg``: the walk's (BK, BV, num_warps, num_stages); ``N`` sequences
    (``cu``: their offsets, or None); ``segments``: (chunks per segment, segments) from
    ``_walk_segments``. With one segment, one program per (sequence, head, state tile) walks
    the whole sequence; with several, three launches (see ``_gla_fwd_hseg_kernel``): each
    segment's own end state, the states at the segments' starts, then each segment again from
    its start."""
    _, T, H, K = k.shape
    V = v.shape[-1]
    hk, hv, hw, hs = cfg
    tiles = cdiv(K, hk) * cdiv(V, hv)
    cps, nseg = segments
    if nseg > 1:
        hend = k.new_empty((N * nseg, H, K, V), dtype=torch.float32)
        hstart = torch.empty_like(hend)
        gseg = k.new_empty((N * nseg, H), dtype=torch.float32)
        args = (k, v, gc, h, hend, gseg, hstart, T, H, NT, cps, nseg, *k.stride(), *v.stride())
        kw = dict(K=K, V=V, BT=BT, BK=hk, BV=hv, MODE=mode, num_warps=hw, num_stages=hs)
        grid = (N * H * nseg * tiles,)
        launchable(_gla_fwd_hseg_kernel, like)[grid](*args, **kw, STEP=1)
        launchable(_gla_fwd_hcomb_kernel, like)[(N * H * tiles,)](
            h0,
            hend,
            gseg,
            hstart,
            ht,
            H,
            nseg,
            K=K,
            V=V,
            BK=hk,
            BV=hv,
            USE_H0=h0 is not None,
            STORE_HT=ht is not None,
            num_warps=4,
            num_stages=1,
        )
        launchable(_gla_fwd_hseg_kernel, like)[grid](*args, **kw, STEP=2)
        return
    launchable(_gla_fwd_h_kernel, like)[(N * H * tiles,)](
        k,
        v,
        gc,
        h0,
        h,
        ht,
        cu,
        T,
        H,
        NT,
        *k.stride(),
        *v.stride(),
        K=K,
        V=V,
        BT=BT,
        BK=hk,
        BV=hv,
        USE_CU=cu is not None,
        USE_H0=h0 is not None,
        STORE_HT=ht is not None,
        MODE=mode,
        num_warps=hw,
        num_stages=hs,
    )


def _launch_dh_walk(like, q, do, gc, dht, dh, dh0, cu, scale, N, NT, BT, cfg, mode, segments):
    """The reverse walk writing the gradient of the state at the end of each chunk into ``dh``
    and that of the initial states into ``dh0``, as :func:`_launch_h_walk` the forward one
    (three launches with several segments: see ``_gla_bwd_dhseg_kernel``)."""
    _, T, H, K = q.shape
    V = do.shape[-1]
    hk, hv, hw, hs = cfg
    tiles = cdiv(K, hk) * cdiv(V, hv)
    cps, nseg = segments
    strides = (*q.stride(), *do.stride())
    kw = dict(K=K, V=V, BT=BT, BK=hk, BV=hv, MODE=mode, num_warps=hw, num_stages=hs)
    if nseg > 1:
        dhown = q.new_empty((N * nseg, H, K, V), dtype=torch.float32)
        dhend = torch.empty_like(dhown)
        gseg = q.new_empty((N * nseg, H), dtype=torch.float32)
        args = (q, do, gc, dh, dhown, gseg, dhend, float(scale), T, H, NT, cps, nseg, *strides)
        grid = (N * H * nseg * tiles,)
        launchable(_gla_bwd_dhseg_kernel, like)[grid](*args, **kw, STEP=1)
        launchable(_gla_bwd_dhcomb_kernel, like)[(N * H * tiles,)](
            dht,
            dhown,
            gseg,
            dhend,
            dh0,
            H,
            nseg,
            K=K,
            V=V,
            BK=hk,
            BV=hv,
            USE_DHT=dht is not None,
            num_warps=4,
            num_stages=1,
        )
        launchable(_gla_bwd_dhseg_kernel, like)[grid](*args, **kw, STEP=2)
        return
    launchable(_gla_bwd_dh_kernel, like)[(N * H * tiles,)](
        q,
        do,
        gc,
        dht,
        dh,
        dh0,
        cu,
        float(scale),
        T,
        H,
        NT,
        *strides,
        **kw,
        USE_CU=cu is not None,
        USE_DHT=dht is not None,
    )


def _segments(programs: int, chunks: int, max_programs: int | None = None) -> int:
    """Segments per sequence for a state walk of ``programs`` programs over ``chunks`` chunks
    (1: no split); the split applies at ``max_programs`` programs or fewer (default: the
    forward's ``_SEG_MAX_PROGRAMS``)."""
    if programs > (_SEG_MAX_PROGRAMS if max_programs is None else max_programs):
        return 1
    return max(1, min(cdiv(_SEG_PROGRAMS, programs), chunks // _SEG_MIN_CHUNKS))


def _walk_segments(programs: int, chunks: int, use_cu: bool, max_programs: int | None = None):
    """(chunks per segment, segments) of a state walk: packed sequences are walked whole."""
    nseg = 1 if use_cu else _segments(programs, chunks, max_programs)
    cps = cdiv(chunks, nseg)
    return cps, cdiv(chunks, cps)


# The backward splits its reverse walk likewise (_launch_dh_walk), where it alone has at most
# _BWD_SEG_MAX_PROGRAMS programs. Without the forward's states the split recomputes them in
# three launches too, where the whole walks share one (_gla_bwd_states_kernel): it then splits
# only at _BWD_SEG_MAX_PROGRAMS_RECOMPUTING programs or fewer. On the H200 (bf16, K = V = 128;
# backward µs, whole against split, with the forward's states / recomputing them,
# benchmarks/chunk_gla_split_sweep.py): B1 T8192 H4
# (16 programs) 150.5 against 97.7 with 16 segments / 145.8 against 132.6; B1 T32768 H16 (64)
# 1113.4 against 1039.8 with 4 / 1171.9 against 1296.3; B4 T4096 H16 (256) 475.0 against 522.8
# with 2 / 553.8 against 654.9.
_BWD_SEG_MAX_PROGRAMS = 64
_BWD_SEG_MAX_PROGRAMS_RECOMPUTING = 32

# Whether the backward runs its two state walks in one launch (_gla_bwd_states_kernel) rather
# than two (_gla_fwd_h_kernel, then _gla_bwd_dh_kernel); the benchmarks time both.
_BWD_STATES_FUSED = True
# Whether a 16-bit backward with K <= _BWD_FUSED_MAX_K computes dv in the dq/dk/dg pass (one
# program per chunk and head over all of K) instead of a separate dv pass; the benchmarks time
# both (see _bwd_config: from K = 128 the separate pass was faster).
_BWD_FUSED_DV = True
_BWD_FUSED_MAX_K = 64

# Note [persistent passes]: the dq/dk/dg and dv passes do one chunk's work per item, and with one
# program per item a program's loads wait on memory with nothing to hide them behind but the
# few other programs its registers leave room for (one or two per SM). Where the pass's config
# gives a number of programs per SM (_bwd_config), and without packed sequences (whose items
# branch on the offsets), that many programs per SM instead take the items in turn; where an
# item's work has no inner loop of several steps (one V block in the dq/dk/dg pass, one K block
# in the dv pass), the compiler then pipelines the next item's loads into shared memory behind
# this item's products.


@functools.cache
def _sm_count(device: torch.device) -> int:
    # Streaming multiprocessors of a CUDA device; elsewhere (the interpreter) a few programs, so
    # that each takes several items.
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 3


def _items_grid(items_per_head: int, H: int, device: torch.device, per_sm: int):
    # The grid of a pass over items_per_head * H items (Note [persistent passes]).
    if per_sm:
        return (per_sm * _sm_count(device),)
    return (items_per_head, H)


def _packed(cu_seqlens, B, T, device):
    """(cu_seqlens read contiguously, N): refuses what is wrong without looking at the values.

    The values themselves are not checked here (that would synchronize with the device): the
    kernels clamp each sequence to ``0 <= bos <= eos <= T``, so malformed offsets never lead
    outside the tensors.
    """
    if cu_seqlens is None:
        return None, B
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.ndim != 1:
        raise ValueError(
            "chunk_gla: cu_seqlens must be a 1-D tensor of N + 1 offsets, got "
            + (
                f"shape {tuple(cu_seqlens.shape)}"
                if isinstance(cu_seqlens, torch.Tensor)
                else type(cu_seqlens).__name__
            )
        )
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"chunk_gla: cu_seqlens must be int32 or int64, got {cu_seqlens.dtype}")
    if cu_seqlens.shape[0] < 2:
        raise ValueError(
            f"chunk_gla: cu_seqlens must hold at least two offsets (0 and T), "
            f"got {cu_seqlens.shape[0]}"
        )
    if cu_seqlens.device != device:
        raise ValueError(f"chunk_gla: cu_seqlens is on {cu_seqlens.device}, q on {device}")
    if B != 1:
        raise ValueError(f"chunk_gla: packed sequences (cu_seqlens) need B == 1, got B = {B}")
    # The kernels read cu_seqlens[i] at cu + i.
    return cu_seqlens.contiguous(), cu_seqlens.shape[0] - 1


def _scale(scale, K):
    # Note [finite scale]: a non-finite scale is refused. With scale = inf every output is
    # +-inf or NaN (0 * inf) and every gradient NaN, so no caller wants it; and the kernels
    # fold scale into partial products (q * exp(G) * scale, the in-chunk attention) whose sum
    # is inf - inf = NaN where the reference's scale * (q S) is +-inf. Matching that would
    # take a scale applied after every sum, for results no one can use.
    scale = K**-0.5 if scale is None else scale
    if not math.isfinite(scale):
        raise ValueError(f"chunk_gla: scale must be finite, got {scale}")
    return scale


def _float32(x):
    """None, or ``x`` as a contiguous float32 tensor (itself when it already is one)."""
    if x is None or (x.dtype is torch.float32 and x.is_contiguous()):
        return x
    return x.to(torch.float32).contiguous()


def _per_sequence(name, x, shape):
    # A per-sequence state must have one [H, K, V] slice for each of the N sequences.
    if x is not None and tuple(x.shape) != shape:
        raise ValueError(f"chunk_gla: {name} must have shape {shape}, got {tuple(x.shape)}")


def _state_slots(B, T, N, use_cu):
    # State slots of the chunk states: one per chunk of each sequence; packed sequences also
    # leave at most one gap slot each.
    NT = cdiv(T, _BT)
    return NT + N - 1 if use_cu else B * NT


def _saved_states(h, q, v, N, use_cu):
    """None, or the forward's chunk states ``h`` (as :func:`chunk_gla_fwd` returns them: shape
    ``[S, H, K, V]``, ``q``'s dtype and device) read contiguously; anything else: ValueError."""
    if h is None:
        return None
    B, T, H, K = q.shape
    shape = (_state_slots(B, T, N, use_cu), H, K, v.shape[-1])
    if not isinstance(h, torch.Tensor):
        raise ValueError(f"chunk_gla: h must be a tensor of shape {shape}, got {type(h).__name__}")
    if tuple(h.shape) != shape or h.dtype != q.dtype or h.device != q.device:
        raise ValueError(
            f"chunk_gla: h must have shape {shape}, dtype {q.dtype} and device {q.device} (the "
            f"forward's chunk states), got {tuple(h.shape)}, {h.dtype}, {h.device}"
        )
    return h.contiguous()


def chunk_gla_fwd(
    q, k, v, g, scale: float | None, initial_state, cu_seqlens, output_final_state: bool
):
    """Forward of ``chunk_gla``: ``S_t = exp(g_t) S_{t-1} + k_t^T v_t``, ``o_t = scale * q_t S_t``.

    Chunks of 64 tokens, in three to five launches: the cumulative log-decay within each chunk
    (float32 ``[B, H, T]`` scratch); the state at the start of each chunk (``h``, returned for
    the backward), one program per (sequence, head, state tile) walking its chunks; each chunk's
    output from that state and the causal in-chunk attention, one program per (chunk, head,
    V block); and, with ``cu_seqlens`` only, a walk of each whole sequence that does the work
    only where the clamped offsets fall somewhere. When the state walk would have very few
    programs (long equal-length sequences, few heads: see ``_segments``), each sequence is
    walked as segments side by side twice: once for each segment's own end state, then, after
    one short pass across segments for the state at each segment's start, again from that state
    to store the chunk states (float32 scratch ``[N * segments, H, K, V]`` twice).

    Args:
        q: ``[B, T, H, K]``, bfloat16, float16 or float32, any strides.
        k: ``[B, T, H, K]``, ``q``'s dtype, any strides.
        v: ``[B, T, H, V]``, ``q``'s dtype, any strides.
        g: ``[B, T, H]`` float32 log-decay per token and head, any strides.
        scale: multiplies the output; None means ``K ** -0.5``; finite (``ValueError``
            otherwise, Note [finite scale]).
        initial_state: ``[N, H, K, V]`` float32 state before the first token of each sequence,
            or None (zeros).
        cu_seqlens: ``[N + 1]`` int32 or int64 offsets of ``N`` packed sequences in ``T``, any
            stride (needs ``B == 1`` and ``N >= 1``, else ``ValueError``; valid offsets are
            nondecreasing, with ``cu_seqlens[0] == 0`` and ``cu_seqlens[-1] == T``), or None
            (``N = B`` sequences of length ``T``). Other values are not refused but never lead
            outside the tensors: sequence ``i`` runs over ``[bos, eos)`` with
            ``bos = clamp(cu_seqlens[i], 0, T)`` and ``eos = clamp(cu_seqlens[i + 1], bos, T)``;
            tokens that no sequence covers get zeros in ``output``; tokens that several
            sequences cover (decreasing offsets) get the values of one of them, unspecified.
        output_final_state: whether to return the state after each sequence's last token.

    Returns:
        ``(output, h, final_state)``, newly allocated and contiguous: ``output`` is
        ``[B, T, H, V]`` in ``q``'s dtype; ``h`` is ``[S, H, K, V]`` in ``q``'s dtype, the state
        at the start of each chunk for :func:`chunk_gla_bwd` (``S`` = ``B * ceil(T / 64)``, or
        ``ceil(T / 64) + N - 1`` with ``cu_seqlens``: a slot per chunk, and zeros in the slots
        between packed sequences);
        ``final_state`` is ``[N, H, K, V]`` float32, or None when ``output_final_state`` is
        false.

    Mutates nothing. ``K <= 256`` (``ValueError`` otherwise); ``V`` is unrestricted;
    ``initial_state`` of another shape than ``[N, H, K, V]``: ``ValueError``.
    """
    B, T, H, K = q.shape
    scale = _scale(scale, K)
    V = v.shape[-1]
    cu_seqlens, N = _packed(cu_seqlens, B, T, q.device)
    _per_sequence("initial_state", initial_state, (N, H, K, V))
    o = q.new_empty((B, T, H, V))
    ht = q.new_empty((N, H, K, V), dtype=torch.float32) if output_final_state else None
    h0 = _float32(initial_state)
    use_cu = cu_seqlens is not None
    NT = cdiv(T, _BT)
    NS = _state_slots(B, T, N, use_cu)

    if N * H * K * V == 0 or B * T == 0:
        # Nothing to launch: no tokens, so outputs are zeros and the state passes through.
        o.zero_()
        if ht is not None:
            if h0 is None:
                ht.zero_()
            else:
                ht.copy_(h0)
        return o, q.new_zeros((NS, H, K, V)), ht

    if g.dtype is not torch.float32:
        g = g.to(torch.float32)
    BT, (hk, hv, hw, hs), (ok, ov, ow, os_), (fk, fv, fw, fs) = _fwd_config(K, V, q.dtype)
    mode = _mode(q.dtype)
    gc = q.new_empty((B, H, 2, T), dtype=torch.float32)
    # The gap slots of packed sequences are never written: zeros keep the returned h defined.
    h = (q.new_zeros if use_cu else q.new_empty)(
        (NS, H, K, V), dtype=q.dtype if mode == 0 else torch.float32
    )
    flag = q.new_empty((1,), dtype=torch.int32) if use_cu else None
    launchable(_gla_fwd_g_kernel, o)[(NS, cdiv(H, _BH))](
        g,
        gc,
        cu_seqlens,
        flag,
        T,
        H,
        N,
        NT,
        *g.stride(),
        BT=BT,
        BH=_BH,
        USE_CU=use_cu,
        num_warps=4,
        num_stages=1,
    )
    tiles = cdiv(K, hk) * cdiv(V, hv)
    segments = _walk_segments(N * H * tiles, NT, use_cu)
    _launch_h_walk(o, k, v, gc, h0, h, ht, cu_seqlens, N, NT, BT, (hk, hv, hw, hs), mode, segments)
    strides = (*q.stride(), *k.stride(), *v.stride())
    launchable(_gla_fwd_o_kernel, o)[(cdiv(V, ov) * NS, H)](
        q,
        k,
        v,
        gc,
        h,
        o,
        cu_seqlens,
        flag,
        float(scale),
        T,
        H,
        N,
        NT,
        *strides,
        K=K,
        V=V,
        BT=BT,
        BK=ok,
        BV=ov,
        USE_CU=use_cu,
        MODE=mode,
        num_warps=ow,
        num_stages=os_,
    )
    if use_cu:
        launchable(_gla_fwd_kernel, o)[(N * H, cdiv(V, fv))](
            q,
            k,
            v,
            g,
            h0,
            o,
            ht,
            cu_seqlens,
            flag,
            float(scale),
            T,
            H,
            *strides,
            *g.stride(),
            K=K,
            V=V,
            BT=_BT,
            BK=fk,
            BV=fv,
            USE_H0=h0 is not None,
            STORE_HT=ht is not None,
            MODE=mode,
            num_warps=fw,
            num_stages=fs,
        )
    # Under the interpreter bf16 states are walked in float32 (MODE 2); the products round them
    # to bf16 on use, so h is returned rounded as the GPU stores it.
    return o, h.to(q.dtype), ht


def chunk_gla_bwd(q, k, v, g, scale: float | None, initial_state, cu_seqlens, do, dht, h=None):
    """Backward of ``chunk_gla``: the gradients of every differentiable forward input.

    Chunks of 64 tokens, in three or four launches (more where the walks split, and three
    more with ``cu_seqlens``): the
    cumulative log-decay within each chunk, as in :func:`chunk_gla_fwd`; the gradient of the
    state at the end of each chunk, one program per (sequence, head, state tile) walking its
    chunks backwards (the last step gives ``dh0``), side by side in one launch with the walk
    that recomputes the state at the start of each chunk unless ``h`` brings the forward's;
    then ``dq``, ``dk`` and ``dg`` from those states and the in-chunk attention: for 16-bit inputs with ``K <= 64`` one
    item per (chunk, head) that computes ``dv`` as well, taken in turn by two programs per SM
    (Note [persistent passes]; one program per item with ``cu_seqlens``), otherwise one program
    per (chunk, head, K block) and a fourth launch for ``dv``, one program per (chunk, head,
    V block). When each
    walk would have very few programs (long equal-length sequences, few heads: see
    ``_segments``), each runs as in :func:`chunk_gla_fwd`: segments side by side, twice, with a
    short launch across segments between (float32 scratch ``[N * segments, H, K, V]`` twice
    per walk). With ``cu_seqlens``, a walk of each whole sequence that does
    the work only where the clamped offsets fall somewhere (the chunks of different sequences
    may then overlap) follows.

    Args:
        q, k, v, g, scale, initial_state, cu_seqlens: as for :func:`chunk_gla_fwd`
            (``q, k: [B, T, H, K]``, ``v: [B, T, H, V]``, ``g: [B, T, H]`` float32,
            ``initial_state: [N, H, K, V]`` float32 or None, ``cu_seqlens: [N + 1]`` or None;
            malformed offsets are clamped as there, and gradients of tokens that no sequence
            covers are zeros).
        do: ``[B, T, H, V]``, the gradient of ``output`` (``q``'s dtype), any strides.
        dht: ``[N, H, K, V]`` float32, the gradient of ``final_state``, or None (zero).
        h: the ``h`` that :func:`chunk_gla_fwd` returned for these inputs, or None (the states
            are then recomputed, as they are also where the walks here run as segments). Of
            another shape, dtype or device: ``ValueError``.

    Returns:
        ``(dq, dk, dv, dg, dh0)``, newly allocated and contiguous: ``dq`` ``[B, T, H, K]`` in
        ``q``'s dtype, ``dk`` ``[B, T, H, K]`` in ``k``'s dtype, ``dv`` ``[B, T, H, V]`` in
        ``v``'s dtype, ``dg`` ``[B, T, H]`` float32, ``dh0`` ``[N, H, K, V]`` float32 (the
        gradient of ``initial_state``, returned also when it is None).

    Mutates nothing. Scratch: one ``[S, H, K, V]`` state tensor, two without a usable ``h``
    (``S`` as for ``h``; ``q``'s dtype for 16-bit inputs on a GPU, else float32), float32
    ``[B, H, T]`` and, for ``K`` over 64 when ``dv`` has its own launch, ``[K / 64, B, T, H]``;
    with ``cu_seqlens`` also the fallback's float32 ``NV * (2 * T * H * K + T * H + N * H)``
    (``NV`` = number of V blocks). ``K <= 256`` (``ValueError`` otherwise); ``initial_state``
    or ``dht`` of another shape than ``[N, H, K, V]``: ``ValueError``.
    """
    B, T, H, K = q.shape
    scale = _scale(scale, K)
    V = v.shape[-1]
    cu_seqlens, N = _packed(cu_seqlens, B, T, q.device)
    _per_sequence("initial_state", initial_state, (N, H, K, V))
    _per_sequence("dht", dht, (N, H, K, V))
    h_saved = _saved_states(h, q, v, N, cu_seqlens is not None)
    dq = q.new_empty((B, T, H, K))
    dk = k.new_empty((B, T, H, K))
    dv = v.new_empty((B, T, H, V))
    dg = q.new_empty((B, T, H), dtype=torch.float32)
    dh0 = q.new_empty((N, H, K, V), dtype=torch.float32)
    h0 = _float32(initial_state)
    dht = _float32(dht)

    if N * H * K * V == 0 or B * T == 0:
        dq.zero_()
        dk.zero_()
        dv.zero_()
        dg.zero_()
        if dht is None:
            dh0.zero_()
        else:
            dh0.copy_(dht)
        return dq, dk, dv, dg, dh0

    if g.dtype is not torch.float32:
        g = g.to(torch.float32)
    BT, (hk, hv, hw, hs), (qk, qv, qw, qs, qp), dv_cfg, fb = _bwd_config(K, V, q.dtype)
    fuse_dv = dv_cfg is None
    mode = _mode(q.dtype)
    cu = cu_seqlens
    use_cu = cu is not None
    NT = cdiv(T, BT)
    NS = _state_slots(B, T, N, use_cu)
    NTOK = B * T
    NKG = cdiv(K, qk)
    gc = q.new_empty((B, H, 2, T), dtype=torch.float32)
    sdt = q.dtype if mode == 0 else torch.float32
    dh = q.new_empty((NS, H, K, V), dtype=sdt)
    dg_part = q.new_empty((NKG, B, T, H), dtype=torch.float32) if NKG > 1 else None
    flag = q.new_empty((1,), dtype=torch.int32) if use_cu else None
    q_s, k_s, v_s, do_s = q.stride(), k.stride(), v.stride(), do.stride()

    launchable(_gla_fwd_g_kernel, dv)[(NS, cdiv(H, _BH))](
        g,
        gc,
        cu,
        flag,
        T,
        H,
        N,
        NT,
        *g.stride(),
        BT=BT,
        BH=_BH,
        USE_CU=use_cu,
        num_warps=4,
        num_stages=1,
    )
    tiles = cdiv(K, hk) * cdiv(V, hv)
    NP = N * H * tiles
    seg_max = _BWD_SEG_MAX_PROGRAMS if h_saved is not None else _BWD_SEG_MAX_PROGRAMS_RECOMPUTING
    segments = _walk_segments(NP, NT, use_cu, seg_max)
    if h_saved is None:
        h = q.new_empty((NS, H, K, V), dtype=sdt)
    else:
        # The forward's chunk states: only the gradients are walked.
        h = h_saved if mode != 2 else h_saved.to(torch.float32)
    state_cfg = (hk, hv, hw, hs)
    if _BWD_STATES_FUSED and h_saved is None and segments[1] == 1:
        launchable(_gla_bwd_states_kernel, dv)[(2 * NP,)](
            k,
            v,
            q,
            do,
            gc,
            h0,
            h,
            dht,
            dh,
            dh0,
            cu,
            float(scale),
            T,
            H,
            NT,
            NP,
            *k_s,
            *v_s,
            *q_s,
            *do_s,
            K=K,
            V=V,
            BT=BT,
            BK=hk,
            BV=hv,
            USE_CU=use_cu,
            USE_H0=h0 is not None,
            USE_DHT=dht is not None,
            MODE=mode,
            num_warps=hw,
            num_stages=hs,
        )
    else:
        if h_saved is None:
            _launch_h_walk(dv, k, v, gc, h0, h, None, cu, N, NT, BT, state_cfg, mode, segments)
        _launch_dh_walk(
            dv, q, do, gc, dht, dh, dh0, cu, scale, N, NT, BT, state_cfg, mode, segments
        )
    per_sm = 0 if use_cu else qp
    launchable(_gla_bwd_dqk_kernel, dv)[_items_grid(NKG * NS, H, q.device, per_sm)](
        q,
        k,
        v,
        gc,
        h,
        dh,
        do,
        dq,
        dk,
        dv,
        dg,
        dg_part,
        cu,
        flag,
        float(scale),
        T,
        H,
        N,
        NT,
        NTOK,
        *q_s,
        *k_s,
        *v_s,
        *do_s,
        NKG * NS,
        K=K,
        V=V,
        BT=BT,
        BK=qk,
        BV=qv,
        USE_CU=use_cu,
        FUSE_DV=fuse_dv,
        MODE=mode,
        PERSIST=per_sm > 0,
        num_warps=qw,
        num_stages=qs,
    )
    if not fuse_dv:
        _bwd_dv(
            q,
            k,
            gc,
            dh,
            do,
            dv,
            dg,
            dg_part,
            cu,
            flag,
            scale,
            N,
            NT,
            NS,
            NKG,
            BT,
            dv_cfg,
            mode,
        )
    if use_cu:
        _bwd_sequential(q, k, v, g, scale, h0, cu, flag, do, dht, dq, dk, dv, dg, dh0, N, fb, mode)
    return dq, dk, dv, dg, dh0


def _bwd_dv(q, k, gc, dh, do, dv, dg, dg_part, cu, flag, scale, N, NT, NS, NKG, BT, cfg, mode):
    """The dv pass of :func:`chunk_gla_bwd` (which sums the partial dg too)."""
    B, T, H, K = q.shape
    V = do.shape[-1]
    vk, vv, vw, vs, vp = cfg
    NTOK = B * T
    q_s, k_s, do_s = q.stride(), k.stride(), do.stride()
    per_sm = 0 if cu is not None else vp
    NVS = cdiv(V, vv) * NS
    launchable(_gla_bwd_dv_kernel, dv)[_items_grid(NVS, H, q.device, per_sm)](
        q,
        k,
        gc,
        dh,
        do,
        dv,
        dg,
        dg_part,
        cu,
        flag,
        float(scale),
        T,
        H,
        N,
        NT,
        NTOK,
        *q_s,
        *k_s,
        *do_s,
        NVS,
        K=K,
        V=V,
        BT=BT,
        BK=vk,
        BV=vv,
        NKG=NKG,
        USE_CU=cu is not None,
        MODE=mode,
        PERSIST=per_sm > 0,
        num_warps=vw,
        num_stages=vs,
    )


def _bwd_sequential(q, k, v, g, scale, h0, cu, flag, do, dht, dq, dk, dv, dg, dh0, N, cfg, mode):
    """The sequential backward: each program walks a whole sequence. With packed sequences
    (``cu`` not None) its kernels do the work only when the clamped offsets fall somewhere
    (``flag`` != 0), and then rewrite every result; without, they always do (the benchmarks
    compare the chunk-parallel passes with it)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    BK, BV, nw, ns = cfg
    NV = cdiv(V, BV)
    NTOK = B * T
    dq_part = q.new_empty((NV, B, T, H, K), dtype=torch.float32)
    dk_part = q.new_empty((NV, B, T, H, K), dtype=torch.float32)
    dg_part = q.new_empty((NV, B, T, H), dtype=torch.float32)
    dhs_part = q.new_empty((NV, N, H), dtype=torch.float32)
    strides = (*q.stride(), *k.stride(), *v.stride(), *g.stride(), *do.stride())
    common = dict(
        K=K,
        V=V,
        BT=_BT,
        BK=BK,
        BV=BV,
        USE_CU=cu is not None,
        USE_DHT=dht is not None,
        MODE=mode,
        num_warps=nw,
        num_stages=ns,
    )
    launchable(_gla_bwd_dkv_kernel, dv)[(N * H, NV)](
        q,
        k,
        v,
        g,
        do,
        dht,
        dk_part,
        dg_part,
        dv,
        dh0,
        cu,
        flag,
        float(scale),
        T,
        H,
        NTOK,
        *strides,
        **common,
    )
    launchable(_gla_bwd_dq_kernel, dv)[(N * H, NV)](
        q,
        k,
        v,
        g,
        do,
        h0,
        dht,
        dq_part,
        dg_part,
        dhs_part,
        cu,
        flag,
        float(scale),
        T,
        H,
        N,
        NTOK,
        *strides,
        USE_H0=h0 is not None,
        **common,
    )
    del common["V"], common["BV"]
    launchable(_gla_bwd_dg_kernel, dv)[(N * H,)](
        dq_part,
        dk_part,
        dg_part,
        dhs_part,
        dq,
        dk,
        dg,
        cu,
        flag,
        T,
        H,
        N,
        NTOK,
        NV=NV,
        **common,
    )


def chunk_gla_bwd_sequential(q, k, v, g, scale, initial_state, cu_seqlens, do, dht):
    """:func:`chunk_gla_bwd` by the sequential kernels alone (one program per sequence, head and
    V block walking every chunk), as the backward was computed before the chunk-parallel
    passes; for comparisons. Same arguments and results; ``g`` float32."""
    B, T, H, K = q.shape
    scale = _scale(scale, K)
    V = v.shape[-1]
    cu, N = _packed(cu_seqlens, B, T, q.device)
    h0, dht = _float32(initial_state), _float32(dht)
    out = (
        q.new_empty((B, T, H, K)),
        k.new_empty((B, T, H, K)),
        v.new_empty((B, T, H, V)),
        q.new_empty((B, T, H), dtype=torch.float32),
        q.new_empty((N, H, K, V), dtype=torch.float32),
    )
    flag = None
    if cu is not None:
        # every offset "falls": the kernels do the work
        flag = torch.ones((1,), dtype=torch.int32, device=q.device)
    _bwd_sequential(
        q,
        k,
        v,
        g,
        scale,
        h0,
        cu,
        flag,
        do,
        dht,
        *out,
        N,
        _config(K, V, q.dtype, True),
        _mode(q.dtype),
    )
    return out
