"""Runs into one output folder take turns (Note [one writer per folder] in codegen/cli.py), through
a lock file in this user's private folder that nothing can turn against the user."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from specs import BASE

from codegen import cli
from codegen.emit import private
from codegen.emit.writer import MANIFEST

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def private_folder(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cli.LOCK_TIMEOUT, raising=False)
    return tmp_path / "xdg" / private.NAME


def _start(spec: Path, out: Path, *extra: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "codegen", "regenerate", "--spec", str(spec), "--out", str(out)]
        + list(extra),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _spec(tmp_path: Path) -> Path:
    spec = tmp_path / "ops.yaml"
    spec.write_text(BASE)
    return spec


def test_a_run_waits_while_another_writes_the_same_folder(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "generated"
    with cli.output_lock(out):
        proc = _start(spec, out)
        # Long enough for an unserialized run to generate and write this one-operator spec.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None and not out.exists():
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        assert not out.exists(), "the run wrote while another held the folder"
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    # It said whom it waited for: this process, whose id the lock file holds.
    assert f"waiting for process {os.getpid()}, which is writing it" in err
    assert (out / MANIFEST).is_file()


def test_a_held_lock_is_waited_for_a_bounded_time(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "generated"
    with cli.output_lock(out):
        started = time.monotonic()
        proc = _start(spec, out, **{cli.LOCK_TIMEOUT: "1"})
        _, err = proc.communicate(timeout=120)
        waited = time.monotonic() - started
    assert proc.returncode == cli.EXIT_INTERNAL, err
    assert f"waiting for process {os.getpid()}" in err
    assert f"error: process {os.getpid()} still holds the output folder after 1 s" in err
    assert "Traceback" not in err and not out.exists()
    assert waited < 60


def test_check_and_other_folders_do_not_wait(tmp_path):
    spec = _spec(tmp_path)
    out, other = tmp_path / "generated", tmp_path / "other"
    assert cli.main(["regenerate", "--spec", str(spec), "--out", str(out), "-q"]) == 0
    with cli.output_lock(out):
        check = _start(spec, out, "--check")
        elsewhere = _start(spec, other)
        for proc in (check, elsewhere):
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
    assert (other / MANIFEST).is_file()


def test_the_lock_file_lives_in_the_private_folder(tmp_path, private_folder):
    out = tmp_path / "generated"
    path = Path(cli.lock_path(out))
    assert path.parent == private_folder
    assert private_folder.stat().st_mode & 0o777 == 0o700
    # One folder, one lock, however it is named.
    assert cli.lock_path(tmp_path / "x" / ".." / "generated") == str(path)
    assert cli.lock_path(tmp_path / "elsewhere") != str(path)
    with cli.output_lock(out):
        assert path.read_text() == f"{os.getpid()}\n"
        assert path.stat().st_mode & 0o777 == 0o600
    assert not out.exists()


def _locked_out(tmp_path: Path, capsys) -> tuple[int, str]:
    spec = _spec(tmp_path)
    code = cli.main(["regenerate", "--spec", str(spec), "--out", str(tmp_path / "generated")])
    return code, capsys.readouterr().err


def test_a_dangling_link_at_the_lock_path_creates_nothing(tmp_path, capsys):
    target = tmp_path / "victim" / "planted.lock"
    target.parent.mkdir()
    path = Path(cli.lock_path(tmp_path / "generated"))
    path.symlink_to(target)
    code, err = _locked_out(tmp_path, capsys)
    assert code == cli.EXIT_INTERNAL
    assert f"{path}: error: cannot open the lock of" in err and "symbolic link" in err
    assert not target.exists() and not os.listdir(target.parent)
    assert not (tmp_path / "generated").exists()


def test_a_folder_at_the_lock_path_is_an_error(tmp_path, capsys):
    path = Path(cli.lock_path(tmp_path / "generated"))
    path.mkdir()
    code, err = _locked_out(tmp_path, capsys)
    assert code == cli.EXIT_INTERNAL
    assert f"{path}: error: cannot open the lock of" in err and "it is a folder" in err
    assert "Traceback" not in err and not (tmp_path / "generated").exists()


def test_a_fifo_at_the_lock_path_is_an_error(tmp_path, capsys):
    path = Path(cli.lock_path(tmp_path / "generated"))
    os.mkfifo(path)
    code, err = _locked_out(tmp_path, capsys)
    assert code == cli.EXIT_INTERNAL
    assert f"{path}: error: the lock of" in err and "not a regular file" in err


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan"])
def test_a_bad_timeout_is_an_error(tmp_path, capsys, monkeypatch, value):
    monkeypatch.setenv(cli.LOCK_TIMEOUT, value)
    code, err = _locked_out(tmp_path, capsys)
    assert code == cli.EXIT_INTERNAL
    assert re.search(rf"error: {cli.LOCK_TIMEOUT}='{re.escape(value)}' is not a number", err)
