"""Formatting of generated Python with ruff, so templates can be written as plain code.

Note [formatting]: templates write each statement the way a person would write it before
formatting, and ``ruff format`` decides line breaks. The files of one generation are written to
a temporary directory and formatted by a few ruff processes, one a batch, each started as soon as
its batch is rendered (``--isolated`` so that no configuration of the surrounding project changes
the bytes; each file is formatted on its own, so batches do not change them either). ruff is a
dependency of the generator, pinned to a minor release whose style is stable; a file that ruff
cannot parse is a bug in the generator, reported as such (with the line and column ``compile``
gives) instead of being written."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Protocol

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


# The ruff command after the executable: each file is formatted alone, whatever the batch.
RUFF_FORMAT = (
    "format",
    "--isolated",
    "--no-cache",  # the temporary folder is never formatted again
    "--quiet",
    f"--line-length={LINE_LENGTH}",
    f"--target-version={TARGET}",
)


def ruff_command() -> list[str]:
    """How to start the ruff this environment has."""
    try:
        from ruff.__main__ import find_ruff_bin

        return [os.fsdecode(find_ruff_bin())]
    except (ImportError, FileNotFoundError):
        return [sys.executable, "-m", "ruff"]


def _compile_error(python: dict[str, str]) -> GeneratorBug | None:
    """The first file (in path order) that does not compile, as the bug to report; else None."""
    for rel, text in sorted(python.items()):
        try:
            compile(text, rel, "exec", dont_inherit=True)
        except SyntaxError as exc:
            return GeneratorBug(
                f"generated {rel}:{exc.lineno}:{exc.offset} does not compile: {exc.msg}", rel=rel
            )
    return None


SHM = "/dev/shm"


def _scratch_parent() -> str | None:
    """Where the files to format go: a memory-backed folder when there is one with room.

    Formatting writes, rewrites and deletes every generated file once; on a disk that costs
    seconds for a thousand operators, in memory next to nothing. A temporary folder the
    environment names (TMPDIR, TEMP, TMP) is used as it is; None means the system's default.
    """
    if any(os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")):
        return None
    try:
        fs = os.statvfs(SHM)
    except (OSError, AttributeError):  # no /dev/shm, or no statvfs (Windows)
        return None
    if fs.f_bavail * fs.f_frsize < 1 << 30 or not os.access(SHM, os.W_OK | os.X_OK):
        return None
    return SHM


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)

# Rendered text handed to one ruff process: ruff formats a batch while the next is rendered.
BATCH_CHARS = 2_000_000
BATCH_FILES = 500  # and at most this many paths on one command line


class FormattedTexts(Protocol):
    """Where a formatter may find a file's formatted text without running ruff
    (``format_cache.FormatCache``, Note [format cache] in emit/format_cache.py)."""

    def formatted(self, rel: str, text: str) -> str | None:
        """The formatted text of ``text`` rendered for ``rel``, or None when not proven."""


class Formatter:
    """Formats generated files with ruff as they are rendered (Note [formatting]).

    ``add`` a file at a time inside ``with Formatter() as f:``; ``result()`` returns every file,
    the ``*.py`` ones formatted. Each batch of about ``BATCH_CHARS`` characters is written to a
    temporary folder and handed to its own ruff process at once, so ruff works on one batch
    while the generator renders the next; every file is formatted alone, so the bytes do not
    depend on the batches. Nothing is compiled while ruff succeeds: ruff parses every file and
    refuses one that does not parse, and only then is each file compiled, to name the first that
    does not compile with the line and column ``compile`` gives. With a ``cache``, a file whose
    formatted text it proves (Note [format cache] in emit/format_cache.py) is not formatted.
    """

    def __init__(self, batch_chars: int = BATCH_CHARS, cache: FormattedTexts | None = None) -> None:
        self.batch_chars = batch_chars
        self.cache = cache
        self.files: dict[str, str] = {}
        self.python: dict[str, str] = {}
        self.formatted: dict[str, str] = {}  # taken from the cache, not given to ruff
        self._pending: list[str] = []
        self._pending_chars = 0
        self._runs: list[subprocess.Popen] = []
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._folders: set[str] = set()  # made under the temporary folder

    def __enter__(self) -> Formatter:
        self._tmp = tempfile.TemporaryDirectory(prefix="codegen-format-", dir=_scratch_parent())
        return self

    def __exit__(self, *exc_info) -> None:
        for run in self._runs:
            if run.poll() is None:
                run.kill()
            run.communicate()
        self._runs.clear()
        self._tmp.cleanup()

    @property
    def _root(self) -> Path:
        return Path(self._tmp.name)

    def add(self, rel: str, text: str) -> None:
        if rel in self.files:
            raise GeneratorBug(f"two generated files have the path {rel}", rel=rel)
        self.files[rel] = text
        if not rel.endswith(".py"):
            return
        self.python[rel] = text
        if self.cache is not None:
            formatted = self.cache.formatted(rel, text)
            if formatted is not None:
                self.formatted[rel] = formatted
                return
        path = os.path.join(self._tmp.name, rel)
        folder = os.path.dirname(path)
        if folder not in self._folders:
            os.makedirs(folder, exist_ok=True)
            self._folders.add(folder)
        fd = os.open(path, _CREATE, 0o666)
        try:
            view = memoryview(text.encode("utf-8"))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        self._pending.append(rel)
        self._pending_chars += len(text)
        if self._pending_chars >= self.batch_chars or len(self._pending) >= BATCH_FILES:
            self._start()

    def _start(self) -> None:
        if not self._pending:
            return
        self._runs.append(
            subprocess.Popen(
                [*ruff_command(), *RUFF_FORMAT, "--", *self._pending],
                cwd=self._root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        self._pending = []
        self._pending_chars = 0

    def result(self) -> dict[str, str]:
        """Every file added, in path order, the Python ones formatted."""
        self._start()
        failed = []
        for run in self._runs:
            _, stderr = run.communicate()
            if run.returncode != 0:
                failed.append(stderr.strip())
        if failed:
            bug = _compile_error(self.python)
            if bug is not None:
                raise bug
            raise GeneratorBug("ruff format failed on generated code: " + "\n".join(failed))
        return {rel: self._formatted(rel, text) for rel, text in sorted(self.files.items())}

    def _formatted(self, rel: str, text: str) -> str:
        if rel not in self.python:
            return text
        if rel in self.formatted:
            return self.formatted[rel]
        with open(os.path.join(self._tmp.name, rel), encoding="utf-8") as f:
            return f.read()


def format_sources(files: dict[str, str]) -> dict[str, str]:
    """Return ``files`` (in path order) with every ``*.py`` entry formatted."""
    with Formatter() as formatter:
        for rel, text in files.items():
            formatter.add(rel, text)
        return formatter.result()
