"""Checks the forward schema's own arguments and returns: names and return names. Types and alias
annotations are checked where the schema is parsed (``spec/schema.py``), at their column."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from ...spec.names import check_argument_name
from ..resolved import ResolvedOp
from .report import Report


@functools.cache
def runtime_helpers() -> frozenset[str]:
    """The functions of the copied runtime modules, which generated modules import as
    ``_<name>`` (Note [library names] in spec/names.py)."""
    names = set()
    for module in ("runtime.py", "layout.py"):
        path = Path(__file__).resolve().parents[2] / "runtime" / module
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return frozenset(names)


def forward(r: ResolvedOp, report: Report) -> None:
    op = r.op
    fwd = op.forward.schema
    loc = op.forward.schema_loc
    for arg in fwd.arguments:
        problem = check_argument_name(arg.name, "argument name", op.name, runtime_helpers())
        if problem is not None:
            report.error(op.forward.arg_loc(arg.name), f"forward schema: {problem}")
        elif arg.name == "batch" and arg.is_scalar and not arg.has_default:
            # Test samples give 'batch' the sizes of '...' (docs/spec.md, "tests").
            report.error(
                op.forward.arg_loc(arg.name),
                "forward schema: a scalar argument named 'batch' needs a default: test samples "
                "use the key 'batch' for the sizes of '...', so they cannot give its value",
            )
    names = {a.name for a in fwd.arguments}
    if {"self", "input"} <= names:
        # torch's schema checks name 'self' 'input' (torchgen's Python convention), so opcheck's
        # test_schema fails with "duplicate parameter name: 'input'" for such an operator.
        report.error(
            op.forward.arg_loc("self"),
            "forward schema: arguments 'self' and 'input' together are refused by torch's own "
            "schema checks (opcheck: duplicate parameter name 'input'); rename one of them",
        )
    for i, ret in enumerate(fwd.returns):
        if ret.name is None:
            report.error(
                loc,
                f"forward schema: return {i} has no name; name every return, e.g. '-> (Tensor y, Tensor rstd)'",
            )
