"""Line layout that matches ``ruff format`` for the few constructs the templates emit.

Generated code must pass ``ruff format --check`` without running ruff at generation time (the
generator also runs at CMake configure time, where ruff may be absent), so bracketed lists are
laid out the way ruff does: one line if it fits; else the contents on one indented line; else one
item per line with a trailing comma.
"""

from __future__ import annotations

LINE_LENGTH = 100
INDENT = "    "


def bracket(
    head: str, items: list[str], tail: str, indent: str = "", trailing_comma: bool = False
) -> str:
    """Lay out ``head + ", ".join(items) + tail`` where head ends with an opening bracket."""
    joined = ", ".join(items)
    if trailing_comma and len(items) == 1 and head.endswith("("):
        joined += ","
    one = f"{indent}{head}{joined}{tail}"
    if len(one) <= LINE_LENGTH or not items:
        return one
    inner = indent + INDENT
    # Collection displays that do not fit are exploded one item per line; calls, signatures and
    # subscripts first try their contents on one indented line.
    literal = head.endswith(("[", "{")) or head.strip() == "return ("
    if literal:
        body = "".join(f"{inner}{item},\n" for item in items)
        return f"{indent}{head}\n{body}{indent}{tail}"
    if len(items) == 1 and not trailing_comma:
        return f"{indent}{head}\n{inner}{joined}\n{indent}{tail}"
    if len(inner) + len(joined) <= LINE_LENGTH and not (trailing_comma and len(items) == 1):
        return f"{indent}{head}\n{inner}{joined}\n{indent}{tail}"
    body = "".join(f"{inner}{item},\n" for item in items)
    return f"{indent}{head}\n{body}{indent}{tail}"
