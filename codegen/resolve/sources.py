"""Launcher and reference lookups in source files, without importing anything.

Note [static lookup]: ``package.module:function`` is checked by finding the module's source file
and reading its module-level bindings with ``ast``. Nothing is imported: importing a module runs
every parent package's ``__init__`` (user code, which may need triton or a GPU). A module is
searched, in order, under

1. each directory on ``sys.path`` (the current directory first under ``python -m``);
2. the package folders of setuptools editable installs (``pip install -e``): the
   ``MAPPING = {...}`` literal of each ``__editable___*_finder.py`` on ``sys.path``, read as data,
   which is how ``attnops_kernels`` maps to ``kernels/``;
3. the spec's folder, and the ``[tool.setuptools] package-dir`` table of a ``pyproject.toml``
   there, so a project that is not installed still resolves its own packages.

A module resolves to ``<name>.py`` or a package's ``__init__.py`` (a ``.pyi`` stub when there is no
source). Every module-level binding counts: ``def``, ``class``, assignments (tuple targets too),
annotated assignments with a value, ``import`` and ``from ... import`` with aliases, also nested
under ``if``/``try``/``with``/``for``/``while``/``match`` at module level. Bindings that only
running the module could reveal (``from x import *``, ``globals()``, a module ``__getattr__``) are
reported with how to bind the name explicitly.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import sys
import tokenize
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from ..spec.errors import Diagnostic, Location, did_you_mean

EXPLICIT = "bind it with an explicit def, assignment or import"


@dataclass
class _Search:
    spec_dir: Path | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    modules: dict[Path, _Module | str] = field(default_factory=dict)
    # Module name -> (source file or None, why not found): one search, one folder scan and one
    # read of the editable finders per run, however many launchers name the module.
    located: dict[str, tuple[Path | None, str | None]] = field(default_factory=dict)
    mappings: list[dict[str, Path]] | None = None
    sha256: dict[Path, str] = field(default_factory=dict)  # of the bytes read from each file


_search: ContextVar[_Search | None] = ContextVar("codegen_sources", default=None)


@contextmanager
def searching(spec_dir: Path | None) -> Iterator[list[Diagnostic]]:
    """Look up modules under ``spec_dir`` too; yields the located errors of unreadable files."""
    state = _Search(spec_dir)
    token = _search.set(state)
    try:
        yield state.diagnostics
    finally:
        _search.reset(token)


@dataclass(frozen=True)
class _Module:
    names: frozenset[str]
    dynamic: tuple[tuple[int, str], ...]  # (line, what) of bindings only running could reveal


# --- where modules live -------------------------------------------------------------------------


def _path_dirs() -> list[Path]:
    dirs = []
    for entry in sys.path:
        path = Path(entry or os.curdir)
        if path.is_dir():
            dirs.append(path)
    return dirs


def _editable_mapping(dirs: list[Path]) -> dict[str, Path]:
    """Package name -> folder, from setuptools' editable finders (read, not imported)."""
    mapping: dict[str, Path] = {}
    for d in dirs:
        try:
            finders = sorted(d.glob("__editable___*_finder.py"))
        except OSError:
            continue
        for finder in finders:
            try:
                tree = ast.parse(finder.read_bytes())
            except (OSError, SyntaxError, ValueError):
                continue
            for node in tree.body:
                target = node.target if isinstance(node, ast.AnnAssign) else None
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                if isinstance(target, ast.Name) and target.id == "MAPPING" and node.value:
                    try:
                        value = ast.literal_eval(node.value)
                    except ValueError:
                        continue
                    if isinstance(value, dict):
                        for name, folder in value.items():
                            if isinstance(name, str) and isinstance(folder, str):
                                mapping.setdefault(name, Path(folder))
    return mapping


def _pyproject_mapping(spec_dir: Path) -> dict[str, Path]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return {}
    try:
        with open(spec_dir / "pyproject.toml", "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    table = data.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    if not isinstance(table, dict):
        return {}
    return {
        name: spec_dir / folder
        for name, folder in table.items()
        if isinstance(name, str) and name and isinstance(folder, str)
    }


def _mappings(state: _Search, dirs: list[Path]) -> list[dict[str, Path]]:
    """The editable finders' mapping, then the spec folder's pyproject one (read once a run)."""
    if state.mappings is None:
        state.mappings = [_editable_mapping(dirs)]
        if state.spec_dir is not None:
            state.mappings.append(_pyproject_mapping(state.spec_dir))
    return state.mappings


def _candidates(module: str, state: _Search) -> Iterator[tuple[Path, list[str]]]:
    """(folder or file of a leading part of ``module``, the parts left to descend)."""
    spec_dir = state.spec_dir
    parts = module.split(".")
    dirs = _path_dirs()
    for d in dirs:
        yield d, parts
    for i, mapping in enumerate(_mappings(state, dirs)):
        for n in range(len(parts), 0, -1):
            folder = mapping.get(".".join(parts[:n]))
            if folder is not None:
                yield folder, ["__init__", *parts[n:]] if n == len(parts) else parts[n:]
                break
        if i == 0 and spec_dir is not None:
            yield spec_dir, parts
            yield spec_dir / "src", parts


def _descend(base: Path, parts: list[str]) -> tuple[Path | None, str | None]:
    """The source file of ``parts`` under ``base``, or None with why."""
    if base.is_file():  # an editable install of a single module
        return (base, None) if parts == ["__init__"] else (None, None)
    folder = base
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "__init__" and last:
            break
        if (folder / part).is_dir() and not last:
            folder = folder / part
            continue
        if last:
            if (folder / part).is_dir():
                folder = folder / part
                break
            for suffix in (".py", ".pyi"):
                if (folder / f"{part}{suffix}").is_file():
                    return folder / f"{part}{suffix}", None
            try:
                binaries = [p for p in folder.glob(f"{part}.*") if p.suffix in (".so", ".pyd")]
            except OSError:
                binaries = []
            if binaries:
                return None, (
                    f"'{binaries[0].name}' is a compiled extension; the generator checks launchers "
                    "in Python source, so add a '.pyi' stub that declares them"
                )
        return None, None
    for name in ("__init__.py", "__init__.pyi"):
        if (folder / name).is_file():
            return folder / name, None
    if folder.is_dir():
        return None, "is a namespace package (a folder without __init__.py); name a module in it"
    return None, None


# --- what a module binds ------------------------------------------------------------------------


def _targets(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def _bindings(body: list[ast.stmt], names: set[str], dynamic: list[tuple[int, str]]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if node.name == "__getattr__":
                dynamic.append((node.lineno, "a module __getattr__"))
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(_targets(target))
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                names.update(_targets(node.target))
        elif isinstance(node, ast.AugAssign):
            names.update(_targets(node.target))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    dynamic.append(
                        (node.lineno, f"'from {'.' * node.level}{node.module or ''} import *'")
                    )
                else:
                    names.add(alias.asname or alias.name)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            names.update(_targets(node.target))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    names.update(_targets(item.optional_vars))
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            for handler in node.handlers:
                if handler.name:
                    names.add(handler.name)
        for sub in ast.walk(node):
            if isinstance(sub, ast.NamedExpr):
                names.update(_targets(sub.target))
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Name)
                and sub.func.id in ("globals", "vars", "setattr", "exec")
            ):
                dynamic.append((sub.lineno, f"'{sub.func.id}(...)'"))
        for attr in ("body", "orelse", "finalbody"):
            block = getattr(node, attr, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                _bindings(block, names, dynamic)
        for handler in getattr(node, "handlers", ()):
            _bindings(handler.body, names, dynamic)
        if isinstance(node, ast.Match):
            for case in node.cases:
                _bindings(case.body, names, dynamic)


def shown(path: Path, spec_dir: Path | None) -> str:
    """``path`` as the user sees it: relative to the current directory or the spec's folder."""
    path = path.absolute()
    for base in (Path.cwd(), spec_dir.absolute() if spec_dir is not None else None):
        if base is None:
            continue
        try:
            return path.relative_to(base).as_posix()
        except ValueError:
            continue
    return str(path)


def _read(path: Path, state: _Search) -> _Module | str:
    """The bindings of the source at ``path``, or a problem (a located error is recorded)."""
    where = shown(path, state.spec_dir)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"cannot read {where}: {exc.strerror or exc}"
    state.sha256[path] = hashlib.sha256(data).hexdigest()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return _located(state, where, line, col, f"not {exc.encoding} text ({exc.reason})")
    except (SyntaxError, LookupError) as exc:
        return _located(state, where, 1, 1, f"bad encoding declaration: {exc}")
    try:
        tree = ast.parse(text, filename=where)
    except SyntaxError as exc:
        return _located(
            state, where, exc.lineno or 1, exc.offset or 1, f"invalid Python: {exc.msg}"
        )
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. a NUL byte
        return _located(state, where, 1, 1, f"invalid Python: {exc}")
    names: set[str] = set()
    dynamic: list[tuple[int, str]] = []
    _bindings(tree.body, names, dynamic)
    return _Module(frozenset(names), tuple(dynamic))


def _located(state: _Search, where: str, line: int, col: int, message: str) -> str:
    diagnostic = Diagnostic(Location(where, line, col), None, message)
    if diagnostic not in state.diagnostics:
        state.diagnostics.append(diagnostic)
    return f"cannot read {where}:{line}:{col}: {message}"


def _locate(module: str, state: _Search) -> tuple[Path | None, str | None]:
    """The source file of ``module``, or None with why (None when simply not found)."""
    why = None
    for base, parts in _candidates(module, state):
        path, reason = _descend(base, parts)
        why = why or reason
        if path is not None:
            return path, why
    return None, why


def module_file(module: str) -> Path | None:
    """The source file ``module`` resolves to in the current search, or None."""
    state = _search.get() or _Search(None)
    if module not in state.located:
        state.located[module] = _locate(module, state)
    return state.located[module][0]


def sources_read() -> dict[str, str]:
    """Each module looked up so far in the current search -> the SHA-256 of its source file as
    read (modules that were not found, or whose file could not be read, are left out)."""
    state = _search.get() or _Search(None)
    return {
        module: state.sha256[path]
        for module, (path, _) in state.located.items()
        if path is not None and path in state.sha256
    }


def find_function(module: str, function: str) -> str | None:
    """None when ``module`` binds ``function`` at module level, else what is wrong."""
    state = _search.get() or _Search(None)
    if module not in state.located:
        state.located[module] = _locate(module, state)
    path, why = state.located[module]
    if path is None:
        if why is not None:
            return (
                f"module '{module}' {why}" if why.startswith("is ") else f"module '{module}': {why}"
            )
        return f"module '{module}' not found"
    found = state.modules.get(path)
    if found is None:
        found = state.modules[path] = _read(path, state)
    if isinstance(found, str):
        return f"module '{module}': {found}"
    if function in found.names:
        return None
    where = shown(path, state.spec_dir)
    if found.dynamic:
        line, what = found.dynamic[0]
        return (
            f"module '{module}' binds no '{function}' that can be found without running it "
            f"({what} at {where}:{line}); {EXPLICIT}"
        )
    return f"module '{module}' defines no '{function}'{did_you_mean(function, sorted(found.names))}"
