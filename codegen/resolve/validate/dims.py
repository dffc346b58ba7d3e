"""Checks the dims of an operator: names that are valid and distinct from arguments and outputs,
dynamic dims that size an output and need the opaque integration, and the problems the dim plan
(``resolve/dims.py``) found, reported at the declaration they concern.
"""

from __future__ import annotations

from ...spec.names import check_name
from ..resolved import ResolvedOp
from .report import Report


def dims(r: ResolvedOp, report: Report) -> None:
    op = r.op
    p = r.plan
    arg_names = {a.name for a in op.forward.schema.arguments} | {o.name for o in op.outputs}
    derived = {d.name: d for d in op.dims}
    for name, binding in p.bound.items():
        loc = derived[name].loc if binding.derived else op.input(binding.tensor).loc
        if (problem := check_name(name, "dim name")) is not None:
            report.error(loc, problem)
        elif name in arg_names:
            report.error(loc, f"dim '{name}' has the name of an argument or output; rename the dim")
    for name, loc in op.dynamic_dims:
        if name in p.bound:
            report.error(loc, f"dynamic dim '{name}' is also bound by an input")
        if not any(name in e.names for o in op.outputs for e in o.shape.entries if e != "..."):
            report.error(loc, f"dynamic dim '{name}' sizes no output")
        if op.integration.value != "opaque":
            report.error(
                loc,
                "data-dependent output sizes need the opaque integration (the fake allocates them)",
            )
    for where, message in p.problems:
        if where.startswith("dim:"):
            report.error(derived[where[4:]].loc, message)
            continue
        decl = op.input(where) or op.output(where)
        report.error(decl.loc, message)
