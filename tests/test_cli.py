"""Exit statuses of the command line, and internal errors reported as bugs in one line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from specs import BASE

from codegen import cli
from codegen.emit import render

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "ops.yaml").write_text(BASE)
    return tmp_path


def _run(project: Path, *extra: str) -> int:
    return cli.main(["regenerate", "--spec", str(project / "ops.yaml"), "-q", *extra])


def _one_bug_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("internal error: this is a bug in the generator")
    return lines[0]


def test_a_crashing_view_exits_3_naming_the_operator(project, monkeypatch, capsys):
    def broken(r):
        raise KeyError("no such record")

    monkeypatch.setattr(render, "op_view", broken)
    assert _run(project) == cli.EXIT_INTERNAL
    line = _one_bug_line(capsys)
    assert "while rendering operator 'l2norm'" in line
    assert "KeyError" in line and "no such record" in line
    assert not (project / "generated").exists()


def test_a_crashing_test_view_exits_3_in_check_mode(project, monkeypatch, capsys):
    monkeypatch.setattr(render, "tests_view", lambda *a: 1 / 0)
    assert _run(project, "--check") == cli.EXIT_INTERNAL
    assert "operator 'l2norm'" in _one_bug_line(capsys)


def test_a_template_producing_invalid_code_exits_3(project, tmp_path, monkeypatch, capsys):
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    op = templates / "op.py.jinja"
    op.write_text(op.read_text() + "\ndef broken(:\n")
    monkeypatch.setattr(render, "template_dir", lambda: templates)
    assert _run(project) == cli.EXIT_INTERNAL
    line = _one_bug_line(capsys)
    assert "while rendering operator 'l2norm'" in line
    assert "does not compile" in line and "demo/l2norm.py" in line
    assert not (project / "generated").exists()


def test_a_failure_outside_any_operator_is_still_a_bug(project, monkeypatch, capsys):
    def broken(*args):
        raise RuntimeError("multi\nline")

    monkeypatch.setattr(render, "package_view", broken)
    assert _run(project) == cli.EXIT_INTERNAL
    line = _one_bug_line(capsys)
    assert "rendering operator" not in line and line.endswith("RuntimeError: multi line")


def test_exit_statuses_0_1_2(project, capsys):
    assert _run(project) == cli.EXIT_OK
    assert _run(project, "--check") == cli.EXIT_OK
    (project / "generated" / "demo" / "l2norm.py").write_text("# edited\n")
    assert _run(project, "--check") == cli.EXIT_DRIFT
    capsys.readouterr()
    (project / "ops.yaml").write_text(BASE.replace("version: 1", "version: 2"))
    assert _run(project) == cli.EXIT_SPEC
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith(f"{project / 'ops.yaml'}:1:10: error:")


def test_an_unwritable_output_exits_3_without_a_traceback(project, capsys):
    (project / "generated").write_text("a file where the output folder should be\n")
    assert _run(project) == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "cannot write the output" in err and "Traceback" not in err


def test_help_lists_exit_status_3():
    result = subprocess.run(
        [sys.executable, "-m", "codegen", "regenerate", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert "3  the generator failed: a bug in the generator" in result.stdout


@pytest.mark.parametrize("argv", [[], ["regenerate"]])
def test_help_opens_with_one_paragraph_of_its_own(argv, capsys):
    """Each --help opens with its own summary paragraph, not one description glued to another."""
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    paragraphs = out.split("\n\n")
    assert paragraphs[0].startswith("usage: python -m codegen")
    summary = " ".join(paragraphs[1].split())
    assert summary.endswith("."), summary
    # One sentence: nothing ends a sentence before the last character.
    assert not re.search(r"[.!?] +[A-Z]", summary), summary
    assert "exit status:" in out
