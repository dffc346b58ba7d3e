"""Checks an operator's test plan against its dims and arguments. Each sample sizes every dim it
must (``sample_dims``), gives every scalar argument without a default, gives nothing unknown or
derived, and gives ``batch`` exactly when an input has ``...``; test dtypes are allowed for the
primary input and each has a tolerance; ``varlen`` names an optional tensor some sample gives, a
bound dim, and inputs or outputs.
"""

from __future__ import annotations

from ...spec.errors import did_you_mean, one_of
from ...spec.shapes import ELLIPSIS, EvaluationError
from ..resolved import ResolvedOp
from .report import Report


def tests(r: ResolvedOp, report: Report) -> None:
    _samples(r, report)
    _dtypes(r, report)
    if r.op.tests.varlen is not None:
        _varlen(r, report)


def _samples(r: ResolvedOp, report: Report) -> None:
    check_samples(r, report, r.op.tests.samples)


def check_samples(
    r: ResolvedOp, report: Report, samples, what: str = "sample", extra: tuple[str, ...] = ()
) -> None:
    """Test samples, or benchmark shapes (``what``: "shape"), which may also give ``extra``."""
    op = r.op
    p = r.plan
    needs_batch = p.batch_source is not None or any(
        d.is_list and d.shape.has_ellipsis for d in op.inputs
    )
    scalars = {a.name: a for a in op.forward.schema.arguments if a.is_scalar}
    literal_ok = {d.name for d in op.inputs}
    for s in samples:
        env = s.env()
        for name in r.sample_dims:
            if name not in env:
                report.error(s.loc, f"{what} does not give a size for dim '{name}'")
        for name, a in scalars.items():
            if a.default is None and s.get(name) is None:
                report.error(
                    s.loc,
                    f"{what} does not give a value for argument '{name}', which has no default",
                )
        for name, value in s.entries:
            if name in scalars or name in literal_ok or name in extra:
                continue
            if name in {d.name for d in op.dims}:
                report.error(
                    s.loc,
                    f"{what} gives derived dim '{name}'; it is computed from the other sizes",
                )
            elif name not in p.bound and name not in r.sample_dims:
                report.error(
                    s.loc,
                    f"{what} gives '{name}', which is neither a dim, a scalar argument nor an input{did_you_mean(name, list(p.bound) + list(scalars))}",
                )
            elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
                report.error(
                    s.loc, f"size of dim '{name}' must be a non-negative integer, got {value!r}"
                )
        _sizes(r, s, report, what)
        if needs_batch and s.batch is None:
            report.error(s.loc, f"{what} does not give 'batch' (the sizes of '...')")
        if not needs_batch and s.batch is not None:
            report.error(s.loc, f"{what} gives 'batch' but no input has '...'")


def _dtypes(r: ResolvedOp, report: Report) -> None:
    """Test dtypes are allowed for the primary input, and each tested dtype has tolerances."""
    op, t = r.op, r.op.tests
    first = op.primary if op.primary.dtypes else None
    allowed = first.dtypes if first else ()
    for dt in t.dtypes:
        if allowed and dt not in allowed:
            report.error(
                t.loc,
                f"test dtype '{dt.torch_name}' is not allowed for input '{first.name}' ({one_of(d.torch_name for d in allowed)})",
            )
    tested = t.dtypes or allowed
    for what, table in (("tolerance", t.tolerance), ("grad_tolerance", t.grad_tolerance)):
        have = {d for d, _ in table}
        for dt in tested:
            if dt not in have:
                report.error(t.loc, f"tests have no {what} for dtype '{dt.torch_name}'")
        if t.grad_tolerance is t.tolerance:
            break  # no grad_tolerance given: the forward tolerance serves both


def _varlen(r: ResolvedOp, report: Report) -> None:
    op, t, p = r.op, r.op.tests, r.plan
    v = t.varlen
    arg = op.forward.schema.argument(v.offsets)
    if arg is None or not arg.is_tensor or not arg.optional:
        report.error(
            v.loc,
            f"varlen offsets '{v.offsets}' must be an optional tensor input (Tensor?)",
        )
    elif not any(s.get(v.offsets) is not None for s in t.samples):
        report.error(v.loc, f"no sample gives '{v.offsets}', so the varlen test would not run")
    if v.dim not in p.bound:
        report.error(v.loc, f"varlen dim '{v.dim}' is not a dim bound by the inputs")
    for out in op.outputs:
        if out.count is not None:
            report.error(
                v.loc,
                f"varlen: output '{out.name}' is a list ('Tensor[]'), which the varlen test "
                "cannot cut into sequences; declare varlen on an operator without list outputs",
            )
    for name in v.per_sequence:
        if op.input(name) is None and op.output(name) is None:
            report.error(
                v.loc,
                f"varlen per_sequence names '{name}', which is neither an input nor an output",
            )


def _sizes(r: ResolvedOp, sample, report: Report, what: str = "sample") -> None:
    """Every derived dim and input size of ``sample`` can be computed (tests build them)."""
    env = dict(sample.env())
    if any(n not in env for n in r.sample_dims):
        return  # reported above
    tensors = {}
    for d in r.op.inputs:
        literal = sample.get(d.name)
        tensors[d.name] = (len(literal),) if isinstance(literal, tuple) else ()
    # Note [flag dims]: the dims are sized for each value of the flags they test (such dims size
    # outputs only, so the inputs below read the same sizes under any of them).
    names = sorted({f for d in r.op.dims for f in d.expr.flags})
    sized = False
    for flags in _assignments(names):
        for d in r.op.dims:
            try:
                env[d.name] = d.expr.evaluate(env, tensors, flags)
            except EvaluationError as exc:
                said = ", ".join(f"{k}={v}" for k, v in flags.items())
                said = f" (with {said})" if said else ""
                report.error(
                    sample.loc, f"{what} cannot be sized: derived dim '{d.name}'{said}: {exc}"
                )
                return
            except (KeyError, IndexError):
                break  # what the expression reads is reported by the dim checks
        else:
            sized = True
    if not sized:
        return
    for decl in r.op.inputs:
        for e in decl.shape.entries:
            if e == ELLIPSIS:
                continue
            try:
                size = e.evaluate(env, tensors)
            except EvaluationError as exc:
                report.error(sample.loc, f"{what} cannot be sized: input '{decl.name}': {exc}")
                return
            except (KeyError, IndexError):
                continue
            if size < 0:
                report.error(
                    sample.loc,
                    f"{what} gives input '{decl.name}' a negative size ({e.text} = {size})",
                )
                return


def _assignments(names: list[str]) -> list[dict[str, bool]]:
    """Values of the flags ``names`` to size a sample with: every assignment of up to four
    flags, else all false, all true and each flag alone true."""
    if len(names) <= 4:
        return [{n: bool(i >> j & 1) for j, n in enumerate(names)} for i in range(1 << len(names))]
    out = [dict.fromkeys(names, False), dict.fromkeys(names, True)]
    return out + [{n: n == m for n in names} for m in names]
