"""Name hygiene for everything a spec can name.

Generated modules use names that begin with an underscore for their internals (``_l2norm_fwd``,
``_L2normFunction``), so a spec name must not begin with one. Names that generated code imports
or uses as parameters (``torch``, ``Tensor``, ``ctx``) and Python keywords are refused outright
instead of being renamed silently.
"""

from __future__ import annotations

import builtins
import keyword
import re

IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
RESERVED = frozenset(
    {"torch", "Tensor", "NamedTuple", "ctx", "self", "cls", "pytest", "batch", "set_offsets_check"}
    | {"set_index_check"}
)
AMBIGUOUS = frozenset({"l", "O", "I"})
BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))


def check_name(name: object, what: str) -> str | None:
    """Return a problem description, or None when ``name`` is usable in generated code."""
    if not isinstance(name, str) or not name:
        return f"{what} must be a non-empty string"
    if name.startswith("_"):
        return f"{what} '{name}' must not start with '_' (reserved for generated internals)"
    if not IDENTIFIER.fullmatch(name):
        return f"{what} '{name}' is not a valid Python identifier"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{what} '{name}' is a Python keyword"
    if name in RESERVED:
        return f"{what} '{name}' is reserved by the generated code"
    if name in AMBIGUOUS:
        return f"{what} '{name}' is easily misread as a digit (ruff E741); choose another name"
    if name in BUILTINS:
        return f"{what} '{name}' shadows the Python builtin '{name}'"
    return None


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)
