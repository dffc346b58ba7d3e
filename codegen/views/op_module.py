"""Records for one generated operator module (``generated/<package>/<op>.py``).

Each record is data about one piece of emitted code: a shim, a fake, the autograd.Function, the
checks of the public function. ``templates/op.py.jinja`` shows what that code looks like; the
only code fragments here are expressions over validated identifiers (shape tuples, dim reads),
never spec text. Spec text (docs, messages, variant values, defaults) stays a Python value
until the template's ``py`` or ``docstring`` filter turns it into a literal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..resolve.backward_fake import backward_tensors, dtype_source
from ..resolve.backward_fake import reads as backward_reads
from ..resolve.dims import TensorPlan, bind_from, element_dims, index_of
from ..resolve.resolved import ResolvedOp, ResolvedStage
from ..resolve.symbols import batch_local
from ..spec.model import DType, Integration, OutputDecl, Shape
from ..spec.schema import Argument, Schema
from ..spec.shapes import ELLIPSIS, Condition


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter of a generated function; ``star`` marks the keyword-only ``*``."""

    name: str
    annotation: str = ""
    has_default: bool = False
    default: object = None
    star: bool = False


@dataclass(frozen=True, slots=True)
class Statement:
    """``target = value``; ``value`` is an expression over dims and tensor sizes."""

    target: str
    value: str


@dataclass(frozen=True, slots=True)
class Alloc:
    name: str
    base: str  # the tensor whose device the output takes
    shape: str  # a tuple expression
    dtype: str | None  # None: the dtype of ``base``
    # An optional input declared 'absent_gradient: empty': when it is None the fake allocates
    # shape (0,) instead of ``shape``.
    empty_without: str | None = None
    # A 'Tensor?' return: allocated only when this test holds, else None.
    present_if: str | None = None
    # A 'Tensor[]' return (Note [list returns]): a list of this many tensors, element ``_i``
    # allocated by ``shape`` and ``dtype`` (which may read element ``_i`` of a list input).
    count: str | None = None


@dataclass(frozen=True, slots=True)
class LayoutCheck:
    """``tensor`` meets a backend's layout contract (``_layout.tensor_supports_contiguous_dim``)."""

    tensor: str
    dim: int
    alignment: int | None  # bytes; None: the element size
    optional: bool  # a Tensor? argument: None passes


@dataclass(frozen=True, slots=True)
class BackendView:
    """One entry of a CUDA backend list: the conditions under which its launcher runs."""

    backend: str
    ref: str
    layout: tuple[LayoutCheck, ...]
    # Tensor arguments whose size needs the int64 ABI, which this backend lacks; () if it has it.
    int64_args: tuple[str, ...]
    last: bool


@dataclass(frozen=True, slots=True)
class DeviceGuard:
    """Note [device guard] (_runtime): ``if test:`` switch to device ``index`` and call again.
    With ``helper`` (the arguments for ``_other_device``), ``_device`` holds the index first."""

    test: str
    index: str
    helper: str = ""


@dataclass(frozen=True, slots=True)
class ImplView:
    name: str
    ref: str
    devices: tuple[str, ...]
    launcher: str  # module-level launcher name (eager integration only)
    flag: bool | None
    flag_arg: str  # the flag as the launcher's last argument (by keyword after keywords)
    targets: tuple[str, ...]  # what the launcher's results are bound to (arity pair only)
    returns: tuple[str, ...]
    backends: tuple[BackendView, ...]  # () for one launcher
    # Registered for CUDA by the opaque or triton_op integration: the call first makes the
    # inputs' device current (Note [device guard] in _runtime); None otherwise.
    device_guard: DeviceGuard | None = None


@dataclass(frozen=True, slots=True)
class FakeView:
    dims: tuple[Statement, ...]
    dynamic: tuple[str, ...]  # data-dependent sizes: one unbacked symbol each
    allocs: tuple[Alloc, ...]
    returns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StageView:
    name: str
    qualname: str
    binding: str
    fake_name: str
    schema: str  # as written in the spec
    params: tuple[Param, ...]
    args: tuple[str, ...]
    annotation: str
    impls: tuple[ImplView, ...]
    mutated: tuple[str, ...]
    fake: FakeView


@dataclass(frozen=True, slots=True)
class ForwardCall:
    """Statements computing every forward output, branching on the arity flag if there is one."""

    binding: str
    targets: tuple[str, ...]
    args: tuple[str, ...]
    flag: str | None
    wide_binding: str
    wide_targets: tuple[str, ...]
    extras: tuple[str, ...]  # None when the flag is off


@dataclass(frozen=True, slots=True)
class GradResult:
    grad: str | None  # None: the input gets no gradient
    only_if: str | None  # an optional input: the gradient is returned only when it was given


@dataclass(frozen=True, slots=True)
class FunctionView:
    name: str
    params: tuple[Param, ...]
    annotation: str
    call: ForwardCall
    saved: tuple[str, ...]
    scalars: tuple[str, ...]
    non_differentiable: tuple[str, ...]
    returns: tuple[str, ...]
    grads_in: tuple[Param, ...]
    backward: str
    backward_targets: tuple[str, ...]
    backward_args: tuple[str, ...]
    results: tuple[GradResult, ...]


@dataclass(frozen=True, slots=True)
class TensorCheck:
    """One tensor argument of the public function: one test before and one after its dims.

    ``early`` (rank, dtype, device) runs before the tensor's own dims are read; ``late`` compares
    the whole shape with the dims known by then. Either may be empty.
    """

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
class ListCheck:
    """A Tensor[] argument: the list itself, then each element ``_e`` against the declaration.

    Dims bound by other inputs are compared; other dims of an element are its own (free).
    """

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
    bindings: tuple[Statement, ...] = ()
    early: tuple[str, ...] = ()
    offsets: None = None
    optional: bool = False  # Tensor[]?: None passes

    @property
    def late(self) -> tuple[str, ...]:
        return (self.test, self.expected)


@dataclass(frozen=True, slots=True)
class IndexCheck:
    """An index input's entries checked in range (Note [index inputs] in _runtime), once every
    tensor's shape is checked: the dim it indexes is known by then."""

    name: str
    optional: bool
    dim: str  # the dim read as the bound
    skip: bool  # negative entries skip a slot instead of being refused


@dataclass(frozen=True, slots=True)
class ConstraintCheck:
    test: str  # the condition under which the call is refused
    message: str  # spec text
    dims: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScalarCheck:
    """A non-tensor argument (or the arity flag), typed as its schema type says.

    Note [scalar types] (_runtime): ``test`` is the condition under which the public function
    refuses it, an ``isinstance`` or two. A list or a ``Device`` goes through the runtime helper
    ``convert`` instead (``_scalar_list``, ``_scalar_device``), which checks it and returns what
    the launcher receives, as the dispatcher would pass it: a new list, a ``torch.device``.
    """

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


# What the public function accepts for each schema type (Note [scalar types] in _runtime), symbolic
# values included (torch.compile passes SymInt / SymFloat for dynamic scalars). bool is a subclass
# of int: where the classes list int but not bool, a bool is refused too.
_SCALAR_TYPES = {
    "int": ("int", "torch.SymInt"),
    "SymInt": ("int", "torch.SymInt"),
    "float": ("float", "int", "torch.SymFloat", "torch.SymInt"),
    "bool": ("bool", "torch.SymBool"),
    "str": ("str",),
    "ScalarType": ("torch.dtype",),
    "Layout": ("torch.layout",),
    "MemoryFormat": ("torch.memory_format",),
    "Device": ("torch.device", "str"),
    "Generator": ("torch.Generator",),
    "Scalar": ("bool", "int", "float", "torch.SymInt", "torch.SymFloat", "torch.SymBool"),
}

# How a refusal names each type.
_SCALAR_EXPECTED = {
    "SymInt": "int",
    "ScalarType": "torch.dtype",
    "Layout": "torch.layout",
    "MemoryFormat": "torch.memory_format",
    "Device": "torch.device or a device string",
    "Generator": "torch.Generator",
    "Scalar": "a real number (bool, int or float)",
}

# Element types whose fixed-size lists also take one number, repeated (torch's ``stride=2``).
_BROADCAST = ("int", "SymInt", "float")


def _classes(base: str) -> str:
    types = _SCALAR_TYPES[base]
    return types[0] if len(types) == 1 else f"({', '.join(types)})"


def scalar_check(name: str, schema_type: str, default: object = None) -> ScalarCheck:
    """The check of an argument of scalar schema type ``schema_type`` and schema default
    ``default`` (Note [scalar types])."""
    optional = schema_type.endswith("?")
    written = schema_type.removesuffix("?")
    m = re.fullmatch(r"(\w+)(\??)\[(\d*)\]", written)
    if m:
        element, size = m[1], int(m[3]) if m[3] else None
        return ScalarCheck(
            name=name,
            types=_classes(element),
            expected=_SCALAR_EXPECTED.get(element, element),
            optional=optional,
            convert="scalar_list",
            schema_type=written,
            size=size,
            broadcast=size is not None and element in _BROADCAST,
            none_elements=bool(m[2]),
            default_size=(
                len(default)
                if size is not None and isinstance(default, (list, tuple)) and len(default) != size
                else None
            ),
        )
    expected = _SCALAR_EXPECTED.get(written, written)
    if written == "Device":
        return ScalarCheck(name, _classes(written), expected, optional, convert="scalar_device")
    types = _SCALAR_TYPES[written]
    test = f"not isinstance({name}, {_classes(written)})"
    if "int" in types and "bool" not in types:
        test += f" or isinstance({name}, bool)"
    if optional:
        test = f"{name} is not None and " + (f"({test})" if " or " in test else test)
    return ScalarCheck(name, _classes(written), expected, optional, test=test)


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
    name: str
    dtypes: tuple[str, ...] = ()  # torch dtype names
    values: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class DocArg:
    name: str
    text: str  # generated from validated names and types
    note: str = ""


@dataclass(frozen=True, slots=True)
class Docstring:
    doc: str  # spec text: the op's doc, stripped
    args: tuple[DocArg, ...]
    result: str
    returns: tuple[DocArg, ...]
    updated: tuple[str, ...] = ()  # the inputs written in place


@dataclass(frozen=True, slots=True)
class PublicView:
    name: str
    params: tuple[Param, ...]
    result: str
    result_fields: tuple[Param, ...]
    docstring: Docstring
    checks: tuple[TensorCheck | ListCheck | Statement, ...]
    constraints: tuple[ConstraintCheck, ...]
    scalars: tuple[ScalarCheck, ...]
    variants: tuple[VariantCheck, ...]
    mutated: tuple[MutationCheck, ...]
    call: ForwardCall | None  # None: the autograd.Function computes the outputs
    no_grad: bool  # no backward: outputs never require grad (call under torch.no_grad)
    function_args: tuple[str, ...]
    outputs: tuple[str, ...]
    direct: DirectCall | None = None
    indexes: tuple[IndexCheck, ...] = ()
    counts: tuple[CountCheck, ...] = ()
    lengths: tuple[LengthCheck, ...] = ()


@dataclass(frozen=True, slots=True)
class DirectStage:
    """A stage's implementation for the eager fast path: the registered shim of the device its
    first tensor argument is on, called without the dispatcher."""

    name: str  # e.g. _l2norm_fwd_direct
    params: tuple[Param, ...]
    annotation: str
    args: tuple[str, ...]
    cuda: str | None  # the shim registered for CUDA (None: none)
    cpu: str | None
    # The test that picks the CUDA shim: ``x.is_cuda`` for a first tensor argument that is
    # always given; else ``_on_cuda(...)`` over the tensor arguments up to the first such one
    # (an optional tensor may be None, a list empty or hold None).
    cuda_test: str


@dataclass(frozen=True, slots=True)
class DirectCall:
    """The public function's eager fast path (Note [eager fast path] in _runtime)."""

    tensors: tuple[str, ...]  # every tensor argument, for _direct_ok
    needs_grad: str  # when the autograd.Function must record the call ("" without backward)
    function: str | None  # the Function over the direct stages; None without backward
    call: ForwardCall  # the forward through the direct stages
    mutated: tuple[str, ...]  # inputs written in place: their version counters are bumped
    mutated_optional: tuple[str, ...] = ()  # those of them that may be None (Tensor(a!)?)
    # No input dtype can require grad (bool and integer only), so an operator without a backward
    # runs with grad mode as it is (Note [grad mode on the fast path] in _runtime).
    grad_free: bool = False


@dataclass(frozen=True, slots=True)
class OpView:
    name: str
    module: str
    summary: str  # spec text: the doc's first line
    integration: str
    stages: tuple[StageView, ...]
    constants: tuple[Constant, ...]
    function: FunctionView | None
    public: PublicView
    exports: tuple[str, ...]
    runtime_imports: tuple[str, ...]  # helpers of _runtime the module uses, sorted
    layout_imports: tuple[str, ...]  # helpers of _layout (backend selection), sorted
    direct_stages: tuple[DirectStage, ...] = ()  # eager fast path only
    direct_function: FunctionView | None = None
    # 'side_effects: true': the forward operators torch.compile must never drop, and the packets
    side_effect_ops: tuple[str, ...] = ()


def import_order(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _tuple_expr(parts: list[str]) -> str:
    return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def _shape_expr(shape: Shape, batch: str) -> str:
    return _tuple_expr([f"*{batch}" if e == ELLIPSIS else e.render({}) for e in shape.entries])


def _batch_slice(t: TensorPlan) -> str:
    before, after = len(t.shape.before), len(t.shape.after)
    return f"{t.name}.shape[{before or ''}:{f'-{after}' if after else ''}]"


def _params(schema: Schema) -> tuple[Param, ...]:
    """Python parameters for a schema, defaults included.

    Note [kernel defaults]: the dispatcher leaves out trailing arguments that equal their
    schema default when it calls a Python kernel or fake, so every generated function taking
    schema arguments repeats the defaults.
    """
    params: list[Param] = []
    for a in schema.arguments:
        if a.kwarg_only and not any(p.star for p in params):
            params.append(Param("*", star=True))
        params.append(_param(a))
    return tuple(params)


def _call_args(schema: Schema) -> tuple[str, ...]:
    """Arguments of a call in schema order; keyword-only ones are passed by keyword."""
    return tuple(f"{a.name}={a.name}" if a.kwarg_only else a.name for a in schema.arguments)


def _param(a: Argument, with_default: bool = True) -> Param:
    # A list default is written as a tuple: a launcher that mutated a shared list default
    # would change it for every later call.
    default = tuple(a.default_value) if isinstance(a.default_value, list) else a.default_value
    return Param(a.name, a.annotation, with_default and a.has_default, default)


def _annotation(n: int, optional: tuple[bool, ...] = (), lists: tuple[bool, ...] = ()) -> str:
    if n == 0:
        return "None"
    kinds = [
        "list[Tensor]"
        if (lists and lists[i])
        else "Tensor | None"
        if (optional and optional[i])
        else "Tensor"
        for i in range(n)
    ]
    return kinds[0] if n == 1 else f"tuple[{', '.join(kinds)}]"


def _negate(c: Condition) -> str:
    inverse = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
    return f"{c.left.render({})} {inverse[c.op]} {c.right.render({})}"


class _Base:
    """Dim reads and the forward call, shared by the builders of each part of the module."""

    def __init__(self, r: ResolvedOp) -> None:
        self.r = r
        self.op = r.op
        self.plan = r.plan
        self.fwd = r.op.forward.schema
        self.batch = batch_local(r.op)

    # --- dims -------------------------------------------------------------------------------

    def _closure(self, needed: set[str]) -> set[str]:
        derived = {d.name: d for d in self.op.dims}
        out, frontier = set(needed), list(needed)
        while frontier:
            d = derived.get(frontier.pop())
            for n in d.expr.names if d else ():
                if n not in out:
                    out.add(n)
                    frontier.append(n)
        return out

    def _dim_reads(self, needed: set[str], batch: bool, available: set[str] | None):
        """Statements binding ``needed`` dims (and ``batch``) from the tensors ``available``."""
        closure = self._closure(needed)
        out = []
        if batch and self.plan.batch_source is not None:
            src = next(t for t in self.plan.tensors if t.binds_batch)
            out.append(Statement(self.batch, _batch_slice(src)))
        for name, b in self.plan.bound.items():
            if name not in closure or b.derived:
                continue
            if available is not None:
                b = bind_from(self.op, self.plan, name, available)
            out.append(Statement(name, f"{b.tensor}.shape[{b.index}]"))
        for d in self.op.dims:
            if d.name in closure:
                out.append(Statement(d.name, d.expr.render({})))
        return out

    def _scalar_names(self) -> set[str]:
        return {a.name for a in self.fwd.arguments if a.type in ("int", "SymInt")}

    @staticmethod
    def _needs(shape: Shape) -> tuple[set[str], bool]:
        names = {n for e in shape.entries if e != ELLIPSIS for n in e.names}
        return names, shape.has_ellipsis

    def _alloc_base(self, available: list[str]) -> str:
        for t in self.plan.tensors:
            if not t.optional and not self.op.input(t.name).mutated and t.name in available:
                return t.name
        return available[0]

    @staticmethod
    def _dtype(dtype: DType | None, dtype_of: str | None, base: str) -> str | None:
        if dtype is not None:
            return f"torch.{dtype.torch_name}"
        return None if dtype_of == base else f"{dtype_of}.dtype"

    # --- stages -----------------------------------------------------------------------------

    def _forward_call(self) -> ForwardCall:
        r = self.r
        pair = r.pair
        outs = tuple(o.name for o in self.op.outputs if o.name not in r.pair_extras)
        return ForwardCall(
            binding=r.forward.names.binding,
            targets=outs,
            args=_call_args(self.fwd),
            flag=r.flag,
            wide_binding=pair.names.binding if pair else "",
            wide_targets=outs + r.pair_extras,
            extras=r.pair_extras,
        )


class _Stages(_Base):
    """Shims and fakes of each registered operator."""

    def _forward_fake(self, outputs: tuple[OutputDecl, ...]) -> FakeView:
        needed: set[str] = set()
        batch = False
        dynamic = [name for name, _ in self.op.dynamic_dims]
        for out in outputs:
            names, b = self._needs(out.shape)
            needed |= names
            batch |= b
        dims = self._dim_reads(needed - set(dynamic), batch, None)
        tensors = [t.name for t in self.plan.tensors]
        if not tensors:  # only list inputs: the public function refuses an empty first list
            tensors = [next(f"{d.name}[0]" for d in self.op.inputs if d.is_list)]
        base = self._alloc_base(tensors)
        allocs = tuple(
            self._list_alloc(o, base)
            or Alloc(
                o.name,
                base,
                _shape_expr(o.shape, self.batch),
                self._dtype(o.dtype, o.dtype_of, base),
                present_if=self._present_if(o),
            )
            for o in outputs
        )
        return FakeView(
            tuple(dims),
            tuple(n for n in dynamic if n in needed),
            allocs,
            tuple(o.name for o in outputs),
        )

    def _list_alloc(self, o: OutputDecl, base: str) -> Alloc | None:
        """Note [list returns]: a 'Tensor[]' output allocates ``count`` tensors; where the count
        is a list input's length, element ``_i`` reads its own dims (and dtype) from element
        ``_i`` of the list inputs that give them."""
        if o.count is None:
            return None
        per_element = element_dims(self.op, o, set(self.plan.bound) | self._scalar_names())
        rename = {n: f"{lst}[_i].shape[{idx}]" for n, (lst, idx) in per_element.items()}
        shape = _tuple_expr(
            [f"*{self.batch}" if e == ELLIPSIS else e.render(rename) for e in o.shape.entries]
        )
        source = self.op.input(o.count) if isinstance(o.count, str) else None
        if source is not None and source.is_list:
            count = f"len({o.count})"
            dtype = f"{o.dtype_of}[_i].dtype" if o.dtype_of == o.count else None
        else:
            count, dtype = str(o.count), None
        dtype = dtype or self._dtype(o.dtype, o.dtype_of, base)
        return Alloc(o.name, base, shape, dtype, count=count)

    def _present_if(self, o: OutputDecl) -> str | None:
        """The test under which a 'Tensor?' return is given (its ``when`` argument)."""
        if o.when is None:
            return None
        arg = self.fwd.argument(o.when)
        return f"{o.when} is not None" if arg is not None and arg.is_tensor else o.when

    def _backward_fake(self, schema: Schema) -> FakeView:
        available = [a.name for a in schema.arguments if a.is_tensor and not a.optional]
        base = self._alloc_base(available)
        tensors = backward_tensors(self.op)
        needed: set[str] = set()
        batch = False
        allocs = []
        for g in self.r.gradients:
            target = self.op.input(g.input)
            if target.name in available:
                allocs.append(Alloc(g.name, target.name, f"{target.name}.shape", None))
                continue
            names, b = self._needs(target.shape)
            needed |= names
            batch |= b
            dtype = self._gradient_dtype(target, tensors)
            empty = target.name if target.absent_gradient == "empty" else None
            allocs.append(Alloc(g.name, base, _shape_expr(target.shape, self.batch), dtype, empty))
        dims = self._backward_reads(tensors, needed, batch)
        return FakeView(tuple(dims), (), tuple(allocs), tuple(g.name for g in self.r.gradients))

    def _backward_reads(self, tensors, needed: set[str], batch: bool) -> list[Statement]:
        """Note [backward fake sources] (resolve/backward_fake.py): each dim from any tensor the
        backward takes that has it, incoming gradients and saved outputs included."""
        found = backward_reads(self.op, self.plan, tensors, needed, batch)
        out = [Statement(self.batch, found.batch)] if found.batch else []
        return out + [Statement(name, value) for name, value in found.dims]

    def _gradient_dtype(self, target, tensors) -> str:
        """The dtype of a gradient whose input the backward does not take: the declared one, else
        that of a backward tensor declared to have the input's dtype."""
        same = target.same_dtype_as
        if same is not None and same in tensors.shapes:
            return f"{same}.dtype"
        if same is None and len(target.dtypes) == 1:
            return f"torch.{target.dtypes[0].torch_name}"
        source = dtype_source(self.op, tensors, target.name)
        if source is not None:
            return f"{source}.dtype"
        # Refused by validation; written as before so that views never fail.
        return f"{same}.dtype" if same is not None else f"torch.{target.dtypes[0].torch_name}"

    def _stage(self, s: ResolvedStage) -> StageView:
        impls = tuple(
            ImplView(
                name=i.name,
                ref=i.ref,
                devices=i.devices,
                launcher=i.launcher,
                flag=s.flag,
                flag_arg=(
                    ""
                    if s.flag is None
                    else f"{self.op.arity_pair.flag}={s.flag}"
                    if any(a.kwarg_only for a in s.schema.arguments)
                    else str(s.flag)
                ),
                targets=tuple(n if n in s.returns else "_" for n in s.launcher_returns),
                returns=s.returns,
                device_guard=(
                    _device_guard(s.schema)
                    if "CUDA" in i.devices and self.op.integration is not Integration.EAGER
                    else None
                ),
                backends=_backend_views(s.schema, i.backends),
            )
            for i in s.impls
        )
        fake = self._backward_fake(s.schema) if s.kind == "bwd" else self._forward_fake(s.outputs)
        return StageView(
            name=s.names.name,
            qualname=s.names.qualname,
            binding=s.names.binding,
            fake_name=s.names.fake,
            schema=s.schema.text,
            params=_params(s.schema),
            args=_call_args(s.schema),
            annotation=_annotation(
                len(s.schema.returns),
                tuple(ret.type == "Tensor?" for ret in s.schema.returns),
                tuple(ret.type == "Tensor[]" for ret in s.schema.returns),
            ),
            impls=impls,
            mutated=tuple(a.name for a in s.schema.arguments if a.is_write),
            fake=fake,
        )

    # --- autograd.Function and public function ----------------------------------------------


class _Function(_Base):
    """The autograd.Function wrapping the forward and backward operators."""

    def _function(self) -> FunctionView:
        r = self.r
        bwd = r.backward
        params = [Param(a.name, a.annotation) for a in self.fwd.arguments]
        if r.flag:
            params.append(Param(r.flag, "bool"))
        public = r.public_outputs
        optional = tuple(o in r.pair_extras for o in public)
        non_diff = tuple(
            o.name
            for o in self.op.outputs
            if o.public and o.dtype is not None and not o.dtype.is_floating
        )
        results = []
        for name in [a.name for a in self.fwd.arguments] + ([r.flag] if r.flag else []):
            grad = r.gradient_of(name)
            only_if = name if grad and name in r.optional_inputs else None
            results.append(GradResult(grad, only_if))
        return FunctionView(
            name=r.names.function,
            params=tuple(params),
            annotation=_annotation(len(public), optional),
            call=self._forward_call(),
            saved=r.saved_tensors,
            scalars=r.saved_scalars,
            non_differentiable=non_diff,
            returns=public,
            grads_in=tuple(
                Param(f"grad_{o}", "Tensor | None" if o in r.pair_extras else "Tensor")
                for o in public
            ),
            backward=bwd.names.binding,
            backward_targets=tuple(g.name for g in r.gradients),
            backward_args=_call_args(self.op.backward.schema),
            results=tuple(results),
        )


class _Public(_Base):
    """The public function: signature, docstring, checks and the call."""

    def _public_params(self) -> tuple[Param, ...]:
        params = list(_params(self.fwd))
        pair = self.op.arity_pair
        if pair:
            flag = Param(pair.flag, "bool", True, False)
            names = [p.name for p in params]
            pos = names.index(pair.after) + 1 if pair.after in names else len(params)
            params.insert(pos, flag)
        return tuple(params)

    def _docstring(self) -> Docstring:
        op, r = self.op, self.r
        pair = op.arity_pair
        args: list[DocArg] = []
        flag_doc = DocArg(pair.flag, f"also return {', '.join(r.pair_extras)}.") if pair else None
        for a in self.fwd.arguments:
            decl = op.input(a.name)
            if decl is not None:
                dtypes = (
                    f"dtype of ``{decl.same_dtype_as}``"
                    if decl.same_dtype_as
                    else " | ".join(d.torch_name for d in decl.dtypes)
                )
                extra = (", optional" if a.optional else "") + (
                    ", updated in place" if decl.mutated else ""
                )
                args.append(
                    DocArg(a.name, f"``{decl.shape}``, {dtypes}{extra}.", _index_note(decl))
                )
            else:
                variant = op.variant(a.name)
                args.append(DocArg(a.name, f"``{a.type}``.", _arg_note(a, variant)))
            if pair and pair.after == a.name:
                args.append(flag_doc)
        if pair and pair.after is None:
            args.append(flag_doc)
        returns = [_return_doc(r, self.fwd, o) for o in self.op.outputs if o.public]
        updated = tuple(d.name for d in op.inputs if d.mutated)
        return Docstring(op.doc or op.name, tuple(args), r.names.result, tuple(returns), updated)

    def _checks(self) -> tuple[list, list[Constant]]:
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
                constants.append(Constant(dtypes, dtypes=tuple(d.torch_name for d in decl.dtypes)))
            items.append(self._tensor_check(t, dtypes, decl.same_dtype_as, first, devices))
        if not derived_done:
            items += self._derived()
        for decl in op.inputs:
            if decl.is_list:
                dtypes = None
                if decl.same_dtype_as is None:
                    dtypes = r.names.constant(decl.name, "DTYPES")
                    constants.append(
                        Constant(dtypes, dtypes=tuple(d.torch_name for d in decl.dtypes))
                    )
                items.append(self._list_check(decl, dtypes, first, devices))
        for v in op.variants:
            constants.append(Constant(r.names.constant(v.arg, "VALUES"), values=v.values))
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
            bindings.insert(0, Statement(self.batch, _batch_slice(t)))
        compare = bool(t.checks) or t.checks_batch
        expected = _shape_expr(shape, self.batch)
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
            expected=_tuple_expr(parts),
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

    def _scalars(self) -> tuple[ScalarCheck, ...]:
        """Every scalar argument and the arity flag (a bool), in the public function's order."""
        args = {a.name: (a.type, a.default_value) for a in self.fwd.arguments if a.is_scalar}
        if self.r.flag:
            args[self.r.flag] = ("bool", False)
        return tuple(
            scalar_check(p.name, *args[p.name]) for p in self._public_params() if p.name in args
        )

    def _constraints(self) -> tuple[ConstraintCheck, ...]:
        out = []
        for c in self.op.constraints:
            test = _negate(c.check)
            if c.when is not None:
                test = f"{c.when} is not None and {test}"
            out.append(ConstraintCheck(test, c.message, c.check.names))
        return tuple(out)

    def _indexes(self) -> tuple[IndexCheck, ...]:
        optional = set(self.r.optional_inputs)
        return tuple(
            IndexCheck(d.name, d.name in optional, d.indexes, d.skips_negative)
            for d in self.op.inputs
            if d.indexes
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
                used |= _names_in(item.value)
                kept.append(item)
                continue
            if isinstance(item, ListCheck):
                used |= _names_in(item.test) | _names_in(item.expected)
                kept.append(item)
                continue
            reads = [s for s in item.bindings if s.target in used or _read_by(s.target, item.late)]
            for s in reads:
                used |= _names_in(s.value)
            if item.offsets:
                used.add(item.offsets)
            for test in item.early + item.late:
                used |= _names_in(test)
            kept.append(_with_bindings(item, tuple(reads)))
        return list(reversed(kept))

    def build(self) -> OpView:
        op, r = self.op, self.r
        checks, constants = self._checks()
        public = PublicView(
            name=r.names.public,
            params=self._public_params(),
            # '-> ()': the public function returns None, as the libraries' wrappers do.
            result=r.names.result if r.public_outputs else "",
            result_fields=tuple(
                Param(o, "Tensor | None", True, None)
                if o in r.pair_extras or op.output(o).when is not None
                else Param(o, "list[Tensor]" if op.output(o).count is not None else "Tensor")
                for o in r.public_outputs
            ),
            docstring=self._docstring(),
            checks=tuple(checks),
            constraints=self._constraints(),
            indexes=self._indexes(),
            counts=_count_checks(r),
            lengths=_length_checks(r),
            scalars=self._scalars(),
            variants=tuple(
                VariantCheck(v.arg, r.names.constant(v.arg, "VALUES"), v.values)
                for v in op.variants
            ),
            mutated=tuple(
                MutationCheck(
                    d.name, tuple(a.name for a in self.fwd.tensor_arguments if a.name != d.name)
                )
                for d in op.inputs
                if d.mutated
            ),
            call=None if op.backward else self._forward_call(),
            no_grad=op.backward is None and op.integration is not Integration.EAGER,
            function_args=tuple(a.name for a in self.fwd.arguments) + ((r.flag,) if r.flag else ()),
            outputs=r.public_outputs,
            direct=_Direct(r).call() if op.eager_fast_path else None,
        )
        direct = _Direct(r) if op.eager_fast_path else None
        direct_stages = direct.stages() if direct else ()
        stage_views = tuple(_Stages(r)._stage(s) for s in r.stages)
        return OpView(
            name=op.name,
            module=r.names.module,
            summary=(op.doc.splitlines()[0] if op.doc else op.name),
            integration=op.integration.value,
            stages=stage_views,
            constants=tuple(constants),
            function=_Function(r)._function() if op.backward else None,
            public=public,
            exports=tuple(
                sorted(
                    (r.names.public, r.names.result) if r.public_outputs else (r.names.public,),
                    key=import_order,
                )
            ),
            runtime_imports=_runtime_imports(op, public, direct_stages, stage_views),
            layout_imports=_layout_imports(r),
            direct_stages=direct_stages,
            direct_function=direct.function() if direct and op.backward else None,
            side_effect_ops=_side_effect_ops(r) if op.side_effects else (),
        )


def _side_effect_ops(r: ResolvedOp) -> tuple[str, ...]:
    """Each forward operator's overload binding and its packet (a caller of ``torch.ops``
    reaches the packet), for ``torch.fx.node.has_side_effect``."""
    out = []
    for s in r.stages:
        if s.kind != "bwd":
            out += [s.names.binding, "torch.ops." + s.names.qualname.replace("::", ".")]
    return tuple(out)


class _Direct(_Base):
    """The eager fast path: stages called without the dispatcher, and a Function over them."""

    def _name(self, stage) -> str:
        return f"{stage.names.binding}_direct"

    def stages(self) -> tuple[DirectStage, ...]:
        out = []
        for s in self.r.stages:
            by_device = {d: i.name for i in s.impls for d in i.devices}
            out.append(
                DirectStage(
                    name=self._name(s),
                    params=_params(s.schema),
                    annotation=_annotation(
                        len(s.schema.returns),
                        tuple(ret.type == "Tensor?" for ret in s.schema.returns),
                        tuple(ret.type == "Tensor[]" for ret in s.schema.returns),
                    ),
                    args=_call_args(s.schema),
                    cuda=by_device.get("CUDA"),
                    cpu=by_device.get("CPU"),
                    cuda_test=_cuda_test(s.schema),
                )
            )
        return tuple(out)

    def _direct_forward(self) -> ForwardCall:
        r = self.r
        call = self._forward_call()
        return replace(
            call,
            binding=self._name(r.forward),
            wide_binding=self._name(r.pair) if r.pair else "",
        )

    def function(self) -> FunctionView:
        f = _Function(self.r)._function()
        return replace(
            f,
            name=f.name.removesuffix("Function") + "DirectFunction",
            call=self._direct_forward(),
            backward=self._name(self.r.backward),
        )

    def call(self) -> DirectCall:
        r, op = self.r, self.op
        tensors = tuple(
            _starred(a) if a.is_tensor_list else a.name
            for a in self.fwd.arguments
            if a.is_tensor or a.is_tensor_list
        )
        grads = []
        for a in self.fwd.arguments:
            if a.is_tensor and r.gradient_of(a.name):
                test = f"{a.name}.requires_grad"
                grads.append(f"({a.name} is not None and {test})" if a.optional else test)
        any_grad = grads[0] if len(grads) == 1 else f"({' or '.join(grads)})"
        needs_grad = f"torch.is_grad_enabled() and {any_grad}" if grads and op.backward else ""
        return DirectCall(
            tensors=tensors,
            needs_grad=needs_grad,
            function=(
                r.names.function.removesuffix("Function") + "DirectFunction"
                if op.backward
                else None
            ),
            call=self._direct_forward(),
            mutated=tuple(d.name for d in op.inputs if d.mutated),
            mutated_optional=tuple(
                d.name for d in op.inputs if d.mutated and d.name in r.optional_inputs
            ),
            grad_free=not any(_may_require_grad(op, d) for d in op.inputs),
        )


def _count_checks(r: ResolvedOp) -> tuple[CountCheck, ...]:
    """Note [list returns]: each int argument that gives a list output's count."""
    out = []
    for o in r.op.outputs:
        arg = r.op.forward.schema.argument(o.count) if isinstance(o.count, str) else None
        if arg is not None and arg.type in ("int", "SymInt"):
            out.append(CountCheck(arg.name, o.name))
    return tuple(out)


def _length_checks(r: ResolvedOp) -> tuple[LengthCheck, ...]:
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


def _arg_note(a: Argument, variant) -> str:
    """Variant values and defaults, as Python reprs (spec text: printed escaped)."""
    parts = []
    if variant is not None:
        parts.append("One of " + ", ".join(repr(v) for v in variant.values) + ".")
    if a.has_default:
        parts.append(f"Default: ``{a.default_value!r}``.")
    return " ".join(parts)


def _return_doc(r: ResolvedOp, fwd: Schema, o: OutputDecl) -> DocArg:
    """How the docstring describes a public output, and when it is None."""
    dtype = o.dtype.torch_name if o.dtype else f"dtype of ``{o.dtype_of}``"
    when = ""
    if o.name in r.pair_extras:
        when = f" (None unless ``{r.op.arity_pair.flag}``)"
    if o.when is not None:
        arg = fwd.argument(o.when)
        given = (
            "is given"
            if arg is not None and arg.is_tensor
            else "is true"
            if arg is None or arg.type.startswith("bool")
            else "is nonzero"
        )
        when = f" (None unless ``{o.when}`` {given})"
    if o.count is not None:
        arg = fwd.argument(o.count) if isinstance(o.count, str) else None
        count = (
            f"list of tensors, one per element of ``{o.count}``"
            if arg is not None and arg.is_tensor_list
            else f"list of ``{o.count}`` tensors"
        )
        if o.dtype_of is not None and o.dtype_of == o.count:
            dtype = f"dtype of that element of ``{o.dtype_of}``"
        return DocArg(o.name, f"{count}, each ``{o.shape}``, {dtype}.")
    return DocArg(o.name, f"``{o.shape}``, {dtype}{when}.")


def _device_args(schema: Schema) -> list[str]:
    """The tensor arguments up to the first one always given (a plain, non-optional Tensor):
    the first tensor present among them decides the device of a call."""
    names = []
    for a in schema.arguments:
        if not (a.is_tensor or a.is_tensor_list):
            continue
        names.append(a.name)
        if a.is_tensor and not a.optional:
            break
    return names


def _device_guard(schema: Schema) -> DeviceGuard:
    """Note [device guard]: a first tensor argument always given is read inline (``is_cuda``
    first: a CUDA implementation called with CPU tensors, as the backend tests do, or on a
    build without CUDA, asks nothing); otherwise the runtime finds the first tensor present."""
    names = _device_args(schema)
    if len(names) == 1 and _always_given(schema, names[0]):
        t = names[0]
        test = f"{t}.is_cuda and {t}.get_device() != _cuda_device()"
        return DeviceGuard(test, f"{t}.get_device()")
    return DeviceGuard("_device is not None", "_device", ", ".join(names))


def _always_given(schema: Schema, name: str) -> bool:
    return any(a.name == name and a.is_tensor and not a.optional for a in schema.arguments)


def _cuda_test(schema: Schema) -> str:
    """The direct shim's test for the CUDA shim (``DirectStage.cuda_test``)."""
    names = _device_args(schema)
    if len(names) == 1 and _always_given(schema, names[0]):
        return f"{names[0]}.is_cuda"
    return f"_on_cuda({', '.join(names)})"


def _may_require_grad(op, decl) -> bool:
    """Whether an input may be floating (``same_dtype_as`` followed): only floating tensors can
    require grad."""
    seen = {decl.name}
    while decl.same_dtype_as is not None:
        decl = op.input(decl.same_dtype_as)
        if decl is None or decl.name in seen:  # refused by validation; assume the worst
            return True
        seen.add(decl.name)
    return any(d.is_floating for d in decl.dtypes)


def _backend_views(schema: Schema, backends) -> tuple[BackendView, ...]:
    args = {a.name: a for a in schema.arguments}
    tensors = tuple(
        _starred(a) if a.is_tensor_list else a.name
        for a in schema.arguments
        if a.is_tensor or a.is_tensor_list
    )
    return tuple(
        BackendView(
            backend=b.backend,
            ref=b.ref,
            layout=tuple(
                LayoutCheck(r.tensor, r.contiguous_dim, r.alignment, args[r.tensor].optional)
                for r in b.layout
            ),
            int64_args=() if b.int64 else tensors,
            last=i == len(backends) - 1,
        )
        for i, b in enumerate(backends)
    )


def _starred(a: Argument) -> str:
    """A list argument's tensors spread into a call (an optional list may be None)."""
    return f"*({a.name} or ())" if a.optional else f"*{a.name}"


def _index_note(decl) -> str:
    """What the docstring says of an index input's entries ("" for any other input)."""
    if not decl.indexes:
        return ""
    negative = ", or negative to skip the slot" if decl.skips_negative else ""
    return f"Entries index ``{decl.indexes}``: ``0 <= i < {decl.indexes}``{negative}."


def _layout_imports(r) -> tuple[str, ...]:
    """Helpers of _layout the module's backend selection uses, sorted."""
    used = set()
    for stage in r.stages:
        for impl in stage.impls:
            for b in impl.backends:
                used |= {"backend_available", "note_backend"}
                if b.layout:
                    used.add("tensor_supports_contiguous_dim")
                if not b.int64:
                    used.add("requires_int64_abi")
    return tuple(sorted(used))


def _runtime_imports(op, public: PublicView, direct_stages=(), stages=()) -> tuple[str, ...]:
    used = {"launcher", "tensor_error"}
    if public.mutated:
        used.add("check_mutated")
    if any(isinstance(c, ListCheck) for c in public.checks):
        used.add("list_error")
    if any(isinstance(c, TensorCheck) and c.offsets for c in public.checks):
        used.add("check_offsets")
    if public.indexes:
        used.add("check_indexes")
    if public.constraints:
        used.add("constraint_error")
    if public.counts:
        used.add("count_error")
    if public.lengths:
        used.add("length_error")
    if public.variants:
        used.add("value_error")
    if any(sc.test for sc in public.scalars):
        used.add("scalar_error")
    used.update(sc.convert for sc in public.scalars if sc.convert)
    if op.integration is Integration.TRITON_OP:
        used.add("register_triton_op")
    for guard in (i.device_guard for st in stages for i in st.impls if i.device_guard):
        used.add("other_device" if guard.helper else "cuda_device")
    if public.direct is not None:
        used.add("direct_ok")
        if any(d.cuda_test.startswith("_on_cuda(") for d in direct_stages):
            used.add("on_cuda")
        if public.direct.function is None and not public.direct.grad_free:
            used.update(("grad_enabled", "set_grad_enabled"))
    return tuple(sorted(used))


def _names_in(expr: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr))


def _read_by(name: str, tests: tuple[str, ...]) -> bool:
    return any(name in _names_in(t) for t in tests)


def _with_bindings(check: TensorCheck, bindings: tuple[Statement, ...]) -> TensorCheck:
    return replace(check, bindings=bindings)


@dataclass(frozen=True, slots=True)
class PackageView:
    namespace: str
    package: str
    ops: tuple[OpView, ...]
    exports: tuple[str, ...]


def op_view(r: ResolvedOp) -> OpView:
    return _Public(r).build()


def package_view(namespace: str, package: str, ops: tuple[OpView, ...]) -> PackageView:
    ops = tuple(sorted(ops, key=lambda v: v.module))
    names = [name for op in ops for name in op.exports] + ["set_offsets_check", "set_index_check"]
    exports = tuple(sorted(names, key=import_order))
    return PackageView(namespace, package, ops, exports)
