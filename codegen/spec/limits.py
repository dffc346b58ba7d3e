"""The bounds of a spec: sizes, counts and nesting the generator accepts (docs/spec.md, "Limits").

Each limit is far above what an operator library writes, and low enough that no stage can run out
of stack, memory or time on a spec within them: the text that reaches a parser (Python's ``ast``,
torch's schema parser) or a recursive walk is measured here first, by a flat scan of its
characters, so a hostile expression is refused before anything recursive reads it. The checks
return a problem description or None; the builders report it at the value's location.
"""

from __future__ import annotations

import re

# The spec file, in bytes of UTF-8, and the operators it declares.
MAX_SPEC_BYTES = 8 * 1024 * 1024
MAX_OPS = 1000
# Names of operators, namespaces and packages: files and directories are named after them.
MAX_NAME = 100
# Integers anywhere in the spec: torch sizes, seeds and int arguments are 64-bit.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Characters of an integer as written before it is read as a number (signs, '_' and the 0x, 0o,
# 0b prefixes included); longer text cannot hold a 64-bit value (or is padded to look harmless).
MAX_INT_TEXT = 80
# Dim expressions (shape entries, derived dims, each side of a check).
MAX_EXPR_CHARS = 512
MAX_EXPR_TOKENS = 128
MAX_EXPR_DEPTH = 16
# Schema strings (forward, backward, arity_pair).
MAX_SCHEMA_CHARS = 8192
MAX_SCHEMA_DEPTH = 8
MAX_ARGUMENTS = 256
MAX_RETURNS = 64
# Entries of one operator's sections.
MAX_RANK = 32  # entries of a shape, '...' included
MAX_DIMS = 64  # derived and dynamic dims
MAX_CONSTRAINTS = 64
MAX_VARIANT_VALUES = 64  # values of one variant (variants themselves are scalar arguments)
MAX_SAMPLES = 64
MAX_SAMPLE_VALUES = 4096  # entries of one list in a sample (a 'batch' or a literal tensor)

# Names, integers (with '_' separators, as YAML and Python write them), the two-character
# operators, and any other single character: a token count that over-counts never under-counts.
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9A-Za-z_]*|//|\*\*|[=!<>]=|\S")
_OPEN, _CLOSE = "([{", ")]}"


def nesting(text: str) -> int:
    """The deepest nesting of brackets in ``text`` (unbalanced text counted as it opens)."""
    depth = deepest = 0
    for ch in text:
        if ch in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in _CLOSE and depth:
            depth -= 1
    return deepest


def expression_problem(text: str) -> str | None:
    """Why ``text`` is too large to be a dim expression, or None; reads no tree."""
    if len(text) > MAX_EXPR_CHARS:
        return (
            f"the expression is {len(text)} characters long; "
            f"the limit is {MAX_EXPR_CHARS} characters"
        )
    depth = nesting(text)
    if depth > MAX_EXPR_DEPTH:
        return f"the expression nests parentheses {depth} deep; the limit is {MAX_EXPR_DEPTH}"
    tokens = len(_TOKEN.findall(text))
    if tokens > MAX_EXPR_TOKENS:
        return (
            f"the expression has {tokens} names, numbers and operators; "
            f"the limit is {MAX_EXPR_TOKENS}"
        )
    return None


def schema_problem(text: str) -> str | None:
    """Why ``text`` is too large to reach torch's schema parser, or None."""
    if len(text) > MAX_SCHEMA_CHARS:
        return (
            f"the schema is {len(text)} characters long; the limit is {MAX_SCHEMA_CHARS} characters"
        )
    depth = nesting(text)
    if depth > MAX_SCHEMA_DEPTH:
        return f"the schema nests brackets {depth} deep; the limit is {MAX_SCHEMA_DEPTH}"
    return None


def int_problem(value: int) -> str | None:
    """Why integer ``value`` is out of range, or None."""
    if INT64_MIN <= value <= INT64_MAX:
        return None
    return "integers must fit in 64 bits (-2**63 to 2**63 - 1)"


def count_problem(count: int, limit: int, what: str) -> str | None:
    """``what`` names the items in the plural: 'samples', 'values of variant 'x''."""
    if count <= limit:
        return None
    return f"{count} {what}; the limit is {limit}"


def name_problem(name: str, what: str) -> str | None:
    if len(name) <= MAX_NAME:
        return None
    return f"{what} is {len(name)} characters long; the limit is {MAX_NAME}"
