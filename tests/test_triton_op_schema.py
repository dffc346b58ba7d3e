"""The schema triton_op would register for a generated shim, compared with the written one."""

from __future__ import annotations

import pytest

from codegen.resolve import triton_op
from codegen.resolve.triton_op import differences
from codegen.spec.schema import parse_schema


@pytest.mark.parametrize(
    "schema",
    [
        '(Tensor g, Tensor? A_log=None, Tensor? dt_bias=None, str kind="softplus", float lower_bound=-5.0) -> Tensor out',
        "(Tensor(a!) state, Tensor x) -> ()",
        "(Tensor x, SymInt n, ScalarType? d=None, *, float eps=1e-6) -> (Tensor a, Tensor b)",
    ],
)
def test_schemas_triton_op_registers_as_written(schema):
    assert differences("demo::op", parse_schema("demo::op", schema)) == []


@pytest.mark.parametrize(
    "schema, problem",
    [
        (
            "(Tensor x, int n) -> Tensor y",
            "argument 'n' would be registered as 'SymInt n', not 'int n'",
        ),
        (
            "(Tensor x, SymInt[2] k) -> Tensor y",
            "argument 'k' would be registered as 'SymInt[] k', not 'SymInt[2] k'",
        ),
        (
            "(Tensor x, Layout? l=None) -> Tensor y",
            "triton_op cannot register this schema: Parameter l has unsupported type torch.layout | None.",
        ),
    ],
)
def test_schemas_triton_op_would_change_are_reported(schema, problem):
    assert differences("demo::op", parse_schema("demo::op", schema)) == [problem]


def test_an_answer_kept_per_text_is_the_fresh_one():
    triton_op._differences.clear()
    text = "(Tensor x, int n) -> Tensor y"
    fresh = differences("demo::a", parse_schema("demo::a", text))
    assert fresh == ["argument 'n' would be registered as 'SymInt n', not 'int n'"]
    fresh.clear()  # the caller's list, not the one kept
    assert differences("demo::b", parse_schema("demo::b", text)) == [
        "argument 'n' would be registered as 'SymInt n', not 'int n'"
    ]
    fixed = text.replace("int n", "SymInt n")
    assert differences("demo::b", parse_schema("demo::b", fixed)) == []
