"""What a regenerate changes, per operator, for a reviewer: ``regenerate --summary``.

Note [summary from files]: both sides are read from generated files (what the output folder
holds, and what this run produces), parsed with ``ast`` and never imported, so the summary
compares like with like and needs no copy of the old spec. From an operator's module it reads the
registered schemas (``torch.library.define`` calls; for ``triton_op`` registrations, the
signature torch infers the schema from), and each name in ``__all__``: a function's signature, a
NamedTuple's fields. From its test module it reads the test functions and the module-level tables
the test cases are built from (samples, dtypes, configurations, ...): the entries added and
removed, and the tables whose other contents changed. Other files (the package's ``__init__``,
the copied runtime modules) are listed when they change. Operators, files, names and entries come
in sorted order, so the summary is the same for the same two trees.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

TESTS = "tests"


@dataclass(frozen=True, slots=True)
class OpModule:
    """The API of an operator's module."""

    schemas: tuple[tuple[str, str], ...] = ()  # (registered name, schema or inferred signature)
    functions: tuple[tuple[str, str], ...] = ()  # public functions: (name, signature)
    results: tuple[tuple[str, str], ...] = ()  # NamedTuples: (name, fields)


@dataclass(frozen=True, slots=True)
class TestsFile:
    tests: tuple[str, ...] = ()
    tables: tuple[tuple[str, tuple[str, ...] | None, str], ...] = ()  # name, keys, full text


@dataclass
class _Side:
    modules: dict[str, OpModule] = field(default_factory=dict)
    tests: dict[str, TestsFile] = field(default_factory=dict)


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _signature(fn: ast.FunctionDef) -> str:
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    return f"({ast.unparse(fn.args)}){returns}"


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def read_op_module(text: str) -> OpModule:
    tree = _parse(text)
    if tree is None:
        return OpModule(schemas=(("(module)", "does not parse"),))
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    schemas: list[tuple[str, str]] = []
    exported: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            func = ast.unparse(call.func)
            names = [_string(a) for a in call.args]
            if func.endswith("library.define") and len(names) >= 2 and None not in names[:2]:
                schemas.append((names[0], names[1]))
            elif func.endswith("register_triton_op") and len(call.args) >= 2 and names[0]:
                impl = defs.get(ast.unparse(call.args[1]))
                if isinstance(impl, ast.FunctionDef):
                    schemas.append((names[0], f"inferred from {_signature(impl)}"))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                exported = [s for s in map(_string, node.value.elts) if s is not None]
    functions, results = [], []
    for name in exported:
        node = defs.get(name)
        if isinstance(node, ast.FunctionDef):
            functions.append((name, _signature(node)))
        elif isinstance(node, ast.ClassDef):
            fields = [
                ast.unparse(s)
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            ]
            results.append((name, ", ".join(fields)))
    return OpModule(tuple(sorted(schemas)), tuple(sorted(functions)), tuple(sorted(results)))


def read_test_module(text: str) -> TestsFile:
    tree = _parse(text)
    if tree is None:
        return TestsFile(tables=(("(module)", None, "does not parse"),))
    tests = sorted(
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")
    )
    tables = []
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.isupper()
        ):
            continue
        value = node.value
        keys: tuple[str, ...] | None = None
        if isinstance(value, ast.Dict) and all(k is not None for k in value.keys):
            keys = tuple(ast.unparse(k) for k in value.keys)
        elif isinstance(value, (ast.Tuple, ast.List)):
            keys = tuple(ast.unparse(e) for e in value.elts)
        tables.append((node.targets[0].id, keys, ast.unparse(value)))
    return TestsFile(tuple(tests), tuple(sorted(tables, key=lambda t: t[0])))


def _op_of(rel: str) -> tuple[str, str] | None:
    """("module" | "tests", operator) for an operator's file, None for any other file."""
    path = PurePosixPath(rel)
    if path.suffix != ".py" or len(path.parts) != 2:
        return None
    if path.parts[0] == TESTS:
        return ("tests", path.stem[5:]) if path.stem.startswith("test_") else None
    return None if path.stem.startswith("_") else ("module", path.stem)


def _side(files: Mapping[str, str | None]) -> _Side:
    side = _Side()
    for rel, text in files.items():
        kind = _op_of(rel)
        if kind is None or text is None:
            continue
        if kind[0] == "module":
            side.modules[kind[1]] = read_op_module(text)
        else:
            side.tests[kind[1]] = read_test_module(text)
    return side


def _pairs(label: str, old, new) -> list[str]:
    """``- name: text`` / ``+ name: text`` lines for entries that differ, by name."""
    before, after = dict(old), dict(new)
    lines = []
    for name in sorted(set(before) | set(after)):
        if before.get(name) == after.get(name):
            continue
        lines.append(f"  {label} {name}")
        if name in before:
            lines.append(f"    - {before[name]}")
        if name in after:
            lines.append(f"    + {after[name]}")
    return lines


def _tests(rel: str, old: TestsFile | None, new: TestsFile | None) -> list[str]:
    old = old or TestsFile()
    new = new or TestsFile()
    if old == new:
        return []
    lines = [f"  tests {rel}: {len(old.tests)} -> {len(new.tests)} test functions"]
    lines += [f"    + {t}" for t in new.tests if t not in old.tests]
    lines += [f"    - {t}" for t in old.tests if t not in new.tests]
    before = {name: (keys, text) for name, keys, text in old.tables}
    after = {name: (keys, text) for name, keys, text in new.tables}
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            lines += _table(name, before.get(name), after.get(name))
    return lines


def _table(name: str, was, now) -> list[str]:
    """A changed table: its entries added (+), removed (-) and kept with other values (~)."""
    if was is None or now is None:
        return [f"    {name}: {'added' if was is None else 'removed'}"]
    (old_keys, old_text), (new_keys, new_text) = was, now
    if old_keys is None or new_keys is None:
        return [f"    {name}: changed"]
    lines = [f"    {name}:"]
    lines += [f"      + {k}" for k in new_keys if k not in old_keys]
    lines += [f"      - {k}" for k in old_keys if k not in new_keys]
    changed = _changed_entries(old_text, new_text)
    if changed:
        lines.append(f"      ~ {', '.join(changed)}")
    if len(lines) == 1:
        lines.append("      order changed")
    return lines


def _changed_entries(old_text: str, new_text: str) -> list[str]:
    """The keys of a dict table that both sides have, with different values."""
    old, new = ast.parse(old_text, mode="eval").body, ast.parse(new_text, mode="eval").body
    if not (isinstance(old, ast.Dict) and isinstance(new, ast.Dict)):
        return []
    was = {ast.unparse(k): ast.unparse(v) for k, v in zip(old.keys, old.values, strict=True)}
    now = {ast.unparse(k): ast.unparse(v) for k, v in zip(new.keys, new.values, strict=True)}
    return [k for k, v in now.items() if k in was and was[k] != v]


def summarize(old: Mapping[str, str | None], new: Mapping[str, str]) -> list[str]:
    """The summary's lines: ``old`` is what the output folder holds (None: absent), ``new`` what
    the run produces, both by path relative to the output folder."""
    before, after = _side(old), _side(new)
    ops = sorted(set(before.modules) | set(after.modules) | set(before.tests) | set(after.tests))
    lines: list[str] = []
    for op in ops:
        was, now = before.modules.get(op), after.modules.get(op)
        test_rel = f"{TESTS}/test_{op}.py"
        body: list[str] = []
        if was != now:
            was, now = was or OpModule(), now or OpModule()
            body += _pairs("schema", was.schemas, now.schemas)
            body += _pairs("public", was.functions, now.functions)
            body += _pairs("result", was.results, now.results)
        body += _tests(test_rel, before.tests.get(op), after.tests.get(op))
        if op not in after.modules and op in before.modules:
            status = "removed"
        elif op in after.modules and op not in before.modules:
            status = "added"
        elif body:
            status = "changed"
        else:
            status = None
        if status is None and any(old.get(rel) != new.get(rel) for rel in _files_of(op, old, new)):
            status = "changed (API and test lists unchanged)"
        if status is not None:
            lines.append(f"{op}: {status}")
            lines += body
    others = sorted(
        rel for rel in set(old) | set(new) if _op_of(rel) is None and old.get(rel) != new.get(rel)
    )
    for rel in others:
        what = "added" if old.get(rel) is None else "removed" if rel not in new else "changed"
        lines.append(f"{rel}: {what}")
    if not lines:
        lines.append("no generated file changes")
    return lines


def _files_of(op: str, *sides: Mapping[str, str | None]) -> list[str]:
    return sorted(
        {rel for side in sides for rel in side if (k := _op_of(rel)) is not None and k[1] == op}
    )
