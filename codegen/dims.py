"""Where each named dim comes from, and what every declared shape checks.

Inputs are read in declaration order: the first plain-name occurrence of a dim binds it (the
size of that input at that position), later occurrences and expressions become equality checks.
The ``...`` group binds to the leading dims of the first required input that has one. Dims bound
only by an optional input cannot size anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Op
from .shapes import Expr, Shape


@dataclass(frozen=True, slots=True)
class Binding:
    dim: str
    tensor: str
    index: int  # negative when counted from the end (the tensor has '...')
    optional: bool


@dataclass(frozen=True, slots=True)
class Check:
    tensor: str
    index: int
    expr: Expr


@dataclass(frozen=True, slots=True)
class TensorPlan:
    name: str
    shape: Shape
    optional: bool
    bindings: tuple[Binding, ...]
    checks: tuple[Check, ...]
    binds_batch: bool  # this tensor defines the '...' group
    checks_batch: bool  # this tensor's '...' must equal the group


@dataclass(frozen=True, slots=True)
class DimPlan:
    tensors: tuple[TensorPlan, ...]
    bound: dict[str, Binding]
    batch_source: str | None  # the tensor whose leading dims are '...'
    problems: tuple[tuple[str, str], ...]  # (tensor or output name, message)


def index_of(shape: Shape, position: int) -> int:
    """Index of entry ``position`` of ``shape`` in the tensor: from the end after '...'."""
    if not shape.has_ellipsis:
        return position
    ell = shape.entries.index("...")
    if position < ell:
        return position
    return position - len(shape.entries)


def plan(op: Op) -> DimPlan:
    schema = op.forward.schema
    bound: dict[str, Binding] = {}
    problems: list[tuple[str, str]] = []
    tensors: list[TensorPlan] = []
    batch_source = None
    scalars = {a.name for a in schema.arguments if a.type in ("int", "SymInt")}
    for decl in op.inputs:
        arg = schema.argument(decl.name)
        optional = bool(arg and arg.optional)
        bindings, checks = [], []
        for pos, entry in enumerate(decl.shape.entries):
            if entry == "...":
                continue
            idx = index_of(decl.shape, pos)
            name = entry.name
            if name is not None and name not in bound and name not in scalars:
                b = Binding(name, decl.name, idx, optional)
                bound[name] = b
                bindings.append(b)
                continue
            for n in entry.names:
                if n not in bound and n not in scalars:
                    problems.append((decl.name, f"dim '{n}' in '{entry.text}' is not bound by an earlier input"))
                elif n in bound and bound[n].optional and not optional:
                    problems.append((decl.name, f"dim '{n}' is bound only by optional input '{bound[n].tensor}'"))
            checks.append(Check(decl.name, idx, entry))
        binds_batch = checks_batch = False
        if decl.shape.has_ellipsis:
            if batch_source is None and not optional:
                batch_source = decl.name
                binds_batch = True
            else:
                checks_batch = True
        tensors.append(TensorPlan(decl.name, decl.shape, optional, tuple(bindings), tuple(checks), binds_batch, checks_batch))
    if batch_source is None and any(t.checks_batch for t in tensors):
        problems.append((tensors[0].name, "'...' is used only by optional inputs"))
    for out in op.outputs:
        if out.shape.has_ellipsis and batch_source is None:
            problems.append((out.name, "output shape uses '...' but no required input has '...'"))
        for entry in out.shape.entries:
            if entry == "...":
                continue
            for n in entry.names:
                if n in scalars:
                    continue
                if n not in bound:
                    problems.append((out.name, f"dim '{n}' of output '{out.name}' is not bound by any input"))
                elif bound[n].optional:
                    problems.append((out.name, f"dim '{n}' of output '{out.name}' is bound only by optional input '{bound[n].tensor}'"))
    return DimPlan(tuple(tensors), bound, batch_source, tuple(problems))
