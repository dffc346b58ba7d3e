"""Marks shared by the generator's tests (Note [slow tests] in codegen/runtime/conftest.py)."""

from __future__ import annotations

import pytest

SLOW = pytest.mark.slow


def slow(*values, id: str | None = None):  # noqa: A002 - pytest.param's name
    """One parametrized case that runs only under --full."""
    return pytest.param(*values, id=id, marks=SLOW)


def first_by_default(cases: list) -> list:
    """``cases`` (tuples of argument values) with all but the first marked slow: the default
    run keeps one case of each check, --full runs every one."""
    return [case if i == 0 else slow(*case) for i, case in enumerate(cases)]
