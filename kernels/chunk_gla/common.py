"""Jit helpers shared by chunk_gla's kernels: dot products and casts by MODE, sequence bounds
from the offsets, tiles and pointers, and the in-chunk log-decay."""

import triton
import triton.language as tl

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
def _slot_chunk(cu, flag, i_s, T, N, NT, BT: tl.constexpr, USE_CU: tl.constexpr):
    # (batch row, first token, end token, chunk, whether this program works, whether the offsets
    # are ordered) of state slot i_s in the chunk-parallel passes. With packed sequences whose
    # clamped offsets fall somewhere (flag != 0, set by _gla_fwd_g_kernel) no slot is live: the
    # sequential kernels then produce every result.
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
def _rows(row, i_h, H, D, o_d):
    # Offsets of x[row, i_h, o_d] in a contiguous [rows, H, D] tensor, [len(row), len(o_d)].
    return (row[:, None] * H + i_h) * D + o_d[None, :]


@triton.jit
def _zero_block(x, r, m_r, i_h, H, D, o_d, m_d, BT: tl.constexpr, BD: tl.constexpr):
    # Store zeros into the [BT, BD] block x[r, i_h, o_d] (contiguous [B * T, H, D]) where m_r.
    b_z = tl.zeros([BT, BD], dtype=x.dtype.element_ty)
    tl.store(x + _rows(r, i_h, H, D, o_d), b_z, mask=m_r[:, None] & m_d[None, :])


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
def _head_ptr(x, i_b, i_h, st, o_d):
    # [1, BD] pointers to x[i_b, 0, i_h, o_d] (strides st, a tuple of four); add t[:, None] *
    # st[1] for the rows of a chunk.
    return x + i_b * st[0] + i_h * st[2] + o_d[None, :] * st[3]


@triton.jit
def _head_ptr_t(x, i_b, i_h, st, o_d):
    # [BD, 1] pointers to x[i_b, 0, i_h, o_d]: _head_ptr's transposed, for [BD, BT] loads.
    return x + i_b * st[0] + i_h * st[2] + o_d[:, None] * st[3]


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
    # In-chunk cumulative log-decay G + C and its last entry G_L + C_L from g itself (padding
    # has g = 0, so exp(G_L - G_t) is exactly 1 at the last token).
    b_g = _floored(tl.load(p_g0 + t * s_gt, mask=m_t, other=0.0).to(tl.float32))
    b_G, b_C = _cumulative(b_g)
    last = o_t == BT - 1
    b_GL = tl.sum(tl.where(last, b_G, 0.0), axis=0)
    b_CL = tl.sum(tl.where(last, b_C, 0.0), axis=0)
    return b_G, b_C, b_GL, b_CL


@triton.jit
def _stored_decay(p_g0, t, m_t, bos, eos, i_c, T, BT: tl.constexpr):
    # _chunk_decay's four values of chunk i_c as _gla_fwd_g_kernel stored them (p_g0: the
    # head's two rows of gc, G then C).
    b_G = tl.load(p_g0 + t, mask=m_t, other=0.0)
    b_C = tl.load(p_g0 + T + t, mask=m_t, other=0.0)
    p_L = p_g0 + tl.minimum(bos + i_c * BT + BT, eos) - 1
    return b_G, b_C, tl.load(p_L), tl.load(p_L + T)


@triton.jit
def _causal_decay(b_G, b_C, mask, TRANS: tl.constexpr):
    # [i, j] = exp(G_i - G_j) where mask (query i, key j), else 0; TRANS: [j, i] instead.
    if TRANS:
        span = _span(b_G[None, :], b_C[None, :], b_G[:, None], b_C[:, None])
    else:
        span = _span(b_G[:, None], b_C[:, None], b_G[None, :], b_C[None, :])
    return tl.exp(tl.where(mask, span, float("-inf")))


@triton.jit
def _uncovered(i_n, bos, eos, T, H, fallen):
    # Rows of the packed batch that no sequence may cover, zero-filled by the programs of the
    # first and the last sequence: [0, head) before sequence 0 and [tail, T) after sequence
    # N - 1 (head = 0 and tail = T for the others, and where the offsets do not fall; valid
    # offsets make both ranges empty). With the clamping of _seq_bounds, each row in
    # [bos_0, eos_{N-1}) lies in some sequence (the offsets must rise across it somewhere
    # between), so these ranges hold every uncovered row.
    N = tl.num_programs(0) // H
    head = tl.where(i_n == 0, bos, 0)
    tail = tl.where(i_n == N - 1, eos, T)
    return tl.where(fallen, head, 0), tl.where(fallen, tail, T)


@triton.jit
def _zero_rows(
    x, lo, hi, i_h, H, D: tl.constexpr, o_d, m_d, o_t, BT: tl.constexpr, BD: tl.constexpr
):
    # Store zeros into x[0, t, i_h, o_d] (contiguous [1, T, H, D]) for tokens t in [lo, hi);
    # with D = 0, into x[0, t, i_h] (contiguous [1, T, H]).
    for i_c in range(0, tl.cdiv(tl.maximum(hi - lo, 0), BT)):
        t = lo + i_c * BT + o_t
        if D == 0:
            tl.store(x + t * H + i_h, tl.zeros([BT], dtype=x.dtype.element_ty), mask=t < hi)
        else:
            b_z = tl.zeros([BT, BD], dtype=x.dtype.element_ty)
            tl.store(x + _rows(t, i_h, H, D, o_d), b_z, mask=(t < hi)[:, None] & m_d[None, :])


@triton.jit
def _zero_uncovered(x, head, tail, T, i_h, H, D: tl.constexpr, o_d, m_d, o_t, BT: tl.constexpr,
                    BD: tl.constexpr):  # fmt: skip
    # _zero_rows over the rows that _uncovered gives: [0, head) and [tail, T).
    _zero_rows(x, 0, head, i_h, H, D, o_d, m_d, o_t, BT, BD)
    _zero_rows(x, tail, T, i_h, H, D, o_d, m_d, o_t, BT, BD)


@triton.jit
def _program_seq(i_nh, cu, flag, T, H, USE_CU: tl.constexpr, USE_FLAG: tl.constexpr):
    # A program of a sequential walk: i_nh enumerates (sequence, head) pairs, head fastest; grid
    # axis 1 the V blocks. Returns (sequence, head, V block, batch row, first token, end token,
    # whether the offsets fall). With USE_FLAG the walk works only where packed offsets fall
    # (flag, set by _gla_fwd_g_kernel): elsewhere its end token is its first (nothing to walk).
    i_n = i_nh // H
    i_h = i_nh % H
    i_b, bos, eos = _seq_bounds(cu, i_n, T, USE_CU)
    fallen = True
    if USE_FLAG:
        fallen = tl.load(flag) != 0
        eos = tl.where(fallen, eos, bos)
    return i_n, i_h, tl.program_id(1), i_b, bos, eos, fallen
