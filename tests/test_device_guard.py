"""Registered CUDA implementations launch on their inputs' device (Note [device guard] in the
generated ``_runtime``): where the inputs are on another device than the current one, they
call themselves again inside ``torch.cuda.device`` of theirs.

Without two GPUs, these tests stand a tensor subclass in for a CUDA tensor on device 1 and
replace the current-device query and ``torch.cuda.device``; the generated code is the shipped
package's.
"""

from __future__ import annotations

import contextlib
import sys

import pytest
import torch

import attnops  # noqa: F401 - registers the operators, loads the modules
from attnops import _runtime as R


class _OnDevice(torch.Tensor):
    index = 1
    is_cuda = True

    def get_device(self):
        return self.index


def _on(index: int, *shape) -> torch.Tensor:
    t = torch.Tensor._make_subclass(_OnDevice, torch.ones(*shape))
    t.index = index
    return t


@pytest.fixture
def devices(monkeypatch):
    """The current device (0 to start with) and each switch ``torch.cuda.device`` made."""
    state = {"current": 0, "entered": []}

    @contextlib.contextmanager
    def device(index):
        state["entered"].append(index)
        previous, state["current"] = state["current"], index
        try:
            yield
        finally:
            state["current"] = previous

    def current():
        return state["current"]

    # The runtime's, and each module's own binding of it.
    monkeypatch.setattr(R, "cuda_device", current)
    for name in ("l2norm", "gate", "block_mask_worklist", "chunk_gla", "recurrent_gla_step"):
        monkeypatch.setattr(sys.modules[f"attnops.{name}"], "_cuda_device", current)
    monkeypatch.setattr(torch.cuda, "device", device)
    return state


def _stub_launchers(monkeypatch, module, state, result):
    seen = []

    def launcher(ref):
        def launch(*args, **kwargs):
            seen.append(state["current"])
            return result

        return launch

    monkeypatch.setattr(module, "_launcher", launcher)
    return seen


def test_a_launch_runs_on_its_inputs_device_and_the_callers_comes_back(monkeypatch, devices):
    module = sys.modules["attnops.l2norm"]
    seen = _stub_launchers(monkeypatch, module, devices, (None, None))
    module._l2norm_fwd_cuda(_on(1, 2, 4), 1e-6)
    assert seen == [1] and devices["entered"] == [1] and devices["current"] == 0
    # Inputs on the current device: no switch.
    module._l2norm_fwd_cuda(_on(0, 2, 4), 1e-6)
    assert seen == [1, 0] and devices["entered"] == [1]


def test_every_stage_of_a_triton_op_is_guarded(monkeypatch, devices):
    module = sys.modules["attnops.gate"]
    seen = _stub_launchers(monkeypatch, module, devices, None)
    g = _on(2, 1, 2, 4)
    module._gate_fwd_impl(g, torch.ones(2), torch.ones(8))
    module._gate_bwd_impl(g, torch.ones(2), torch.ones(8), g, "softplus", -5.0)
    assert seen == [2, 2] and devices["entered"] == [2, 2] and devices["current"] == 0


def test_a_cpu_call_never_asks_for_the_current_device(monkeypatch, devices):
    # The work list registers one implementation for CUDA and CPU: a CPU tensor is on no CUDA
    # device, and a CPU-only build has none to ask about.
    module = sys.modules["attnops.block_mask_worklist"]
    seen = _stub_launchers(monkeypatch, module, devices, "coords")

    def no_query():
        raise AssertionError("asked for the current CUDA device for a CPU call")

    monkeypatch.setattr(module, "_cuda_device", no_query)
    assert (
        module._block_mask_worklist_fwd_impl(torch.ones(1, 1, 2, 2, dtype=torch.bool)) == "coords"
    )
    assert seen == [0] and devices["entered"] == []


def test_other_device_reads_the_first_tensor_present(devices):
    one, zero, cpu = _on(1, 1), _on(0, 1), torch.ones(1)
    assert R.other_device(one) == 1 and R.other_device(None, one) == 1
    assert R.other_device([], [None, one], zero) == 1
    assert R.other_device(zero, one) is None and R.other_device(cpu, one) is None
    assert R.other_device() is None and R.other_device(None, [None]) is None
    devices["current"] = 1
    assert R.other_device(one) is None and R.other_device(zero) == 0
