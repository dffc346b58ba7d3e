"""Pinned diagnostics for broken specs: exact location, exact text, and nothing written."""

from __future__ import annotations

import pytest
import yaml
from specs import BASE, replace

from codegen.pipeline import parse
from codegen.spec.errors import SpecError

SCHEMA = '"(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)"'
BWD = '"(Tensor grad_y, Tensor x, Tensor rstd) -> Tensor grad_x"'
X = "      x: {shape: [..., D], dtypes: [float32]}"
CPU_FWD = "        cpu: attnops_kernels.l2norm.triton:l2norm_fwd"
# libyaml (used when PyYAML has it) and PyYAML's Python parser word this problem differently.
FLOW_MAPPING_PROBLEM = (
    "did not find expected ',' or '}'"
    if yaml.__with_libyaml__
    else "expected ',' or '}', but got '<scalar>'"
)
TYPES = "Tensor, int, SymInt, float, bool, str, ScalarType, Layout, MemoryFormat, Device, Generator, Scalar"

# (id, spec text, expected diagnostics in order)
CASES = [
    (
        "yaml-syntax",
        replace(X, X[:-1]),
        [
            f"ops.yaml:16:5: error: invalid YAML: {FLOW_MAPPING_PROBLEM} "
            "(while parsing a flow mapping started at 15:10)"
        ],
    ),
    (
        "duplicate-key",
        replace("    doc: Normalize x.", "    doc: Normalize x.\n    doc: Again."),
        ["ops.yaml:6:5: error: duplicate key 'doc' (first defined at 5:5)"],
    ),
    (
        "version",
        replace("version: 1", "version: 2"),
        ["ops.yaml:1:10: error: unsupported spec version 2; this generator reads version 1"],
    ),
    (
        "missing-version",
        replace("version: 1\n", ""),
        ["ops.yaml:1:1: error: the spec is missing required key 'version'"],
    ),
    (
        "misspelled-top-key",
        replace("ops:", "opps:"),
        [
            "ops.yaml:1:1: error: the spec is missing required key 'ops'",
            "ops.yaml:3:1: error: unknown key 'opps' in the spec (did you mean 'ops'?); "
            "expected one of: version, namespace, package, ops",
        ],
    ),
    (
        "unknown-op-key",
        replace("    reference:", "    launcher: x\n    reference:"),
        [
            "ops.yaml:19:5: error: [l2norm] unknown key 'launcher' in an operator; expected one of: "
            "doc, integration, eager_fast_path, side_effects, forward, backward, inputs, outputs, dims, variants, constraints, "
            "reference, reference_returns, tests, benchmark"
        ],
    ),
    (
        "op-name-case",
        replace("  l2norm:", "  L2Norm:"),
        ["ops.yaml:4:3: error: [L2Norm] operator name 'L2Norm' must be lower_snake_case"],
    ),
    (
        "op-name-keyword",
        replace("  l2norm:", "  class:"),
        ["ops.yaml:4:3: error: [class] operator name 'class' is a Python keyword"],
    ),
    (
        "unknown-integration",
        replace("    doc: Normalize x.", "    doc: Normalize x.\n    integration: fancy"),
        [
            "ops.yaml:6:18: error: [l2norm] unknown integration 'fancy'; "
            "expected one of: opaque, triton_op, eager"
        ],
    ),
    (
        "schema-syntax",
        replace(SCHEMA, SCHEMA.replace("1e-6)", "1e-6")),
        [
            "ops.yaml:7:42: error: [l2norm] forward schema: invalid schema: expected ) but found 'arrow' here"
        ],
    ),
    (
        "schema-unknown-type",
        replace(SCHEMA, SCHEMA.replace("float eps", "floot eps")),
        [
            f"ops.yaml:7:37: error: [l2norm] forward schema: invalid schema: unknown or misplaced type; types are: {TYPES}"
        ],
    ),
    (
        "schema-bad-default",
        replace(SCHEMA, SCHEMA.replace("float eps=1e-6", "int eps=1.5")),
        [
            "ops.yaml:7:31: error: [l2norm] forward schema: default of argument 'eps' (1.5) is not a valid int"
        ],
    ),
    (
        "schema-duplicate-argument",
        replace(SCHEMA, SCHEMA.replace("float eps", "float x")),
        ["ops.yaml:7:24: error: [l2norm] forward schema: duplicate argument name 'x'"],
    ),
    (
        "schema-unnamed-returns",
        replace(SCHEMA, SCHEMA.replace("(Tensor y, Tensor rstd)", "(Tensor, Tensor)")),
        [
            f"ops.yaml:7:15: error: [l2norm] forward schema: return {i} has no name; "
            "name every return, e.g. '-> (Tensor y, Tensor rstd)'"
            for i in (0, 1)
        ],
    ),
    (
        "schema-mutation-undeclared-input",
        replace(SCHEMA, SCHEMA.replace("Tensor x", "Tensor(a!) x")),
        [
            "ops.yaml:15:7: error: [l2norm] the forward schema declares 'x' mutable (a!) but the "
            "input is not marked 'mutated: true'"
        ],
    ),
    (
        "unknown-device",
        replace(CPU_FWD, CPU_FWD.replace("cpu:", "gpu:")),
        [
            "ops.yaml:9:9: error: [l2norm] unknown device 'gpu' (did you mean 'cpu'?); "
            "expected one of: cuda, cpu"
        ],
    ),
    (
        "launcher-format",
        replace(CPU_FWD, CPU_FWD.replace(":l2norm", ".l2norm")),
        [
            "ops.yaml:9:14: error: [l2norm] cpu launcher 'attnops_kernels.l2norm.triton.l2norm_fwd' "
            "must be 'package.module:function'"
        ],
    ),
    (
        "launcher-missing-function",
        replace(CPU_FWD, CPU_FWD + "d"),
        [
            "ops.yaml:9:14: error: [l2norm] cpu launcher: module 'attnops_kernels.l2norm.triton' "
            "defines no 'l2norm_fwdd' (did you mean 'l2norm_fwd'?)"
        ],
    ),
    (
        "launcher-missing-module",
        replace(CPU_FWD, CPU_FWD.replace("triton:", "tritonn:")),
        [
            "ops.yaml:9:14: error: [l2norm] cpu launcher: module 'attnops_kernels.l2norm.tritonn' not found"
        ],
    ),
    (
        "input-not-in-schema",
        replace(X, X + "\n      z: {shape: [D], dtypes: [float32]}"),
        [
            "ops.yaml:16:7: error: [l2norm] input 'z' is not a Tensor argument of the forward schema; "
            "tensor arguments: x"
        ],
    ),
    (
        "tensor-argument-undeclared",
        replace(SCHEMA, SCHEMA.replace("Tensor x,", "Tensor x, Tensor w,")),
        [
            "ops.yaml:7:15: error: [l2norm] tensor argument 'w' has no entry under 'inputs' (shape and dtypes)"
        ],
    ),
    (
        "unknown-dtype",
        replace(X, X.replace("float32", "float23")),
        [
            "ops.yaml:15:37: error: [l2norm] unknown dtype 'float23' (did you mean 'float32'?); expected "
            "one of: float32, float16, bfloat16, float64, int32, int64, int8, uint8, bool"
        ],
    ),
    (
        "shape-syntax",
        replace(X, X.replace("D]", '"x.shape[-1]"]')),
        [
            "ops.yaml:15:18: error: [l2norm] shape of input 'x': unsupported syntax 'x.shape[-1]'; "
            "use dim names, integers, + - * // and parentheses"
        ],
    ),
    (
        "shape-reserved-name",
        replace(X, X.replace("D]", "_D]")),
        [
            "ops.yaml:15:18: error: [l2norm] shape of input 'x': dim name '_D' must not start with '_'"
        ],
    ),
    (
        "output-dim-unbound",
        replace("rstd: {shape: [...]", "rstd: {shape: [..., E]"),
        ["ops.yaml:18:7: error: [l2norm] dim 'E' of output 'rstd' is not bound by any input"],
    ),
    (
        "saved-output-unused",
        replace(BWD, BWD.replace(", Tensor rstd", "")),
        [
            "ops.yaml:18:7: error: [l2norm] output 'rstd' is neither public nor used by the backward schema"
        ],
    ),
    (
        "backward-unknown-argument",
        replace(BWD, BWD.replace("grad_y", "grad_z")),
        [
            "ops.yaml:11:15: error: [l2norm] backward schema: argument 'grad_z' is neither a forward "
            "argument, a forward output, nor an incoming gradient (grad_y)"
        ],
    ),
    (
        "backward-return-unnamed",
        replace(BWD, BWD.replace("grad_x", "dx")),
        [
            "ops.yaml:11:15: error: [l2norm] backward schema: return 0 must be named 'grad_<input>' "
            "to say which input it differentiates",
            "ops.yaml:15:7: error: [l2norm] input 'x' has no gradient in the backward schema; "
            "return 'grad_x' or mark it 'differentiable: false'",
        ],
    ),
    (
        "gradient-of-nondifferentiable",
        replace(X, X.replace("]}", "], differentiable: false}")),
        [
            "ops.yaml:11:15: error: [l2norm] backward schema: input 'x' is marked "
            "'differentiable: false' but has gradient 'grad_x'"
        ],
    ),
    (
        "sample-missing-dim",
        replace("{batch: [2], D: 8}", "{batch: [2]}"),
        ["ops.yaml:22:11: error: [l2norm] sample does not give a size for dim 'D'"],
    ),
    (
        "test-dtype-without-tolerance",
        replace("      tolerance:", "      dtypes: [float32, float16]\n      tolerance:"),
        [
            "ops.yaml:21:7: error: [l2norm] test dtype 'float16' is not allowed for input 'x' (float32)",
            "ops.yaml:21:7: error: [l2norm] tests have no tolerance for dtype 'float16'",
        ],
    ),
    (
        "tolerance-shape",
        replace("float32: [1.0e-5, 1.0e-5]", "float32: [1.0e-5]"),
        [
            "ops.yaml:24:18: error: [l2norm] tolerance for float32 must be [atol, rtol], two finite non-negative numbers"
        ],
    ),
    (
        "empty-spec",
        "",
        ["ops.yaml:1:1: error: the spec is empty; expected a mapping with 'version' and 'ops'"],
    ),
    (
        "op-not-a-mapping",
        "version: 1\nnamespace: demo\nops:\n  l2norm: 3\n",
        ["ops.yaml:4:11: error: [l2norm] an operator must be a mapping, got int 3"],
    ),
    (
        "unsafe-yaml-tag",
        replace("    tests:", "    tests: !!python/object:os.system"),
        # Only the tag: that 'tests' is then missing is its consequence, not a second problem.
        ["ops.yaml:20:12: error: unsupported YAML tag 'tag:yaml.org,2002:python/object:os.system'"],
    ),
    (
        "several-problems-at-once",
        replace(
            CPU_FWD, CPU_FWD.replace("cpu:", "gpu:"), replace(X, X.replace("float32", "float23"))
        ),
        [
            "ops.yaml:9:9: error: [l2norm] unknown device 'gpu' (did you mean 'cpu'?); "
            "expected one of: cuda, cpu",
            "ops.yaml:15:37: error: [l2norm] unknown dtype 'float23' (did you mean 'float32'?); expected "
            "one of: float32, float16, bfloat16, float64, int32, int64, int8, uint8, bool",
        ],
    ),
]


def test_base_spec_is_valid():
    spec = parse(BASE, "ops.yaml")
    assert [op.name for op in spec.ops] == ["l2norm"]


@pytest.mark.parametrize("text, expected", [pytest.param(t, e, id=i) for i, t, e in CASES])
def test_diagnostics(text, expected):
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    assert [str(d) for d in info.value.diagnostics] == expected


def test_case_ids_are_distinct():
    ids = [i for i, _, _ in CASES]
    assert len(ids) == len(set(ids)) >= 25
