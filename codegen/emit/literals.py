"""The one path by which spec text becomes Python source: the templates' ``py`` and
``docstring`` filters.

``py`` writes any value a spec can carry (str, int, float, bool, None, tuples or lists of them,
dicts of them, and the torch dtypes, layouts, memory formats and devices that schema defaults name) as a Python literal that evaluates back to the same value. ``docstring`` writes text as
the body of a triple-double-quoted string that reads back as the same text. Nothing else in
the generator prints spec text.
"""

from __future__ import annotations

import math
import re

import torch

# Types whose repr is their literal, in a tuple or list too: such containers are repr'd at once.
_PLAIN = frozenset({type(None), bool, int, str})


def py(value: object) -> str:
    """A Python literal for ``value``."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    kind = type(value)
    if (kind is tuple or kind is list) and all(type(v) in _PLAIN for v in value):
        return repr(value)  # what the element-wise cases below write, for these types
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, tuple):
        inner = ", ".join(py(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(py(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py(k)}: {py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)  # torch.int64, torch.strided, torch.contiguous_format
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    raise TypeError(f"no Python literal for {type(value).__name__} {value!r}")


_QUOTE_RUN = re.compile(r'"(?="|$)')
# Backslashes, and control characters other than the newline: a NUL cannot be in source at all,
# a carriage return would be read as a line break, and formatters re-indent literal tabs.
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\r": "\\r"} | {
    chr(c): f"\\x{c:02x}" for c in [*range(0x20), 0x7F] if chr(c) not in "\n\t\r"
}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)


def docstring(text: object, indent: str = "    ") -> str:
    """``text`` as the inside of ``\"\"\"...\"\"\"``, later lines indented by ``indent``.

    Backslashes are doubled, and a double quote that another one follows (or that ends the text)
    is escaped, so no run of three quotes can close the string early. Lines are split on
    newlines only: other characters that ``str.splitlines`` treats as breaks stay in the text.
    """
    body = str(text).translate(_ESCAPE_TABLE)
    body = _QUOTE_RUN.sub('\\\\"', body)
    lines = body.split("\n")
    return "\n".join([lines[0]] + [indent + ln if ln.strip() else "" for ln in lines[1:]])
