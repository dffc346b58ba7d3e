"""One more sample or dtype in the spec is a few more rows of a generated test module."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from codegen.pipeline import generate

SPEC = Path(__file__).resolve().parent.parent / "ops.yaml"
BUDGET = 10  # changed lines of the generated test module


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def _changed_lines(before: str, after: str, path: str) -> list[str]:
    a = generate(before, str(SPEC), "ops.yaml")[path].splitlines()
    b = generate(after, str(SPEC), "ops.yaml")[path].splitlines()
    diff = difflib.unified_diff(a, b, lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


GLA_SAMPLE = "        - {B: 1, T: 80, H: 1, K: 16, V: 32, cu_seqlens: [0, 10, 75, 80]}\n"
GATE_SAMPLE = "        - {batch: [3], H: 2, K: 64}\n"
L2NORM_SAMPLE = "        - {batch: [4, 2], D: 100}\n"


@pytest.mark.parametrize(
    "op, old, new",
    [
        ("chunk_gla", GLA_SAMPLE, GLA_SAMPLE + "        - {B: 3, T: 33, H: 2, K: 32, V: 16}\n"),
        (
            "chunk_gla",
            GLA_SAMPLE,
            GLA_SAMPLE
            + "        - {B: 1, T: 40, H: 2, K: 16, V: 16, cu_seqlens: [0, 1, 39, 40]}\n",
        ),
        ("gate", GATE_SAMPLE, GATE_SAMPLE + "        - {batch: [2, 5], H: 3, K: 32}\n"),
        ("l2norm", L2NORM_SAMPLE, L2NORM_SAMPLE + "        - {batch: [9], D: 17}\n"),
    ],
    ids=["chunk_gla", "chunk_gla-packed", "gate", "l2norm"],
)
def test_one_more_sample_changes_few_lines(op, old, new):
    text = SPEC.read_text()
    changed = _changed_lines(text, _edit(text, old, new), f"tests/test_{op}.py")
    assert 0 < len(changed) <= BUDGET, "\n".join(changed)
    assert all(line.startswith("+") for line in changed), "\n".join(changed)


def test_one_more_dtype_changes_few_lines():
    text = SPEC.read_text()
    more = _edit(
        text, "      dtypes: [float32, bfloat16]\n", "      dtypes: [float32, bfloat16, float16]\n"
    )
    more = _edit(
        more,
        "        bfloat16: [5.0e-2, 2.0e-2]\n      grad_tolerance:\n",
        "        bfloat16: [5.0e-2, 2.0e-2]\n        float16: [1.0e-2, 1.0e-2]\n      grad_tolerance:\n",
    )
    more = _edit(
        more,
        "        bfloat16: [1.5e-1, 2.0e-2]\n      varlen:",
        "        bfloat16: [1.5e-1, 2.0e-2]\n        float16: [2.0e-2, 2.0e-2]\n      varlen:",
    )
    changed = _changed_lines(text, more, "tests/test_chunk_gla.py")
    assert 0 < len(changed) <= BUDGET, "\n".join(changed)
    assert "+    " + '"fp16": torch.float16,' in changed
