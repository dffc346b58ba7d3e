"""chunk_gla's state walks in CuTeDSL for Hopper (sm90): the chunk states ``h`` and the
gradients of the chunk end states ``dh`` that the backward's passes read, each walked by one
warpgroup per (sequence, head, V block of 64, 64 rows of K) with its part of the state in
registers, warpgroup matrix products (wgmma) on tiles that the tensor memory accelerator (TMA)
brings into shared memory, and the 16-bit state of each chunk stored by TMA.

The same walks as ``_walk`` (walks.py) over whole sequences (STEP 0): forward (``a, b = k,
v``), the state at each chunk's start into its slot, then ``S <- exp(G_L) S + k^T (v * exp(G_L
- G))``; reverse (``a, b = q, do``, last chunk first), the gradient at each chunk's end into its
slot, then ``dS <- exp(G_L) dS + q^T (do * scale * exp(G))``; from the state (gradient) at the
start, ``s0`` (zeros without), and what is left at the end into ``s_end`` where asked. One
launch walks one of them or both side by side (the backward without the forward's states). The
contract is config.py's ``_cute_states`` beside ``_cute_bwd_plan``: no packed sequences, K = V
of 64 or 128, 16-bit inputs the TMA can read, T a multiple of 4 (the TMA reads the
log-decay's rows of T float32 values, whose stride must be a multiple of 16 bytes), and heads
and sequences that fit the grid.
triton.py's ``chunk_gla_bwd`` chooses it where a walk is not split into segments. Split walks
run the same kernel in two steps where ``config._cute_split_walks`` accepts them (segments long
enough: Note [chunk_gla CuTe split walks]).

Note [chunk_gla CuTe split walks]: a walk split into segments (``config._walk_segments``, and
the forward's segment starts, triton.py's ``_segment_starts``) runs as Triton's does (walks.py,
STEP 1 and STEP 2). First each segment is walked from a zero state (``own``): no chunk state is
stored, only what is left at the segment's end (its start, in reverse) and the sum of its
chunks' G_L, which the carry across segments (Triton's ``_gla_seg_carry_kernel`` or
``_gla_bwd_seg_carry_kernel``, unchanged) composes into the state at each segment's start.
Then each segment is walked again from there, its chunk states stored as a whole walk stores
them. The kernel is the whole walk's, given the segments' length and count (``_bounds``) and,
for the first step, without its stores of 16-bit states.

Note [chunk_gla CuTe state walk]: the walk is a chain, one chunk after another, so what counts
is how long each step waits. Each step's chain holds only what depends on the state: its
decay (a multiply per element), one product into the accumulator and the 16-bit copy written
for the store. The rest runs beside the product or ahead of it:

- chunk ``m + 1``'s weighted ``b`` (``bd``, two tiles) is formed while chunk ``m``'s product
  runs, each token's weight computed there from the chunk's log-decay (G and C), which the TMA
  loads into the stage with the chunk's ``a`` and ``b`` tiles (four stages);
- the 16-bit states go out by TMA from three tiles (six with 128 rows), so the store of chunk
  ``m`` may still read its tile while the next chunks run.

So one barrier per chunk: at its top, the weighted ``b`` and the 16-bit state written before
are visible to the products and the TMA, every thread is past the previous product, and the
warp that stores has seen done the store that read the tile next to be written; it then stores
this chunk's state, and warp 0 reloads the stage that the previous chunk freed.

What the first version waited on (docs/performance.md, "chunk_gla: the CuTeDSL state walks"):
its threads loaded each chunk's log-decay from global memory into registers a chunk or two
ahead and published a table of weights, and every step waited on those loads (without them a
step took two thirds as long). It also held 128 rows of K per CTA, half as many CTAs with
products twice as long; the shipped walk changed both at once, and what each gained was not
measured apart.
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
from . import config
from .cute import (
    _bounds,
    _cute_dtype,
    _end_state,
    _gemm,
    _stage,
    _start_state,
    _tma_atom,
)

BT = 64  # tokens per chunk
BV = 64  # V columns per CTA (but the forward's segment starts: config._CUTE_START_TILE)
_THREADS = 128  # one warpgroup
_STAGES = 4  # tiles of a and b
_BD = 2  # weighted b tiles
_BK = 64  # state rows per CTA
_HBUF = {64: 3, 128: 6}  # 16-bit state tiles, by rows per CTA
_STORE_WARP = 3  # the warp that stores the states (warp 0 issues the loads)
_LOG2E = math.log2(math.e)


@cute.jit
def _weigh_b(
    zB,
    zBd,
    sG,
    s,
    d,
    tid,
    t0,
    eos,
    scale,
    reverse: cutlass.Constexpr,
    dtype: cutlass.Constexpr,
    bv: cutlass.Constexpr,
):
    """bd = b * w from stage s of b into bd tile d, 8 columns (16 bytes, which the 128-byte
    swizzle keeps together) at a time, by thread ``tid`` of the warpgroup, with each token's
    weight from the chunk's log-decay in stage s of ``sG`` (G and C per token): exp(G_L - G)
    (0 past the sequence's end ``eos``) forward, scale * exp(G) in reverse."""
    last = cutlass.min(BT, eos - t0) - 1
    gl = sG[last, 0, s]
    cl = sG[last, 1, s]
    for i in cutlass.range_constexpr(BT * bv // 8 // _THREADS):
        e = tid + i * _THREADS
        row = e // (bv // 8)
        g = sG[row, 0, s]
        wt = Float32(0.0)
        if const_expr(reverse):
            wt = cute.math.exp2(g * _LOG2E, fastmath=True) * scale
        else:
            span = (gl - g) + (cl - sG[row, 1, s])
            wt = cutlass.select_(
                row <= last, cute.math.exp2(span * _LOG2E, fastmath=True), Float32(0.0)
            )
        x = zB[None, (e % (bv // 8), row, s)].load().to(Float32)
        zBd[None, (e % (bv // 8), row, d)].store((x * wt).to(dtype))


class _States:
    """The walks for one (dtype, K, walks, flags): see the module docstring. ``reverse``: per
    walk of the launch, whether it is the reverse one; ``use_s0`` and ``store_end`` per walk;
    ``own`` per walk: the first step of a walk split into segments (Note [chunk_gla CuTe split
    walks]), which stores no chunk state but each segment's total log-decay."""

    def __init__(
        self,
        dtype,
        K: int,
        reverse: tuple,
        use_s0: tuple,
        store_end: tuple,
        own: tuple,
        bk: int,
        bv: int,
    ) -> None:
        self.dtype = dtype
        self.K = K
        self.reverse = reverse
        self.use_s0 = use_s0
        self.store_end = store_end
        self.own = own
        self.bk = bk  # state rows per CTA
        self.bv = bv  # state columns per CTA
        self.nk = K // self.bk
        # The first step of a split walk stores no state: one tile for the descriptor.
        self.hbuf = 1 if all(own) else _HBUF[self.bk]

    def _layouts(self):
        bk, BV, dt = self.bk, self.bv, self.dtype
        row, col = LayoutEnum.ROW_MAJOR, LayoutEnum.COL_MAJOR
        # a: (tokens, rows), read transposed as the M-major A operand of a^T bd. b and bd: (V,
        # tokens), the N-major B operand. The 16-bit state: (V, rows), as the TMA stores it.
        # The log-decay: (tokens, G and C).
        sa = sm90_utils.make_smem_layout_b(row, (BT, BT, bk), dt, _STAGES)
        sb = sm90_utils.make_smem_layout_b(col, (BT, BV, BT), dt, _STAGES)
        sbd = sm90_utils.make_smem_layout_b(col, (BT, BV, BT), dt, _BD)
        sh = sm90_utils.make_smem_layout_b(col, (BT, BV, bk), dt, self.hbuf)
        sg = cute.make_layout((BT, 2, _STAGES), stride=(1, BT, 2 * BT))
        return sa, sb, sbd, sh, sg

    def _mma(self):
        dt, MN = self.dtype, warpgroup.OperandMajorMode.MN
        return sm90_utils.make_trivial_tiled_mma(dt, dt, MN, MN, Float32, (1, 1, 1), (BT, self.bv))

    @cute.jit
    def __call__(
        self,
        mA0: cute.Tensor,  # [B, T, H, K]: k forward, q reverse
        mB0: cute.Tensor,  # [B, T, H, V]: v forward, do reverse
        mS00: cute.Tensor,  # [B * nseg, H, K, V] float32 (unused without use_s0)
        mOut0: cute.Tensor,  # [B * NT, H, K, V] 16-bit
        mEnd0: cute.Tensor,  # [B * nseg, H, K, V] float32 (unused without store_end)
        mSeg0: cute.Tensor,  # [B * nseg, H] float32, segments' log-decays (unused unless own)
        mA1: cute.Tensor,  # the second walk's, as the first's (unused with one walk)
        mB1: cute.Tensor,
        mS01: cute.Tensor,
        mOut1: cute.Tensor,
        mEnd1: cute.Tensor,
        mSeg1: cute.Tensor,
        mGc: cute.Tensor,  # [B, H, 2, T] float32, T a multiple of 4
        scale: Float32,
        cps: Int32,
        nseg: Int32,
        stream: cuda.CUstream,
    ):
        bk, BV = self.bk, self.bv
        B, T, H, V = mB0.shape
        sa, sb, sbd, sh, sg = self._layouts()
        store = cpasync.CopyBulkTensorTileS2GOp()
        # (T, K, H, B) views of a, (V, T, H, B) of b, (V, K, H, slots) of the states, (T, 2, H,
        # B) of the log-decay.
        tma_a0, ga0 = _tma_atom(mA0, (1, 3, 2, 0), _stage(sa), (BT, bk))
        tma_b0, gb0 = _tma_atom(mB0, (3, 1, 2, 0), _stage(sb), (BV, BT))
        tma_o0, go0 = _tma_atom(mOut0, (3, 2, 1, 0), _stage(sh), (BV, bk), store)
        tma_a1, ga1 = _tma_atom(mA1, (1, 3, 2, 0), _stage(sa), (BT, bk))
        tma_b1, gb1 = _tma_atom(mB1, (3, 1, 2, 0), _stage(sb), (BV, BT))
        tma_o1, go1 = _tma_atom(mOut1, (3, 2, 1, 0), _stage(sh), (BV, bk), store)
        tma_g, gg = _tma_atom(mGc, (3, 2, 1, 0), cute.slice_(sg, (None, None, 0)), (BT, 2))
        stage_bytes = (
            cute.size_in_bytes(self.dtype, _stage(sa))
            + cute.size_in_bytes(self.dtype, _stage(sb))
            + BT * 2 * 4
        )
        dt = self.dtype

        @cute.struct
        class Shared:
            bars: cute.struct.MemRange[cutlass.Int64, _STAGES]
            g: cute.struct.Align[cute.struct.MemRange[Float32, cute.cosize(sg)], 128]
            a: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sa)], 1024]
            b: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sb)], 1024]
            bd: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sbd)], 1024]
            h: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sh)], 1024]

        self.kernel(
            tma_a0, ga0, tma_b0, gb0, tma_o0, go0, mS00, mEnd0, mSeg0,
            tma_a1, ga1, tma_b1, gb1, tma_o1, go1, mS01, mEnd1, mSeg1,
            tma_g, gg, mGc, scale, cps, nseg, sa, sb, sbd, sh, sg, Shared, stage_bytes,
        ).launch(
            grid=(cute.ceil_div(V, BV) * self.nk, H, B * nseg * len(self.reverse)),
            block=(_THREADS, 1, 1),
            smem=Shared.size_in_bytes(),
            stream=stream,
        )  # fmt: skip

    @cute.kernel
    def kernel(
        self,
        tma_a0: cute.CopyAtom,
        ga0: cute.Tensor,
        tma_b0: cute.CopyAtom,
        gb0: cute.Tensor,
        tma_o0: cute.CopyAtom,
        go0: cute.Tensor,
        mS00: cute.Tensor,
        mEnd0: cute.Tensor,
        mSeg0: cute.Tensor,
        tma_a1: cute.CopyAtom,
        ga1: cute.Tensor,
        tma_b1: cute.CopyAtom,
        gb1: cute.Tensor,
        tma_o1: cute.CopyAtom,
        go1: cute.Tensor,
        mS01: cute.Tensor,
        mEnd1: cute.Tensor,
        mSeg1: cute.Tensor,
        tma_g: cute.CopyAtom,
        gg: cute.Tensor,
        mGc: cute.Tensor,
        scale: Float32,
        cps: Int32,
        nseg: Int32,
        sa_l: cute.ComposedLayout,
        sb_l: cute.ComposedLayout,
        sbd_l: cute.ComposedLayout,
        sh_l: cute.ComposedLayout,
        sg_l: cute.Layout,
        Shared: cutlass.Constexpr,
        stage_bytes: cutlass.Constexpr,
    ):
        _, _, i_z = cute.arch.block_idx()
        rows = mGc.shape[0] * nseg
        smem = utils.SmemAllocator()
        st = smem.allocate(Shared)
        g = (tma_g, gg, mGc, scale, cps, nseg)
        layouts = (sa_l, sb_l, sbd_l, sh_l, sg_l)
        if const_expr(len(self.reverse) == 1):
            self._walk(
                tma_a0, ga0, tma_b0, gb0, tma_o0, go0, mS00, mEnd0, mSeg0, *g, i_z, st,
                *layouts, stage_bytes, 0,
            )  # fmt: skip
        else:
            # A branch on the block index: every thread of the CTA takes the same one.
            if i_z < rows:
                self._walk(
                    tma_a0, ga0, tma_b0, gb0, tma_o0, go0, mS00, mEnd0, mSeg0, *g, i_z, st,
                    *layouts, stage_bytes, 0,
                )  # fmt: skip
            else:
                self._walk(
                    tma_a1, ga1, tma_b1, gb1, tma_o1, go1, mS01, mEnd1, mSeg1, *g, i_z - rows,
                    st, *layouts, stage_bytes, 1,
                )  # fmt: skip

    @cute.jit
    def _walk(
        self, tma_a, ga, tma_b, gb, tma_o, go, mS0, mEnd, mSeg, tma_g, gg, mGc, scale, cps, nseg,
        i_z, st, sa_l, sb_l, sbd_l, sh_l, sg_l, stage_bytes: cutlass.Constexpr,
        w: cutlass.Constexpr,
    ):  # fmt: skip
        """Walk ``w`` of the launch for CTA row ``i_z`` (Note [chunk_gla CuTe state walk]; with
        ``own``, Note [chunk_gla CuTe split walks])."""
        bk, BV = self.bk, self.bv
        reverse = self.reverse[w]
        own = self.own[w]
        tid, _, _ = cute.arch.thread_idx()
        i_x, i_h, _ = cute.arch.block_idx()
        i_v = i_x // self.nk
        i_k = i_x % self.nk
        T = mGc.shape[3]
        # No packed sequences: _bounds never reads its offsets (mGc stands in for them).
        i_b, bos, eos, c_lo, c_hi, i_state, slot0 = _bounds(mGc, i_z, T, cps, nseg, False)
        nc = c_hi - c_lo

        bars = st.bars.data_ptr()
        sA = st.a.get_tensor(sa_l.outer, swizzle=sa_l.inner)  # (BT, bk, stage)
        sB = st.b.get_tensor(sb_l.outer, swizzle=sb_l.inner)  # (BV, BT, stage)
        sBd = st.bd.get_tensor(sbd_l.outer, swizzle=sbd_l.inner)  # (BV, BT, tile)
        sH = st.h.get_tensor(sh_l.outer, swizzle=sh_l.inner)  # (BV, bk, tile)
        sG = st.g.get_tensor(sg_l)  # (BT, 2, stage)
        # a^T: the same bytes as the (tokens, rows) tile, as an M-major (rows, tokens) operand.
        sAt = cute.make_tensor(sA.iterator, cute.select(sA.layout, mode=[1, 0, 2]))
        # The 16-bit state as (rows, V), written from the accumulator.
        sHmn = cute.make_tensor(sH.iterator, cute.select(sH.layout, mode=[1, 0, 2]))

        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            with cute.arch.elect_one():
                for s in cutlass.range_constexpr(_STAGES):
                    cute.arch.mbarrier_init(bars + s, 1)
            cute.arch.mbarrier_init_fence()
            cpasync.prefetch_descriptor(tma_a)
            cpasync.prefetch_descriptor(tma_b)
            cpasync.prefetch_descriptor(tma_g)
        if const_expr(not own):
            if warp == _STORE_WARP:
                cpasync.prefetch_descriptor(tma_o)

        gA = cute.local_tile(ga[None, None, i_h, i_b], (BT, bk), (None, i_k))  # (BT, bk, chunks)
        gB = cute.local_tile(gb[None, None, i_h, i_b], (BV, BT), (i_v, None))  # (BV, BT, chunks)
        gG = cute.local_tile(gg[None, None, i_h, i_b], (BT, 2), (None, 0))  # (BT, 2, chunks)
        loads = []
        for tma, smem_t, gmem_t in ((tma_a, sA, gA), (tma_b, sB, gB), (tma_g, sG, gG)):
            part_s, part_g = cpasync.tma_partition(
                tma, 0, cute.make_layout(1), cute.group_modes(smem_t, 0, 2),
                cute.group_modes(gmem_t, 0, 2),
            )  # fmt: skip
            loads.append((tma, part_g, part_s))
        cute.arch.sync_threads()

        if warp == 0:
            for s in cutlass.range_constexpr(_STAGES):
                if s < nc:
                    self._issue(loads, bars, c_lo, c_hi, s, s, w, stage_bytes)

        mma = self._mma()
        t_kv = mma.get_slice(tid)
        aAt = t_kv.make_fragment_A(t_kv.partition_A(sAt))
        bBd = t_kv.make_fragment_B(t_kv.partition_B(sBd))
        acc_h = t_kv.make_fragment_C(t_kv.partition_shape_C((bk, BV)))
        cH = t_kv.partition_C(cute.make_identity_tensor((bk, BV)))
        hb = cute.make_rmem_tensor_like(acc_h, self.dtype)
        zB = cute.zipped_divide(sB, (8, 1, 1))
        zBd = cute.zipped_divide(sBd, (8, 1, 1))
        _start_state(acc_h, cH, mS0, i_state, i_h, i_k * bk, i_v * BV, self.use_s0[w])

        if nc > 0:
            # The start state's 16-bit copy, and the first chunk's weighted b.
            if const_expr(not own):
                hb.store(acc_h.load().to(self.dtype))
                cute.autovec_copy(hb, t_kv.partition_C(sHmn[None, None, 0]))
            cute.arch.mbarrier_wait(bars, 0)
            t0 = bos + self._chunk(c_lo, c_hi, 0, w) * BT
            _weigh_b(zB, zBd, sG, 0, 0, tid, t0, eos, scale, reverse, self.dtype, BV)

        # The segment's total log-decay (own: the carry across segments reads it).
        gsum = Float32(0.0)
        for m in cutlass.range(0, nc, unroll=1):
            s = m % _STAGES
            c = self._chunk(c_lo, c_hi, m, w)
            if const_expr(not own):
                if warp == _STORE_WARP:
                    # The store of chunk m + 1 - hbuf is done reading the tile that chunk
                    # m + 1's state is written to below.
                    cute.arch.cp_async_bulk_wait_group(self.hbuf - 2, read=True)
            cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.sync_threads()
            if const_expr(not own):
                if warp == _STORE_WARP:
                    htile = cute.local_tile(go[None, None, i_h, slot0 + c], (BV, bk), (None, i_k))
                    hs, hg = cpasync.tma_partition(
                        tma_o, 0, cute.make_layout(1), cute.group_modes(sH, 0, 2),
                        cute.group_modes(htile, 0, 2),
                    )  # fmt: skip
                    cute.copy(tma_o, hs[None, m % self.hbuf], hg[None, i_v])
                    cute.arch.cp_async_bulk_commit_group()
            if warp == 0:
                # Chunk m - 1's product is done (every thread waited for it before the
                # barrier), and its weights were read a chunk before: its stage loads
                # chunk m - 1 + _STAGES.
                if m >= 1 and m - 1 + _STAGES < nc:
                    self._issue(loads, bars, c_lo, c_hi, m - 1 + _STAGES, (m - 1) % _STAGES, w,
                                stage_bytes)  # fmt: skip

            last = cutlass.min(BT, eos - (bos + c * BT)) - 1
            gl = sG[last, 0, s]
            gsum = gsum + gl
            egl = cute.math.exp2(gl * _LOG2E, fastmath=True)
            for i in cutlass.range_constexpr(cute.size(acc_h)):
                acc_h[i] = acc_h[i] * egl
            warpgroup.fence()
            _gemm(mma, acc_h, aAt[None, None, None, s], bBd[None, None, None, m % _BD], True)
            warpgroup.commit_group()

            # Beside the product: chunk m + 1's weighted b.
            if m + 1 < nc:
                s1 = (m + 1) % _STAGES
                cute.arch.mbarrier_wait(bars + s1, ((m + 1) // _STAGES) % 2)
                t1 = bos + self._chunk(c_lo, c_hi, m + 1, w) * BT
                d1 = (m + 1) % _BD
                _weigh_b(zB, zBd, sG, s1, d1, tid, t1, eos, scale, reverse, self.dtype, BV)

            warpgroup.wait_group(0)
            if const_expr(not own):
                if m + 1 < nc:
                    hb.store(acc_h.load().to(self.dtype))
                    tile = sHmn[None, None, (m + 1) % self.hbuf]
                    cute.autovec_copy(hb, t_kv.partition_C(tile))

        if const_expr(not own):
            if warp == _STORE_WARP:
                cute.arch.cp_async_bulk_wait_group(0, read=True)
        if const_expr(self.store_end[w]):
            _end_state(acc_h, cH, mEnd, i_state, i_h, i_k * bk, i_v * BV)
        if const_expr(own):
            if i_x == 0 and tid == 0:
                mSeg[i_state, i_h] = gsum

    @cute.jit
    def _chunk(self, c_lo, c_hi, m, w: cutlass.Constexpr):
        """The chunk that walk ``w`` takes m-th."""
        c = c_lo + m
        if const_expr(self.reverse[w]):
            c = c_hi - 1 - m
        return c

    @cute.jit
    def _issue(self, loads, bars, c_lo, c_hi, m, s, w: cutlass.Constexpr,
               stage_bytes: cutlass.Constexpr):  # fmt: skip
        """One warp: the TMA loads of the m-th chunk walked (a, b and its log-decay) into
        stage s."""
        c = self._chunk(c_lo, c_hi, m, w)
        with cute.arch.elect_one():
            cute.arch.mbarrier_arrive_and_expect_tx(bars + s, stage_bytes)
        for tma, tg, ts in loads:
            cute.copy(tma, tg[None, c], ts[None, s], tma_bar_ptr=bars + s)


def _build(key):
    dtype, K, reverse, use_s0, store_end, own, bk, bv = key
    x = TensorArg(dtype, (None, None, None, K), compact=False, align=16)
    y = TensorArg(dtype, (None, None, None, None), compact=False, align=16)
    s = TensorArg(torch.float32, (None, None, K, None), compact=True)
    out = TensorArg(dtype, (None, None, K, None), compact=True, align=16)
    seg = TensorArg(torch.float32, (None, None), compact=True)
    gc = TensorArg(torch.float32, (None, None, 2, None), compact=True)
    fn = _States(_cute_dtype(dtype), K, reverse, use_s0, store_end, own, bk, bv)
    walk = (x, y, s, out, s, seg)
    return fn, (*walk, *walk, gc), (Float32(1.0), Int32(1), Int32(1)), False


_STATES = CompileCache("chunk_gla_state_walks", _build)


def _launch(gc, given, scale, cps, nseg, own, tile=None):
    """One launch of the walks ``given``: (reverse, (a, b, s0, out, s_end, gseg)) each, any of
    s0, out, s_end and gseg None where the walk has none; ``tile``: the (rows, columns) of the
    state per CTA of the forward's first step alone (default ``config._CUTE_START_TILE``)."""
    a = given[0][1][0]
    K = a.shape[3]
    # The state tile of each CTA: the forward's segment starts alone may take more of it
    # (config.py says where that measured faster).
    start = own and [is_rev for is_rev, _ in given] == [False]
    bk, bv = (tile or config._CUTE_START_TILE) if start else (_BK, BV)
    bk, bv = min(K, bk), min(K, bv)
    dummy = a.new_empty((1, 1, K, 1), dtype=torch.float32)
    args, rev, use_s0, store_end = [], [], [], []
    for is_rev, (x, y, s0, out, s_end, gseg) in given:
        if out is None:
            # Never written: a tile the store's TMA descriptor can describe.
            out = a.new_empty((1, 1, K, bv))
        if gseg is None:
            gseg = a.new_empty((1, 1), dtype=torch.float32)
        args += [x, y, dummy if s0 is None else s0, out, dummy if s_end is None else s_end, gseg]
        rev.append(is_rev)
        use_s0.append(s0 is not None)
        store_end.append(s_end is not None)
    if len(rev) == 1:
        # Never read: descriptors of the first walk's tensors stand in for the second's.
        args += args
    key = (a.dtype, K, tuple(rev), tuple(use_s0), tuple(store_end), (own,) * len(rev), bk, bv)
    _STATES.get(key)(*args, gc, scale, cps, nseg)


def walks(gc, forward=None, reverse=None, scale: float = 1.0) -> None:
    """Launch the state walks over whole sequences, one or both side by side in one launch.
    ``forward``: ``(k, v, h0, h, ht)``, the chunk states into ``h`` from the initial states
    ``h0`` (zeros when None), the final states into ``ht`` unless it is None; ``reverse``:
    ``(q, do, dht, dh, dh0)``, the gradients of the chunk end states into ``dh`` from ``dht``
    (zeros when None), the gradients of the initial states into ``dh0`` unless it is None.
    ``k, q: [B, T, H, K]`` and ``v, do: [B, T, H, V]`` of one 16-bit dtype (strides the TMA
    takes), K = V of 64 or 128; ``gc: [B, H, 2, T]`` float32 with T a
    multiple of 4; ``h0, ht, dht, dh0: [B, H, K, V]`` float32 and ``h, dh: [B * NT, H, K, V]``
    of q's dtype (``NT`` chunks of 64 tokens), all contiguous but the inputs."""
    given = [(r, (*w, None)) for r, w in ((False, forward), (True, reverse)) if w is not None]
    T = given[0][1][0].shape[1]
    _launch(gc, given, scale, -(-T // BT), 1, False)


def split_walks(
    gc, forward=None, reverse=None, scale: float = 1.0, *, segments, own, tile=None
) -> None:
    """The state walks split into ``segments`` (chunks per segment, segments per sequence),
    one or both side by side in one launch: the two steps around the carry across segments
    (triton.py's ``_launch_walk``, Note [chunk_gla CuTe split walks]). With ``own`` (the first
    step) each walk is ``(a, b, end, gseg)``: each segment walked from a zero state, what is
    left at its end (forward) or start (reverse) into ``end`` (``[B * nseg, H, K, V]``
    float32) and its total log-decay into ``gseg`` (``[B * nseg, H]`` float32). Without (the
    second step) each is ``(a, b, start, out)``: each segment walked from ``start`` (the
    carry's, ``[B * nseg, H, K, V]`` float32), the chunk states (gradients) into ``out``, as
    ``walks`` stores them. ``a, b`` as for ``walks`` (k and v forward, q and do reverse).
    ``tile``: see ``_launch``."""
    given = []
    for is_rev, w in ((False, forward), (True, reverse)):
        if w is None:
            continue
        x, y, first, second = w
        given.append(
            (
                is_rev,
                (x, y, None, None, first, second) if own else (x, y, first, second, None, None),
            )
        )
    _launch(gc, given, scale, segments[0], segments[1], own, tile)
