"""Finds a launcher or reference function in its module's source, without importing the module
(``resolve/sources.py`` does the lookup; Note [static lookup] there)."""

from __future__ import annotations

from ..sources import find_function


def _find(module: str, function: str) -> str | None:
    """None when ``module`` binds ``function`` at module level, else what is wrong."""
    return find_function(module, function)
