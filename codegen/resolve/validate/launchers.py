"""Finds a launcher or reference function in its module's source, without importing the module."""

from __future__ import annotations

import ast
import importlib.util
from functools import cache

from ...spec.errors import did_you_mean


@cache
def _find(module: str, function: str) -> str | None:
    """Locate ``function`` in ``module`` without importing the module itself."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        return f"cannot locate module '{module}': {exc}"
    if found is None or not found.origin or not found.origin.endswith(".py"):
        return f"module '{module}' not found"
    with open(found.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=found.origin)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    if function not in names:
        return f"module '{module}' defines no '{function}'{did_you_mean(function, sorted(names))}"
    return None
