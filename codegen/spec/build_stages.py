"""Builds the stages of an operator and what its public function chooses among or checks. The
forward and backward stages (schema plus a launcher per device), the forward's arity pair (a wider
twin chosen by a flag), derived and dynamic dims, variants (scalar arguments restricted to listed
values) and constraints (relations between dims). Each function checks the structure of its section,
reports through the shared ``Reader`` and returns ``None`` when the section is unusable.
"""

from __future__ import annotations

import re

from .errors import did_you_mean, one_of
from .limits import (
    MAX_ARGUMENTS,
    MAX_CONSTRAINTS,
    MAX_DIMS,
    MAX_RETURNS,
    MAX_VARIANT_VALUES,
    count_problem,
    schema_problem,
)
from .load import Mapping, Node
from .model import (
    BACKENDS,
    DEVICES,
    LAUNCHER_REF,
    SIGNATURES,
    ArityPair,
    Constraint,
    DerivedDim,
    Launcher,
    LayoutRule,
    Stage,
    Variant,
)
from .reader import Reader, inside, is_size, kind
from .schema import Schema, SchemaError, parse_schema, returns_offset
from .shapes import ShapeError, parse_condition, parse_dim_expr

STAGE_KEYS = ("schema", "launchers")
FORWARD_KEYS = ("schema", "launchers", "arity_pair")
ARITY_KEYS = ("flag", "schema", "after", "suffix")
CONSTRAINT_KEYS = ("check", "when", "message")


def stage(reader: Reader, node: Node, qualname: str, what: str) -> Stage | None:
    keys = FORWARD_KEYS if what == "forward" else STAGE_KEYS
    m = reader.mapping(node, f"'{what}'", keys, required=STAGE_KEYS)
    if m is None:
        return None
    schema = None
    schema_node = m.get("schema")
    text = reader.string(schema_node, f"{what} schema")
    if text is not None:
        schema = _schema(reader, schema_node, qualname, text, what, what == "forward")
    launchers: list[Launcher] = []
    ln = m.get("launchers")
    if ln is not None:
        if not ln.is_map or not ln.value.entries:
            reader.error(
                ln.loc,
                f"{what} launchers must map devices ({one_of(DEVICES)}) to 'module:function'",
            )
        else:
            complete = True
            for device, ref_node in ln.value.items():
                if device not in DEVICES:
                    reader.error(
                        ln.value.key_loc(device),
                        f"unknown device '{device}'{did_you_mean(device, DEVICES)}; expected one of: {one_of(DEVICES)}",
                    )
                    complete = False
                    continue
                if ref_node.is_seq:
                    found = backend_list(reader, ref_node, device, what, schema)
                    launchers += found
                    complete &= bool(found)
                    continue
                ref = launcher_ref(reader, ref_node, f"{device} launcher")
                if ref:
                    module, function = ref.split(":")
                    launchers.append(Launcher(device, module, function, ref_node.loc))
                else:
                    complete = False
            if not complete:
                return None
    if schema is None or ln is None or not launchers:
        return None
    arg_locs = tuple(
        (a.name, inside(schema_node, a.name_offset))
        for a in schema.arguments
        if a.name_offset is not None
    )
    at = returns_offset(text)
    returns_loc = inside(schema_node, at) if at is not None else schema_node.loc
    return Stage(schema, schema_node.loc, tuple(launchers), node.loc, arg_locs, returns_loc)


def _schema(
    reader: Reader, node: Node, qualname: str, text: str, what: str, forward: bool
) -> Schema | None:
    """The parsed schema of ``node``, or None with the problem reported. Its size is measured
    before torch's parser reads it, and its arguments and returns counted after (limits.py)."""
    problem = schema_problem(text)
    if problem is None:
        try:
            schema = parse_schema(qualname, text, forward=forward)
        except SchemaError as exc:
            reader.error(inside(node, exc.offset), f"{what} schema: {exc.message}")
            return None
        problem = count_problem(len(schema.arguments), MAX_ARGUMENTS, "arguments") or count_problem(
            len(schema.returns), MAX_RETURNS, "returns"
        )
        if problem is None:
            return schema
    reader.error(node.loc, f"{what} schema: {problem}")
    return None


BACKEND_KEYS = ("backend", "launcher", "layout", "int64", "signatures")
LAYOUT_KEYS = ("contiguous_dim", "alignment", "max_contiguous")
# The largest max_contiguous accepted: a tensor size (int64).
MAX_CONTIGUOUS = 2**62


def backend_list(
    reader: Reader, node: Node, device: str, what: str, schema: Schema | None
) -> list[Launcher]:
    """A CUDA launcher given as backends in order of preference (docs/spec.md, "Several
    backends"); an empty list when any entry is unusable, every problem reported."""
    if device != "cuda":
        reader.error(
            node.loc, f"{what} {device} launcher: only the cuda launcher may list backends"
        )
        return []
    entries = node.value
    if len(entries) < 2:
        reader.error(
            node.loc,
            f"{what} cuda backends: list at least two (the first whose layout contract holds "
            "runs); for one backend write its 'module:function' alone",
        )
        return []
    found: list[Launcher] = []
    names: set[str] = set()
    ok = True
    for i, entry in enumerate(entries):
        last = i == len(entries) - 1
        launcher = _backend(reader, entry, what, schema, last)
        if launcher is None:
            ok = False
            continue
        if launcher.backend in names:
            reader.error(
                entry.value.key_loc("backend"),
                f"{what} cuda backends: '{launcher.backend}' is listed twice",
            )
            ok = False
        names.add(launcher.backend)
        found.append(launcher)
    return found if ok else []


def _backend(
    reader: Reader, node: Node, what: str, schema: Schema | None, last: bool
) -> Launcher | None:
    m = reader.mapping(node, f"{what} cuda backend", BACKEND_KEYS, required=("backend", "launcher"))
    if m is None or m.get("backend") is None or m.get("launcher") is None:
        return None
    ok = True
    name_node = m.get("backend")
    name = reader.string(name_node, "backend")
    if name is not None and name not in BACKENDS:
        reader.error(
            name_node.loc,
            f"unknown backend '{name}'{did_you_mean(name, BACKENDS)}; expected one of: {one_of(BACKENDS)}",
        )
        ok = False
    ref = launcher_ref(reader, m.get("launcher"), f"{name or 'backend'} launcher")
    what = f"{what} backend '{name}'"
    layout = _layout(reader, m.get("layout"), what, schema)
    int64 = True
    if (n := m.get("int64")) is not None:
        if not isinstance(n.value, bool):
            reader.error(n.loc, f"{what}: int64 must be true or false, got {kind(n)}")
            ok = False
        else:
            int64 = n.value
    signatures = _signatures(reader, m.get("signatures"), what)
    if last and (layout or not int64):
        key = "layout" if layout else "int64"
        reader.error(
            m.key_loc(key),
            f"{what} is the last backend, which runs whenever no earlier one qualifies: it "
            f"cannot declare a {'layout contract' if layout else 'missing int64 ABI'}",
        )
        ok = False
    if not ok or name is None or ref is None or layout is None or signatures is None:
        return None
    module, function = ref.split(":")
    return Launcher(
        "cuda", module, function, m.get("launcher").loc, name, layout, int64, signatures
    )


def _layout(
    reader: Reader, node: Node | None, what: str, schema: Schema | None
) -> tuple[LayoutRule, ...] | None:
    if node is None:
        return ()
    if not node.is_map or not node.value.entries:
        reader.error(node.loc, f"{what}: layout must map tensor arguments to their contract")
        return None
    tensors = [a.name for a in schema.arguments if a.is_tensor] if schema else None
    rules, ok = [], True
    for tensor, rule_node in node.value.items():
        loc = node.value.key_loc(tensor)
        if tensors is not None and tensor not in tensors:
            lists = schema is not None and any(
                a.name == tensor and a.is_tensor_list for a in schema.arguments
            )
            reader.error(
                loc,
                f"{what}: layout names '{tensor}', "
                + (
                    "a Tensor[] argument; layout contracts cover Tensor arguments only"
                    if lists
                    else f"which is not a Tensor argument of the schema{did_you_mean(tensor, tensors)}"
                    f"; expected one of: {one_of(tensors) if tensors else '(none)'}"
                ),
            )
            ok = False
            continue
        rm = reader.mapping(rule_node, f"layout of '{tensor}'", LAYOUT_KEYS)
        if rm is None:
            ok = False
            continue
        dim, align = -1, None
        if (n := rm.get("contiguous_dim")) is not None:
            if not isinstance(n.value, int) or isinstance(n.value, bool):
                reader.error(
                    n.loc, f"layout of '{tensor}': contiguous_dim must be an int, got {kind(n)}"
                )
                ok = False
            else:
                dim = n.value
        if (n := rm.get("alignment")) is not None:
            v = n.value
            if not is_size(v) or v < 1 or v > 256 or v & (v - 1):
                reader.error(
                    n.loc,
                    f"layout of '{tensor}': alignment must be a power of two from 1 to 256 "
                    f"(bytes), got {kind(n)}",
                )
                ok = False
            else:
                align = v
        most = None
        if (n := rm.get("max_contiguous")) is not None:
            v = n.value
            if not is_size(v) or v < 1 or v > MAX_CONTIGUOUS:
                reader.error(
                    n.loc,
                    f"layout of '{tensor}': max_contiguous must be an int from 1 to 2**62 "
                    f"(elements along contiguous_dim), got {kind(n)}",
                )
                ok = False
            else:
                most = v
        rules.append(LayoutRule(tensor, dim, align, loc, most))
    return tuple(rules) if ok else None


def _signatures(reader: Reader, node: Node | None, what: str) -> tuple[str, ...] | None:
    if node is None:
        return ()
    if not node.is_seq or not node.value:
        reader.error(node.loc, f"{what}: signatures must list {one_of(SIGNATURES)}")
        return None
    found, ok = [], True
    for item in node.value:
        if item.value not in SIGNATURES or item.value in found:
            reader.error(
                item.loc,
                f"{what}: signature {kind(item)} is unknown or repeated; expected one of: "
                f"{one_of(SIGNATURES)}",
            )
            ok = False
        else:
            found.append(item.value)
    return tuple(found) if ok else None


def launcher_ref(reader: Reader, node: Node, what: str) -> str | None:
    text = reader.string(node, what)
    if text is None:
        return None
    if not LAUNCHER_REF.fullmatch(text):
        reader.error(node.loc, f"{what} '{text}' must be 'package.module:function'")
        return None
    return text


def arity_pair(reader: Reader, node: Node, qualname: str) -> ArityPair | None:
    m = reader.mapping(node, "'arity_pair'", ARITY_KEYS, required=("flag", "schema"))
    if m is None:
        return None
    flag_node = m.get("flag")
    flag = reader.string(flag_node, "arity_pair flag")
    if flag is None or not reader.name(flag, flag_node.loc, "arity_pair flag"):
        return None
    after = None
    if m.get("after") is not None:
        after = reader.string(m.get("after"), "arity_pair after")
        if after is None:
            return None
    suffix = "with_state"
    if m.get("suffix") is not None:
        suffix = reader.string(m.get("suffix"), "arity_pair suffix")
        if suffix is None or not re.fullmatch(r"[a-z][a-z0-9_]*", suffix):
            reader.error(m.get("suffix").loc, "arity_pair suffix must be lower_snake_case")
            return None
    schema_node = m.get("schema")
    text = reader.string(schema_node, "arity_pair schema")
    if text is None:
        return None
    schema = _schema(reader, schema_node, qualname, text, "arity_pair", False)
    if schema is None:
        return None
    return ArityPair(flag, schema, schema_node.loc, after, suffix, node.loc)


def dims(reader: Reader, node: Node):
    if not node.is_map:
        reader.error(node.loc, "'dims' must map dim names to an expression or {dynamic: true}")
        return None, None
    if problem := count_problem(len(node.value.entries), MAX_DIMS, "dims"):
        reader.error(node.loc, f"'dims': {problem}")
        return None, None
    derived, dynamic = [], []
    for name, item in node.value.items():
        loc = node.value.key_loc(name)
        if not reader.name(name, loc, "dim name"):
            continue
        if item.is_map:
            m = reader.mapping(item, f"dim '{name}'", ("dynamic",), required=("dynamic",))
            if m is not None and m.get("dynamic") is not None:
                if m.get("dynamic").value is not True:
                    reader.error(m.get("dynamic").loc, f"'dynamic' of dim '{name}' must be true")
                else:
                    dynamic.append((name, loc))
            continue
        try:
            derived.append(DerivedDim(name, parse_dim_expr(item.value), loc))
        except ShapeError as exc:
            reader.error(item.loc, f"dim '{name}': {exc}")
    return tuple(derived), tuple(dynamic)


def variants(reader: Reader, node: Node) -> tuple[Variant, ...] | None:
    if not node.is_map or not node.value.entries:
        reader.error(node.loc, "'variants' must map scalar argument names to their allowed values")
        return None
    out = []
    for arg, item in node.value.items():
        if item.is_seq and (
            problem := count_problem(len(item.value), MAX_VARIANT_VALUES, "values")
        ):
            reader.error(item.loc, f"variant '{arg}': {problem}")
            return None
        values = [v.value for v in item.value] if item.is_seq else None
        if not values or any(isinstance(v, (list, tuple, Mapping)) or v is None for v in values):
            reader.error(
                item.loc,
                f"variant '{arg}' must list its allowed scalar values, e.g. [softplus, lower_bound]",
            )
            return None
        if len(set(map(repr, values))) != len(values):
            reader.error(item.loc, f"variant '{arg}' lists a value twice")
            return None
        out.append(Variant(arg, tuple(values), node.value.key_loc(arg)))
    return tuple(out)


def constraints(reader: Reader, node: Node) -> tuple[Constraint, ...] | None:
    if not node.is_seq or not node.value:
        reader.error(
            node.loc, "'constraints' must be a list of {check: ..., when: ..., message: ...}"
        )
        return None
    if problem := count_problem(len(node.value), MAX_CONSTRAINTS, "constraints"):
        reader.error(node.loc, f"'constraints': {problem}")
        return None
    out = []
    for item in node.value:
        m = reader.mapping(item, "a constraint", CONSTRAINT_KEYS, required=("check",))
        if m is None or m.get("check") is None:
            return None
        try:
            check = parse_condition(m.get("check").value)
        except ShapeError as exc:
            reader.error(m.get("check").loc, str(exc))
            return None
        when = None
        if m.get("when") is not None:
            when = reader.string(m.get("when"), "constraint 'when'")
            if when is None:
                return None
        message = f"expected {check.text}"
        if m.get("message") is not None:
            message = reader.string(m.get("message"), "constraint 'message'")
            if message is None:
                return None
        out.append(Constraint(check, when, message, item.loc))
    return tuple(out)
