"""Builds the frozen spec model from located YAML nodes: the spec and each operator. ``build``
checks the top-level keys and each operator's keys, names and integration, and hands each section to
its builder (``build_stages.py``, ``build_tensors.py``, ``build_tests.py``), all reporting through
one ``Reader``. It collects every problem and returns ``None`` for an operator (or spec) it cannot
build; ``resolve/validate`` then checks what spans sections (schemas against declarations).
"""

from __future__ import annotations

import re

from . import build_bench, build_stages, build_tensors, build_tests
from .errors import Errors, Location
from .limits import MAX_NAME, MAX_OPS
from .load import Node
from .model import SPEC_VERSION, Integration, Op, Spec
from .names import camel, check_namespace, check_operator_module, check_package
from .reader import Reader, kind

TOP_KEYS = ("version", "namespace", "package", "ops")
OP_KEYS = (
    "doc",
    "integration",
    "eager_fast_path",
    "side_effects",
    "forward",
    "backward",
    "inputs",
    "outputs",
    "dims",
    "variants",
    "constraints",
    "reference",
    "reference_returns",
    "tests",
    "benchmark",
)


def build(root: Node, path: str, errors: Errors) -> Spec | None:
    return _spec(Reader(path, errors), root)


def _spec(reader: Reader, root: Node) -> Spec | None:
    m = reader.mapping(root, "the spec", TOP_KEYS, required=("version", "ops"))
    if m is None:
        return None
    version = m.get("version")
    if version is not None and (version.value != SPEC_VERSION or isinstance(version.value, bool)):
        reader.error(
            version.loc,
            f"unsupported spec version {version.value!r}; this generator reads version {SPEC_VERSION}",
        )
        return None
    namespace = "attnops"
    ns_node = m.get("namespace")
    ns_ok = False
    if ns_node is None:
        reader.error(root.loc, "the spec is missing required key 'namespace'")
    else:
        ns = reader.string(ns_node, "namespace")
        if ns and reader.name(ns, ns_node.loc, "namespace"):
            problem = check_namespace(ns)
            if problem:
                reader.error(ns_node.loc, problem)
            else:
                namespace, ns_ok = ns, True
    package = namespace
    pkg_node = m.get("package")
    if pkg_node is not None:
        pkg = reader.string(pkg_node, "package")
        if pkg and reader.name(pkg, pkg_node.loc, "package"):
            problem = check_package(pkg)
            if problem:
                reader.error(pkg_node.loc, problem)
            else:
                package = pkg
    elif ns_ok and (problem := check_package(namespace, "namespace")):
        reader.error(ns_node.loc, f"{problem} (the package takes its name unless 'package' is set)")
    ops_node = m.get("ops")
    ops: list[Op] = []
    if ops_node is not None:
        if not ops_node.is_map or not ops_node.value.entries:
            reader.error(
                ops_node.loc,
                "'ops' must be a non-empty mapping of operator names to definitions",
            )
        else:
            entries = ops_node.value.entries
            if len(entries) > MAX_OPS:
                # The first MAX_OPS are still built, so that their problems are reported too.
                reader.error(
                    entries[MAX_OPS][1],
                    f"the spec declares {len(entries)} operators; the limit is {MAX_OPS}",
                )
                entries = entries[:MAX_OPS]
            for name, key_loc, node in entries:
                # A name over the limit is refused; diagnostics name it by its beginning.
                reader.op = name if len(name) <= MAX_NAME else name[:MAX_NAME] + "..."
                op = _op(reader, name, key_loc, node, namespace)
                reader.op = None
                if op is not None:
                    ops.append(op)
            _distinct_types(reader, ops)
    return Spec(SPEC_VERSION, namespace, package, tuple(ops), reader.path)


def _distinct_types(reader: Reader, ops: list[Op]) -> None:
    """The package exports each operator's result type ``<CamelName>Output``: 'foo_bar' and
    'foo__bar' (or 'foo' and 'foo_') would export one name twice."""
    first: dict[str, str] = {}
    for op in ops:
        result = f"{camel(op.name)}Output"
        if result in first:
            reader.errors.add(
                op.loc,
                f"operator '{op.name}' and operator '{first[result]}' would both export the type "
                f"'{result}' from the package; rename one",
                op.name,
            )
        else:
            first[result] = op.name


def _op(reader: Reader, name: str, key_loc: Location, node: Node, namespace: str) -> Op | None:
    ok = reader.name(name, key_loc, "operator name")
    if ok and not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        reader.error(key_loc, f"operator name '{name}' must be lower_snake_case")
        ok = False
    if ok and (problem := check_operator_module(name)):
        reader.error(key_loc, problem)
        ok = False
    m = reader.mapping(
        node,
        "an operator",
        OP_KEYS,
        required=("doc", "forward", "inputs", "reference", "tests"),
    )
    if m is None:
        return None
    doc = reader.string(m.get("doc"), "doc") or ""
    integration = Integration.OPAQUE
    if (n := m.get("integration")) is not None:
        try:
            integration = Integration.parse(n.value)
        except ValueError as exc:
            reader.error(n.loc, str(exc))
    fast, fast_loc = False, None
    if (n := m.get("eager_fast_path")) is not None:
        if isinstance(n.value, bool):
            fast, fast_loc = n.value, n.loc
        else:
            reader.error(n.loc, f"eager_fast_path must be true or false, got {kind(n)}")
            ok = False
    side_effects, side_effects_loc = False, None
    if (n := m.get("side_effects")) is not None:
        if isinstance(n.value, bool):
            side_effects, side_effects_loc = n.value, n.loc
        else:
            reader.error(n.loc, f"side_effects must be true or false, got {kind(n)}")
            ok = False
    qual = f"{namespace}::{name}"
    forward = (
        build_stages.stage(reader, m.get("forward"), f"{qual}_fwd", "forward")
        if m.get("forward")
        else None
    )
    if forward is not None and not side_effects and _no_effect(forward):
        reader.error(
            forward.returns_loc,
            "forward schema: the schema returns nothing ('()') and updates no argument in "
            "place, so a call would have no effect; mark what the kernel writes 'Tensor(a!)', "
            "return the results, or, when the kernel acts outside its tensor arguments (a "
            "communicator, a host buffer, a cache it registers), declare 'side_effects: true'",
        )
        ok = False
    arity_pair = None
    fwd_node = m.get("forward")
    if fwd_node is not None and fwd_node.is_map and fwd_node.value.get("arity_pair") is not None:
        arity_pair = build_stages.arity_pair(
            reader, fwd_node.value.get("arity_pair"), f"{qual}_fwd_pair"
        )
        if arity_pair is None:
            forward = None
    dims, dynamic = build_stages.dims(reader, m.get("dims")) if m.get("dims") else ((), ())
    variants = build_stages.variants(reader, m.get("variants")) if m.get("variants") else ()
    constraints = (
        build_stages.constraints(reader, m.get("constraints")) if m.get("constraints") else ()
    )
    backward = (
        build_stages.stage(reader, m.get("backward"), f"{qual}_bwd", "backward")
        if m.get("backward")
        else None
    )
    inputs = build_tensors.inputs(reader, m.get("inputs")) if m.get("inputs") else None
    # An operator that returns nothing ('-> ()') declares no outputs (validate/tensors.py).
    outputs = build_tensors.outputs(reader, m.get("outputs")) if m.get("outputs") else ()
    ref_node = m.get("reference")
    reference = build_stages.launcher_ref(reader, ref_node, "reference") if ref_node else None
    returns_node = m.get("reference_returns")
    reference_returns = _names(reader, returns_node, "reference_returns") if returns_node else None
    tests = build_tests.tests(reader, m.get("tests")) if m.get("tests") else None
    bench_node = m.get("benchmark")
    bench = build_bench.benchmark(reader, bench_node) if bench_node is not None else None
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
    if returns_node is not None and reference_returns is None:
        return None
    if bench_node is not None and bench is None:
        return None
    return Op(
        name=name,
        namespace=namespace,
        doc=doc.strip(),
        integration=integration,
        eager_fast_path=fast,
        eager_fast_path_loc=fast_loc,
        side_effects=side_effects,
        side_effects_loc=side_effects_loc,
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
        reference_returns=reference_returns,
        reference_returns_loc=returns_node.loc if returns_node is not None else None,
        benchmark=bench,
    )


def _names(reader: Reader, node: Node, what: str) -> tuple[str, ...] | None:
    """A non-empty list of distinct names (checked against the outputs in ``resolve/validate``)."""
    if not node.is_seq or not node.value:
        reader.error(
            node.loc, f"'{what}' must be a non-empty list of output names, got {kind(node)}"
        )
        return None
    names: list[str] = []
    for item in node.value:
        if not isinstance(item.value, str) or not item.value:
            reader.error(item.loc, f"'{what}' lists output names, got {kind(item)}")
            return None
        if item.value in names:
            reader.error(item.loc, f"'{what}' lists '{item.value}' twice")
            return None
        names.append(item.value)
    return tuple(names)


def _no_effect(stage) -> bool:
    """A forward that returns nothing and writes no argument: a call does nothing torch sees."""
    schema = stage.schema
    return not schema.returns and not any(a.is_write for a in schema.arguments)
