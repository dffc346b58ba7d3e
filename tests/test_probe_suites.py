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
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBES = Path(__file__).resolve().parent / "probes"


@pytest.fixture(scope="module")
def probe_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("probes")
    for name in ("ops.yaml", "probekern.py"):
        shutil.copy(PROBES / name, root / name)
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, "-m", "codegen", "regenerate", "--spec", str(root / "ops.yaml"), "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return root


def run_suites(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "generated")])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"]
        + [str(root / "generated" / "tests")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


def test_every_probe_suite_passes(probe_project):
    result = run_suites(probe_project)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    passed = set(re.findall(r"^PASSED \S*?(test_\w+)\.py::", result.stdout, flags=re.M))
    # Every probe's file ran and passed tests (a missing file would pass vacuously).
    spec = (probe_project / "ops.yaml").read_text()
    ops = re.findall(r"^  (\w+):$", spec, flags=re.M)
    assert ops and {f"test_{op}" for op in ops} <= passed, (ops, passed)
    skipped = re.findall(r"^SKIPPED \[\d+\] (\S+?):\d+: (.*)$", result.stdout, flags=re.M)
    # Only the CUDA-only tests may skip on a CPU machine.
    for where, reason in skipped:
        assert "CUDA" in reason or "cuda" in reason, (where, reason)
