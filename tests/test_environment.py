"""What is missing from the environment is named as such: by the generator (exit 4, not a bug
in the generator) and by the operators (no GPU driver and no interpreter, or no numpy for the
interpreter), each with what to install or set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codegen import cli

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, env: dict[str, str] | None = None, cwd: Path = ROOT):
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True
    )


def _regenerate_without(module: str, out: Path):
    # ``sys.modules[name] = None`` makes importing ``name`` fail as if it were not installed.
    return _python(
        f"import sys; sys.modules[{module!r}] = None\n"
        "from codegen.cli import main\n"
        f"sys.exit(main(['regenerate', '--out', {str(out)!r}]))"
    )


@pytest.mark.parametrize("module", ["torch", "yaml", "jinja2", "ruff"])
def test_a_missing_generator_dependency_is_named_and_exits_4(tmp_path, module):
    result = _regenerate_without(module, tmp_path / "out")
    assert result.returncode == cli.EXIT_ENVIRONMENT == 4, result.stderr
    assert "bug in the generator" not in result.stderr
    assert result.stderr.startswith(
        f"error: the generator cannot run: {sys.executable} cannot import "
    )
    missing = {"torch": "torch", "yaml": "PyYAML", "jinja2": "Jinja2", "ruff": "ruff"}[module]
    assert f"cannot import {missing};" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_module_missing_below_a_dependency_is_named_too(tmp_path):
    # Jinja2 is there but its own dependency is not: found only when rendering imports it.
    result = _regenerate_without("markupsafe", tmp_path / "out")
    assert result.returncode == 4, result.stderr
    assert "cannot import markupsafe;" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_module_of_the_generator_itself_is_still_a_bug():
    error = ModuleNotFoundError("No module named 'codegen.gone'", name="codegen.gone")
    assert not cli._foreign(error)
    assert cli._foreign(ModuleNotFoundError("No module named 'yaml'", name="yaml"))


CALL = """
import torch, attnops
try:
    attnops.l2norm(torch.randn(2, 8))
except Exception as exc:
    print(type(exc).__name__, exc)
else:
    print("ran")
"""


def _env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(changes)
    return env


def test_a_cpu_call_without_the_interpreter_says_to_set_triton_interpret():
    # This machine has no GPU: Triton has no active driver (tests/conftest.py sets the
    # interpreter for this process only).
    result = _python(CALL, _env())
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip()
    assert out.startswith("RuntimeError Triton has no active driver here"), out
    assert "cannot run on cpu tensors: set TRITON_INTERPRET=1" in out
    assert "active drivers" not in out  # Triton's own message is not what the caller sees


def test_a_cpu_call_under_the_interpreter_without_numpy_says_to_install_it():
    code = "import sys; sys.modules['numpy'] = None\n" + CALL
    result = _python(code, _env(TRITON_INTERPRET="1"))
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip()
    assert out.startswith(
        "ModuleNotFoundError loading the launcher attnops_kernels.l2norm.triton:l2norm_fwd: "
        "TRITON_INTERPRET=1 runs Triton kernels through Triton's interpreter, which needs numpy"
    ), out


def test_the_kernels_import_without_numpy_when_not_interpreted():
    # Triton's interpreter (and numpy) is imported only under TRITON_INTERPRET=1: a GPU machine
    # with torch and triton only imports every launcher module.
    modules = sorted(
        f"attnops_kernels.{p.parent.name}.triton" for p in (ROOT / "kernels").glob("*/triton.py")
    )
    assert "attnops_kernels.gate.triton" in modules
    code = (
        "import importlib, sys; sys.modules['numpy'] = None\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print('imported', 'triton.runtime.interpreter' in sys.modules)"
    )
    result = _python(code, _env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported False"
