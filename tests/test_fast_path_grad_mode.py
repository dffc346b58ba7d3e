"""The eager fast path of an operator without a backward runs its launcher with grad mode off
and restores the caller's mode afterwards, also when the launcher raises (Note [grad mode on
the fast path] in the generated ``_runtime``)."""

from __future__ import annotations

import importlib

import pytest
import torch

import attnops

# CPU tensors reach Triton only under the interpreter, which conftest turns on without a GPU.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _step_inputs():
    B, H, K, V = 1, 2, 4, 8
    q, k = (torch.randn(B, H, K, device=DEVICE, requires_grad=True) for _ in range(2))
    g = torch.nn.functional.logsigmoid(torch.randn(B, H, device=DEVICE)).requires_grad_()
    v = torch.randn(B, H, V, device=DEVICE, requires_grad=True)
    return torch.zeros(B, H, K, V, device=DEVICE), q, k, v, g


CASES = {
    "block_mask_worklist": lambda: attnops.block_mask_worklist(
        torch.ones(1, 1, 2, 2, dtype=torch.bool, device=DEVICE)
    ),
    "recurrent_gla_step": lambda: attnops.recurrent_gla_step(*_step_inputs(), scale=0.5),
}


@pytest.mark.parametrize("op", list(CASES))
@pytest.mark.parametrize("fails", [False, True])
def test_launcher_runs_without_grad_and_the_mode_comes_back(monkeypatch, op, fails):
    call = CASES[op]
    # The generated module resolves its launcher through ``_launcher(ref)``.
    module = importlib.import_module(f"attnops.{op}")
    resolve = module._launcher
    seen = []

    def spy_for(ref):
        launcher = resolve(ref)

        def spy(*args, **kwargs):
            seen.append(torch.is_grad_enabled())
            if fails:
                raise RuntimeError("launcher failed")
            return launcher(*args, **kwargs)

        return spy

    monkeypatch.setattr(module, "_launcher", spy_for)
    for mode in (True, False):
        with torch.set_grad_enabled(mode):
            if fails:
                with pytest.raises(RuntimeError, match="launcher failed"):
                    call()
            else:
                for out in call():
                    assert not out.requires_grad
            assert torch.is_grad_enabled() is mode
    assert seen == [False, False]
