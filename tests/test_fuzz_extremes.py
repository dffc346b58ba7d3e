"""Random extreme values inside each operator's declared domain (``domain:`` in ops.yaml),
through the public functions, against the float32 references: the comparison of the generated
domain-edge tests (``assert_close_at_edge``: where the reference is finite the kernel must be
finite and close to it; results must also match its infinities; the reference's NaNs and, for
gradients, its infinities are not compared).

Each case draws everything (shapes, packing, which tokens or elements hold which edge value)
from its own seed, printed in the failure, so that a failure reproduces with that seed alone."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from codegen.runtime.testing import DEVICE
from codegen.runtime.testing_edges import assert_close_at_edge

INF = math.inf
# The interpreter computes in numpy, which warns at every overflow these values are for.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
SEEDS = range(8)
# Log-decays at and past the edges: a reset, huge finite ones, the first that underflows
# exp() in float32, and no decay at all.
G_EDGES = [-INF, -1e10, -1e4, -104.0, 0.0]


def _rnd(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(DEVICE)


def _places(rng: random.Random, T: int, starts: list[int]) -> list[list[int]]:
    """A few random sets of token positions: one token, a run, a whole chunk of 64, the first
    token (of the batch or of a packed sequence) or the last one."""
    found = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["token", "run", "chunk", "first", "last"])
        if kind == "token":
            found.append([rng.randrange(T)])
        elif kind == "run":
            a = rng.randrange(T)
            found.append(list(range(a, min(T, a + rng.randint(2, 20)))))
        elif kind == "chunk" and T >= 64:
            c = rng.randrange(T // 64)
            found.append(list(range(64 * c, 64 * c + 64)))
        elif kind == "first":
            found.append([rng.choice(starts)])
        else:
            found.append([T - 1])
    return found


def _extreme_g(rng: random.Random, gen: torch.Generator, B: int, T: int, H: int, starts):
    g = F.logsigmoid(_rnd(gen, B, T, H))
    placed = []
    for tokens in _places(rng, T, starts):
        value = rng.choice(G_EDGES)
        b, h = rng.randrange(B), rng.choice([None, rng.randrange(H)])
        g[b, tokens, slice(None) if h is None else h] = value
        heads = "every head" if h is None else f"head {h}"
        placed.append(f"g[{b}, {tokens[0]}..{tokens[-1]}] = {value:g} ({heads})")
    return g, placed


@pytest.mark.parametrize("seed", SEEDS)
def test_chunk_gla_at_random_log_decay_edges(seed):
    import attnops
    from attnops_kernels.chunk_gla.reference import chunk_gla_ref

    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    T, H, K, V = rng.choice([1, 63, 65, 130]), rng.randint(1, 2), 16, 16
    packed = T > 2 and rng.random() < 0.5
    if packed:
        B = 1
        cuts = sorted(rng.sample(range(1, T), rng.randint(1, min(3, T - 1))))
        cu = [0, *cuts, T]
        cu_t = torch.tensor(cu, dtype=rng.choice([torch.int32, torch.int64]), device=DEVICE)
    else:
        B, cu, cu_t = rng.randint(1, 2), None, None
    N = len(cu) - 1 if packed else B
    g, placed = _extreme_g(rng, gen, B, T, H, cu[:-1] if packed else [0])
    q, k, v = _rnd(gen, B, T, H, K), _rnd(gen, B, T, H, K), _rnd(gen, B, T, H, V)
    h0 = _rnd(gen, N, H, K, V) if rng.random() < 0.5 else None
    do, dht = _rnd(gen, B, T, H, V), _rnd(gen, N, H, K, V)
    what = f"seed {seed}: B={B} T={T} H={H} cu_seqlens={cu if packed else None} "
    what += f"initial_state={h0 is not None}; {'; '.join(placed)}"

    leaves = [x.clone().requires_grad_() for x in (q, k, v, g)]
    ref = [x.clone().requires_grad_() for x in (q, k, v, g)]
    h0_leaf, h0_ref = [None if h0 is None else h0.clone().requires_grad_() for _ in "ab"]
    got = attnops.chunk_gla(*leaves, None, h0_leaf, True, cu_t)
    want = chunk_gla_ref(*ref, None, h0_ref, True, cu_t)
    for name, a, e in zip(["output", "final_state"], got, want, strict=True):
        assert_close_at_edge(a, e, 1e-4, 1e-4, f"{what}: {name}", True)
    names = ["q", "k", "v", "g"] + ([] if h0 is None else ["initial_state"])
    grads = torch.autograd.grad(
        (got[0] * do).sum() + (got[1] * dht).sum(), leaves + ([] if h0 is None else [h0_leaf])
    )
    expected = torch.autograd.grad(
        (want[0] * do).sum() + (want[1] * dht).sum(), ref + ([] if h0 is None else [h0_ref])
    )
    for name, a, e in zip(names, grads, expected, strict=True):
        assert_close_at_edge(a, e, 2e-4, 1e-4, f"{what}: grad of {name}", False)


# Inside gate's and l2norm's domain [-inf, inf]: infinities, huge and tiny magnitudes, zeros.
EXTREMES = [INF, -INF, 1e30, -1e30, 1e18, -1e18, 1e-30, -1e-30, 1e-45, 0.0, -0.0]


def _sprinkle(rng: random.Random, x: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
    """``x`` with a few random elements, a whole random row or a random run of its last dim set
    to extreme values; where."""
    x = x.clone()
    flat, rows = x.view(-1), x.view(-1, x.shape[-1])
    placed = []
    for _ in range(rng.randint(1, 4)):
        value, kind = rng.choice(EXTREMES), rng.choice(["element", "row", "run"])
        if kind == "element":
            i = rng.randrange(flat.numel())
            flat[i] = value
        elif kind == "row":
            i = rng.randrange(rows.shape[0])
            rows[i] = value
        else:
            i, a = rng.randrange(rows.shape[0]), rng.randrange(rows.shape[1])
            rows[i, a : a + rng.randint(2, 8)] = value
        placed.append(f"{kind} {i} = {value:g}")
    return x, placed


@pytest.mark.parametrize("seed", SEEDS)
def test_gate_at_random_extremes(seed):
    import attnops
    from attnops_kernels.gate.reference import gate_ref

    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    H, K = rng.randint(1, 3), rng.choice([4, 16])
    g, placed = _sprinkle(rng, 3 * _rnd(gen, rng.randint(1, 3), rng.randint(1, 5), H, K))
    A_log = _rnd(gen, H) if rng.random() < 0.7 else None
    dt_bias = _rnd(gen, H * K) if rng.random() < 0.7 else None
    kind = rng.choice(["softplus", "lower_bound"])
    lower_bound = rng.choice([-5.0, -1.0, -20.0])
    what = f"seed {seed}: g {tuple(g.shape)}, A_log={A_log is not None}, "
    what += f"dt_bias={dt_bias is not None}, {kind}, {lower_bound}; {'; '.join(placed)}"
    inputs = [g, A_log, dt_bias]
    leaves = [None if x is None else x.clone().requires_grad_() for x in inputs]
    ref = [None if x is None else x.clone().requires_grad_() for x in inputs]
    (out,) = attnops.gate(*leaves, kind, lower_bound)
    want = gate_ref(*ref, kind, lower_bound)
    assert_close_at_edge(out, want, 1e-5, 1e-5, f"{what}: out", True)
    weights = _rnd(gen, *out.shape)
    present = [i for i, x in enumerate(leaves) if x is not None]
    grads = torch.autograd.grad((out * weights).sum(), [leaves[i] for i in present])
    expected = torch.autograd.grad((want * weights).sum(), [ref[i] for i in present])
    for i, a, e in zip(present, grads, expected, strict=True):
        name = ["g", "A_log", "dt_bias"][i]
        assert_close_at_edge(a, e, 1e-3, 1e-4, f"{what}: grad of {name}", False)


@pytest.mark.parametrize("seed", SEEDS)
def test_l2norm_at_random_extremes(seed):
    import attnops
    from attnops_kernels.l2norm.reference import l2norm_ref

    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    D = rng.choice([1, 7, 64, 100])
    x, placed = _sprinkle(rng, _rnd(gen, rng.randint(1, 4), rng.randint(1, 3), D))
    eps = rng.choice([1e-6, 1e-12, 0.0])
    what = f"seed {seed}: x {tuple(x.shape)}, eps={eps:g}; {'; '.join(placed)}"
    leaf, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    (y,) = attnops.l2norm(leaf, eps)
    want = l2norm_ref(ref, eps)
    assert_close_at_edge(y, want, 1e-5, 1e-5, f"{what}: y", True)
    weights = _rnd(gen, *y.shape)
    (grad,) = torch.autograd.grad((y * weights).sum(), [leaf])
    (expected,) = torch.autograd.grad((want * weights).sum(), [ref])
    assert_close_at_edge(grad, expected, 1e-3, 1e-4, f"{what}: grad of x", False)


@pytest.mark.parametrize("seed", SEEDS)
def test_recurrent_gla_step_at_random_log_decay_edges(seed):
    import attnops
    from attnops_kernels.recurrent_gla_step.reference import recurrent_gla_step_ref

    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    B, H, K, V = rng.randint(1, 3), rng.randint(1, 3), rng.choice([16, 48]), rng.choice([16, 100])
    g = F.logsigmoid(_rnd(gen, B, H))
    flat = g.view(-1)
    for i in rng.sample(range(flat.numel()), rng.randint(1, flat.numel())):
        flat[i] = rng.choice(G_EDGES)
    state, q, k, v = (
        _rnd(gen, B, H, K, V),
        _rnd(gen, B, H, K),
        _rnd(gen, B, H, K),
        _rnd(gen, B, H, V),
    )
    scale = rng.choice([K**-0.5, 1.0])
    what = f"seed {seed}: B={B} H={H} K={K} V={V} g={g.tolist()}"
    expected_state = state.clone()
    want = recurrent_gla_step_ref(expected_state, q, k, v, g, scale)
    (out,) = attnops.recurrent_gla_step(state, q, k, v, g, scale)
    assert_close_at_edge(out, want, 1e-4, 1e-4, f"{what}: output", True)
    assert_close_at_edge(state, expected_state, 1e-4, 1e-4, f"{what}: state after the call", True)


# Findings of the fuzz, each as the smallest case that shows it.


def _chunk_gla_run_then_ordinary(value: float, first: int, run: int, T: int = 64) -> None:
    """``g = value`` over tokens ``first .. first + run - 1``, ordinary log-decays elsewhere: the
    decays among the later tokens of that chunk, forward and backward, against the reference."""
    import attnops
    from attnops_kernels.chunk_gla.reference import chunk_gla_ref

    gen = torch.Generator().manual_seed(0)
    B, H, K, V = 1, 1, 16, 16
    g = F.logsigmoid(_rnd(gen, B, T, H))
    g[:, first : first + run] = value
    q, k, v = _rnd(gen, B, T, H, K), _rnd(gen, B, T, H, K), _rnd(gen, B, T, H, V)
    do, dht = _rnd(gen, B, T, H, V), _rnd(gen, B, H, K, V)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g)]
    ref = [x.clone().requires_grad_() for x in (q, k, v, g)]
    got = attnops.chunk_gla(*leaves, output_final_state=True)
    want = chunk_gla_ref(*ref, None, None, True)
    what = f"g = {value:g} over tokens {first}..{first + run - 1} of {T}"
    for name, a, e in zip(["output", "final_state"], got, want, strict=True):
        assert_close_at_edge(a, e, 1e-4, 1e-4, f"{what}: {name}", True)
    grads = torch.autograd.grad((got[0] * do).sum() + (got[1] * dht).sum(), leaves)
    expected = torch.autograd.grad((want[0] * do).sum() + (want[1] * dht).sum(), ref)
    for name, a, e in zip("qkvg", grads, expected, strict=True):
        assert_close_at_edge(a, e, 2e-4, 1e-4, f"{what}: grad of {name}", False)


def test_chunk_gla_a_short_run_of_resets_then_ordinary_tokens():
    _chunk_gla_run_then_ordinary(-INF, 0, 5)
    _chunk_gla_run_then_ordinary(-1e10, 0, 5)


# The in-chunk cumulative log-decay of such a chunk reaches thousands (40 tokens at the floor:
# -4400, an ulp of 4.9e-4 in float32); summed and stored in float32 alone, the decays between
# the later ordinary tokens were off by up to 8e-4 (Note [log-decay floor]). -100 is no reset
# (exp(-100) is a normal float32 number) but takes the sum as far.
@pytest.mark.parametrize(
    ("value", "first", "run", "T"),
    [
        (-INF, 0, 40, 64),
        (-1e10, 0, 40, 64),
        (-104.0, 0, 40, 64),
        (-100.0, 0, 40, 64),
        (-INF, 10, 44, 64),
        (-1e4, 64, 60, 130),
    ],
)
def test_chunk_gla_a_long_run_of_large_log_decays_then_ordinary_tokens(value, first, run, T):
    _chunk_gla_run_then_ordinary(value, first, run, T)


def test_chunk_gla_sequential_kernels_after_a_long_run_of_resets():
    """The same finding through the sequential kernels: the forward that offsets which fall
    (``[0, 64, 0]``) send there, and the sequential backward."""
    from attnops_kernels.chunk_gla.reference import chunk_gla_ref
    from attnops_kernels.chunk_gla.triton import chunk_gla_bwd_sequential, chunk_gla_fwd

    gen = torch.Generator().manual_seed(0)
    T, K, V = 64, 16, 16
    g = F.logsigmoid(_rnd(gen, 1, T, 1))
    g[:, :40] = -1e10
    q, k, v = _rnd(gen, 1, T, 1, K), _rnd(gen, 1, T, 1, K), _rnd(gen, 1, T, 1, V)
    do, dht = _rnd(gen, 1, T, 1, V), _rnd(gen, 1, 1, K, V)
    ref = [x.clone().requires_grad_() for x in (q, k, v, g)]
    want_o, want_ht = chunk_gla_ref(*ref, None, None, True)
    fallen = torch.tensor([0, T, 0], dtype=torch.int32, device=DEVICE)
    o, _, ht = chunk_gla_fwd(q, k, v, g, None, None, fallen, True)
    assert_close_at_edge(o, want_o, 1e-4, 1e-4, "sequential forward: output", True)
    assert_close_at_edge(ht[:1], want_ht, 1e-4, 1e-4, "sequential forward: final state", True)
    expected = torch.autograd.grad((want_o * do).sum() + (want_ht * dht).sum(), ref)
    grads = chunk_gla_bwd_sequential(q, k, v, g, None, None, None, do, dht)[:4]
    for name, a, e in zip("qkvg", grads, expected, strict=True):
        assert_close_at_edge(a, e, 2e-4, 1e-4, f"sequential backward: grad of {name}", False)
