"""chunk_gla's gradients of q, k, v and the log-decay from the chunk states, in CuTeDSL for
Hopper (sm90): one CTA per (chunk, head) computes all four, with warpgroup matrix products
(wgmma) on tiles that the tensor memory accelerator (TMA) brings into shared memory.

It replaces the two Triton passes of ``chunk_gla_bwd`` that follow its state walks (the
dq/dk/dg pass and, for K over 64, the dv pass): it reads q, k, v, do, the state at the chunk's
start ``h`` and the gradient of the state at its end ``dh`` once, and writes dq, dk, dv and dg
once. The launcher and its contract are in triton.py (``chunk_gla_bwd``) and config.py
(``_cute_bwd_plan``).

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
them by columns. Row sums of the two warpgroups' parts are added in a fixed order, and the
column sums of ``P`` are taken from shared memory in a fixed order: the results are the same
bits on every run.
"""

from __future__ import annotations

import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
import torch
from cutlass import Float32
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.tensor_utils.layout import LayoutEnum

from .._cute import CompileCache, TensorArg
from .cute import _cute_dtype, _gemm, _load_decay, _publish_decay, _stage, _tma_atom

BT = 64  # tokens per chunk
_WG_COLS = 64  # result columns per warpgroup
_LOG2E = math.log2(math.e)


@cute.jit
def _quad_sum(x):
    """The sum of x over the four lanes of a quad (the lanes that hold one accumulator row)."""
    x = x + cute.arch.shuffle_sync_bfly(x, offset=1)
    return x + cute.arch.shuffle_sync_bfly(x, offset=2)


@cute.jit
def _row_dots(acc, coord, src, parts, wg, lane):
    """Each accumulator row's dot product with the same row and columns of ``src`` (16-bit, in
    shared memory), over this warpgroup's columns, into ``parts[wg, row]``. A thread of a
    wgmma accumulator holds two rows (fragment elements 0 and 2 start them), and the four lanes
    of its quad hold all of its warpgroup's columns of those rows."""
    r0, _ = coord[0]
    r1, _ = coord[2]
    s0 = Float32(0.0)
    s1 = Float32(0.0)
    for i in cutlass.range_constexpr(cute.size(acc)):
        r, c = coord[i]
        x = acc[i] * src[r, c, 0].to(Float32)
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
def _scale_rows(acc, coord, dec, col: cutlass.Constexpr):
    for i in cutlass.range_constexpr(cute.size(acc)):
        r, _ = coord[i]
        acc[i] = acc[i] * dec[r, col]


class _Grads:
    """The gradients for one (dtype, K = V): see the module docstring."""

    def __init__(self, dtype, K: int) -> None:
        self.dtype = dtype
        self.K = K
        self.wgs = K // _WG_COLS
        self.threads = 128 * self.wgs

    def _layouts(self):
        K, dt = self.K, self.dtype
        row = LayoutEnum.ROW_MAJOR
        # Every tile is K-major in its rows' order (columns contiguous), and read transposed as
        # an M-major (or N-major) operand where a product needs it so.
        tok = sm90_utils.make_smem_layout_a(row, (BT, BT, K), dt, 1)  # (BT, K, 1): q k v do
        st = sm90_utils.make_smem_layout_b(row, (BT, K, K), dt, 1)  # (K, V, 1): h dh
        att = sm90_utils.make_smem_layout_a(row, (BT, BT, BT), dt, 1)  # (BT, BT, 1): A' dA'
        return tok, st, att

    def _mmas(self):
        dt, Km, MN = self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.MN
        f32, wgs = Float32, self.wgs

        def mma(a, b, n):
            return sm90_utils.make_trivial_tiled_mma(dt, dt, a, b, f32, (1, wgs, 1), (BT, n))

        # A and dA (columns split between the warpgroups); the first terms; the second terms
        # and k dh; and the products with a transposed A' or dA'.
        return (
            mma(Km, Km, BT // wgs),
            mma(Km, Km, _WG_COLS),
            mma(Km, MN, _WG_COLS),
            mma(MN, MN, _WG_COLS),
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
        scale: Float32,
        stream: cuda.CUstream,
    ):
        K = self.K
        B, T, H, V = mV.shape
        tok, st, att = self._layouts()
        m_s, m_i, m_j, m_m = self._mmas()
        one_tok, one_st = _stage(tok), _stage(st)
        # (T, K, H, B) views of the [B, T, H, K] tensors, tiles of (BT, K); (K, V, H, slots) views
        # of the [slots, H, K, V] states, one tile of (K, V) each.
        tma_q, gq = _tma_atom(mQ, (1, 3, 2, 0), one_tok, (BT, K))
        tma_k, gk = _tma_atom(mK, (1, 3, 2, 0), one_tok, (BT, K))
        tma_v, gv = _tma_atom(mV, (1, 3, 2, 0), one_tok, (BT, K))
        tma_do, gdo = _tma_atom(mDO, (1, 3, 2, 0), one_tok, (BT, K))
        tma_h, gh = _tma_atom(mH, (2, 3, 1, 0), one_st, (K, K))
        tma_dh, gdh = _tma_atom(mDH, (2, 3, 1, 0), one_st, (K, K))
        tok_bytes = 4 * cute.size_in_bytes(self.dtype, one_tok)
        st_bytes = 2 * cute.size_in_bytes(self.dtype, one_st)
        dt = self.dtype

        @cute.struct
        class Shared:
            bars: cute.struct.MemRange[cutlass.Int64, 2]
            dec: cute.struct.MemRange[Float32, 5 * BT]
            p: cute.struct.MemRange[Float32, BT * (BT + 1)]  # P, rows padded by one
            parts: cute.struct.MemRange[Float32, 2 * 2 * BT]  # q and k row dots, per warpgroup
            sums: cute.struct.MemRange[Float32, 2 * BT]  # gq, gk
            red: cute.struct.MemRange[Float32, 8]  # <h, dh> per warp
            q: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            k: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            v: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            do: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(tok)], 1024]
            h: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(st)], 1024]
            dh: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(st)], 1024]
            a: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(att)], 1024]
            da: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(att)], 1024]

        self.kernel(
            m_s, m_i, m_j, m_m, tma_q, gq, tma_k, gk, tma_v, gv, tma_do, gdo, tma_h, gh, tma_dh,
            gdh, mGc, mDQ, mDK, mDV, mDG, scale, tok, st, att, Shared, tok_bytes, st_bytes,
        ).launch(
            grid=((T + BT - 1) // BT, H, B),
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
        mGc: cute.Tensor,
        mDQ: cute.Tensor,
        mDK: cute.Tensor,
        mDV: cute.Tensor,
        mDG: cute.Tensor,
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
        i_c, i_h, i_b = cute.arch.block_idx()
        T = mDQ.shape[1]
        NT = (T + BT - 1) // BT
        i_s = i_b * NT + i_c
        t0 = i_c * BT
        n_ok = cutlass.min(BT, T - t0)
        lane = tid % 32
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = tid // 128

        smem = utils.SmemAllocator()
        sh = smem.allocate(Shared)
        bars = sh.bars.data_ptr()
        sQ = sh.q.get_tensor(tok_l.outer, swizzle=tok_l.inner)  # (BT, K, 1)
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

        dec = sh.dec.get_tensor(cute.make_layout((BT, 5)))  # G, C, exp(G_L - G), scale*exp(G), G_L
        sP = sh.p.get_tensor(cute.make_layout((BT, BT), stride=(BT + 1, 1)))
        parts = sh.parts.get_tensor(cute.make_layout((2, 2, BT), stride=(2 * BT, BT, 1)))
        qparts = parts[0, None, None]
        kparts = parts[1, None, None]
        sums = sh.sums.get_tensor(cute.make_layout((2, BT), stride=(BT, 1)))
        red = sh.red.get_tensor(cute.make_layout(8))

        if warp == 0:
            with cute.arch.elect_one():
                cute.arch.mbarrier_init(bars, 1)
                cute.arch.mbarrier_init(bars + 1, 1)
            cute.arch.mbarrier_init_fence()

        def part(tma, s, g):
            return cpasync.tma_partition(
                tma, 0, cute.make_layout(1), cute.group_modes(s, 0, 2), cute.group_modes(g, 0, 2)
            )

        tQs, tQg = part(tma_q, sQ, cute.local_tile(gq[None, None, i_h, i_b], (BT, K), (None, 0)))
        tKs, tKg = part(tma_k, sK, cute.local_tile(gk[None, None, i_h, i_b], (BT, K), (None, 0)))
        tVs, tVg = part(tma_v, sV, cute.local_tile(gv[None, None, i_h, i_b], (BT, K), (None, 0)))
        tDOs, tDOg = part(
            tma_do, sDO, cute.local_tile(gdo[None, None, i_h, i_b], (BT, K), (None, 0))
        )
        tHs, tHg = part(tma_h, sH, cute.local_tile(gh[None, None, i_h, i_s], (K, K), (None, 0)))
        tDHs, tDHg = part(
            tma_dh, sDH, cute.local_tile(gdh[None, None, i_h, i_s], (K, K), (None, 0))
        )
        cute.arch.sync_threads()

        if warp == 0:
            # A TMA copy elects its issuing lane itself: the whole warp issues.
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(bars, tok_bytes)
            cute.copy(tma_q, tQg[None, i_c], tQs[None, 0], tma_bar_ptr=bars)
            cute.copy(tma_k, tKg[None, i_c], tKs[None, 0], tma_bar_ptr=bars)
            cute.copy(tma_v, tVg[None, i_c], tVs[None, 0], tma_bar_ptr=bars)
            cute.copy(tma_do, tDOg[None, i_c], tDOs[None, 0], tma_bar_ptr=bars)
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(bars + 1, st_bytes)
            cute.copy(tma_h, tHg[None, 0], tHs[None, 0], tma_bar_ptr=bars + 1)
            cute.copy(tma_dh, tDHg[None, 0], tDHs[None, 0], tma_bar_ptr=bars + 1)

        g0, cc0, gl0, span0 = _load_decay(mGc, i_b, i_h, t0, T, tid)
        _publish_decay(dec, tid, g0, cc0, gl0, span0, scale)
        cute.arch.sync_threads()

        t_s = m_s.get_slice(tid)
        t_i = m_i.get_slice(tid)
        t_j = m_j.get_slice(tid)
        t_m = m_m.get_slice(tid)
        z = (None, None, None, 0)
        aQ = t_s.make_fragment_A(t_s.partition_A(sQ))[z]
        bK = t_s.make_fragment_B(t_s.partition_B(sK))[z]
        aDOs = t_s.make_fragment_A(t_s.partition_A(sDO))[z]
        bV = t_s.make_fragment_B(t_s.partition_B(sV))[z]
        aDO = t_i.make_fragment_A(t_i.partition_A(sDO))[z]
        bH = t_i.make_fragment_B(t_i.partition_B(sH))[z]
        aV = t_i.make_fragment_A(t_i.partition_A(sV))[z]
        bDH = t_i.make_fragment_B(t_i.partition_B(sDH))[z]
        aDA = t_j.make_fragment_A(t_j.partition_A(sDA))[z]
        bKt = t_j.make_fragment_B(t_j.partition_B(tr(sK)))[z]
        aK = t_j.make_fragment_A(t_j.partition_A(sK))[z]
        bDHt = t_j.make_fragment_B(t_j.partition_B(tr(sDH)))[z]
        aDAt = t_m.make_fragment_A(t_m.partition_A(tr(sDA)))[z]
        bQt = t_m.make_fragment_B(t_m.partition_B(tr(sQ)))[z]
        aAt = t_m.make_fragment_A(t_m.partition_A(tr(sA)))[z]
        bDOt = t_m.make_fragment_B(t_m.partition_B(tr(sDO)))[z]

        acc_a = t_s.make_fragment_C(t_s.partition_shape_C((BT, BT)))
        acc_da = t_s.make_fragment_C(t_s.partition_shape_C((BT, BT)))
        acc_q = t_i.make_fragment_C(t_i.partition_shape_C((BT, K)))
        acc_k = t_i.make_fragment_C(t_i.partition_shape_C((BT, K)))
        acc_v = t_j.make_fragment_C(t_j.partition_shape_C((BT, K)))
        cA = t_s.partition_C(cute.make_identity_tensor((BT, BT)))
        cR = t_i.partition_C(cute.make_identity_tensor((BT, K)))

        cute.arch.mbarrier_wait(bars, 0)
        warpgroup.fence()
        _gemm(m_s, acc_a, aQ, bK, False)
        _gemm(m_s, acc_da, aDOs, bV, False)
        warpgroup.commit_group()
        cute.arch.mbarrier_wait(bars + 1, 0)
        _gemm(m_i, acc_q, aDO, bH, False)
        warpgroup.commit_group()
        _gemm(m_i, acc_k, aV, bDH, False)
        warpgroup.commit_group()
        _gemm(m_j, acc_v, aK, bDHt, False)
        warpgroup.commit_group()

        # <h, dh> while the products run: 8 columns (16 bytes) at a time.
        zH = cute.zipped_divide(sH, (1, 8, 1))  # ((1, 8, 1), (K, V / 8, 1))
        zDH = cute.zipped_divide(sDH, (1, 8, 1))
        hdh = Float32(0.0)
        for n in cutlass.range_constexpr(K * K // 8 // self.threads):
            e = tid + n * self.threads
            x = zH[None, (e // (K // 8), e % (K // 8), 0)].load().to(Float32)
            y = zDH[None, (e // (K // 8), e % (K // 8), 0)].load().to(Float32)
            hdh = hdh + (x * y).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
        for off in cutlass.range_constexpr(5):
            hdh = hdh + cute.arch.shuffle_sync_bfly(hdh, offset=16 >> off)
        if lane == 0:
            red[warp] = hdh

        # A' and dA', and P, once A and dA are done.
        warpgroup.wait_group(3)
        yA = cute.make_rmem_tensor_like(acc_a, self.dtype)
        yDA = cute.make_rmem_tensor_like(acc_da, self.dtype)
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
            sP[qi, kj] = p
            yA[i] = (acc_a[i] * d).to(self.dtype)
            yDA[i] = da.to(self.dtype)
        cute.autovec_copy(yA, t_s.partition_C(sA[None, None, 0]))
        cute.autovec_copy(yDA, t_s.partition_C(sDA[None, None, 0]))
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()

        # dq: its first term scaled, q's row dots, then dA' k onto it.
        warpgroup.wait_group(2)
        _scale_rows(acc_q, cR, dec, 3)
        _row_dots(acc_q, cR, sQ, qparts, wg, lane)
        warpgroup.fence()
        _gemm(m_j, acc_q, aDA, bKt, True)
        warpgroup.commit_group()
        # dk: likewise with exp(G_L - G_j), k's row dots, then dA'^T q.
        warpgroup.wait_group(2)
        _scale_rows(acc_k, cR, dec, 2)
        _row_dots(acc_k, cR, sK, kparts, wg, lane)
        warpgroup.fence()
        _gemm(m_m, acc_k, aDAt, bQt, True)
        warpgroup.commit_group()
        # dv: k dh scaled by exp(G_L - G_j), then A'^T do.
        warpgroup.wait_group(2)
        _scale_rows(acc_v, cR, dec, 2)
        warpgroup.fence()
        _gemm(m_m, acc_v, aAt, bDOt, True)
        warpgroup.commit_group()

        warpgroup.wait_group(2)
        self._store(acc_q, cR, t_i, mDQ, i_b, t0, i_h, n_ok)
        warpgroup.wait_group(1)
        self._store(acc_k, cR, t_i, mDK, i_b, t0, i_h, n_ok)
        warpgroup.wait_group(0)
        self._store(acc_v, cR, t_j, mDV, i_b, t0, i_h, n_ok)

        # dg: the row and column sums of P and the row dots, in a fixed order.
        cute.arch.sync_threads()
        if tid < BT:
            rs = Float32(0.0)
            cs = Float32(0.0)
            for j in cutlass.range(BT, unroll=8):
                rs = rs + sP[tid, j]
                cs = cs + sP[j, tid]
            sq = rs - cs
            sk = Float32(0.0)
            for w in cutlass.range_constexpr(self.wgs):
                sq = sq + qparts[w, tid]
                sk = sk + kparts[w, tid]
            sums[0, tid] = sq
            sums[1, tid] = sk
        cute.arch.sync_threads()
        if tid < n_ok:
            total = Float32(0.0)
            for w in cutlass.range_constexpr(self.threads // 32):
                total = total + red[w]
            acc = total * cute.math.exp2(dec[0, 4] * _LOG2E, fastmath=True)
            for s in cutlass.range(BT, unroll=8):
                if s >= tid:
                    acc = acc + sums[0, s]
                else:
                    acc = acc + sums[1, s]
            mDG[i_b, t0 + tid, i_h] = acc

    @cute.jit
    def _store(self, acc, coord, thr, mX, i_b, t0, i_h, n_ok):
        """One result's (BT, K) tile, rounded, into rows t0... of head i_h (rows of the chunk
        only)."""
        K = self.K
        y = cute.make_rmem_tensor_like(acc, self.dtype)
        y.store(acc.load().to(self.dtype))
        if n_ok == BT:
            # A whole tile: pairs of columns are adjacent in the accumulator and in the result,
            # which is contiguous with K a multiple of 8 (16-byte aligned rows).
            H = mX.shape[2]
            first = cute.assume(((i_b * mX.shape[1] + t0) * H + i_h) * K, divby=8)
            rows = cute.assume(H * K, divby=8)
            g = cute.make_tensor(mX.iterator + first, cute.make_layout((BT, K), stride=(rows, 1)))
            cute.autovec_copy(
                cute.recast_tensor(y, cutlass.Uint32),
                cute.recast_tensor(thr.partition_C(g), cutlass.Uint32),
            )
        else:
            for i in cutlass.range_constexpr(cute.size(acc)):
                r, c = coord[i]
                if r < n_ok:
                    mX[i_b, t0 + r, i_h, c] = y[i]


def _build(key):
    dtype, K = key
    x = TensorArg(dtype, (None, None, None, K), compact=False, align=16)
    gc = TensorArg(torch.float32, (None, None, 2, None), compact=True)
    s = TensorArg(dtype, (None, None, K, K), compact=True, align=16)
    out = TensorArg(dtype, (None, None, None, K), compact=True, align=16)
    dg = TensorArg(torch.float32, (None, None, None), compact=True)
    fn = _Grads(_cute_dtype(dtype), K)
    return fn, (x, x, x, x, gc, s, s, out, out, out, dg), (Float32(1.0),), False


_GRADS = CompileCache("chunk_gla_bwd_grads", _build)


def grads(q, k, v, do, gc, h, dh, dq, dk, dv, dg, scale: float) -> None:
    """Launch the gradients' pass: ``dq, dk, dv`` (``[B, T, H, K]``, contiguous, q's dtype)
    and ``dg`` (``[B, T, H]`` float32, contiguous) from q, k, v, do (``K = V`` of 64 or 128), the
    chunk log-decay ``gc``, the state at each chunk's start ``h`` and the gradient of the state
    at its end ``dh`` (``[B * NT, H, K, V]`` contiguous, q's dtype)."""
    fn = _GRADS.get((q.dtype, q.shape[-1]))
    fn(q, k, v, do, gc, h, dh, dq, dk, dv, dg, scale)
