"""Runs into one output folder take turns (Note [one writer per folder] in codegen/cli.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from specs import BASE

from codegen import cli
from codegen.emit.writer import MANIFEST

ROOT = Path(__file__).resolve().parent.parent


def _start(spec: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "codegen", "regenerate", "--spec", str(spec), "--out", str(out)]
        + list(extra),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_run_waits_while_another_writes_the_same_folder(tmp_path):
    spec = tmp_path / "ops.yaml"
    spec.write_text(BASE)
    out = tmp_path / "generated"
    with cli.output_lock(out, check=False):
        proc = _start(spec, out)
        # Long enough for an unserialized run to generate and write this one-operator spec.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None and not out.exists():
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        assert not out.exists(), "the run wrote while another held the folder"
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert (out / MANIFEST).is_file()


def test_check_and_other_folders_do_not_wait(tmp_path):
    spec = tmp_path / "ops.yaml"
    spec.write_text(BASE)
    out, other = tmp_path / "generated", tmp_path / "other"
    assert cli.main(["regenerate", "--spec", str(spec), "--out", str(out), "-q"]) == 0
    with cli.output_lock(out, check=False):
        check = _start(spec, out, "--check")
        elsewhere = _start(spec, other)
        for proc in (check, elsewhere):
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
    assert (other / MANIFEST).is_file()


def test_the_lock_file_lives_outside_the_output_folder(tmp_path):
    out = tmp_path / "generated"
    path = Path(cli.lock_path(out))
    assert tmp_path not in path.parents
    # One folder, one lock, however it is named.
    assert cli.lock_path(tmp_path / "x" / ".." / "generated") == str(path)
    assert cli.lock_path(tmp_path / "elsewhere") != str(path)
