"""Formatted files taken from the output folder instead of from ruff (Note [format cache] in
codegen/emit/format_cache.py) are the bytes ruff would write: whatever changes, or is damaged,
is formatted again, and a run always writes what a run into an empty folder writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from specs import BASE

from codegen import cli
from codegen.emit import digest, format_cache, private
from codegen.emit.format import RUFF_FORMAT, Formatter

LAUNCH = "def l2norm_fwd(x, eps):\n    ...\n\n\ndef l2norm_bwd(grad_y, x, rstd):\n    ...\n"


def _spec() -> str:
    """BASE with its launchers in the project's package, and a second operator like the first."""
    spec = BASE.replace("attnops_kernels.l2norm.triton:", "mykernels.launch:")
    head, _, op = spec.partition("  l2norm:\n")
    second = op.replace("doc: Normalize x.", "doc: Normalize x, the second way.")
    return f"{head}  l2norm:\n{op}  l2norm_b:\n{second}"


@pytest.fixture(autouse=True)
def private_folder(tmp_path: Path, monkeypatch) -> Path:
    """This user's private folder (its key, the locks), made afresh for each test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / private.NAME


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "mykernels").mkdir(parents=True)
    (project / "mykernels" / "__init__.py").write_text("")
    (project / "mykernels" / "launch.py").write_text(LAUNCH)
    (project / "ops.yaml").write_text(_spec())
    return project


@pytest.fixture
def formatted(monkeypatch) -> list[str]:
    """Every file handed to ruff, in the order the runs hand them over."""
    seen: list[str] = []
    start = Formatter._start

    def recording(self: Formatter) -> None:
        seen.extend(self._pending)
        start(self)

    monkeypatch.setattr(Formatter, "_start", recording)
    return seen


def _run(project: Path, *extra: str, out: Path | None = None) -> int:
    out = out or project / "generated"
    return cli.main(
        ["regenerate", "--spec", str(project / "ops.yaml"), "--out", str(out), "-q", *extra]
    )


def _tree(folder: Path) -> dict[str, bytes]:
    """The output: every file but the caches'."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and digest.CACHE not in p.parts and "__pycache__" not in p.parts
    }


def _fresh(project: Path) -> dict[str, bytes]:
    """What a regenerate into an empty folder writes: nothing there to take from."""
    out = project.parent / "fresh"
    assert not out.exists()
    assert _run(project, out=out) == 0
    tree = _tree(out)
    shutil.rmtree(out)
    return tree


def _edit_spec(project: Path) -> None:
    """Change the second operator's doc, again at every call."""
    spec = project / "ops.yaml"
    spec.write_text(spec.read_text().replace("the second way", "the second way, edited"))


def _python(tree: dict[str, bytes]) -> set[str]:
    return {rel for rel in tree if rel.endswith(".py")}


def test_a_rerun_formats_exactly_the_files_whose_rendering_changed(project, formatted):
    out = project / "generated"
    assert _run(project) == 0
    before = _tree(out)
    assert set(formatted) == _python(before)  # the first run has nothing to take
    assert (out / format_cache.RECORD).is_file()
    formatted.clear()
    _edit_spec(project)
    assert _run(project) == 0
    after = _tree(out)
    changed = {rel for rel in _python(after) if after[rel] != before.get(rel)}
    assert changed and "demo/l2norm_b.py" in changed
    assert set(formatted) == changed
    assert after == _fresh(project)


def test_a_hand_edited_file_is_formatted_again_and_restored(project, formatted):
    out = project / "generated"
    assert _run(project) == 0
    target = out / "demo" / "l2norm.py"
    written = target.read_text()
    # Still valid Python that ruff leaves as it is: only the recorded SHA-256 tells it apart.
    target.write_text(written + "EDITED = 1\n")
    formatted.clear()
    assert _run(project) == 0
    assert target.read_text() == written
    assert formatted == ["demo/l2norm.py"]


def _swap_formatted(lines: list[str]) -> list[str]:
    entries = [line.split(" ", 2) for line in lines[2:]]
    hashes = [formatted for _, formatted, _ in entries]
    hashes = hashes[1:] + hashes[:1]
    return lines[:2] + [f"{r} {f} {rel}" for (r, _, rel), f in zip(entries, hashes, strict=True)]


DAMAGE = {
    "garbage": lambda lines: ["\x00\ufffd garbage"] * 3,
    "truncated": lambda lines: lines[: len(lines) // 2] + [lines[len(lines) // 2][:40]],
    "no key": lambda lines: lines[:1] + lines[2:],
    "another key": lambda lines: [lines[0], lines[1].replace("ruff", "ruff 0.0.1"), *lines[2:]],
    "formatted hashes swapped": _swap_formatted,
    "rendered hashes swapped": lambda lines: [
        " ".join([f, r, rel]) for r, f, rel in (line.split(" ", 2) for line in lines[2:])
    ],
    "empty": lambda lines: [],
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_record_costs_time_never_bytes(project, formatted, damage):
    out = project / "generated"
    assert _run(project) == 0
    record = out / format_cache.RECORD
    lines = record.read_text().splitlines()[:-1]
    # Signed again with this user's key: the damage is what the other checks must catch (a
    # record whose signature fails is no record: tests/test_output_safety.py).
    record.write_text(private.signed(private.key(), "\n".join(DAMAGE[damage](lines)) + "\n"))
    _edit_spec(project)
    formatted.clear()
    assert _run(project) == 0
    assert _tree(out) == _fresh(project)
    assert set(formatted) <= _python(_tree(out))
    # The run recorded afresh: the next one takes every file it does not change from the record.
    _edit_spec(project)
    formatted.clear()
    assert _run(project) == 0
    assert "demo/l2norm_b.py" in formatted and "demo/l2norm.py" not in formatted


def test_another_ruff_takes_nothing_from_the_record(project, formatted, monkeypatch):
    out = project / "generated"
    assert _run(project) == 0
    (out / digest.RECORD).unlink()  # no no-op shortcut: the generator runs
    formatted.clear()
    key = format_cache.ruff_key()
    monkeypatch.setattr(format_cache, "ruff_key", lambda: key.replace("ruff ", "ruff 99."))
    assert _run(project) == 0
    assert set(formatted) == _python(_tree(out))


def test_the_key_names_the_ruff_and_every_argument():
    key = format_cache.ruff_key()
    assert key is not None and "ruff 0." in key
    assert all(argument in key for argument in RUFF_FORMAT)


def test_check_takes_nothing_from_the_record_and_writes_nothing(project, formatted):
    out = project / "generated"
    assert _run(project) == 0
    records = {rel: (out / rel).read_bytes() for rel in (digest.RECORD, format_cache.RECORD)}
    formatted.clear()
    assert _run(project, "--check") == 0
    assert set(formatted) == _python(_tree(out))  # every file formatted: no cache is trusted
    target = out / "tests" / "test_l2norm.py"
    target.write_text(target.read_text() + "EDITED = 1\n")
    assert _run(project, "--check") == 1
    assert {rel: (out / rel).read_bytes() for rel in records} == records
