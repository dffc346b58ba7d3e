"""The files a regenerate read, for build systems: ``--stamp FILE`` writes FILE and FILE.d.

Note [depfile]: a build system that runs the generator as a build step (CMakeLists.txt) must
rerun it when anything it read changes. After a successful run, ``--stamp FILE`` writes FILE (a
stamp whose modification time marks the run) and ``FILE.d``, a Makefile rule ``FILE: inputs``
naming, as absolute paths, every file the output depends on: the spec, every file of the
``codegen`` package and every template (what the digest hashes, Note [no-op digest]), the
``pyproject.toml`` beside the spec (its package folders), and the source file of each launcher
and reference module that validation read (a rerun that changes
nothing takes their names from the digest's record). CMake's ``DEPFILE``, Make and Ninja read
the rule as it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..resolve.sources import module_file, searching
from .digest import _files
from .locations import CODEGEN, template_dir
from .writer import file_mode


def inputs_read(spec: Path, modules: Iterable[str]) -> list[Path]:
    """Every file a regenerate of ``spec`` reads, ``modules`` being the launcher and reference
    modules validation looked up."""
    paths = {spec.resolve()}
    for folder in (CODEGEN, template_dir()):
        paths.update(p.resolve() for p in _files(folder))
    project = spec.resolve().parent / "pyproject.toml"  # its package-dir table maps modules
    if project.is_file():
        paths.add(project)
    with searching(spec.resolve().parent):
        for module in modules:
            path = module_file(module)
            if path is not None:
                paths.add(Path(path).resolve())
    return sorted(paths)


def _escaped(path: Path) -> str:
    # Make's quoting, which Ninja and CMake read too: a space or '#' behind a backslash, '$'
    # doubled.
    return str(path).replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")


def rule(target: Path, paths: Iterable[Path]) -> str:
    """``target: paths``, one path a line."""
    lines = [f"{_escaped(target)}:"] + [f"  {_escaped(p)}" for p in paths]
    return " \\\n".join(lines) + "\n"


def write_stamp(stamp: Path, spec: Path, modules: Iterable[str]) -> None:
    """Write ``stamp.d`` (the rule) and then ``stamp``, so that the stamp is never newer than a
    rule that is missing or stale."""
    mode = file_mode()
    target = stamp.resolve()
    _atomic_write(f"{target}.d", rule(target, inputs_read(spec, modules)), mode)
    _atomic_write(target, "# the last successful regenerate (Note [depfile])\n", mode)


def _atomic_write(path: str | Path, content: str, mode: int) -> None:
    """Write ``content`` to ``path`` (a path the user named, outside the output folder) through
    a temporary file beside it, renamed over it: a build never reads a torn rule."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
