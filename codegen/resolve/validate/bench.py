"""Checks an operator's benchmark plan (docs/spec.md, "benchmark") against its dims and
arguments. Shapes are checked as test samples are (``tests.check_samples``), and may also give
the arity flag; variant values must be listed; spelled-out inputs must be ones the test samples
spell out; shapes satisfy the constraints; dtypes are allowed for the primary input; ``bytes``
and ``flops`` read only names the harness knows; ``given`` names optional inputs; ``backward``
needs gradients; each adapter is a function of its module (read, never imported). A baseline's
own function is not looked up: its library may be missing where the spec is generated, and the
benchmark skips it there with a printed reason.
"""

from __future__ import annotations

from ...spec.errors import did_you_mean, one_of
from ...spec.model import Integration
from ..resolved import ResolvedOp
from ..sources import find_function
from .report import Report
from .tests import check_samples

# What a work expression may read besides the shapes' dims: the product of the '...' sizes.
BATCH = "batch"


def bench(r: ResolvedOp, report: Report, check_imports: bool = True) -> None:
    b = r.op.benchmark
    if b is None:
        return
    flag = r.op.arity_pair.flag if r.op.arity_pair is not None else None
    check_samples(r, report, b.shapes, what="shape", extra=(flag,) if flag else ())
    _shape_values(r, b, report, flag)
    _dtypes(r, b, report)
    dims, tensors = work_names(r)
    work = (
        ("bytes", b.bytes, b.bytes_loc),
        ("flops", b.flops, b.flops_loc),
        ("backward_bytes", b.backward_bytes, b.backward_bytes_loc),
        ("backward_flops", b.backward_flops, b.backward_flops_loc),
    )
    for key, expr, loc in work:
        known = [*dims, *tensors] if key.endswith("bytes") else list(dims)
        for n in () if expr is None else expr.names:
            if n in known:
                continue
            what = (
                "neither a dim of the shapes nor a tensor" if key.endswith("bytes") else "not a dim"
            )
            note = (
                " (a tensor's name counts its bytes: use it in bytes or backward_bytes)"
                if n in tensors
                else ""
            )
            report.error(
                loc,
                f"benchmark {key} reads '{n}', which is {what}{note}"
                f"{did_you_mean(n, known)}; expected one of: {one_of(known)}",
            )
    for name in b.given:
        if name in r.literal_inputs:
            report.error(
                b.given_loc,
                f"benchmark given names '{name}', whose values the test samples spell out; "
                "spell them out in a shape instead",
            )
        elif name not in r.optional_inputs:
            report.error(
                b.given_loc,
                f"benchmark given names '{name}', which is not an optional input"
                f"{did_you_mean(name, list(r.optional_inputs))}"
                + (f"; expected one of: {one_of(r.optional_inputs)}" if r.optional_inputs else ""),
            )
    eager = r.op.integration is Integration.EAGER and not any(d.mutated for d in r.op.inputs)
    has_gradients = r.op.backward is not None or eager
    if b.backward and not has_gradients:
        report.error(b.backward_loc, "benchmark backward: the operator has no backward to time")
    timed = has_gradients and b.backward is not False
    for (base, base_expr, _), (key, expr, loc) in zip(work[:2], work[2:], strict=True):
        if expr is None:
            continue
        if not timed:
            why = "backward: false" if has_gradients else "the operator has no backward"
            report.error(loc, f"benchmark {key}: no backward is timed ({why})")
        elif base_expr is None:
            report.error(
                loc,
                f"benchmark {key} without {base}: a forward + backward's {base} are the "
                f"forward's plus these",
            )
    if check_imports:
        for base in b.baselines:
            if base.adapter is None:
                continue
            module, function = base.adapter.split(":")
            if (problem := find_function(module, function)) is not None:
                report.error(base.adapter_loc, f"baseline adapter: {problem}")


def work_names(r: ResolvedOp) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names a work expression may read: the shapes' dims (and ``batch`` where an input has
    '...'), then the tensors whose bytes ``bytes`` may count (inputs and public outputs)."""
    dims = tuple(r.sample_dims)
    if r.plan.batch_source is not None and BATCH not in {d.name for d in r.op.inputs}:
        dims += (BATCH,)
    tensors = tuple(d.name for d in r.op.inputs if not d.is_list) + tuple(
        o.name for o in r.op.outputs if o.public and o.count is None
    )
    return dims, tensors


def _shape_values(r: ResolvedOp, b, report: Report, flag: str | None) -> None:
    op = r.op
    for s in b.shapes:
        for name, value in s.entries:
            variant = op.variant(name)
            if variant is not None and value not in variant.values:
                report.error(
                    s.loc,
                    f"shape gives {name} {value!r}, which is not one of its variants "
                    f"({one_of(repr(v) for v in variant.values)})",
                )
            elif name == flag and not isinstance(value, bool):
                report.error(
                    s.loc, f"shape gives the flag {name} {value!r}; it takes true or false"
                )
            elif op.input(name) is not None and name not in r.literal_inputs:
                report.error(
                    s.loc,
                    f"shape spells out input '{name}', which no test sample spells out; the "
                    "benchmark draws it like the tests do",
                )
        env = s.env()
        for c in op.constraints:
            if c.when is not None and c.when not in b.given and s.get(c.when) is None:
                continue
            if all(n in env for n in c.check.names) and not c.check.holds(env):
                report.error(s.loc, f"shape breaks constraint '{c.check.text}'")


def _dtypes(r: ResolvedOp, b, report: Report) -> None:
    primary = r.op.primary
    allowed = primary.dtypes
    for dt in b.dtypes:
        if allowed and dt not in allowed:
            report.error(
                b.dtypes_loc or b.loc,
                f"benchmark dtype '{dt.torch_name}' is not allowed for input '{primary.name}' "
                f"({one_of(d.torch_name for d in allowed)})",
            )
