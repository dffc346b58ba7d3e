"""Kernels written the way public kernel libraries write them, through the generator.

The backward returns ``torch.empty(0)`` as the gradient of an optional parameter the caller left
out, and the reference also returns the output it saves for the backward. With
``absent_gradient: empty`` and ``reference_returns`` in the spec the generated tests pass; without
them they fail, each with a message that names the operator, the result, and what the spec
expects against what was received. A launcher returning an output of the wrong dtype, shape or
strides fails the same way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from marks import SLOW, slow

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
version: 1
namespace: commonops
ops:
  scaled:
    doc: x times an optional per-column weight; the row sums of x are saved for the backward.
    forward:
      schema: "(Tensor x, Tensor? weight=None) -> (Tensor y, Tensor rowsum)"
      launchers: {cpu: "commonkern:scaled_fwd"}
    backward:
      schema: "(Tensor grad_y, Tensor x, Tensor? weight, Tensor rowsum) -> (Tensor grad_x, Tensor grad_weight)"
      launchers: {cpu: "commonkern:scaled_bwd"}
    inputs:
      x: {shape: [N, D], dtypes: [float32]}
      weight: {shape: [D], dtypes: [float32]ABSENT}
    outputs:
      y: {shape: [N, D], dtype: x}
      rowsum: {shape: [N], dtype: float32, public: false}
RETURNS    reference: "commonkern:scaled_ref"
    tests: {samples: [{N: 3, D: 5}], tolerance: {float32: [1.0e-5, 1.0e-5]}}
"""

DECLARED = SPEC.replace("ABSENT", ", absent_gradient: empty").replace(
    "RETURNS", "    reference_returns: [y, rowsum]\n"
)
UNDECLARED = SPEC.replace("ABSENT", "").replace("RETURNS", "")

LAUNCHERS = """\
import os

import torch

FAULT = os.environ.get("FAULT", "none")


def scaled_fwd(x, weight):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    y.copy_(x * weight if weight is not None else x)
    rowsum = torch.empty(x.shape[:1], dtype=torch.float32, device=x.device)
    rowsum.copy_(x.sum(-1))
    if FAULT == "dtype":
        y = y.double()
    elif FAULT == "shape":
        y = y[:-1]
    elif FAULT == "strides":
        y = torch.empty(y.shape[::-1], dtype=y.dtype, device=y.device).t().copy_(y)
    return y, rowsum


def scaled_bwd(grad_y, x, weight, rowsum):
    grad_x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    grad_x.copy_(grad_y * weight if weight is not None else grad_y)
    if weight is None:
        # The common style: an empty tensor stands for "no gradient".
        return grad_x, torch.empty(0)
    grad_weight = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    grad_weight.copy_((grad_y * x).sum(0))
    if FAULT == "grad_dtype":
        grad_x = grad_x.double()
    return grad_x, grad_weight


def scaled_ref(x, weight=None):
    y = x.float() * weight.float() if weight is not None else x.float()
    return y, x.float().sum(-1)
"""


def _project(root: Path, spec: str) -> Path:
    root.mkdir()
    (root / "ops.yaml").write_text(spec)
    (root / "commonkern.py").write_text(LAUNCHERS)
    done = subprocess.run(
        [sys.executable, "-m", "codegen", "regenerate", "--spec", str(root / "ops.yaml"), "-q"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    base = tmp_path_factory.mktemp("commonstyle")
    return {
        "declared": _project(base / "declared", DECLARED),
        "undeclared": _project(base / "undeclared", UNDECLARED),
    }


def _run(project: Path, fault: str = "none", select: str = "not compile"):
    env = {
        **os.environ,
        "FAULT": fault,
        "PYTHONPATH": os.pathsep.join([str(project), str(project / "generated")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-k", select]
        + [str(project / "generated" / "tests" / "test_scaled.py")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = set(re.findall(r"^FAILED \S+::(\S+)", done.stdout, flags=re.M))
    return done.returncode, failed, done.stdout


def test_declared_contract_generates_the_empty_gradient_fake(projects):
    module = (projects["declared"] / "generated" / "commonops" / "scaled.py").read_text()
    assert (
        "    if weight is None:\n        grad_weight = x.new_empty((0,), dtype=torch.float32)\n"
        in (module)
    )
    tests = (projects["declared"] / "generated" / "tests" / "test_scaled.py").read_text()
    assert 'REFERENCE_RETURNS = ("y", "rowsum")' in tests
    plain = (projects["undeclared"] / "generated" / "commonops" / "scaled.py").read_text()
    assert "if weight is None" not in plain
    assert "grad_weight = x.new_empty((D,), dtype=torch.float32)" in plain


def test_common_style_kernels_pass_with_the_declarations(projects):
    code, failed, out = _run(projects["declared"], select="")
    assert code == 0 and not failed, out[-4000:]


@SLOW
def test_common_style_kernels_fail_explicitly_without_the_declarations(projects):
    code, failed, out = _run(projects["undeclared"])
    assert code == 1
    # The empty gradient disagrees with the fake, which allocates the declared shape.
    assert "test_opcheck_backward[fp32-N3-D5-compact-no_weight]" in failed
    assert "test_opcheck_backward[fp32-N3-D5-compact-default]" not in failed
    assert (
        "commonops::scaled_bwd: grad_weight: expected shape (5,), dtype torch.float32, "
        "strides (1,), device cpu (the fake, from the spec); received shape (0,), "
        "dtype torch.float32, strides (1,), device cpu (the launcher) "
        "(a backward that returns an empty tensor for an optional input the caller left out "
        "declares 'absent_gradient: empty' on that input)"
    ) in out
    # The reference's second result is not matched up with a public output by position.
    assert "test_forward_matches_reference[fp32-N3-D5-compact-default]" in failed
    assert "test_gradients_match_reference[fp32-N3-D5-compact-default]" in failed
    assert (
        "scaled: the reference returned 2 result(s), but reference_returns declares 1: y; "
        "received: shape (3, 5), dtype torch.float32, strides (5, 1), device cpu; "
        "shape (3,), dtype torch.float32, strides (1,), device cpu"
    ) in out
    # No bare assertion: every failure of the summary carries a message.
    assert not re.search(r"^FAILED \S+ - AssertionError$", out, flags=re.M), out[-4000:]


@pytest.mark.parametrize(
    "fault, received",
    [
        ("dtype", "shape (3, 5), dtype torch.float64, strides (5, 1)"),
        slow("shape", "shape (2, 5), dtype torch.float32, strides (5, 1)"),
        slow("strides", "shape (3, 5), dtype torch.float32, strides (1, 3)"),
    ],
)
def test_a_launcher_output_disagreeing_with_the_spec_is_named(projects, fault, received):
    code, failed, out = _run(projects["declared"], fault)
    assert code == 1
    assert "test_opcheck_forward[fp32-N3-D5-compact-default]" in failed
    assert "test_forward_matches_reference[fp32-N3-D5-compact-default]" in failed
    assert (
        "commonops::scaled_fwd: y: expected shape (3, 5), dtype torch.float32, strides (5, 1), "
        f"device cpu (the fake, from the spec); received {received}, device cpu (the launcher)"
    ) in out
    assert (
        "scaled: output y: expected shape (3, 5), dtype torch.float32, strides (5, 1) "
        f"(contiguous); received {received}, device cpu"
    ) in out


@SLOW
def test_a_gradient_of_the_wrong_dtype_is_named(projects):
    code, failed, out = _run(projects["declared"], "grad_dtype")
    assert code == 1
    assert "test_opcheck_backward[fp32-N3-D5-compact-default]" in failed
    assert (
        "commonops::scaled_bwd: grad_x: expected shape (3, 5), dtype torch.float32, "
        "strides (5, 1), device cpu (the fake, from the spec); received shape (3, 5), "
        "dtype torch.float64, strides (5, 1), device cpu (the launcher)"
    ) in out
