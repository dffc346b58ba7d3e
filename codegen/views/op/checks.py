"""The public function's checks: each tensor, list, scalar and index argument, the spec's
constraints and variants, and the module constants they compare with.

A check is data (the tests that refuse an argument, its declared shape, its dtypes constant);
``templates/op/checks.jinja`` renders each kind of check with its own macro.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from ...resolve.dims import TensorPlan, element_dims, index_of
from ...resolve.resolved import ResolvedOp
from ...spec.shapes import ELLIPSIS, Condition
from .base import OpBuilder, Statement, batch_slice, names_in, shape_expr, tuple_expr
from .notes import NoteRef, Notes
from .signature import BROADCAST, SCALAR_EXPECTED, SCALAR_TYPES, classes


@dataclass(frozen=True, slots=True)
class TensorCheck:
    """One tensor argument of the public function: one test before and one after its dims.

    ``early`` (rank, dtype, device) runs before the tensor's own dims are read; ``late`` compares
    the whole shape with the dims known by then. Either may be empty.
    """

    kind: ClassVar[str] = "tensor"
    name: str
    optional: bool
    early: tuple[str, ...]
    bindings: tuple[Statement, ...]
    late: tuple[str, ...]
    shape: str  # symbolic, e.g. [B, T, H, K]
    expected: str  # tuple expression of the expected shape
    rank: int
    variadic: bool  # the shape has '...'
    dtypes: str | None  # module constant of allowed dtypes
    dtype_of: str | None  # or: the tensor whose dtype it must have
    device_of: str | None  # the tensor whose device it must be on; None: the first tensor
    devices: tuple[str, ...]
    offsets: str | None = None  # sequence offsets partitioning this dim: values checked too


@dataclass(frozen=True, slots=True)
class ListCheck:
    """A Tensor[] argument: the list itself, then each element ``_e`` against the declaration.

    Dims bound by other inputs are compared; other dims of an element are its own (free).
    """

    kind: ClassVar[str] = "list"
    name: str
    nonempty: bool  # the fakes allocate on the device of element 0
    optional_elements: bool  # Tensor?[]: None elements are skipped
    test: str  # over ``_e``: the element is refused
    shape: str
    expected: str  # tuple expression over ``_e`` and bound dims
    rank: int
    variadic: bool
    dtypes: str | None
    dtype_of: str | None
    device_of: str | None
    devices: tuple[str, ...]
    optional: bool = False  # Tensor[]?: None passes


@dataclass(frozen=True, slots=True)
class CountCheck:
    """Note [list returns]: an int argument that gives a list output's count is >= 0."""

    name: str
    output: str


@dataclass(frozen=True, slots=True)
class LengthCheck:
    """Note [list returns]: list input ``name`` has as many elements as ``like``: a list output
    with one element per element of ``like`` reads dims from element i of both."""

    name: str
    like: str
    output: str


@dataclass(frozen=True, slots=True)
class IndexCheck:
    """An index input's entries checked in range (Note [index inputs] in _runtime), once every
    tensor's shape is checked: the dim it indexes is known by then."""

    name: str
    optional: bool
    dim: str  # the dim read as the bound
    skip: bool  # negative entries skip a slot instead of being refused
    note: NoteRef


@dataclass(frozen=True, slots=True)
class ConstraintCheck:
    test: str  # the condition under which the call is refused
    message: str  # spec text
    dims: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScalarCheck:
    """A non-tensor argument (or the arity flag), typed as its schema type says.

    Note [scalar types] (_runtime). ``kind``: ``test``, refused when ``test`` holds (an
    ``isinstance`` or two); ``list`` and ``device`` go through the runtime helper ``convert``
    (``_scalar_list``, ``_scalar_device``), which checks the argument and returns what the
    launcher receives, as the dispatcher would pass it: a new list, a ``torch.device``.
    """

    kind: Literal["test", "list", "device"]
    name: str
    types: str  # a tuple expression of classes (of the elements, for a list)
    expected: str  # how the message names the type, e.g. "float"
    optional: bool  # None is allowed
    test: str = ""  # over ``name``: the argument is refused
    convert: str = ""  # a runtime helper: scalar_list or scalar_device
    schema_type: str = ""  # a list's schema type, e.g. "int[2]"
    size: int | None = None  # a fixed-size list: how many elements
    broadcast: bool = False  # a fixed-size list of numbers takes one number too
    none_elements: bool = False  # a list of optionals (int?[]): None elements allowed
    # A fixed-size list whose schema default has another length (torch's ``int[2] stride=[]``):
    # that length is allowed too.
    default_size: int | None = None


@dataclass(frozen=True, slots=True)
class VariantCheck:
    arg: str
    constant: str
    values: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class MutationCheck:
    """An input the operator writes in place, and the tensors it must not overlap."""

    name: str
    others: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Constant:
    """A module constant: ``kind`` ``dtypes``, a tuple of torch dtypes; ``values``, a tuple of
    spec values (a variant's)."""

    kind: Literal["dtypes", "values"]
    name: str
    dtypes: tuple[str, ...] = ()  # torch dtype names
    values: tuple[object, ...] = ()


def scalar_check(name: str, schema_type: str, default: object = None) -> ScalarCheck:
    """The check of an argument of scalar schema type ``schema_type`` and schema default
    ``default`` (Note [scalar types])."""
    optional = schema_type.endswith("?")
    written = schema_type.removesuffix("?")
    m = re.fullmatch(r"(\w+)(\??)\[(\d*)\]", written)
    if m:
        element, size = m[1], int(m[3]) if m[3] else None
        return ScalarCheck(
            kind="list",
            name=name,
            types=classes(element),
            expected=SCALAR_EXPECTED.get(element, element),
            optional=optional,
            convert="scalar_list",
            schema_type=written,
            size=size,
            broadcast=size is not None and element in BROADCAST,
            none_elements=bool(m[2]),
            default_size=(
                len(default)
                if size is not None and isinstance(default, (list, tuple)) and len(default) != size
                else None
            ),
        )
    expected = SCALAR_EXPECTED.get(written, written)
    if written == "Device":
        return ScalarCheck(
            "device", name, classes(written), expected, optional, convert="scalar_device"
        )
    types = SCALAR_TYPES[written]
    test = f"not isinstance({name}, {classes(written)})"
    if "int" in types and "bool" not in types:
        test += f" or isinstance({name}, bool)"
    if optional:
        test = f"{name} is not None and " + (f"({test})" if " or " in test else test)
    return ScalarCheck("test", name, classes(written), expected, optional, test=test)


class CheckBuilder(OpBuilder):
    """Checks of the public function's arguments, in the order they run."""

    def checks(self) -> tuple[list, list[Constant]]:
        op, r = self.op, self.r
        constants: list[Constant] = []
        devices = r.devices
        read_by_dims = {name for d in op.dims for name in d.expr.tensors}
        tensors = sorted(self.plan.tensors, key=lambda t: (t.optional, t.name not in read_by_dims))
        first = next((t.name for t in tensors if not t.optional), None)
        items: list = []
        derived_done = False
        for t in tensors:
            if t.optional and t.name not in read_by_dims and not derived_done:
                derived_done = True
                items += self._derived()
            decl = op.input(t.name)
            dtypes = None
            if decl.same_dtype_as is None:
                dtypes = r.names.constant(t.name, "DTYPES")
                constants.append(Constant("dtypes", dtypes, dtypes=_dtype_names(decl)))
            items.append(self._tensor_check(t, dtypes, decl.same_dtype_as, first, devices))
        if not derived_done:
            items += self._derived()
        for decl in op.inputs:
            if decl.is_list:
                dtypes = None
                if decl.same_dtype_as is None:
                    dtypes = r.names.constant(decl.name, "DTYPES")
                    constants.append(Constant("dtypes", dtypes, dtypes=_dtype_names(decl)))
                items.append(self._list_check(decl, dtypes, first, devices))
        for v in op.variants:
            if op.restricts(v):
                constants.append(
                    Constant("values", r.names.constant(v.arg, "VALUES"), values=v.values)
                )
        return self._prune(items), constants

    def _tensor_check(self, t: TensorPlan, dtypes, dtype_of, first, devices) -> TensorCheck:
        n = t.name
        shape = t.shape
        rank = (
            f"{n}.ndim < {shape.min_rank}"
            if shape.has_ellipsis
            else f"{n}.ndim != {shape.min_rank}"
        )
        dtype = f"{n}.dtype != {dtype_of}.dtype" if dtype_of else f"{n}.dtype not in {dtypes}"
        # Without a required plain tensor (only lists and optional tensors) each tensor is
        # checked against the listed devices itself.
        own_device = n == first or first is None
        if own_device:
            device = "not (" + " or ".join(f"{n}.is_{d}" for d in devices) + ")"
        else:
            device = f"{n}.device != {first}.device"
        bindings = [Statement(b.dim, f"{n}.shape[{b.index}]") for b in t.bindings]
        if t.binds_batch:
            bindings.insert(0, Statement(self.batch, batch_slice(t)))
        compare = bool(t.checks) or t.checks_batch
        expected = shape_expr(shape, self.batch)
        # isinstance first: a list or a number where a tensor belongs gets a TypeError naming
        # the argument instead of an AttributeError from the tests after it.
        kind = f"not isinstance({n}, Tensor)"
        if bindings:
            early = (kind, rank, dtype, device)
            late = (f"{n}.shape != {expected}",) if compare else ()
        else:
            early, late = (), (kind, f"{n}.shape != {expected}", dtype, device)
        return TensorCheck(
            name=n,
            optional=t.optional,
            early=early,
            bindings=tuple(bindings),
            late=late,
            shape=str(shape),
            expected=expected,
            rank=shape.min_rank,
            variadic=shape.has_ellipsis,
            dtypes=dtypes,
            dtype_of=dtype_of,
            device_of=None if own_device else first,
            devices=devices if own_device else (),
            offsets=self.op.input(n).offsets,
        )

    def _list_check(self, decl, dtypes, first, devices) -> ListCheck:
        n, shape, e = decl.name, decl.shape, "_e"
        arg = self.fwd.argument(n)
        rank = (
            f"{e}.ndim < {shape.min_rank}"
            if shape.has_ellipsis
            else f"{e}.ndim != {shape.min_rank}"
        )
        tests = [f"not isinstance({e}, Tensor)", rank]
        tests.append(
            f"{e}.dtype != {decl.same_dtype_as}.dtype"
            if decl.same_dtype_as
            else f"{e}.dtype not in {dtypes}"
        )
        if first is not None:
            tests.append(f"{e}.device != {first}.device")
        else:
            tests.append("not (" + " or ".join(f"{e}.is_{d}" for d in devices) + ")")
            tests.append(f"{e}.device != {n}[0].device")
        known = set(self.plan.bound) | {d.name for d in self.op.dims}
        parts, compares = [], []
        for pos, entry in enumerate(shape.entries):
            idx = index_of(shape, pos)
            if entry == ELLIPSIS:
                before, after = len(shape.before), len(shape.after)
                own = f"{e}.shape[{before or ''}:{f'-{after}' if after else ''}]"
                if self.plan.batch_source is not None:
                    compares.append(f"{own} != {self.batch}")
                    parts.append(f"*{self.batch}")
                else:
                    parts.append(f"*{own}")
            elif set(entry.names) <= known:
                value = entry.render({})
                compares.append(f"{e}.shape[{idx}] != {value}")
                parts.append(value)
            else:
                parts.append(f"{e}.shape[{idx}]")
        return ListCheck(
            name=n,
            nonempty=first is None,
            optional_elements=arg.type == "Tensor?[]",
            test=" or ".join(tests + compares),
            shape=str(shape),
            expected=tuple_expr(parts),
            rank=shape.min_rank,
            variadic=shape.has_ellipsis,
            dtypes=dtypes,
            dtype_of=decl.same_dtype_as,
            device_of=first,
            devices=devices if first is None else (),
            optional=arg.optional,
        )

    def _derived(self) -> list[Statement]:
        return [Statement(d.name, d.expr.render({})) for d in self.op.dims]

    def scalars(self, public_params) -> tuple[ScalarCheck, ...]:
        """Every scalar argument and the arity flag (a bool), in the public function's order."""
        args = {a.name: (a.type, a.default_value) for a in self.fwd.arguments if a.is_scalar}
        if self.r.flag:
            args[self.r.flag] = ("bool", False)
        return tuple(scalar_check(p.name, *args[p.name]) for p in public_params if p.name in args)

    def constraints(self) -> tuple[ConstraintCheck, ...]:
        out = []
        for c in self.op.constraints:
            test = _negate(c.check)
            if c.when is not None:
                test = f"{c.when} is not None and {test}"
            out.append(ConstraintCheck(test, c.message, c.check.names))
        return tuple(out)

    def indexes(self, notes: Notes) -> tuple[IndexCheck, ...]:
        optional = set(self.r.optional_inputs)
        return tuple(
            IndexCheck(
                d.name,
                d.name in optional,
                d.indexes,
                d.skips_negative,
                notes.ref("index inputs", " (_runtime)"),
            )
            for d in self.op.inputs
            if d.indexes
        )

    def variants(self) -> tuple[VariantCheck, ...]:
        return tuple(
            VariantCheck(v.arg, self.r.names.constant(v.arg, "VALUES"), v.values)
            for v in self.op.variants
            if self.op.restricts(v)
        )

    def mutated(self) -> tuple[MutationCheck, ...]:
        return tuple(
            MutationCheck(
                d.name, tuple(a.name for a in self.fwd.tensor_arguments if a.name != d.name)
            )
            for d in self.op.inputs
            if d.mutated
        )

    def _prune(self, items: list) -> list:
        """Drop dim reads nothing later reads (ruff F841), keeping the order."""
        used: set[str] = set()
        for c in self.op.constraints:
            used |= set(c.check.names)
        used |= {d.indexes for d in self.op.inputs if d.indexes}
        kept = []
        for item in reversed(items):
            if isinstance(item, Statement):
                if item.target not in used:
                    continue
                used |= names_in(item.value)
                kept.append(item)
                continue
            if isinstance(item, ListCheck):
                used |= names_in(item.test) | names_in(item.expected)
                kept.append(item)
                continue
            reads = [s for s in item.bindings if s.target in used or _read_by(s.target, item.late)]
            for s in reads:
                used |= names_in(s.value)
            if item.offsets:
                used.add(item.offsets)
            for test in item.early + item.late:
                used |= names_in(test)
            kept.append(replace(item, bindings=tuple(reads)))
        return list(reversed(kept))


def count_checks(r: ResolvedOp) -> tuple[CountCheck, ...]:
    """Note [list returns]: each int argument that gives a list output's count."""
    out = []
    for o in r.op.outputs:
        arg = r.op.forward.schema.argument(o.count) if isinstance(o.count, str) else None
        if arg is not None and arg.type in ("int", "SymInt"):
            out.append(CountCheck(arg.name, o.name))
    return tuple(out)


def length_checks(r: ResolvedOp) -> tuple[LengthCheck, ...]:
    """Note [list returns]: list inputs read element by element beside a list output's
    count list."""
    out: list[LengthCheck] = []
    scalars = {a.name for a in r.op.forward.schema.arguments if a.type in ("int", "SymInt")}
    for o in r.op.outputs:
        for lst, _ in element_dims(r.op, o, set(r.plan.bound) | scalars).values():
            check = LengthCheck(lst, o.count, o.name)
            if lst != o.count and check not in out:
                out.append(check)
    return tuple(out)


def _dtype_names(decl) -> tuple[str, ...]:
    return tuple(d.torch_name for d in decl.dtypes)


def _negate(c: Condition) -> str:
    inverse = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
    return f"{c.left.render({})} {inverse[c.op]} {c.right.render({})}"


def _read_by(name: str, tests: tuple[str, ...]) -> bool:
    return any(name in names_in(t) for t in tests)
