"""Tests marked slow run only under --full (or ATTNOPS_FULL_TESTS=1), and say so when skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from codegen.emit.render import static_source
from codegen.runtime import conftest

SUITE = """\
import pytest


@pytest.mark.slow
def test_heavy():
    pass


def test_light():
    pass


@pytest.mark.parametrize("k", [pytest.param(0), pytest.param(1, marks=pytest.mark.slow)])
def test_shards(k):
    pass
"""


def _pytest(folder: Path, *args: str, env: dict | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", str(folder), *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "ATTNOPS_FULL_TESTS": "", **(env or {})},
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_generated_conftest_skips_slow_tests_with_a_reason(tmp_path):
    (tmp_path / "conftest.py").write_text(static_source("conftest"))
    (tmp_path / "test_suite.py").write_text(SUITE)
    out = _pytest(tmp_path)
    assert "2 passed, 2 skipped" in out, out
    assert out.count("slow: run with --full") == 2, out


class _Config:
    def __init__(self, full: bool):
        self.full = full

    def getoption(self, name, default=None):
        assert name == "--full"
        return self.full


def test_full_or_the_variable_selects_the_full_matrix(monkeypatch):
    monkeypatch.delenv(conftest.FULL_ENV, raising=False)
    assert not conftest.full_run(_Config(False))
    assert conftest.full_run(_Config(True))
    monkeypatch.setenv(conftest.FULL_ENV, "1")
    assert conftest.full_run(_Config(False))
    monkeypatch.setenv(conftest.FULL_ENV, "0")
    assert not conftest.full_run(_Config(False))
