"""The user's private folder, which holds the lock files and the key that signs the caches (Note
[private folder] in codegen/emit/private.py): only a folder this user alone can write is used."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from specs import BASE

from codegen import cli
from codegen.emit import private

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def places(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """The preferred folder and the fallback in the temporary folder, both under ``tmp_path``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path / "xdg" / private.NAME, tmp_path / "tmp" / f"{private.NAME}-{os.getuid()}"


def test_the_folder_and_the_key_are_the_users_alone(places):
    preferred, _ = places
    path, _ = private.folder()
    assert Path(path) == preferred and preferred.stat().st_mode & 0o777 == 0o700
    key = private.key()
    assert len(key) == 32 and private.key() == key
    assert (preferred / private.KEY).stat().st_mode & 0o777 == 0o600
    other = subprocess.run(
        [sys.executable, "-c", "from codegen.emit import private; print(private.key().hex())"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert other.stdout.strip() == key.hex()  # one key for every run of this user


def test_signatures_verify_only_under_their_key():
    key, other = os.urandom(32), os.urandom(32)
    text = private.signed(key, "a\nb\n")
    assert private.verified(key, text) == "a\nb\n"
    assert private.verified(other, text) is None
    assert private.verified(key, text.replace("a", "c", 1)) is None
    assert private.verified(key, "a\nb\n") is None


def _unusable(preferred: Path, how: str, tmp_path: Path) -> None:
    if how == "a link":
        (tmp_path / "elsewhere").mkdir()
        preferred.parent.mkdir(parents=True)
        preferred.symlink_to(tmp_path / "elsewhere")
    elif how == "writable by others":
        preferred.mkdir(parents=True)
        preferred.chmod(0o777)
    else:
        if os.getuid() != 0:
            pytest.skip("only root can give a folder to another user")
        preferred.mkdir(parents=True)
        os.chown(preferred, 12345, 12345)


HOWS = ["a link", "writable by others", "another user's"]


@pytest.mark.parametrize("how", HOWS)
def test_a_folder_not_the_users_alone_is_not_used(places, tmp_path, how):
    preferred, fallback = places
    _unusable(preferred, how, tmp_path)
    path, _ = private.folder()
    assert Path(path) == fallback
    private.key()
    assert not (tmp_path / "elsewhere").exists() or not os.listdir(tmp_path / "elsewhere")
    assert not (preferred / private.KEY).exists() or preferred.is_symlink()


@pytest.mark.parametrize("how", HOWS)
def test_without_any_private_folder_regenerate_refuses_and_check_works(
    places, tmp_path, capsys, how
):
    preferred, fallback = places
    _unusable(preferred, how, tmp_path)
    _unusable(fallback, "writable by others", tmp_path)
    spec = tmp_path / "ops.yaml"
    spec.write_text(BASE)
    assert cli.main(["regenerate", "--spec", str(spec), "-q"]) == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "cannot lock the output folder: no folder only this user can write" in err
    assert str(preferred) in err and str(fallback) in err and "Traceback" not in err
    assert not (tmp_path / "generated").exists()
    assert cli.main(["regenerate", "--spec", str(spec), "--check", "-q"]) == cli.EXIT_DRIFT


def test_a_damaged_key_costs_the_caches_not_the_output(places, tmp_path, capsys):
    preferred, _ = places
    spec = tmp_path / "ops.yaml"
    spec.write_text(BASE)
    assert cli.main(["regenerate", "--spec", str(spec), "-q"]) == 0
    (preferred / private.KEY).write_text("not a key\n")
    private._keys.clear()  # as a new run finds it
    (tmp_path / "generated" / "demo" / "l2norm.py").write_text("# edited\n")
    assert cli.main(["regenerate", "--spec", str(spec), "-q"]) == 0
    err = capsys.readouterr().err
    assert "note: the caches are not used" in err and "its key is damaged" in err
    assert cli.main(["regenerate", "--spec", str(spec), "--check", "-q"]) == 0
