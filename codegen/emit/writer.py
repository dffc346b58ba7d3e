"""The only stage that touches the filesystem: write what changed, report what is stale."""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .render import MARKER


@dataclass
class Report:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # generated files no longer produced
    diff: list[str] = field(default_factory=list)

    @property
    def drift(self) -> bool:
        return bool(self.written or self.stale)


def _existing_generated(out: Path) -> set[str]:
    found = set()
    if not out.is_dir():
        return found
    for path in out.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        try:
            with path.open(encoding="utf-8") as f:
                first = f.readline()
        except (OSError, UnicodeDecodeError):
            continue
        if MARKER in first:
            found.add(path.relative_to(out).as_posix())
    return found


def _atomic_write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write(files: dict[str, str], out: Path, check: bool = False) -> Report:
    """Write ``files`` under ``out`` (or, with ``check``, only compare and diff)."""
    report = Report()
    for rel, content in files.items():
        path = out / rel
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old == content:
            report.unchanged.append(rel)
            continue
        report.written.append(rel)
        if check:
            report.diff.extend(
                difflib.unified_diff(
                    (old or "").splitlines(keepends=True),
                    content.splitlines(keepends=True),
                    fromfile=f"a/{rel}",
                    tofile=f"b/{rel}",
                )
            )
        else:
            _atomic_write(path, content)
    for rel in sorted(_existing_generated(out) - set(files)):
        report.stale.append(rel)
        if check:
            old = (out / rel).read_text(encoding="utf-8")
            report.diff.extend(
                difflib.unified_diff(
                    old.splitlines(keepends=True), [], fromfile=f"a/{rel}", tofile="/dev/null"
                )
            )
        else:
            (out / rel).unlink()
    return report
