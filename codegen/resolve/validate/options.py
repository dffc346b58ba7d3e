"""Checks what an operator offers beyond one forward call, against its forward schema. The arity
pair (same arguments, the forward's returns then extra ones, a flag that collides with nothing,
public extra outputs), variants (values of the argument's type, the default among them), constraints
(dims some input binds, an optional tensor for 'when', samples that satisfy them), and the
integration (triton_op and eager register one launcher for every device).
"""

from __future__ import annotations

from ...spec.errors import did_you_mean
from ...spec.model import Integration
from ..resolved import ResolvedOp
from ..triton_op import differences
from .report import Report


def arity_pair(r: ResolvedOp, report: Report) -> None:
    op, pair = r.op, r.op.arity_pair
    fwd = op.forward.schema
    loc = pair.schema_loc
    ours = [(a.name, a.type, a.default, a.is_write, a.kwarg_only) for a in pair.schema.arguments]
    theirs = [(a.name, a.type, a.default, a.is_write, a.kwarg_only) for a in fwd.arguments]
    if ours != theirs:
        report.error(loc, "arity_pair schema must take exactly the arguments of the forward schema")
    n = len(fwd.returns)
    if [r.name for r in pair.schema.returns[:n]] != [r.name for r in fwd.returns]:
        report.error(
            loc,
            "arity_pair schema must return the forward schema's returns first, then the extra ones",
        )
    elif len(pair.schema.returns) == n:
        report.error(
            loc, "arity_pair schema adds no return; the pair differs only by trailing returns"
        )
    if fwd.argument(pair.flag) is not None or op.output(pair.flag) is not None:
        report.error(
            pair.loc, f"arity_pair flag '{pair.flag}' collides with an argument or output name"
        )
    if pair.after is not None and fwd.argument(pair.after) is None:
        report.error(pair.loc, f"arity_pair 'after' names no forward argument: '{pair.after}'")
    for extra in r.pair_extras:
        out = op.output(extra)
        if out is not None and not out.public:
            report.error(out.loc, f"output '{extra}' of the arity pair must be public")


def variants(r: ResolvedOp, report: Report) -> None:
    fwd = r.op.forward.schema
    types = {"str": str, "int": int, "SymInt": int, "bool": bool, "float": (int, float)}
    for v in r.op.variants:
        arg = fwd.argument(v.arg)
        if arg is None or arg.type not in types:
            scalars = [a.name for a in fwd.arguments if a.type in types]
            report.error(
                v.loc,
                f"variant '{v.arg}' is not a str/int/bool/float argument of the forward schema{did_you_mean(v.arg, scalars)}",
            )
            continue
        for value in v.values:
            ok = isinstance(value, types[arg.type]) and (
                arg.type == "bool" or not isinstance(value, bool)
            )
            if not ok:
                report.error(v.loc, f"variant value {value!r} is not a {arg.type}")
        if arg.has_default and not any(
            type(arg.default_value) is type(x) and arg.default_value == x for x in v.values
        ):
            report.error(
                v.loc,
                f"the schema default of '{v.arg}' ({arg.default}) is not one of its variant values",
            )


def constraints(r: ResolvedOp, report: Report) -> None:
    op = r.op
    p = r.plan
    fwd = op.forward.schema
    for c in op.constraints:
        for n in c.check.names:
            if n not in p.bound:
                report.error(
                    c.loc, f"constraint '{c.check.text}' reads '{n}', which no input binds"
                )
        if c.when is not None:
            arg = fwd.argument(c.when)
            if arg is None or not arg.is_tensor or not arg.optional:
                report.error(
                    c.loc,
                    f"constraint 'when' must name an optional tensor input, got '{c.when}'",
                )
        literal = r.literal_inputs
        for s in op.tests.samples:
            # A literal input is given only by the samples that spell it out; other optional
            # inputs are given in some test configuration of every sample.
            if c.when in literal and s.get(c.when) is None:
                continue
            env = s.env()
            if all(n in env for n in c.check.names) and not c.check.holds(env):
                report.error(s.loc, f"sample breaks constraint '{c.check.text}'")


def integration(r: ResolvedOp, report: Report) -> None:
    op = r.op
    if op.eager_fast_path and op.integration is Integration.EAGER:
        report.error(
            op.eager_fast_path_loc,
            "eager_fast_path needs the opaque or triton_op integration, not 'eager': an eager "
            "operator never goes through the dispatcher",
        )
    if op.side_effects and op.integration is not Integration.OPAQUE:
        report.error(
            op.side_effects_loc,
            f"side_effects needs the opaque integration, not '{op.integration.value}': "
            "torch.compile traces this integration's launcher, so what it does outside its "
            "tensors would run once while tracing instead of at every call",
        )
    if op.integration.value == "opaque":
        return
    for stage in (op.forward, op.backward):
        listed = [lch for lch in stage.launchers if lch.backend is not None] if stage else []
        if listed:
            report.error(
                listed[0].loc,
                f"integration '{op.integration.value}' cannot choose among CUDA backends: the "
                "choice runs on real tensors, which only the opaque integration's CUDA "
                "implementation sees (a traced choice would be baked into compiled graphs)",
            )
            continue
        if stage is not None and len({launcher.ref for launcher in stage.launchers}) != 1:
            report.error(
                stage.loc,
                f"integration '{op.integration.value}' registers one launcher for every device; use the same 'module:function' for each",
            )
    if op.integration is Integration.TRITON_OP:
        # triton_op registers the schema it infers from the shim, not the written one.
        for stage, source in zip(r.stages, _sources(op), strict=True):
            for problem in differences(stage.names.qualname, stage.schema):
                report.error(
                    source.schema_loc,
                    f"integration 'triton_op': {problem}; write the schema as triton_op registers "
                    "it, or use the opaque integration",
                )


def _sources(op):
    """The spec stage each resolved stage was written in (the arity twin's own schema node)."""
    out = [op.forward]
    if op.arity_pair is not None:
        out.append(op.arity_pair)
    if op.backward is not None:
        out.append(op.backward)
    return out


def layouts(r: ResolvedOp, report: Report) -> None:
    """Each layout contract's contiguous_dim exists in the tensor's declared shape."""
    op = r.op
    for stage in (op.forward, op.backward):
        for launcher in stage.launchers if stage else ():
            for rule in launcher.layout:
                shape = _declared_shape(r, rule.tensor)
                if shape is None:
                    continue  # a backward argument of no declared shape: checked at run time
                before, after = len(shape.before), len(shape.after)
                d = rule.contiguous_dim
                ok = -after <= d < before if shape.has_ellipsis else -before <= d < before
                if not ok:
                    report.error(
                        rule.loc,
                        f"layout of '{rule.tensor}': contiguous_dim {d} is not a dim of its "
                        f"declared shape {shape}",
                    )


def _declared_shape(r: ResolvedOp, name: str):
    op = r.op
    if (decl := op.input(name)) is not None:
        return decl.shape
    if (out := op.output(name)) is not None:
        return out.shape
    if name.startswith("grad_") and (out := op.output(name[5:])) is not None:
        return out.shape
    return None
