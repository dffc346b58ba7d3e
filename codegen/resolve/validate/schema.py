"""Checks the forward schema's own arguments and returns: names, aliasing, supported types."""

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
        if arg.alias and not arg.is_write:
            report.error(
                loc,
                f"forward schema: argument '{arg.name}' has a read-only alias annotation; declare in-place updates as 'Tensor(a!) {arg.name}' and return new tensors otherwise",
            )
        if arg.is_tensor_list:
            report.error(
                loc,
                f"forward schema: Tensor[] argument '{arg.name}' is not supported by this generator yet",
            )
    for i, ret in enumerate(fwd.returns):
        if ret.name is None:
            report.error(
                loc,
                f"forward schema: return {i} has no name; name every return, e.g. '-> (Tensor y, Tensor rstd)'",
            )
        if ret.alias:
            report.error(loc, f"forward schema: return '{ret.name}' must not alias an input")
    if not fwd.returns:
        report.error(loc, "forward schema returns nothing; declare the outputs it returns")
