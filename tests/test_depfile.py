"""``--stamp``: the stamp and the Makefile rule naming what a regenerate read (Note [depfile]),
and the launchers found without an install (the pyproject's package folders)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import tomllib

from codegen import cli
from codegen.emit.depfile import rule
from codegen.resolve.sources import module_file, searching

ROOT = Path(__file__).resolve().parent.parent


def _deps(depfile: Path) -> tuple[str, list[str]]:
    target, _, rest = depfile.read_text().partition(":")
    return target, [line.strip().removesuffix("\\").strip() for line in rest.splitlines()[1:]]


def test_a_stamp_names_every_input_and_a_rerun_that_changes_nothing_names_the_same(tmp_path):
    out = tmp_path / "out"
    first, second = tmp_path / "first.stamp", tmp_path / "second.stamp"
    spec = ROOT / "ops.yaml"
    assert (
        cli.main(
            ["regenerate", "--spec", str(spec), "--out", str(out), "-q"] + ["--stamp", str(first)]
        )
        == 0
    )
    assert first.is_file()
    target, deps = _deps(Path(f"{first}.d"))
    assert target == str(first.resolve())
    assert str(spec) in deps and str(ROOT / "pyproject.toml") in deps
    assert str(ROOT / "templates" / "op.py.jinja") in deps
    assert str(ROOT / "templates" / "op" / "fakes.py.jinja") in deps
    assert str(ROOT / "codegen" / "emit" / "render.py") in deps
    for op in ("l2norm", "gate", "chunk_gla", "recurrent_gla_step", "block_mask_worklist"):
        assert str(ROOT / "kernels" / op / "triton.py") in deps, op
        assert str(ROOT / "kernels" / op / "reference.py") in deps, op
    # Nothing changed: the digest's record names the same launcher modules.
    assert (
        cli.main(
            ["regenerate", "--spec", str(spec), "--out", str(out), "-q"] + ["--stamp", str(second)]
        )
        == 0
    )
    assert _deps(Path(f"{second}.d"))[1] == deps


def test_drift_writes_no_stamp(tmp_path):
    out = tmp_path / "out"  # empty: --check finds every file missing
    stamp = tmp_path / "s"
    assert (
        cli.main(
            [
                "regenerate",
                "--spec",
                str(ROOT / "ops.yaml"),
                "--out",
                str(out),
                "--check",
                "-q",
                "--stamp",
                str(stamp),
            ]
        )
        == cli.EXIT_DRIFT
    )
    assert not stamp.exists() and not Path(f"{stamp}.d").exists()


def test_the_rule_quotes_what_make_would_read_otherwise():
    text = rule(Path("/b/s t"), [Path("/a b/c#d$e.py"), Path("/x.py")])
    assert text == "/b/s\\ t: \\\n  /a\\ b/c\\#d$$e.py \\\n  /x.py\n"


def _setup_module():
    spec = importlib.util.spec_from_file_location("attnops_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launchers_resolve_without_an_install(monkeypatch):
    # The pyproject's package folders are setup.py's, and they are how the generator finds the
    # launchers where the project is not installed (a wheel build's isolated environment).
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = _setup_module().ROOTS  # before this Python's site-packages leave sys.path
    editable = [p for p in sys.path if list(Path(p or ".").glob("__editable__*finder.py"))]
    for path in editable:
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p != path])
    with searching(ROOT):
        assert module_file("attnops_kernels.l2norm.triton") == ROOT / "kernels/l2norm/triton.py"
    assert table.get("package-dir") == roots
