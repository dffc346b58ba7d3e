"""The generated tests must fail on the bugs they exist to catch.

A throwaway project (spec + launchers in a temp dir) is generated with the real CLI, then its
generated tests run against launchers with one injected fault each: output strides copied from
the input, an output dtype that disagrees with the declared one, and a kernel that indexes a
permuted input as if it were compact.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from marks import SLOW, slow

from tests.specs import regenerate_project

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
version: 1
namespace: faultops
ops:
  double:
    doc: Twice x.
    forward:
      schema: "(Tensor x) -> Tensor y"
      launchers: {cpu: "faultkern:double_fwd"}
    backward:
      schema: "(Tensor grad_y, Tensor x) -> Tensor grad_x"
      launchers: {cpu: "faultkern:double_bwd"}
    inputs:
      x: {shape: [..., D], dtypes: [float32, bfloat16]}
    outputs:
      y: {shape: [..., D], dtype: x}
    reference: "faultkern:double_ref"
    tests:
      samples: [{batch: [3], D: 5}]
      tolerance: {float32: [1.0e-6, 1.0e-6], bfloat16: [1.0e-2, 1.0e-2]}
"""

LAUNCHERS = """\
import importlib
import os

import torch

FAULT = os.environ.get("FAULT", "none")


def _compact_strides(shape):
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


def double_fwd(x):
    if FAULT == "strides":
        y = torch.empty_like(x)
    else:
        y = x.new_empty(x.shape)
    src = x
    if FAULT == "wrong_elements":
        src = torch.as_strided(x, x.shape, _compact_strides(x.shape), x.storage_offset())
    y.copy_(src * 2)
    if FAULT == "dtype":
        y = y.float()
    return y


def double_bwd(grad_y, x):
    grad_x = x.new_empty(x.shape)
    grad_x.copy_(grad_y * 2)
    return grad_x


def double_ref(x):
    return x.float() * 2
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("faultproject")
    return regenerate_project(root, {"ops.yaml": SPEC, "faultkern.py": LAUNCHERS})


def _run(project: Path, fault: str) -> tuple[int, set[str]]:
    env = {
        **os.environ,
        "FAULT": fault,
        "PYTHONPATH": os.pathsep.join([str(project), str(project / "generated")]),
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-k", "not compile"]
        + [str(project / "generated" / "tests")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = set(re.findall(r"^FAILED \S+::(\S+)", result.stdout, flags=re.M))
    return result.returncode, failed


def test_correct_launchers_pass(project):
    code, failed = _run(project, "none")
    assert code == 0 and not failed, failed


def test_fake_strides_disagreeing_with_the_kernel_fail(project):
    code, failed = _run(project, "strides")
    assert code == 1
    assert "test_opcheck_forward[fp32-batch3-D5-permuted-x-default]" in failed
    assert not any(name.endswith("-compact-default]") for name in failed), failed


@SLOW
def test_fake_dtype_disagreeing_with_the_kernel_fails(project):
    code, failed = _run(project, "dtype")
    assert code == 1
    assert "test_opcheck_forward[bf16-batch3-D5-compact-default]" in failed
    assert not any(name.startswith("test_opcheck_forward[fp32") for name in failed), failed


@SLOW
def test_wrong_elements_on_a_permuted_input_fail(project):
    code, failed = _run(project, "wrong_elements")
    assert code == 1
    assert "test_forward_matches_reference[fp32-batch3-D5-permuted-x-default]" in failed
    assert "test_forward_matches_reference[fp32-batch3-D5-compact-default]" not in failed


MUTATION_SPEC = """\
version: 1
namespace: mutops
ops:
  bump:
    doc: Add v into state in place; return the row sums of the new state.
    forward:
      schema: "(Tensor(a!) state, Tensor v) -> Tensor total"
      launchers: {cpu: "mutkern:bump"}
    inputs:
      state: {shape: [N, D], dtypes: [float32], mutated: true}
      v: {shape: [N, D], dtypes: [float32]}
    outputs:
      total: {shape: [N], dtype: float32}
    reference: "mutkern:bump_ref"
    tests: {samples: [{N: 3, D: 4}], tolerance: {float32: [1.0e-6, 1.0e-6]}}
  bump_undeclared:
    doc: The same launcher, with the mutation left out of the schema.
    forward:
      schema: "(Tensor state, Tensor v) -> Tensor total"
      launchers: {cpu: "mutkern:bump"}
    inputs:
      state: {shape: [N, D], dtypes: [float32]}
      v: {shape: [N, D], dtypes: [float32]}
    outputs:
      total: {shape: [N], dtype: float32}
    reference: "mutkern:bump_ref"
    tests: {samples: [{N: 3, D: 4}], tolerance: {float32: [1.0e-6, 1.0e-6]}}
  scaled:
    doc: Traceable PyTorch, no registration.
    integration: eager
    forward:
      schema: "(Tensor x, float alpha=2.0) -> Tensor y"
      launchers: {cpu: "mutkern:scaled"}
    inputs:
      x: {shape: [..., D], dtypes: [float32]}
    outputs:
      y: {shape: [..., D], dtype: x}
    reference: "mutkern:scaled_ref"
    tests: {samples: [{batch: [3], D: 5}], tolerance: {float32: [1.0e-6, 1.0e-6]}}
  axpy:
    doc: x plus y; y takes the dtype of x.
    forward:
      schema: "(Tensor x, Tensor y) -> Tensor out"
      launchers: {cpu: "mutkern:axpy"}
    inputs:
      x: {shape: [N, D], dtypes: [float32]}
      y: {shape: [N, D], dtype: x}
    outputs:
      out: {shape: [N, D], dtype: x}
    reference: "mutkern:axpy"
    tests: {samples: [{N: 3, D: 4}], tolerance: {float32: [1.0e-6, 1.0e-6]}}
"""

MUTATION_LAUNCHERS = """\
import torch


def bump(state, v):
    state.add_(v)
    return state.sum(-1)


def bump_ref(state, v):
    with torch.no_grad():
        state.add_(v.float())
    return state.float().sum(-1)


def scaled(x, alpha=2.0):
    return (torch.tanh(x) * alpha).contiguous()


def scaled_ref(x, alpha=2.0):
    return torch.tanh(x.float()) * alpha


def axpy(x, y):
    return (x + y).contiguous()
"""


@pytest.fixture(scope="module")
def mutation_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("mutproject")
    return regenerate_project(root, {"ops.yaml": MUTATION_SPEC, "mutkern.py": MUTATION_LAUNCHERS})


def _run_file(project: Path, name: str) -> tuple[int, set[str], str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(project / "generated")])}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider"]
        + [str(project / "generated" / "tests" / name)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = set(re.findall(r"^FAILED \S+::(\S+)", result.stdout, flags=re.M))
    return result.returncode, failed, result.stdout


@SLOW
def test_declared_mutation_passes_and_survives_compile(mutation_project):
    code, failed, out = _run_file(mutation_project, "test_bump.py")
    assert code == 0 and not failed, out[-3000:]
    assert (
        "test_compile_fullgraph" in (mutation_project / "generated/tests/test_bump.py").read_text()
    )


def test_forgotten_mutation_annotation_is_caught_by_opcheck(mutation_project):
    code, failed, out = _run_file(mutation_project, "test_bump_undeclared.py")
    assert code == 1
    assert "test_opcheck_forward[fp32-N3-D4-compact-default]" in failed
    assert "test_schema" in out


def test_eager_integration_registers_nothing_and_passes(mutation_project):
    code, failed, out = _run_file(mutation_project, "test_scaled.py")
    assert code == 0 and not failed, out[-3000:]
    module = (mutation_project / "generated" / "mutops" / "scaled.py").read_text()
    assert "torch.library" not in module
    assert (
        "test_gradients_match_reference"
        in (mutation_project / "generated/tests/test_scaled.py").read_text()
    )


@SLOW
def test_rejects_pass_with_every_check_in_place(mutation_project):
    """The reference of axpy is named like the operator: it must not shadow the public function."""
    code, failed, out = _run_file(mutation_project, "test_axpy.py")
    assert code == 0 and not failed, out[-3000:]
    assert (
        "PASSED generated/tests/test_axpy.py::test_rejects_invalid_arguments[x-dtype-float64]"
        in out
    )


@SLOW
def test_a_missing_dtype_check_is_not_covered_by_another_arguments_message(
    mutation_project, tmp_path
):
    """Without x's dtype check, y's check still fails the call, naming x (as the dtype it wants):
    the test of x must see that the message is not about x."""
    project = tmp_path / "project"
    shutil.copytree(mutation_project, project)
    module = project / "generated" / "mutops" / "axpy.py"
    source, count = re.subn(r"\n\s*or x\.dtype not in _\w+", "", module.read_text())
    assert count == 1, "the dtype check of x is not where this test expects it"
    module.write_text(source)
    code, failed, out = _run_file(project, "test_axpy.py")
    assert code == 1
    assert failed == {"test_rejects_invalid_arguments[x-dtype-float64]"}, out[-3000:]
    assert "axpy: y must have the dtype of x" in out


def test_generated_code_is_lint_clean_in_a_foreign_project(mutation_project):
    """Import blocks must not depend on which modules a project's linter calls first-party."""
    common = ["--isolated", "--line-length", "100"]
    lint = ["check", *common, "--select", "E,F,W,I,B,UP", "--ignore", "E501", "generated"]
    for args in (lint, ["format", *common, "--check", "generated"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args],
            cwd=mutation_project,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def testing_helpers(monkeypatch):
    """The generated ``_testing`` module, with torch's own opcheck switched off."""
    import torch

    helpers = importlib.import_module("attnops._testing")
    monkeypatch.setattr(torch.library, "opcheck", lambda *args, **kwargs: None)
    return helpers


@pytest.mark.parametrize("fault", ["none", "strides", "size"])
def test_stride_comparison_does_not_rely_on_torchs_opcheck(testing_helpers, fault):
    """torch 2.11's opcheck compares no strides; the generated helper must catch them itself."""
    import torch

    namespace = f"stridecheck_{fault}"
    lib = torch.library.Library(namespace, "DEF")
    lib.define("twice(Tensor x) -> Tensor")

    def impl(x):
        y = torch.empty_like(x) if fault == "strides" else x.new_empty(x.shape)
        y.copy_(x * 2)
        return y[:-1] if fault == "size" else y

    lib.impl("twice", impl, "CPU")
    torch.library.register_fake(f"{namespace}::twice", lambda x: x.new_empty(x.shape), lib=lib)
    op = getattr(torch.ops, namespace).twice.default
    x = torch.randn(3, 5).t().contiguous().t()
    if fault == "none":
        testing_helpers.opcheck(op, {"x": x})
    else:
        with pytest.raises(
            AssertionError,
            match=r"::twice: output 0: expected .* \(the fake, from the spec\); received ",
        ):
            testing_helpers.opcheck(op, {"x": x})


NORM_SPEC = """\
version: 1
namespace: normfaults
ops:
  rmsnorm:
    doc: RMS-normalize x over its last dim, then scale by weight.
    forward:
      schema: "(Tensor x, Tensor weight, float eps=1e-6) -> (Tensor y, Tensor rstd)"
      launchers: {cpu: "normkern:rmsnorm_fwd"}
    backward:
      schema: "(Tensor grad_y, Tensor x, Tensor weight, Tensor rstd) -> (Tensor grad_x, Tensor grad_weight)"
      launchers: {cpu: "normkern:rmsnorm_bwd"}
    inputs:
      x: {shape: [..., D], dtypes: [float32]}
      weight: {shape: [D], dtypes: [float32]}
    outputs:
      y: {shape: [..., D], dtype: x}
      rstd: {shape: [...], dtype: float32, public: false}
    reference: "normkern:rmsnorm_ref"
    tests:
      samples: [{batch: [3, 2], D: 8}]
      tolerance: {float32: [1.0e-5, 1.0e-5]}
"""

# Each fault reads one tensor as if it were compact (row-major strides from its storage offset),
# as a kernel indexing it with compact offsets would: weight (forward and backward), the
# incoming gradient grad_y, or the saved rstd (backward).
NORM_LAUNCHERS = """\
import os

import torch

FAULT = os.environ.get("FAULT", "none")


def _as_compact(t):
    strides, acc = [], 1
    for size in reversed(t.shape):
        strides.append(acc)
        acc *= max(size, 1)
    return torch.as_strided(t, t.shape, tuple(reversed(strides)), t.storage_offset())


def _read(t, name):
    return _as_compact(t) if FAULT == name else t


def rmsnorm_fwd(x, weight, eps=1e-6):
    weight = _read(weight, "weight")
    rstd = torch.rsqrt(x.pow(2).mean(-1) + eps)
    y = x.new_empty(x.shape)
    y.copy_(x * rstd[..., None] * weight)
    return y, rstd.contiguous()


def rmsnorm_bwd(grad_y, x, weight, rstd):
    weight, grad_y, rstd = _read(weight, "weight"), _read(grad_y, "grad"), _read(rstd, "saved")
    xhat = x * rstd[..., None]
    dxhat = grad_y * weight
    grad_x = x.new_empty(x.shape)
    grad_x.copy_(rstd[..., None] * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdim=True)))
    grad_weight = weight.new_empty(weight.shape)
    grad_weight.copy_((grad_y * xhat).sum(tuple(range(x.ndim - 1))))
    return grad_x, grad_weight


def rmsnorm_ref(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
"""


@pytest.fixture(scope="module")
def norm_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("normproject")
    return regenerate_project(root, {"ops.yaml": NORM_SPEC, "normkern.py": NORM_LAUNCHERS})


NORM_CASE = "fp32-batch3x2-D8"


@pytest.mark.parametrize(
    "fault, expected",
    [
        slow("none", set()),  # the "weight" case shows the other tests pass
        # A 1-D weight read as if compact: only its strided layout shows it (a 1-D tensor has
        # no dense permuted layout).
        (
            "weight",
            {
                f"test_forward_matches_reference[{NORM_CASE}-strided-weight-default]",
                f"test_gradients_match_reference[{NORM_CASE}-strided-weight-default]",
            },
        ),
        # The incoming gradient read as if compact: the public backward gets it permuted, then
        # strided.
        slow(
            "grad",
            {
                f"test_gradients_match_reference[{NORM_CASE}-permuted-grads-default]",
                f"test_gradients_match_reference[{NORM_CASE}-strided-grads-default]",
            },
        ),
        # The saved rstd read as if compact: only the backward operator called on it relaid
        # shows it (the forward always allocates it compact).
        slow(
            "saved",
            {
                f"test_backward_saved_layouts_match_compact[{NORM_CASE}-permuted-rstd-default]",
                f"test_backward_saved_layouts_match_compact[{NORM_CASE}-strided-rstd-default]",
            },
        ),
    ],
)
def test_kernels_ignoring_a_stride_fail_their_layouts(norm_project, fault, expected):
    code, failed = _run(norm_project, fault)
    assert code == (1 if expected else 0)
    # opcheck compares no values: only the numeric cases of the layout fail.
    assert failed == expected
