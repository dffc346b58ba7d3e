"""chunk_gla's gradients of q, k, v and the log-decay from the chunk states, in CuTeDSL for
Hopper (sm90): all four for each (chunk, head) item, with warpgroup matrix products (wgmma) on
tiles that the tensor memory accelerator (TMA) brings into shared memory.

It replaces the Triton passes of ``chunk_gla_bwd`` that follow its state walks (the dq/dk/dg
pass and, for K over 64, the dv pass): it reads q, k, v, do, the state at the chunk's start
``h`` and the gradient of the state at its end ``dh`` once, and writes dq, dk, dv and dg once.
At K = V = 64 with enough sequences and heads it also replaces the reverse state walk, walking
``dh`` itself (Note [chunk_gla CuTe gradients' walk]). The launcher and its contract are in
triton.py (``chunk_gla_bwd``) and config.py (``_cute_bwd_plan``, ``_cute_bwd_walks``).

Note [chunk_gla CuTe gradients' pipeline]: one CTA per multiprocessor (two at K = 64) takes the
items in turn. q, k, v and do have two stages in shared memory, the states one: an item's
tokens are loaded while the item before it runs (issued first thing in that item), and its
states as soon as that item's products through the states are done (mid-item). The results,
rounded, are written over the stage's tiles that no product reads any more (dq over v, dk over
q, dv over do: each warpgroup's columns are read only by its own products there) and stored by
TMA, which clips the rows past the sequence's end; the stage is loaded again only once those
stores have read it. The log-decay and dg's partial sums are double-buffered, so an item needs
two barriers of the whole CTA: once its states are free, and once its results are in shared
memory; dg is finished by two warps while the others go on to the next item. Loading, then
computing, then storing each item with nothing beside it (one CTA per item) took about 1.65
times as long, and storing the results from registers (four bytes per thread and instruction) stalled
on the memory pipeline's queue (docs/performance.md, "chunk_gla: the CuTeDSL gradients' pass").

Note [chunk_gla CuTe gradients' walk]: at K = V = 64 (one warpgroup), where enough sequences
and heads fill whole waves (``config._cute_bwd_walks``), the pass also does the reverse state
walk's work: one CTA per (sequence, head) takes its chunks last first, so the gradient of the
state at the chunk's end, ``dh``, is on chip when the chunk is reached and need not be written
and read again. It stays in float32 registers from chunk to chunk (an accumulator of 32 values
per thread, beside the pass's five: 255 registers, no spills), and its rounding to 16 bits goes
to the tile the products read, as they would read the walk's stored ``dh``. Per chunk:

    dh <- exp(G_L) dh + (q * scale * exp(G))^T do

the A operand q's tile read transposed (``ldmatrix``) into registers and scaled per token before
the barrier that ends the products through ``dh`` (dk is later written over q's tile); after
it the product, third of the four there, and its rounding stored in place once done; after the
sequence's first chunk ``dh`` is ``dh0``. Only the state's tile ``h`` is loaded per chunk. Each
CTA's chunks run one after another, so the walk gains only where two CTAs run on every
multiprocessor, and loses to the separate walk and pass with fewer sequences and heads
(docs/performance.md, "chunk_gla: the CuTeDSL gradients' pass").

Note [chunk_gla CuTe gradients]: per chunk, with ``G`` the in-chunk cumulative log-decay (``C``
its compensation, Note [log-decay floor]), ``G_L`` its value at the chunk's last token and
``D[i, j] = scale * exp(G_i - G_j)`` for tokens ``j <= i`` of the sequence (0 elsewhere):

    A'  = (q k^T) * D                 dA' = (do v^T) * D        (products, then registers)
    dq  = scale * exp(G_i) * (do h^T)  + dA' k
    dk  = exp(G_L - G_j) * (v dh^T)   + dA'^T q
    dv  = exp(G_L - G_j) * (k dh)     + A'^T do
    dg_t = sum_{s >= t} gq_s + sum_{s < t} gk_s + exp(G_L) <h, dh>

with ``gq_s = q_s . (the first term of dq_s) + sum_j P[s, j] - sum_i P[i, s]``,
``P[i, j] = dA'[i, j] (q_i . k_j)`` for ``j < i``, and ``gk_s = k_s . (the first term of dk_s)``:
the same sums as ``_gla_bwd_dqk_kernel`` (bwd.py), which never subtract the large terms through
``dh``. Each first term is formed in its accumulator, scaled there by its row's decay, and the
second product then accumulates onto it. A' and dA' go to shared memory in 16 bits, where each
is read both as it is and transposed (the same bytes as an M-major operand). The K (= V)
columns of every result are split between ``K / 64`` warpgroups, 64 each; A' and dA' between
them by columns. P's row and column sums are taken from registers (quad and warp shuffles),
their per-warp and per-warpgroup parts added in a fixed order, and dg's scans run in a fixed
order within each of two warps: the results are the same bits on every run.
"""

from __future__ import annotations

import math
from typing import NamedTuple

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
from .cute import (
    _acc_as_operand_a,
    _cute_dtype,
    _gemm,
    _load_decay,
    _publish_decay,
    _stage,
    _tma_atom,
    _tma_tiles,
)

BT = 64  # tokens per chunk
_WG_COLS = 64  # result columns per warpgroup
# CTAs that fit on a multiprocessor: shared memory for two items' q, k, v and do and one
# item's states (about 221 KB at K = 128, 106 KB at 64).
_CTAS_PER_SM = {64: 2, 128: 1}
_LOG2E = math.log2(math.e)


@cute.jit
def _quad_sum(x):
    """The sum of x over the four lanes of a quad (the lanes that hold one accumulator row)."""
    x = x + cute.arch.shuffle_sync_bfly(x, offset=1)
    return x + cute.arch.shuffle_sync_bfly(x, offset=2)


@cute.jit
def _row_dots(acc, coord, src, s, parts, wg, lane):
    """Each accumulator row's dot product with the same row and columns of ``src`` (16-bit, in
    shared memory, stage ``s``), over this warpgroup's columns, into ``parts[wg, row]``. A thread of a
    wgmma accumulator holds two rows (fragment elements 0 and 2 start them), and the four lanes
    of its quad hold all of its warpgroup's columns of those rows."""
    r0, _ = coord[0]
    r1, _ = coord[2]
    s0 = Float32(0.0)
    s1 = Float32(0.0)
    for i in cutlass.range_constexpr(cute.size(acc)):
        r, c = coord[i]
        x = acc[i] * src[r, c, s].to(Float32)
        if r == r0:
            s0 = s0 + x
        else:
            s1 = s1 + x
    s0 = _quad_sum(s0)
    s1 = _quad_sum(s1)
    if lane % 4 == 0:
        parts[wg, r0] = s0
        parts[wg, r1] = s1


@cute.jit
def _p_sums(p, coord, rowp, colp, wg, wq, lane):
    """P's row sums over this warpgroup's columns into ``rowp[wg, row]`` and its column sums over
    this warp's 16 rows into ``colp[wq, column]``. Element ``i`` of a wgmma accumulator lies in
    the fragment's first row when ``(i // 2) % 2 == 0``, and elements ``i`` and ``i + 2`` share a
    column; the eight lanes with one ``lane % 4`` hold the same columns of the warp's rows."""
    r0, _ = coord[0]
    r1, _ = coord[2]
    s0 = Float32(0.0)
    s1 = Float32(0.0)
    for i in cutlass.range_constexpr(cute.size(p)):
        if (i // 2) % 2 == 0:
            s0 = s0 + p[i]
        else:
            s1 = s1 + p[i]
    s0 = _quad_sum(s0)
    s1 = _quad_sum(s1)
    if lane % 4 == 0:
        rowp[wg, r0] = s0
        rowp[wg, r1] = s1
    for i in cutlass.range_constexpr(cute.size(p)):
        if (i // 2) % 2 == 0:
            c = p[i] + p[i + 2]
            for off in cutlass.range_constexpr(3):
                c = c + cute.arch.shuffle_sync_bfly(c, offset=4 << off)
            if lane < 4:
                _, col = coord[i]
                colp[wq, col] = c


@cute.jit
def _item(it, H, NT):
    """Item ``it``'s (chunk, head, batch row): items go chunk fastest, then head."""
    return it % NT, (it // NT) % H, it // (NT * H)


@cute.jit
def _scale_rows(acc, coord, dec, col: cutlass.Constexpr):
    for i in cutlass.range_constexpr(cute.size(acc)):
        r, _ = coord[i]
        acc[i] = acc[i] * dec[r, col]


class _Sums(NamedTuple):
    """One item's partial sums for dg in shared memory (Note [chunk_gla CuTe gradients])."""

    q: cute.Tensor  # (warpgroup, token): q's row dots with dq's first term
    k: cute.Tensor  # (warpgroup, token): k's row dots with dk's first term
    rowp: cute.Tensor  # (warpgroup, token): P's row sums over the warpgroup's columns
    colp: cute.Tensor  # (warp of a warpgroup, token): P's column sums over the warp's rows
    red: cute.Tensor  # (warp,): <h, dh>


class _Grads:
    """The gradients for one (dtype, K = V): see the module docstring."""

    def __init__(self, dtype, K: int, walk: bool = False, use_dht: bool = False) -> None:
        self.dtype = dtype
        self.K = K
        self.wgs = K // _WG_COLS
        self.threads = 128 * self.wgs
        # One CTA per (sequence, head) walking its chunks backwards with the state's gradient
        # on chip (Note [chunk_gla CuTe gradients' walk]): one warpgroup, K = V = 64.
        self.walk = walk
        self.use_dht = use_dht
        assert not walk or K == _WG_COLS

    def _layouts(self):
        K, dt = self.K, self.dtype
        row = LayoutEnum.ROW_MAJOR
        # Every tile is K-major in its rows' order (columns contiguous), and read transposed as
        # an M-major (or N-major) operand where a product needs it so.
        tok = sm90_utils.make_smem_layout_a(row, (BT, BT, K), dt, 2)  # (BT, K, 2): q k v do
        st = sm90_utils.make_smem_layout_b(row, (BT, K, K), dt, 1)  # (K, V, 1): h dh
        att = sm90_utils.make_smem_layout_a(row, (BT, BT, BT), dt, 1)  # (BT, BT, 1): A' dA'
        return tok, st, att

    def _mmas(self):
        dt, Km, MN = self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.MN
        f32, wgs = Float32, self.wgs

        def mma(a, b, n):
            return sm90_utils.make_trivial_tiled_mma(dt, dt, a, b, f32, (1, wgs, 1), (BT, n))

        # A and dA (columns split between the warpgroups); the first terms; the second terms
        # and k dh; the products with a transposed A' or dA'; and the walk's step of dh, its A
        # operand (q scaled, transposed) from registers.
        step = sm90_utils.make_trivial_tiled_mma(
            dt, dt, Km, MN, f32, (1, wgs, 1), (BT, _WG_COLS), warpgroup.OperandSource.RMEM
        )
        return (
            mma(Km, Km, BT // wgs),
            mma(Km, Km, _WG_COLS),
            mma(Km, MN, _WG_COLS),
            mma(MN, MN, _WG_COLS),
            step,
        )

    @cute.jit
    def __call__(
        self,
        mQ: cute.Tensor,  # [B, T, H, K]
        mK: cute.Tensor,  # [B, T, H, K]
        mV: cute.Tensor,  # [B, T, H, V]
        mDO: cute.Tensor,  # [B, T, H, V]
        mGc: cute.Tensor,  # [B, H, 2, T] float32
        mH: cute.Tensor,  # [B * NT, H, K, V]
        mDH: cute.Tensor,  # [B * NT, H, K, V]
        mDQ: cute.Tensor,  # [B, T, H, K]
        mDK: cute.Tensor,  # [B, T, H, K]
        mDV: cute.Tensor,  # [B, T, H, V]
        mDG: cute.Tensor,  # [B, T, H] float32
        mDHT: cute.Tensor,  # [B, H, K, V] float32: dht (walk with use_dht only)
        mDH0: cute.Tensor,  # [B, H, K, V] float32: dh0 (walk only)
        scale: Float32,
        ctas: Int32,
        stream: cuda.CUstream,
    ):
        K = self.K
        tok, st, att = self._layouts()
        m_s, m_i, m_j, m_m, m_d = self._mmas()
        one_tok, one_st = _stage(tok), _stage(st)
        # (T, K, H, B) views of the [B, T, H, K] tensors, tiles of (BT, K); (K, V, H, slots) views
        # of the [slots, H, K, V] states, one tile of (K, V) each.
        tma_q, gq = _tma_atom(mQ, (1, 3, 2, 0), one_tok, (BT, K))
        tma_k, gk = _tma_atom(mK, (1, 3, 2, 0), one_tok, (BT, K))
        tma_v, gv = _tma_atom(mV, (1, 3, 2, 0), one_tok, (BT, K))
        tma_do, gdo = _tma_atom(mDO, (1, 3, 2, 0), one_tok, (BT, K))
        tma_h, gh = _tma_atom(mH, (2, 3, 1, 0), one_st, (K, K))
        tma_dh, gdh = _tma_atom(mDH, (2, 3, 1, 0), one_st, (K, K))
        store = cpasync.CopyBulkTensorTileS2GOp()
        tma_dq, gdq = _tma_atom(mDQ, (1, 3, 2, 0), one_tok, (BT, K), store)
        tma_dk, gdk = _tma_atom(mDK, (1, 3, 2, 0), one_tok, (BT, K), store)
        tma_dv, gdv = _tma_atom(mDV, (1, 3, 2, 0), one_tok, (BT, K), store)
        tok_bytes = 4 * cute.size_in_bytes(self.dtype, one_tok)
        # The walk loads h only: dh is on chip.
        st_bytes = (1 if self.walk else 2) * cute.size_in_bytes(self.dtype, one_st)
        dt = self.dtype

        @cute.struct
        class Shared:
            bars: cute.struct.MemRange[cutlass.Int64, 3]  # the two token stages, the states
            # Two of each (this item's and the next's): the log-decay, and dg's per-token
            # partial sums (_Sums).
            dec: cute.struct.MemRange[Float32, 2 * 5 * BT]
            parts: cute.struct.MemRange[Float32, 2 * 2 * 2 * BT]
            rowp: cute.struct.MemRange[Float32, 2 * 2 * BT]
            colp: cute.struct.MemRange[Float32, 2 * 4 * BT]
            red: cute.struct.MemRange[Float32, 2 * 8]
            tot: cute.struct.MemRange[Float32, 2]
            q: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            k: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            v: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            do: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            h: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(st)], 1024]
            dh: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(st)], 1024]
            a: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(att)], 1024]
            da: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(att)], 1024]

        self.kernel(
            m_s, m_i, m_j, m_m, m_d, tma_q, gq, tma_k, gk, tma_v, gv, tma_do, gdo, tma_h, gh,
            tma_dh, gdh, tma_dq, gdq, tma_dk, gdk, tma_dv, gdv, mGc, mDG, mDHT, mDH0, scale, tok,
            st, att, Shared, tok_bytes, st_bytes,
        ).launch(
            grid=(ctas, 1, 1),
            block=(self.threads, 1, 1),
            smem=Shared.size_in_bytes(),
            stream=stream,
        )  # fmt: skip

    @cute.kernel
    def kernel(
        self,
        m_s: cute.TiledMma,
        m_i: cute.TiledMma,
        m_j: cute.TiledMma,
        m_m: cute.TiledMma,
        m_d: cute.TiledMma,
        tma_q: cute.CopyAtom,
        gq: cute.Tensor,
        tma_k: cute.CopyAtom,
        gk: cute.Tensor,
        tma_v: cute.CopyAtom,
        gv: cute.Tensor,
        tma_do: cute.CopyAtom,
        gdo: cute.Tensor,
        tma_h: cute.CopyAtom,
        gh: cute.Tensor,
        tma_dh: cute.CopyAtom,
        gdh: cute.Tensor,
        tma_dq: cute.CopyAtom,
        gdq: cute.Tensor,
        tma_dk: cute.CopyAtom,
        gdk: cute.Tensor,
        tma_dv: cute.CopyAtom,
        gdv: cute.Tensor,
        mGc: cute.Tensor,
        mDG: cute.Tensor,
        mDHT: cute.Tensor,
        mDH0: cute.Tensor,
        scale: Float32,
        tok_l: cute.ComposedLayout,
        st_l: cute.ComposedLayout,
        att_l: cute.ComposedLayout,
        Shared: cutlass.Constexpr,
        tok_bytes: cutlass.Constexpr,
        st_bytes: cutlass.Constexpr,
    ):
        K = self.K
        tid, _, _ = cute.arch.thread_idx()
        first, _, _ = cute.arch.block_idx()
        step, _, _ = cute.arch.grid_dim()
        B, T, H = mDG.shape[0], mDG.shape[1], mDG.shape[2]
        NT = (T + BT - 1) // BT
        items = B * H * NT
        # This CTA's items: it0, it0 + di, ... (count of them).
        if const_expr(self.walk):
            # The chunks of (sequence, head) ``first``, the last one first.
            it0 = first * NT + NT - 1
            di = Int32(-1)
            count = NT
        else:
            it0 = first
            di = step
            count = (items - first + step - 1) // step
        lane = tid % 32
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = tid // 128

        smem = utils.SmemAllocator()
        sh = smem.allocate(Shared)
        bars = sh.bars.data_ptr()
        sQ = sh.q.get_tensor(tok_l.outer, swizzle=tok_l.inner)  # (BT, K, stage)
        sK = sh.k.get_tensor(tok_l.outer, swizzle=tok_l.inner)
        sV = sh.v.get_tensor(tok_l.outer, swizzle=tok_l.inner)
        sDO = sh.do.get_tensor(tok_l.outer, swizzle=tok_l.inner)
        sH = sh.h.get_tensor(st_l.outer, swizzle=st_l.inner)  # (K, V, 1)
        sDH = sh.dh.get_tensor(st_l.outer, swizzle=st_l.inner)
        sA = sh.a.get_tensor(att_l.outer, swizzle=att_l.inner)  # (BT, BT, 1): [i, j]
        sDA = sh.da.get_tensor(att_l.outer, swizzle=att_l.inner)

        def tr(t):
            # The same bytes with the first two modes swapped.
            return cute.make_tensor(t.iterator, cute.select(t.layout, mode=[1, 0, 2]))

        # (token, what, buffer): G, C, exp(G_L - G), scale*exp(G), G_L
        decs = sh.dec.get_tensor(cute.make_layout((BT, 5, 2)))
        parts = sh.parts.get_tensor(cute.make_layout((2, 2, BT, 2), stride=(2 * BT, BT, 1, 4 * BT)))
        rowp = sh.rowp.get_tensor(cute.make_layout((2, BT, 2), stride=(BT, 1, 2 * BT)))
        colp = sh.colp.get_tensor(cute.make_layout((4, BT, 2), stride=(BT, 1, 4 * BT)))
        red = sh.red.get_tensor(cute.make_layout((8, 2)))
        tot = sh.tot.get_tensor(cute.make_layout(2))

        if warp == 0:
            with cute.arch.elect_one():
                for b in cutlass.range_constexpr(3):
                    cute.arch.mbarrier_init(bars + b, 1)
            cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()

        loads = (tma_q, gq, tma_k, gk, tma_v, gv, tma_do, gdo, tma_h, gh, tma_dh, gdh)
        tiles = (sQ, sK, sV, sDO, sH, sDH)
        if warp == 0:
            # The first item's tiles; each item then loads the next one's tokens first thing,
            # and the next one's states as soon as its own are used.
            self._issue_tok(loads, tiles, bars, it0, 0, H, NT, tok_bytes)
            self._issue_states(loads, tiles, bars, it0, H, NT, st_bytes)

        t_s = m_s.get_slice(tid)
        t_i = m_i.get_slice(tid)
        t_j = m_j.get_slice(tid)
        t_m = m_m.get_slice(tid)
        z = (None, None, None, 0)
        aQ = t_s.make_fragment_A(t_s.partition_A(sQ))  # (MMA, M, K, stage)
        bK = t_s.make_fragment_B(t_s.partition_B(sK))
        aDOs = t_s.make_fragment_A(t_s.partition_A(sDO))
        bV = t_s.make_fragment_B(t_s.partition_B(sV))
        aDO = t_i.make_fragment_A(t_i.partition_A(sDO))
        bH = t_i.make_fragment_B(t_i.partition_B(sH))[z]
        aV = t_i.make_fragment_A(t_i.partition_A(sV))
        bDH = t_i.make_fragment_B(t_i.partition_B(sDH))[z]
        aDA = t_j.make_fragment_A(t_j.partition_A(sDA))[z]
        bKt = t_j.make_fragment_B(t_j.partition_B(tr(sK)))
        aK = t_j.make_fragment_A(t_j.partition_A(sK))
        bDHt = t_j.make_fragment_B(t_j.partition_B(tr(sDH)))[z]
        aDAt = t_m.make_fragment_A(t_m.partition_A(tr(sDA)))[z]
        bQt = t_m.make_fragment_B(t_m.partition_B(tr(sQ)))
        aAt = t_m.make_fragment_A(t_m.partition_A(tr(sA)))[z]
        bDOt = t_m.make_fragment_B(t_m.partition_B(tr(sDO)))

        acc_a = t_s.make_fragment_C(t_s.partition_shape_C((BT, BT)))
        acc_da = t_s.make_fragment_C(t_s.partition_shape_C((BT, BT)))
        acc_q = t_i.make_fragment_C(t_i.partition_shape_C((BT, K)))
        acc_k = t_i.make_fragment_C(t_i.partition_shape_C((BT, K)))
        acc_v = t_j.make_fragment_C(t_j.partition_shape_C((BT, K)))
        cA = t_s.partition_C(cute.make_identity_tensor((BT, BT)))
        cR = t_i.partition_C(cute.make_identity_tensor((BT, K)))
        yA = cute.make_rmem_tensor_like(acc_a, self.dtype)
        yDA = cute.make_rmem_tensor_like(acc_da, self.dtype)
        yR = cute.make_rmem_tensor_like(acc_q, self.dtype)
        zH = cute.zipped_divide(sH, (1, 8, 1))  # ((1, 8, 1), (K, V / 8, 1))
        zDH = cute.zipped_divide(sDH, (1, 8, 1))

        if const_expr(self.walk):
            # dh: float32 in registers from chunk to chunk, and its rounding to 16 bits in sDH
            # for the products.
            t_d = m_d.get_slice(tid)
            bDOd = t_d.make_fragment_B(t_d.partition_B(tr(sDO)))
            acc_dh = t_d.make_fragment_C(t_d.partition_shape_C((K, K)))
            cDH = t_d.partition_C(cute.make_identity_tensor((K, K)))
            xq = t_d.make_fragment_C(t_d.partition_shape_C((K, BT)))
            cQt = t_d.partition_C(cute.make_identity_tensor((K, BT)))  # (column of q, token)
            # q^T in an accumulator's layout (each thread two adjacent tokens of a column of
            # q), read by transposing ldmatrix from q's tile.
            ldsm = cute.make_copy_atom(
                cute.nvgpu.warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), self.dtype
            )
            thr_ldsm = cute.make_tiled_copy_C(ldsm, m_d).get_slice(tid)
            tQt = thr_ldsm.partition_S(tr(sQ))  # (copy, M, N, stage)
            yq = cute.make_rmem_tensor(t_d.partition_shape_C((K, BT)), self.dtype)
            tYq = thr_ldsm.retile(yq)
            tDHs = t_d.partition_C(sDH[None, None, 0])
            for i in cutlass.range_constexpr(cute.size(acc_dh)):
                acc_dh[i] = Float32(0.0)
                if const_expr(self.use_dht):
                    r, c = cDH[i]
                    acc_dh[i] = mDHT[first // H, first % H, r, c]
            self._store_dh16(acc_dh, tDHs)
            cute.arch.fence_proxy("async.shared", space="cta")

        # The first item's log-decay; then each item publishes the next one's (loaded while the
        # previous item ran) and loads the one after.
        g0, cc0, gl0, cl0, tn = self._decay(mGc, it0, H, NT, T, tid)
        _publish_decay(decs[None, None, 0], tid, g0, cc0, gl0, cl0, tn, T, scale)
        nxt = it0 + di * cutlass.min(1, count - 1)
        g0, cc0, gl0, cl0, tn = self._decay(mGc, nxt, H, NT, T, tid)
        cute.arch.sync_threads()

        for n in cutlass.range(count, unroll=1):
            it = it0 + n * di
            more = n + 1 < count
            i_c, i_h, i_b = _item(it, H, NT)
            t0 = i_c * BT
            n_ok = cutlass.min(BT, T - t0)
            s = n % 2  # the token stage, and the buffer of the decay and of dg's sums
            dec = decs[None, None, s]
            sums = _Sums(
                parts[0, None, None, s],
                parts[1, None, None, s],
                rowp[None, None, s],
                colp[None, None, s],
                red[None, s],
            )
            if warp == 0 and more:
                # The other stage's last item has stored its results from it (and every product
                # of that item is done): the next item's tokens go there.
                cute.arch.cp_async_bulk_wait_group(0, read=True)
                self._issue_tok(loads, tiles, bars, it + di, 1 - s, H, NT, tok_bytes)

            cute.arch.mbarrier_wait(bars + s, (n // 2) % 2)
            warpgroup.fence()
            _gemm(m_s, acc_a, aQ[None, None, None, s], bK[None, None, None, s], False)
            _gemm(m_s, acc_da, aDOs[None, None, None, s], bV[None, None, None, s], False)
            warpgroup.commit_group()
            cute.arch.mbarrier_wait(bars + 2, n % 2)
            _gemm(m_i, acc_q, aDO[None, None, None, s], bH, False)
            warpgroup.commit_group()
            _gemm(m_i, acc_k, aV[None, None, None, s], bDH, False)
            warpgroup.commit_group()
            _gemm(m_j, acc_v, aK[None, None, None, s], bDHt, False)
            warpgroup.commit_group()

            # <h, dh> while the products run: 8 columns (16 bytes) at a time.
            hdh = Float32(0.0)
            for e8 in cutlass.range_constexpr(K * K // 8 // self.threads):
                e = tid + e8 * self.threads
                x = zH[None, (e // (K // 8), e % (K // 8), 0)].load().to(Float32)
                y = zDH[None, (e // (K // 8), e % (K // 8), 0)].load().to(Float32)
                hdh = hdh + (x * y).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
            for off in cutlass.range_constexpr(5):
                hdh = hdh + cute.arch.shuffle_sync_bfly(hdh, offset=16 >> off)
            if lane == 0:
                sums.red[warp] = hdh

            # A' and dA', and P's row and column sums, once A and dA are done.
            warpgroup.wait_group(3)
            for i in cutlass.range_constexpr(cute.size(acc_a)):
                qi, kj = cA[i]
                span = (dec[qi, 0] - dec[kj, 0]) + (dec[qi, 1] - dec[kj, 1])
                d = scale * cute.math.exp2(span * _LOG2E, fastmath=True)
                if kj > qi or qi >= n_ok:
                    d = Float32(0.0)
                da = acc_da[i] * d
                p = da * acc_a[i]
                if kj == qi:
                    p = Float32(0.0)
                yA[i] = (acc_a[i] * d).to(self.dtype)
                yDA[i] = da.to(self.dtype)
                acc_a[i] = p
            cute.autovec_copy(yA, t_s.partition_C(sA[None, None, 0]))
            cute.autovec_copy(yDA, t_s.partition_C(sDA[None, None, 0]))
            cute.arch.fence_proxy("async.shared", space="cta")
            _p_sums(acc_a, cA, sums.rowp, sums.colp, wg, warp % 4, lane)
            if const_expr(self.walk):
                # The A operand of dh's step (below): q's tile read transposed into registers,
                # each token's row scaled by scale * exp(G) and rounded to 16 bits (as the
                # Triton walk rounds it), before the barrier after which dk is written over q.
                cute.copy(thr_ldsm, tQt[None, None, None, s], tYq)
                for i in cutlass.range_constexpr(cute.size(xq)):
                    _, t = cQt[i]
                    xq[i] = yq[i].to(Float32) * dec[t, 3]
                aQd = _acc_as_operand_a(xq, m_d, self.dtype)
            # Once the first terms are done with h and dh, the next item's states load.
            warpgroup.wait_group(0)
            cute.arch.sync_threads()
            if warp == 0 and more:
                self._issue_states(loads, tiles, bars, it + di, H, NT, st_bytes)
            _publish_decay(decs[None, None, 1 - s], tid, g0, cc0, gl0, cl0, tn, T, scale)
            g0, cc0, gl0, cl0, tn = self._decay(
                mGc, it0 + di * cutlass.min(n + 2, count - 1), H, NT, T, tid
            )

            # dq: its first term scaled, q's row dots, then dA' k onto it.
            _scale_rows(acc_q, cR, dec, 3)
            _row_dots(acc_q, cR, sQ, s, sums.q, wg, lane)
            warpgroup.fence()
            _gemm(m_j, acc_q, aDA, bKt[None, None, None, s], True)
            warpgroup.commit_group()
            # dk: likewise with exp(G_L - G_j), k's row dots, then dA'^T q.
            _scale_rows(acc_k, cR, dec, 2)
            _row_dots(acc_k, cR, sK, s, sums.k, wg, lane)
            warpgroup.fence()
            _gemm(m_m, acc_k, aDAt, bQt[None, None, None, s], True)
            warpgroup.commit_group()
            if const_expr(self.walk):
                # dh at the chunk's start: exp(G_L) dh + (q * scale * exp(G))^T do.
                egl = cute.math.exp2(dec[0, 4] * _LOG2E, fastmath=True)
                for i in cutlass.range_constexpr(cute.size(acc_dh)):
                    acc_dh[i] = acc_dh[i] * egl
                warpgroup.fence()
                _gemm(m_d, acc_dh, aQd, bDOd[None, None, None, s], True)
                warpgroup.commit_group()
            # dv: k dh scaled by exp(G_L - G_j), then A'^T do.
            _scale_rows(acc_v, cR, dec, 2)
            warpgroup.fence()
            _gemm(m_m, acc_v, aAt, bDOt[None, None, None, s], True)
            warpgroup.commit_group()

            # The results, rounded, into this stage's tiles that no product reads any more
            # (each warpgroup's columns are read by its own products only): dq over v, dk over
            # q, dv over do; then stored by TMA, which clips the rows past the sequence's end.
            # With the walk, dh's step is the third of four: dv's result goes over do, which
            # that step reads, only once both are done.
            warpgroup.wait_group(3 if const_expr(self.walk) else 2)
            yR.store(acc_q.load().to(self.dtype))
            cute.autovec_copy(yR, t_i.partition_C(sV[None, None, s]))
            warpgroup.wait_group(2 if const_expr(self.walk) else 1)
            yR.store(acc_k.load().to(self.dtype))
            cute.autovec_copy(yR, t_i.partition_C(sQ[None, None, s]))
            if const_expr(self.walk):
                # The next chunk's dh in this one's place (every product through it is done:
                # the barrier above), or after the sequence's first chunk, dh0 out.
                warpgroup.wait_group(1)
                if more:
                    self._store_dh16(acc_dh, tDHs)
                else:
                    self._store_dh0(acc_dh, cDH, mDH0, i_b, i_h)
            warpgroup.wait_group(0)
            yR.store(acc_v.load().to(self.dtype))
            cute.autovec_copy(yR, t_j.partition_C(sDO[None, None, s]))
            cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.sync_threads()
            if warp == 0:
                outs = ((tma_dq, sV, gdq), (tma_dk, sQ, gdk), (tma_dv, sDO, gdv))
                for tma, sx, g in outs:
                    ts, tg = _tma_tiles(tma, sx, g, (BT, K), i_h, i_b)
                    cute.copy(tma, ts[None, s], tg[None, i_c])
                cute.arch.cp_async_bulk_commit_group()
            if tid < BT:
                self._dg(sums, tot, dec, mDG, tid, lane, i_b, t0, i_h, n_ok)
        if warp == 0:
            cute.arch.cp_async_bulk_wait_group(0, read=True)

    @cute.jit
    def _store_dh16(self, acc, dh_s):
        """The walk's dh (a float32 accumulator), rounded to 16 bits, into the tile the products
        read."""
        y = cute.make_rmem_tensor_like(acc, self.dtype)
        y.store(acc.load().to(self.dtype))
        cute.autovec_copy(y, dh_s)

    @cute.jit
    def _store_dh0(self, acc, coord, mDH0, i_b, i_h):
        """The walk's dh after the sequence's first chunk (float32, ``coord`` its (K, V)
        coordinates): the gradient of the initial state, ``dh0[i_b, i_h]``."""
        for i in cutlass.range_constexpr(cute.size(acc)):
            r, c = coord[i]
            mDH0[i_b, i_h, r, c] = acc[i]

    @cute.jit
    def _decay(self, mGc, it, H, NT, T, tid):
        """Item ``it``'s log-decay (``_load_decay``'s values, then its chunk's first token)."""
        _, i_h, i_b = _item(it, H, NT)
        t0 = (it % NT) * BT
        g, cc, gl, cl = _load_decay(mGc, i_b, i_h, t0, T, tid)
        return g, cc, gl, cl, t0

    @cute.jit
    def _issue_tok(self, loads, tiles, bars, it, s, H, NT, tok_bytes: cutlass.Constexpr):
        """One warp: the TMA loads of item ``it``'s q, k, v and do tiles into stage ``s`` (a TMA
        copy elects its issuing lane itself, so every lane of the warp must reach it)."""
        K = self.K
        tma_q, gq, tma_k, gk, tma_v, gv, tma_do, gdo, _, _, _, _ = loads
        sQ, sK, sV, sDO, _, _ = tiles
        i_c, i_h, i_b = _item(it, H, NT)
        with cute.arch.elect_one():
            cute.arch.mbarrier_arrive_and_expect_tx(bars + s, tok_bytes)
        for tma, sx, g in ((tma_q, sQ, gq), (tma_k, sK, gk), (tma_v, sV, gv), (tma_do, sDO, gdo)):
            ts, tg = _tma_tiles(tma, sx, g, (BT, K), i_h, i_b)
            cute.copy(tma, tg[None, i_c], ts[None, s], tma_bar_ptr=bars + s)

    @cute.jit
    def _issue_states(self, loads, tiles, bars, it, H, NT, st_bytes: cutlass.Constexpr):
        """One warp: the TMA loads of item ``it``'s h and dh."""
        K = self.K
        _, _, _, _, _, _, _, _, tma_h, gh, tma_dh, gdh = loads
        _, _, _, _, sH, sDH = tiles
        i_c, i_h, i_b = _item(it, H, NT)
        i_s = i_b * NT + i_c
        with cute.arch.elect_one():
            cute.arch.mbarrier_arrive_and_expect_tx(bars + 2, st_bytes)
        # The walk carries dh on chip: h only.
        pairs = ((tma_h, sH, gh),) if self.walk else ((tma_h, sH, gh), (tma_dh, sDH, gdh))
        for tma, sx, g in pairs:
            ts, tg = _tma_tiles(tma, sx, g, (K, K), i_h, i_s)
            cute.copy(tma, tg[None, 0], ts[None, 0], tma_bar_ptr=bars + 2)

    @cute.jit
    def _dg(self, sums, tot, dec, mDG, tid, lane, i_b, t0, i_h, n_ok):
        """The first 64 threads: the chunk's dg (Note [chunk_gla CuTe gradients]), every sum in
        a fixed order. Each thread gathers its token's gq and gk from the partial sums, its
        warp scans them (suffix sums of gq, prefix sums of gk), and each warp adds the other's
        total, exchanged through shared memory behind a barrier of the two warps."""
        gq = Float32(0.0)
        gk = Float32(0.0)
        for w in cutlass.range_constexpr(self.wgs):
            gq = gq + sums.q[w, tid] + sums.rowp[w, tid]
            gk = gk + sums.k[w, tid]
        for w in cutlass.range_constexpr(4):
            gq = gq - sums.colp[w, tid]
        sq = gq
        pk = gk
        for b in cutlass.range_constexpr(5):
            o = 1 << b
            up = cute.arch.shuffle_sync_down(sq, offset=o)
            if lane + o < 32:
                sq = sq + up
            down = cute.arch.shuffle_sync_up(pk, offset=o)
            if lane >= o:
                pk = pk + down
        if tid == 32:
            tot[0] = sq  # the second warp's gq, all of it
        if tid == 31:
            tot[1] = pk  # the first warp's gk, all of it
        cute.arch.barrier(barrier_id=1, number_of_threads=BT)
        total = Float32(0.0)
        for w in cutlass.range_constexpr(self.threads // 32):
            total = total + sums.red[w]
        x = total * cute.math.exp2(dec[0, 4] * _LOG2E, fastmath=True)
        x = x + sq + (pk - gk)
        if tid < 32:
            x = x + tot[0]
        else:
            x = x + tot[1]
        if tid < n_ok:
            mDG[i_b, t0 + tid, i_h] = x


def _build(key):
    dtype, K, walk, use_dht = key
    x = TensorArg(dtype, (None, None, None, K), compact=False, align=16)
    gc = TensorArg(torch.float32, (None, None, 2, None), compact=True)
    s = TensorArg(dtype, (None, None, K, K), compact=True, align=16)
    out = TensorArg(dtype, (None, None, None, K), compact=True, align=16)
    dg = TensorArg(torch.float32, (None, None, None), compact=True)
    s32 = TensorArg(torch.float32, (None, None, K, K), compact=True)
    fn = _Grads(_cute_dtype(dtype), K, walk, use_dht)
    args = (x, x, x, x, gc, s, s, out, out, out, dg, s32, s32)
    return fn, args, (Float32(1.0), Int32(1)), False


_GRADS = CompileCache("chunk_gla_bwd_grads", _build)


def grads(q, k, v, do, gc, h, dh, dq, dk, dv, dg, scale: float, dht=None, dh0=None) -> None:
    """Launch the gradients' pass: ``dq, dk, dv`` (``[B, T, H, K]``, contiguous, q's dtype)
    and ``dg`` (``[B, T, H]`` float32, contiguous) from q, k, v, do (``K = V`` of 64 or 128), the
    chunk log-decay ``gc``, the state at each chunk's start ``h`` and the gradient of the state
    at its end ``dh`` (``[B * NT, H, K, V]`` contiguous, q's dtype). One CTA per multiprocessor
    takes the (chunk, head) items in turn.

    With ``dh`` None (K = V = 64 only), the pass walks the state's gradient itself: one CTA per
    (sequence, head) takes its chunks last first, from ``dht`` (``[B, H, K, V]`` float32,
    contiguous, or None: zeros) and writes the gradient of the initial state into ``dh0``
    (same shape)."""
    B, T, H, K = q.shape
    walk = dh is None
    if walk:
        assert K == _WG_COLS and dh0 is not None
        key = (q.dtype, K, True, dht is not None)
        ctas = B * H
        dh = h  # read by no TMA: a tile its descriptor can describe
        if dht is None:
            dht = dh0
    else:
        key = (q.dtype, K, False, False)
        items = B * H * -(-T // BT)
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
        ctas = min(items, sms * _CTAS_PER_SM[K])
        dht = dh0 = q.new_empty((1, 1, K, K), dtype=torch.float32)
    fn = _GRADS.get(key)
    fn(q, k, v, do, gc, h, dh, dq, dk, dv, dg, dht, dh0, scale, ctas)
