"""The inputs section: ``make_inputs`` (the public function's keyword arguments for a sample,
dtype and configuration), ``backward_args`` (the backward operator's), and the cases and the
suite built on them. The generated benchmark draws its inputs with the same records and the same
``templates/inputs.jinja`` macro."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp, Role
from ...resolve.symbols import batch_local
from ...spec.shapes import ELLIPSIS
from ..op.base import Statement
from .common import OpTests
from .domains import clamped
from .indexes import index_bound


@dataclass(frozen=True, slots=True)
class LiteralInput:
    """An input whose values a sample spells out (sequence offsets)."""

    name: str
    dtype: str


@dataclass(frozen=True, slots=True)
class MadeInput:
    """An input drawn from a seeded generator: ``_t.<init>(_gen, <shape>, <dtype>)``."""

    name: str
    init: str
    shape: str  # tuple expression over the sample's dims
    dtype: str  # expression: _dt, torch.float32, q.dtype
    optional: bool  # given only in configurations that give it
    elements: int = 0  # a list input: how many elements (0: a single tensor)
    holes: bool = False  # a Tensor?[] input: its last element is None
    # An index input (init "index"): the expression of the size its entries index, and whether
    # negative entries skip (then some are drawn negative).
    bound: str = ""
    skip: bool = False


@dataclass(frozen=True, slots=True)
class Entry:
    """One argument of a call built by name.

    ``kind``: ``tensor`` (the local of that name), ``variant`` (the configuration's value),
    ``default`` (the sample's value, else ``default``), ``required`` (the sample's value),
    ``input`` (the forward input of that name), ``grad`` (random, shaped like ``source``).
    """

    name: str
    kind: str
    default: object = None
    source: str = ""
    optional: bool = False


@dataclass(frozen=True, slots=True)
class InputsView:
    batch: str | None  # the local holding the sample's '...' sizes, if any tensor has '...'
    dims: tuple[str, ...]
    literals: tuple[LiteralInput, ...]
    derived: tuple[Statement, ...]
    made: tuple[MadeInput, ...]
    entries: tuple[Entry, ...]
    # Drawn inputs whose init reaches outside their declared domain: (name, (lower, upper)),
    # clamped into it after drawing (bounds as ``repr`` strings: "-inf" is no Python literal).
    clamped: tuple[tuple[str, tuple[str, str]], ...] = ()


@dataclass(frozen=True, slots=True)
class BackwardView:
    flag: str | None
    targets: tuple[str, ...]  # forward outputs
    wide_targets: tuple[str, ...]  # outputs of the arity twin
    extras: tuple[str, ...]
    entries: tuple[Entry, ...]
    inputs: tuple[str, ...]  # forward inputs the backward takes (permutable there)
    incoming: tuple[str, ...]  # incoming gradients
    saved: tuple[str, ...] = ()  # forward outputs the backward takes (saved by the Function)


def inputs_view(t: OpTests) -> InputsView:
    r, op = t.r, t.op
    literal = set(r.literal_inputs)
    literals = tuple(
        LiteralInput(d.name, d.dtypes[0].torch_name if d.dtypes else "int32")
        for d in op.inputs
        if d.name in literal
    )
    made = []
    tested = set(t.test_dtypes())
    free = _free_list_dims(r)
    for d in op.inputs:
        if d.name in literal:
            continue
        shape = _made_shape(d, free, batch_local(op))
        if d.same_dtype_as is not None:
            dtype = f"{d.same_dtype_as}.dtype"
        elif set(d.dtypes) >= tested:
            dtype = "_dt"
        else:
            dtype = f"torch.{d.dtypes[0].torch_name}"
        arg = t.fwd.argument(d.name)
        holes = bool(d.is_list and arg is not None and arg.type.startswith("Tensor?"))
        made.append(
            MadeInput(
                d.name,
                d.init,
                shape,
                dtype,
                d.name in r.optional_inputs,
                elements=(3 if holes else 2) if d.is_list else 0,
                holes=holes,
                bound=index_bound(r, d),
                skip=d.skips_negative,
            )
        )
    entries = []
    for a in t.fwd.arguments:
        if a.is_tensor or a.is_tensor_list:
            entries.append(Entry(a.name, "tensor"))
        elif op.variant(a.name) is not None:
            entries.append(Entry(a.name, "variant"))
        elif a.has_default:
            entries.append(Entry(a.name, "default", a.default_value))
        else:
            entries.append(Entry(a.name, "required"))
    return InputsView(
        batch=batch_local(op)
        if r.plan.batch_source is not None
        or any(d.is_list and d.shape.has_ellipsis for d in op.inputs)
        else None,
        dims=r.sample_dims,
        literals=literals,
        derived=_derived_for_inputs(op),
        made=tuple(made),
        entries=tuple(entries),
        clamped=clamped(op, literal),
    )


def backward_view(r: ResolvedOp) -> BackwardView | None:
    if r.backward is None:
        return None
    entries = []
    for a in r.backward_args:
        if a.role is Role.GRADIENT:
            entries.append(Entry(a.name, "grad", source=a.source, optional=a.optional))
        elif a.role is Role.ARGUMENT:
            entries.append(Entry(a.name, "input"))
        else:
            entries.append(Entry(a.name, "tensor"))
    base = tuple(o.name for o in r.op.outputs if o.name not in r.pair_extras)
    taken = {a.name for a in r.backward_args}
    return BackwardView(
        flag=r.flag,
        targets=base,
        wide_targets=base + r.pair_extras,
        extras=r.pair_extras,
        entries=tuple(entries),
        inputs=tuple(d.name for d in r.op.inputs if d.name in taken),
        incoming=tuple(a.name for a in r.backward_args if a.role is Role.GRADIENT),
        saved=tuple(a.name for a in r.backward_args if a.role is Role.SAVED),
    )


def _derived_for_inputs(op) -> tuple[Statement, ...]:
    """The derived dims that the made inputs' shapes read, directly or through another derived
    dim, in declaration order (a dim that only sizes outputs is not computed)."""
    by_name = {d.name: d for d in op.dims}
    needed: set[str] = set()
    frontier = [
        n for d in op.inputs for e in d.shape.entries if not isinstance(e, str) for n in e.names
    ]
    while frontier:
        name = frontier.pop()
        if name in needed:
            continue
        needed.add(name)
        if name in by_name:
            frontier.extend(by_name[name].expr.names)
    return tuple(Statement(d.name, d.expr.render({})) for d in op.dims if d.name in needed)


def _tuple_expr(parts: list[str]) -> str:
    return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def _made_shape(d, free: set[str], batch: str) -> str:
    """The shape expression of a made input; in a list, the dims free per element take another
    size in each element (element ``_i``: the sample's size + ``_i``)."""
    rename = {n: f"({n} + _i)" for n in free} if d.is_list else {}
    return _tuple_expr(
        [
            f"*{batch}"
            if e == ELLIPSIS
            else f"{e.name} + _i"
            if e.name in rename
            else e.render(rename)
            for e in d.shape.entries
        ]
    )


def _free_list_dims(r: ResolvedOp) -> set[str]:
    """The dims only list inputs use (free per element), which each sample sizes."""
    bound = set(r.plan.bound) | {d.name for d in r.op.dims}
    scalars = {a.name for a in r.op.forward.schema.arguments if a.is_scalar}
    return {
        n
        for d in r.op.inputs
        if d.is_list
        for e in d.shape.entries
        if e != ELLIPSIS
        for n in e.names
        if n not in bound and n not in scalars
    }
