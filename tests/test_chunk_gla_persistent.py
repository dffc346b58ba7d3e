"""chunk_gla's backward passes on a persistent grid (kernels/chunk_gla/config.py, Note [persistent
passes]) give what one program per item gives: bit for bit on the CPU, to rounding on a GPU.

A persistent grid has a few programs per SM that take the items (chunk, head and K or V block)
in turn. Here the dq/dk/dg and dv passes' configs are replaced by persistent and by
one-program-per-item versions of the same blocks, on the interpreter's three "SMs" (so every
program takes several items, and the last round leaves some idle): dv in the dq/dk/dg pass,
dv in its own pass with one or several K blocks, odd K and V, with an initial state and a final
state gradient, and packed sequences (which stay on one program per item). The gradients are
also checked against float64 autograd through the token-by-token reference.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from marks import SLOW, first_by_default, slow

from attnops_kernels.chunk_gla import config as CF
from attnops_kernels.chunk_gla import reference
from attnops_kernels.chunk_gla import triton as C

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
_BWD_CONFIG = CF._bwd_config


def _inputs(B, T, H, K, V, dtype, states, N):
    gen = torch.Generator().manual_seed(T * 10 + K + V)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(DEVICE)

    q, k, v = rnd(B, T, H, K).to(dtype), rnd(B, T, H, K).to(dtype), rnd(B, T, H, V).to(dtype)
    g = F.logsigmoid(rnd(B, T, H)) * 0.3
    do = rnd(B, T, H, V).to(dtype)
    h0 = rnd(N, H, K, V) if states else None
    dht = rnd(N, H, K, V) if states else None
    return q, k, v, g, h0, do, dht


def _with_configs(monkeypatch, qcfg, dv_cfg):
    def patched(K, V, dtype):
        BT, state, _, _, fb = _BWD_CONFIG(K, V, dtype)
        return BT, state, qcfg, dv_cfg, fb

    monkeypatch.setattr(CF, "_bwd_config", patched)


def _grids(monkeypatch):
    seen = []
    grid = CF._items_grid

    def spy(items_per_head, H, device, per_sm):
        out = grid(items_per_head, H, device, per_sm)
        seen.append(len(out))
        return out

    monkeypatch.setattr(CF, "_items_grid", spy)
    return seen


# (K, V, dtype, dq/dk/dg pass config, dv pass config or None: dv in the dq/dk/dg pass), each
# (BK, BV, warps, stages, programs per SM) for the persistent run.
CASES = [
    (64, 64, torch.bfloat16, (64, 64, 4, 2, 2), None),
    (40, 24, torch.float16, (64, 64, 4, 2, 1), None),
    (128, 96, torch.bfloat16, (64, 64, 4, 3, 2), (128, 64, 4, 2, 1)),
    (128, 128, torch.bfloat16, (64, 128, 4, 2, 1), (64, 64, 4, 2, 2)),
    (80, 48, torch.float32, (64, 32, 4, 1, 2), (64, 32, 4, 1, 1)),
]


@pytest.mark.parametrize(("K", "V", "dtype", "qcfg", "dv_cfg"), first_by_default(CASES))
@pytest.mark.parametrize("packed", [False, True])
def test_persistent_grid_matches_one_program_per_item(
    monkeypatch, K, V, dtype, qcfg, dv_cfg, packed
):
    if packed:
        B, T, cu, N = 1, 230, torch.tensor([0, 70, 70, 230], device=DEVICE), 3
    else:
        B, T, cu, N = 2, 200, None, 2
    q, k, v, g, h0, do, dht = _inputs(B, T, 2, K, V, dtype, True, N)
    args = (q, k, v, g, None, h0, cu, do, dht)
    grids = _grids(monkeypatch)
    one = tuple(c[:4] + (0,) for c in (qcfg, dv_cfg) if c is not None)
    _with_configs(monkeypatch, *(one if dv_cfg is not None else (one[0], None)))
    want = C.chunk_gla_bwd(*args)
    assert set(grids) == {2}
    grids.clear()
    _with_configs(monkeypatch, qcfg, dv_cfg)
    got = C.chunk_gla_bwd(*args)
    # Packed sequences keep one program per item.
    assert set(grids) == ({2} if packed else {1})
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dh0"), got, want, strict=True):
        _same(name, a, b)


def _same(name, a, b):
    # The interpreter runs the same operations either way, so the results agree bit for bit on
    # the CPU. Compiled for a GPU, the two grids are two programs whose float32 arithmetic the
    # compiler may order or contract differently: there they may differ by rounding, two units in
    # the last place of a 16-bit result (1e-5 for a float32 one, summed over a chunk) relative to
    # its largest entry.
    if a.device.type == "cpu":
        assert torch.equal(a, b), name
        return
    rel = max(2 * torch.finfo(a.dtype).eps, 1e-5)
    tol = rel * max(b.abs().max().item(), 1e-30)
    err = (a.double() - b.double()).abs().max().item()
    assert err <= tol, f"{name}: differs by {err:.3g}, tolerance {tol:.3g}"


def _match_float64_autograd(got, inputs, tol):
    # got (dq, dk, dv, dg, dh0) against float64 autograd through the token-by-token reference,
    # each relative to the largest entry of its reference gradient.
    q, k, v, g, h0, do, dht = inputs
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v, g, h0)]
    o, ht = reference.chunk_gla_ref(*leaves[:4], None, leaves[4], True, None)
    want = torch.autograd.grad((o, ht), leaves, (do.double(), dht.double()))
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dh0"), got, want, strict=True):
        err = (a.double() - b).abs().max().item() / max(b.abs().max().item(), 1e-30)
        assert err < tol, (name, err)


@SLOW
def test_persistent_gradients_match_float64_autograd(monkeypatch):
    B, T, H, K, V = 2, 150, 2, 128, 96
    q, k, v, g, h0, do, dht = _inputs(B, T, H, K, V, torch.float32, True, B)
    _with_configs(monkeypatch, (64, 32, 4, 1, 2), (128, 32, 4, 1, 1))
    grids = _grids(monkeypatch)
    got = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht)
    assert grids == [1, 1]
    _match_float64_autograd(got, (q, k, v, g, h0, do, dht), 1e-4)


@pytest.mark.parametrize(("K", "V"), [slow(128, 128), (100, 72)])
def test_shipped_16bit_configs_match_float64_autograd(K, V):
    # The shipped configs for 16-bit inputs with K over 64: the dv pass over all of K at once.
    _, _, qcfg, dv_cfg, _ = CF._bwd_config(K, V, torch.bfloat16)
    assert dv_cfg is not None and dv_cfg[0] >= K
    B, T, H = 2, 130, 1
    q, k, v, g, h0, do, dht = _inputs(B, T, H, K, V, torch.bfloat16, True, B)
    got = C.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht)
    _match_float64_autograd(got, (q, k, v, g, h0, do, dht), 2e-2)
