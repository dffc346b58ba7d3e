"""chunk_gla's state walks in CuTeDSL (kernels/chunk_gla/cute_states.py, chosen on Hopper by
the backward where its gradients' pass is CuTeDSL's and a walk is whole): the same chunk
states, gradients of the chunk end states, final states and gradients of the initial states as
the Triton walks (within 16-bit rounding), every slot written, forward and reverse alone or side
by side in one launch, with and without initial and end states, on partial chunks, K = V of 64
and 128, float16 and bfloat16, strided inputs, resets and deep decays; and the backward choosing
them where ``config._cute_states`` says.

The contract itself is checked on any machine."""

from __future__ import annotations

import pytest
import torch
from chunk_gla_inputs import FakeCuda, gradient_inputs, hopper_with_cute, rel_err
from marks import first_by_default

from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import triton as C

_SKIP = hopper_with_cute()


def test_the_state_walks_contract(monkeypatch):
    # T a multiple of 4 (the TMA reads the log-decay's rows), B per walk and H within the grid.
    monkeypatch.setattr(CF, "_CUTE_STATES", True)
    ok = CF._cute_states
    assert ok(2, 4096, 16) and ok(1, 4, 1) and ok(32767, 8, 65535)
    assert not ok(2, 4098, 16) and not ok(2, 1, 16) and not ok(1, 7, 16)
    assert not ok(32768, 8, 16)  # two walks of 32768 sequences: 65536 grid rows
    assert not ok(1, 8, 65536)  # heads: the grid's second size
    monkeypatch.setattr(CF, "_CUTE_STATES", False)
    assert not ok(2, 4096, 16)


def test_the_split_walks_contract(monkeypatch):
    # Past the availability check (faked: this runs on any machine), each limit alone.
    monkeypatch.setattr(CF, "_CUTE_SPLIT_WALKS", True)
    monkeypatch.setattr(CF, "_CUTE_SPLIT_MIN_CHUNKS", 16)
    monkeypatch.setattr(CF, "_CUTE_SPLIT_MIN_CHUNKS_BOTH", 64)
    monkeypatch.setattr(CF, "_cute_available", lambda index: True)

    ok = CF._cute_split_walks
    a = FakeCuda(1, 8192, 4, 128)
    seg = (16, 8)
    assert ok(a, a, 1, seg) and ok(a, a, 1, seg, FakeCuda(128, 4, 128, 128))
    # Segments' length: 16 chunks or more for a walk alone, 64 for the two side by side.
    assert not ok(a, a, 1, (15, 9))
    assert not ok(a, a, 1, (32, 4), both=True) and ok(a, a, 1, (64, 2), both=True)
    assert not ok(a, a, 1, seg, FakeCuda(128, 4, 128, 128, dtype=torch.float32))  # states' dtype
    assert not ok(a, FakeCuda(1, 8192, 4, 128, dtype=torch.float16), 1, seg)
    assert not ok(FakeCuda(1, 8192, 4, 96), FakeCuda(1, 8192, 4, 96), 1, seg)  # K
    assert not ok(a, FakeCuda(1, 8192, 4, 64), 1, seg)  # V not K
    assert not ok(
        FakeCuda(1, 8190, 4, 128), FakeCuda(1, 8190, 4, 128), 1, seg
    )  # T not a multiple of 4
    assert not ok(a, a, 1, (16, 32768))  # two walks of 32768 segments: 65536 grid rows
    f32 = FakeCuda(1, 8192, 4, 128, dtype=torch.float32)
    assert not ok(f32, f32, 1, seg)
    monkeypatch.setattr(CF, "_CUTE_SPLIT_WALKS", False)
    assert not ok(a, a, 1, seg)


def _inputs(B, T, H, K, dtype, gen, strided, decay):
    q, k, v, g, _, do, _ = gradient_inputs(B, T, H, K, dtype, gen, strided, decay, states=False)
    return q, k, v, g, do


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    ("B", "T", "H", "K", "dtype", "strided", "decay", "walks", "states"),
    first_by_default(
        [
            # Many chunks through every stage and state tile, a partial last chunk.
            (2, 4000, 3, 128, torch.bfloat16, False, "logsigmoid", "both", True),
            (1, 700, 2, 64, torch.float16, True, "resets", "forward", False),
            (3, 4, 2, 128, torch.bfloat16, False, "deep", "reverse", True),
            (2, 256, 2, 64, torch.bfloat16, False, "logsigmoid", "reverse", False),
            (1, 1000, 2, 128, torch.float16, True, "logsigmoid", "forward", True),
            # No decay over 256 chunks: the end states sum every chunk's term.
            (1, 16384, 1, 128, torch.bfloat16, False, "none", "both", True),
        ]
    ),
)
def test_cute_state_walks_match_the_triton_walks(B, T, H, K, dtype, strided, decay, walks, states):
    from attnops_kernels.chunk_gla import cute_states

    gen = torch.Generator().manual_seed(T + K)
    q, k, v, g, do = _inputs(B, T, H, K, dtype, gen, strided, decay)
    NT = -(-T // 64)
    gc = q.new_empty((B, H, 2, T), dtype=torch.float32)
    C._launch_g(q, g, gc, None, None, B, NT, B * NT, 64)
    s0 = [torch.randn(B, H, K, K, generator=gen).cuda() if states else None for _ in range(2)]
    cfg = CF._bwd_config(K, K, dtype)[1]
    scale = K**-0.5

    def outputs():
        # States new from the allocator: NaN first, so that a slot the walk skips fails.
        s = [torch.full((B * NT, H, K, K), torch.nan, dtype=dtype, device="cuda") for _ in "fr"]
        e = [torch.full((B, H, K, K), torch.nan, device="cuda") if states else None for _ in "fr"]
        return s, e

    (h, dh), (ht, dh0) = outputs()
    fwd = (k, v, s0[0], h, ht) if walks in ("both", "forward") else None
    rev = (q, do, s0[1], dh, dh0) if walks in ("both", "reverse") else None
    cute_states.walks(gc, fwd, rev, scale)
    (h_, dh_), (ht_, dh0_) = outputs()
    one = (NT, 1)
    if fwd is not None:
        C._launch_walk(q, k, v, gc, s0[0], h_, ht_, None, None, B, NT, 64, cfg, 0, one)
        assert rel_err(h, h_) < 1e-2, ("h", rel_err(h, h_))
        if states:
            assert rel_err(ht, ht_) < 1e-2, ("ht", rel_err(ht, ht_))
    if rev is not None:
        # The Triton reverse walk always writes the gradient of the initial state.
        end = torch.empty(B, H, K, K, device="cuda") if dh0_ is None else dh0_
        C._launch_walk(q, q, do, gc, s0[1], dh_, end, None, scale, B, NT, 64, cfg, 0, one)
        assert rel_err(dh, dh_) < 1e-2, ("dh", rel_err(dh, dh_))
        if states:
            assert rel_err(dh0, dh0_) < 1e-2, ("dh0", rel_err(dh0, dh0_))
    for name, x in (("h", h), ("dh", dh), ("ht", ht), ("dh0", dh0)):
        if x is not None and (name[0] == "h") == (fwd is not None):
            assert torch.isfinite(x).all(), f"{name}: some slot was not written"


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    ("B", "T", "H", "K", "save", "expected"),
    [
        # Recomputing at K = 128 with whole walks: both in one launch.
        (2, 4000, 8, 128, False, [(True, True)]),
        # States saved, the reverse walk whole (more than 64 programs).
        (4, 256, 16, 128, True, [(False, True)]),
        # K = 64 with the pass walking dh (forced below): the forward walk alone.
        (8, 256, 32, 64, False, [(True, False)]),
        # T not a multiple of 4, or the walks split into segments: the Triton walks.
        (2, 4001, 8, 128, False, []),
        (1, 4000, 2, 128, False, []),
    ],
)
def test_the_backward_takes_cute_state_walks_where_they_are_whole(
    monkeypatch, B, T, H, K, save, expected
):
    from attnops_kernels.chunk_gla import cute_states

    calls = []
    walks = cute_states.walks

    def spy(gc, forward=None, reverse=None, scale=1.0):
        calls.append((forward is not None, reverse is not None))
        walks(gc, forward, reverse, scale)

    monkeypatch.setattr(cute_states, "walks", spy)
    monkeypatch.setattr(CF, "_CUTE_BWD", True)
    monkeypatch.setattr(CF, "_CUTE_BWD_WALK_FILL", 0)  # at K = 64 the pass walks dh
    gen = torch.Generator().manual_seed(T)
    q, k, v, g, do = _inputs(B, T, H, K, torch.bfloat16, gen, False, "logsigmoid")
    h0 = torch.randn(B, H, K, K, generator=gen).cuda()
    dht = torch.randn(B, H, K, K, generator=gen).cuda()
    h = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False, save_states=save)[1]
    ours = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h, save_states=save)
    assert calls == expected
    monkeypatch.setattr(CF, "_CUTE_STATES", False)
    theirs = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h, save_states=save)
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dh0"), ours, theirs, strict=True):
        assert torch.isfinite(a).all(), name
        assert rel_err(a, b) < 1e-2, (name, rel_err(a, b))


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    ("B", "T", "H", "K", "dtype", "save", "start_tile"),
    first_by_default(
        [
            # 63 chunks in 7 segments of 9 (forward) and 8 of 8 (backward), a partial last chunk;
            # the forward's start walk with CTAs of (rows, columns) of the state.
            (1, 4000, 2, 128, torch.bfloat16, False, (128, 128)),
            (1, 4000, 2, 128, torch.bfloat16, True, (128, 64)),
            (1, 4000, 2, 128, torch.bfloat16, False, (64, 64)),
            (2, 1000, 1, 64, torch.float16, False, (128, 128)),
        ]
    ),
)
def test_cute_split_walks_match_the_triton_split_walks(
    monkeypatch, B, T, H, K, dtype, save, start_tile
):
    # The forward's segment starts and the backward's split walks, with their two steps in
    # CuTeDSL against Triton's: the same outputs, final states and gradients, and each step
    # taken by the walks expected.
    from attnops_kernels.chunk_gla import cute_states

    calls = []
    split_walks = cute_states.split_walks

    def spy(gc, forward=None, reverse=None, scale=1.0, *, segments, own, tile=None):
        calls.append((own, forward is not None, reverse is not None))
        split_walks(gc, forward, reverse, scale, segments=segments, own=own, tile=tile)

    monkeypatch.setattr(cute_states, "split_walks", spy)
    gen = torch.Generator().manual_seed(T + K)
    q, k, v, g, do = _inputs(B, T, H, K, dtype, gen, False, "logsigmoid")
    h0 = torch.randn(B, H, K, K, generator=gen).cuda()
    dht = torch.randn(B, H, K, K, generator=gen).cuda()

    def both():
        o, h, ht = C.chunk_gla_fwd(q, k, v, g, None, h0, None, True, save_states=save)
        grads = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h, save_states=save)
        return (o, ht, *grads)

    monkeypatch.setattr(CF, "_CUTE_SPLIT_WALKS", True)
    # Segments of any length (these are short, to stay quick).
    monkeypatch.setattr(CF, "_CUTE_SPLIT_MIN_CHUNKS", 0)
    monkeypatch.setattr(CF, "_CUTE_SPLIT_MIN_CHUNKS_BOTH", 0)
    monkeypatch.setattr(CF, "_CUTE_START_TILE", start_tile)
    ours = both()
    # The forward's segment starts (own walk only), then the backward's walks.
    bwd = (
        [(True, False, True), (False, False, True)]
        if save
        else [(True, True, True), (False, True, True)]
    )
    assert calls == [(True, True, False)] + bwd, calls
    monkeypatch.setattr(CF, "_CUTE_SPLIT_WALKS", False)
    theirs = both()
    names = ("o", "ht", "dq", "dk", "dv", "dg", "dh0")
    for name, a, b in zip(names, ours, theirs, strict=True):
        assert torch.isfinite(a).all(), name
        assert rel_err(a, b) < 1e-2, (name, rel_err(a, b))


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(("B", "h0"), [(1, True), (2, False)])
def test_cute_start_walk_on_finer_segments(monkeypatch, B, h0):
    # The forward's segment starts from a CuTeDSL walk of finer segments whose CTAs hold the
    # whole state (63 chunks in 7 segments of 9, walked as 21 of 3, every third start taken):
    # the same output and final states as with the Triton start walk on the plan's segments.
    from attnops_kernels.chunk_gla import cute_states

    tiles = []
    split_walks = cute_states.split_walks

    def spy(gc, forward=None, reverse=None, scale=1.0, *, segments, own, tile=None):
        tiles.append((segments, own, tile))
        split_walks(gc, forward, reverse, scale, segments=segments, own=own, tile=tile)

    monkeypatch.setattr(cute_states, "split_walks", spy)
    gen = torch.Generator().manual_seed(7 + B)
    q, k, v, g, _ = _inputs(B, 4000, 2, 128, torch.bfloat16, gen, False, "logsigmoid")
    init = torch.randn(B, 2, 128, 128, generator=gen).cuda() if h0 else None
    monkeypatch.setattr(CF, "_CUTE_SEG_MIN_CHUNKS", 8)
    assert CF._cute_plan(q, k, v, False, False) == (9, 7)
    monkeypatch.setattr(CF, "_CUTE_SPLIT_WALKS", True)
    monkeypatch.setattr(CF, "_CUTE_SPLIT_MIN_CHUNKS", 0)
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", 3)
    monkeypatch.setattr(CF, "_SEG_START_MIN_CHUNKS", 1)
    o, _, ht = C.chunk_gla_fwd(q, k, v, g, None, init, None, True, save_states=False)
    assert tiles == [((3, 21), True, CF._CUTE_START_TILE_FINER)], tiles
    monkeypatch.setattr(CF, "_CUTE_SPLIT_WALKS", False)
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", 1)
    o_t, _, ht_t = C.chunk_gla_fwd(q, k, v, g, None, init, None, True, save_states=False)
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert rel_err(o, o_t) < 1e-2 and rel_err(ht, ht_t) < 1e-2
