"""The generator's shape: a one-way pipeline of stages, and classes small enough to read."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
CODEGEN = ROOT / "codegen"
KERNELS = ROOT / "kernels"
# The generated package loads the kernels; the kernels never load it back, so they work under
# whatever package name a project generates into.
GENERATED = "attnops"
# Each stage may import itself and the stages before it, never a later one.
STAGES = ["spec", "resolve", "views", "emit"]
# Copied into generated packages: they import nothing of the generator.
ISOLATED = ["runtime"]
MAX_CLASS_LINES = 300


def _modules():
    for path in sorted(CODEGEN.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported_stages(path: Path, tree: ast.Module) -> set[str]:
    here = path.relative_to(CODEGEN).parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "codegen" and len(parts) > 1:
                    found.add(parts[1])
                continue
            base = list(here[:-1])[: len(here) - node.level]
            target = base + (node.module.split(".") if node.module else [])
            if target:
                found.add(target[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "codegen" and len(parts) > 1:
                    found.add(parts[1])
    return found


@pytest.mark.parametrize("path, tree", list(_modules()), ids=lambda v: getattr(v, "name", ""))
def test_no_stage_imports_a_later_one(path, tree):
    stage = path.relative_to(CODEGEN).parts[0]
    imported = _imported_stages(path, tree) & set(STAGES + ISOLATED)
    if stage in ISOLATED:
        assert not imported, f"{path.name} imports {sorted(imported)}"
    elif stage in STAGES:
        later = {s for s in imported if STAGES.index(s) > STAGES.index(stage)} | (
            imported & set(ISOLATED)
        )
        assert not later, f"{stage}/{path.name} imports later stages {sorted(later)}"


def test_no_class_is_longer_than_a_sitting():
    long = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    long.append(f"{path.relative_to(CODEGEN)}::{node.name} ({lines} lines)")
    assert not long, long


def _module_name(root: Path, package: str, path: Path) -> tuple[str, list[str]]:
    """The dotted name of ``path`` below ``root`` (imported as ``package``) and its package's."""
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), parts
    return ".".join(parts), parts[:-1]


def _imports(tree: ast.Module, package: list[str]) -> Iterator[tuple[ast.stmt, str]]:
    """Every module name an import statement names (``from m import x`` gives ``m`` and
    ``m.x``), relative ones resolved against ``package``; '' for one climbing above the root."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level > len(package):
                yield node, ""
                continue
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + (node.module.split(".") if node.module else []))
            yield node, module
            for alias in node.names:
                yield node, f"{module}.{alias.name}"


def _kernel_imports_of_generated(root: Path, package: str) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        _, pkg = _module_name(root, package, path)
        for node, name in _imports(ast.parse(path.read_text(encoding="utf-8")), pkg):
            if name == "" or name == GENERATED or name.startswith(GENERATED + "."):
                where = f"{path.relative_to(root.parent)}:{node.lineno}"
                found.append(f"{where}: {ast.unparse(node)}")
    return sorted(set(found))


def test_kernels_do_not_import_the_generated_package():
    found = _kernel_imports_of_generated(KERNELS, "attnops_kernels")
    assert not found, "kernels import the generated package:\n" + "\n".join(found)


def _import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module → the modules of the same tree it imports (at any depth, TYPE_CHECKING too)."""
    trees = {}
    for path in sorted(root.rglob("*.py")):
        name, pkg = _module_name(root, package, path)
        trees[name] = (ast.parse(path.read_text(encoding="utf-8")), pkg)
    return {
        name: {m for _, m in _imports(tree, pkg) if m in trees and m != name}
        for name, (tree, pkg) in trees.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_codegen_imports_have_no_cycle():
    cycle = _cycle(_import_graph(CODEGEN, "codegen"))
    assert cycle is None, "import cycle in codegen/: " + " -> ".join(cycle)


def test_the_checks_find_what_they_guard(tmp_path):
    """Both rules fire on a tree that breaks them (so a pass above means something)."""
    (tmp_path / "k" / "sub").mkdir(parents=True)
    (tmp_path / "k" / "__init__.py").write_text("")
    (tmp_path / "k" / "sub" / "__init__.py").write_text("from ... import attnops\n")
    (tmp_path / "k" / "a.py").write_text("import attnops._layout\nfrom .sub import x\n")
    (tmp_path / "k" / "b.py").write_text("from attnops import _layout\n")
    found = _kernel_imports_of_generated(tmp_path / "k", "pkg")
    assert [f.split(": ")[0] for f in found] == ["k/a.py:1", "k/b.py:1", "k/sub/__init__.py:1"]
    (tmp_path / "k" / "c.py").write_text("if 0:\n    from .d import y\n")
    (tmp_path / "k" / "d.py").write_text("from . import e\n")
    (tmp_path / "k" / "e.py").write_text("from .c import z\n")
    assert _cycle(_import_graph(tmp_path / "k", "pkg")) == ["pkg.c", "pkg.d", "pkg.e", "pkg.c"]


def _benchmark_paths(tree: ast.Module) -> list[str]:
    """Where a module names a script under benchmarks/: a path joined with ``/ "benchmarks"``,
    a ``"benchmarks/....py"`` string, or an import of a benchmark module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if any(
                isinstance(s, ast.Constant) and s.value == "benchmarks"
                for s in (node.left, node.right)
            ):
                found.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"(\./)?benchmarks/\S+\.py", node.value):
                found.append(node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            if any(n == "benchmarks" or n.startswith("benchmarks.") for n in names):
                found.append(node.lineno)
    return found


def test_tests_do_not_run_benchmark_scripts():
    """What a test checks lives in tests/ (or kernels/), never in a benchmark script."""
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in _benchmark_paths(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, f"tests that name a benchmark script: {found}"
    for text in ('ROOT / "benchmarks" / "x.py"', '"benchmarks/x.py"', "from benchmarks import x"):
        assert _benchmark_paths(ast.parse(text)) == [1], text


TEMPLATES = ROOT / "templates"
# A branch deeper than this belongs in a view record (a kind rendered by its own macro).
MAX_TEMPLATE_DEPTH = 3
# Every module of codegen/, the runtime copied into generated packages (codegen/runtime/) too.
MAX_MODULE_LINES = 800


def _template_depth(source: str) -> int:
    """The deepest nesting of ``{% if %}`` and ``{% for %}`` blocks, from jinja2's own parse."""
    from jinja2 import nodes

    from codegen.emit.render import environment

    def depth(node: nodes.Node) -> int:
        if isinstance(node, nodes.If):  # its elif branches stand at its own level
            branches = [node.body, node.else_, *(e.body for e in node.elif_)]
            return 1 + max((depth(c) for b in branches for c in b), default=0)
        own = 1 if isinstance(node, nodes.For) else 0
        return own + max((depth(child) for child in node.iter_child_nodes()), default=0)

    return depth(environment().parse(source))


@pytest.mark.parametrize(
    "path", sorted(TEMPLATES.rglob("*.jinja")), ids=lambda p: p.relative_to(TEMPLATES).as_posix()
)
def test_no_template_nests_deeper_than_three_blocks(path):
    found = _template_depth(path.read_text(encoding="utf-8"))
    assert found <= MAX_TEMPLATE_DEPTH, f"{path.name}: if/for blocks nested {found} deep"


def test_the_depth_counts_ifs_and_fors_not_expressions():
    three = "{% for a in x %}{% if a %}{% for b in a %}{{ b if b else 0 }}{% endfor %}{% endif %}"
    three += "{% endfor %}"
    assert _template_depth(three) == 3
    assert _template_depth("{% if x %}" + three + "{% endif %}") == 4
    assert _template_depth("{% macro m() %}{% if x %}" + three + "{% endif %}{% endmacro %}") == 4
    elifs = "{% if x %}{% elif y %}{% if z %}1{% endif %}{% elif w %}{% else %}{% endif %}"
    assert _template_depth(elifs) == 2


def _long_modules(root: Path) -> list[str]:
    """``path (n lines)`` of each module below ``root`` longer than MAX_MODULE_LINES."""
    return [
        f"{path.relative_to(root).as_posix()} ({n} lines)"
        for path in sorted(root.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]


def test_no_generator_or_runtime_module_is_longer_than_a_sitting():
    long = _long_modules(CODEGEN)
    assert not long, long


def test_the_length_check_reads_the_runtime_too(tmp_path):
    """A runtime module is held to the limit like the generator's own (a pass above means it)."""
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "testing.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "emit.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert _long_modules(tmp_path) == [f"runtime/testing.py ({MAX_MODULE_LINES + 1} lines)"]


@pytest.mark.parametrize(
    "top, folder", [("op.py.jinja", "op"), ("test_op.py.jinja", "tests")], ids=["op", "tests"]
)
def test_each_generated_section_is_one_partial(top, folder):
    """op.py.jinja and test_op.py.jinja only include the partials of their folder (templates/op/,
    templates/tests/), each once, in module order; each partial renders the record of its view
    module (codegen/views/op/, codegen/views/tests/)."""
    text = (TEMPLATES / top).read_text(encoding="utf-8")
    body = re.sub(r"{#.*?#}", "", text, flags=re.S)
    included = re.findall(rf'{{% include "{folder}/(\w+)\.py\.jinja" %}}', body)
    assert included and body.split() == [
        part for name in included for part in f'{{% include "{folder}/{name}.py.jinja" %}}'.split()
    ], f"{top} holds more than includes of {folder}/"
    partials = sorted(
        p.name.removesuffix(".py.jinja") for p in (TEMPLATES / folder).glob("*.py.jinja")
    )
    assert sorted(included) == partials and len(set(included)) == len(included)
    views = {p.stem for p in (CODEGEN / "views" / folder).glob("*.py")}
    assert set(included) <= views, f"sections without a view module: {set(included) - views}"
