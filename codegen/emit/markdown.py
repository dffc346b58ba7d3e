"""Spec text in Markdown (``OPS.md``): filters that keep it on its line and out of the markup."""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_\[\]<>#|])")


def md_text(text: object) -> str:
    """``text`` as literal Markdown text on one line: no character of it starts markup."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def md_code(text: object) -> str:
    """``text`` as a one-line code span, usable in a table cell."""
    body = " ".join(str(text).split()).replace("|", "\\|")
    ticks = max((len(run) for run in re.findall(r"`+", body)), default=0) + 1
    fence = "`" * ticks
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"
