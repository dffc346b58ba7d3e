"""Builds the stages of an operator and what its public function chooses among or checks. The
forward and backward stages (schema plus a launcher per device), the forward's arity pair (a wider
twin chosen by a flag), derived and dynamic dims, variants (scalar arguments restricted to listed
values) and constraints (relations between dims). Each function checks the structure of its section,
reports through the shared ``Reader`` and returns ``None`` when the section is unusable.
"""

from __future__ import annotations

import re

from .errors import did_you_mean, one_of
from .load import Mapping, Node
from .model import (
    DEVICES,
    LAUNCHER_REF,
    ArityPair,
    Constraint,
    DerivedDim,
    Launcher,
    Stage,
    Variant,
)
from .reader import Reader, inside
from .schema import SchemaError, parse_schema
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
        try:
            schema = parse_schema(qualname, text, forward=what == "forward")
        except SchemaError as exc:
            reader.error(inside(schema_node, exc.offset), f"{what} schema: {exc.message}")
    launchers: list[Launcher] = []
    ln = m.get("launchers")
    if ln is not None:
        if not ln.is_map or not ln.value.entries:
            reader.error(
                ln.loc,
                f"{what} launchers must map devices ({one_of(DEVICES)}) to 'module:function'",
            )
        else:
            for device, ref_node in ln.value.items():
                if device not in DEVICES:
                    reader.error(
                        ln.value.key_loc(device),
                        f"unknown device '{device}'{did_you_mean(device, DEVICES)}; expected one of: {one_of(DEVICES)}",
                    )
                    continue
                ref = launcher_ref(reader, ref_node, f"{device} launcher")
                if ref:
                    module, function = ref.split(":")
                    launchers.append(Launcher(device, module, function, ref_node.loc))
    if schema is None or ln is None or len(launchers) != len(ln.value.entries if ln.is_map else ()):
        return None
    return Stage(schema, schema_node.loc, tuple(launchers), node.loc)


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
    try:
        schema = parse_schema(qualname, text)
    except SchemaError as exc:
        reader.error(inside(schema_node, exc.offset), f"arity_pair schema: {exc.message}")
        return None
    return ArityPair(flag, schema, schema_node.loc, after, suffix, node.loc)


def dims(reader: Reader, node: Node):
    if not node.is_map:
        reader.error(node.loc, "'dims' must map dim names to an expression or {dynamic: true}")
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
