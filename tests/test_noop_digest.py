"""A regenerate that would change nothing writes nothing and skips generating (Note [no-op digest]
in codegen/emit/digest.py); anything that would change the output still regenerates."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from specs import BASE

from codegen import cli, pipeline
from codegen.emit import digest
from codegen.emit.writer import MANIFEST

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = "def l2norm_fwd(x, eps):\n    ...\n\n\ndef l2norm_bwd(grad_y, x, rstd):\n    ...\n"


def _project(tmp_path: Path) -> Path:
    """BASE with launchers in the project's own package, so a test can edit them."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "ops.yaml").write_text(
        BASE.replace("attnops_kernels.l2norm.triton:", "mykernels.launch:")
    )
    (tmp_path / "mykernels").mkdir()
    (tmp_path / "mykernels" / "__init__.py").write_text("")
    (tmp_path / "mykernels" / "launch.py").write_text(LAUNCH)
    return tmp_path


def _run(project: Path, *extra: str) -> int:
    return cli.main(["regenerate", "--spec", str(project / "ops.yaml"), *extra])


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder`` (the digest's record too): its bytes and its mtime."""
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(autouse=True)
def private_folder(tmp_path: Path, monkeypatch) -> None:
    """This user's private folder (the key that signs the record), made afresh for each test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def generated(tmp_path: Path, capsys) -> Path:
    project = _project(tmp_path)
    assert _run(project, "-q") == 0
    capsys.readouterr()
    return project


@pytest.fixture
def no_generation(monkeypatch):
    def generate(*args, **kwargs):
        raise AssertionError("the generator ran although nothing changed")

    monkeypatch.setattr(pipeline, "generate", generate)


def test_a_noop_rerun_touches_no_file_and_does_not_generate(generated, no_generation, capsys):
    out = generated / "generated"
    before = _state(out)
    assert (out / digest.RECORD).is_file()
    assert _run(generated) == 0
    assert _state(out) == before  # bytes and mtimes
    n = sum(not rel.startswith(f"{digest.CACHE}/") for rel in before)  # the files, the manifest
    assert capsys.readouterr().out.strip() == f"{out}: 0 written, {n} unchanged, 0 removed"


def test_check_never_takes_the_shortcut(generated, monkeypatch, capsys):
    out = generated / "generated"
    before = _state(out)
    calls = []
    real = pipeline.generate
    monkeypatch.setattr(pipeline, "generate", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert _run(generated, "--check") == 0
    assert calls == [1]  # rendered and compared, whatever the record says
    n = sum(not rel.startswith(f"{digest.CACHE}/") for rel in before)
    assert capsys.readouterr().out.strip() == f"{out}: {n} file(s) up to date"
    assert _state(out) == before


def test_the_full_run_reports_a_noop_the_same_way(generated, capsys):
    out = generated / "generated"
    shutil.rmtree(out / digest.CACHE)
    before = _state(out)
    assert _run(generated, "--check") == 0
    checked = capsys.readouterr().out
    assert _state(out) == before  # --check writes nothing, not even the record
    assert _run(generated) == 0
    written = capsys.readouterr().out
    assert (out / digest.RECORD).is_file()
    assert _run(generated, "--check") == 0
    assert capsys.readouterr().out == checked
    assert _run(generated) == 0
    assert capsys.readouterr().out == written


def test_the_record_ignores_itself_in_git(generated):
    assert (generated / "generated" / digest.CACHE / ".gitignore").read_text().endswith("\n*\n")


def test_a_deleted_generated_file_is_written_again(generated):
    target = generated / "generated" / "demo" / "l2norm.py"
    content = target.read_bytes()
    target.unlink()
    assert _run(generated, "--check", "-q") == 1
    assert not target.exists()
    assert _run(generated, "-q") == 0
    assert target.read_bytes() == content


def test_a_hand_edited_generated_file_is_reported_and_restored(generated, capsys):
    target = generated / "generated" / "tests" / "test_l2norm.py"
    content = target.read_text()
    target.write_text(content + "# edited\n")
    assert _run(generated, "--check") == 1
    assert "\n-# edited\n" in capsys.readouterr().out
    assert target.read_text() == content + "# edited\n"
    assert _run(generated, "-q") == 0
    assert target.read_text() == content


def test_an_edited_manifest_regenerates(generated, capsys):
    manifest = generated / "generated" / MANIFEST
    manifest.write_text(manifest.read_text() + "demo/old.py\n")
    assert _run(generated, "--check") == 1
    assert "--- a/.codegen-manifest" in capsys.readouterr().out


def test_a_changed_spec_regenerates(generated):
    spec = generated / "ops.yaml"
    spec.write_text(spec.read_text().replace("doc: Normalize x.", "doc: Normalize x, again."))
    assert _run(generated, "-q") == 0
    assert "Normalize x, again." in (generated / "generated" / "demo" / "l2norm.py").read_text()


def test_a_spec_edit_that_changes_no_output_is_still_generated(generated, monkeypatch):
    spec = generated / "ops.yaml"
    spec.write_text(spec.read_text() + "# a comment\n")
    calls = []
    real = pipeline.generate
    monkeypatch.setattr(pipeline, "generate", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert _run(generated, "-q") == 0
    assert calls == [1]


def test_an_edited_launcher_is_read_again(generated):
    launch = generated / "mykernels" / "launch.py"
    launch.write_text(LAUNCH.replace("def l2norm_bwd", "def l2norm_backward"))
    assert _run(generated, "-q") == 2  # the spec names a launcher that is gone


def test_a_launcher_shadowed_by_another_file_is_read_again(generated, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere" / "mykernels"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    (other / "launch.py").write_text("def l2norm_fwd(x, eps): ...\n")
    monkeypatch.syspath_prepend(str(other.parent))  # searched before the spec's folder
    assert _run(generated, "-q") == 2


def test_a_spec_shown_under_another_name_regenerates(generated):
    shutil.copy(generated / "ops.yaml", generated / "other.yaml")
    out = generated / "generated"
    args = ["regenerate", "--spec", str(generated / "other.yaml"), "--out", str(out), "-q"]
    assert cli.main(args) == 0
    assert "from other.yaml" in (out / "demo" / "l2norm.py").read_text()


def test_other_dependency_versions_change_the_digest(monkeypatch):
    before = digest.inputs(b"spec", "ops.yaml")
    real = digest.metadata.version
    monkeypatch.setattr(
        digest.metadata, "version", lambda name: "9.9" if name == "ruff" else real(name)
    )
    assert digest.inputs(b"spec", "ops.yaml") != before


def _copy_generator(tmp_path: Path) -> Path:
    """The generator's package and templates, as a checkout of its own."""
    gen = tmp_path / "gen"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "codegen", gen / "codegen", ignore=ignore)
    shutil.copytree(ROOT / "templates", gen / "templates", ignore=ignore)
    return gen


def _cli(gen: Path, project: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "codegen", "regenerate", "--spec", str(project / "ops.yaml")],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(gen)},
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "rel, old, new, expect",
    [
        (
            "templates/op/imports.py.jinja",
            '"""{{ op.summary',
            '# edited\n"""{{ op.summary',
            "# edited",
        ),
        ("codegen/emit/render.py", "do not edit;", "do not edit (really);", "(really)"),
        ("codegen/runtime/runtime.py", '"""', '"""Edited. ', '"""Edited. '),
    ],
    ids=["template", "generator module", "runtime module"],
)
def test_an_edited_generator_regenerates(tmp_path, rel, old, new, expect):
    gen = _copy_generator(tmp_path)
    project = _project(tmp_path / "project")
    assert _cli(gen, project).returncode == 0
    assert "0 written" in _cli(gen, project).stdout
    path = gen / rel
    assert path.read_text().count(old) >= 1
    path.write_text(path.read_text().replace(old, new, 1))
    result = _cli(gen, project)
    assert result.returncode == 0, result.stderr
    assert "0 written" not in result.stdout
    written = [
        p for p in (project / "generated").rglob("*.py") if expect in p.read_text(encoding="utf-8")
    ]
    assert written, result.stdout
