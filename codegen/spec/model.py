"""The frozen spec model: the dataclasses and Enums an ``ops.yaml`` is built into. ``build.py``
builds it from located YAML nodes, checking the structure of each section; the ``resolve`` stage
then computes each operator's facts and checks what spans sections.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from .errors import Location, did_you_mean, one_of
from .schema import Schema
from .shapes import Condition, Expr, Shape

SPEC_VERSION = 1
DEVICES = ("cuda", "cpu")
LAUNCHER_REF = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"
)


class Integration(enum.Enum):
    """How an operator reaches torch: the rulebook's three integrations."""

    OPAQUE = "opaque"  # torch.library.define + impl + register_fake, autograd.Function wrapper
    TRITON_OP = "triton_op"  # torch.library.triton_op + wrap_triton
    EAGER = "eager"  # no registration: the public function calls the launcher directly

    @classmethod
    def parse(cls, text: object) -> Integration:
        for member in cls:
            if member.value == text:
                return member
        raise ValueError(
            f"unknown integration '{text}'; expected one of: {one_of(m.value for m in cls)}"
        )


class DType(enum.Enum):
    FLOAT32 = ("float32", "fp32")
    FLOAT16 = ("float16", "fp16")
    BFLOAT16 = ("bfloat16", "bf16")
    FLOAT64 = ("float64", "fp64")
    INT32 = ("int32", "i32")
    INT64 = ("int64", "i64")
    INT8 = ("int8", "i8")
    UINT8 = ("uint8", "u8")
    BOOL = ("bool", "bool")

    @property
    def torch_name(self) -> str:
        return self.value[0]

    @property
    def short(self) -> str:
        return self.value[1]

    @property
    def is_floating(self) -> bool:
        return self.torch_name.startswith(("float", "bfloat"))

    @classmethod
    def names(cls) -> list[str]:
        return [m.torch_name for m in cls]

    @classmethod
    def parse(cls, text: object) -> DType:
        for member in cls:
            if member.torch_name == text:
                return member
        raise ValueError(
            f"unknown dtype '{text}'{did_you_mean(str(text), cls.names())}; expected one of: "
            + one_of(cls.names())
        )


# Backends a CUDA backend list may name, and the signatures a launcher may report (by prefix).
BACKENDS = ("cutedsl", "triton")
SIGNATURES = ("compact", "general")


@dataclass(frozen=True, slots=True)
class LayoutRule:
    """A tensor argument's layout contract: mode ``contiguous_dim`` has stride 1 and every slice
    origin along the other modes is ``alignment`` bytes aligned (None: the element size); and
    the mode holds at most ``max_contiguous`` elements (None: any number)."""

    tensor: str
    contiguous_dim: int
    alignment: int | None
    loc: Location
    max_contiguous: int | None = None


@dataclass(frozen=True, slots=True)
class Launcher:
    device: str
    module: str
    function: str
    loc: Location
    # A CUDA backend list (docs/spec.md, "Several backends"): the backend's name, the layout
    # each listed tensor argument must have, whether it takes tensors that need 64-bit indexing
    # and the signatures its launcher reports. A plain launcher has backend None.
    backend: str | None = None
    layout: tuple[LayoutRule, ...] = ()
    int64: bool = True
    signatures: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.module}:{self.function}"


@dataclass(frozen=True, slots=True)
class Stage:
    """The forward or backward operator of an op: schema plus launchers."""

    schema: Schema
    schema_loc: Location
    launchers: tuple[Launcher, ...]
    loc: Location
    # Where each argument's name is written inside the schema string (name, location).
    arg_locs: tuple[tuple[str, Location], ...] = ()
    # Where the returns start inside the schema string.
    returns_loc: Location | None = None

    def arg_loc(self, name: str) -> Location:
        return next((loc for n, loc in self.arg_locs if n == name), self.schema_loc)


INITS = ("randn", "logsigmoid", "mask", "index")
# What negative entries of an index input mean: without a policy they are out of range.
NEGATIVE_POLICIES = ("skip",)
# How a backward reports the gradient of an optional input the caller left out: a tensor of the
# input's declared shape (its values are never read), or an empty tensor of shape (0,).
ABSENT_GRADIENTS = ("zeros", "empty")


@dataclass(frozen=True, slots=True)
class TensorDecl:
    """Constraints on a tensor input (validation, test inputs)."""

    name: str
    shape: Shape
    dtypes: tuple[DType, ...]  # allowed dtypes; empty when ``same_dtype_as`` is set
    same_dtype_as: str | None
    differentiable: bool
    mutated: bool
    init: str  # test values: one of INITS
    loc: Location
    offsets: str | None = None  # the dim whose extent these offsets partition into sequences
    offsets_loc: Location | None = None
    absent_gradient: str = "zeros"  # one of ABSENT_GRADIENTS
    absent_gradient_loc: Location | None = None  # None: not written
    is_list: bool = False  # a Tensor[]/Tensor?[] argument: the declaration holds for each element
    # An index input (docs/spec.md, "Index inputs"): its entries index dim ``indexes`` of
    # another input, 0 <= i < that dim; with ``negative`` "skip", negative entries are allowed
    # (the slot is skipped).
    indexes: str | None = None
    indexes_loc: Location | None = None
    negative: str | None = None  # one of NEGATIVE_POLICIES
    negative_loc: Location | None = None
    # The closed range [lower, upper] of the input's values (docs/spec.md, "Value domains");
    # a bound may be infinite. None: not declared.
    domain: tuple[float, float] | None = None
    domain_loc: Location | None = None

    @property
    def skips_negative(self) -> bool:
        return self.negative == "skip"


@dataclass(frozen=True, slots=True)
class DerivedDim:
    name: str
    expr: Expr
    loc: Location


@dataclass(frozen=True, slots=True)
class Variant:
    """A scalar schema argument restricted to listed values (one op pair serves them all)."""

    arg: str
    values: tuple[object, ...]
    loc: Location


@dataclass(frozen=True, slots=True)
class Constraint:
    """A relation between dims that shapes cannot say, checked by the public function."""

    check: Condition
    when: str | None  # an optional input: checked only when it is given
    message: str
    loc: Location


@dataclass(frozen=True, slots=True)
class ArityPair:
    """A wider twin of the forward schema with trailing extra returns, chosen by a public flag."""

    flag: str
    schema: Schema
    schema_loc: Location
    after: str | None  # public parameter the flag follows; None: last
    suffix: str  # the wider operator is <op>_fwd_<suffix>
    loc: Location


@dataclass(frozen=True, slots=True)
class Varlen:
    """Packed variable-length batches: results must equal per-sequence calls."""

    offsets: str  # the optional int input holding sequence boundaries
    dim: str  # the packed dim
    per_sequence: tuple[str, ...]  # inputs/outputs indexed by sequence along dim 0
    loc: Location


@dataclass(frozen=True, slots=True)
class OutputDecl:
    name: str
    shape: Shape
    dtype: DType | None  # fixed dtype, or None when it follows ``dtype_of``
    dtype_of: str | None  # name of the tensor input whose dtype this output takes
    public: bool
    loc: Location
    # A 'Tensor?' return: given only when this argument is true (a bool) or given (a Tensor?).
    when: str | None = None
    # A 'Tensor[]' return (docs/spec.md, "List returns"): how many tensors it holds, an integer,
    # the name of an int argument (its value) or of a list input (one per element); None: not
    # written.
    count: int | str | None = None
    count_loc: Location | None = None


@dataclass(frozen=True, slots=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True, slots=True)
class Sample:
    """Dim sizes, plus values of scalar arguments and literal tensor inputs (lists)."""

    entries: tuple[tuple[str, object], ...]
    batch: tuple[int, ...] | None
    loc: Location

    def get(self, key: str, default=None):
        return dict(self.entries).get(key, default)

    def env(self) -> dict[str, int]:
        return {k: v for k, v in self.entries if isinstance(v, int) and not isinstance(v, bool)}


@dataclass(frozen=True, slots=True)
class TestPlan:
    samples: tuple[Sample, ...]
    dtypes: tuple[DType, ...]
    tolerance: tuple[tuple[DType, Tolerance], ...]
    grad_tolerance: tuple[tuple[DType, Tolerance], ...]
    seed: int
    varlen: Varlen | None
    loc: Location


@dataclass(frozen=True, slots=True)
class Baseline:
    """Another library's implementation the benchmark compares with, in the same process."""

    name: str  # the label of its rows
    function: str  # module:function of the other library (may be absent where it runs)
    adapter: str | None  # module:function mapping the public function's arguments to its call
    loc: Location
    function_loc: Location
    adapter_loc: Location | None = None


@dataclass(frozen=True, slots=True)
class Benchmark:
    """What the generated benchmark runs: shapes (test samples by another name), dtypes, the
    work of one forward call, and baselines (docs/spec.md, "benchmark")."""

    shapes: tuple[Sample, ...]
    dtypes: tuple[DType, ...]  # empty: the test dtypes
    bytes: Expr | None  # bytes moved by one forward call
    flops: Expr | None  # floating-point operations of one forward call
    backward_bytes: Expr | None  # what the backward adds to a forward + backward call
    backward_flops: Expr | None
    given: tuple[str, ...]  # optional inputs the calls pass (the others are None)
    backward: bool | None  # also time forward + backward; None: where the operator has one
    baselines: tuple[Baseline, ...]
    loc: Location
    dtypes_loc: Location | None = None
    bytes_loc: Location | None = None
    flops_loc: Location | None = None
    backward_bytes_loc: Location | None = None
    backward_flops_loc: Location | None = None
    given_loc: Location | None = None
    backward_loc: Location | None = None


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    namespace: str
    doc: str
    integration: Integration
    forward: Stage
    backward: Stage | None
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[OutputDecl, ...]
    reference: str
    reference_loc: Location
    tests: TestPlan
    loc: Location
    dims: tuple[DerivedDim, ...] = ()
    dynamic_dims: tuple[tuple[str, Location], ...] = ()
    variants: tuple[Variant, ...] = ()
    arity_pair: ArityPair | None = None
    constraints: tuple[Constraint, ...] = ()
    # The outputs the reference returns, in its order; None: the public outputs.
    reference_returns: tuple[str, ...] | None = None
    reference_returns_loc: Location | None = None
    # Eager calls reach the launchers without the dispatcher (docs/spec.md, "eager_fast_path").
    eager_fast_path: bool = False
    eager_fast_path_loc: Location | None = None
    # The launcher acts outside its tensor arguments: torch.compile must keep every call
    # (docs/spec.md, "side_effects").
    side_effects: bool = False
    side_effects_loc: Location | None = None
    # What the generated benchmark runs (docs/spec.md, "benchmark"); None: no benchmark.
    benchmark: Benchmark | None = None

    @property
    def primary(self) -> TensorDecl:
        """The input whose dtypes the tests sweep: the one allowing the most dtypes (an index
        input only where no other input has dtypes: its dtypes are those of its entries)."""
        typed = [d for d in self.inputs if d.dtypes and not d.indexes]
        typed = typed or [d for d in self.inputs if d.dtypes]
        return max(typed, key=lambda d: len(d.dtypes)) if typed else self.inputs[0]

    def variant(self, arg: str) -> Variant | None:
        return next((v for v in self.variants if v.arg == arg), None)

    def restricts(self, v: Variant) -> bool:
        """Whether variant ``v`` refuses some value of its argument's type: a ``bool`` listing
        both values (``save_states: [false, true]``) only has the tests run each, and the public
        function checks nothing more for it than the type."""
        a = self.forward.schema.argument(v.arg)
        return not (a is not None and a.type == "bool" and {False, True} <= set(v.values))

    def input(self, name: str) -> TensorDecl | None:
        return next((i for i in self.inputs if i.name == name), None)

    def output(self, name: str) -> OutputDecl | None:
        return next((o for o in self.outputs if o.name == name), None)


@dataclass(frozen=True, slots=True)
class Spec:
    version: int
    namespace: str
    package: str
    ops: tuple[Op, ...]
    path: str
