"""Inputs and checks of chunk_gla's launcher tests (tests/test_chunk_gla_split.py,
test_chunk_gla_fused.py, test_chunk_gla_cute.py, test_chunk_gla_cute_bwd.py,
test_chunk_gla_cute_states.py)."""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def hopper_with_cute():
    """None where chunk_gla's CuTeDSL kernels can run here, else why not (a skip reason)."""
    if not torch.cuda.is_available():
        return "needs CUDA: chunk_gla's CuTeDSL kernels run on Hopper GPUs only"
    if torch.cuda.get_device_capability() != (9, 0):
        return "needs a Hopper GPU (compute capability 9.0)"
    if importlib.util.find_spec("cutlass") is None:
        return "needs nvidia-cutlass-dsl (the cute extra)"
    return None


class FakeCuda:
    """What a launch plan reads of a CUDA tensor (shape, dtype, strides, numel, a 16-byte
    aligned address, the device) without a GPU: contract tests run on any machine."""

    def __init__(self, *shape, dtype=torch.bfloat16):
        self.t = torch.empty(shape, dtype=dtype, device="meta")
        self.shape, self.dtype, self.is_cuda = self.t.shape, dtype, True
        self.device = torch.device("cuda", 0)

    def __getattr__(self, name):
        return getattr(self.t, name)

    def data_ptr(self):
        return 1 << 20


def rel_err(a, b):
    """The largest difference of a from b, relative to b's largest magnitude."""
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()


def chunk_gla_inputs(B, T, H, K, V, dtype, h0, strided=False):
    """(q, k, v, g, initial state or None), seeded by the sizes; g = 0.3 logsigmoid(randn).
    ``strided``: q and v head-major, k padded, g head-major, seen as [B, T, H, ...] views."""
    gen = torch.Generator().manual_seed(B * 1000 + T + K)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(DEVICE)

    q, k, v = rnd(B, T, H, K).to(dtype), rnd(B, T, H, K).to(dtype), rnd(B, T, H, V).to(dtype)
    g = F.logsigmoid(rnd(B, T, H)) * 0.3
    if strided:  # head-major storage seen through [B, T, H, D] views, and a padded k
        q, v = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, v))
        k = torch.cat([k, torch.zeros_like(k)], dim=-1)[..., :K]
        g = g.transpose(1, 2).contiguous().transpose(1, 2)
    init = rnd(B, H, K, V) if h0 else None
    return q, k, v, g, init


def gradient_inputs(B, T, H, K, dtype, gen, strided=False, decay="logsigmoid", states=True):
    """(q, k, v, g, h0, do, dht) on the GPU from the CPU generator ``gen``, K = V: strided takes
    every other head of a wider tensor; decay "resets" (-inf every 37th token), "deep" (-1e4 at
    every third), "none" (zeros) or logsigmoid(randn); h0 and dht None without ``states``."""

    def rand(*shape):
        if strided:
            wide = (*shape[:2], 2 * shape[2], shape[3])
            return torch.randn(wide, generator=gen).to(dtype).cuda()[:, :, ::2]
        return torch.randn(shape, generator=gen).to(dtype).cuda()

    q, k, v, do = (rand(B, T, H, K) for _ in range(4))
    g = F.logsigmoid(torch.randn(B, T, H, generator=gen))
    if decay == "resets":
        g[:, ::37] = -torch.inf
    elif decay == "deep":
        g[:, 1::3] = -1e4
    elif decay == "none":
        g.zero_()
    h0 = torch.randn(B, H, K, K, generator=gen).cuda() if states else None
    dht = torch.randn(B, H, K, K, generator=gen).cuda() if states else None
    return q, k, v, g.cuda(), h0, do, dht


def assert_matches_reference(q, k, v, g, init, o, ht):
    """``o`` and ``ht`` of a forward with final state against the token-by-token reference in
    float32 (bf16 and fp16 inputs at their rounding's tolerance)."""
    from attnops_kernels.chunk_gla import reference

    want_o, want_ht = reference.chunk_gla_ref(
        q.float(), k.float(), v.float(), g, None, init, True, None
    )
    exact = q.dtype == torch.float32
    tol = dict(atol=1e-4, rtol=1e-4) if exact else dict(atol=6e-2, rtol=6e-2)
    torch.testing.assert_close(ht, want_ht, **tol)
    torch.testing.assert_close(o.float(), want_o, **tol)
