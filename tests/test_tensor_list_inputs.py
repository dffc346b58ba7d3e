"""Tensor[] and Tensor?[] inputs end to end: generate, import, call, element checks, opcheck,
gradient of the other inputs, torch.compile."""

from __future__ import annotations

from pathlib import Path

from specs import generate_project, run_generated

LAUNCHERS = """
import torch


def mix_fwd(x, xs, ys, alpha):
    return (x * alpha + sum(xs, torch.zeros_like(x))).contiguous()


def mix_bwd(grad_y, x, xs, alpha):
    return (grad_y * alpha).contiguous()


def mix_ref(x, xs, ys, alpha=1.0):
    return x * alpha + sum(xs, torch.zeros_like(x))
"""

SPEC = """\
version: 1
namespace: listdemo
package: listdemo
ops:
  mix:
    doc: Add a list of tensors to x.
    forward:
      schema: '(Tensor x, Tensor[] xs, Tensor?[] ys, float alpha=1.0) -> Tensor y'
      launchers: {cpu: listl:mix_fwd}
    backward:
      schema: '(Tensor grad_y, Tensor x, Tensor[] xs, float alpha) -> Tensor grad_x'
      launchers: {cpu: listl:mix_bwd}
    inputs:
      x: {shape: [..., D], dtypes: [float32]}
      xs: {shape: [..., D], dtypes: [float32], differentiable: false, list: true}
      ys: {shape: [E], dtypes: [float32], differentiable: false, list: true}
    outputs:
      y: {shape: [..., D], dtype: x}
    reference: listl:mix_ref
    tests:
      samples: [{batch: [2], D: 3, E: 4}]
      tolerance: {float32: [1.0e-6, 1.0e-6]}
"""

SCRIPT = """
import pytest, torch
import listdemo

x = torch.randn(2, 3, requires_grad=True)
xs = [torch.randn(2, 3), torch.randn(2, 3)]
ys = [torch.randn(4), None]
y = listdemo.mix(x, xs, ys, alpha=2.0).y
torch.testing.assert_close(y, x * 2 + xs[0] + xs[1])
y.sum().backward()
torch.testing.assert_close(x.grad, torch.full((2, 3), 2.0))
bad = {
    "mix: xs[1] must have shape [..., D] = (2, 3), got (2, 4)": [xs[0], torch.randn(2, 4)],
    "mix: xs[0] must have shape [..., D] (1 or more dims), got ()": [torch.tensor(1.0)],
    "mix: xs[0] must have dtype float32, got float64": [torch.randn(2, 3, dtype=torch.float64)],
    "mix: xs must be a list of Tensors, got Tensor": torch.randn(2, 3),
    "mix: xs[0] must be a Tensor, got int": [1],
}
for message, value in bad.items():
    with pytest.raises((TypeError, ValueError)) as info:
        listdemo.mix(x, value, ys)
    assert str(info.value) == message, (str(info.value), message)
with pytest.raises(ValueError, match=r"mix: ys\\[0\\] must have shape \\[E\\] \\(1 dim\\)"):
    listdemo.mix(x, xs, [torch.randn(4, 1)])
torch.library.opcheck(torch.ops.listdemo.mix_fwd.default, (x.detach(), xs, ys, 2.0))
compiled = torch.compile(listdemo.mix, fullgraph=True, backend="eager")
torch.testing.assert_close(compiled(x, xs, ys).y, listdemo.mix(x, xs, ys).y)
print("ok")
"""


def test_tensor_list_inputs_end_to_end(tmp_path: Path):
    assert generate_project(tmp_path, "listl", LAUNCHERS, SPEC, "-q") == 0
    source = (tmp_path / "out" / "listdemo" / "mix.py").read_text()
    assert "for _i, _e in enumerate(xs):" in source
    result = run_generated(tmp_path, "-c", SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")
    # The generated test module of the operator passes too (lists built, checked, opchecked).
    tests = run_generated(
        tmp_path,
        "-m",
        "pytest",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "tests",
        cwd=tmp_path / "out",
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout
    # Every element of a list input strided (a list has no dense permuted layout).
    for name in ("xs", "ys"):
        case = f"test_forward_matches_reference[fp32-batch2-D3-E4-strided-{name}-default]"
        assert f"PASSED tests/test_mix.py::{case}" in tests.stdout


def test_a_list_input_must_be_declared_as_a_list(tmp_path: Path, capsys):
    spec = SPEC.replace(", differentiable: false, list: true}", "}", 1)
    assert generate_project(tmp_path, "listl", LAUNCHERS, spec) == 2
    err = capsys.readouterr().err
    assert "input 'xs' is a Tensor[] argument; add 'list: true'" in err


MUTATING = """
def add_all(xs, y):
    for x in xs:
        x.add_(y)
    return y * 2


def add_all_ref(xs, y):
    for x in xs:
        x.add_(y)
    return y * 2
"""

MUTATING_SPEC = """\
version: 1
namespace: mutlist
package: mutlist
ops:
  add_all:
    doc: Add y to every tensor of xs, in place.
    forward:
      schema: "(Tensor(a!)[] xs, Tensor y) -> Tensor z"
      launchers: {cpu: mutl:add_all}
    inputs:
      xs: {shape: [D], dtypes: [float32], list: true, mutated: true, differentiable: false}
      y: {shape: [D], dtypes: [float32], differentiable: false}
    outputs:
      z: {shape: [D], dtype: float32}
    reference: mutl:add_all_ref
    tests:
      samples: [{D: 4}]
      tolerance: {float32: [0, 0]}
"""


def test_a_mutated_tensor_list_keeps_its_alias_and_passes_its_generated_tests(tmp_path: Path):
    assert generate_project(tmp_path, "mutl", MUTATING, MUTATING_SPEC, "-q") == 0
    source = (tmp_path / "out" / "mutlist" / "add_all.py").read_text()
    assert '"(Tensor(a!)[] xs, Tensor y) -> Tensor z"' in source
    tests = run_generated(
        tmp_path,
        "-m",
        "pytest",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "tests",
        cwd=tmp_path / "out",
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert "FAILED" not in tests.stdout and "ERROR" not in tests.stdout
    # Each element of the mutated list strided: the launcher updates the caller's views.
    case = "test_forward_matches_reference[fp32-D4-strided-xs-default]"
    assert f"PASSED tests/test_add_all.py::{case}" in tests.stdout
    assert " passed" in tests.stdout and "failed" not in tests.stdout
