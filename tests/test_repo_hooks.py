"""The repository marks generated files for forges, and its pre-commit hooks run real commands."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from codegen import cli
from codegen.emit.writer import read_manifest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"


def _attr(paths: list[str]) -> dict[str, str]:
    result = subprocess.run(
        ["git", "check-attr", "linguist-generated", "--", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = {}
    for line in result.stdout.splitlines():
        path, _, value = line.rsplit(": ", 2)
        found[path] = value
    return found


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_gitattributes_mark_every_generated_file_and_nothing_else():
    tracked = subprocess.run(
        ["git", "ls-files", "generated"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    listed = [f"generated/{rel}" for rel in read_manifest(GENERATED) or ()]
    on_disk = [
        p.relative_to(ROOT).as_posix()
        for p in GENERATED.rglob("*")
        if p.is_file() and not {"__pycache__", ".codegen-cache"} & set(p.parts)
    ]
    files = sorted(set(tracked) | set(listed) | set(on_disk))
    assert len(listed) >= 10 and "generated/.codegen-manifest" in files
    marked = _attr(files)
    assert {p for p, v in marked.items() if v != "true"} == set()
    others = ["ops.yaml", "codegen/cli.py", "kernels/l2norm/triton.py", "templates/op.py.jinja"]
    assert set(_attr(others).values()) == {"unspecified"}


def _hooks(name: str) -> list[dict]:
    data = yaml.safe_load((ROOT / name).read_text())
    if isinstance(data, dict):
        return [h for repo in data["repos"] for h in repo["hooks"]]
    return data


def _parses(hook: dict) -> None:
    argv = shlex.split(hook["entry"]) + list(hook.get("args", ()))
    assert argv[:3] == ["python", "-m", "codegen"]
    cli._parser().parse_args(argv[3:])  # exits on an unknown option


def test_the_local_hook_checks_generated_files_when_its_inputs_change():
    (hook,) = _hooks(".pre-commit-config.yaml")
    assert hook["entry"].startswith("python -m codegen regenerate --check")
    assert hook["pass_filenames"] is False
    _parses(hook)
    files = re.compile(hook["files"])
    for path in (
        "ops.yaml",
        "templates/op.py.jinja",
        "codegen/cli.py",
        "kernels/l2norm/triton.py",
        "generated/attnops/l2norm.py",
    ):
        assert files.search(path), path
    for path in (
        "README.md",
        "docs/spec.md",
        "tests/test_cli.py",
        "benchmarks/suite.sh",
        "ops.yaml.bak",
    ):
        assert not files.search(path), path


def test_the_exposed_hooks_are_valid_command_lines():
    hooks = {h["id"]: h for h in _hooks(".pre-commit-hooks.yaml")}
    assert set(hooks) == {"codegen-check", "codegen-bc-check"}
    for hook in hooks.values():
        _parses(hook)
        files = re.compile(hook["files"])
        assert files.search("ops.yaml") and files.search("ops/ops.yaml")
        assert not files.search("kernels/ops.yaml.bak")
