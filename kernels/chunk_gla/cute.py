"""chunk_gla's forward in one walk, in CuTeDSL for Hopper (sm90): warpgroup matrix products
(wgmma) on tiles that the tensor memory accelerator (TMA) brings into shared memory.

Same function as ``_gla_fwd_fused_kernel`` (fwd.py): one CTA per (sequence or segment, head, V
block of 64), of one warpgroup or of three (Note [chunk_gla CuTe walk's warpgroups]), walks its
chunks of 64 tokens in order with the state ``S`` (``[K, 64]``, float32) in registers, and where
the chunk states are kept (``save_states``) stores the state at each chunk's start into its
slot. Packed sequences are walked whole from their clamped offsets; the CTAs of the first and
the last sequence zero the tokens that no sequence covers. The launcher and its contract are in triton.py (``_cute_fwd``) and config.py
(``_cute_plan``): where that contract holds (Hopper, CuTeDSL installed, 16-bit inputs) the walk
runs first, and the Triton plans everywhere else (docs/performance.md, "chunk_gla: the CuTeDSL
walk").

Note [chunk_gla CuTe walk]: per chunk, with ``G`` the in-chunk cumulative log-decay (and ``C`` its
compensation, Note [log-decay floor]) read from the ``[B, H, 2, T]`` scratch of
``_gla_fwd_g_kernel``:

    A   = q k^T                              (wgmma, both operands in shared memory)
    O2  = q S16                              (S16: the state rounded to 16 bits in shared memory)
    P   = A * scale * exp(G_i - G_j), j <= i (registers, then rounded to 16 bits in place: the
                                             A operand of the next product stays in registers)
    o   = P v + scale * exp(G_i) * O2
    vd  = v * exp(G_L - G_j)                 (into shared memory)
    S   = exp(G_L) S + k^T vd                (k's tile read transposed: the same bytes, viewed
                                             as the M-major A operand)

Kept chunk states are S16 as the chunk starts: one warp issues its tile's TMA store before the
chunk's loads are waited for, and waits for the store to have read S16 before the barrier after
which S16 is rewritten, so the store runs under the chunk's products.

The loads of chunk ``c + 2`` are in flight while chunk ``c`` is computed (two stages of q, k and
v tiles, each completing on its own mbarrier). Each chunk's G and C come in by TMA with its
stage, and the table of chunk ``c + 1`` is published from them at the end of chunk ``c``: no
thread loads from global memory inside the walk. They come from a flat view of the scratch as
boxes of ``_GBOX`` values that start at the 16-byte boundary at or before the chunk's first
token (a TMA box must start on one), so any T and any packed sequence's start; the table reads
them from the token's offset past that boundary (``_decay_rows``). ptxas
makes the proxy fence after each write to shared memory that a product reads a
``MEMBAR.ALL.CTA``, and a memory barrier waits for the thread's loads in flight: a log-decay
loaded chunks ahead by the threads would still put a round trip to memory on every chunk's
chain (the state walks took 613 µs with such loads and their table, 403 without:
docs/performance.md, "chunk_gla: the CuTeDSL state walks"). Tokens past
``T`` are zeros (the TMA fills them); tokens past a packed sequence's end (the next sequence's)
enter neither the state (weight exp(-inf) = 0) nor the attention (the causal mask stops at the
sequence's end), and their outputs are not stored.

Note [chunk_gla CuTe walk's warpgroups]: where every CTA has a multiprocessor of its own
(``config._cute_walk_split``), the walk runs as three warpgroups (``_WalkWS``). One warpgroup, the
state's, walks ``S`` in registers: per chunk it writes vd and, once the chunk's tile is free,
``S16`` (S rounded to 16 bits, which the chunk's outputs read) in one of three tiles, both under
one fence, then steps ``S`` with k^T vd. The two others take the chunks' outputs in turns (even
and odd chunks): q k^T, q S16, P and P v, each a chunk's whole output. So the products and
exponentials of two outputs run beside the state's chain, where the one warpgroup of ``_Walk``
runs them all one after another. Every log-decay factor is formed where it is used, from the G
and C that the chunk's stage brought: the state's warpgroup publishes no table, so nothing but
vd, S16 and the product is on its chain. Four stages of q, k and v tiles; each stage's ``full``
mbarrier completes with its TMA loads, its ``empty`` one when the state's warpgroup has read its
k and v, and the output warpgroup that read it last issues its next loads after both, once it
has formed its chunk's output and stored it (Note [output tiles from the q tile]). Each
state tile's ``ready`` mbarrier completes when the state's warpgroup has written it, its
``free`` one when the output warpgroup has read it (with ``save_states`` that warpgroup also
stores it by TMA, and waits for the store to have read it first); the state's warpgroup writes
a tile again only after that. Where more CTAs walk than there are multiprocessors, two CTAs of
``_Walk`` share each (384 threads of ``_WalkWS`` and their registers leave room for only one)
and measured faster.

Note [output tiles from the q tile]: a chunk's output tile (BT x BV, 16-bit) goes out by TMA
from shared memory, not from the threads' registers. There each thread held pairs of columns in
two rows, so every store of a warp wrote half of eight 32-byte sectors, and the walk of three
warpgroups at B4 T4096 H16 took 106 µs against 60 µs without the stores at all (86 µs by TMA;
docs/performance.md, "chunk_gla: the CuTeDSL walk"). Shared memory has no room for a tile of its
own beside four stages and three state tiles (nor beside two CTAs of one warpgroup at K = 128),
so the tile is written over the stage's q tile, which the chunk's products no longer read once
they are waited for: the writes, a proxy fence and a barrier of the warpgroup, then one warp
issues the store and waits for it to have read the tile before it issues the stage's next
loads. Whole tiles only (rows past T are clipped by the TMA); a packed sequence's last, partial
chunk is stored from registers, not to write over the next sequence's tokens. The walk of one
warpgroup at K = 64 keeps a tile of its own (two CTAs still fit), and stores after its stage's
next loads are issued.

Note [loads before stores]: vd's 16-byte loads of v and its stores into vd's tile go through
views of shared memory that the compiler is not told are apart, so written one after the other
each load may wait behind the store before it. ``_decay_v`` (the walk of one warpgroup) issues
every load first, which measured 2% faster at B1 T32768 H16. The walk of three warpgroups
keeps them one after the other (``_decay_v_stage``): with the output warpgroups' products
reading shared memory beside them, all loads at once measured slower there (docs/performance.md,
"chunk_gla: the CuTeDSL walk").

Every wgmma of a warpgroup must be on paths that ptxas can prove the whole warpgroup takes:
where it cannot (a branch on the thread index, one warp of the warpgroup waiting on an
mbarrier inside the products' loop, an accumulator written under a per-thread condition), it
waits for each product before the next one for the whole kernel, and says so only in advisory
C7520. So the output warpgroups wait on ``empty`` together and one warp issues the loads after,
the start state is selected, not branched on, and the chunk states' stores of the walk of three
warpgroups are issued by an output warpgroup (in the state's, one warp's branch beside its
products serialized them once a final state was stored too). ``tests/cute_ptxas_check.py`` (and
its test) reads the advisories.
"""

from __future__ import annotations

import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
import torch
from cutlass import Float32, Int32, const_expr
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.tensor_utils.layout import LayoutEnum

from .._cute import CompileCache, TensorArg

BT = 64  # tokens per chunk
BV = 64  # V columns per CTA
_THREADS = 128  # one warpgroup
_STAGES = 2
# Each chunk's G and C come in by TMA as boxes of _GBOX float32 values from the 16-byte boundary
# at or before its first token (a box must start on one), into rows of _GROW values (a TMA
# destination starts on 128 bytes).
_GBOX = BT + 4
_GROW = 96
_LOG2E = math.log2(math.e)
# Separate wgmma groups, so that A = q k^T is used while q S16 runs, and the output is stored
# while the state's product runs (False: each pair of products waited for together).
OVERLAP = True
# The walk of one warpgroup stores each whole output tile by TMA from shared memory (False: from
# registers, as first shipped; the walk of three always does): Note [output tiles from the q
# tile]. No global store of its threads is then in flight at the proxy fence that ends each chunk.
_OUT_TMA = True


def _gemm(tiled_mma, acc, a, b, accumulate: bool):
    """acc (+)= a b over every k block of the partitioned operands (MMA, MMA_M|N, MMA_K)."""
    for kb in range(cute.size(a, mode=[2])):
        tiled_mma.set(warpgroup.Field.ACCUMULATE, accumulate or kb != 0)
        cute.gemm(tiled_mma, acc, a[None, None, kb], b[None, None, kb], acc)


def _acc_as_operand_a(acc: cute.Tensor, tiled_mma_rs, dtype) -> cute.Tensor:
    """A float32 accumulator rounded to ``dtype`` as the register A operand of ``tiled_mma_rs``:
    for 16-bit types a thread's accumulator values are already the A values it must hold, so
    only the layout's grouping changes (k blocks of 16 columns)."""
    a = tiled_mma_rs.tv_layout_A.shape[1]
    c = acc.layout
    layout = cute.make_layout(
        (a, c.shape[1], (c.shape[2], cute.size(c, mode=[0]) // cute.size(a))),
        stride=(c.stride[0], c.stride[1], (c.stride[2], cute.size(a, mode=[2]) * c.stride[0][2])),
    )
    op = cute.make_rmem_tensor_like(layout, dtype)
    cute.make_tensor(op.iterator, acc.layout).store(acc.load().to(dtype))
    return op


def _stage(smem_layout):
    """The first stage of a staged (rows, columns, stages) shared memory layout."""
    return cute.slice_(smem_layout, (None, None, 0))


def _tma_atom(t, modes, smem_one, tile, op=None):
    """A TMA load atom (or, given ``op``, another TMA copy) over ``t`` viewed with its modes in
    the order ``modes`` (the tile's first), copying boxes of ``tile`` to or from ``smem_one``; and
    the TMA's coordinate tensor of that view."""
    view = cute.make_tensor(
        t.iterator,
        cute.make_layout(
            tuple(t.shape[m] for m in modes), stride=tuple(t.stride[m] for m in modes)
        ),
    )
    op = cpasync.CopyBulkTensorTileG2SOp() if op is None else op
    return cpasync.make_tiled_tma_atom(op, view, smem_one, tile)


@cute.jit
def _tma_tiles(tma, smem, g, tile, i_h, i_x):
    """A TMA copy's partitions of the shared tiles ``smem`` (rows, columns, stage), by stage, and
    of ``g[:, :, i_h, i_x]`` in tiles of ``tile`` along its rows, by tile."""
    return cpasync.tma_partition(
        tma,
        0,
        cute.make_layout(1),
        cute.group_modes(smem, 0, 2),
        cute.group_modes(cute.local_tile(g[None, None, i_h, i_x], tile, (None, 0)), 0, 2),
    )


@cute.jit
def _issue(loads, bar, c, s, stage_bytes: cutlass.Constexpr):
    """One warp: the TMA loads of chunk c's q, k and v tiles into stage slot s, completing on
    the mbarrier ``bar`` (a TMA copy elects its issuing lane itself, so every lane of the warp
    must reach it)."""
    tma_q, tQg, tQs, tma_k, tKg, tKs, tma_v, tVg, tVs, tma_g, tGg, tGs, tCg, tCs = loads
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(bar, stage_bytes)
    cute.copy(tma_q, tQg[None, c], tQs[None, s], tma_bar_ptr=bar)
    cute.copy(tma_k, tKg[None, c], tKs[None, s], tma_bar_ptr=bar)
    cute.copy(tma_v, tVg[None, c], tVs[None, s], tma_bar_ptr=bar)
    cute.copy(tma_g, tGg[None, c], tGs[None, s], tma_bar_ptr=bar)
    cute.copy(tma_g, tCg[None, c], tCs[None, s], tma_bar_ptr=bar)


@cute.jit
def _head_loads(
    tmas, gs, smems, i_h, i_b, i_v, bos, K: cutlass.Constexpr, use_cu: cutlass.Constexpr
):
    """The TMA partitions of head i_h's q, k, v and log-decay (``_issue``'s ``loads``): the
    (tokens, cols, H, B) views ``gs`` of the sequence of batch row i_b from token bos, in
    chunks, and the shared tiles ``smems`` (rows, columns, stage slot), V block i_v of v; G and
    C of the log-decay from ``gg``, the flat view of its [B, H, 2, T] scratch, where the
    sequence's first token's are at ``g0`` and ``c0`` (``_decay_starts``)."""
    tma_q, tma_k, tma_v, tma_g = tmas
    gq, gk, gv, gg, g0, c0 = gs
    sQ, sK, sV, sG = smems
    # Chunks start at the sequence's first token (tiles of the TMA's coordinates).
    gq_s = gq[None, None, i_h, i_b]
    gk_s = gk[None, None, i_h, i_b]
    gv_s = gv[None, None, i_h, i_b]
    if const_expr(use_cu):
        gq_s = cute.domain_offset((bos, 0), gq_s)
        gk_s = cute.domain_offset((bos, 0), gk_s)
        gv_s = cute.domain_offset((0, bos), gv_s)
    gQ = cute.local_tile(gq_s, (BT, K), (None, 0))  # (BT, K, chunks)
    gK = cute.local_tile(gk_s, (BT, K), (None, 0))
    gV = cute.local_tile(gv_s, (BV, BT), (i_v, None))  # (BV, BT, chunks)
    tQs, tQg = cpasync.tma_partition(
        tma_q, 0, cute.make_layout(1), cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2)
    )
    tKs, tKg = cpasync.tma_partition(
        tma_k, 0, cute.make_layout(1), cute.group_modes(sK, 0, 2), cute.group_modes(gK, 0, 2)
    )
    tVs, tVg = cpasync.tma_partition(
        tma_v, 0, cute.make_layout(1), cute.group_modes(sV, 0, 2), cute.group_modes(gV, 0, 2)
    )
    # Row G of this head's log-decay, then row C: chunk c's box starts at the 16-byte boundary
    # at or before its first token, BT values after chunk c - 1's (_GBOX, chunks).
    boxes = cute.make_layout((_GBOX, cute.ceil_div(cute.size(gg), BT)), stride=(1, BT))
    gG = cute.composition(cute.domain_offset((g0 - g0 % 4,), gg), boxes)
    gC = cute.composition(cute.domain_offset((c0 - c0 % 4,), gg), boxes)
    tGs, tGg = cpasync.tma_partition(tma_g, 0, cute.make_layout(1), sG[None, 0, None], gG)
    tCs, tCg = cpasync.tma_partition(tma_g, 0, cute.make_layout(1), sG[None, 1, None], gC)
    return (tma_q, tQg, tQs, tma_k, tKg, tKs, tma_v, tVg, tVs, tma_g, tGg, tGs, tCg, tCs)


@cute.jit
def _load_decay(mGc, i_b, i_h, t0, eos, tid):
    """The log-decay of the chunk at token t0 of a sequence ending at eos: thread t < BT gets
    token t0 + t's G and C (zeros past the sequence's end), every thread G_L and its C. Only
    loads: nothing waits for them until ``_publish_decay`` uses them."""
    g = Float32(0.0)
    cc = Float32(0.0)
    if tid < BT and t0 + tid < eos:
        g = mGc[i_b, i_h, 0, t0 + tid]
        cc = mGc[i_b, i_h, 1, t0 + tid]
    last = cutlass.min(t0 + BT, eos) - 1
    gl = mGc[i_b, i_h, 0, last]
    cl = mGc[i_b, i_h, 1, last]
    return g, cc, gl, cl


@cute.jit
def _publish_decay(dec, tid, g, cc, gl, cl, t0, eos, scale):
    """Threads t < BT write the chunk at token t0's table from its log-decay (``g``, ``cc``:
    token t's G and C, zeros past the sequence's end; ``gl``, ``cl``: its last token's): token
    t's G, C, exp(G_L - G) (0 past the sequence's end, whose tokens, another sequence's with
    packed sequences, must not enter the state), scale * exp(G) and G_L to ``dec``."""
    if tid < BT:
        # G_L - G (with compensation); -inf past the end, for a weight of 0.
        span = Float32(-math.inf)
        if t0 + tid < eos:
            span = (gl - g) + (cl - cc)
        dec[tid, 0] = g
        dec[tid, 1] = cc
        dec[tid, 2] = cute.math.exp2(span * _LOG2E, fastmath=True)
        dec[tid, 3] = cute.math.exp2(g * _LOG2E, fastmath=True) * scale
        dec[tid, 4] = gl


@cute.jit
def _decay_starts(i_b, i_h, H, T, bos):
    """Where token bos of batch row i_b and head i_h has its G and its C in the flat view of the
    [B, H, 2, T] log-decay scratch (config._cute_plan keeps B * H * 2 * T below 2**31)."""
    g0 = ((i_b * H + i_h) * 2) * T + bos
    return g0, g0 + T


@cute.jit
def _decay_rows(sG, g0, c0):
    """The G and C views (BT, stage slot) of the stage slots' boxes (``sG``: _GBOX, G and C,
    stage slot) from the chunk's first token on: a box starts at the 16-byte boundary at or
    before it, g0 % 4 (c0 % 4) values earlier, the same for every chunk of the walk."""
    rows = cute.make_layout((BT, cute.size(sG, mode=[2])), stride=(1, 2 * _GROW))
    g = cute.make_tensor(sG.iterator + g0 % 4, rows)
    c = cute.make_tensor(sG.iterator + _GROW + c0 % 4, rows)
    return g, c


@cute.jit
def _publish_stage_decay(dec, tid, sGv, s, t0, eos, scale):
    """``_publish_decay`` from the chunk's G and C that its TMA loads brought into stage slot s
    (``sGv``: ``_decay_rows``'s views; tokens past the sequence's end read as zeros)."""
    sg, sc = sGv
    last = cutlass.min(t0 + BT, eos) - 1 - t0
    gl = sg[last, s]
    cl = sc[last, s]
    if tid < BT:
        live = t0 + tid < eos
        g = cutlass.select_(live, sg[tid, s], Float32(0.0))
        cc = cutlass.select_(live, sc[tid, s], Float32(0.0))
        _publish_decay(dec, tid, g, cc, gl, cl, t0, eos, scale)


@cute.jit
def _stage_last(sGv, s, t0, eos):
    """G_L and C_L (the chunk's last token's G and C) of the chunk at token t0 of a sequence
    ending at eos, from stage slot s (``sGv``: ``_decay_rows``'s views)."""
    sg, sc = sGv
    last = cutlass.min(t0 + BT, eos) - 1 - t0
    return sg[last, s], sc[last, s]


@cute.jit
def _decay_v_stage(zV, zVd, sGv, s, gl, cl, t0, eos, tid, dtype: cutlass.Constexpr):
    """``_decay_v`` with each token's factor exp(G_L - G_j) formed from stage slot s's G and C
    (``gl``, ``cl``: ``_stage_last``'s), 0 past the sequence's end (another sequence's tokens
    with packed sequences, which must not enter the state)."""
    sg, sc = sGv
    for i in cutlass.range_constexpr(BT * BV // 8 // _THREADS):
        e = tid + i * _THREADS
        r = e // (BV // 8)
        span = (gl - sg[r, s]) + (cl - sc[r, s])
        w = cutlass.select_(
            t0 + r < eos, cute.math.exp2(span * _LOG2E, fastmath=True), Float32(0.0)
        )
        x = zV[None, (e % (BV // 8), r, s)].load().to(Float32)
        zVd[None, (e % (BV // 8), r, 0)].store((x * w).to(dtype))


@cute.jit
def _bounds(mCu, i_z, T, cps, nseg, use_cu: cutlass.Constexpr):
    """What CTA row ``i_z`` walks: its batch row, the sequence's tokens [bos, eos), its chunks
    [c_lo, c_hi) counted from bos, the index of its start and end states, and the state slot of
    the sequence's first chunk."""
    if const_expr(use_cu):
        # Sequence i_z of the packed batch row, its offsets clamped into [0, T] as the
        # Triton kernels clamp them (common.py, _seq_bounds), walked whole.
        i_b = Int32(0)
        bos = cutlass.min(cutlass.max(mCu[i_z], 0), T)
        eos = cutlass.min(cutlass.max(mCu[i_z + 1], bos), T)
        c_lo = Int32(0)
        c_hi = (eos - bos + BT - 1) // BT
        i_state = i_z
        # The sequence's first chunk state slot (config._state_slots: one gap slot each).
        slot0 = bos // BT + i_z
    else:
        i_b = i_z // nseg
        i_seg = i_z % nseg
        bos = Int32(0)
        eos = T
        c_lo = i_seg * cps
        c_hi = cutlass.min(c_lo + cps, (T + BT - 1) // BT)
        i_state = i_b * nseg + i_seg
        slot0 = i_b * ((T + BT - 1) // BT)
    return i_b, bos, eos, c_lo, c_hi, i_state, slot0


@cute.jit
def _zero_uncovered(mO, mCu, i_z, i_h, i_v, bos, eos, tid, nthreads: cutlass.Constexpr):
    """Tokens that no sequence covers (before the first's start, after the last's end: with the
    clamping, every other token lies in some sequence) get zeros, from the CTAs of the first and
    the last sequence (``nthreads`` of them, ``tid`` among them)."""
    T = mO.shape[1]
    V = mO.shape[3]
    zero = Float32(0.0).to(mO.element_type)
    if i_z == 0:
        for e in cutlass.range(tid, bos * BV, nthreads):
            if i_v * BV + e % BV < V:
                mO[0, e // BV, i_h, i_v * BV + e % BV] = zero
    if i_z == mCu.shape[0] - 2:
        for e in cutlass.range(eos * BV + tid, T * BV, nthreads):
            if i_v * BV + e % BV < V:
                mO[0, e // BV, i_h, i_v * BV + e % BV] = zero


@cute.jit
def _start_state(acc_h, cH, mS0, i_state, i_h, r0, c0, use_s0: cutlass.Constexpr):
    """The state at the walk's start into the accumulator ``acc_h`` (coordinates ``cH``): its
    rows from r0 and columns from c0 of ``mS0[i_state, i_h]`` with ``use_s0``, else zeros."""
    V = mS0.shape[3]
    for i in cutlass.range_constexpr(cute.size(acc_h)):
        acc_h[i] = Float32(0.0)
        if const_expr(use_s0):
            # A select, not a branch: the accumulator written on a divergent path would make
            # ptxas serialize every warpgroup product of the kernel.
            r, n = cH[i]
            col = c0 + n
            x = mS0[i_state, i_h, r0 + r, cutlass.min(col, V - 1)]
            acc_h[i] = cutlass.select_(col < V, x, Float32(0.0))


@cute.jit
def _end_state(acc_h, cH, mHt, i_state, i_h, r0, c0):
    """The state after the walk, the accumulator ``acc_h`` (coordinates ``cH``), into its rows
    from r0 and columns from c0 of ``mHt[i_state, i_h]``."""
    V = mHt.shape[3]
    for i in cutlass.range_constexpr(cute.size(acc_h)):
        r, n = cH[i]
        if c0 + n < V:
            mHt[i_state, i_h, r0 + r, c0 + n] = acc_h[i]


@cute.jit
def _decay_v(zV, zVd, dec, tid, s, dtype: cutlass.Constexpr):
    """vd = v * exp(G_L - G_j) from stage slot s of v into vd's tile, 8 columns (16 bytes,
    which the 128-byte swizzle keeps together) at a time, by thread ``tid`` of one warpgroup,
    with the factors of the log-decay table ``dec``; every load before the first store (Note
    [loads before stores])."""
    n = BT * BV // 8 // _THREADS
    xs = []
    ws = []
    for i in cutlass.range_constexpr(n):
        e = tid + i * _THREADS
        xs.append(zV[None, (e % (BV // 8), e // (BV // 8), s)].load())
        ws.append(dec[e // (BV // 8), 2])
    for i in cutlass.range_constexpr(n):
        e = tid + i * _THREADS
        zVd[None, (e % (BV // 8), e // (BV // 8), 0)].store((xs[i].to(Float32) * ws[i]).to(dtype))


@cute.jit
def _p_factors(f, cS, g, c, scale):
    """The factors of P = A * f: scale * exp(G_i - G_j) for j <= i, 0 above the diagonal, into
    ``f`` (laid out as the accumulator of A = q k^T, coordinates ``cS``), with the chunk's G and
    C by token (``g``, ``c``: the log-decay table's columns, or a stage slot's rows from
    ``_decay_rows``). Formed while q k^T runs, so that its loads and exponentials wait on
    nothing once A has landed. Rows past the chunk's last token may get inf here (their q rows
    are zeros and their decay unbounded), and tokens past a packed sequence's end hold the next
    sequence's values: they reach only their own output rows, never stored."""
    for i in cutlass.range_constexpr(cute.size(f)):
        qi, kj = cS[i]
        span = (g[qi] - g[kj]) + (c[qi] - c[kj])
        w = cute.math.exp2(span * _LOG2E, fastmath=True) * scale
        f[i] = cutlass.select_(kj > qi, Float32(0.0), w)


@cute.jit
def _form_p(acc_s, f):
    """P = A * f in place in the accumulator ``acc_s`` of A = q k^T (``f``: ``_p_factors``'),
    0 above the diagonal whatever A holds there."""
    for i in cutlass.range_constexpr(cute.size(acc_s)):
        acc_s[i] = cutlass.select_(f[i] == Float32(0.0), Float32(0.0), acc_s[i] * f[i])


@cute.jit
def _store_output(mO, yO, t_pv, cO, i_b, t0, i_h, i_v, n_ok):
    """The chunk's output ``yO`` (16-bit, in the accumulator layout of ``t_pv``, coordinates
    ``cO``) into ``mO[i_b, t0:t0 + n_ok, i_h]``, V block i_v. A whole tile goes out as pairs of
    columns, adjacent in the accumulator and in o: o is contiguous and V a multiple of 8, so the
    tile's first element and its rows are 16-byte aligned."""
    T = mO.shape[1]
    H = mO.shape[2]
    V = mO.shape[3]
    if n_ok == BT and (i_v + 1) * BV <= V:
        first = cute.assume(((i_b * T + t0) * H + i_h) * V + i_v * BV, divby=8)
        rows = cute.assume(H * V, divby=8)
        gO = cute.make_tensor(mO.iterator + first, cute.make_layout((BT, BV), stride=(rows, 1)))
        tOg = t_pv.partition_C(gO)
        cute.autovec_copy(
            cute.recast_tensor(yO, cutlass.Uint32), cute.recast_tensor(tOg, cutlass.Uint32)
        )
    else:
        for i in cutlass.range_constexpr(cute.size(yO)):
            orow, ocol = cO[i]
            if orow < n_ok:
                if i_v * BV + ocol < V:
                    mO[i_b, t0 + orow, i_h, i_v * BV + ocol] = yO[i]


@cute.jit
def _out_tiles(tma_o, go, sO, i_h, i_b, i_v, bos, use_cu: cutlass.Constexpr):
    """The output store's TMA partitions: of the shared tiles ``sO`` (BT, BV, tile), by tile,
    and of this (sequence from token bos, head i_h, V block i_v)'s output in the TMA view ``go``
    ((T, V, H, B)), by chunk."""
    go_s = go[None, None, i_h, i_b]
    if const_expr(use_cu):
        go_s = cute.domain_offset((bos, 0), go_s)
    gOt = cute.local_tile(go_s, (BT, BV), (None, i_v))  # (BT, BV, chunks)
    return cpasync.tma_partition(
        tma_o, 0, cute.make_layout(1), cute.group_modes(sO, 0, 2), cute.group_modes(gOt, 0, 2)
    )


@cute.jit
def _output_operands(qk, qs, pv, tid, sQ, sK, sH, sV):
    """Thread ``tid``'s slice of the output's products (q k^T, q S16, P v) over the shared tiles,
    staged as they are: ``pv``'s slice, the fragments (q and k of q k^T, q and S16 of q S16, v of
    P v), the accumulators of A, q S16 and P v, and the coordinates of A's and the output's."""
    t_qk = qk.get_slice(tid)
    t_qs = qs.get_slice(tid)
    t_pv = pv.get_slice(tid)
    aQ = t_qk.make_fragment_A(t_qk.partition_A(sQ))  # (MMA, M, K, stage)
    bK = t_qk.make_fragment_B(t_qk.partition_B(sK))
    aQs = t_qs.make_fragment_A(t_qs.partition_A(sQ))
    bH = t_qs.make_fragment_B(t_qs.partition_B(sH))
    bV = t_pv.make_fragment_B(t_pv.partition_B(sV))
    acc_s = t_qk.make_fragment_C(t_qk.partition_shape_C((BT, BT)))
    acc_o2 = t_qs.make_fragment_C(t_qs.partition_shape_C((BT, BV)))
    acc_o = t_pv.make_fragment_C(t_pv.partition_shape_C((BT, BV)))
    cS = t_qk.partition_C(cute.make_identity_tensor((BT, BT)))
    cO = t_pv.partition_C(cute.make_identity_tensor((BT, BV)))
    return t_pv, aQ, bK, aQs, bH, bV, acc_s, acc_o2, acc_o, cS, cO


class _Walk:
    """The walk for one (dtype, K, flags): see the module docstring."""

    threads = _THREADS
    stages = _STAGES  # stages of q, k and v tiles
    hbuf = 1  # 16-bit state tiles
    vdbuf = 1  # decayed v tiles
    nbars = _STAGES  # mbarriers
    split = False  # three warpgroups (_WalkWS)

    def __init__(
        self,
        dtype,
        K: int,
        use_s0: bool,
        store_ht: bool,
        use_cu: bool,
        overlap: bool,
        store_h: bool,
    ) -> None:
        if K % BV:
            # Output tiles are written over q tiles (Note [output tiles from the q tile]);
            # config._cute_plan passes K of 64 and 128 only.
            raise ValueError(f"the walk takes K as a multiple of {BV}, got {K}")
        self.use_cu = use_cu
        self.store_h = store_h
        self.overlap = overlap
        self.dtype = dtype
        self.K = K
        self.use_s0 = use_s0
        self.store_ht = store_ht

    def _layouts(self):
        K, dt = self.K, self.dtype
        row, col = LayoutEnum.ROW_MAJOR, LayoutEnum.COL_MAJOR
        # q: A of q k^T and of q S16, K-major. k: B of q k^T, K-major. v (and vd): B of P v and
        # of k^T vd, N-major. S16: B of q S16, N-major.
        slots = self.stages
        sq = sm90_utils.make_smem_layout_a(row, (BT, BT, K), dt, slots)
        sk = sm90_utils.make_smem_layout_b(row, (BT, BT, K), dt, slots)
        sv = sm90_utils.make_smem_layout_b(col, (BT, BV, BT), dt, slots)
        svd = sm90_utils.make_smem_layout_b(col, (BT, BV, BT), dt, self.vdbuf)
        sh = sm90_utils.make_smem_layout_b(col, (BT, BV, K), dt, self.hbuf)
        # The G and C boxes of each stage slot's chunk (float32), each row starting on 128
        # bytes as a TMA destination must.
        sg = cute.make_layout((_GBOX, 2, slots), stride=(1, _GROW, 2 * _GROW))
        return sq, sk, sv, svd, sh, sg

    def _mmas(self):
        dt, K, MN = self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.MN
        f32 = Float32
        qk = sm90_utils.make_trivial_tiled_mma(dt, dt, K, K, f32, (1, 1, 1), (BT, BT))
        qs = sm90_utils.make_trivial_tiled_mma(dt, dt, K, MN, f32, (1, 1, 1), (BT, BV))
        pv = sm90_utils.make_trivial_tiled_mma(
            dt, dt, K, MN, f32, (1, 1, 1), (BT, BV), warpgroup.OperandSource.RMEM
        )
        kv = sm90_utils.make_trivial_tiled_mma(dt, dt, MN, MN, f32, (1, 1, 1), (BT, BV))
        return qk, qs, pv, kv

    @cute.jit
    def __call__(
        self,
        mQ: cute.Tensor,  # [B, T, H, K]
        mK: cute.Tensor,  # [B, T, H, K]
        mV: cute.Tensor,  # [B, T, H, V]
        mGc: cute.Tensor,  # [B, H, 2, T] float32
        mS0: cute.Tensor,  # [B * NSEG, H, K, V] float32 (unused without use_s0)
        mO: cute.Tensor,  # [B, T, H, V]
        mHt: cute.Tensor,  # [B * NSEG, H, K, V] float32 (unused without store_ht)
        mCu: cute.Tensor,  # [N + 1] int32 offsets of packed sequences (unused without use_cu)
        mH: cute.Tensor,  # [slots, H, K, V] the chunk states, 16-bit (unused without store_h)
        scale: Float32,
        cps: Int32,
        nseg: Int32,
        stream: cuda.CUstream,
    ):
        K = self.K
        B, T, H, V = mV.shape
        sq, sk, sv, svd, sh, sg = self._layouts()
        qk, qs, pv, kv = self._mmas()

        # (T, cols, H, B) views of the [B, T, H, cols] tensors, tiles of (BT, cols); v's smem
        # layout is (V, tokens), so its view and box are given in that order. k's tile (tokens,
        # K) for the B operand is K-major, but the TMA box is (tokens, K) either way.
        tma_q, gq = _tma_atom(mQ, (1, 3, 2, 0), _stage(sq), (BT, K))
        tma_k, gk = _tma_atom(mK, (1, 3, 2, 0), _stage(sk), (BT, K))
        tma_v, gv = _tma_atom(mV, (3, 1, 2, 0), _stage(sv), (BV, BT))
        # (V, K, H, slots) view of the chunk states, stored from the 16-bit state's (BV, K) tile.
        store = cpasync.CopyBulkTensorTileS2GOp()
        tma_h, gh = _tma_atom(mH, (3, 2, 1, 0), _stage(sh), (BV, K), store)
        # The log-decay scratch as one flat row, from which each chunk's G and C come in as
        # boxes of _GBOX values (_head_loads): no stride of it needs 16 bytes, so any T.
        flat = cute.make_tensor(mGc.iterator, cute.make_layout((cute.size(mGc),)))
        tma_g, gg = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), flat, cute.make_layout((_GBOX,)), (_GBOX,)
        )
        # The output's tile, stored by TMA (walk of one warpgroup, _OUT_TMA).
        so = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (BT, BT, BV), self.dtype, 1)
        tma_o, go = _tma_atom(mO, (1, 3, 2, 0), _stage(so), (BT, BV), store)
        # A stage's bytes.
        stage_bytes = (
            cute.size_in_bytes(self.dtype, _stage(sq))
            + cute.size_in_bytes(self.dtype, _stage(sk))
            + cute.size_in_bytes(self.dtype, _stage(sv))
            + 2 * _GBOX * 4
        )

        Shared = self._shared(sq, sk, sv, svd, sh, sg, so)
        self.kernel(
            qk, qs, pv, kv, tma_q, gq, tma_k, gk, tma_v, gv, tma_h, gh, tma_g, gg, tma_o, go,
            mS0, mO, mHt, mCu, scale, cps, nseg, sq, sk, sv, svd, sh, sg, so, Shared, stage_bytes,
        ).launch(
            grid=(
                cute.ceil_div(V, BV),
                H,
                mCu.shape[0] - 1 if const_expr(self.use_cu) else B * nseg,
            ),
            block=(self.threads, 1, 1),
            smem=Shared.size_in_bytes(),
            stream=stream,
        )  # fmt: skip

    def _out_tma(self) -> bool:
        """Whether the walk of one warpgroup stores whole output tiles by TMA (``_OUT_TMA``;
        the walk of three always does)."""
        return _OUT_TMA and not self.split

    def _out_tile(self) -> bool:
        """Whether the output's tile has shared memory of its own (K = 64, where two CTAs of one
        warpgroup still fit on a multiprocessor with it); elsewhere each tile goes out from its
        stage's q tile, which its chunk no longer reads then (at K = 128 a tile of its own
        would leave room for one CTA per multiprocessor only, 115 KB each)."""
        return self._out_tma() and self.K == 64

    def _shared(self, sq, sk, sv, svd, sh, sg, so):
        """The kernel's shared storage: mbarriers, log-decay tables, q, k, v, vd and state tiles,
        each stage's G and C, and the output's tile where ``_out_tile``."""
        dt, hbuf = self.dtype, self.hbuf
        fields = {
            "bars": cute.struct.MemRange[cutlass.Int64, self.nbars],
            "dec": cute.struct.MemRange[Float32, 5 * BT * hbuf],
            "q": cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sq)], 1024],
            "k": cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sk)], 1024],
            "v": cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sv)], 1024],
            "vd": cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(svd)], 1024],
            "h": cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sh)], 1024],
            "g": cute.struct.Align[cute.struct.MemRange[Float32, cute.cosize(sg)], 128],
        }
        if self._out_tile():
            fields["o"] = cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(so)], 1024]
        return cute.struct(type("Shared", (), {"__annotations__": fields}))

    @cute.kernel
    def kernel(
        self,
        qk: cute.TiledMma,
        qs: cute.TiledMma,
        pv: cute.TiledMma,
        kv: cute.TiledMma,
        tma_q: cute.CopyAtom,
        gq: cute.Tensor,
        tma_k: cute.CopyAtom,
        gk: cute.Tensor,
        tma_v: cute.CopyAtom,
        gv: cute.Tensor,
        tma_h: cute.CopyAtom,
        gh: cute.Tensor,
        tma_g: cute.CopyAtom,
        gg: cute.Tensor,
        tma_o: cute.CopyAtom,
        go: cute.Tensor,
        mS0: cute.Tensor,
        mO: cute.Tensor,
        mHt: cute.Tensor,
        mCu: cute.Tensor,
        scale: Float32,
        cps: Int32,
        nseg: Int32,
        sq_l: cute.ComposedLayout,
        sk_l: cute.ComposedLayout,
        sv_l: cute.ComposedLayout,
        svd_l: cute.ComposedLayout,
        sh_l: cute.ComposedLayout,
        sg_l: cute.Layout,
        so_l: cute.ComposedLayout,
        Shared: cutlass.Constexpr,
        stage_bytes: cutlass.Constexpr,
    ):
        K = self.K
        tid, _, _ = cute.arch.thread_idx()
        i_v, i_h, i_z = cute.arch.block_idx()
        T = mO.shape[1]
        i_b, bos, eos, c_lo, c_hi, i_state, slot0 = _bounds(mCu, i_z, T, cps, nseg, self.use_cu)

        smem = utils.SmemAllocator()
        st = smem.allocate(Shared)
        bars = st.bars.data_ptr()
        sQ = st.q.get_tensor(sq_l.outer, swizzle=sq_l.inner)  # (BT, K, stage)
        sK = st.k.get_tensor(sk_l.outer, swizzle=sk_l.inner)  # (BT, K, stage)
        sV = st.v.get_tensor(sv_l.outer, swizzle=sv_l.inner)  # (BV, BT, stage)
        sVd = st.vd.get_tensor(svd_l.outer, swizzle=svd_l.inner)  # (BV, BT, 1)
        sH = st.h.get_tensor(sh_l.outer, swizzle=sh_l.inner)  # (BV, K, state tile)
        # k^T: the same bytes as the (tokens, K) tile, as an M-major (K, tokens) operand.
        sKt = cute.make_tensor(sK.iterator, cute.select(sK.layout, mode=[1, 0, 2]))
        # S16 as (K, V) to be written from the state's accumulator.
        sHmn = cute.make_tensor(sH.iterator, cute.select(sH.layout, mode=[1, 0, 2]))
        # The chunk's table of the walk of one warpgroup: G, C, exp(G_L - G), scale*exp(G), G_L
        # (the walk of three forms each factor from the stage's G and C, and reads none).
        decs = st.dec.get_tensor(cute.make_layout((BT, 5, self.hbuf)))
        sG = st.g.get_tensor(sg_l)  # (_GBOX, G and C, stage slot)
        H = mO.shape[2]
        # Where this head's G and C of the sequence's first token lie in the flat scratch, and
        # the tables' views of the stage slots' boxes from that token.
        g0, c0 = _decay_starts(i_b, i_h, H, T, bos)
        sGv = _decay_rows(sG, g0, c0)

        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            with cute.arch.elect_one():
                # full per stage (its TMA loads landed); with three warpgroups also empty per
                # stage (its k and v read by the state's warpgroup), ready per state tile (it
                # and its table written) and free (both read by an output warpgroup).
                for s in cutlass.range_constexpr(self.stages):
                    cute.arch.mbarrier_init(bars + s, 1)
                    if const_expr(self.split):
                        cute.arch.mbarrier_init(bars + self.stages + s, _THREADS)
                if const_expr(self.split):
                    for b in cutlass.range_constexpr(2 * self.hbuf):
                        cute.arch.mbarrier_init(bars + 2 * self.stages + b, _THREADS)
            cute.arch.mbarrier_init_fence()
            cpasync.prefetch_descriptor(tma_q)
            cpasync.prefetch_descriptor(tma_k)
            cpasync.prefetch_descriptor(tma_v)
            cpasync.prefetch_descriptor(tma_g)
            if const_expr(self.store_h):
                cpasync.prefetch_descriptor(tma_h)

        cute.arch.sync_threads()

        # TMA views of this (sequence, head, V block).
        tmas, smems = (tma_q, tma_k, tma_v, tma_g), (sQ, sK, sV, sG)
        gs = (gq, gk, gv, gg, g0, c0)
        loads = _head_loads(tmas, gs, smems, i_h, i_b, i_v, bos, K, self.use_cu)
        if warp == 0:
            for s in cutlass.range_constexpr(self.stages):
                if c_lo + s < c_hi:
                    _issue(loads, bars + s, c_lo + s, s, stage_bytes)

        # Output tiles stored by TMA from their stage's q tile (Note [output tiles from the q
        # tile]): (BT, BV) tiles over the q tiles, K / BV of them per stage.
        so_q = sm90_utils.make_smem_layout_a(
            LayoutEnum.ROW_MAJOR, (BT, BT, BV), self.dtype, self.stages * (K // BV)
        )
        sOq = st.q.get_tensor(so_q.outer, swizzle=so_q.inner)  # (BT, BV, K / BV * stage)
        if const_expr(self.split):
            self._three_warpgroups(
                tma_h, gh, mS0, mO, mHt, mCu, scale, i_v, i_h, i_z, i_b, bos, eos, c_lo,
                c_hi, i_state, slot0, sQ, sK, sV, sVd, sH, sKt, sHmn, sGv, bars, loads,
                stage_bytes, tma_o, go, sOq,
            )  # fmt: skip
        else:
            dec = decs[None, None, 0]
            out_tma = self._out_tma()
            in_q = out_tma and not self._out_tile()  # each tile from its stage's q tile
            if const_expr(out_tma):
                # The output's TMA view of this (sequence, head, V block), by chunk.
                if const_expr(in_q):
                    sO = sOq
                else:
                    sO = st.o.get_tensor(so_l.outer, swizzle=so_l.inner)  # (BT, BV, 1)
                tOs, tOg = _out_tiles(tma_o, go, sO, i_h, i_b, i_v, bos, self.use_cu)
            t_pv, aQ, bK, aQs, bH, bV, acc_s, acc_o2, acc_o, cS, cO = _output_operands(
                qk, qs, pv, tid, sQ, sK, sH, sV
            )
            t_kv = kv.get_slice(tid)
            aKt = t_kv.make_fragment_A(t_kv.partition_A(sKt))
            bVd = t_kv.make_fragment_B(t_kv.partition_B(sVd))
            acc_h = t_kv.make_fragment_C(t_kv.partition_shape_C((K, BV)))
            cH = t_kv.partition_C(cute.make_identity_tensor((K, BV)))
            tHs = t_kv.partition_C(sHmn[None, None, 0])
            hb = cute.make_rmem_tensor_like(acc_h, self.dtype)  # the state rounded, to store
            yO = cute.make_rmem_tensor_like(acc_o, self.dtype)  # the chunk's output
            fP = cute.make_rmem_tensor_like(acc_s)  # P's factors
            zV = cute.zipped_divide(sV, (8, 1, 1))  # ((8, 1, 1), (BV / 8, BT, stage))
            zVd = cute.zipped_divide(sVd, (8, 1, 1))

            # The state at the walk's start.
            _start_state(acc_h, cH, mS0, i_state, i_h, 0, i_v * BV, self.use_s0)
            for i in cutlass.range_constexpr(cute.size(acc_h)):
                tHs[i] = acc_h[i].to(self.dtype)

            if c_lo < c_hi:
                cute.arch.mbarrier_wait(bars, 0)
                _publish_stage_decay(dec, tid, sGv, 0, bos + c_lo * BT, eos, scale)
            cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.sync_threads()

            for c in cutlass.range(c_lo, c_hi, unroll=1):
                s = (c - c_lo) % _STAGES
                phase = ((c - c_lo) // _STAGES) % 2
                t0 = bos + c * BT
                if const_expr(self.store_h):
                    # The state at the chunk's start, as the 16-bit copy the products read, goes
                    # out by TMA while the chunk runs; it is rewritten only after the store has
                    # read it (the wait before the chunk's last barrier but one).
                    if warp == 0:
                        ts, tg = _tma_tiles(tma_h, sH, gh, (BV, K), i_h, slot0 + c)
                        cute.copy(tma_h, ts[None, 0], tg[None, i_v])
                        cute.arch.cp_async_bulk_commit_group()
                cute.arch.mbarrier_wait(bars + s, phase)

                warpgroup.fence()
                _gemm(qk, acc_s, aQ[None, None, None, s], bK[None, None, None, s], False)
                if const_expr(self.overlap):
                    warpgroup.commit_group()
                _gemm(qs, acc_o2, aQs[None, None, None, s], bH[None, None, None, 0], False)
                warpgroup.commit_group()

                # P's factors, and vd = v * exp(G_L - G_j) into shared memory, while the
                # products run.
                _p_factors(fP, cS, dec[None, 0], dec[None, 1], scale)
                _decay_v(zV, zVd, dec, tid, s, self.dtype)
                cute.arch.fence_proxy("async.shared", space="cta")

                # A = q k^T is needed now; with overlap, q S16 may still run.
                warpgroup.wait_group(1 if const_expr(self.overlap) else 0)
                n_ok = cutlass.min(BT, eos - t0)
                _form_p(acc_s, fP)
                aP = _acc_as_operand_a(acc_s, pv, self.dtype)
                egl = cute.math.exp2(dec[0, 4] * _LOG2E, fastmath=True)
                for i in cutlass.range_constexpr(cute.size(acc_h)):
                    acc_h[i] = acc_h[i] * egl
                cute.arch.sync_threads()

                warpgroup.fence()
                _gemm(pv, acc_o, aP, bV[None, None, None, s], False)
                if const_expr(self.overlap):
                    warpgroup.commit_group()
                _gemm(kv, acc_h, aKt[None, None, None, s], bVd[None, None, None, 0], True)
                warpgroup.commit_group()
                # The output's products (and q S16, committed before) are needed now; with
                # overlap, the state's product still runs under the output's stores.
                warpgroup.wait_group(1 if const_expr(self.overlap) else 0)

                for i in cutlass.range_constexpr(cute.size(acc_o)):
                    orow, ocol = cO[i]
                    yO[i] = (acc_o[i] + acc_o2[i] * dec[orow, 3]).to(self.dtype)
                # A whole tile goes out by TMA (rows past T are clipped); a packed sequence's
                # last, partial chunk from registers, not to write over the next sequence's.
                by_tma = n_ok == BT
                if const_expr(not self.use_cu):
                    by_tma = True
                if const_expr(not out_tma):
                    _store_output(mO, yO, t_pv, cO, i_b, t0, i_h, i_v, n_ok)
                warpgroup.wait_group(0)
                if const_expr(self.store_h or out_tma):
                    if warp == 0:
                        # The stores of the chunk before (its state, its output) have read
                        # their tiles.
                        cute.arch.cp_async_bulk_wait_group(0, read=True)
                cute.arch.sync_threads()
                o_tile = 0
                if const_expr(in_q):
                    o_tile = s * (K // BV)
                if const_expr(out_tma):
                    if by_tma:
                        cute.autovec_copy(yO, t_pv.partition_C(sO[None, None, o_tile]))
                    else:
                        _store_output(mO, yO, t_pv, cO, i_b, t0, i_h, i_v, n_ok)

                # The state for the next chunk, its log-decay, and the stage's next loads.
                hb.store(acc_h.load().to(self.dtype))
                cute.autovec_copy(hb, tHs)
                if c + 1 < c_hi:
                    # The next chunk's table, from the G and C its stage brought.
                    s1 = (c + 1 - c_lo) % self.stages
                    cute.arch.mbarrier_wait(bars + s1, ((c + 1 - c_lo) // self.stages) % 2)
                    _publish_stage_decay(dec, tid, sGv, s1, t0 + BT, eos, scale)
                cute.arch.fence_proxy("async.shared", space="cta")
                if const_expr(not in_q):
                    if warp == 0 and c + _STAGES < c_hi:
                        _issue(loads, bars + s, c + _STAGES, s, stage_bytes)
                cute.arch.sync_threads()
                if const_expr(out_tma):
                    if warp == 0 and by_tma:
                        cute.copy(tma_o, tOs[None, o_tile], tOg[None, c])
                        cute.arch.cp_async_bulk_commit_group()
                if const_expr(in_q):
                    if warp == 0 and c + _STAGES < c_hi:
                        # The store has read the q tile before the stage's loads overwrite it.
                        cute.arch.cp_async_bulk_wait_group(0, read=True)
                        _issue(loads, bars + s, c + _STAGES, s, stage_bytes)

            if const_expr(out_tma):
                if warp == 0:
                    cute.arch.cp_async_bulk_wait_group(0, read=True)

            if const_expr(self.use_cu):
                _zero_uncovered(mO, mCu, i_z, i_h, i_v, bos, eos, tid, _THREADS)

            if const_expr(self.store_ht):
                _end_state(acc_h, cH, mHt, i_state, i_h, 0, i_v * BV)

    @cute.jit
    def _three_warpgroups(
        self, tma_h, gh, mS0, mO, mHt, mCu, scale, i_v, i_h, i_z, i_b, bos, eos, c_lo, c_hi,
        i_state, slot0, sQ, sK, sV, sVd, sH, sKt, sHmn, sGv, bars, loads,
        stage_bytes: cutlass.Constexpr, tma_o, go, sOq,
    ):  # fmt: skip
        """The kernel's body with three warpgroups (Note [chunk_gla CuTe walk's warpgroups]).
        Its mbarriers: ``full`` per stage (its tokens landed), ``empty`` (its k and v read by
        the state's warpgroup), ``ready`` per state tile (it and its table written) and
        ``free`` (both read by an output warpgroup)."""
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = warp // 4
        if wg == 0:
            self._states(
                mS0, mO, mHt, mCu, i_v, i_h, i_z, bos, eos, c_lo, c_hi, i_state, sV, sVd,
                sKt, sHmn, sGv, bars,
            )  # fmt: skip
        else:
            # An output warpgroup: chunks m = j, j + 2, ... of the walk.
            self._outputs(
                tma_h, gh, mO, scale, i_v, i_h, i_b, bos, eos, c_lo, c_hi, slot0, sQ, sK, sV,
                sH, sGv, bars, wg - 1, loads, stage_bytes, tma_o, go, sOq,
            )  # fmt: skip

    @cute.jit
    def _states(
        self, mS0, mO, mHt, mCu, i_v, i_h, i_z, bos, eos, c_lo, c_hi, i_state, sV, sVd, sKt,
        sHmn, sGv, bars,
    ):  # fmt: skip
        """The state's warpgroup: S(m + 1) = exp(G_L) S(m) + k^T vd, publishing each S(m)
        rounded to 16 bits for chunk m's output warpgroup, its stores and vd's under one
        fence before the product."""
        K = self.K
        NS = self.stages
        NH = self.hbuf
        nc = c_hi - c_lo
        tid, _, _ = cute.arch.thread_idx()
        wtid = tid % _THREADS
        w_kv = self._mmas()[3]
        t_kv = w_kv.get_slice(wtid)
        aKt = t_kv.make_fragment_A(t_kv.partition_A(sKt))
        bVd = t_kv.make_fragment_B(t_kv.partition_B(sVd))
        acc_h = t_kv.make_fragment_C(t_kv.partition_shape_C((K, BV)))
        cH = t_kv.partition_C(cute.make_identity_tensor((K, BV)))
        hb = cute.make_rmem_tensor_like(acc_h, self.dtype)
        zV = cute.zipped_divide(sV, (8, 1, 1))
        zVd = cute.zipped_divide(sVd, (8, 1, 1))
        _start_state(acc_h, cH, mS0, i_state, i_h, 0, i_v * BV, self.use_s0)
        ready = bars + 2 * NS
        free = bars + 2 * NS + NH
        for m in cutlass.range(0, nc, unroll=1):
            s = m % NS
            b = m % NH
            t0 = bos + (c_lo + m) * BT
            # vd = v * exp(G_L - G_j), 16 bytes at a time, the factors from the stage's G, C.
            cute.arch.mbarrier_wait(bars + s, (m // NS) % 2)
            gl, cl = _stage_last(sGv, s, t0, eos)
            _decay_v_stage(zV, zVd, sGv, s, gl, cl, t0, eos, wtid, self.dtype)
            # S(m) rounded to 16 bits into state tile b, once chunk m - NH's output warpgroup
            # has read it: its stores and vd's complete under one fence.
            hb.store(acc_h.load().to(self.dtype))
            if m >= NH:
                cute.arch.mbarrier_wait(free + b, (m // NH + 1) % 2)
            cute.autovec_copy(hb, t_kv.partition_C(sHmn[None, None, b]))
            cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.mbarrier_arrive(ready + b)
            cute.arch.barrier(barrier_id=1, number_of_threads=_THREADS)

            egl = cute.math.exp2(gl * _LOG2E, fastmath=True)
            for i in cutlass.range_constexpr(cute.size(acc_h)):
                acc_h[i] = acc_h[i] * egl
            warpgroup.fence()
            _gemm(w_kv, acc_h, aKt[None, None, None, s], bVd[None, None, None, 0], True)
            warpgroup.commit_group()
            warpgroup.wait_group(0)
            cute.arch.mbarrier_arrive(bars + NS + s)
            # vd is written again next.
            cute.arch.barrier(barrier_id=1, number_of_threads=_THREADS)

        if const_expr(self.use_cu):
            _zero_uncovered(mO, mCu, i_z, i_h, i_v, bos, eos, wtid, _THREADS)
        if const_expr(self.store_ht):
            _end_state(acc_h, cH, mHt, i_state, i_h, 0, i_v * BV)

    @cute.jit
    def _outputs(
        self, tma_h, gh, mO, scale, i_v, i_h, i_b, bos, eos, c_lo, c_hi, slot0, sQ, sK, sV, sH,
        sGv, bars, j, loads, stage_bytes: cutlass.Constexpr, tma_o, go, sOq,
    ):  # fmt: skip
        """Output warpgroup j (0 or 1): the outputs of chunks m = j, j + 2, ... of the walk."""
        NS = self.stages
        NH = self.hbuf
        nc = c_hi - c_lo
        full = bars
        empty = bars + NS
        ready = bars + 2 * NS
        free = bars + 2 * NS + NH
        tid, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wtid = tid % _THREADS
        o_qk, o_qs, o_pv, _ = self._mmas()
        t_pv, aQ, bK, aQs, bH, bV, acc_s, acc_o2, acc_o, cS, cO = _output_operands(
            o_qk, o_qs, o_pv, wtid, sQ, sK, sH, sV
        )
        yO = cute.make_rmem_tensor_like(acc_o, self.dtype)
        fP = cute.make_rmem_tensor_like(acc_s)  # P's factors
        gO = cute.make_rmem_tensor_like(acc_o, Float32)  # each output row's G
        # The output's TMA view of this (sequence, head, V block), by chunk, and the
        # warpgroup's writes of a tile into shared memory (stmatrix: rows of 8 columns).
        tOs, tOg = _out_tiles(tma_o, go, sOq, i_h, i_b, i_v, bos, self.use_cu)
        stsm = cute.make_copy_atom(
            cute.nvgpu.warp.StMatrix8x8x16bOp(transpose=False, num_matrices=4), self.dtype
        )
        thr_stsm = cute.make_tiled_copy_C(stsm, o_pv).get_slice(wtid)
        tYs = thr_stsm.partition_D(sOq)  # (copy, M, N, tile)
        tYr = thr_stsm.retile(yO)
        per = self.K // BV  # output tiles per stage's q tile
        for m in cutlass.range(j, nc, 2, unroll=1):
            s = m % NS
            b = m % NH
            c = c_lo + m
            t0 = bos + c * BT
            if const_expr(self.store_h):
                # The chunk's state, as its products read it, out by TMA from its tile; the
                # tile is given back once the store has read it (the wait before ``free``).
                cute.arch.mbarrier_wait(ready + b, (m // NH) % 2)
                if warp % 4 == 0:
                    ts, tg = _tma_tiles(tma_h, sH, gh, (BV, self.K), i_h, slot0 + c)
                    cute.copy(tma_h, ts[None, b], tg[None, i_v])
                    cute.arch.cp_async_bulk_commit_group()
            cute.arch.mbarrier_wait(full + s, (m // NS) % 2)
            warpgroup.fence()
            _gemm(o_qk, acc_s, aQ[None, None, None, s], bK[None, None, None, s], False)
            warpgroup.commit_group()
            if const_expr(not self.store_h):
                cute.arch.mbarrier_wait(ready + b, (m // NH) % 2)
            _gemm(o_qs, acc_o2, aQs[None, None, None, s], bH[None, None, None, b], False)
            warpgroup.commit_group()
            _p_factors(fP, cS, sGv[0][None, s], sGv[1][None, s], scale)
            warpgroup.wait_group(1)
            n_ok = cutlass.min(BT, eos - t0)
            _form_p(acc_s, fP)
            aP = _acc_as_operand_a(acc_s, o_pv, self.dtype)
            warpgroup.fence()
            _gemm(o_pv, acc_o, aP, bV[None, None, None, s], False)
            warpgroup.commit_group()
            warpgroup.wait_group(0)
            if const_expr(self.store_h):
                cute.arch.cp_async_bulk_wait_group(0, read=True)
            # q S16 (and the store) have read the state tile.
            cute.arch.mbarrier_arrive(free + b)
            # The output rows' G, the last of the stage that the chunk reads: this warpgroup
            # is then done with the stage, and its next tokens load under the output's
            # exponentials and stores (the state's warpgroup waits for them otherwise).
            sg = sGv[0]
            for i in cutlass.range_constexpr(cute.size(gO)):
                gO[i] = sg[cO[i][0], s]
            for i in cutlass.range_constexpr(cute.size(acc_o)):
                eg = cute.math.exp2(gO[i] * _LOG2E, fastmath=True) * scale
                yO[i] = (acc_o[i] + acc_o2[i] * eg).to(self.dtype)
            # A whole tile goes out by TMA from the stage's q tile (rows past T are clipped),
            # before the stage is given back; a packed sequence's last, partial chunk from
            # registers, not to write over the next sequence's.
            by_tma = n_ok == BT
            if const_expr(not self.use_cu):
                by_tma = True
            cute.copy(thr_stsm, tYr, tYs[None, None, None, s * per])
            cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.barrier(barrier_id=2 + j, number_of_threads=_THREADS)
            if warp % 4 == 0:
                if by_tma:
                    cute.copy(tma_o, tOs[None, s * per], tOg[None, c])
                cute.arch.cp_async_bulk_commit_group()
            if m + NS < nc:
                cute.arch.mbarrier_wait(empty + s, (m // NS) % 2)
                if warp % 4 == 0:
                    # The store has read the q tile before the stage's next loads overwrite it.
                    cute.arch.cp_async_bulk_wait_group(0, read=True)
                    _issue(loads, full + s, c + NS, s, stage_bytes)
            if not by_tma:
                _store_output(mO, yO, t_pv, cO, i_b, t0, i_h, i_v, n_ok)
        if warp % 4 == 0:
            cute.arch.cp_async_bulk_wait_group(0, read=True)


class _WalkWS(_Walk):
    """The walk with its work split between three warpgroups (Note [chunk_gla CuTe walk's
    warpgroups]): one walks the state, two compute the chunks' outputs, taking turns. Its body
    is ``_Walk._three_warpgroups``, which the shared kernel calls where ``split`` is set."""

    threads = 3 * _THREADS
    stages = 4  # tiles of q, k and v
    hbuf = 3  # 16-bit state tiles
    nbars = 2 * stages + 2 * hbuf  # full and empty per stage, ready and free per state tile
    split = True


def _build(key):
    dtype, K, use_s0, store_ht, use_cu, overlap, store_h, split = key
    x = TensorArg(dtype, (None, None, None, K), compact=False, align=16)
    v = TensorArg(dtype, (None, None, None, None), compact=False, align=16)
    gc = TensorArg(torch.float32, (None, None, 2, None), compact=True)
    s = TensorArg(torch.float32, (None, None, K, None), compact=True)
    o = TensorArg(dtype, (None, None, None, None), compact=True, align=16)
    scalars = (Float32(1.0), Int32(1), Int32(1))
    cls = _WalkWS if split else _Walk
    fn = cls(_cute_dtype(dtype), K, use_s0, store_ht, use_cu, overlap, store_h)
    cu = TensorArg(torch.int32, (None,), compact=True)
    h = TensorArg(dtype, (None, None, K, None), compact=True, align=16)
    return fn, (x, x, v, gc, s, o, s, cu, h), scalars, False


def _cute_dtype(dtype):
    return {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16}[dtype]


_WALK = CompileCache("chunk_gla_fwd_walk", _build)


def walk(
    q, k, v, gc, s0, o, ht, cu, scale: float, cps: int, nseg: int, h=None, split: bool = False
) -> None:
    """Launch the walk: ``o`` (``[B, T, H, V]``, contiguous) from q, k, v and the chunk
    log-decay ``gc``; from the states ``s0`` (``[B * nseg, H, K, V]`` float32; with packed
    sequences ``[N, H, K, V]``) at each segment's start, or zeros when None; the final states
    into ``ht`` when given (one segment only). ``cu``: int32 offsets of packed sequences
    (``B == 1``, one segment), or None. ``h``: when given (``[slots, H, K, V]`` of q's dtype,
    contiguous, slots as ``config._state_slots`` counts them), the state at each chunk's start
    is stored there, rounded to q's dtype as the products read it. ``split``: the walk of three
    warpgroups (_WalkWS), else that of one (_Walk)."""
    K = q.shape[-1]
    dummy = o.new_empty((1, 1, K, 1), dtype=torch.float32)
    flags = (s0 is not None, ht is not None, cu is not None, OVERLAP, h is not None)
    key = (q.dtype, K, *flags, split)
    fn = _WALK.get(key)
    if cu is None:
        cu = o.new_empty((2,), dtype=torch.int32)
    s0 = dummy if s0 is None else s0
    if h is None:
        # Never written: a tile the store's TMA descriptor can describe.
        h = o.new_empty((1, 1, K, BV))
    fn(q, k, v, gc, s0, o, dummy if ht is None else ht, cu, h, scale, cps, nseg)
