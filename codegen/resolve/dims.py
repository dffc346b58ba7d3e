"""Where each named dim comes from, and what every declared shape checks.

Inputs are read in declaration order: the first plain-name occurrence of a dim binds it (the
size of that input at that position), later occurrences and expressions become equality checks.
The ``...`` group binds to the leading dims of the first required input that has one. Dims bound
only by an optional input cannot size anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.model import Op, OutputDecl
from ..spec.shapes import Expr, Shape


@dataclass(frozen=True, slots=True)
class Binding:
    dim: str
    tensor: str  # "" for a derived dim (computed from its expression)
    index: int  # negative when counted from the end (the tensor has '...')
    optional: bool

    @property
    def derived(self) -> bool:
        return not self.tensor


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
    derived = {d.name for d in op.dims}
    dynamic = {name for name, _ in op.dynamic_dims}
    optional_names = {a.name for a in schema.arguments if a.optional}
    # Required inputs first, so derived dims (and optional inputs) can use what they bind.
    # List inputs (Tensor[]) bind no dims: their elements are checked one by one.
    ordered = [d for d in op.inputs if d.name not in optional_names and not d.is_list] + [
        d for d in op.inputs if d.name in optional_names and not d.is_list
    ]
    derived_done = False
    for decl in ordered:
        optional = decl.name in optional_names
        if optional and not derived_done:
            derived_done = True
            _derived(op, bound, problems)
        bindings, checks = [], []
        for pos, entry in enumerate(decl.shape.entries):
            if entry == "...":
                continue
            idx = index_of(decl.shape, pos)
            name = entry.name
            if name is not None and name in dynamic:
                problems.append(
                    (
                        decl.name,
                        f"dim '{name}' is dynamic (data-dependent) and cannot size an input",
                    )
                )
                continue
            if (
                name is not None
                and name not in bound
                and name not in scalars
                and name not in derived
            ):
                b = Binding(name, decl.name, idx, optional)
                bound[name] = b
                bindings.append(b)
                continue
            for n in entry.names:
                if n not in bound and n not in scalars:
                    where = (
                        "a derived dim used before the required inputs bind it"
                        if n in derived
                        else "not bound by an earlier input"
                    )
                    problems.append((decl.name, f"dim '{n}' in '{entry.text}' is {where}"))
                elif n in bound and bound[n].optional and not optional:
                    problems.append(
                        (
                            decl.name,
                            f"dim '{n}' is bound only by optional input '{bound[n].tensor}'",
                        )
                    )
            checks.append(Check(decl.name, idx, entry))
        binds_batch = checks_batch = False
        if decl.shape.has_ellipsis:
            if batch_source is None and not optional:
                batch_source = decl.name
                binds_batch = True
            else:
                checks_batch = True
        tensors.append(
            TensorPlan(
                decl.name,
                decl.shape,
                optional,
                tuple(bindings),
                tuple(checks),
                binds_batch,
                checks_batch,
            )
        )
    if not derived_done:
        _derived(op, bound, problems)
    by_flags = flag_dims(op)
    for decl in op.inputs:
        for entry in decl.shape.entries:
            for n in () if entry == "..." else entry.names:
                if n in by_flags:
                    flags = ", ".join(f"'{f}'" for f in by_flags[n])
                    problems.append(
                        (
                            decl.name,
                            f"dim '{n}' of input '{decl.name}' reads bool argument {flags}: a "
                            "dim that reads a flag may size outputs only",
                        )
                    )
    if batch_source is None and any(t.checks_batch for t in tensors):
        problems.append((tensors[0].name, "'...' is used only by optional inputs"))
    for out in op.outputs:
        if out.shape.has_ellipsis and batch_source is None:
            problems.append((out.name, "output shape uses '...' but no required input has '...'"))
        per_element = element_dims(op, out, set(bound) | scalars | derived)
        for entry in out.shape.entries:
            if entry == "...":
                continue
            for n in entry.names:
                if n in scalars or n in dynamic or n in per_element:
                    continue
                if n not in bound:
                    problems.append(
                        (out.name, f"dim '{n}' of output '{out.name}' is not bound by any input")
                    )
                elif bound[n].optional:
                    problems.append(
                        (
                            out.name,
                            f"dim '{n}' of output '{out.name}' is bound only by optional input '{bound[n].tensor}'",
                        )
                    )
    return DimPlan(tuple(tensors), bound, batch_source, tuple(problems))


def element_dims(op: Op, out: OutputDecl, known: set[str]) -> dict[str, tuple[str, int]]:
    """Note [list returns]: the dims of list output ``out`` that element i of a list input sizes
    (dim -> (list input, index)), where its ``count`` names a 'Tensor[]' input: each dim of its
    shape that no plain input, scalar or derived dim (``known``) gives, read from the first list
    input that has it as a plain entry, the count's own list first. The public function checks
    that every other list read so has as many elements as the count's."""
    count = out.count
    arg = op.forward.schema.argument(count) if isinstance(count, str) else None
    if arg is None or arg.type != "Tensor[]" or op.input(count) is None:
        return {}
    lists = [op.input(count)] + [d for d in op.inputs if d.is_list and d.name != count]
    out_dims: dict[str, tuple[str, int]] = {}
    for entry in out.shape.entries:
        for n in () if entry == "..." else entry.names:
            if n in known or n in out_dims:
                continue
            for decl in lists:
                a = op.forward.schema.argument(decl.name)
                if a is None or a.type != "Tensor[]":
                    continue
                pos = next(
                    (i for i, e in enumerate(decl.shape.entries) if e != "..." and e.name == n),
                    None,
                )
                if pos is not None:
                    out_dims[n] = (decl.name, index_of(decl.shape, pos))
                    break
    return out_dims


def _derived(op: Op, bound: dict[str, Binding], problems: list[tuple[str, str]]) -> None:
    inputs = {d.name for d in op.inputs}
    optional = {a.name for a in op.forward.schema.arguments if a.optional}
    arguments = {a.name: a for a in op.forward.schema.arguments}
    for d in op.dims:
        for f in d.expr.flags:
            problem = _flag_problem(d.name, f, arguments.get(f))
            if problem is not None:
                problems.append((f"dim:{d.name}", problem))
        for n in d.expr.names:
            a = arguments.get(n)
            if a is not None and a.type in ("bool", "bool?"):
                problems.append(
                    (
                        f"dim:{d.name}",
                        f"derived dim '{d.name}' reads bool argument '{n}' as a number; a bool "
                        f"argument may only be a condition: 'a if {n} else b'",
                    )
                )
                continue
            if n not in bound or bound[n].optional:
                problems.append(
                    (
                        f"dim:{d.name}",
                        f"derived dim '{d.name}' reads '{n}', which no required input binds",
                    )
                )
        for t in d.expr.tensors:
            if t not in inputs:
                problems.append(
                    (f"dim:{d.name}", f"derived dim '{d.name}' reads '{t}', which is not an input")
                )
            elif t in optional and f"{t} is" not in d.expr.text:
                problems.append(
                    (
                        f"dim:{d.name}",
                        f"derived dim '{d.name}' reads optional '{t}' without testing '{t} is None'",
                    )
                )
        if d.name in bound:
            problems.append(
                (
                    f"dim:{d.name}",
                    f"dim '{d.name}' is bound by input '{bound[d.name].tensor}' and also derived",
                )
            )
            continue
        bound[d.name] = Binding(d.name, "", 0, False)


def _flag_problem(dim: str, flag: str, arg) -> str | None:
    """Why ``flag``, tested in derived dim ``dim`` as ``a if <flag> else b``, cannot be (None:
    it is a ``bool`` argument of the forward schema)."""
    where = f"derived dim '{dim}' tests '{flag}'"
    if arg is None:
        return (
            f"{where}, which is not an argument of the forward schema; a condition is "
            "'<input> is None', '<input> is not None' or the name of a bool argument"
        )
    if arg.is_tensor or arg.is_tensor_list:
        return f"{where}, a tensor; test a tensor input with '{flag} is None'"
    if arg.type != "bool":
        return f"{where}, which is '{arg.type}'; only a bool argument may be a condition"
    return None


def flag_dims(op: Op) -> dict[str, tuple[str, ...]]:
    """Note [flag dims]: each derived dim that reads a bool argument, directly or through another
    derived dim, and the arguments it reads (a dim sized by the call's flags sizes outputs only:
    the tests make inputs from the sample alone)."""
    out: dict[str, tuple[str, ...]] = {}
    for d in op.dims:  # declaration order: a dim reads only the dims declared before it
        flags = list(d.expr.flags)
        for n in d.expr.names:
            flags.extend(f for f in out.get(n, ()) if f not in flags)
        if flags:
            out[d.name] = tuple(flags)
    return out


def bind_from(op: Op, dim_plan: DimPlan, dim: str, available: set[str]) -> Binding | None:
    """Where ``dim`` can be read among the required tensors in ``available``.

    The plan's own binding first; otherwise any available input that has the dim as a plain
    entry (the backward often takes ``k`` but not ``q``, which share their dims).
    """
    b = dim_plan.bound.get(dim)
    if b is not None and (b.derived or b.tensor in available):
        return b
    for decl in op.inputs:
        if decl.name not in available:
            continue
        for pos, entry in enumerate(decl.shape.entries):
            if entry != "..." and entry.name == dim:
                return Binding(dim, decl.name, index_of(decl.shape, pos), False)
    return None
