"""chunk_gla's forward as one CuTeDSL walk (kernels/chunk_gla/cute.py, chosen first on Hopper):
where its contract holds (``config._cute_plan``), and on a Hopper GPU with CuTeDSL installed, the
same outputs, final states and kept chunk states (``save_states``) as the Triton forward, on odd
lengths, K of 64 and 128, V of 64 to 192, float16 and bfloat16, strided inputs, initial states,
segments and packed sequences (with offsets that leave tokens uncovered, which get zeros, and
state slots between sequences, which stay zero).

Each of those runs with the walk of three warpgroups and with that of one. The contract itself
(what goes to Triton instead, and which walk runs) is checked on any machine."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from chunk_gla_inputs import FakeCuda, hopper_with_cute, rel_err
from marks import first_by_default

from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import triton as C

_SKIP = hopper_with_cute()


@pytest.fixture(params=[True, False], ids=["three warpgroups", "one warpgroup"])
def organization(request, monkeypatch):
    """The walk of three warpgroups for every launch, then that of one (config._cute_walk_split
    chooses by the CTAs' count; these inputs are small); yields that choice and the ``split``
    that each launch of the walk had."""
    from attnops_kernels.chunk_gla import cute

    monkeypatch.setattr(CF, "_cute_walk_split", lambda device, ctas: request.param)
    seen = []
    walk = cute.walk

    def recorded(*args, split=False, **kwargs):
        seen.append(split)
        return walk(*args, split=split, **kwargs)

    monkeypatch.setattr(cute, "walk", recorded)
    return request.param, seen


def _rand(shape, dtype, device, strided, gen):
    if strided:
        # Every other head of a wider tensor: strides that are not the compact ones.
        wide = (*shape[:2], 2 * shape[2], shape[3])
        return torch.randn(wide, generator=gen).to(dtype).to(device)[:, :, ::2]
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def test_the_contract_sends_the_rest_to_triton():
    # Everything the walk cannot take, each alone: CPU tensors here; the layout and size rules
    # through _tma_ready and the plan's arguments.
    q = torch.randn(1, 128, 2, 128, dtype=torch.bfloat16)
    v = torch.randn(1, 128, 2, 64, dtype=torch.bfloat16)
    assert CF._cute_plan(q, q, v, False, False) is None  # not CUDA
    assert CF._tma_ready(q)
    assert not CF._tma_ready(q.transpose(-1, -2))  # last mode not contiguous
    assert not CF._tma_ready(q[..., 1:])  # base 2 bytes past an aligned one
    assert not CF._tma_ready(torch.randn(1, 128, 2, 100, dtype=torch.bfloat16)[..., :60])
    assert CF._tma_ready(torch.randn(1, 128, 2, 128, dtype=torch.bfloat16)[..., :64])


def test_the_contract_refuses_grids_and_sizes_the_walk_cannot_launch(monkeypatch):
    # Past the availability check (faked: this runs on any machine), each limit alone.
    monkeypatch.setattr(CF, "_CUTE_WALK", True)
    monkeypatch.setattr(CF, "_cute_available", lambda index: True)
    monkeypatch.setattr(CF, "_sm_count", lambda device: 132)  # an H200's

    def plan(B, T, H, K, V, cu=False, sequences=None, dtype=torch.bfloat16, save=False):
        q = FakeCuda(B, T, H, K, dtype=dtype)
        return CF._cute_plan(q, q, FakeCuda(B, T, H, V, dtype=dtype), cu, save, sequences)

    assert plan(2, 256, 4, 128, 128) is not None
    assert plan(0, 256, 4, 128, 128) is None and plan(2, 256, 0, 128, 128) is None  # empty
    q, v = FakeCuda(2, 256, 4, 128), FakeCuda(2, 256, 4, 128)
    assert CF._cute_plan(q, q, v, False, False) is not None
    assert CF._cute_plan(q, FakeCuda(2, 256, 4, 128, dtype=torch.float16), v, False, False) is None
    assert CF._cute_plan(q, q, FakeCuda(2, 256, 4, 128, dtype=torch.float16), False, False) is None
    assert CF._cute_plan(q, FakeCuda(2, 255, 4, 128), v, False, False) is None  # k not q's shape
    assert CF._cute_plan(q, q, FakeCuda(2, 256, 3, 128), False, False) is None  # v's heads
    assert plan(2, 256, 4, 128, 48) is None  # V below one 64-column box
    assert plan(2, 256, 4, 96, 128) is None  # K neither 64 nor 128
    assert plan(2, 256, 4, 128, 100) is None  # rows of V not 16-byte multiples
    assert plan(2, 256, 4, 128, 128, dtype=torch.float32) is None
    assert plan(1, 256, 65536, 64, 64) is None  # grid's second size
    assert plan(70000, 64, 1, 64, 64) is None  # grid's third size
    assert plan(1, 70000 * 64, 1, 64, 64, cu=True, sequences=70000) is None
    assert plan(1, 256, 1, 64, 64, cu=True, sequences=3) == (4, 1)
    # The states at the walks' starts and ends ([sequences x segments, H, K, V] float32:
    # initial or segment-start states, final states) are indexed in 32 bits too: with few tokens
    # they pass q's size (here 2**31 of them against q's 2**30).
    assert plan(1024, 64, 128, 128, 128) is None
    assert plan(1023, 64, 128, 128, 128) == (1, 1)
    assert plan(1, 64, 128, 128, 128, cu=True, sequences=1024) is None
    assert plan(1, 64, 128, 128, 128, cu=True, sequences=1023) == (1, 1)
    # Kept chunk states are twice q's size at K = V = 128: their indices must fit too.
    assert plan(1, 2**23, 1, 128, 128, save=True) is None
    assert plan(1, 2**23, 1, 128, 128) is not None
    assert plan(1, 2**22, 1, 128, 128, save=True) == plan(1, 2**22, 1, 128, 128)
    # Segments only where fewer than 128 CTAs would walk, of 8 chunks or more: at K = 128 one
    # CTA per multiprocessor where whole segments fill 90% of them, else about 256 CTAs.
    assert plan(4, 4096, 16, 128, 128) == (64, 1)
    assert plan(2, 4096, 16, 128, 128) == (32, 2)
    assert plan(1, 32768, 16, 128, 128) == (128, 4)
    assert plan(1, 8192, 4, 128, 128) == (8, 16)
    assert plan(1, 100, 1, 128, 128) == (2, 1)
    assert plan(2, 8192, 12, 128, 128) == (22, 6)  # 96 CTAs would fill 73%
    assert plan(4, 2048, 16, 64, 64) == (8, 4)  # K = 64
    monkeypatch.setattr(CF, "_sm_count", lambda device: 114)
    assert plan(1, 32768, 16, 128, 128) == (64, 8)  # 96 CTAs would fill 84%
    assert plan(1, 32768, 19, 128, 128) == (171, 3)  # 114 of them


def test_three_warpgroups_walk_where_every_cta_has_a_multiprocessor(monkeypatch):
    monkeypatch.setattr(CF, "_sm_count", lambda device: 132)
    device = torch.device("cuda", 0)
    assert CF._cute_walk_split(device, 1) and CF._cute_walk_split(device, 132)
    assert not CF._cute_walk_split(device, 133) and not CF._cute_walk_split(device, 256)
    monkeypatch.setattr(CF, "_CUTE_WALK_SPLIT", False)
    assert not CF._cute_walk_split(device, 128)


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    ("B", "T", "H", "K", "V", "dtype", "init", "strided", "min_chunks"),
    first_by_default(
        [
            (2, 1000, 3, 128, 128, torch.bfloat16, True, False, 16),
            (1, 300, 2, 64, 64, torch.bfloat16, False, False, 16),
            (2, 777, 2, 128, 64, torch.float16, True, False, 16),
            (1, 650, 2, 64, 192, torch.bfloat16, True, True, 16),
            (1, 129, 1, 128, 96, torch.bfloat16, False, True, 16),
            (1, 8192, 2, 128, 128, torch.bfloat16, True, False, 16),
            (2, 1000, 1, 64, 64, torch.float16, True, True, 3),
            (2, 64, 1, 128, 128, torch.bfloat16, True, False, 16),
        ]
    ),
)
def test_cute_walk_matches_the_triton_forward(
    monkeypatch, organization, B, T, H, K, V, dtype, init, strided, min_chunks
):
    gen = torch.Generator().manual_seed(T + K + V)
    q = _rand((B, T, H, K), dtype, "cuda", strided, gen)
    k = _rand((B, T, H, K), dtype, "cuda", strided, gen)
    v = _rand((B, T, H, V), dtype, "cuda", strided, gen)
    g = F.logsigmoid(torch.randn(B, T, H, generator=gen)).cuda()
    h0 = torch.randn(B, H, K, V, generator=gen).cuda() if init else None
    monkeypatch.setattr(CF, "_CUTE_SEG_MIN_CHUNKS", min_chunks)
    monkeypatch.setattr(CF, "_CUTE_WALK", True)
    plan = CF._cute_plan(q, k, v, False, False)
    assert plan is not None, "the walk's contract should hold here"
    o, h, ht = C.chunk_gla_fwd(q, k, v, g, None, h0, None, True, save_states=False)
    o_s, h_s, ht_s = C.chunk_gla_fwd(q, k, v, g, None, h0, None, True, save_states=True)
    monkeypatch.setattr(CF, "_CUTE_WALK", False)
    o_t, h_t, ht_t = C.chunk_gla_fwd(q, k, v, g, None, h0, None, True, save_states=True)
    split, seen = organization
    assert seen == [split, split]
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert h.shape[0] == 0
    assert rel_err(o, o_t) < 1e-2, plan
    assert rel_err(ht, ht_t) < 1e-2, plan
    # Keeping the chunk states changes nothing else, and they are the Triton walk's.
    assert torch.equal(o_s, o) and torch.equal(ht_s, ht)
    assert h_s.shape == h_t.shape and h_s.dtype == h_t.dtype == dtype
    assert torch.isfinite(h_s).all() and rel_err(h_s, h_t) < 1e-2, plan


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    ("offsets", "T", "K", "V", "init", "dtype"),
    first_by_default(
        [
            # Sequences that start off the 16-byte boundaries of the log-decay's rows, whose G
            # and C rows are off them by different amounts (T = 901).
            ((0, 100, 101, 357, 900), 901, 128, 128, True, torch.bfloat16),
            ((0, 64, 128, 130, 500), 500, 64, 96, False, torch.float16),
            # Uncovered tokens before the first sequence and after the last get zeros; an
            # int64 offset past int32 is clamped to T like any other.
            ((70, 200, 2**40), 400, 128, 64, True, torch.bfloat16),
            # An empty sequence: its CTAs walk no chunk and pass its initial state through.
            ((0, 100, 100, 300), 300, 128, 128, True, torch.bfloat16),
        ]
    ),
)
def test_cute_walk_matches_the_triton_forward_on_packed_sequences(
    monkeypatch, organization, offsets, T, K, V, init, dtype
):
    H = 2
    N = len(offsets) - 1
    gen = torch.Generator().manual_seed(T + K)
    q = _rand((1, T, H, K), dtype, "cuda", False, gen)
    k = _rand((1, T, H, K), dtype, "cuda", False, gen)
    v = _rand((1, T, H, V), dtype, "cuda", False, gen)
    g = F.logsigmoid(torch.randn(1, T, H, generator=gen)).cuda()
    h0 = torch.randn(N, H, K, V, generator=gen).cuda() if init else None
    cu = torch.tensor(offsets, dtype=torch.int64, device="cuda")
    monkeypatch.setattr(CF, "_CUTE_WALK", True)
    assert CF._cute_plan(q, k, v, True, False, N) == (-(-T // 64), 1)
    o, h, ht = C.chunk_gla_fwd(q, k, v, g, None, h0, cu, True, save_states=True)
    o_n, _, ht_n = C.chunk_gla_fwd(q, k, v, g, None, h0, cu, True, save_states=False)
    assert torch.equal(o_n, o) and torch.equal(ht_n, ht)
    monkeypatch.setattr(CF, "_CUTE_WALK", False)
    o_t, h_t, ht_t = C.chunk_gla_fwd(q, k, v, g, None, h0, cu, True, save_states=True)
    split, seen = organization
    assert seen == [split, split]
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert rel_err(o, o_t) < 1e-2
    assert rel_err(ht, ht_t) < 1e-2
    # The chunk states by slot, the gap slots between sequences left zero as the Triton walk
    # leaves them.
    assert h.shape == h_t.shape and torch.isfinite(h).all() and rel_err(h, h_t) < 1e-2
    walked = torch.zeros(h.shape[0], dtype=torch.bool)
    for i in range(N):
        bos, eos = (min(max(x, 0), T) for x in offsets[i : i + 2])
        walked[bos // 64 + i : bos // 64 + i + -(-max(eos - bos, 0) // 64)] = True
    assert not walked.all() and (h[~walked.cuda()] == 0).all()
    lo, hi = offsets[0], min(offsets[-1], T)
    assert (o[:, :lo] == 0).all() and (o[:, hi:] == 0).all()


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    "edge",
    first_by_default(
        [(e,) for e in ("resets", "one token", "five tokens", "q is k", "no decay", "deep decay")]
    ),
)
def test_cute_walk_matches_the_triton_forward_at_the_edges(monkeypatch, organization, edge):
    # What users pass that the sweeps above do not: g = -inf (a reset) at some tokens and very
    # negative decays, sequences shorter than a chunk, the same tensor as q and k, no decay.
    B, T, H, K, V = (3, 1, 2, 64, 64) if edge == "one token" else (3, 5, 2, 64, 64)
    if edge not in ("one token", "five tokens"):
        B, T = 2, 301  # rows of the log-decay off its 16-byte boundaries
    gen = torch.Generator().manual_seed(11)
    q = _rand((B, T, H, K), torch.bfloat16, "cuda", False, gen)
    k = q if edge == "q is k" else _rand((B, T, H, K), torch.bfloat16, "cuda", False, gen)
    v = _rand((B, T, H, V), torch.bfloat16, "cuda", False, gen)
    g = F.logsigmoid(torch.randn(B, T, H, generator=gen))
    if edge == "resets":
        g[:, ::37] = -torch.inf
    if edge == "no decay":
        g.zero_()
    if edge == "deep decay":
        g[:, 1::3] = -1e4
    g = g.cuda()
    h0 = torch.randn(B, H, K, V, generator=gen).cuda()
    monkeypatch.setattr(CF, "_CUTE_WALK", True)
    assert CF._cute_plan(q, k, v, False, False) is not None
    o, _, ht = C.chunk_gla_fwd(q, k, v, g, None, h0, None, True, save_states=False)
    monkeypatch.setattr(CF, "_CUTE_WALK", False)
    o_t, _, ht_t = C.chunk_gla_fwd(q, k, v, g, None, h0, None, True, save_states=False)
    split, seen = organization
    assert seen == [split]
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert rel_err(o, o_t) < 1e-2 and rel_err(ht, ht_t) < 1e-2


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
def test_the_public_operator_runs_the_walk_eagerly_compiled_and_in_graphs(monkeypatch):
    # The operator as users call it, where the walk is chosen (the generated suite's samples,
    # K of 16 and 32, never reach it): eager with autograd, torch.compile(fullgraph=True) and
    # CUDA-graph replay each launch the walk, and give what the Triton forward gives. The
    # backward recomputes the states from the inputs, so the gradients are the same bits.
    import attnops
    from attnops_kernels.chunk_gla import cute

    calls = []
    walk = cute.walk
    monkeypatch.setattr(cute, "walk", lambda *a, **kw: calls.append(1) or walk(*a, **kw))
    gen = torch.Generator().manual_seed(5)
    B, T, H, K, V = 2, 200, 2, 64, 64
    q, k = (torch.randn(B, T, H, K, generator=gen).bfloat16().cuda() for _ in range(2))
    v = torch.randn(B, T, H, V, generator=gen).bfloat16().cuda()
    g = F.logsigmoid(torch.randn(B, T, H, generator=gen)).cuda()
    h0 = torch.randn(B, H, K, V, generator=gen).cuda()
    do = torch.randn(B, T, H, V, generator=gen).bfloat16().cuda()
    dht = torch.randn(B, H, K, V, generator=gen).cuda()

    def run(fn, cute_on):
        monkeypatch.setattr(CF, "_CUTE_WALK", cute_on)
        xs = [x.detach().requires_grad_() for x in (q, k, v, g, h0)]
        out = fn(*xs[:4], initial_state=xs[4], output_final_state=True)
        grads = torch.autograd.grad((out.output, out.final_state), xs, (do, dht))
        return out.output.detach(), out.final_state.detach(), grads

    o_t, ht_t, grads_t = run(attnops.chunk_gla, False)
    assert not calls
    for fn in (attnops.chunk_gla, torch.compile(attnops.chunk_gla, fullgraph=True)):
        before = len(calls)
        o, ht, grads = run(fn, True)
        assert len(calls) > before, "the walk should have run"
        assert rel_err(o, o_t) < 1e-2 and rel_err(ht, ht_t) < 1e-2
        for a, b in zip(grads, grads_t, strict=True):
            assert torch.equal(a, b)

    monkeypatch.setattr(CF, "_CUTE_WALK", True)
    with torch.no_grad():
        eager = attnops.chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True)
        graph = torch.cuda.CUDAGraph()
        before = len(calls)
        with torch.cuda.graph(graph):
            captured = attnops.chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True)
        assert len(calls) > before
        graph.replay()
        torch.cuda.synchronize()
    assert torch.equal(captured.output, eager.output)
    assert torch.equal(captured.final_state, eager.final_state)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, True), ("", True), ("1", True), (" On ", True), ("TRUE", True), ("yes", True)]
    + [("0", False), ("false", False), ("Off", False), ("no", False), ("bogus", None), ("2", None)],
)
def test_the_walk_switch_reads_yes_and_no_and_refuses_the_rest(monkeypatch, raw, expected):
    name = "ATTNOPS_CHUNK_GLA_CUTE"
    if raw is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, raw)
    if expected is None:
        with pytest.raises(ValueError, match=f"{name}={raw!r}: expected 1, true"):
            CF._env_switch(name, True)
    else:
        assert CF._env_switch(name, True) is expected


def test_ptxas_issues_the_kernels_warpgroup_products_without_waiting_between_them():
    """ptxas serializes every wgmma of a kernel where one sits on a path it cannot prove the
    whole warpgroup takes, and says so only as an advisory (C7520): the walk of three
    warpgroups ran so until one warp's mbarrier wait left its output warpgroups' loop.
    ``tests/cute_ptxas_check.py`` compiles keys of the walk, the gradients' pass and the state
    walks for sm_90a (no GPU needed) and fails on that advisory (or, where no ptxas
    here takes the PTX, on a wait for every product in the SASS) or on a spill."""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("needs nvidia-cutlass-dsl (the cute extra) to compile the kernels")
    from cute_ptxas_check import grads_keys, states_keys, tools, walk_keys

    if not tools("ptxas") and not tools("cuobjdump"):
        pytest.skip("needs ptxas or cuobjdump (CUDA's, or Triton's own) to read the kernels")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parent / "cute_ptxas_check.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # Every key the check lists, each compiled and read.
    keys = [*walk_keys(False), *grads_keys(), *states_keys()]
    assert sum(line.startswith("ok ") for line in run.stdout.splitlines()) == len(keys), run.stdout
