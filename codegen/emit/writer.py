"""The only stage that touches the filesystem: write what changed, remove what went stale.

Note [manifest]: the output folder holds ``.codegen-manifest``, the sorted list (one relative
POSIX path a line, after one comment line) of every file the last generation wrote there. A file
is stale, and removed, only when the manifest lists it and the current generation no longer
produces it: files of other tools are never touched, whatever their first line says. An output
folder without a manifest (written by an older generator) gets one on the next regenerate; files
there that carry the generated marker but are not produced any more are reported, not removed.

Every file, the manifest included, is written to a temporary file in its folder and renamed over
the old one, so concurrent regenerations into one folder never leave a torn file, and removing a
file that another run already removed is not an error. Files get the permissions the umask
allows (0644 under umask 022), as ``open`` would give them.
"""

from __future__ import annotations

import difflib
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MANIFEST = ".codegen-manifest"
MANIFEST_HEADER = (
    "# files written by python -m codegen regenerate; stale ones are removed on regenerate"
)


@dataclass
class Report:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # recorded in the manifest, no longer produced
    unrecorded: list[str] = field(default_factory=list)  # marked, not produced, no manifest: kept
    diff: list[str] = field(default_factory=list)

    @property
    def drift(self) -> bool:
        return bool(self.written or self.stale)


def manifest_text(paths) -> str:
    return "\n".join([MANIFEST_HEADER, *sorted(paths)]) + "\n"


def _safe_rel(line: str) -> str | None:
    """A manifest entry, or None for one that could point outside the output folder."""
    if not line or line.startswith("#") or "\\" in line:
        return None
    path = PurePosixPath(line)
    if path.is_absolute() or ".." in path.parts or path.as_posix() != line or line == MANIFEST:
        return None
    return line


def read_manifest(out: Path) -> list[str] | None:
    """The paths recorded in ``out``'s manifest; None when there is none."""
    try:
        text = (out / MANIFEST).read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return [rel for line in text.splitlines() if (rel := _safe_rel(line.strip())) is not None]


def _marked_files(out: Path, skip: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """Files under ``out`` whose first line carries the generated marker (migration only).

    Paths in ``skip`` (the files just generated) are not opened, nor returned.
    """
    from .render import MARKER  # imported here: the writer alone loads neither torch nor jinja2

    found = set()
    if not out.is_dir():
        return found
    for path in out.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(out).as_posix()
        if rel in skip:
            continue
        try:
            with path.open(encoding="utf-8") as f:
                first = f.readline()
        except (OSError, UnicodeDecodeError):
            continue
        if MARKER in first:
            found.add(rel)
    return found


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
_names = itertools.count()


def _atomic_write(
    path: str | Path, content: str, mode: int, folders: set[str] | None = None
) -> None:
    """Write ``content`` (UTF-8, newlines as they are) to ``path`` through a temporary file.

    The temporary file is created with ``mode`` (the umask applies to it as it would to
    ``open``'s 0o666, so ``mode`` computed from the umask is what the file gets). ``folders``
    remembers the folders already made, so a run of writes makes each folder once.
    """
    parent, name = os.path.split(path)
    if folders is None or parent not in folders:
        os.makedirs(parent, exist_ok=True)
        if folders is not None:
            folders.add(parent)
    data = content.encode("utf-8")
    while True:
        tmp = os.path.join(parent, f".{name}.{os.getpid()}-{next(_names)}.tmp")
        try:
            fd = os.open(tmp, _FLAGS, mode)
            break
        except FileExistsError:  # left by a killed run whose process id this one has
            continue
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _read(path: str | Path) -> str | None:
    """The text of ``path`` (newlines read as Python's text files read them); None if absent."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except UnicodeDecodeError:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")


def current(files: dict[str, str], out: Path) -> dict[str, str | None]:
    """What ``out`` holds now of every file ``files`` names or its manifest lists (None: absent),
    read before ``write`` changes it (``regenerate --summary``)."""
    rels = sorted(set(files) | set(read_manifest(out) or ()))
    return {rel: _read(os.path.join(out, rel)) for rel in rels}


def write(files: dict[str, str], out: Path, check: bool = False) -> Report:
    """Write ``files`` and the manifest under ``out`` (or, with ``check``, only compare and diff)."""
    report = Report()
    recorded = read_manifest(out)
    mode = 0o666 & ~_umask()
    folders: set[str] = set()
    root = os.fspath(out)
    wanted = {**files, MANIFEST: manifest_text(files)}
    if not check and recorded is not None and not set(files) <= set(recorded):
        # Record new paths before writing them, so that an interrupted run leaves none unlisted.
        _atomic_write(out / MANIFEST, manifest_text(set(recorded) | set(files)), mode)
    for rel, content in wanted.items():
        path = os.path.join(root, rel)
        old = _read(path)
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
        elif rel != MANIFEST:
            _atomic_write(path, content, mode, folders)
    if recorded is None:
        report.unrecorded = sorted(_marked_files(out, set(files)))
    for rel in sorted(set(recorded or ()) - set(files)):
        path = out / rel
        old = _read(path)
        if old is None:
            continue  # already gone (removed by hand, or by a concurrent run)
        report.stale.append(rel)
        if check:
            report.diff.extend(
                difflib.unified_diff(
                    old.splitlines(keepends=True), [], fromfile=f"a/{rel}", tofile="/dev/null"
                )
            )
        else:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
    if not check and MANIFEST in report.written:
        # Last, so that a run interrupted before this point still lists the stale files.
        _atomic_write(out / MANIFEST, wanted[MANIFEST], mode)
    return report
