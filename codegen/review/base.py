"""The base spec of ``bc-check``: a spec file, or the spec as a git revision holds it.

Note [base spec]: ``--base`` names an existing file (read as it is) or a git revision. For a
revision, the spec is looked up at the same path, relative to the repository's top folder, as
the spec being checked (``git show <rev>:<path>``), so ``--base origin/main`` compares a branch's
``ops.yaml`` with its base's. A revision that does not hold the file is not an error: every
operator is new. Everything else git refuses (no git, not a repository, an unknown revision)
stops the check with one line saying which.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


class BaseError(Exception):
    """The base spec cannot be read; the message says why."""


@dataclass(frozen=True, slots=True)
class Base:
    data: bytes | None  # None: the revision does not hold the spec (every operator is new)
    label: str  # the path its locations print: the file, or <rev>:<path in the repository>


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except OSError as exc:
        raise BaseError(f"cannot run git to read revision: {exc.strerror or exc}") from exc


def read_base(base: str, spec: Path) -> Base:
    """The base spec named by ``base`` for the spec at ``spec``."""
    path = Path(base)
    if path.is_file():
        try:
            return Base(path.read_bytes(), base)
        except OSError as exc:
            raise BaseError(f"{base}: cannot read the base spec: {exc.strerror}") from exc
    folder = spec.parent if spec.parent != Path("") else Path(".")
    if not folder.is_dir():
        raise BaseError(f"{spec}: the spec's folder does not exist")
    top = _git(folder, "rev-parse", "--show-prefix")
    if top.returncode != 0:
        raise BaseError(
            f"'{base}' is not a file, and {folder} is not inside a git repository, so it "
            "cannot be a revision either; pass a spec file or run inside the repository"
        )
    rel = top.stdout.decode().strip() + spec.name
    label = f"{base}:{rel}"
    commit = _git(folder, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    if commit.returncode != 0:
        raise BaseError(f"'{base}' is neither a file nor a git revision of this repository")
    shown = _git(folder, "cat-file", "blob", f"{base}:{rel}")
    if shown.returncode != 0:
        return Base(None, label)
    return Base(shown.stdout, label)
