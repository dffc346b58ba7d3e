"""Where the backward's fake reads the sizes and dtype of each gradient it allocates.

Note [backward fake sources]: a gradient has its input's declared shape and dtype. The fake reads
each dim of that shape from any tensor the backward takes whose declared shape has the dim as a
plain entry, in this order: the tensor that binds it in the forward (``dims.plan``), the other
forward inputs passed to the backward, then the backward's other required tensors in schema
order: saved outputs and incoming gradients ``grad_<output>``, which have their output's
declared shape. So a backward need not take an input only for its sizes: ``grad_out`` has them.
The ``...`` group is read the same way (the forward's own source first); a derived dim from its
expression when the backward takes every tensor it reads, else like any dim; an ``int``
argument used as a dim is the backward's argument of that name, else read like any dim.

The dtype of a gradient is its input's when the backward takes the input; else the declared one
(the one listed, or that of the input named by ``dtype:``); else that of a tensor the backward
takes whose dtype is declared to be the input's: an input with ``dtype: <input>``, or an output
(saved, or its incoming gradient, which autograd gives the output's dtype) with ``dtype: <input>``.

``validate/backward.py`` reports what cannot be read, the views print what can: both ask here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.model import Op
from ..spec.shapes import ELLIPSIS, Shape
from .dims import Binding, DimPlan, bind_from, index_of


@dataclass(frozen=True, slots=True)
class BackwardTensors:
    """The backward's tensor arguments: the required ones with their declared shapes, and every
    argument name (an optional one may be read only under an ``is None`` test)."""

    shapes: dict[str, Shape]  # required tensors, in schema order
    dtype_of: dict[str, str]  # required tensor -> the input whose dtype it is declared to have
    present: frozenset[str]  # every backward argument


@dataclass(frozen=True, slots=True)
class Reads:
    """What the fake computes before allocating: ``batch`` and ``dims`` (name, expression)."""

    batch: str | None  # the expression of the '...' group, if needed
    dims: tuple[tuple[str, str], ...]
    missing: tuple[str, ...]  # dims (and '...') no backward argument gives


def backward_tensors(op: Op) -> BackwardTensors:
    outputs = {o.name: o for o in op.outputs}
    shapes: dict[str, Shape] = {}
    dtype_of: dict[str, str] = {}
    for a in op.backward.schema.arguments if op.backward else ():
        if not a.is_tensor or a.optional:
            continue
        decl = op.input(a.name)
        out = outputs.get(a.name) or outputs.get(a.name.removeprefix("grad_"))
        if decl is not None and not decl.is_list:
            shapes[a.name] = decl.shape
            dtype_of[a.name] = _dtype_root(op, decl.name)
        elif out is not None and (a.name in outputs or a.name.startswith("grad_")):
            shapes[a.name] = out.shape
            if out.dtype_of is not None:
                dtype_of[a.name] = _dtype_root(op, out.dtype_of)
    present = (
        frozenset(a.name for a in op.backward.schema.arguments) if op.backward else frozenset()
    )
    return BackwardTensors(shapes, dtype_of, present)


def _dtype_root(op: Op, name: str) -> str:
    """The input whose declared dtypes ``name``'s dtype follows (``dtype: <input>`` chains)."""
    seen = {name}
    decl = op.input(name)
    while decl is not None and decl.same_dtype_as is not None:
        if decl.same_dtype_as in seen:  # a cycle, refused by validation
            break
        seen.add(decl.same_dtype_as)
        name, decl = decl.same_dtype_as, op.input(decl.same_dtype_as)
    return name


def dtype_source(op: Op, tensors: BackwardTensors, name: str) -> str | None:
    """A required backward tensor whose dtype is input ``name``'s, or None."""
    root = _dtype_root(op, name)
    return next((t for t, r in tensors.dtype_of.items() if r == root), None)


def binding(op: Op, plan: DimPlan, dim: str, tensors: BackwardTensors) -> Binding | None:
    """Where the backward reads ``dim`` (Note [backward fake sources]); derived dims excluded."""
    b = bind_from(op, plan, dim, set(tensors.shapes))
    if b is not None and not b.derived:
        return b
    for name, shape in tensors.shapes.items():
        for pos, entry in enumerate(shape.entries):
            if entry != ELLIPSIS and entry.name == dim:
                return Binding(dim, name, index_of(shape, pos), False)
    return None


def _batch(plan: DimPlan, tensors: BackwardTensors) -> str | None:
    names = [plan.batch_source] if plan.batch_source in tensors.shapes else []
    names += [n for n, s in tensors.shapes.items() if s.has_ellipsis and n not in names]
    if not names:
        return None
    shape = tensors.shapes[names[0]]
    before, after = len(shape.before), len(shape.after)
    return f"{names[0]}.shape[{before or ''}:{f'-{after}' if after else ''}]"


def reads(op: Op, plan: DimPlan, tensors: BackwardTensors, needed: set[str], batch: bool) -> Reads:
    """The dims (and ``...``) the fake computes to size shapes over ``needed``, in the order
    the forward binds them, derived dims last, each read once."""
    derived = {d.name: d for d in op.dims}
    scalars = {a.name for a in op.forward.schema.arguments if a.type in ("int", "SymInt")}
    plain: dict[str, Binding] = {}
    exprs: set[str] = set()
    missing: list[str] = []

    def resolve(dim: str) -> bool:
        if dim in plain or dim in exprs:
            return True
        d = derived.get(dim)
        if d is not None and all(t in tensors.present for t in d.expr.tensors + d.expr.flags):
            before = (dict(plain), set(exprs))
            if all(resolve(n) for n in d.expr.names):
                exprs.add(dim)
                return True
            plain.clear()
            plain.update(before[0])
            exprs.intersection_update(before[1])
        if d is None and dim in scalars and dim in tensors.present:
            return True  # the backward's own argument of that name
        b = binding(op, plan, dim, tensors)
        if b is None:
            return False
        plain[dim] = b
        return True

    for dim in sorted(needed):
        if not resolve(dim):
            missing.append(dim)
    out = []
    order = [n for n in plan.bound if n not in derived] + [n for n in plain if n not in plan.bound]
    for name in order:
        if name in plain and name not in derived:
            out.append((name, f"{plain[name].tensor}.shape[{plain[name].index}]"))
    for d in op.dims:
        if d.name in exprs:
            out.append((d.name, d.expr.render({})))
        elif d.name in plain:
            out.append((d.name, f"{plain[d.name].tensor}.shape[{plain[d.name].index}]"))
    source = _batch(plan, tensors) if batch else None
    if batch and source is None:
        missing.append(ELLIPSIS)
    return Reads(source, tuple(out), tuple(missing))
