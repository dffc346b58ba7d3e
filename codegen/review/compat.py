"""Backward compatibility of a spec change: every change of every operator, classified.

Note [what is API]: a caller reaches an operator three ways, and each is checked.

- The registered forward operators (``ns::<op>_fwd`` and an arity pair's ``ns::<op>_fwd_<suffix>``),
  which graphs, ``torch.export`` programs and C++ callers name: their schemas go through torch's own
  ``FunctionSchema.is_backward_compatible_with`` (``new.is_backward_compatible_with(old)``), and
  through the itemized rules below, which name the argument. Where torch refuses a change the rules
  have not called breaking, the change is reported as breaking in torch's words, so the check is
  never weaker than torch's.
- The public function and its NamedTuple: the parameters (the schema's arguments and the arity
  flag, by position and by keyword), their defaults, the fields (public outputs, in order; a
  NamedTuple is a tuple, so adding a field breaks unpacking) and their shapes and dtypes.
- The tensor contracts the public function enforces: each input's dtypes and shape, the variants
  a scalar may take, the constraints, the devices with a launcher.

The backward operator, non-public outputs, integration, launchers and backends are not API: the
public function reaches them only through the generated ``autograd.Function``. Their changes are
listed as ``info``. Ending the registration (integration ``eager``) removes registered operators,
which is breaking.

Note [shape contracts]: a shape change is compatible only when it provably accepts every shape the
old one did: dims renamed consistently across the operator (no change), the accepted ranks
widened (an added ``...``, fewer fixed entries) while the entries kept still match, or an entry
that becomes a dim named nowhere else among the inputs (a free size). Anything else (a rank no
longer accepted, a new equality between dims, a literal size where a name was, a changed
expression) is breaking. An output's shape is what callers receive: any change of a public
output's shape is breaking.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ..resolve.resolved import ResolvedOp
from ..spec.errors import Location
from ..spec.model import Integration, Op, Spec, Stage, TensorDecl
from ..spec.schema import Schema
from ..spec.shapes import ELLIPSIS, Expr, Shape


class Severity(enum.Enum):
    BREAKING = "breaking"
    COMPATIBLE = "note"
    INTERNAL = "info"  # not API: listed for the reviewer


@dataclass(frozen=True, slots=True)
class Change:
    loc: Location
    op: str | None
    severity: Severity
    message: str

    def __str__(self) -> str:
        where = f"[{self.op}] " if self.op else ""
        return f"{self.loc}: {self.severity.value}: {where}{self.message}"


@dataclass(frozen=True, slots=True)
class Model:
    """One side of the comparison: a built, resolved and validated spec."""

    spec: Spec
    ops: tuple[ResolvedOp, ...]


def compare(old: Model, new: Model) -> tuple[Change, ...]:
    """Every change from ``old`` to ``new``: new operators in spec order, then removed ones."""
    changes: list[Change] = []
    top = Location(new.spec.path, 1, 1)
    for what in ("namespace", "package"):
        before, after = getattr(old.spec, what), getattr(new.spec, what)
        if before != after:
            changes.append(
                Change(
                    top,
                    None,
                    Severity.BREAKING,
                    f"{what} changed from '{before}' to '{after}'"
                    + (
                        ": every registered operator is renamed"
                        if what == "namespace"
                        else ": callers import another package"
                    ),
                )
            )
    old_ops = {r.name: r for r in old.ops}
    new_names = {r.name for r in new.ops}
    for r in new.ops:
        before = old_ops.get(r.name)
        if before is None:
            changes.append(Change(r.op.loc, r.name, Severity.COMPATIBLE, "operator added"))
        else:
            changes.extend(_Op(before, r).changes())
    for r in old.ops:
        if r.name not in new_names:
            changes.append(Change(r.op.loc, r.name, Severity.BREAKING, "operator removed"))
    return tuple(changes)


@dataclass(frozen=True, slots=True)
class _Param:
    """A parameter of the public function: a forward schema argument or the arity flag."""

    name: str
    type: str
    has_default: bool
    default: object
    kwarg_only: bool
    is_write: bool
    loc: Location

    @property
    def text(self) -> str:
        default = f"={_value(self.default)}" if self.has_default else ""
        star = "*, " if self.kwarg_only else ""
        return f"{star}{self.type}{'(a!)' if self.is_write else ''} {self.name}{default}"


def _params(op: Op) -> tuple[_Param, ...]:
    stage = op.forward
    params = [
        _Param(
            a.name,
            a.type,
            a.has_default,
            a.default_value,
            a.kwarg_only,
            a.is_write,
            stage.arg_loc(a.name),
        )
        for a in stage.schema.arguments
    ]
    pair = op.arity_pair
    if pair is not None:
        names = [p.name for p in params]
        pos = names.index(pair.after) + 1 if pair.after in names else len(params)
        kwarg_only = any(p.kwarg_only for p in params[:pos])
        params.insert(pos, _Param(pair.flag, "bool", True, False, kwarg_only, False, pair.loc))
    return tuple(params)


def _value(value: object) -> str:
    return repr(value)


def _positions(params: Iterable[_Param]) -> dict[str, int]:
    return {p.name: i for i, p in enumerate(p for p in params if not p.kwarg_only)}


@functools.cache
def _type_widens(old: str, new: str) -> bool:
    """Whether torch accepts an argument of type ``old`` becoming ``new`` (``Tensor`` to
    ``Tensor?``, ``int`` to ``SymInt``)."""
    try:
        before = torch._C.parse_schema(f"f({old} a) -> ()")
        after = torch._C.parse_schema(f"f({new} a) -> ()")
    except RuntimeError:
        return False
    return after.is_backward_compatible_with(before)


def _returns(schema: Schema) -> str:
    return "(" + ", ".join(f"{r.type} {r.name}" if r.name else r.type for r in schema.returns) + ")"


def _dtypes(decl: TensorDecl) -> str:
    if decl.same_dtype_as:
        return f"the dtype of '{decl.same_dtype_as}'"
    return ", ".join(d.torch_name for d in decl.dtypes)


class _Base:
    """One operator present on both sides, and the changes found so far."""

    def __init__(self, old: ResolvedOp, new: ResolvedOp) -> None:
        self.old, self.new = old, new
        self.name = new.name
        self.out: list[Change] = []

    def add(self, loc: Location, severity: Severity, message: str) -> None:
        self.out.append(Change(loc, self.name, severity, message))

    @functools.cached_property
    def _rename(self) -> dict[str, str]:
        """Dims renamed consistently across the operator's shapes: old name -> new name."""
        pairs: set[tuple[str, str]] = set()
        old, new = self.old.op, self.new.op
        shapes = [
            (d.shape, new.input(d.name).shape) for d in old.inputs if new.input(d.name) is not None
        ] + [
            (o.shape, new.output(o.name).shape)
            for o in old.outputs
            if new.output(o.name) is not None
        ]
        for a, b in shapes:
            for x, y in _aligned(a, b):
                if isinstance(x, Expr) and isinstance(y, Expr) and x.name and y.name:
                    pairs.add((x.name, y.name))
        forward: dict[str, set[str]] = {}
        backward: dict[str, set[str]] = {}
        for a, b in pairs:
            forward.setdefault(a, set()).add(b)
            backward.setdefault(b, set()).add(a)
        return {
            a: next(iter(bs))
            for a, bs in forward.items()
            if len(bs) == 1 and len(backward[next(iter(bs))]) == 1
        }


class _Signature(_Base):
    """The registered operators, the public parameters, returns and outputs."""

    def _stages(self, r: ResolvedOp) -> dict[str, tuple[Schema, Location]]:
        """The registered forward operators by qualified name (none for eager ops)."""
        if r.integration is Integration.EAGER:
            return {}
        out = {r.forward.names.qualname: (r.op.forward.schema, r.op.forward.schema_loc)}
        if r.pair is not None and r.op.arity_pair is not None:
            pair = r.op.arity_pair
            out[r.pair.names.qualname] = (pair.schema, pair.schema_loc)
        return out

    def _registered(self) -> None:
        old, new = self._stages(self.old), self._stages(self.new)
        for qual in old:
            if qual not in new:
                why = (
                    " (integration 'eager' registers nothing)"
                    if self.new.integration is Integration.EAGER
                    else ""
                )
                self.add(
                    self.new.op.loc, Severity.BREAKING, f"registered operator '{qual}' removed{why}"
                )
        for qual, (_, loc) in new.items():
            if qual not in old:
                self.add(loc, Severity.COMPATIBLE, f"registered operator '{qual}' added")

    def _torch_verdict(self, before: int) -> None:
        """torch's own check of each registered forward schema; Note [what is API]."""
        found = len([c for c in self.out if c.severity is Severity.BREAKING]) > before
        old, new = self._stages(self.old), self._stages(self.new)
        for qual, (schema, loc) in new.items():
            if qual not in old:
                continue
            base = old[qual][0]
            after = torch._C.parse_schema(schema.canonical)
            if not after.is_backward_compatible_with(torch._C.parse_schema(base.canonical)):
                if not found:
                    self.add(
                        loc,
                        Severity.BREAKING,
                        f"torch finds '{qual}' not backward compatible: "
                        f"'{base.canonical}' became '{schema.canonical}'",
                    )

    def _parameters(self) -> None:
        old, new = _params(self.old.op), _params(self.new.op)
        before = {p.name: p for p in old}
        after = {p.name: p for p in new}
        schema_loc = self.new.op.forward.schema_loc
        for p in old:
            if p.name not in after:
                self.add(
                    schema_loc,
                    Severity.BREAKING,
                    f"argument '{p.name}' removed (was '{p.text}' at {p.loc})",
                )
        for p in new:
            if p.name not in before:
                if p.has_default:
                    self.add(
                        p.loc,
                        Severity.COMPATIBLE,
                        f"argument '{p.name}' added with default {_value(p.default)}",
                    )
                else:
                    self.add(
                        p.loc, Severity.BREAKING, f"argument '{p.name}' added without a default"
                    )
        old_pos, new_pos = _positions(old), _positions(new)
        for p in new:
            was = before.get(p.name)
            if was is None:
                continue
            self._parameter(was, p, old_pos, new_pos)

    def _parameter(self, was: _Param, p: _Param, old_pos: dict, new_pos: dict) -> None:
        if not was.kwarg_only and p.kwarg_only:
            self.add(
                p.loc,
                Severity.BREAKING,
                f"argument '{p.name}' became keyword-only (callers pass it by position)",
            )
        elif not was.kwarg_only and old_pos[p.name] != new_pos[p.name]:
            self.add(
                p.loc,
                Severity.BREAKING,
                f"positional argument '{p.name}' moved from position {old_pos[p.name]} "
                f"to {new_pos[p.name]}",
            )
        elif was.kwarg_only and not p.kwarg_only:
            self.add(
                p.loc, Severity.COMPATIBLE, f"argument '{p.name}' may now be passed by position"
            )
        if was.type != p.type:
            if _type_widens(was.type, p.type):
                self.add(
                    p.loc,
                    Severity.COMPATIBLE,
                    f"type of '{p.name}' widened from {was.type} to {p.type}",
                )
            else:
                self.add(
                    p.loc,
                    Severity.BREAKING,
                    f"type of '{p.name}' changed from {was.type} to {p.type}",
                )
        if was.has_default and not p.has_default:
            self.add(
                p.loc,
                Severity.BREAKING,
                f"default of '{p.name}' removed (was {_value(was.default)})",
            )
        elif was.has_default and (
            was.default != p.default
            or (was.type == p.type and type(was.default) is not type(p.default))
        ):
            self.add(
                p.loc,
                Severity.BREAKING,
                f"default of '{p.name}' changed from {_value(was.default)} to {_value(p.default)}",
            )
        elif not was.has_default and p.has_default:
            self.add(p.loc, Severity.COMPATIBLE, f"'{p.name}' gained default {_value(p.default)}")
        if was.is_write != p.is_write:
            now = "is now mutated in place" if p.is_write else "is no longer mutated in place"
            self.add(p.loc, Severity.BREAKING, f"argument '{p.name}' {now}")

    def _returns(self) -> None:
        if self.new.integration is Integration.EAGER and self.old.integration is Integration.EAGER:
            return
        old, new = self.old.op.forward.schema, self.new.op.forward.schema
        loc = self.new.op.forward.schema_loc
        if len(old.returns) != len(new.returns):
            self.add(
                loc,
                Severity.BREAKING,
                f"return arity changed from {len(old.returns)} to {len(new.returns)}: "
                f"{_returns(old)} became {_returns(new)}",
            )
            return
        for i, (a, b) in enumerate(zip(old.returns, new.returns, strict=True)):
            if a.name != b.name:
                self.add(
                    loc,
                    Severity.BREAKING,
                    f"return {i} renamed from '{a.name}' to '{b.name}'",
                )
            if a.type != b.type:
                self.add(
                    loc,
                    Severity.BREAKING,
                    f"return {i} '{b.name}' retyped from {a.type} to {b.type}",
                )

    def _outputs(self) -> None:
        old, new = self.old.op, self.new.op
        before, after = self.old.public_outputs, self.new.public_outputs
        result = f"{''.join(w.capitalize() for w in new.name.split('_'))}Output"
        for name in before:
            if name not in after:
                decl = new.output(name)
                loc = decl.loc if decl is not None else new.loc
                why = " (no longer public)" if decl is not None else ""
                self.add(loc, Severity.BREAKING, f"public output '{name}' removed{why}")
        for name in after:
            if name not in before:
                self.add(
                    new.output(name).loc,
                    Severity.BREAKING,
                    f"public output '{name}' added: the result has one more field, "
                    "which breaks callers that unpack it",
                )
        kept = [n for n in after if n in before]
        if kept != [n for n in before if n in after]:
            self.add(
                new.loc,
                Severity.BREAKING,
                f"public outputs reordered from {list(before)} to {list(after)} ({result} fields)",
            )
        for decl in new.outputs:
            was = old.output(decl.name)
            if was is None:
                continue
            public = decl.name in after and decl.name in before
            severity = Severity.BREAKING if public else Severity.INTERNAL
            what = "output" if public else "non-public output"
            if (was.dtype, was.dtype_of) != (decl.dtype, decl.dtype_of):
                self.add(
                    decl.loc,
                    severity,
                    f"dtype of {what} '{decl.name}' changed from {_out_dtype(was)} "
                    f"to {_out_dtype(decl)}",
                )
            if _renamed(was.shape, self._rename) != str(decl.shape):
                self.add(
                    decl.loc,
                    severity,
                    f"shape of {what} '{decl.name}' changed from {was.shape} to {decl.shape}",
                )
            if public and was.when is None and decl.when is not None:
                self.add(
                    decl.loc,
                    Severity.BREAKING,
                    f"output '{decl.name}' may now be None (given only when '{decl.when}')",
                )
            elif public and was.when is not None and decl.when is None:
                self.add(decl.loc, Severity.COMPATIBLE, f"output '{decl.name}' is always given")


class _Op(_Signature):
    """Every change of one operator present on both sides."""

    def changes(self) -> list[Change]:
        self._registered()
        schema_breaks = len([c for c in self.out if c.severity is Severity.BREAKING])
        self._parameters()
        self._returns()
        self._torch_verdict(schema_breaks)
        self._outputs()
        self._inputs()
        self._variants()
        self._constraints()
        self._dims()
        self._devices()
        self._internal()
        return self.out

    def _inputs(self) -> None:
        old, new = self.old.op, self.new.op
        counts: dict[str, int] = {}
        for d in new.inputs:
            for e in d.shape.entries:
                if isinstance(e, Expr):
                    for n in e.names:
                        counts[n] = counts.get(n, 0) + 1
        derived = {d.name for d in new.dims} | {n for n, _ in new.dynamic_dims}
        free = {n for n, c in counts.items() if c == 1 and n not in derived}
        for decl in new.inputs:
            was = old.input(decl.name)
            if was is None:
                continue
            self._input_dtypes(was, decl)
            verdict = _shape_verdict(was.shape, decl.shape, self._rename, free)
            if verdict is not None:
                severity = Severity.BREAKING if verdict == "narrowed" else Severity.COMPATIBLE
                self.add(
                    decl.loc,
                    severity,
                    f"shape of input '{decl.name}' {verdict} from {was.shape} to {decl.shape}",
                )
            if was.differentiable and not decl.differentiable:
                self.add(
                    decl.loc, Severity.BREAKING, f"input '{decl.name}' is no longer differentiable"
                )
            elif decl.differentiable and not was.differentiable:
                self.add(
                    decl.loc, Severity.COMPATIBLE, f"input '{decl.name}' is now differentiable"
                )
            if was.skips_negative and not decl.skips_negative:
                self.add(
                    decl.loc,
                    Severity.BREAKING,
                    f"negative entries of '{decl.name}' are refused now (negative: skip removed)",
                )
            if (was.indexes, was.negative, was.offsets) != (
                decl.indexes,
                decl.negative,
                decl.offsets,
            ) and not (was.skips_negative and not decl.skips_negative):
                self.add(
                    decl.loc,
                    Severity.COMPATIBLE,
                    f"value checks of '{decl.name}' changed (indexes, negative, offsets)",
                )
            if was.absent_gradient != decl.absent_gradient:
                self.add(
                    decl.loc,
                    Severity.INTERNAL,
                    f"absent gradient of '{decl.name}' changed from {was.absent_gradient} "
                    f"to {decl.absent_gradient}",
                )

    def _input_dtypes(self, was: TensorDecl, decl: TensorDecl) -> None:
        if was.same_dtype_as or decl.same_dtype_as:
            if was.same_dtype_as == decl.same_dtype_as:
                return
            if decl.same_dtype_as is None:
                ref = self.old.op.input(was.same_dtype_as)
                if ref is not None and set(ref.dtypes) <= set(decl.dtypes):
                    self.add(
                        decl.loc,
                        Severity.COMPATIBLE,
                        f"dtypes of '{decl.name}' widened from {_dtypes(was)} to {_dtypes(decl)}",
                    )
                    return
            self.add(
                decl.loc,
                Severity.BREAKING,
                f"dtypes of '{decl.name}' changed from {_dtypes(was)} to {_dtypes(decl)}",
            )
            return
        lost = [d.torch_name for d in was.dtypes if d not in decl.dtypes]
        gained = [d.torch_name for d in decl.dtypes if d not in was.dtypes]
        if lost:
            self.add(
                decl.loc,
                Severity.BREAKING,
                f"dtypes of '{decl.name}' narrowed: {', '.join(lost)} no longer accepted",
            )
        if gained:
            self.add(
                decl.loc,
                Severity.COMPATIBLE,
                f"dtypes of '{decl.name}' widened: {', '.join(gained)} accepted",
            )

    def _variants(self) -> None:
        old, new = self.old.op, self.new.op
        for v in new.variants:
            was = old.variant(v.arg)
            arg = new.forward.schema.argument(v.arg)
            if was is None and (
                old.forward.schema.argument(v.arg) is None
                or (arg is not None and arg.type == "bool" and {False, True} <= set(v.values))
            ):
                # An argument added with its variant (no call passed it before), or a bool that
                # may still take both values: the restriction refuses no call.
                values = ", ".join(map(_value, v.values))
                self.add(v.loc, Severity.INTERNAL, f"'{v.arg}' takes {values} (a variant)")
                continue
            if was is None:
                self.add(
                    v.loc,
                    Severity.BREAKING,
                    f"'{v.arg}' is now restricted to {', '.join(map(_value, v.values))}",
                )
                continue
            lost = [x for x in was.values if x not in v.values]
            gained = [x for x in v.values if x not in was.values]
            if lost:
                self.add(
                    v.loc,
                    Severity.BREAKING,
                    f"variants of '{v.arg}' narrowed: {', '.join(map(_value, lost))} "
                    "no longer accepted",
                )
            if gained:
                self.add(
                    v.loc,
                    Severity.COMPATIBLE,
                    f"variants of '{v.arg}' widened: {', '.join(map(_value, gained))} accepted",
                )
        for v in old.variants:
            if new.variant(v.arg) is None and new.forward.schema.argument(v.arg) is not None:
                self.add(
                    new.forward.arg_loc(v.arg),
                    Severity.COMPATIBLE,
                    f"'{v.arg}' is no longer restricted to listed values",
                )

    def _constraints(self) -> None:
        old, new = self.old.op, self.new.op

        def key(c):
            return (c.check.text, c.when)

        before = {key(c): c for c in old.constraints}
        after = {key(c): c for c in new.constraints}
        for k, c in after.items():
            if k not in before:
                self.add(
                    c.loc,
                    Severity.BREAKING,
                    f"constraint added: {k[0]} (refuses calls it accepted)",
                )
            elif before[k].message != c.message:
                self.add(c.loc, Severity.INTERNAL, f"message of constraint {k[0]} changed")
        for k in before:
            if k not in after:
                self.add(new.loc, Severity.COMPATIBLE, f"constraint removed: {k[0]}")

    def _dims(self) -> None:
        old, new = self.old.op, self.new.op
        # The shapes callers see: inputs and public outputs (a non-public output is not API).
        used = {
            n
            for decls in (new.inputs, new.outputs, old.inputs, old.outputs)
            for d in decls
            if getattr(d, "public", True)
            for e in d.shape.entries
            if isinstance(e, Expr)
            for n in e.names
        }
        before = {d.name: d.expr.text for d in old.dims} | {
            n: "dynamic" for n, _ in old.dynamic_dims
        }
        after = {d.name: d.expr.text for d in new.dims} | {
            n: "dynamic" for n, _ in new.dynamic_dims
        }
        locs = {d.name: d.loc for d in new.dims} | dict(new.dynamic_dims)
        for name in sorted(set(before) | set(after), key=lambda n: (n not in after, n)):
            if before.get(name) == after.get(name):
                continue
            severity = Severity.BREAKING if name in used else Severity.INTERNAL
            loc = locs.get(name, new.loc)
            self.add(
                loc,
                severity,
                f"dim '{name}' changed from {before.get(name, 'a free size')} "
                f"to {after.get(name, 'a free size')}",
            )

    def _devices(self) -> None:
        for device in self.old.devices:
            if device not in self.new.devices:
                self.add(
                    self.new.op.forward.loc,
                    Severity.BREAKING,
                    f"no longer runs on {device} (no {device} launcher)",
                )
        for device in self.new.devices:
            if device not in self.old.devices:
                self.add(self.new.op.forward.loc, Severity.COMPATIBLE, f"now runs on {device}")

    def _internal(self) -> None:
        old, new = self.old.op, self.new.op
        if old.integration is not new.integration:
            self.add(
                new.loc,
                Severity.INTERNAL,
                f"integration changed from {old.integration.value} to {new.integration.value}",
            )
        for what, a, b in (
            ("forward", old.forward, new.forward),
            ("backward", old.backward, new.backward),
        ):
            if _launchers(a) != _launchers(b):
                loc = b.loc if b is not None else new.loc
                self.add(loc, Severity.INTERNAL, f"{what} launchers or backends changed")
        if old.backward is not None and new.backward is not None:
            if old.backward.schema.canonical != new.backward.schema.canonical:
                self.add(
                    new.backward.schema_loc,
                    Severity.INTERNAL,
                    f"backward schema changed from '{old.backward.schema.text}' "
                    f"to '{new.backward.schema.text}'",
                )
        elif (old.backward is None) != (new.backward is None):
            now = "added" if new.backward is not None else "removed"
            self.add(new.loc, Severity.INTERNAL, f"backward {now}")
        if old.eager_fast_path != new.eager_fast_path:
            self.add(
                new.eager_fast_path_loc or new.loc,
                Severity.INTERNAL,
                f"eager_fast_path changed to {str(new.eager_fast_path).lower()}",
            )


def _launchers(stage: Stage | None) -> tuple:
    if stage is None:
        return ()
    return tuple(
        (
            x.device,
            x.backend,
            x.ref,
            tuple((r.tensor, r.contiguous_dim, r.alignment, r.max_contiguous) for r in x.layout),
        )
        for x in stage.launchers
    )


def _out_dtype(decl) -> str:
    return decl.dtype.torch_name if decl.dtype is not None else f"the dtype of '{decl.dtype_of}'"


def _renamed(shape: Shape, rename: dict[str, str]) -> str:
    return (
        "[" + ", ".join(e if isinstance(e, str) else e.render(rename) for e in shape.entries) + "]"
    )


def _aligned(a: Shape, b: Shape) -> list[tuple[Expr | str, Expr | str]]:
    """Entries of ``a`` and ``b`` in the same place: leading ones from the start, those after
    ``...`` from the end (both from the start when neither has ``...``)."""
    if not a.has_ellipsis and not b.has_ellipsis:
        return list(zip(a.entries, b.entries, strict=False))
    pairs = list(zip(a.before, b.before, strict=False))
    a_after = a.after if a.has_ellipsis else a.entries[len(b.before) :]
    b_after = b.after if b.has_ellipsis else b.entries[len(a.before) :]
    n = min(len(a_after), len(b_after))
    if n:
        pairs += list(zip(a_after[-n:], b_after[-n:], strict=True))
    return pairs


def _ranks(shape: Shape) -> tuple[int, bool]:
    """The smallest rank a shape accepts, and whether it accepts every larger one."""
    return shape.min_rank, shape.has_ellipsis


def _shape_verdict(old: Shape, new: Shape, rename: dict[str, str], free: set[str]) -> str | None:
    """None (no change), "widened" or "narrowed": Note [shape contracts]."""
    if _renamed(old, rename) == str(new):
        return None
    (old_min, old_open), (new_min, new_open) = _ranks(old), _ranks(new)
    accepts_ranks = (new_open and new_min <= old_min) or (
        not new_open and not old_open and new_min == old_min
    )
    if not accepts_ranks:
        return "narrowed"
    if new_open and not old_open:
        before, after = old.entries[: len(new.before)], old.entries[old_min - len(new.after) :]
        pairs = list(zip(before, new.before, strict=True)) + list(
            zip(after, new.after, strict=True)
        )
    elif new_open:
        if len(new.before) > len(old.before) or len(new.after) > len(old.after):
            return "narrowed"
        pairs = list(zip(old.before, new.before, strict=False))
        pairs += list(zip(old.after[len(old.after) - len(new.after) :], new.after, strict=True))
    else:
        pairs = list(zip(old.entries, new.entries, strict=True))
    for a, b in pairs:
        if a == ELLIPSIS or b == ELLIPSIS:
            return "narrowed"
        if a.render(rename) == b.text:
            continue
        if b.name is not None and b.name in free:
            continue
        return "narrowed"
    return "widened"
