"""Launcher references are resolved from source files: nothing is imported, from any directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from specs import BASE

from codegen.resolve.sources import EXPLICIT, find_function, searching

ROOT = Path(__file__).resolve().parent.parent
BOOM = "raise RuntimeError('imported: generation must not run package code')\n"


def _tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


BINDINGS = """\
import os.path
import numpy as np_alias
from collections import OrderedDict as od, deque
def plain(): ...
async def coro(): ...
class Klass: ...
a = b = 1
(tup1, [tup2, *tup_rest]) = 1, [2, 3]
annotated: int = 3
declared_only: int
if os.name == "nt":
    in_if = 1
else:
    in_else = 2
try:
    from fast import in_try
except ImportError:
    in_except = None
finally:
    in_finally = 1
with open(__file__) as in_with:
    in_with_body = 1
for in_for in range(2):
    in_for_body = in_for
while False:
    in_while = 1
"""


@pytest.mark.parametrize(
    "name",
    [
        "os", "np_alias", "od", "deque", "plain", "coro", "Klass", "a", "b", "tup1", "tup2",
        "tup_rest", "annotated", "in_if", "in_else", "in_try", "in_except", "in_finally",
        "in_with", "in_with_body", "in_for", "in_for_body", "in_while",
    ],
)  # fmt: skip
def test_every_module_level_binding_form_counts(tmp_path, name):
    _tree(tmp_path, {"pkg/__init__.py": BOOM, "pkg/mod.py": BINDINGS})
    with searching(tmp_path):
        assert find_function("pkg.mod", name) is None
    assert "pkg" not in sys.modules


def test_missing_names_and_modules_are_reported(tmp_path):
    _tree(tmp_path, {"pkg/__init__.py": BOOM, "pkg/mod.py": BINDINGS})
    with searching(tmp_path):
        assert "defines no 'declared_only'" in find_function("pkg.mod", "declared_only")
        assert "did you mean 'plain'" in find_function("pkg.mod", "plian")
        assert "not found" in find_function("pkg.nope", "f")
        assert "not found" in find_function("nopkg.mod", "f")
        assert find_function("pkg", "RuntimeError") is not None  # __init__ binds nothing


@pytest.mark.parametrize(
    "source, what",
    [
        ("from .impl import *\n", "'from .impl import *' at pkg/mod.py:1"),
        ("for n in ('f', 'g'):\n    globals()[n] = print\n", "'globals(...)' at pkg/mod.py:2"),
        ("def __getattr__(name):\n    return print\n", "a module __getattr__ at pkg/mod.py:1"),
    ],
)
def test_dynamic_bindings_ask_for_an_explicit_one(tmp_path, monkeypatch, source, what):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, {"pkg/__init__.py": BOOM, "pkg/mod.py": source})
    with searching(tmp_path):
        problem = find_function("pkg.mod", "f")
    assert what in problem and EXPLICIT in problem, problem


def _project(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    spec = BASE.replace("attnops_kernels.l2norm.triton:", "mykernels.norm.launch:")
    _tree(tmp_path, {"ops.yaml": spec, **files})
    return tmp_path


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "codegen", "regenerate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


LAUNCH = "import triton\nfrom .impl import l2norm_fwd, l2norm_bwd\n"


def test_generation_imports_no_launcher_package_from_another_directory(tmp_path):
    project = _project(
        tmp_path / "project",
        {
            "mykernels/__init__.py": BOOM,
            "mykernels/norm/__init__.py": BOOM,
            "mykernels/norm/launch.py": LAUNCH,
        },
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _cli("--spec", str(project / "ops.yaml"), "-q", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert (project / "generated" / "demo" / "l2norm.py").is_file()


def test_a_syntax_error_in_a_launcher_is_located_in_that_file(tmp_path):
    project = _project(
        tmp_path, {"mykernels/__init__.py": BOOM, "mykernels/norm/launch.py": "x = 1\ndef f(:\n"}
    )
    result = _cli("-q", cwd=project)
    assert result.returncode == 2
    assert "mykernels/norm/launch.py:2:7: error: invalid Python: " in result.stderr.splitlines()[0]
    assert "Traceback" not in result.stderr
    assert not (project / "generated").exists()
    # From a directory the file is not under, the path is relative to the spec's folder.
    (tmp_path / "elsewhere").mkdir()
    result = _cli("--spec", str(project / "ops.yaml"), "-q", cwd=tmp_path / "elsewhere")
    assert result.returncode == 2
    assert result.stderr.startswith("mykernels/norm/launch.py:2:7: error:"), result.stderr


def test_a_launcher_that_is_not_utf8_is_located(tmp_path):
    project = _project(
        tmp_path, {"mykernels/__init__.py": "", "mykernels/norm/launch.py": b"x = 1\ny = '\xff'\n"}
    )
    result = _cli("-q", cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith("mykernels/norm/launch.py:2:6: error: not utf-8 text"), (
        result.stderr
    )


def test_editable_install_mappings_are_read_not_imported(tmp_path, monkeypatch):
    kernels = _tree(tmp_path / "src" / "kern", {"__init__.py": BOOM, "norm/launch.py": LAUNCH})
    site = tmp_path / "site"
    _tree(
        site,
        {
            "__editable___demo_0_1_finder.py": BOOM
            + f"MAPPING: dict[str, str] = {{'mykernels': {str(kernels)!r}}}\n"
        },
    )
    monkeypatch.syspath_prepend(str(site))
    with searching(None):
        assert find_function("mykernels.norm.launch", "l2norm_fwd") is None
        assert find_function("mykernels", "anything") is not None


def test_pyproject_package_dir_beside_the_spec(tmp_path):
    _tree(
        tmp_path,
        {
            "pyproject.toml": '[tool.setuptools]\npackage-dir = {"mykernels" = "kernels"}\n',
            "kernels/__init__.py": BOOM,
            "kernels/norm/launch.py": LAUNCH,
        },
    )
    with searching(tmp_path):
        if sys.version_info >= (3, 11):
            assert find_function("mykernels.norm.launch", "l2norm_bwd") is None


def test_the_shipped_spec_generates_without_triton(tmp_path):
    shadow = _tree(tmp_path / "shadow", {"triton/__init__.py": "raise ImportError('no triton')\n"})
    shutil.copy(ROOT / "ops.yaml", tmp_path / "ops.yaml")
    result = _cli(
        "--spec", str(tmp_path / "ops.yaml"), "-q", cwd=tmp_path, env={"PYTHONPATH": str(shadow)}
    )
    assert result.returncode == 0, result.stderr
    assert "no triton" not in result.stderr
