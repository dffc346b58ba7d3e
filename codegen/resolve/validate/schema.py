"""Checks the forward schema's own arguments and returns: names and return names. Types and alias
annotations are checked where the schema is parsed (``spec/schema.py``), at their column."""

from __future__ import annotations

from ...spec.names import check_name
from ..resolved import ResolvedOp
from .report import Report


def forward(r: ResolvedOp, report: Report) -> None:
    op = r.op
    fwd = op.forward.schema
    loc = op.forward.schema_loc
    for arg in fwd.arguments:
        if (problem := check_name(arg.name, "argument name")) is not None:
            report.error(loc, f"forward schema: {problem}")
    for i, ret in enumerate(fwd.returns):
        if ret.name is None:
            report.error(
                loc,
                f"forward schema: return {i} has no name; name every return, e.g. '-> (Tensor y, Tensor rstd)'",
            )
    if not fwd.returns:
        report.error(loc, "forward schema returns nothing; declare the outputs it returns")
