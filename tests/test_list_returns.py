"""'Tensor[]' returns and 'Tensor[]?' arguments: pinned diagnostics of the 'count' key, the
generated fake, and the public function's boundary errors. The probe operators (split_pair,
repeat_n, grouped_mm, weighted_sum in tests/probes/ops.yaml) run their whole generated suites in
tests/test_probe_suites.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from specs import generate_project, run_generated

from codegen.pipeline import generate, parse
from codegen.spec.errors import SpecError

BASE = """\
version: 1
namespace: demo
ops:
  split:
    doc: Split x.
    forward:
      schema: "(Tensor x, Tensor[] xs, int n=2) -> (Tensor y, Tensor[] parts)"
      launchers:
        cpu: attnops_kernels.l2norm.triton:l2norm_fwd
    inputs:
      x: {shape: [..., D], dtypes: [float32]}
      xs: {shape: [M], dtypes: [float32], differentiable: false, list: true}
    outputs:
      y: {shape: [..., D], dtype: x}
      parts: {shape: [..., D], dtype: x, count: 2}
    reference: attnops_kernels.l2norm.reference:l2norm_ref
    tests:
      samples:
        - {batch: [2], D: 8, M: 3}
      tolerance:
        float32: [1.0e-5, 1.0e-5]
"""
PARTS = "      parts: {shape: [..., D], dtype: x, count: 2}"
SCHEMA = '"(Tensor x, Tensor[] xs, int n=2) -> (Tensor y, Tensor[] parts)"'
BWD = """    backward:
      schema: "(Tensor grad_y, Tensor x) -> Tensor grad_x"
      launchers:
        cpu: attnops_kernels.l2norm.triton:l2norm_bwd
    inputs:"""


def replace(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


CASES = [
    (
        "no-count",
        replace(PARTS, "      parts: {shape: [..., D], dtype: x}"),
        [
            "ops.yaml:15:7: error: [split] output 'parts' is a 'Tensor[]' return: say how many "
            "tensors it holds with 'count: <an integer, an int argument, or a list input>'"
        ],
    ),
    (
        "negative-count",
        replace("count: 2", "count: -1"),
        [
            "ops.yaml:15:49: error: [split] 'count' of output 'parts' must be an integer >= 0, "
            "the name of an int argument or the name of a list input; got int -1"
        ],
    ),
    (
        "unknown-count",
        replace("count: 2", "count: nn"),
        [
            "ops.yaml:15:49: error: [split] 'count' of output 'parts' names 'nn', which is not an "
            "argument of the forward schema (did you mean 'n'?); it is an integer, an int "
            "argument or a list input"
        ],
    ),
    (
        "optional-int-count",
        replace("int n=2", "int? n=None", replace("count: 2", "count: n")),
        [
            "ops.yaml:15:49: error: [split] 'count' of output 'parts' names 'n' of type 'int?'; "
            "it must name an 'int' or 'SymInt' argument or a 'Tensor[]' input ('int?' may be "
            "None, which gives no number of tensors)"
        ],
    ),
    (
        "tensor-count",
        replace("count: 2", "count: x"),
        [
            "ops.yaml:15:49: error: [split] 'count' of output 'parts' names 'x' of type "
            "'Tensor'; it must name an 'int' or 'SymInt' argument or a 'Tensor[]' input"
        ],
    ),
    (
        "count-on-a-tensor",
        replace("y: {shape: [..., D], dtype: x}", "y: {shape: [..., D], dtype: x, count: 1}"),
        ["ops.yaml:14:45: error: [split] output 'y' has 'count' but its return is not 'Tensor[]'"],
    ),
    (
        "private-list",
        replace("count: 2}", "count: 2, public: false}"),
        [
            "ops.yaml:15:7: error: [split] output 'parts' is a list ('Tensor[]'), which is "
            "always public (an operator with a list output has no backward to read a saved "
            "one); drop 'public: false'",
            "ops.yaml:15:7: error: [split] output 'parts' is not public and there is no backward "
            "to use it",
        ],
    ),
    (
        "with-backward",
        replace("    inputs:", BWD),
        [
            "ops.yaml:19:7: error: [split] output 'parts' is a list ('Tensor[]') in an operator "
            "with a backward: autograd.Function does not track tensors inside a list; return a "
            "fixed number of tensors (-> (Tensor a, Tensor b))",
        ],
    ),
    (
        "with-arity-pair",
        replace(
            "        cpu: attnops_kernels.l2norm.triton:l2norm_fwd\n",
            "        cpu: attnops_kernels.l2norm.triton:l2norm_fwd\n      arity_pair:\n"
            "        flag: with_z\n        schema: "
            '"(Tensor x, Tensor[] xs, int n=2) -> (Tensor y, Tensor[] parts, Tensor z)"\n',
        ).replace("count: 2}", "count: 2}\n      z: {shape: [..., D], dtype: x}"),
        [
            "ops.yaml:12:65: error: [split] arity_pair schema: return 1 has type 'Tensor[]'; "
            "operators return Tensor values only (a list of tensors ('Tensor[]') is returned "
            "only by the forward schema of an operator without a backward or arity_pair)"
        ],
    ),
    (
        "with-varlen",
        replace("int n=2)", "int n=2, Tensor? cu=None)")
        .replace(
            "      xs: {",
            "      cu: {shape: [S], dtypes: [int32], differentiable: false}\n      xs: {",
        )
        .replace("{batch: [2], D: 8, M: 3}", "{batch: [1], D: 8, M: 3, cu: [0, 3, 8]}")
        .replace(
            "        float32: [1.0e-5, 1.0e-5]\n",
            "        float32: [1.0e-5, 1.0e-5]\n      varlen: {offsets: cu, dim: D, per_sequence: []}\n",
        ),
        [
            "ops.yaml:23:15: error: [split] varlen: output 'parts' is a list ('Tensor[]'), which "
            "the varlen test cannot cut into sequences; declare varlen on an operator without "
            "list outputs"
        ],
    ),
    (
        "optional-list-return",
        replace("Tensor[] parts)", "Tensor[]? parts)"),
        [
            "ops.yaml:7:63: error: [split] forward schema: return 1 has type 'Tensor[]?'; a list "
            "return is 'Tensor[]', always given and holding tensors only: no declaration could "
            "say which of its elements (or whether the list) the fake returns as None"
        ],
    ),
    (
        "list-of-optionals-return",
        replace("Tensor[] parts)", "Tensor?[] parts)"),
        [
            "ops.yaml:7:63: error: [split] forward schema: return 1 has type 'Tensor?[]'; a list "
            "return is 'Tensor[]', always given and holding tensors only: no declaration could "
            "say which of its elements (or whether the list) the fake returns as None"
        ],
    ),
    (
        "list-beside-an-in-place-update",
        replace(
            "Tensor[] xs, int n=2) -> (Tensor y", "Tensor(a!)[] xs, int n=2) -> (Tensor y"
        ).replace("list: true}", "list: true, mutated: true}"),
        [
            "ops.yaml:7:67: error: [split] forward schema: return 1 has type 'Tensor[]' and "
            "argument 'xs' is updated in place: torch.compile cannot functionalize a custom "
            "operator that does both (it takes Tensor returns only beside in-place updates); "
            "return a fixed number of tensors: -> (Tensor a, Tensor b)"
        ],
    ),
    (
        "optional-list-updated-in-place",
        replace("Tensor[] xs, int n=2)", "Tensor(a!)[]? xs=None, int n=2)").replace(
            "list: true}", "list: true, mutated: true}"
        ),
        [
            "ops.yaml:7:27: error: [split] forward schema: type 'Tensor(a!)[]?' of argument 'xs' "
            "is not supported: torch.compile fails on an optional list updated in place when it "
            "is None (Inductor, torch 2.13); write 'Tensor(a!)[]' and pass an empty list for none"
        ],
    ),
    (
        "list-dtype-without-its-count",
        replace("dtype: x, count: 2", "dtype: xs, count: 2"),
        [
            "ops.yaml:15:7: error: [split] dtype of list output 'parts' names list input 'xs', "
            "whose elements may differ in dtype; element i takes element i's dtype only where "
            "'count: xs'"
        ],
    ),
    (
        "element-dim-without-a-list-count",
        replace("shape: [..., D], dtype: x, count: 2", "shape: [M], dtype: x, count: 2"),
        ["ops.yaml:15:7: error: [split] dim 'M' of output 'parts' is not bound by any input"],
    ),
]


@pytest.mark.parametrize("name, text, expected", CASES, ids=[c[0] for c in CASES])
def test_list_return_diagnostics(name, text, expected):
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    assert [str(d) for d in info.value.diagnostics] == expected


def test_backward_schema_cannot_return_a_list():
    text = replace("    inputs:", BWD.replace("-> Tensor grad_x", "-> Tensor[] grad_x"))
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    assert [str(d) for d in info.value.diagnostics] == [
        "ops.yaml:11:45: error: [split] backward schema: return 0 has type 'Tensor[]'; operators "
        "return Tensor values only (a list of tensors ('Tensor[]') is returned only by the "
        "forward schema of an operator without a backward or arity_pair)"
    ]


def test_fake_allocates_one_tensor_per_element_of_the_count_list():
    text = replace(PARTS, "      parts: {shape: [M, ..., D], dtype: xs, count: xs}")
    module = generate(text, "ops.yaml", "ops.yaml")["demo/split.py"]
    assert (
        "    parts = [x.new_empty((xs[_i].shape[0], *batch, D), dtype=xs[_i].dtype) "
        "for _i in range(len(xs))]\n"
    ) in module
    assert "    parts: list[Tensor]\n" in module


LAUNCHERS = """
import torch


def grouped(X, W, n):
    return [x @ w.T for x, w in zip(X, W)], [torch.zeros(2) for _ in range(n)]


def grouped_ref(X, W, n):
    raise AssertionError("not called")
"""

SPEC = """\
version: 1
namespace: lret
ops:
  grouped:
    doc: Grouped products and n copies.
    forward:
      schema: "(Tensor[] X, Tensor[] W, int n) -> (Tensor[] Y, Tensor[] firsts)"
      launchers: {cpu: lretl:grouped}
    inputs:
      X: {shape: [M, K], dtypes: [float32], differentiable: false, list: true}
      W: {shape: [N, K], dtypes: [float32], differentiable: false, list: true}
    outputs:
      Y: {shape: [M, N], dtype: X, count: X}
      firsts: {shape: [2], dtype: float32, count: n}
    reference: lretl:grouped_ref
    tests:
      samples: [{M: 2, N: 3, K: 4, n: 2}]
      tolerance: {float32: [1.0e-5, 1.0e-5]}
"""

SCRIPT = """
import torch
import lret

X = [torch.randn(2, 4), torch.randn(5, 3)]
W = [torch.randn(3, 4), torch.randn(1, 3)]
out = lret.grouped(X, W, 2)
assert [tuple(y.shape) for y in out.Y] == [(2, 3), (5, 1)], out.Y
for message, args in {
    "grouped: n must be >= 0 (the number of tensors of output firsts), got -1": (X, W, -1),
    "grouped: W must hold as many tensors as X (2): element i of output Y reads element i of "
    "both; got 1": (X, W[:1], 2),
}.items():
    try:
        lret.grouped(*args)
    except ValueError as exc:
        assert str(exc) == message, (str(exc), message)
    else:
        raise AssertionError(message)
print("ok")
"""


def test_count_and_length_are_checked_at_the_public_boundary(tmp_path: Path):
    assert generate_project(tmp_path, "lretl", LAUNCHERS, SPEC, "-q") == 0
    result = run_generated(tmp_path, "-c", SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")
