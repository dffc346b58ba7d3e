"""The offsets declaration: what the spec accepts and the located errors for the rest."""

from __future__ import annotations

import pytest
from specs import CHUNK, replace

from codegen.pipeline import generate, parse
from codegen.spec.errors import SpecError

LINE = "      cu_seqlens: {shape: [S], dtypes: [int32], differentiable: false}"


def _with(declaration: str) -> str:
    return replace(LINE, f"      cu_seqlens: {declaration}", CHUNK)


def test_offsets_of_a_bound_dim_are_checked_by_the_public_function():
    module = generate(
        _with("{shape: [S], dtypes: [int32], differentiable: false, offsets: T}"),
        "ops.yaml",
        "ops.yaml",
    )["demo/chunk.py"]
    assert 'cu_seqlens = _check_offsets("chunk", "cu_seqlens", cu_seqlens, T, "T")' in module


@pytest.mark.parametrize(
    "declaration, message",
    [
        (
            "{shape: [S], dtypes: [int32], differentiable: false, offsets: X}",
            "offsets of 'cu_seqlens' partition dim 'X', which no required input binds; "
            "dims: B, T, H, K, V",
        ),
        (
            "{shape: [S, 2], dtypes: [int32], differentiable: false, offsets: T}",
            "offsets input 'cu_seqlens' must have a 1-D shape, got [S, 2]",
        ),
        (
            "{shape: [S], dtypes: [float32], differentiable: false, offsets: T}",
            "offsets input 'cu_seqlens' must allow only int32 and int64 dtypes",
        ),
        (
            "{shape: [S], dtypes: [int32], differentiable: false, offsets: 3}",
            "'offsets' of input 'cu_seqlens' must name the dim the offsets partition",
        ),
    ],
)
def test_bad_offsets_declarations_are_located(declaration, message):
    with pytest.raises(SpecError) as info:
        parse(_with(declaration), "ops.yaml")
    # Located at the value of 'offsets' (line 26 of the spec).
    col = len("      cu_seqlens: ") + declaration.index("offsets: ") + len("offsets: ") + 1
    assert [str(d) for d in info.value.diagnostics] == [
        f"ops.yaml:26:{col}: error: [chunk] {message}"
    ]
