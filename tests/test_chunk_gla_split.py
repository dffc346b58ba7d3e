"""chunk_gla's forward and backward with their state walks split into segments (kernels/chunk_gla/config.py,
``_segments``) gives what the single walk gives.

The split is chosen for long sequences with few heads, shapes too large for the interpreter, so
here the thresholds are lowered until small shapes split: segments of one to three chunks, odd
lengths (a partial last chunk inside the last segment), K and V that are not powers of two,
with and without an initial state, and both the final state and the output compared with the
single walk's and with the token-by-token reference.
"""

from __future__ import annotations

import pytest
import torch
from chunk_gla_inputs import DEVICE, assert_matches_reference
from chunk_gla_inputs import chunk_gla_inputs as _inputs
from marks import slow

from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import reference
from attnops_kernels.chunk_gla import triton as C


@pytest.fixture(autouse=True)
def _triton_forward(monkeypatch):
    # The Triton plans under test, also where the CuTeDSL walk would take the forward
    # (config._cute_plan: Hopper with CuTeDSL installed).
    monkeypatch.setattr(CF, "_CUTE_WALK", False)


@pytest.mark.parametrize(
    ("B", "T", "H", "K", "V", "dtype", "h0", "min_chunks", "strided"),
    [
        (1, 320, 1, 32, 48, torch.float32, True, 1, False),  # 5 chunks, 5 segments
        (2, 301, 2, 16, 16, torch.float32, False, 2, False),  # partial last chunk, 3 segments
        slow(1, 400, 2, 48, 100, torch.float32, True, 3, False),  # K, V not powers of two
        slow(2, 257, 1, 64, 64, torch.bfloat16, True, 2, False),
        (2, 200, 2, 32, 32, torch.float32, True, 1, True),  # strided inputs
    ],
)
def test_split_state_pass_matches_single_walk(
    monkeypatch, B, T, H, K, V, dtype, h0, min_chunks, strided
):
    q, k, v, g, init = _inputs(B, T, H, K, V, dtype, h0, strided)
    if strided:
        assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    o1, _, ht1 = C.chunk_gla_fwd(q, k, v, g, None, init, None, True)
    calls = []
    seg_kernel = C._gla_fwd_hseg_kernel
    monkeypatch.setattr(CF, "_SEG_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_SEG_MAX_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_SEG_MIN_CHUNKS", min_chunks)
    monkeypatch.setattr(
        CF,
        "_segments",
        lambda *a, f=CF._segments: calls.append(f(*a)) or calls[-1],
    )
    o2, _, ht2 = C.chunk_gla_fwd(q, k, v, g, None, init, None, True)
    nt = -(-T // CF._BT)
    assert calls == [nt // min_chunks] and calls[0] > 1, "the shape did not split"
    assert C._gla_fwd_hseg_kernel is seg_kernel
    tol = dict(atol=2e-5, rtol=2e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(ht2, ht1, **tol)
    torch.testing.assert_close(o2.float(), o1.float(), **tol)
    assert_matches_reference(q, k, v, g, init, o2, ht2)


def test_segments_only_where_the_state_pass_has_few_programs():
    # The suite's shapes (bf16, 64 x 64 state tiles): B1 T8192 H4 and B1 T32768 H16 K=V=128 split.
    assert CF._segments(16, 8192 // 64) == 16
    assert CF._segments(64, 32768 // 64) == 4
    assert CF._segments(256, 4096 // 64) == 1
    assert CF._segments(CF._SEG_MAX_PROGRAMS + 1, 10_000) == 1
    assert CF._segments(16, CF._SEG_MIN_CHUNKS - 1) == 1  # too short to split


def _ref_grads(q, k, v, g, init, do, dht):
    """Gradients of (output, final state) . (do, dht) through the token-by-token reference, in
    float64 on the same rounded inputs."""
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v, g)]
    B, T, H, K = q.shape
    s0 = q.new_zeros(B, H, K, v.shape[-1]) if init is None else init
    s0 = s0.detach().double().requires_grad_()  # dh0 is returned without an initial state too
    o, ht = reference.chunk_gla_ref(*leaves, None, s0, True, None)
    loss = (o * do.double()).sum() + (0 if dht is None else (ht * dht.double()).sum())
    return torch.autograd.grad(loss, [*leaves, s0])


@pytest.mark.parametrize(
    ("B", "T", "H", "K", "V", "dtype", "h0", "dht", "min_chunks", "strided"),
    [
        (1, 320, 1, 32, 48, torch.float32, True, True, 1, False),  # 5 segments of one chunk
        slow(2, 301, 2, 16, 16, torch.float32, False, False, 2, False),  # partial last chunk
        slow(1, 400, 2, 48, 100, torch.float32, True, False, 3, False),  # K, V not powers of two
        slow(2, 257, 1, 64, 64, torch.bfloat16, True, True, 2, False),  # dv in the dq/dk/dg pass
        slow(1, 330, 1, 100, 40, torch.float16, False, True, 2, False),
        (2, 200, 2, 32, 32, torch.bfloat16, True, True, 1, True),  # strided inputs
    ],
)
def test_split_backward_matches_single_walk(
    monkeypatch, B, T, H, K, V, dtype, h0, dht, min_chunks, strided
):
    q, k, v, g, init = _inputs(B, T, H, K, V, dtype, h0, strided)
    gen = torch.Generator().manual_seed(7)
    do = torch.randn(B, T, H, V, generator=gen).to(DEVICE, dtype)
    dht_ = torch.randn(B, H, K, V, generator=gen).to(DEVICE) if dht else None
    args = (q, k, v, g, None, init, None, do, dht_)
    one = C.chunk_gla_bwd(*args)
    calls = []
    monkeypatch.setattr(CF, "_SEG_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_BWD_SEG_MAX_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_BWD_SEG_MAX_PROGRAMS_RECOMPUTING", 1 << 20)
    monkeypatch.setattr(CF, "_SEG_MIN_CHUNKS", min_chunks)
    monkeypatch.setattr(
        CF,
        "_segments",
        lambda *a, f=CF._segments: calls.append(f(*a)) or calls[-1],
    )
    split = C.chunk_gla_bwd(*args)
    nt = -(-T // CF._BT)
    assert calls == [nt // min_chunks] and calls[0] > 1, "the shape did not split"
    want = _ref_grads(q, k, v, g, init, do, dht_)
    names = ("dq", "dk", "dv", "dg", "dh0")
    for name, a, b, w in zip(names, split, one, want, strict=True):
        tol = 2e-5 if dtype == torch.float32 else 3e-2
        scale = w.abs().max().item()
        assert (a.double() - b.double()).abs().max().item() <= tol * scale, f"{name}: split"
        ref_tol = 1e-4 if dtype == torch.float32 else 4e-2
        assert (a.double() - w).abs().max().item() <= ref_tol * scale, f"{name}: reference"


def test_backward_splits_only_where_each_walk_has_few_programs():
    # The suite's shapes (bf16, 64 x 64 state tiles), given the forward's states: B1 T8192 H4
    # and B1 T32768 H16 K=V=128 split; recomputing them, only B1 T8192 H4.
    mx, mr = CF._BWD_SEG_MAX_PROGRAMS, CF._BWD_SEG_MAX_PROGRAMS_RECOMPUTING
    assert CF._segments(16, 8192 // 64, mx) == CF._segments(16, 8192 // 64, mr) == 16
    assert CF._segments(64, 32768 // 64, mx) == 4
    assert CF._segments(64, 32768 // 64, mr) == 1
    assert CF._segments(256, 4096 // 64, mx) == 1
    assert CF._segments(mx + 1, 10_000, mx) == CF._segments(mr + 1, 10_000, mr) == 1


def test_public_op_splits_a_long_sequence_without_lowered_thresholds(monkeypatch):
    # One sequence of 16 chunks with one head: both the forward's state pass and the backward's
    # walks split into 2 segments at the shipped thresholds. Through the generated operator
    # (dispatcher, autograd.Function) the gradients match float64 autograd of the reference.
    import attnops

    B, T, H, K, V = 1, 1024, 1, 16, 16
    q, k, v, g, init = _inputs(B, T, H, K, V, torch.float32, True)
    calls = []
    monkeypatch.setattr(
        CF, "_segments", lambda *a, f=CF._segments: calls.append(f(*a)) or calls[-1]
    )
    leaves = [x.detach().requires_grad_() for x in (q, k, v, g, init)]
    out = attnops.chunk_gla(*leaves[:4], initial_state=leaves[4], output_final_state=True)
    gen = torch.Generator().manual_seed(3)
    do = torch.randn(B, T, H, V, generator=gen).to(DEVICE)
    dht = torch.randn(B, H, K, V, generator=gen).to(DEVICE)
    ((out.output * do).sum() + (out.final_state * dht).sum()).backward()
    assert calls == [2, 2], "the forward and the backward did not both split"
    want = _ref_grads(q, k, v, g, init, do, dht)
    for name, x, w in zip(("dq", "dk", "dv", "dg", "dh0"), leaves, want, strict=True):
        err = (x.grad.double() - w).abs().max().item()
        assert err <= 1e-4 * w.abs().max().item(), f"{name}: {err}"


@pytest.mark.parametrize(
    ("walk", "T", "segments"),
    [
        ("forward", 301, (2, 3)),
        ("reverse", 301, (2, 3)),
        ("both", 301, (2, 3)),
        # Segments of 10 chunks: two blocks of the sums each, the second partial; 21 chunks.
        ("both", 1300, (10, 3)),
    ],
)
def test_first_step_computes_the_log_decay(walk, T, segments):
    # Note [decay in the first step]: a split walk given g (its first step in Triton) leaves in
    # gc what the log-decay's own launch stores, C included (a constant error in C would cancel
    # in every decay), and walks as it does from that launch's gc: the last chunk partial, with
    # g head-major, a reset (-inf) and a run of -1e4 (floored, where C holds what G leaves out).
    B, H, K, V = 2, 2, 16, 24
    q, k, v, g, _ = _inputs(B, T, H, K, V, torch.float32, False, strided=True)
    g[0, 70, 1] = float("-inf")
    g[1, 130:175, 0] = -1e4
    do = torch.randn(B, T, H, V, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    NT, BT = -(-T // CF._BT), CF._BT
    cfg = CF._fwd_config(K, V, q.dtype)[1]
    scale = 0.25

    def run(raw):
        gc = torch.full((B, H, 2, T), float("nan"), device=DEVICE)
        if not raw:
            C._launch_g(q, g, gc, None, None, B, NT, B * NT, BT)
        outs = [torch.full((B * NT, H, K, V), float("nan"), device=DEVICE) for _ in range(2)]
        ends = [torch.full((B, H, K, V), float("nan"), device=DEVICE) for _ in range(2)]
        gx = g if raw else None
        if walk == "both":
            C._launch_walks_split(q, k, v, q, do, gc, None, outs[0], None, outs[1], ends[1],
                                  scale, B, NT, BT, cfg, 0, segments, gx)  # fmt: skip
        elif walk == "forward":
            C._launch_walk(q, k, v, gc, None, outs[0], ends[0], None, None, B, NT, BT, cfg, 0,
                           segments, g=gx)  # fmt: skip
        else:
            C._launch_walk(q, q, do, gc, None, outs[1], ends[1], None, scale, B, NT, BT, cfg, 0,
                           segments, g=gx)  # fmt: skip
        return gc, outs, ends

    gc, outs, ends = run(raw=True)
    want_gc, want_outs, want_ends = run(raw=False)
    assert not want_gc.isnan().any()
    # The interpreter sums in the same order; a GPU's float64 sums may round apart in a last bit.
    exact = DEVICE == "cpu"
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(gc, want_gc, **tol)
    for got, want in zip(outs + ends, want_outs + want_ends, strict=True):
        torch.testing.assert_close(got, want, equal_nan=True, **tol)


@pytest.mark.parametrize(
    ("nseg", "elements", "use_s0", "store_end", "reverse", "every"),
    [
        (2, 8192, True, True, False, 1),  # one block covering the state
        (7, 64, True, False, False, 1),  # blocks of 16 elements, the last one partial
        (7, 64, False, True, True, 1),
        (40, 8192, True, True, True, 1),  # 64 rows, past 40 of them the identity
        (7, 64, True, True, False, 3),  # the starts of segments 0, 3 and 6 alone
        (40, 8192, False, False, False, 2),
    ],
)
def test_carry_across_segments_matches_the_loop(
    monkeypatch, nseg, elements, use_s0, store_end, reverse, every
):
    # Note [carry across segments]: the scan of each element's recurrence over the segments
    # against the loop it replaces, in float64; every start written (or every every-th,
    # compact), nothing else touched.
    monkeypatch.setattr(CF, "_CARRY_ELEMENTS", elements)
    N, H, K, V = 2, 3, 6, 7  # 42 elements a state: not a multiple of any block
    gen = torch.Generator().manual_seed(nseg)
    own = torch.randn(N * nseg, H, K, V, generator=gen)
    gseg = -2 * torch.rand(N * nseg, H, generator=gen)
    s0 = torch.randn(N, H, K, V, generator=gen)
    kept = -(-nseg // every)  # starts kept a sequence
    start = torch.full((N * kept + 1, H, K, V), float("nan"))  # one slot past the last
    end = torch.full((N, H, K, V), float("nan"))
    rows, per, blocks = CF._carry_blocks(nseg, K * V)
    assert rows > nseg and (blocks > 1) == (elements < 4096)
    C._gla_seg_carry_kernel[(N * H * blocks,)](
        s0.to(DEVICE), own.to(DEVICE), gseg.to(DEVICE), start_d := start.to(DEVICE),
        end_d := end.to(DEVICE), H, nseg, KV=K * V, BE=per, P=rows, USE_S0=use_s0,
        STORE_END=store_end, REVERSE=reverse, EVERY=every,
    )  # fmt: skip
    want = torch.empty(N * nseg, H, K, V, dtype=torch.float64)
    for n in range(N):
        x = s0[n].double() if use_s0 else torch.zeros(H, K, V, dtype=torch.float64)
        order = range(nseg - 1, -1, -1) if reverse else range(nseg)
        for i in order:
            want[n * nseg + i] = x
            x = x * gseg[n * nseg + i].double().exp()[:, None, None] + own[n * nseg + i]
        if store_end:
            torch.testing.assert_close(end_d[n].cpu().double(), x, atol=1e-5, rtol=1e-5)
    want = want.view(N, nseg, H, K, V)[:, ::every].reshape(N * kept, H, K, V)
    torch.testing.assert_close(start_d[:-1].cpu().double(), want, atol=1e-5, rtol=1e-5)
    assert start_d[-1].isnan().all()
    if not store_end:
        assert end_d.isnan().all()
