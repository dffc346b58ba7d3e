"""CMake: the default target generates the committed tree into the build tree, reruns when a file
the generator read changes, and names a Python that cannot run the generator at configure time."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.emit.digest import CACHE

ROOT = Path(__file__).resolve().parent.parent
CMAKE = shutil.which("cmake")
pytestmark = pytest.mark.skipif(CMAKE is None, reason="cmake is not installed on this machine")
GENERATING = "Generating the operator layer"


def _tree(path: Path) -> dict[str, bytes]:
    return {
        p.relative_to(path).as_posix(): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and CACHE not in p.parts
    }


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CMAKE, *args], capture_output=True, text=True)


def _configure(source: Path, build: Path, *options: str, python: str = sys.executable):
    return _run("-S", str(source), "-B", str(build), f"-DPython3_EXECUTABLE={python}", *options)


def _script(path: Path, options: str) -> Path:
    """An executable that runs this Python with ``options``."""
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" {options} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _source(tmp_path: Path) -> Path:
    """A copy of the generator, its templates, the spec and the committed output, to edit."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("CMakeLists.txt", "ops.yaml", "pyproject.toml"):
        shutil.copy(ROOT / name, source / name)
    for name in ("codegen", "templates", "generated"):
        ignore = shutil.ignore_patterns("__pycache__", CACHE)
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    return source


@pytest.mark.slow
def test_the_default_target_generates_and_regenerates_when_an_input_changes(tmp_path):
    source, build = _source(tmp_path), tmp_path / "build"
    configured = _configure(source, build)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert not (build / "generated").exists()  # configuring generates nothing
    built = _run("--build", str(build))
    assert built.returncode == 0, built.stdout + built.stderr
    assert GENERATING in built.stdout
    assert _tree(build / "generated") == _tree(ROOT / "generated")

    # The rule names every file the generator read.
    depfile = (build / "attnops-generated.stamp.d").read_text()
    for path in [source / "ops.yaml", source / "pyproject.toml"]:
        assert f"  {path.resolve()}" in depfile, path
    for folder in (source / "codegen", source / "templates"):
        for path in folder.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert f"  {path.resolve()}" in depfile, path
    for launcher in ("l2norm/triton.py", "l2norm/reference.py", "chunk_gla/triton.py"):
        assert f"/kernels/{launcher} \\" in depfile, launcher

    check = _run("--build", str(build), "--target", "check_generated")
    assert check.returncode == 0, check.stdout + check.stderr

    again = _run("--build", str(build))
    assert again.returncode == 0 and GENERATING not in again.stdout, again.stdout

    # A file in a subpackage of codegen/ (copied into the output as _layout.py).
    layout = source / "codegen" / "runtime" / "layout.py"
    layout.write_text(layout.read_text() + "\n# edited after the first build\n")
    rebuilt = _run("--build", str(build))
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert GENERATING in rebuilt.stdout
    assert "# edited after the first build" in (build / "generated/attnops/_layout.py").read_text()

    # The committed tree was not regenerated after the edit: check_generated says so.
    check = _run("--build", str(build), "--target", "check_generated")
    assert check.returncode != 0
    assert "generated: 1 file(s) differ, 0 stale" in check.stderr, check.stdout + check.stderr
    assert "+++ b/attnops/_layout.py" in check.stdout, check.stdout


@pytest.mark.slow
def test_a_bad_spec_fails_the_build_with_the_generators_message(tmp_path):
    spec = tmp_path / "ops.yaml"
    spec.write_text((ROOT / "ops.yaml").read_text().replace("version: 1", "version: 9", 1))
    build = tmp_path / "build"
    configured = _configure(ROOT, build, f"-DATTNOPS_SPEC={spec}")
    assert configured.returncode == 0, configured.stdout + configured.stderr
    built = _run("--build", str(build))
    assert built.returncode != 0
    assert "unsupported spec version 9" in built.stdout + built.stderr
    assert not (build / "attnops-generated.stamp").exists()


def test_a_python_without_the_generators_dependencies_is_named_at_configure_time(tmp_path):
    # This Python without its site-packages: no torch, PyYAML, Jinja2 or ruff.
    python = _script(tmp_path / "python", "-S")
    result = _configure(ROOT, tmp_path / "build", python=str(python))
    assert result.returncode != 0
    err = " ".join(result.stderr.split())
    assert f"attnops: {python} cannot run the generator (exit 4)" in err, err
    assert "cannot import torch, PyYAML, Jinja2, ruff" in err, err
    assert "bug in the generator" not in err


def test_a_missing_python_is_named_in_one_error(tmp_path):
    result = _configure(ROOT, tmp_path / "build", python=str(tmp_path / "no-python"))
    assert result.returncode != 0
    err = " ".join(result.stderr.split())
    assert "attnops: no Python 3.10 or newer to run the generator" in err, err
    assert f"'{tmp_path / 'no-python'}'" in err


def test_the_checkouts_venv_is_the_default_python(tmp_path):
    # Without -DPython3_EXECUTABLE, a .venv beside CMakeLists.txt runs the generator.
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(ROOT / "CMakeLists.txt", source)
    shutil.copytree(ROOT / "codegen", source / "codegen")
    (source / ".venv" / "bin").mkdir(parents=True)
    _script(source / ".venv" / "bin" / "python", "")
    result = _run("-S", str(source), "-B", str(tmp_path / "build"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"attnops: generator Python {source}/.venv/bin/python" in result.stdout
