"""Records for one generated test module (``generated/tests/test_<op>.py``).

The module holds data (samples, dtypes, tolerances, configuration axes, ways to break each
argument) and two small builders (the public function's inputs, the backward's arguments);
``codegen/runtime/testing.py`` turns the tables into pytest cases at import time, so one more
sample or dtype in the spec is one more row, not one more block of cases. Values from the spec
stay Python values here; ``templates/test_op.py.jinja`` writes them with the ``py`` filter.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..resolve.dims import element_dims
from ..resolve.resolved import ResolvedOp, Role
from ..resolve.symbols import batch_local
from ..spec.model import DType, Integration, Sample, Spec
from ..spec.shapes import ELLIPSIS, EvaluationError
from .op.base import Statement

WRONG_DTYPES = ("float64", "int32", "bool")
# Values of a wrong type for each scalar schema type, as ``_t.broken`` spells them
# (``type-bool`` is True): mostly values the dispatcher would take and reinterpret (True as 1,
# 1 as torch.int8, None as False). The first also breaks the elements of a list of that type.
WRONG_SCALARS = {
    "int": ("type-bool", "type-float"),
    "SymInt": ("type-bool", "type-float"),
    "float": ("type-bool", "type-complex", "type-str"),
    "bool": ("type-int", "type-none", "type-str"),
    "str": ("type-int",),
    "ScalarType": ("type-int",),
    "Layout": ("type-int",),
    "MemoryFormat": ("type-int",),
    "Device": ("type-int", "type-str"),
    "Generator": ("type-int",),
    "Scalar": ("type-complex", "type-str"),
}


def wrong_scalars(op, name: str, schema_type: str) -> tuple[str, ...]:
    """How ``_t.broken`` gives a scalar argument of ``op`` a value of a type its schema type
    refuses (Note [scalar types] in _runtime): ``type-<kind>`` replaces it, ``element-<kind>``
    its first element, ``length`` adds an element to a fixed-size list."""
    optional = schema_type.endswith("?")
    written = schema_type.removesuffix("?")
    m = re.fullmatch(r"(\w+)\??\[(\d*)\]", written)
    if m is None:
        return tuple(h for h in WRONG_SCALARS[written] if not (optional and h == "type-none"))
    hows = ["type-str"] if m[1] != "str" else ["type-int"]
    # The elements can be broken only where the tests pass a list: a default or a sample's.
    arg = op.forward.schema.argument(name)
    values = [arg.default_value if arg is not None else None]
    values += [s.get(name) for s in op.tests.samples]
    if any(isinstance(v, (list, tuple)) and v for v in values):
        hows.append("element-" + WRONG_SCALARS[m[1]][0].removeprefix("type-"))
        if m[2]:
            hows.append("length")
    return tuple(hows)


@dataclass(frozen=True, slots=True)
class DTypeRow:
    short: str  # the id used in test ids: fp32, bf16
    name: str  # the torch attribute: float32


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
class IndexRow:
    """An index input of the out-of-range tests: the dim it indexes, the input and position
    whose size that dim is, whether negative entries skip, and the dtypes tried."""

    name: str
    dim: str
    binder: str
    position: int
    skip: bool
    dtypes: tuple[str, ...]  # its own allowed dtypes; () where another input shares its dtype


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


@dataclass(frozen=True, slots=True)
class OutputDType:
    """A public output's declared dtype: ``torch.<dtype>``, or the input whose dtype it takes."""

    name: str
    dtype: str | None  # a torch attribute: float32
    input: str | None


@dataclass(frozen=True, slots=True)
class BackendRow:
    """One declared CUDA backend of a stage, as ``_testing_backends.Backend`` takes it."""

    name: str
    ref: str
    layout: dict  # tensor -> (contiguous_dim, alignment or None)
    int64: bool
    signatures: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BackendsView:
    stages: dict  # "fwd" / "bwd" -> tuple[BackendRow, ...]
    qualnames: dict  # "fwd" / "bwd" -> the registered operator's qualified name
    names: tuple[str, ...]  # every backend named, in first-seen order
    # The first sample and a copy with one outer dim grown by one, for compiled reuse; None when
    # every dim of the sample sits in some contract's contiguous mode.
    resized: tuple[str, dict] | None


@dataclass(frozen=True, slots=True)
class TestsView:
    op: str
    package: str
    namespace: str
    reference: str  # module:function
    forward: str  # registered operator names
    pair: str | None
    backward_op: str | None
    registered: bool
    triton_op: bool
    has_gradients: bool
    cuda_graph: bool  # no data-dependent sizes: the launchers never sync with the host
    dynamic: bool
    seed: int
    samples: dict
    dtypes: tuple[DTypeRow, ...]
    tolerance: dict
    grad_tolerance: dict
    variants: dict
    optional: tuple[str, ...]
    flag: str | None
    rejects: dict
    arg_names: tuple[str, ...]
    public_outputs: tuple[str, ...]
    reference_returns: tuple[str, ...]  # what the reference returns, in its order
    output_dtypes: tuple[OutputDType, ...]  # of each public output
    differentiable: tuple[str, ...]
    mutated: tuple[str, ...]
    compile_dtype: str
    varlen: dict | None  # PACKED_DIM, PER_SEQUENCE, OFFSETS
    offsets: str | None  # the input declared as sequence offsets
    zero_sizes: dict  # dim -> "computed" or "refused" (a constraint forbids 0) on the first sample
    grad_free: tuple[str, ...]  # no backward: floating inputs whose grad must not reach outputs
    devices: tuple[str, ...]  # the devices the public function accepts
    inputs: InputsView
    backward: BackwardView | None
    backends: BackendsView | None
    # Eager fast path: the module-level bindings of the registered operators, which the fast path
    # must never call; () without it.
    direct_bindings: tuple[str, ...] = ()
    module: str = ""  # the operator's module in the package
    forward_qualnames: tuple[str, ...] = ()  # the forward operator and its arity pair
    indexes: tuple[IndexRow, ...] = ()  # index inputs (out-of-range tests)
    # 'side_effects: true': the forward's launcher references per device, which a test spies on
    side_effect_launchers: dict | None = None
    # Something to compare with the reference: a public output or a mutated input ('side_effects'
    # operators may have neither; their test is that every call reaches the launcher).
    compares: bool = True
    # List outputs ('Tensor[]') and their counts: an integer or an argument's name.
    output_counts: dict | None = None
    # Inputs with a declared value domain: name -> (lower, upper) as ``repr`` strings.
    domains: dict | None = None


def sample_id(sample: Sample, dims: tuple[str, ...]) -> str:
    parts = []
    if sample.batch is not None:
        parts.append("batch" + ("x".join(str(b) for b in sample.batch) if sample.batch else "0"))
    for k, v in sample.entries:
        if k in dims:
            parts.append(f"{k}{v}")
        elif isinstance(v, tuple):
            parts.append(k)
    return "-".join(parts)


def _product(sizes) -> int:
    out = 1
    for size in sizes:
        out *= size
    return out


def _tuple_expr(parts: list[str]) -> str:
    return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"


class _Builder:
    def __init__(self, spec: Spec, r: ResolvedOp) -> None:
        self.spec, self.r, self.op = spec, r, r.op
        self.fwd = r.op.forward.schema

    def test_dtypes(self) -> tuple[DType, ...]:
        return self.op.tests.dtypes or self.op.primary.dtypes

    def samples(self) -> dict:
        out = {}
        for s in self.op.tests.samples:
            entries = {"batch": tuple(s.batch)} if s.batch is not None else {}
            entries.update(s.entries)
            out[sample_id(s, self.r.sample_dims)] = entries
        return out

    def variants(self) -> dict:
        """Variant values, the schema default first: the "default" configuration takes it."""
        out = {}
        for v in self.op.variants:
            arg = self.fwd.argument(v.arg)
            first = [x for x in v.values if arg.has_default and x == arg.default_value]
            out[v.arg] = tuple(first[:1]) + tuple(x for x in v.values if x not in first[:1])
        return out

    def inputs(self) -> InputsView:
        r, op = self.r, self.op
        literal = set(r.literal_inputs)
        literals = tuple(
            LiteralInput(d.name, d.dtypes[0].torch_name if d.dtypes else "int32")
            for d in op.inputs
            if d.name in literal
        )
        made = []
        tested = set(self.test_dtypes())
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
            arg = self.fwd.argument(d.name)
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
                    bound=_index_bound(r, d),
                    skip=d.skips_negative,
                )
            )
        entries = []
        for a in self.fwd.arguments:
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
            derived=self._derived_for_inputs(),
            made=tuple(made),
            entries=tuple(entries),
            clamped=_clamped(op, literal),
        )

    def _derived_for_inputs(self) -> tuple[Statement, ...]:
        """The derived dims that the made inputs' shapes read, directly or through another
        derived dim, in declaration order (a dim that only sizes outputs is not computed)."""
        by_name = {d.name: d for d in self.op.dims}
        needed: set[str] = set()
        frontier = [
            n
            for d in self.op.inputs
            for e in d.shape.entries
            if not isinstance(e, str)
            for n in e.names
        ]
        while frontier:
            name = frontier.pop()
            if name in needed:
                continue
            needed.add(name)
            if name in by_name:
                frontier.extend(by_name[name].expr.names)
        return tuple(Statement(d.name, d.expr.render({})) for d in self.op.dims if d.name in needed)

    def backward(self) -> BackwardView | None:
        r = self.r
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
        base = tuple(o.name for o in self.op.outputs if o.name not in r.pair_extras)
        taken = {a.name for a in r.backward_args}
        return BackwardView(
            flag=r.flag,
            targets=base,
            wide_targets=base + r.pair_extras,
            extras=r.pair_extras,
            entries=tuple(entries),
            inputs=tuple(d.name for d in self.op.inputs if d.name in taken),
            incoming=tuple(a.name for a in r.backward_args if a.role is Role.GRADIENT),
            saved=tuple(a.name for a in r.backward_args if a.role is Role.SAVED),
        )

    def rejects(self) -> dict:
        """argument -> how to break it: a wrong dtype, a wrong rank, a value outside a variant."""
        out = {}
        for decl in self.op.inputs:
            if decl.same_dtype_as is None:
                allowed = {d.torch_name for d in decl.dtypes}
                hows = ["dtype-" + next(d for d in WRONG_DTYPES if d not in allowed)]
            else:
                hows = ["dtype-other"]
            if not decl.shape.has_ellipsis:
                hows.append("rank-plus-one")
            elif decl.shape.min_rank >= 2:
                hows.append("rank-one")
            out[decl.name] = tuple(hows)
        for a in self.fwd.arguments:
            if not a.is_tensor and not a.is_tensor_list:
                out[a.name] = ("type", *wrong_scalars(self.op, a.name, a.type))
        if self.r.flag:
            out[self.r.flag] = ("type", *wrong_scalars(self.op, self.r.flag, "bool"))
        for name, how in _list_return_rejects(self.r):
            out[name] = out.get(name, ()) + (how,)
        for v in self.op.variants:
            out[v.arg] = out.get(v.arg, ()) + ("value",)
        return out

    def differentiable(self) -> tuple[str, ...]:
        op = self.op
        if op.backward is None and op.integration is not Integration.EAGER:
            return ()
        return tuple(
            d.name
            for d in op.inputs
            if d.differentiable
            and not d.mutated
            and any(x.is_floating for x in (d.dtypes or op.primary.dtypes))
        )

    def zero_sizes(self) -> dict:
        """Each dim of the first sample set to 0: computed like the reference, or refused."""
        first = self.op.tests.samples[0]
        dims = list(self.r.sample_dims) + (["batch"] if first.batch is not None else [])
        out = {}
        for dim in dims:
            env = {**first.env(), dim: 0} if dim != "batch" else first.env()
            refused = any(
                (c.when is None or first.get(c.when) is not None)
                and all(n in env for n in c.check.names)
                and not c.check.holds(env)
                for c in self.op.constraints
            )
            if dim != "batch" and _index_refuses(self.op, first, dim):
                refused = True  # Note [index inputs]: an entry that no size 0 allows
            out[dim] = "refused" if refused else "computed"
        return out

    def varlen(self) -> dict | None:
        v = self.op.tests.varlen
        if v is None:
            return None
        packed = {}
        for decl in list(self.op.inputs) + list(self.op.outputs):
            for pos, e in enumerate(decl.shape.entries):
                if e != ELLIPSIS and e.name == v.dim:
                    packed[decl.name] = pos
        return {"packed_dim": packed, "per_sequence": v.per_sequence, "offsets": v.offsets}

    def build(self) -> TestsView:
        r, op, t = self.r, self.op, self.op.tests
        dtypes = self.test_dtypes()
        tol, gtol = dict(t.tolerance), dict(t.grad_tolerance)
        mutated = tuple(d.name for d in op.inputs if d.mutated)
        return TestsView(
            op=r.names.public,
            package=self.spec.package,
            namespace=self.spec.namespace,
            reference=op.reference,
            forward=r.forward.names.name,
            pair=r.pair.names.name if r.pair else None,
            backward_op=r.backward.names.name if r.backward else None,
            registered=op.integration is not Integration.EAGER,
            triton_op=op.integration is Integration.TRITON_OP,
            has_gradients=op.backward is not None
            or (op.integration is Integration.EAGER and not mutated),
            cuda_graph=not op.dynamic_dims,
            dynamic=bool(op.dynamic_dims),
            seed=t.seed,
            samples=self.samples(),
            dtypes=tuple(DTypeRow(d.short, d.torch_name) for d in dtypes),
            tolerance={d.short: (tol[d].atol, tol[d].rtol) for d in dtypes},
            grad_tolerance={d.short: (gtol[d].atol, gtol[d].rtol) for d in dtypes},
            variants=self.variants(),
            optional=tuple(n for n in r.optional_inputs if n not in r.literal_inputs),
            flag=r.flag,
            rejects=self.rejects(),
            arg_names=tuple(a.name for a in self.fwd.arguments),
            public_outputs=r.public_outputs,
            reference_returns=r.reference_returns,
            output_dtypes=tuple(
                OutputDType(o.name, o.dtype.torch_name if o.dtype else None, o.dtype_of)
                for o in op.outputs
                if o.public
            ),
            differentiable=self.differentiable(),
            mutated=mutated,
            compile_dtype=dtypes[0].short,
            varlen=self.varlen(),
            offsets=next((d.name for d in op.inputs if d.offsets), None),
            zero_sizes=self.zero_sizes(),
            grad_free=tuple(
                d.name
                for d in op.inputs
                if op.backward is None
                and r.public_outputs  # '-> ()': no output that could require grad
                and op.integration is not Integration.EAGER
                and not d.mutated
                and not d.is_list
                and any(x.is_floating for x in (d.dtypes or op.primary.dtypes))
            ),
            devices=r.devices,
            inputs=self.inputs(),
            backward=self.backward(),
            backends=self.backends(),
            module=r.names.module,
            forward_qualnames=tuple(s.names.qualname for s in (r.forward, r.pair) if s is not None),
            direct_bindings=(
                tuple(s.names.binding for s in r.stages) if op.eager_fast_path else ()
            ),
            indexes=_index_rows(r),
            side_effect_launchers=_side_effect_launchers(op) if op.side_effects else None,
            compares=bool(r.public_outputs) or any(d.mutated for d in op.inputs),
            output_counts={o.name: o.count for o in op.outputs if o.count is not None} or None,
            domains={d.name: _bounds(d.domain) for d in op.inputs if d.domain is not None},
        )

    def backends(self) -> BackendsView | None:
        """The CUDA backend lists of the forward and backward stages (docs/spec.md)."""
        stages, qualnames, names = {}, {}, []
        for key, stage in (("fwd", self.r.forward), ("bwd", self.r.backward)):
            impl = next((i for i in stage.impls if i.backends), None) if stage else None
            if impl is None:
                continue
            stages[key] = tuple(
                BackendRow(
                    b.backend,
                    b.ref,
                    {rule.tensor: (rule.contiguous_dim, rule.alignment) for rule in b.layout},
                    b.int64,
                    b.signatures,
                )
                for b in impl.backends
            )
            qualnames[key] = stage.names.qualname
            names += [b.backend for b in impl.backends if b.backend not in names]
        if not stages:
            return None
        return BackendsView(stages, qualnames, tuple(names), self._resized())

    def _resized(self) -> tuple[str, dict] | None:
        """The first sample with its first outer dim (one no contract needs contiguous) grown."""
        inner = _contiguous_dims(self.op)
        first_id, first = next(iter(self.samples().items()))
        grown = dict(first)
        if first.get("batch"):
            grown["batch"] = (first["batch"][0] + 1, *first["batch"][1:])
            return first_id, grown
        for name, value in first.items():
            if name != "batch" and isinstance(value, int) and name not in inner:
                grown[name] = value + 1
                return first_id, grown
        return None


def _contiguous_dims(op) -> set[str]:
    """The dims that some backend's layout contract needs contiguous."""
    inner = set()
    for stage in (op.forward, op.backward):
        for launcher in stage.launchers if stage else ():
            for rule in launcher.layout:
                decl = op.input(rule.tensor)
                if decl is not None and decl.shape.min_rank:
                    entries = [e for e in decl.shape.entries if e != ELLIPSIS]
                    d = rule.contiguous_dim
                    if -len(entries) <= d < len(entries):
                        inner.update(entries[d].names)
    return inner


# Index inputs (docs/spec.md, "Index inputs"): how the tests draw them, the rows of their
# out-of-range tests, and which zero sizes they refuse.


def _index_bound(r: ResolvedOp, decl) -> str:
    """The size an index input's drawn entries index: the sample's dim, or the shape of the
    spelled-out input that binds it (made before the drawn ones); "" for other inputs."""
    if not decl.indexes or decl.init != "index":
        return ""
    if decl.indexes in r.sample_dims:
        return decl.indexes
    b = r.plan.bound[decl.indexes]
    return f"{b.tensor}.shape[{b.index}]"


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


def _list_return_rejects(r: ResolvedOp) -> list[tuple[str, str]]:
    """Note [list returns]: an int argument giving a list output's count is refused negative;
    a list input read beside the count's list is refused with another length."""
    out = []
    known = set(r.plan.bound) | {
        a.name for a in r.op.forward.schema.arguments if a.type in ("int", "SymInt")
    }
    for o in r.op.outputs:
        arg = r.op.forward.schema.argument(o.count) if isinstance(o.count, str) else None
        if arg is not None and arg.type in ("int", "SymInt") and (arg.name, "negative") not in out:
            out.append((arg.name, "negative"))
        for lst, _ in element_dims(r.op, o, known).values():
            if lst != o.count and (lst, "length") not in out:
                out.append((lst, "length"))
    return out


def _index_rows(r: ResolvedOp) -> tuple[IndexRow, ...]:
    op = r.op
    shared = {d.same_dtype_as for d in op.inputs if d.same_dtype_as}
    rows = []
    for d in op.inputs:
        if not d.indexes:
            continue
        b = r.plan.bound[d.indexes]
        own = d.same_dtype_as is None and d.name not in shared
        dtypes = tuple(x.torch_name for x in d.dtypes) if own else ()
        rows.append(IndexRow(d.name, d.indexes, b.tensor, b.index, d.skips_negative, dtypes))
    return tuple(rows)


def _index_refuses(op, sample, dim: str) -> bool:
    """Whether some index input of ``dim`` has an entry in ``sample`` once ``dim`` is 0 that no
    size 0 allows: any entry without ``negative: skip``, a spelled-out one >= 0 with it (drawn
    entries are all negative then)."""
    env = {**sample.env(), dim: 0}
    for d in op.inputs:
        if d.indexes != dim:
            continue
        values = sample.get(d.name)
        if isinstance(values, tuple):
            if any(not (d.skips_negative and v < 0) for v in values):
                return True
            continue
        if d.skips_negative:
            continue
        numel = 1
        try:
            for e in d.shape.entries:
                numel *= _product(sample.batch or ()) if e == ELLIPSIS else e.evaluate(env)
        except (EvaluationError, KeyError, IndexError):
            return True  # sized by a derived dim: taken to have entries
        if numel:
            return True
    return False


# Value domains (docs/spec.md, "Value domains"): the range each init draws from, and the drawn
# inputs whose init reaches outside their domain.
INIT_RANGES = {"randn": (-math.inf, math.inf), "logsigmoid": (-math.inf, 0.0)}


def _bounds(domain: tuple[float, float]) -> tuple[str, str]:
    return repr(domain[0]), repr(domain[1])


def _clamped(op, literal: set) -> tuple[tuple[str, tuple[str, str]], ...]:
    out = []
    for d in op.inputs:
        if d.domain is None or d.name in literal or d.init not in INIT_RANGES:
            continue
        lo, hi = INIT_RANGES[d.init]
        if d.domain[0] > lo or d.domain[1] < hi:
            out.append((d.name, _bounds(d.domain)))
    return tuple(out)


def tests_view(spec: Spec, r: ResolvedOp) -> TestsView:
    return _Builder(spec, r).build()


def _side_effect_launchers(op) -> dict:
    """Device -> the forward's launcher references there (every backend of a list)."""
    out: dict[str, tuple[str, ...]] = {}
    for lch in op.forward.launchers:
        out[lch.device] = out.get(lch.device, ()) + (f"{lch.module}:{lch.function}",)
    return out
