"""chunk_gla's forward returns its chunk states ``h`` and the backward, given them, walks only the
state gradients (kernels/chunk_gla/triton.py, ``chunk_gla_fwd`` and ``chunk_gla_bwd``).

What ``h`` holds is checked against the token-by-token recurrence in float64 (the state before
each chunk's first token, in the slot the kernels give that chunk; zeros in the slots between
packed sequences). The backward given ``h`` must give what it gives recomputing the states, must
not launch the walk that recomputes them (also where the forward or the backward walks
segments). An ``h`` of the wrong shape,
dtype or device is refused before any launch. Through the public function under autograd (with
and without the eager fast path), the forward's ``h`` reaches the backward with
``save_states=True``; by default the backward recomputes the states.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import triton as C

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def _triton_forward(monkeypatch):
    # The Triton plans under test, also where the CuTeDSL walk would take the forward
    # (config._cute_plan: Hopper with CuTeDSL installed).
    monkeypatch.setattr(CF, "_CUTE_WALK", False)


def _inputs(B, T, H, K, V, dtype, N, seed=0):
    gen = torch.Generator().manual_seed(seed + T * 10 + K + V)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(DEVICE)

    q, k, v = rnd(B, T, H, K).to(dtype), rnd(B, T, H, K).to(dtype), rnd(B, T, H, V).to(dtype)
    g = F.logsigmoid(rnd(B, T, H)) * 0.3
    do = rnd(B, T, H, V).to(dtype)
    return q, k, v, g, rnd(N, H, K, V), do, rnd(N, H, K, V)


def _chunk_states(k, v, g, h0, cu, BT=64):
    """float64 [slots, H, K, V]: the state before each chunk's first token, by the recurrence."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    k, v, g, h0 = (x.double().cpu() for x in (k, v, g, h0))
    NT = -(-T // BT)
    if cu is None:
        seqs = [(b, 0, T, b * NT) for b in range(B)]
        slots = B * NT
    else:
        cu = cu.tolist()
        seqs = [(0, cu[n], cu[n + 1], cu[n] // BT + n) for n in range(len(cu) - 1)]
        slots = NT + len(cu) - 2
    out = torch.zeros(slots, H, K, V, dtype=torch.float64)
    for n, (b, bos, eos, c0) in enumerate(seqs):
        s = h0[n].clone()
        for t in range(bos, eos):
            if (t - bos) % BT == 0:
                out[c0 + (t - bos) // BT] = s
            s = torch.exp(g[b, t])[:, None, None] * s + k[b, t][:, :, None] * v[b, t][:, None, :]
    return out


def _launches(monkeypatch):
    seen = []
    launch = C.launchable

    def spy(kernel, *a, **kw):
        seen.append(getattr(kernel, "__name__", None) or kernel.fn.__name__)
        return launch(kernel, *a, **kw)

    monkeypatch.setattr(C, "launchable", spy)
    return seen


CASES = [
    # B, T, H, K, V, dtype, cu_seqlens
    (2, 150, 2, 32, 48, torch.float32, None),  # a partial last chunk
    (1, 200, 1, 16, 16, torch.float16, None),
    (1, 150, 2, 64, 64, torch.bfloat16, None),  # dv in the dq/dk/dg pass
    (1, 200, 1, 100, 40, torch.float32, [0, 64, 65, 70, 200]),  # packed, gap slots
    (1, 140, 1, 16, 32, torch.bfloat16, [0, 10, 10, 140]),  # an empty sequence
]


@pytest.mark.parametrize(("B", "T", "H", "K", "V", "dtype", "cu"), CASES)
def test_forward_returns_the_chunk_states(B, T, H, K, V, dtype, cu):
    cut = None if cu is None else torch.tensor(cu, dtype=torch.int32, device=DEVICE)
    N = B if cu is None else len(cu) - 1
    q, k, v, g, h0, _, _ = _inputs(B, T, H, K, V, dtype, N)
    o, h, ht = C.chunk_gla_fwd(q, k, v, g, None, h0, cut, True)
    want = _chunk_states(k, v, g, h0, cut)
    assert h.shape == want.shape and h.dtype == dtype and h.is_contiguous()
    tol = 1e-4 if dtype == torch.float32 else 1e-2
    scale = want.abs().max().item()
    assert (h.double().cpu() - want).abs().max().item() <= tol * scale
    # the slots no chunk uses hold zeros
    unused = want.abs().sum((1, 2, 3)) == 0
    assert not h.double().cpu()[unused].any()


@pytest.mark.parametrize(("B", "T", "H", "K", "V", "dtype", "cu"), CASES)
def test_backward_given_the_states_matches_recomputing_them(monkeypatch, B, T, H, K, V, dtype, cu):
    cut = None if cu is None else torch.tensor(cu, dtype=torch.int32, device=DEVICE)
    N = B if cu is None else len(cu) - 1
    q, k, v, g, h0, do, dht = _inputs(B, T, H, K, V, dtype, N)
    h = C.chunk_gla_fwd(q, k, v, g, None, h0, cut, False)[1]
    want = C.chunk_gla_bwd(q, k, v, g, None, h0, cut, do, dht)
    seen = _launches(monkeypatch)
    got = C.chunk_gla_bwd(q, k, v, g, None, h0, cut, do, dht, h)
    assert "_gla_bwd_dh_kernel" in seen and "_gla_bwd_states_kernel" not in seen, seen
    assert "_gla_fwd_h_kernel" not in seen, seen
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dh0"), got, want, strict=True):
        if DEVICE == "cuda" or dtype == torch.bfloat16:
            # The interpreter's bf16 walk keeps float32 states where h is rounded to bf16 (dg
            # reads them outside the products); GPU kernels may schedule differently.
            scale = b.abs().max().item()
            assert (a.double() - b.double()).abs().max().item() <= 2e-3 * scale, name
        else:
            assert torch.equal(a, b), name


def test_forward_walking_segments_returns_the_chunk_states_for_the_backward(monkeypatch):
    # The forward walks segments (three launches: the segments' own end states, the states at
    # their starts, each segment again from its start): h holds the full chunk states, which
    # the backward, walking whole, uses instead of recomputing them.
    B, T, H, K, V = 1, 320, 1, 32, 48
    q, k, v, g, h0, do, dht = _inputs(B, T, H, K, V, torch.float32, B)
    want = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht)
    monkeypatch.setattr(CF, "_SEG_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_SEG_MAX_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_SEG_MIN_CHUNKS", 1)
    monkeypatch.setattr(CF, "_BWD_SEG_MAX_PROGRAMS", 0)
    seen = _launches(monkeypatch)
    h = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False)[1]
    assert seen.count("_gla_fwd_hseg_kernel") == 2, seen
    assert "_gla_fwd_h_kernel" not in seen, seen
    states = _chunk_states(k, v, g, h0, None)
    err = (h.double().cpu() - states).abs().max().item()
    assert err <= 1e-5 * states.abs().max().item(), err
    seen.clear()
    got = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h)
    assert "_gla_bwd_dh_kernel" in seen and "_gla_bwd_states_kernel" not in seen, seen
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dh0"), got, want, strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=2e-5, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("given", [True, False])
def test_backward_walking_segments_uses_or_recomputes_the_states(monkeypatch, given, dtype):
    # The forward walked whole, the backward splits its walks: given the states, it walks only
    # the gradients, in segments; without, it recomputes the states in segments too, each step
    # of both walks in one launch.
    B, T, H, K, V = 1, 320, 1, 32, 48
    q, k, v, g, h0, do, dht = _inputs(B, T, H, K, V, dtype, B)
    h = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False)[1] if given else None
    want = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht)
    monkeypatch.setattr(CF, "_SEG_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_BWD_SEG_MAX_PROGRAMS", 1 << 20)
    monkeypatch.setattr(CF, "_BWD_SEG_MAX_PROGRAMS_RECOMPUTING", 1 << 20)
    monkeypatch.setattr(CF, "_SEG_MIN_CHUNKS", 1)
    seen = _launches(monkeypatch)
    got = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h)
    if given:
        assert seen.count("_gla_bwd_dhseg_kernel") == 2, seen
        assert "_gla_bwd_states_seg_kernel" not in seen, seen
    else:
        assert seen.count("_gla_bwd_states_seg_kernel") == 2, seen
        assert seen.count("_gla_bwd_seg_carry_kernel") == 1, seen
        assert "_gla_bwd_dhseg_kernel" not in seen, seen
    assert "_gla_bwd_dh_kernel" not in seen and "_gla_fwd_hseg_kernel" not in seen, seen
    assert "_gla_fwd_h_kernel" not in seen and "_gla_bwd_states_kernel" not in seen, seen
    tol = 2e-5 if dtype == torch.float32 else 2e-2
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dh0"), got, want, strict=True):
        scale = b.abs().max().item()
        assert (a.double() - b.double()).abs().max().item() <= tol * scale, name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda h: h[:-1], "h must have shape (6, 2, 16, 24)"),
        (lambda h: h[..., :-1], "h must have shape (6, 2, 16, 24)"),
        (lambda h: h.double(), "dtype torch.float32"),
        (lambda h: h.to("meta"), "device"),
        (lambda h: h.tolist(), "h must be a tensor"),
    ],
)
def test_backward_refuses_wrong_states(monkeypatch, change, message):
    B, T, H, K, V = 2, 130, 2, 16, 24
    q, k, v, g, h0, do, dht = _inputs(B, T, H, K, V, torch.float32, B)
    h = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False)[1]
    seen = _launches(monkeypatch)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, change(h))
    assert seen == []


def test_backward_reads_strided_states():
    B, T, H, K, V = 1, 130, 2, 16, 24
    q, k, v, g, h0, do, dht = _inputs(B, T, H, K, V, torch.float32, B)
    h = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False)[1]
    strided = h.transpose(2, 3).contiguous().transpose(2, 3)
    assert not strided.is_contiguous()
    want = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h)
    got = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, strided)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("save_states", [False, True], ids=["recompute", "save_states"])
@pytest.mark.parametrize("fast_path", [True, False], ids=["eager_fast_path", "dispatcher"])
def test_public_backward_reuses_the_forward_states(monkeypatch, fast_path, save_states):
    # Through the public function under autograd: with save_states the forward's h reaches the
    # backward, which then launches the gradient walk alone; by default (the schema's
    # save_states=False) the backward recomputes the states beside it, in one launch.
    import attnops
    from attnops import _runtime

    monkeypatch.setattr(_runtime, "_EAGER_FAST_PATH", _runtime._EAGER_FAST_PATH)
    _runtime.set_eager_fast_path(fast_path)
    B, T, H, K, V = 1, 130, 2, 16, 24
    q, k, v, g, h0, do, _ = _inputs(B, T, H, K, V, torch.float32, B)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g)]
    seen = _launches(monkeypatch)
    flags = {"save_states": True} if save_states else {}
    out = attnops.chunk_gla(*leaves, initial_state=h0, **flags)
    assert "_gla_fwd_h_kernel" in seen, seen
    seen.clear()
    got = torch.autograd.grad(out.output, leaves, do)
    if save_states:
        assert "_gla_bwd_dh_kernel" in seen, seen
        assert "_gla_bwd_states_kernel" not in seen and "_gla_fwd_h_kernel" not in seen, seen
    else:
        assert "_gla_bwd_states_kernel" in seen and "_gla_bwd_dh_kernel" not in seen, seen
    want = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, None)
    for a, b in zip(got, want, strict=False):
        assert torch.equal(a, b)
