"""chunk_gla's gradients' pass in CuTeDSL (kernels/chunk_gla/cute_bwd.py, chosen first on
Hopper after the backward's state walks): where its contract holds (``config._cute_bwd_plan``),
and on a Hopper GPU with CuTeDSL installed, the same dq, dk, dv, dg and dh0 as the Triton passes
(within bf16 rounding), the same bits on every run, with many items per CTA, on odd lengths,
sequences shorter than a chunk, K = V of 128 and 64, float16 and bfloat16, strided inputs,
initial and final states, saved and recomputed chunk states, resets and deep decays; and
through the public operator under autograd, against autograd of the float32 reference.

The contract itself (what goes to Triton instead) is checked on any machine."""

from __future__ import annotations

import pytest
import torch
from chunk_gla_inputs import gradient_inputs, hopper_with_cute, rel_err
from marks import first_by_default

from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import triton as C
from attnops_kernels.chunk_gla.reference import chunk_gla_ref

_SKIP = hopper_with_cute()


class _Cuda:
    # Shape, dtype, strides and a 16-byte aligned address: what the plan reads.
    def __init__(self, *shape, dtype=torch.bfloat16, t=None):
        self.t = torch.empty(shape, dtype=dtype, device="meta") if t is None else t
        self.shape, self.dtype, self.is_cuda = self.t.shape, self.t.dtype, True
        self.device = torch.device("cuda", 0)

    def __getattr__(self, name):
        return getattr(self.t, name)

    def data_ptr(self):
        return 1 << 20


def test_the_gradients_contract_sends_the_rest_to_triton(monkeypatch):
    # Each limit alone, past the availability check (faked: this runs on any machine).
    monkeypatch.setattr(CF, "_CUTE_BWD", True)
    monkeypatch.setattr(CF, "_cute_available", lambda index: True)

    def plan(B, T, H, K, V=None, cu=False, dtype=torch.bfloat16, **other):
        x = _Cuda(B, T, H, K, dtype=dtype)
        v = _Cuda(B, T, H, K if V is None else V, dtype=dtype)
        args = dict(q=x, k=x, v=v, do=v) | other
        return CF._cute_bwd_plan(args["q"], args["k"], args["v"], args["do"], cu)

    assert plan(2, 256, 4, 128) and plan(4, 4096, 16, 128) and plan(1, 1, 1, 128)
    assert plan(2, 100, 3, 64)
    monkeypatch.setattr(CF, "_CUTE_BWD_KS", (128,))
    assert not plan(2, 100, 3, 64)  # K not in _CUTE_BWD_KS
    monkeypatch.setattr(CF, "_CUTE_BWD_KS", (64, 128))
    assert not plan(2, 256, 4, 128, cu=True)  # packed sequences
    assert not plan(2, 256, 4, 128, 64) and not plan(2, 256, 4, 64, 128)  # K != V
    assert not plan(2, 256, 4, 96) and not plan(2, 256, 4, 256)  # K neither 64 nor 128
    assert not plan(2, 256, 4, 128, dtype=torch.float32)
    assert not plan(0, 256, 4, 128) and not plan(2, 0, 4, 128) and not plan(2, 256, 0, 128)
    assert not plan(2, 256, 4, 128, k=_Cuda(2, 256, 4, 128, dtype=torch.float16))
    assert not plan(2, 256, 4, 128, do=_Cuda(2, 256, 4, 128, dtype=torch.float16))
    assert not plan(2, 256, 4, 128, do=_Cuda(2, 255, 4, 128))  # do not v's shape
    assert plan(1, 256, 65536, 64) and plan(65536, 64, 1, 64)  # one CTA per multiprocessor
    assert not plan(1, 2**25, 64, 64) and not plan(1, 2**24, 8, 128)  # 32-bit indices
    # do as autograd may hand it: expanded (stride 0), or transposed.
    expanded = _Cuda(
        t=torch.empty((1,), dtype=torch.bfloat16, device="meta").expand(2, 256, 4, 128)
    )
    assert not plan(2, 256, 4, 128, do=expanded)
    monkeypatch.setattr(CF, "_CUTE_BWD", False)
    assert not plan(2, 256, 4, 128)
    monkeypatch.setattr(CF, "_CUTE_BWD", True)
    x = torch.randn(2, 256, 4, 128, dtype=torch.bfloat16)
    assert not CF._cute_bwd_plan(x, x, x, x, False)  # not CUDA


_inputs = gradient_inputs


def _backward(monkeypatch, cute_on, args, save):
    q, k, v, g, h0, do, dht = args
    h = None
    if save:
        monkeypatch.setattr(CF, "_CUTE_WALK", False)
        h = C.chunk_gla_fwd(q, k, v, g, None, h0, None, False, save_states=True)[1]
    monkeypatch.setattr(CF, "_CUTE_BWD", cute_on)
    return C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h, save_states=save)


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    ("B", "T", "H", "K", "dtype", "strided", "decay", "states"),
    first_by_default(
        [
            # Many more (chunk, head) items than multiprocessors: each CTA takes several in
            # turn, through both token stages, with a partial chunk at every sequence's end.
            (2, 4000, 8, 128, torch.bfloat16, False, "logsigmoid", True),
            (2, 4000, 8, 64, torch.float16, True, "logsigmoid", False),
            (2, 1000, 3, 128, torch.bfloat16, False, "logsigmoid", True),
            (2, 300, 2, 64, torch.bfloat16, False, "logsigmoid", True),
            (2, 777, 2, 128, torch.float16, True, "logsigmoid", False),
            (1, 129, 2, 64, torch.float16, True, "resets", True),
            (3, 1, 2, 128, torch.bfloat16, False, "logsigmoid", True),
            (3, 5, 2, 64, torch.bfloat16, False, "deep", True),
            (1, 4096, 2, 128, torch.bfloat16, False, "deep", False),
            (2, 256, 1, 128, torch.bfloat16, False, "none", True),
        ]
    ),
)
def test_cute_gradients_match_the_triton_passes(
    monkeypatch, B, T, H, K, dtype, strided, decay, states
):
    from attnops_kernels.chunk_gla import cute_bwd

    calls = []
    grads = cute_bwd.grads

    def poisoned(*a):
        # dq, dk, dv and dg come new from the allocator: NaN first, so that any element the
        # pass leaves unwritten fails the checks below.
        calls.append(1)
        for out in a[7:11]:
            out.fill_(torch.nan)
        grads(*a)

    monkeypatch.setattr(cute_bwd, "grads", poisoned)
    gen = torch.Generator().manual_seed(T + K)
    args = _inputs(B, T, H, K, dtype, gen, strided, decay, states)
    q, k, v, _, _, do, _ = args
    monkeypatch.setattr(CF, "_CUTE_BWD", True)
    assert CF._cute_bwd_plan(q, k, v, do, False), "the pass's contract should hold here"
    for save in (False, True):
        ours = _backward(monkeypatch, True, args, save)
        again = _backward(monkeypatch, True, args, save)
        assert len(calls) == 2 * (1 + save)
        theirs = _backward(monkeypatch, False, args, save)
        for name, a, b, c in zip(("dq", "dk", "dv", "dg", "dh0"), ours, again, theirs, strict=True):
            assert torch.isfinite(a).all(), name
            assert torch.equal(a, b), f"{name} differs between two runs"
            assert rel_err(a, c) < 1e-2, (name, save, rel_err(a, c))


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize("walk", [False, True], ids=["dh-walked-apart", "dh-walked-in-the-pass"])
def test_the_public_operator_takes_cute_gradients_as_reference_autograd_does(monkeypatch, walk):
    # The operator under autograd, its gradients from the CuTeDSL pass (reading dh, or walking
    # it itself), against autograd of the float32 token-by-token reference.
    import attnops
    from attnops_kernels.chunk_gla import cute_bwd

    calls = []
    grads = cute_bwd.grads
    monkeypatch.setattr(cute_bwd, "grads", lambda *a: calls.append(a[6] is None) or grads(*a))
    monkeypatch.setattr(CF, "_CUTE_BWD", True)
    monkeypatch.setattr(CF, "_CUTE_BWD_WALK_FILL", 0 if walk else 2)
    gen = torch.Generator().manual_seed(3)
    q, k, v, g, h0, do, dht = _inputs(1, 150, 2, 64, torch.bfloat16, gen)
    xs = [x.detach().requires_grad_() for x in (q, k, v, g, h0)]
    out = attnops.chunk_gla(*xs[:4], initial_state=xs[4], output_final_state=True)
    ours = torch.autograd.grad((out.output, out.final_state), xs, (do, dht))
    assert calls == [walk], "the CuTeDSL gradients' pass should have run"
    ref = [x.detach().double().requires_grad_() for x in (q, k, v, g, h0)]
    o, ht = chunk_gla_ref(*ref[:4], initial_state=ref[4], output_final_state=True)
    theirs = torch.autograd.grad((o, ht), ref, (do.double(), dht.double()))
    for name, a, b in zip(("q", "k", "v", "g", "initial_state"), ours, theirs, strict=True):
        assert rel_err(a, b) < 2e-2, (name, rel_err(a, b))


def test_the_pass_walks_dh_itself_at_k64_where_its_ctas_nearly_fill_whole_waves(monkeypatch):
    # config._cute_bwd_walks, on any machine: K = V = 64, and the (sequence, head) pairs fill
    # at least 80% of whole waves of two CTAs per multiprocessor; the switch turns it off.
    monkeypatch.setattr(CF, "_sm_count", lambda device: 132)
    monkeypatch.setattr(CF, "_CUTE_BWD_WALK_PER_SM", 2)
    monkeypatch.setattr(CF, "_CUTE_BWD_WALK_FILL", 0.8)
    cuda = torch.device("cuda", 0)
    walks = [bh for bh in range(1, 800) if CF._cute_bwd_walks(cuda, 1, bh, 64)]
    # 80% of n waves of 264 CTAs up to n waves: 211.2 to 264, 422.4 to 528, 633.6 to 792.
    expected = [*range(212, 265), *range(423, 529), *range(634, 793)]
    assert walks == expected
    assert CF._cute_bwd_walks(cuda, 8, 32, 64) and not CF._cute_bwd_walks(cuda, 4, 16, 64)
    assert not CF._cute_bwd_walks(cuda, 8, 32, 128)  # one warpgroup: K = V = 64 only
    assert not CF._cute_bwd_walks(cuda, 0, 32, 64)
    monkeypatch.setattr(CF, "_CUTE_BWD_WALK", False)
    assert not CF._cute_bwd_walks(cuda, 8, 32, 64)


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize(
    ("B", "T", "H", "dtype", "strided", "decay", "states"),
    first_by_default(
        [
            # Many chunks per CTA through both token stages, a partial last chunk.
            (2, 4000, 3, torch.bfloat16, False, "logsigmoid", True),
            (2, 300, 2, torch.float16, True, "logsigmoid", False),
            (1, 129, 2, torch.float16, True, "resets", True),
            (3, 5, 2, torch.bfloat16, False, "deep", True),
            (1, 1, 1, torch.bfloat16, False, "logsigmoid", True),
            # No decay over 256 chunks: dh0 sums every chunk's term, so a carry rounded to
            # 16 bits at each chunk would drift from the float32 walk's.
            (1, 16384, 2, torch.bfloat16, False, "none", True),
            (1, 16384, 2, torch.float16, False, "none", False),
        ]
    ),
)
def test_the_pass_walking_dh_matches_the_triton_passes(
    monkeypatch, B, T, H, dtype, strided, decay, states
):
    from attnops_kernels.chunk_gla import cute_bwd

    walked = []
    grads = cute_bwd.grads

    def poisoned(*a, **kw):
        # Every output new from the allocator: NaN first (dh0 too, which the walk writes).
        walked.append(a[6] is None)
        for out in (*a[7:11], a[13]):
            out.fill_(torch.nan)
        grads(*a, **kw)

    monkeypatch.setattr(cute_bwd, "grads", poisoned)
    monkeypatch.setattr(CF, "_CUTE_BWD_WALK_FILL", 0)  # walk whatever B * H
    gen = torch.Generator().manual_seed(T + B)
    args = _inputs(B, T, H, 64, dtype, gen, strided, decay, states)
    for save in (False, True):
        ours = _backward(monkeypatch, True, args, save)
        again = _backward(monkeypatch, True, args, save)
        assert walked == [True, True], "the pass should have walked dh"
        walked.clear()
        theirs = _backward(monkeypatch, False, args, save)
        for name, a, b, c in zip(("dq", "dk", "dv", "dg", "dh0"), ours, again, theirs, strict=True):
            assert torch.isfinite(a).all(), name
            assert torch.equal(a, b), f"{name} differs between two runs"
            assert rel_err(a, c) < 1e-2, (name, save, rel_err(a, c))
