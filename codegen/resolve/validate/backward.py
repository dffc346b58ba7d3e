"""Checks the backward schema against the forward: argument roles, gradients, and its fake. Each
backward argument is a forward argument of the same type, a saved forward output, or the gradient of
a public output (optional exactly for the arity pair's extras), as the resolved op's roles say; each
return is ``grad_<input>`` of a differentiable input, every floating differentiable input has one,
and the backward takes what its fake needs to size and type each gradient. Without a backward, every
output must be public.
"""

from __future__ import annotations

from ...spec.shapes import ELLIPSIS
from ..backward_fake import backward_tensors, dtype_source, reads
from ..dims import flag_dims
from ..resolved import GRAD_PREFIX, ResolvedOp, Role
from .report import Report
from .tensors import allowed_dtypes


def backward(r: ResolvedOp, report: Report) -> None:
    op = r.op
    _absent_gradients(r, report)
    if op.backward is None:
        for out in op.outputs:
            if not out.public:
                report.error(
                    out.loc,
                    f"output '{out.name}' is not public and there is no backward to use it",
                )
        return
    used = _arguments(r, report)
    for out in op.outputs:
        if not out.public and out.name not in used:
            report.error(
                out.loc,
                f"output '{out.name}' is neither public nor used by the backward schema",
            )
    grads = _returns(r, report)
    _fake(r, report, grads)
    for decl in op.inputs:
        arg = op.forward.schema.argument(decl.name)
        if arg is None or not arg.is_tensor:
            continue
        if (
            decl.differentiable
            and decl.name not in grads
            and any(d.is_floating for d in allowed_dtypes(op, decl))
        ):
            report.error(
                decl.loc,
                f"input '{decl.name}' has no gradient in the backward schema; return 'grad_{decl.name}' or mark it 'differentiable: false'",
            )


def _arguments(r: ResolvedOp, report: Report) -> set[str]:
    """Checks each backward argument by its role; returns the saved outputs it uses."""
    op = r.op
    bwd, loc = op.backward.schema, op.backward.schema_loc
    fwd = op.forward.schema
    public = set(r.public_outputs)
    used = set()
    for arg, role in zip(bwd.arguments, r.backward_args, strict=True):
        if arg.is_write or arg.alias:
            report.error(
                loc, f"backward schema: argument '{arg.name}' must not be aliased or mutated"
            )
        if role.role is Role.GRADIENT:
            if role.source not in public:
                report.error(
                    loc,
                    f"backward schema: '{arg.name}' is the gradient of output '{role.source}', which is not public",
                )
            elif not arg.is_tensor:
                report.error(loc, f"backward schema: '{arg.name}' must be a Tensor")
            elif arg.optional != (role.source in r.pair_extras):
                kind = (
                    "Tensor? (None when the flag is false)" if arg.optional is False else "Tensor"
                )
                report.error(loc, f"backward schema: '{arg.name}' must be {kind}")
            continue
        if role.role is Role.ARGUMENT:
            fa = fwd.argument(arg.name)
            if fa.type != arg.type:
                report.error(
                    loc,
                    f"backward schema: '{arg.name}' is {arg.type} here but {fa.type} in the forward schema",
                )
            continue
        if role.role is Role.SAVED:
            used.add(arg.name)
            if arg.type != "Tensor":
                report.error(loc, f"backward schema: saved output '{arg.name}' must be a Tensor")
            continue
        grads = ", ".join(f"grad_{o}" for o in sorted(public))
        report.error(
            loc,
            f"backward schema: argument '{arg.name}' is neither a forward argument, a forward output, nor an incoming gradient ({grads})",
        )
    return used


def _returns(r: ResolvedOp, report: Report) -> set[str]:
    """Checks that each backward return differentiates an input; returns the inputs that have one."""
    op = r.op
    bwd, loc = op.backward.schema, op.backward.schema_loc
    grads = set()
    for i, (ret, grad) in enumerate(zip(bwd.returns, r.gradients, strict=True)):
        name = ret.name
        if name is None or not name.startswith(GRAD_PREFIX):
            report.error(
                loc,
                f"backward schema: return {i} must be named 'grad_<input>' to say which input it differentiates",
            )
            continue
        if grad.input is None:
            report.error(
                loc,
                f"backward schema: return '{name}' names no tensor input '{name[len(GRAD_PREFIX) :]}'",
            )
            continue
        target = op.input(grad.input)
        if not target.differentiable:
            report.error(
                loc,
                f"backward schema: input '{target.name}' is marked 'differentiable: false' but has gradient '{name}'",
            )
        grads.add(grad.input)
    return grads


def _fake(r: ResolvedOp, report: Report, grads: set[str]) -> None:
    """The backward fake sizes each gradient from the backward's own arguments."""
    op, bwd = r.op, r.op.backward.schema
    loc = op.backward.schema_loc
    required = {a.name for a in bwd.arguments if a.is_tensor and not a.optional}
    present = {a.name for a in bwd.arguments}
    tensors = backward_tensors(op)
    for name in sorted(grads):
        decl = op.input(name)
        arg = op.forward.schema.argument(name)
        if decl is None or arg is None:
            continue
        if arg.optional and name not in present:
            report.error(
                loc,
                f"backward schema: returns 'grad_{name}' of optional input '{name}' but does not take '{name}', so the autograd.Function cannot tell whether it was given",
            )
        if name in required:
            continue
        _fake_sizes(r, report, tensors, name)
        if dtype_source(op, tensors, name) is not None:
            continue  # a tensor the backward takes has the input's dtype
        if not decl.same_dtype_as and len(decl.dtypes) > 1:
            report.error(
                loc,
                f"backward schema: the fake of 'grad_{name}' cannot know its dtype ({'/'.join(d.torch_name for d in decl.dtypes)}) without a required '{name}' argument or a tensor declared with its dtype",
            )
        elif decl.same_dtype_as and decl.same_dtype_as not in required:
            report.error(
                loc,
                f"backward schema: the fake of 'grad_{name}' takes the dtype of '{decl.same_dtype_as}'; add it to the backward arguments",
            )


def _fake_sizes(r: ResolvedOp, report: Report, tensors, name: str) -> None:
    """Each dim of input ``name``'s shape is read from some tensor the backward takes
    (Note [backward fake sources] in resolve/backward_fake.py)."""
    op, p = r.op, r.plan
    loc = op.backward.schema_loc
    decl = op.input(name)
    needed = {n for e in decl.shape.entries if e != ELLIPSIS for n in e.names}
    found = reads(op, p, tensors, needed, decl.shape.has_ellipsis)
    derived = {d.name: d for d in op.dims}
    scalars = {a.name for a in op.forward.schema.arguments if a.is_scalar}
    by_flags = flag_dims(op)
    for dim in found.missing:
        if dim in by_flags:
            continue  # an input sized by a flag is refused at the input (resolve/dims.py)
        if dim == ELLIPSIS:
            report.error(
                loc,
                f"backward schema: the fake of 'grad_{name}' cannot size the leading dims '...' of "
                f"{decl.shape}: no tensor the backward takes has them; add '{p.batch_source}' (or "
                "another tensor whose shape has '...') to the backward arguments",
            )
            continue
        if dim in scalars:
            add = f"the argument '{dim}'"
        elif dim in derived:
            read = derived[dim].expr.tensors + derived[dim].expr.flags
            absent = [t for t in read if t not in tensors.present]
            add = " and ".join(f"'{t}'" for t in absent) or "the tensors it reads"
            add = f"{add} (read by derived dim '{dim}') or another tensor with dim '{dim}'"
        else:
            source = p.bound[dim].tensor if dim in p.bound else name
            add = f"'{source}' (or another tensor with dim '{dim}')"
        report.error(
            loc,
            f"backward schema: the fake of 'grad_{name}' cannot size dim '{dim}' of {decl.shape}: "
            f"no tensor the backward takes has it; add {add} to the backward arguments",
        )


def _absent_gradients(r: ResolvedOp, report: Report) -> None:
    """``absent_gradient`` is written only on an optional input that has a gradient."""
    op = r.op
    for decl in op.inputs:
        if decl.absent_gradient_loc is None:
            continue
        arg = op.forward.schema.argument(decl.name)
        if arg is None or not arg.is_tensor:
            continue  # reported by the input checks
        where = f"'absent_gradient' of input '{decl.name}'"
        if not arg.optional:
            report.error(
                decl.absent_gradient_loc,
                f"{where} applies only to optional inputs (Tensor?); '{decl.name}' is always given",
            )
        elif op.backward is None:
            report.error(
                decl.absent_gradient_loc, f"{where} needs a backward; the operator has none"
            )
        elif r.gradient_of(decl.name) is None:
            report.error(
                decl.absent_gradient_loc,
                f"{where} needs a gradient; the backward schema returns no 'grad_{decl.name}'",
            )
