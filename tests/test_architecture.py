"""The generator's shape: a one-way pipeline of stages, and classes small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CODEGEN = Path(__file__).resolve().parent.parent / "codegen"
# Each stage may import itself and the stages before it, never a later one.
STAGES = ["spec", "resolve", "views", "emit"]
# Copied into generated packages: they import nothing of the generator.
ISOLATED = ["runtime"]
MAX_CLASS_LINES = 300


def _modules():
    for path in sorted(CODEGEN.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported_stages(path: Path, tree: ast.Module) -> set[str]:
    here = path.relative_to(CODEGEN).parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "codegen" and len(parts) > 1:
                    found.add(parts[1])
                continue
            base = list(here[:-1])[: len(here) - node.level]
            target = base + (node.module.split(".") if node.module else [])
            if target:
                found.add(target[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "codegen" and len(parts) > 1:
                    found.add(parts[1])
    return found


@pytest.mark.parametrize("path, tree", list(_modules()), ids=lambda v: getattr(v, "name", ""))
def test_no_stage_imports_a_later_one(path, tree):
    stage = path.relative_to(CODEGEN).parts[0]
    imported = _imported_stages(path, tree) & set(STAGES + ISOLATED)
    if stage in ISOLATED:
        assert not imported, f"{path.name} imports {sorted(imported)}"
    elif stage in STAGES:
        later = {s for s in imported if STAGES.index(s) > STAGES.index(stage)} | (
            imported & set(ISOLATED)
        )
        assert not later, f"{stage}/{path.name} imports later stages {sorted(later)}"


def test_no_class_is_longer_than_a_sitting():
    long = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    long.append(f"{path.relative_to(CODEGEN)}::{node.name} ({lines} lines)")
    assert not long, long
