"""chunk_gla's forward in one walk (kernels/chunk_gla/config.py, ``_fused_plan``) gives what the
state walk and output pass give, and what the token-by-token reference gives.

The walk is chosen for 16-bit inputs at sizes too large for the interpreter (K <= 64 on many
programs, or long sequences split into segments), so here the plan is forced onto small shapes:
whole sequences and segments of one to three chunks, odd lengths, K and V that are not powers
of two, strided inputs, with and without an initial state, keeping the chunk states or not.
Packed sequences whose offsets fall are walked by the same kernel behind the chunk-parallel
passes (tests/test_kernel_bounds.py and the generated malformed-offsets tests cover those).
"""

from __future__ import annotations

import math

import pytest
import torch
from chunk_gla_inputs import DEVICE, assert_matches_reference
from chunk_gla_inputs import chunk_gla_inputs as _inputs
from marks import slow

from attnops_kernels._triton import next_power_of_2
from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import reference
from attnops_kernels.chunk_gla import triton as C


@pytest.fixture(autouse=True)
def _triton_forward(monkeypatch):
    # The Triton plans under test, also where the CuTeDSL walk would take the forward
    # (config._cute_plan: Hopper with CuTeDSL installed).
    monkeypatch.setattr(CF, "_CUTE_WALK", False)


class _Spy:
    """``launchable`` that records (kernel, grid) of each launch."""

    def __init__(self, launchable, seen):
        self.launchable, self.seen = launchable, seen

    def __call__(self, kernel, like):
        launcher = self.launchable(kernel, like)
        seen = self.seen

        class _Grid:
            def __getitem__(self, grid):
                seen.append((kernel, grid))
                return launcher[grid]

        return _Grid()


def _force(monkeypatch, T, K, dtype, segments, calls):
    # The one-walk plan for every call, with ``segments`` segments per sequence, in the shipped
    # blocks (16-bit V blocks stay at 64: config._config says why). Returns the plan.
    nt = -(-T // CF._BT)
    cps = -(-nt // segments)
    BK = max(64, next_power_of_2(K))
    cfg = (BK, 32, 4, 1) if dtype == torch.float32 else (BK, 64, 4, 3 if BK == 64 else 2)
    plan = (cfg, (cps, -(-nt // cps)))
    monkeypatch.setattr(CF, "_fused_plan", lambda *a: calls.append(a) or plan)
    return plan


@pytest.mark.parametrize(
    ("B", "T", "H", "K", "V", "dtype", "h0", "segments", "strided"),
    [
        (2, 130, 2, 32, 32, torch.float32, True, 1, False),  # partial last chunk
        (1, 320, 1, 32, 48, torch.float32, True, 5, False),  # 5 segments of one chunk
        (2, 200, 2, 32, 32, torch.bfloat16, False, 2, True),  # strided inputs
        slow(1, 400, 2, 48, 100, torch.float32, True, 3, False),  # K, V not powers of two
        slow(2, 300, 2, 100, 72, torch.bfloat16, True, 1, False),
        slow(1, 330, 1, 64, 64, torch.float16, True, 2, False),
    ],
)
@pytest.mark.parametrize("save_states", [False, True])
def test_one_walk_matches_the_output_pass_and_the_reference(
    monkeypatch, B, T, H, K, V, dtype, h0, segments, strided, save_states
):
    q, k, v, g, init = _inputs(B, T, H, K, V, dtype, h0, strided)
    monkeypatch.setattr(CF, "_fused_plan", lambda *a: None)
    o1, h1, ht1 = C.chunk_gla_fwd(q, k, v, g, None, init, None, True, save_states=save_states)
    calls = []
    (_, BV, _, _), (_, nseg) = _force(monkeypatch, T, K, dtype, segments, calls)
    assert nseg == segments
    launches = []
    monkeypatch.setattr(C, "launchable", _Spy(C.launchable, launches))
    o2, h2, ht2 = C.chunk_gla_fwd(q, k, v, g, None, init, None, True, save_states=save_states)
    walked = [grid for kernel, grid in launches if kernel is C._gla_fwd_fused_kernel]
    assert len(calls) == 1 and walked == [(B * H * segments, -(-V // BV))], launches
    tol = dict(atol=2e-5, rtol=2e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(ht2, ht1, **tol)
    torch.testing.assert_close(o2.float(), o1.float(), **tol)
    # The chunk states, kept or not, as the state walk stores them.
    assert h2.shape == h1.shape and h2.dtype == h1.dtype
    torch.testing.assert_close(h2.float(), h1.float(), **tol)
    assert_matches_reference(q, k, v, g, init, o2, ht2)


def test_start_segments_divide_the_plans_segments(monkeypatch):
    # The finer walk's segments, and r: the largest divisor of the plan's chunks per segment up
    # to _SEG_START_SPLIT, so that every r-th finer segment starts one of the plan's.
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", 2)
    monkeypatch.setattr(CF, "_SEG_START_MIN_CHUNKS", 64)
    assert CF._start_segments(128, 512) == (64, 8, 2)
    assert CF._start_segments(256, 2048) == (128, 16, 2)
    assert CF._start_segments(64, 1024) == (64, 16, 1)  # finer segments would be too short
    assert CF._start_segments(126, 512) == (126, 5, 1)  # 63 chunks each: too short
    monkeypatch.setattr(CF, "_SEG_START_MIN_CHUNKS", 1)
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", 4)
    assert CF._start_segments(6, 11) == (2, 6, 3)
    assert CF._start_segments(8, 128) == (2, 64, 4)
    assert CF._start_segments(7, 20) == (7, 3, 1)  # a prime: no finer split
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", 0)
    assert CF._start_segments(6, 11) == (6, 2, 1)
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", 1)
    assert CF._start_segments(6, 11) == (6, 2, 1)


@pytest.mark.parametrize(("split", "B"), [(2, 1), (3, 2)])
def test_segment_starts_from_finer_segments(monkeypatch, split, B):
    # The states at the segments' starts from a walk of finer segments: the same outputs and
    # final states as from the plan's own segments (11 chunks in 2 segments of 6 and 5; finer
    # segments of 3 or 2 chunks, the last ones partial), and the finer walk is the one that ran.
    T, H, K, V = 700, 2, 16, 32
    q, k, v, g, init = _inputs(B, T, H, K, V, torch.float32, True)
    _force(monkeypatch, T, K, torch.float32, 2, [])
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", 1)
    o1, _, ht1 = C.chunk_gla_fwd(q, k, v, g, None, init, None, True, save_states=False)
    monkeypatch.setattr(CF, "_SEG_START_SPLIT", split)
    monkeypatch.setattr(CF, "_SEG_START_MIN_CHUNKS", 1)
    walked = []
    launch_walk = C._launch_walk
    monkeypatch.setattr(
        C, "_launch_walk", lambda *a: walked.append((*a[14:17], a[17] is g)) or launch_walk(*a)
    )
    o2, _, ht2 = C.chunk_gla_fwd(q, k, v, g, None, init, None, True, save_states=False)
    # The finer segments, the CuTeDSL first step's tile for them, every split-th start kept,
    # and g, from which the first step computes the log-decay (Note [decay in the first step]).
    fine = (6 // split, -(-11 // (6 // split)))
    assert walked == [(fine, CF._CUTE_START_TILE_FINER, split, True)]
    torch.testing.assert_close(ht2, ht1, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(o2, o1, atol=2e-5, rtol=2e-5)
    assert_matches_reference(q, k, v, g, init, o2, ht2)


def test_one_walk_gradients_through_the_public_op(monkeypatch):
    # Through the generated operator, the forward in one walk with segments, then the backward
    # (which recomputes the states): the gradients match float64 autograd of the reference.
    import attnops

    B, T, H, K, V = 1, 300, 2, 16, 32
    q, k, v, g, init = _inputs(B, T, H, K, V, torch.float32, True)
    calls = []
    _force(monkeypatch, T, K, torch.float32, 2, calls)
    leaves = [x.detach().requires_grad_() for x in (q, k, v, g, init)]
    out = attnops.chunk_gla(*leaves[:4], initial_state=leaves[4], output_final_state=True)
    assert len(calls) == 1, "the forward did not plan a walk"
    gen = torch.Generator().manual_seed(3)
    do = torch.randn(B, T, H, V, generator=gen).to(DEVICE)
    dht = torch.randn(B, H, K, V, generator=gen).to(DEVICE)
    ((out.output * do).sum() + (out.final_state * dht).sum()).backward()
    d = [x.detach().double().requires_grad_() for x in (q, k, v, g, init)]
    o, ht = reference.chunk_gla_ref(*d[:4], None, d[4], True, None)
    want = torch.autograd.grad((o * do.double()).sum() + (ht * dht.double()).sum(), d)
    for name, x, w in zip(("dq", "dk", "dv", "dg", "dh0"), leaves, want, strict=True):
        err = (x.grad.double() - w).abs().max().item()
        assert err <= 1e-4 * w.abs().max().item(), f"{name}: {err}"


def test_the_plan_walks_where_it_measured_faster():
    # docs/performance.md, "chunk_gla: the forward in one walk": the suite's shapes in bf16.
    bf16 = torch.bfloat16
    plan = CF._fused_plan
    # K = V = 64 on 256 programs: one walk per sequence and V block.
    assert plan(8, 2048, 32, 64, 64, bf16, False, False) == ((64, 64, 4, 3), (32, 1))
    assert plan(8, 2048, 32, 64, 64, bf16, False, True) == ((64, 64, 4, 3), (32, 1))
    # One long sequence: 32 programs, in 8 segments of 64 chunks; not when keeping the states.
    assert plan(1, 32768, 16, 128, 128, bf16, False, False) == ((128, 64, 4, 2), (64, 8))
    assert plan(1, 32768, 16, 128, 128, bf16, False, True) is None
    assert plan(1, 131072, 8, 128, 128, torch.float16, False, False) == ((128, 64, 4, 2), (128, 16))
    # The state walk and output pass: K = 128 on many programs, segments too short, packed
    # sequences, float32, K over 128.
    assert plan(4, 4096, 16, 128, 128, bf16, False, False) is None
    assert plan(1, 8192, 4, 128, 128, bf16, False, False) is None
    assert plan(8, 2048, 32, 64, 64, bf16, True, False) is None
    assert plan(8, 2048, 32, 64, 64, torch.float32, False, False) is None
    assert plan(1, 32768, 16, 256, 128, bf16, False, False) is None


@pytest.mark.parametrize(
    ("value", "first", "run", "segments"),
    [
        (-math.inf, 0, 40, 1),  # a long run of resets, then ordinary tokens in the same chunk
        (-1e10, 10, 44, 2),  # across a segment boundary's chunk
        (-104.0, 64, 60, 3),
        slow(0.0, 0, 200, 2),  # no decay at all: the state only grows
    ],
)
def test_one_walk_at_the_edges_of_the_log_decay(monkeypatch, value, first, run, segments):
    # The log-decay's declared domain is [-inf, 0] (ops.yaml): its edges through the walk, with
    # and without segments, against the reference (as tests/test_fuzz_extremes.py checks them
    # through the other paths).
    from codegen.runtime.testing_edges import assert_close_at_edge

    B, T, H, K, V = 1, 200, 2, 16, 16
    q, k, v, g, init = _inputs(B, T, H, K, V, torch.float32, True)
    g = g.clone()
    g[:, first : first + run] = value
    _force(monkeypatch, T, K, torch.float32, segments, [])
    o, _, ht = C.chunk_gla_fwd(q, k, v, g, None, init, None, True)
    want_o, want_ht = reference.chunk_gla_ref(q, k, v, g, None, init, True, None)
    what = f"g = {value:g} over tokens {first}..{first + run - 1}, {segments} segment(s)"
    assert_close_at_edge(o, want_o, 1e-4, 1e-4, f"{what}: output", True)
    assert_close_at_edge(ht, want_ht, 1e-4, 1e-4, f"{what}: final state", True)
