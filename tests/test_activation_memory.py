"""What ``chunk_gla`` keeps alive for its backward (ops.yaml, ``save_states``).

By default (the schema's ``save_states=False``) autograd keeps the inputs and an empty ``h``:
no ``[NS, H, K, V]`` chunk state, the backward recomputes them. With ``save_states=True`` it
also keeps the chunk states. ``torch.autograd.graph.saved_tensors_hooks`` records every tensor
saved for the backward, on the eager fast path and through the dispatcher. The gradients of both
choices agree: bitwise in float32; in bfloat16 within the spec's bfloat16 gradient tolerance
(under the Triton interpreter bfloat16 states are walked in float32, and the saved ``h`` is
rounded to bfloat16 where the recomputed one is not, which moves ``dg`` in its last bits).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import triton as C

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _leaves(B, T, H, K, V, dtype, N, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(DEVICE)

    q, k, v = (rnd(B, T, H, K).to(dtype), rnd(B, T, H, K).to(dtype), rnd(B, T, H, V).to(dtype))
    g = F.logsigmoid(rnd(B, T, H))
    h0 = rnd(N, H, K, V)
    return [x.requires_grad_() for x in (q, k, v, g, h0)]


def _run(save_states, dtype=torch.float32, cu=None, B=2, T=130, H=2, K=16, V=32):
    """(shapes and dtypes of the tensors saved for the backward, the gradients of q, k, v, g and
    the initial state) of one call of the public function with ``save_states`` (None: the
    schema's default)."""
    import attnops

    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int32, device=DEVICE)
    leaves = _leaves(B, T, H, K, V, dtype, B if cu is None else len(cu) - 1)
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), t.dtype))
        return t

    flags = {} if save_states is None else {"save_states": save_states}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = attnops.chunk_gla(
            *leaves[:4], initial_state=leaves[4], output_final_state=True, cu_seqlens=cu_t, **flags
        )
    (out.output.float().sum() + (out.final_state * 0.5).sum()).backward()
    return saved, [x.grad for x in leaves]


def _states(saved, B, T, H, K, V, dtype, cu=None):
    """The saved tensors that are chunk states: [NS, H, K, V] in q's dtype, NS > 0 slots."""
    N = B if cu is None else len(cu) - 1
    NS = CF._state_slots(B, T, N, cu is not None)
    return [s for s in saved if s == ((NS, H, K, V), dtype)]


@pytest.fixture(params=[True, False], ids=["eager_fast_path", "dispatcher"])
def fast_path(request, monkeypatch):
    from attnops import _runtime

    monkeypatch.setattr(_runtime, "_EAGER_FAST_PATH", _runtime._EAGER_FAST_PATH)
    _runtime.set_eager_fast_path(request.param)
    return request.param


@pytest.mark.parametrize("cu", [None, [0, 40, 130]], ids=["dense", "packed"])
def test_default_keeps_no_chunk_state_and_save_states_keeps_them(fast_path, cu):
    B = 2 if cu is None else 1
    dims = dict(B=B, T=130, H=2, K=16, V=32)
    default, grads_default = _run(None, cu=cu, **dims)
    recompute, grads_recompute = _run(False, cu=cu, **dims)
    kept, grads_kept = _run(True, cu=cu, **dims)
    assert _states(default, **dims, dtype=torch.float32, cu=cu) == [], default
    assert _states(recompute, **dims, dtype=torch.float32, cu=cu) == [], recompute
    assert len(_states(kept, **dims, dtype=torch.float32, cu=cu)) == 1, kept
    # What autograd keeps beyond the chunk states is the same: the inputs, and h empty or full.
    assert sorted(kept, key=str) == sorted(
        [s for s in recompute if s[0][0] != 0] + _states(kept, **dims, dtype=torch.float32, cu=cu),
        key=str,
    )
    for a, b, c in zip(grads_default, grads_recompute, grads_kept, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_bfloat16_gradients_agree_within_the_spec_tolerance():
    dims = dict(B=1, T=100, H=1, K=16, V=16)
    saved, recomputed = _run(False, torch.bfloat16, **dims)
    kept, stored = _run(True, torch.bfloat16, **dims)
    assert _states(saved, **dims, dtype=torch.bfloat16) == []
    assert len(_states(kept, **dims, dtype=torch.bfloat16)) == 1
    for a, b in zip(recomputed, stored, strict=True):
        # ops.yaml, chunk_gla's grad_tolerance for bfloat16.
        torch.testing.assert_close(a, b, atol=1.5e-1, rtol=2e-2)


def test_the_launchers_keep_states_only_when_told():
    q, k, v, g, h0 = (x.detach() for x in _leaves(1, 70, 1, 16, 16, torch.float32, 1))
    o, h, _ = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False, save_states=False)
    o_kept, h_kept, _ = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False, save_states=True)
    assert tuple(h.shape) == (0, 1, 16, 16) and tuple(h_kept.shape) == (2, 1, 16, 16)
    assert torch.equal(o, o_kept)
    do = torch.randn_like(o)
    want = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, None, h_kept, save_states=True)
    got = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, None, h, save_states=False)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="h must be None or hold no state when save_states"):
        C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, None, h_kept, save_states=False)
