"""OPS.md, the operators' reference page the generator writes beside the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from codegen.emit.markdown import md_code, md_text
from codegen.pipeline import generate

ROOT = Path(__file__).resolve().parent.parent
SPEC = yaml.safe_load((ROOT / "ops.yaml").read_text())
PAGE = (ROOT / "generated" / "OPS.md").read_text()


def _section(name: str) -> str:
    match = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", PAGE, re.S | re.M)
    assert match, f"no section for {name}"
    return match.group(1)


def _launchers(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [node["launcher"]] if "launcher" in node else []
    return [ref for entry in node for ref in _launchers(entry)]


@pytest.mark.parametrize("name", list(SPEC["ops"]))
def test_each_operator_has_its_contract_on_the_page(name):
    op, text = SPEC["ops"][name], _section(name)
    assert f"({name}(#{name})" in PAGE.replace("[`", "(").replace("`]", "")
    assert f"attnops.{name}(" in text
    for stage in ("forward", "backward"):
        if stage in op:
            assert f"`{op[stage]['schema'].replace('|', chr(92) + '|')}`" in text, stage
            for refs in op[stage]["launchers"].values():
                for ref in _launchers(refs):
                    assert ref in text, ref
    for inp, decl in op["inputs"].items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{inp}` |"))
        for dtype in decl.get("dtypes", []):
            assert dtype in row, (inp, dtype)
    for out in op["outputs"]:
        assert f"| `{out}` |" in text
    for arg, values in (op.get("variants") or {}).items():
        assert f"| `{arg}` |" in text and all(repr(v) in text for v in values)


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells: split on each '|' that no backslash escapes."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


@pytest.mark.parametrize(
    "text", ["a | b", "x`y``z", "`", "line\nbreak <!-- -->", "# heading", "[l](u) **b** _i_", ""]
)
def test_spec_text_stays_in_its_cell(text):
    row = f"| {md_code(text)} | {md_text(text)} |"
    assert "\n" not in row
    assert len(_cells(row)) == 2, row
    # Every character that could start markup is escaped.
    assert not re.search(r"(?<!\\)[<>#|`*_\[]", md_text(text)), md_text(text)


def test_hostile_doc_and_names_stay_text():
    text = (ROOT / "ops.yaml").read_text()
    hostile = text.replace(
        "L2-normalize ``x`` over its last dim",
        "L2 | <script>alert(1)</script> ## `x` over its last dim",
        1,
    )
    assert hostile != text
    files = generate(hostile, str(ROOT / "ops.yaml"), "ops.yaml")
    page = files["OPS.md"]
    line = next(line for line in page.splitlines() if "alert" in line)
    assert "<script>" not in line and "\\<script\\>" in line and "\\|" in line
    # Deterministic: the same spec gives the same page.
    assert generate(hostile, str(ROOT / "ops.yaml"), "ops.yaml")["OPS.md"] == page
