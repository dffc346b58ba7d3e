"""Settings the kernels read from the environment."""

from __future__ import annotations

import os


def switch(name: str, default: bool) -> bool:
    """A yes/no setting from the environment: unset or empty gives ``default``; 1, true, yes, on
    and 0, false, no, off (any case) give True and False; anything else is a ``ValueError`` that
    names the variable, rather than a guess."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={os.environ[name]!r}: expected 1, true, yes, on, 0, false, no or off")
