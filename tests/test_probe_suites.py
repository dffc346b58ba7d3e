"""Every schema construct the generator accepts, proven by a probe operator's whole generated suite.

Generation alone proves nothing: a generated test that calls an operator the way its schema does
not allow (keyword-only arguments passed by position, a result counted that the schema does not
return) fails only when it runs. ``tests/probes/ops.yaml`` declares one small operator per
construct, around plain-PyTorch launchers (``tests/probes/probekern.py``); this test generates
them with the real CLI into a temp folder and runs every generated test of every probe.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.runtime.conftest import SLOW_REASON, full_run
from tests.specs import regenerate_project

ROOT = Path(__file__).resolve().parent.parent
PROBES = Path(__file__).resolve().parent / "probes"


@pytest.fixture(scope="module")
def probe_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("probes")
    files = {name: (PROBES / name).read_text() for name in ("ops.yaml", "probekern.py")}
    return regenerate_project(root, files)


def run_suites(root: Path, full: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "generated")])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"]
        + (["--full"] if full else [])
        + [str(root / "generated" / "tests")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


def test_every_probe_suite_passes(probe_project, request):
    # The generated suites' full matrix under --full, their default one otherwise.
    result = run_suites(probe_project, full_run(request.config))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    passed = set(re.findall(r"^PASSED \S*?(test_\w+)\.py::", result.stdout, flags=re.M))
    # Every probe's file ran and passed tests (a missing file would pass vacuously).
    spec = (probe_project / "ops.yaml").read_text()
    ops = re.findall(r"^  (\w+):$", spec, flags=re.M)
    assert ops and {f"test_{op}" for op in ops} <= passed, (ops, passed)
    skipped = re.findall(r"^SKIPPED \[\d+\] (\S+?):\d+: (.*)$", result.stdout, flags=re.M)
    # Only the CUDA-only tests may skip on a CPU machine, and the slow ones by default.
    for where, reason in skipped:
        allowed = reason == SLOW_REASON and not full_run(request.config)
        assert allowed or "CUDA" in reason or "cuda" in reason, (where, reason)


def _generated_modules(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*.py") if not p.name.startswith("_") or p.name == "__init__.py"
    )


def test_argument_names_refused_are_exactly_those_generated_code_needs(probe_project):
    """Note [library names]: an argument may take any name that generated code does not read
    itself. Every builtin the generated modules and tests call must be in GENERATED_BUILTINS,
    and every underscore name they use must be one that check_argument_name refuses."""
    import ast
    import builtins

    from codegen.resolve.validate.schema import runtime_helpers
    from codegen.spec.names import GENERATED_BUILTINS, check_argument_name

    ops = re.findall(r"^  (\w+):$", (ROOT / "ops.yaml").read_text(), flags=re.M)
    ops += re.findall(r"^  (\w+):$", (probe_project / "ops.yaml").read_text(), flags=re.M)
    used, internal = set(), set()
    for path in _generated_modules(ROOT / "generated") + _generated_modules(
        probe_project / "generated"
    ):
        tree = ast.parse(path.read_text())
        # Names a file binds itself (parameters, assignments) are not the builtins they shadow.
        bound = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
        bound |= {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else None
            if name in dir(builtins) and name not in bound and not name.startswith("__"):
                used.add(name)
            elif name and name.startswith("_") and not name.startswith("__"):
                internal.add(name)
    assert used - GENERATED_BUILTINS == set(), (
        "generated code calls builtins an argument may shadow"
    )
    import torch

    declared = set()  # the specs' own argument names
    for spec in (ROOT / "ops.yaml", probe_project / "ops.yaml"):
        for text in re.findall(r"schema: [\"'](\(.*\).*)[\"']$", spec.read_text(), flags=re.M):
            declared |= {a.name for a in torch._C.parse_schema("f" + text).arguments}
    assert "_x" in declared
    helpers = runtime_helpers()
    for name in sorted(internal - declared):
        assert any(check_argument_name(name, "argument", op, helpers) for op in ops), name
