"""The rejections section: how ``test_rejects_invalid_arguments`` breaks each argument (a wrong
dtype, a wrong rank, a value of a wrong type, a value outside a variant), the ``REJECTS`` table."""

from __future__ import annotations

import re

from ...resolve.dims import element_dims
from ...resolve.resolved import ResolvedOp
from .common import OpTests

WRONG_DTYPES = ("float64", "int32", "bool")
# Values of a wrong type for each scalar schema type, as ``_te.broken`` spells them
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
    """How ``_te.broken`` gives a scalar argument of ``op`` a value of a type its schema type
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


def rejects(t: OpTests) -> dict:
    """argument -> how to break it: a wrong dtype, a wrong rank, a value outside a variant."""
    out = {}
    for decl in t.op.inputs:
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
    for a in t.fwd.arguments:
        if not a.is_tensor and not a.is_tensor_list:
            out[a.name] = ("type", *wrong_scalars(t.op, a.name, a.type))
    if t.r.flag:
        out[t.r.flag] = ("type", *wrong_scalars(t.op, t.r.flag, "bool"))
    for name, how in _list_return_rejects(t.r):
        out[name] = out.get(name, ()) + (how,)
    for v in t.op.variants:
        if t.op.restricts(v):
            out[v.arg] = out.get(v.arg, ()) + ("value",)
    return out


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
