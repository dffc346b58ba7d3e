"""Where the generator's own files are: its package folder and its templates (no imports)."""

from __future__ import annotations

from pathlib import Path

CODEGEN = Path(__file__).resolve().parent.parent


def template_dir() -> Path:
    packaged = CODEGEN / "templates"  # installed wheels carry them here
    if packaged.is_dir():
        return packaged
    return CODEGEN.parent / "templates"  # a source checkout
