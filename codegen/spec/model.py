"""The frozen spec model and its builder from located YAML nodes.

Building checks the structure of each section (known keys, types, closed vocabularies) and collects
every problem; ``validate.py`` then checks what spans sections (schemas against declarations).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from .errors import Errors, Location, did_you_mean, one_of
from .load import Mapping, Node
from .names import check_name
from .schema import Schema, SchemaError, parse_schema
from .shapes import Condition, Expr, Shape, ShapeError, parse_condition, parse_dim_expr, parse_shape

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


@dataclass(frozen=True, slots=True)
class Launcher:
    device: str
    module: str
    function: str
    loc: Location

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


INITS = ("randn", "logsigmoid", "mask")


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

    @property
    def primary(self) -> TensorDecl:
        """The input whose dtypes the tests sweep: the one allowing the most dtypes."""
        typed = [d for d in self.inputs if d.dtypes]
        return max(typed, key=lambda d: len(d.dtypes)) if typed else self.inputs[0]

    def variant(self, arg: str) -> Variant | None:
        return next((v for v in self.variants if v.arg == arg), None)

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


# Keys of each section, with the ones a later spec version may add listed apart so that a spec
# using them fails clearly instead of being half-understood.
TOP_KEYS = ("version", "namespace", "package", "ops")
OP_KEYS = (
    "doc",
    "integration",
    "forward",
    "backward",
    "inputs",
    "outputs",
    "dims",
    "variants",
    "constraints",
    "reference",
    "tests",
)
STAGE_KEYS = ("schema", "launchers")
FORWARD_KEYS = ("schema", "launchers", "arity_pair")
ARITY_KEYS = ("flag", "schema", "after", "suffix")
INPUT_KEYS = ("shape", "dtypes", "dtype", "differentiable", "mutated", "init")
OUTPUT_KEYS = ("shape", "dtype", "public")
TEST_KEYS = ("samples", "dtypes", "tolerance", "grad_tolerance", "seed", "varlen")
VARLEN_KEYS = ("offsets", "dim", "per_sequence")
CONSTRAINT_KEYS = ("check", "when", "message")
NOT_YET = {
    "cute": "CuTeDSL layout contracts",
    "sharding": "DTensor sharding strategies",
}


class _Builder:
    def __init__(self, path: str, errors: Errors) -> None:
        self.path = path
        self.errors = errors
        self.op: str | None = None

    def error(self, loc: Location, message: str) -> None:
        self.errors.add(loc, message, self.op)

    def mapping(
        self, node: Node, what: str, keys: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> Mapping | None:
        if not node.is_map:
            self.error(node.loc, f"{what} must be a mapping, got {_kind(node)}")
            return None
        m: Mapping = node.value
        for key in m.keys():
            if key in keys:
                continue
            if key in NOT_YET:
                self.error(
                    m.key_loc(key),
                    f"'{key}' is not supported by this generator yet ({NOT_YET[key]})",
                )
            else:
                self.error(
                    m.key_loc(key),
                    f"unknown key '{key}' in {what}{did_you_mean(key, keys)}; expected one of: {one_of(keys)}",
                )
        for key in required:
            if m.get(key) is None:
                self.error(node.loc, f"{what} is missing required key '{key}'")
        return m

    def string(self, node: Node | None, what: str) -> str | None:
        if node is None:
            return None
        if not isinstance(node.value, str) or not node.value.strip():
            self.error(node.loc, f"{what} must be a non-empty string, got {_kind(node)}")
            return None
        return node.value

    def name(self, value: str, loc: Location, what: str) -> bool:
        problem = check_name(value, what)
        if problem:
            self.error(loc, problem)
            return False
        return True

    # --- sections -------------------------------------------------------------------------

    def spec(self, root: Node) -> Spec | None:
        m = self.mapping(root, "the spec", TOP_KEYS, required=("version", "ops"))
        if m is None:
            return None
        version = m.get("version")
        if version is not None and (
            version.value != SPEC_VERSION or isinstance(version.value, bool)
        ):
            self.error(
                version.loc,
                f"unsupported spec version {version.value!r}; this generator reads version {SPEC_VERSION}",
            )
            return None
        namespace = "attnops"
        ns_node = m.get("namespace")
        if ns_node is None:
            self.error(root.loc, "the spec is missing required key 'namespace'")
        else:
            ns = self.string(ns_node, "namespace")
            if ns and self.name(ns, ns_node.loc, "namespace"):
                namespace = ns
        package = namespace
        pkg_node = m.get("package")
        if pkg_node is not None:
            pkg = self.string(pkg_node, "package")
            if pkg and self.name(pkg, pkg_node.loc, "package"):
                package = pkg
        ops_node = m.get("ops")
        ops: list[Op] = []
        if ops_node is not None:
            if not ops_node.is_map or not ops_node.value.entries:
                self.error(
                    ops_node.loc,
                    "'ops' must be a non-empty mapping of operator names to definitions",
                )
            else:
                for name, node in ops_node.value.items():
                    self.op = name
                    op = self.op_(name, ops_node.value.key_loc(name), node, namespace)
                    self.op = None
                    if op is not None:
                        ops.append(op)
        return Spec(SPEC_VERSION, namespace, package, tuple(ops), self.path)

    def op_(self, name: str, key_loc: Location, node: Node, namespace: str) -> Op | None:
        ok = self.name(name, key_loc, "operator name")
        if ok and not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            self.error(key_loc, f"operator name '{name}' must be lower_snake_case")
            ok = False
        m = self.mapping(
            node,
            "an operator",
            OP_KEYS,
            required=("doc", "forward", "inputs", "outputs", "reference", "tests"),
        )
        if m is None:
            return None
        doc = self.string(m.get("doc"), "doc") or ""
        integration = Integration.OPAQUE
        if (n := m.get("integration")) is not None:
            try:
                integration = Integration.parse(n.value)
            except ValueError as exc:
                self.error(n.loc, str(exc))
        qual = f"{namespace}::{name}"
        forward = (
            self.stage(m.get("forward"), f"{qual}_fwd", "forward") if m.get("forward") else None
        )
        arity_pair = None
        fwd_node = m.get("forward")
        if (
            fwd_node is not None
            and fwd_node.is_map
            and fwd_node.value.get("arity_pair") is not None
        ):
            arity_pair = self.arity_pair(fwd_node.value.get("arity_pair"), f"{qual}_fwd_pair")
            if arity_pair is None:
                forward = None
        dims, dynamic = self.dims(m.get("dims")) if m.get("dims") else ((), ())
        variants = self.variants(m.get("variants")) if m.get("variants") else ()
        constraints = self.constraints(m.get("constraints")) if m.get("constraints") else ()
        backward = (
            self.stage(m.get("backward"), f"{qual}_bwd", "backward") if m.get("backward") else None
        )
        inputs = self.inputs(m.get("inputs")) if m.get("inputs") else None
        outputs = self.outputs(m.get("outputs")) if m.get("outputs") else None
        ref_node = m.get("reference")
        reference = self.launcher_ref(ref_node, "reference") if ref_node else None
        tests = self.tests(m.get("tests")) if m.get("tests") else None
        if not ok or None in (
            forward,
            inputs,
            outputs,
            reference,
            tests,
            dims,
            variants,
            constraints,
        ):
            return None
        if m.get("backward") is not None and backward is None:
            return None
        return Op(
            name=name,
            namespace=namespace,
            doc=doc.strip(),
            integration=integration,
            forward=forward,
            backward=backward,
            inputs=inputs,
            outputs=outputs,
            reference=reference,
            reference_loc=ref_node.loc,
            tests=tests,
            loc=key_loc,
            dims=dims,
            dynamic_dims=dynamic,
            variants=variants,
            arity_pair=arity_pair,
            constraints=constraints,
        )

    def constraints(self, node: Node) -> tuple[Constraint, ...] | None:
        if not node.is_seq or not node.value:
            self.error(
                node.loc, "'constraints' must be a list of {check: ..., when: ..., message: ...}"
            )
            return None
        out = []
        for item in node.value:
            m = self.mapping(item, "a constraint", CONSTRAINT_KEYS, required=("check",))
            if m is None or m.get("check") is None:
                return None
            try:
                check = parse_condition(m.get("check").value)
            except ShapeError as exc:
                self.error(m.get("check").loc, str(exc))
                return None
            when = None
            if m.get("when") is not None:
                when = self.string(m.get("when"), "constraint 'when'")
                if when is None:
                    return None
            message = f"expected {check.text}"
            if m.get("message") is not None:
                message = self.string(m.get("message"), "constraint 'message'")
                if message is None:
                    return None
            out.append(Constraint(check, when, message, item.loc))
        return tuple(out)

    def dims(self, node: Node):
        if not node.is_map:
            self.error(node.loc, "'dims' must map dim names to an expression or {dynamic: true}")
            return None, None
        derived, dynamic = [], []
        for name, item in node.value.items():
            loc = node.value.key_loc(name)
            if not self.name(name, loc, "dim name"):
                continue
            if item.is_map:
                m = self.mapping(item, f"dim '{name}'", ("dynamic",), required=("dynamic",))
                if m is not None and m.get("dynamic") is not None:
                    if m.get("dynamic").value is not True:
                        self.error(m.get("dynamic").loc, f"'dynamic' of dim '{name}' must be true")
                    else:
                        dynamic.append((name, loc))
                continue
            try:
                derived.append(DerivedDim(name, parse_dim_expr(item.value), loc))
            except ShapeError as exc:
                self.error(item.loc, f"dim '{name}': {exc}")
        return tuple(derived), tuple(dynamic)

    def variants(self, node: Node) -> tuple[Variant, ...] | None:
        if not node.is_map or not node.value.entries:
            self.error(
                node.loc, "'variants' must map scalar argument names to their allowed values"
            )
            return None
        out = []
        for arg, item in node.value.items():
            values = [v.value for v in item.value] if item.is_seq else None
            if not values or any(
                isinstance(v, (list, tuple, Mapping)) or v is None for v in values
            ):
                self.error(
                    item.loc,
                    f"variant '{arg}' must list its allowed scalar values, e.g. [softplus, lower_bound]",
                )
                return None
            if len(set(map(repr, values))) != len(values):
                self.error(item.loc, f"variant '{arg}' lists a value twice")
                return None
            out.append(Variant(arg, tuple(values), node.value.key_loc(arg)))
        return tuple(out)

    def arity_pair(self, node: Node, qualname: str) -> ArityPair | None:
        m = self.mapping(node, "'arity_pair'", ARITY_KEYS, required=("flag", "schema"))
        if m is None:
            return None
        flag_node = m.get("flag")
        flag = self.string(flag_node, "arity_pair flag")
        if flag is None or not self.name(flag, flag_node.loc, "arity_pair flag"):
            return None
        after = None
        if m.get("after") is not None:
            after = self.string(m.get("after"), "arity_pair after")
            if after is None:
                return None
        suffix = "with_state"
        if m.get("suffix") is not None:
            suffix = self.string(m.get("suffix"), "arity_pair suffix")
            if suffix is None or not re.fullmatch(r"[a-z][a-z0-9_]*", suffix):
                self.error(m.get("suffix").loc, "arity_pair suffix must be lower_snake_case")
                return None
        schema_node = m.get("schema")
        text = self.string(schema_node, "arity_pair schema")
        if text is None:
            return None
        try:
            schema = parse_schema(qualname, text)
        except SchemaError as exc:
            self.error(_inside(schema_node, exc.offset), f"arity_pair schema: {exc.message}")
            return None
        return ArityPair(flag, schema, schema_node.loc, after, suffix, node.loc)

    def launcher_ref(self, node: Node, what: str) -> str | None:
        text = self.string(node, what)
        if text is None:
            return None
        if not LAUNCHER_REF.fullmatch(text):
            self.error(node.loc, f"{what} '{text}' must be 'package.module:function'")
            return None
        return text

    def stage(self, node: Node, qualname: str, what: str) -> Stage | None:
        keys = FORWARD_KEYS if what == "forward" else STAGE_KEYS
        m = self.mapping(node, f"'{what}'", keys, required=STAGE_KEYS)
        if m is None:
            return None
        schema = None
        schema_node = m.get("schema")
        text = self.string(schema_node, f"{what} schema")
        if text is not None:
            try:
                schema = parse_schema(qualname, text)
            except SchemaError as exc:
                self.error(_inside(schema_node, exc.offset), f"{what} schema: {exc.message}")
        launchers: list[Launcher] = []
        ln = m.get("launchers")
        if ln is not None:
            if not ln.is_map or not ln.value.entries:
                self.error(
                    ln.loc,
                    f"{what} launchers must map devices ({one_of(DEVICES)}) to 'module:function'",
                )
            else:
                for device, ref_node in ln.value.items():
                    if device not in DEVICES:
                        self.error(
                            ln.value.key_loc(device),
                            f"unknown device '{device}'{did_you_mean(device, DEVICES)}; expected one of: {one_of(DEVICES)}",
                        )
                        continue
                    ref = self.launcher_ref(ref_node, f"{device} launcher")
                    if ref:
                        module, function = ref.split(":")
                        launchers.append(Launcher(device, module, function, ref_node.loc))
        if (
            schema is None
            or ln is None
            or len(launchers) != len(ln.value.entries if ln.is_map else ())
        ):
            return None
        return Stage(schema, schema_node.loc, tuple(launchers), node.loc)

    def shape(self, node: Node | None, what: str) -> Shape | None:
        if node is None:
            return None
        if not node.is_seq:
            self.error(
                node.loc, f"{what} must be a list of dims such as [..., D], got {_kind(node)}"
            )
            return None
        try:
            return parse_shape([n.value for n in node.value])
        except ShapeError as exc:
            self.error(node.loc, f"{what}: {exc}")
            return None

    def dtype_list(self, node: Node, what: str) -> tuple[DType, ...] | None:
        if not node.is_seq or not node.value:
            self.error(node.loc, f"{what} must be a non-empty list of dtypes")
            return None
        out = []
        for item in node.value:
            try:
                dt = DType.parse(item.value)
            except ValueError as exc:
                self.error(item.loc, str(exc))
                return None
            if dt in out:
                self.error(item.loc, f"dtype '{dt.torch_name}' is listed twice")
                return None
            out.append(dt)
        return tuple(out)

    def inputs(self, node: Node) -> tuple[TensorDecl, ...] | None:
        if not node.is_map or not node.value.entries:
            self.error(
                node.loc,
                f"'inputs' must map tensor argument names to constraints, got {_kind(node)}",
            )
            return None
        decls, ok = [], True
        for name, item in node.value.items():
            m = self.mapping(item, f"input '{name}'", INPUT_KEYS, required=("shape",))
            if m is None:
                ok = False
                continue
            shape = self.shape(m.get("shape"), f"shape of input '{name}'")
            dtypes, same = (), None
            if m.get("dtypes") is not None and m.get("dtype") is not None:
                self.error(
                    m.key_loc("dtype"), f"input '{name}' sets both 'dtype' and 'dtypes'; keep one"
                )
                ok = False
            elif m.get("dtypes") is not None:
                dtypes = self.dtype_list(m.get("dtypes"), f"dtypes of input '{name}'")
            elif m.get("dtype") is not None:
                d = m.get("dtype")
                if isinstance(d.value, str) and d.value in DType.names():
                    dtypes = (DType.parse(d.value),)
                elif isinstance(d.value, str):
                    same = d.value  # the name of another input, checked in validate
                else:
                    self.error(
                        d.loc,
                        f"dtype of input '{name}' must be a dtype name or another input's name",
                    )
                    ok = False
            else:
                self.error(
                    item.loc,
                    f"input '{name}' needs 'dtypes' (allowed dtypes) or 'dtype' (a dtype or another input's name)",
                )
                ok = False
            flags = {}
            for key, default in (("differentiable", True), ("mutated", False)):
                flags[key] = default
                if (d := m.get(key)) is not None:
                    if not isinstance(d.value, bool):
                        self.error(d.loc, f"'{key}' of input '{name}' must be true or false")
                        ok = False
                    else:
                        flags[key] = d.value
            init = "randn"
            if (d := m.get("init")) is not None:
                if d.value not in INITS:
                    self.error(
                        d.loc,
                        f"unknown init '{d.value}' of input '{name}'; expected one of: {one_of(INITS)}",
                    )
                    ok = False
                else:
                    init = d.value
            if shape is None or dtypes is None:
                ok = False
                continue
            decls.append(
                TensorDecl(
                    name,
                    shape,
                    dtypes,
                    same,
                    flags["differentiable"],
                    flags["mutated"],
                    init,
                    node.value.key_loc(name),
                )
            )
        return tuple(decls) if ok else None

    def outputs(self, node: Node) -> tuple[OutputDecl, ...] | None:
        if not node.is_map or not node.value.entries:
            self.error(
                node.loc, "'outputs' must map each forward return name to its shape and dtype"
            )
            return None
        decls, ok = [], True
        for name, item in node.value.items():
            m = self.mapping(item, f"output '{name}'", OUTPUT_KEYS, required=("shape", "dtype"))
            if m is None:
                ok = False
                continue
            shape = self.shape(m.get("shape"), f"shape of output '{name}'")
            dtype, dtype_of = None, None
            if (d := m.get("dtype")) is not None:
                if isinstance(d.value, str) and d.value in DType.names():
                    dtype = DType.parse(d.value)
                elif isinstance(d.value, str) and d.value:
                    dtype_of = d.value
                else:
                    self.error(
                        d.loc, f"dtype of output '{name}' must be a dtype name or an input's name"
                    )
                    ok = False
            public = True
            if (p := m.get("public")) is not None:
                if not isinstance(p.value, bool):
                    self.error(p.loc, f"'public' of output '{name}' must be true or false")
                    ok = False
                else:
                    public = p.value
            if shape is None or (dtype is None and dtype_of is None):
                ok = False
                continue
            decls.append(OutputDecl(name, shape, dtype, dtype_of, public, node.value.key_loc(name)))
        return tuple(decls) if ok else None

    def tolerance(self, node: Node, what: str) -> tuple[tuple[DType, Tolerance], ...] | None:
        if not node.is_map:
            self.error(node.loc, f"{what} must map dtypes to [atol, rtol]")
            return None
        out = []
        for name, item in node.value.items():
            try:
                dt = DType.parse(name)
            except ValueError as exc:
                self.error(node.value.key_loc(name), str(exc))
                return None
            vals = [v.value for v in item.value] if item.is_seq else None
            if (
                vals is None
                or len(vals) != 2
                or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in vals
                )
            ):
                self.error(
                    item.loc, f"{what} for {name} must be [atol, rtol], two non-negative numbers"
                )
                return None
            out.append((dt, Tolerance(float(vals[0]), float(vals[1]))))
        return tuple(out)

    def tests(self, node: Node) -> TestPlan | None:
        m = self.mapping(node, "'tests'", TEST_KEYS, required=("samples", "tolerance"))
        if m is None:
            return None
        samples = []
        sn = m.get("samples")
        if sn is not None:
            if not sn.is_seq or not sn.value:
                self.error(
                    sn.loc,
                    "'samples' must be a non-empty list of dim sizes, e.g. - {batch: [2, 3], D: 128}",
                )
                return None
            for item in sn.value:
                if not item.is_map:
                    self.error(item.loc, f"a sample must map dim names to sizes, got {_kind(item)}")
                    return None
                entries, batch = [], None
                for key, v in item.value.items():
                    if key == "batch":
                        if not v.is_seq or not all(_is_size(x.value) for x in v.value):
                            self.error(
                                v.loc, "'batch' must be a list of sizes (the dims matched by '...')"
                            )
                            return None
                        batch = tuple(x.value for x in v.value)
                    elif v.is_seq:
                        if not all(isinstance(x.value, (int, float)) for x in v.value):
                            self.error(v.loc, f"values of '{key}' must be numbers")
                            return None
                        entries.append((key, tuple(x.value for x in v.value)))
                    elif v.is_map or v.value is None:
                        self.error(
                            v.loc, f"sample value of '{key}' must be a size, a scalar or a list"
                        )
                        return None
                    else:
                        entries.append((key, v.value))
                samples.append(Sample(tuple(entries), batch, item.loc))
        dtypes = ()
        if (d := m.get("dtypes")) is not None:
            dtypes = self.dtype_list(d, "test dtypes")
            if dtypes is None:
                return None
        tol = self.tolerance(m.get("tolerance"), "tolerance") if m.get("tolerance") else None
        gtol = tol
        if m.get("grad_tolerance") is not None:
            gtol = self.tolerance(m.get("grad_tolerance"), "grad_tolerance")
        seed = 0
        if (s := m.get("seed")) is not None:
            if not _is_size(s.value):
                self.error(s.loc, "'seed' must be a non-negative integer")
                return None
            seed = s.value
        varlen = None
        if (v := m.get("varlen")) is not None:
            vm = self.mapping(v, "'varlen'", VARLEN_KEYS, required=("offsets", "dim"))
            if vm is None:
                return None
            offsets = self.string(vm.get("offsets"), "varlen offsets")
            dim = self.string(vm.get("dim"), "varlen dim")
            per = ()
            if (pn := vm.get("per_sequence")) is not None:
                if not pn.is_seq or not all(isinstance(x.value, str) for x in pn.value):
                    self.error(
                        pn.loc, "varlen per_sequence must be a list of input or output names"
                    )
                    return None
                per = tuple(x.value for x in pn.value)
            if offsets is None or dim is None:
                return None
            varlen = Varlen(offsets, dim, per, v.loc)
        if tol is None or gtol is None or sn is None:
            return None
        return TestPlan(tuple(samples), dtypes, tol, gtol, seed, varlen, node.loc)


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _kind(node: Node) -> str:
    if node.is_map:
        return "a mapping"
    if node.is_seq:
        return "a list"
    if node.value is None:
        return "nothing"
    return f"{type(node.value).__name__} {node.value!r}"


def _inside(node: Node, offset: int | None) -> Location:
    """The location of character ``offset`` of a one-line scalar, quotes accounted for."""
    if offset is None or node.text_shift is None:
        return node.loc
    return Location(node.loc.path, node.loc.line, node.loc.col + offset + node.text_shift)


def build(root: Node, path: str, errors: Errors) -> Spec | None:
    return _Builder(path, errors).spec(root)
