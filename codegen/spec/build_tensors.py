"""Builds the tensor declarations of an operator: its inputs and outputs, their shapes and dtypes.
An input carries its shape, allowed dtypes (or the input whose dtype it takes), whether it is
differentiable or mutated, and how tests fill it; an output carries its shape, a fixed dtype or the
input whose dtype it takes, and whether the public function returns it. Names that must match the
schema are checked later, in ``resolve/validate``.
"""

from __future__ import annotations

import math
import re

from .errors import one_of
from .load import Node
from .model import ABSENT_GRADIENTS, INITS, NEGATIVE_POLICIES, DType, OutputDecl, TensorDecl
from .reader import Reader, kind
from .shapes import Shape, ShapeError, parse_shape

INPUT_KEYS = (
    "shape",
    "dtypes",
    "dtype",
    "differentiable",
    "mutated",
    "init",
    "offsets",
    "absent_gradient",
    "list",
    "indexes",
    "negative",
    "domain",
)
OUTPUT_KEYS = ("shape", "dtype", "public", "when", "count")


def read_shape(reader: Reader, node: Node | None, what: str) -> Shape | None:
    if node is None:
        return None
    if not node.is_seq:
        reader.error(node.loc, f"{what} must be a list of dims such as [..., D], got {kind(node)}")
        return None
    if empty := next((n for n in node.value if n.value is None), None):
        # At the entry: a value the loader refused is reported there once (pipeline.analyse).
        reader.error(
            empty.loc, f"{what}: shape entry None must be '...', an integer or a dim expression"
        )
        return None
    try:
        return parse_shape([n.value for n in node.value])
    except ShapeError as exc:
        reader.error(node.loc, f"{what}: {exc}")
        return None


def dtype_list(reader: Reader, node: Node, what: str) -> tuple[DType, ...] | None:
    if not node.is_seq or not node.value:
        reader.error(node.loc, f"{what} must be a non-empty list of dtypes")
        return None
    out = []
    for item in node.value:
        try:
            dt = DType.parse(item.value)
        except ValueError as exc:
            reader.error(item.loc, str(exc))
            return None
        if dt in out:
            reader.error(item.loc, f"dtype '{dt.torch_name}' is listed twice")
            return None
        out.append(dt)
    return tuple(out)


def inputs(reader: Reader, node: Node) -> tuple[TensorDecl, ...] | None:
    if not node.is_map or not node.value.entries:
        reader.error(
            node.loc,
            f"'inputs' must map tensor argument names to constraints, got {kind(node)}",
        )
        return None
    decls, ok = [], True
    for name, item in node.value.items():
        m = reader.mapping(item, f"input '{name}'", INPUT_KEYS, required=("shape",))
        if m is None:
            ok = False
            continue
        shape = read_shape(reader, m.get("shape"), f"shape of input '{name}'")
        dtypes, same = (), None
        if m.get("dtypes") is not None and m.get("dtype") is not None:
            reader.error(
                m.key_loc("dtype"), f"input '{name}' sets both 'dtype' and 'dtypes'; keep one"
            )
            ok = False
        elif m.get("dtypes") is not None:
            dtypes = dtype_list(reader, m.get("dtypes"), f"dtypes of input '{name}'")
        elif m.get("dtype") is not None:
            d = m.get("dtype")
            if isinstance(d.value, str) and d.value in DType.names():
                dtypes = (DType.parse(d.value),)
            elif isinstance(d.value, str):
                same = d.value  # the name of another input, checked in validate
            else:
                reader.error(
                    d.loc,
                    f"dtype of input '{name}' must be a dtype name or another input's name",
                )
                ok = False
        else:
            reader.error(
                item.loc,
                f"input '{name}' needs 'dtypes' (allowed dtypes) or 'dtype' (a dtype or another input's name)",
            )
            ok = False
        flags = {}
        for key, default in (("differentiable", True), ("mutated", False), ("list", False)):
            flags[key] = default
            if (d := m.get(key)) is not None:
                if not isinstance(d.value, bool):
                    reader.error(d.loc, f"'{key}' of input '{name}' must be true or false")
                    ok = False
                else:
                    flags[key] = d.value
        init = "randn"
        if (d := m.get("init")) is not None:
            if d.value not in INITS:
                reader.error(
                    d.loc,
                    f"unknown init '{d.value}' of input '{name}'; expected one of: {one_of(INITS)}",
                )
                ok = False
            else:
                init = d.value
        offsets, offsets_loc = None, None
        if (d := m.get("offsets")) is not None:
            offsets_loc = d.loc
            if not isinstance(d.value, str) or not d.value:
                reader.error(
                    d.loc, f"'offsets' of input '{name}' must name the dim the offsets partition"
                )
                ok = False
            else:
                offsets = d.value
        absent, absent_loc = "zeros", None
        if (d := m.get("absent_gradient")) is not None:
            absent_loc = d.loc
            if not isinstance(d.value, str) or d.value not in ABSENT_GRADIENTS:
                got = f"'{d.value}'" if isinstance(d.value, str) else kind(d)
                reader.error(
                    d.loc,
                    f"'absent_gradient' of input '{name}' must be one of: "
                    f"{one_of(ABSENT_GRADIENTS)}; got {got}",
                )
                ok = False
            else:
                absent = d.value
        index = _index_keys(reader, m, name, flags, init)
        if index is None:
            ok = False
        else:
            init = index.pop("init")
        domain = None
        if (d := m.get("domain")) is not None:
            domain = _domain(reader, d, name)
            ok = ok and domain is not None
        if shape is None or dtypes is None or index is None:
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
                offsets,
                offsets_loc,
                absent,
                absent_loc,
                flags["list"],
                **index,
                domain=domain,
                domain_loc=m.key_loc("domain") if domain is not None else None,
            )
        )
    return tuple(decls) if ok else None


# A bound written as a string: a decimal number or an infinity ("-inf", "+inf", "inf"). YAML
# 1.1 reads "1e4" (no dot) as a string, so the strings take what its numbers may not.
_BOUND = re.compile(r"[+-]?(inf|(\d+\.?\d*|\.\d+)(e[+-]?\d+)?)", re.IGNORECASE)


def _domain(reader: Reader, node: Node, name: str) -> tuple[float, float] | None:
    """``domain: [lower, upper]`` of input ``name`` (docs/spec.md, "Value domains"): two numbers,
    YAML infinities (``-.inf``, ``.inf``) or strings (``"-inf"``, ``"1e4"``), lower <= upper;
    NaN and booleans are refused. None after reporting a problem."""
    if not node.is_seq or len(node.value) != 2:
        reader.error(
            node.loc,
            f"'domain' of input '{name}' must be a list of two bounds [lower, upper], such as "
            f"[-.inf, 0]; got {kind(node)}" + (f" of {len(node.value)}" if node.is_seq else ""),
        )
        return None
    bounds = []
    for which, item in zip(("lower", "upper"), node.value, strict=True):
        v = item.value
        if isinstance(v, str) and _BOUND.fullmatch(v.strip()):
            v = float(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            reader.error(
                item.loc,
                f"{which} bound of the domain of input '{name}' must be a number or an "
                f'infinity (-.inf, .inf, "-inf", "inf"); got {kind(item)}',
            )
            return None
        try:
            v = float(v)
        except OverflowError:  # an integer beyond every float: an infinite bound
            v = math.inf if v > 0 else -math.inf
        if math.isnan(v):
            reader.error(item.loc, f"{which} bound of the domain of input '{name}' cannot be NaN")
            return None
        bounds.append(v)
    lower, upper = bounds
    if lower > upper:
        reader.error(
            node.loc,
            f"the domain of input '{name}' is empty: its lower bound {lower:g} is above its "
            f"upper bound {upper:g}",
        )
        return None
    return lower, upper


def _index_keys(reader: Reader, m, name: str, flags: dict, init: str) -> dict | None:
    """``indexes`` and ``negative`` of input ``name`` (docs/spec.md, "Index inputs"), with the
    defaults they imply: not differentiable, test values drawn in range (``init: index``).
    ``flags`` (differentiable, mutated) are updated; returns the declaration's index fields and
    its init, or None after reporting a problem."""
    out = {"indexes": None, "indexes_loc": None, "negative": None, "negative_loc": None}
    ok = True
    if (d := m.get("indexes")) is not None:
        out["indexes_loc"] = d.loc
        if not isinstance(d.value, str) or not d.value:
            reader.error(d.loc, f"'indexes' of input '{name}' must name the dim its entries index")
            ok = False
        else:
            out["indexes"] = d.value
    if (d := m.get("negative")) is not None:
        out["negative_loc"] = d.loc
        if m.get("indexes") is None:
            reader.error(
                d.loc,
                f"'negative' of input '{name}' applies only to an index input; add 'indexes: <dim>'",
            )
            ok = False
        elif not isinstance(d.value, str) or d.value not in NEGATIVE_POLICIES:
            got = f"'{d.value}'" if isinstance(d.value, str) else kind(d)
            reader.error(
                d.loc,
                f"'negative' of input '{name}' must be one of: {one_of(NEGATIVE_POLICIES)}; "
                f"got {got} (without it, negative entries are refused)",
            )
            ok = False
        else:
            out["negative"] = d.value
    written_init = m.get("init")
    if m.get("indexes") is None:
        if written_init is not None and written_init.value == "index":
            reader.error(
                written_init.loc,
                f"init 'index' of input '{name}' needs 'indexes: <dim>' (the range to draw from)",
            )
            ok = False
        return {**out, "init": init} if ok else None
    where = m.key_loc("indexes")
    if m.get("offsets") is not None:
        reader.error(where, f"input '{name}' cannot hold both offsets and indexes; keep one")
        ok = False
    if (d := m.get("differentiable")) is not None and d.value is True:
        reader.error(
            d.loc, f"index input '{name}' cannot be differentiable; drop 'differentiable: true'"
        )
        ok = False
    flags["differentiable"] = False
    if flags["mutated"]:
        reader.error(
            where,
            f"index input '{name}' cannot be mutated: its entries are checked before the launch",
        )
        ok = False
    if written_init is not None and written_init.value in INITS and init != "index":
        reader.error(
            written_init.loc,
            f"index input '{name}' draws its test values in range; drop 'init: {init}' "
            "(or write 'init: index')",
        )
        ok = False
    return {**out, "init": "index"} if ok else None


def outputs(reader: Reader, node: Node) -> tuple[OutputDecl, ...] | None:
    if not node.is_map:
        reader.error(node.loc, "'outputs' must map each forward return name to its shape and dtype")
        return None
    decls, ok = [], True
    for name, item in node.value.items():
        m = reader.mapping(item, f"output '{name}'", OUTPUT_KEYS, required=("shape", "dtype"))
        if m is None:
            ok = False
            continue
        shape = read_shape(reader, m.get("shape"), f"shape of output '{name}'")
        dtype, dtype_of = None, None
        if (d := m.get("dtype")) is not None:
            if isinstance(d.value, str) and d.value in DType.names():
                dtype = DType.parse(d.value)
            elif isinstance(d.value, str) and d.value:
                dtype_of = d.value
            else:
                reader.error(
                    d.loc, f"dtype of output '{name}' must be a dtype name or an input's name"
                )
                ok = False
        public = True
        if (p := m.get("public")) is not None:
            if not isinstance(p.value, bool):
                reader.error(p.loc, f"'public' of output '{name}' must be true or false")
                ok = False
            else:
                public = p.value
        when = None
        if (w := m.get("when")) is not None:
            if isinstance(w.value, str) and w.value:
                when = w.value
            else:
                reader.error(
                    w.loc,
                    f"'when' of output '{name}' must name a bool, int or float argument or a Tensor? input",
                )
                ok = False
        count, count_loc = None, None
        if (c := m.get("count")) is not None:
            count_loc = c.loc
            if isinstance(c.value, int) and not isinstance(c.value, bool) and c.value >= 0:
                count = c.value
            elif isinstance(c.value, str) and c.value:
                count = c.value
            else:
                reader.error(
                    c.loc,
                    f"'count' of output '{name}' must be an integer >= 0, the name of an int "
                    f"argument or the name of a list input; got {kind(c)}",
                )
                ok = False
        if shape is None or (dtype is None and dtype_of is None):
            ok = False
            continue
        decls.append(
            OutputDecl(
                name,
                shape,
                dtype,
                dtype_of,
                public,
                node.value.key_loc(name),
                when,
                count,
                count_loc,
            )
        )
    return tuple(decls) if ok else None
