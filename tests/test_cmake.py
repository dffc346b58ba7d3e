"""Configure-time generation through CMake produces the committed tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.emit.digest import CACHE

ROOT = Path(__file__).resolve().parent.parent


def _tree(path: Path) -> dict[str, bytes]:
    return {
        p.relative_to(path).as_posix(): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and CACHE not in p.parts
    }


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed on this machine")
def test_cmake_configure_generates_the_committed_tree(tmp_path):
    build = tmp_path / "build"
    result = subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build), f"-DPython3_EXECUTABLE={sys.executable}"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert _tree(build / "generated") == _tree(ROOT / "generated")
    check = subprocess.run(
        ["cmake", "--build", str(build), "--target", "check_generated"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed on this machine")
def test_cmake_configure_fails_on_a_bad_spec(tmp_path):
    spec = tmp_path / "ops.yaml"
    spec.write_text((ROOT / "ops.yaml").read_text().replace("version: 1", "version: 9"))
    result = subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(tmp_path / "build"),
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DATTNOPS_SPEC={spec}",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "unsupported spec version 9" in result.stderr
