"""Formatting of generated Python with ruff, so templates can be written as plain code.

Note [formatting]: templates write each statement the way a person would write it before
formatting, and ``ruff format`` decides line breaks. Every file of one generation is formatted
by a single ruff process (a temporary directory, ``--isolated`` so that no configuration of the
surrounding project changes the bytes). ruff is a dependency of the generator, pinned to a minor
release whose style is stable; a file that ruff cannot parse is a bug in the generator, reported
as such instead of being written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

LINE_LENGTH = 100
TARGET = "py310"


class GeneratorBug(Exception):
    """Generated code that does not compile, or a failure while rendering: never the user's fault.

    ``op`` names the operator being rendered when it is known; ``rel`` the generated file.
    """

    def __init__(self, message: str, op: str | None = None, rel: str | None = None) -> None:
        super().__init__(message)
        self.op = op
        self.rel = rel


def _ruff() -> list[str]:
    try:
        from ruff.__main__ import find_ruff_bin

        return [os.fsdecode(find_ruff_bin())]
    except (ImportError, FileNotFoundError):
        return [sys.executable, "-m", "ruff"]


def format_sources(files: dict[str, str]) -> dict[str, str]:
    """Return ``files`` with every ``*.py`` entry formatted; other entries unchanged."""
    python = {rel: text for rel, text in files.items() if rel.endswith(".py")}
    for rel, text in python.items():
        try:
            compile(text, rel, "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise GeneratorBug(
                f"generated {rel}:{exc.lineno}:{exc.offset} does not compile: {exc.msg}", rel=rel
            ) from None
    if not python:
        return dict(files)
    with tempfile.TemporaryDirectory(prefix="codegen-format-") as tmp:
        root = Path(tmp)
        for rel, text in python.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
        result = subprocess.run(
            [
                *_ruff(),
                "format",
                "--isolated",
                "--quiet",
                f"--line-length={LINE_LENGTH}",
                f"--target-version={TARGET}",
                ".",
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise GeneratorBug("ruff format failed on generated code: " + result.stderr.strip())
        formatted = {rel: (root / rel).read_text(encoding="utf-8") for rel in python}
    return {rel: formatted.get(rel, text) for rel, text in files.items()}
