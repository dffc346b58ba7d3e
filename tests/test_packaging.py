"""The wheel: every package discovered, attnops generated at build time, and nothing of the
generator, installed into a fresh environment with only its declared dependencies."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
# What a copy of the source tree leaves out: environments, caches, earlier builds.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".device",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".codegen-cache",
)


def _setup_module():
    spec = importlib.util.spec_from_file_location("attnops_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() runs only as __main__
    return module


def test_every_kernel_folder_is_a_package_and_the_generator_is_not_shipped():
    setup = _setup_module()
    packages, package_dir = setup.discover()
    for folder in sorted((ROOT / "kernels").iterdir()):
        if folder.is_dir() and any(folder.glob("*.py")):
            assert f"attnops_kernels.{folder.name}" in packages, folder
    assert {"attnops", "attnops_kernels"} <= set(packages)
    assert not [p for p in packages if p.partition(".")[0] not in ("attnops", "attnops_kernels")]
    assert package_dir == {"attnops": "generated/attnops", "attnops_kernels": "kernels"}
    # An editable install maps the generator, every subpackage of it.
    generator, _ = setup.discover(ROOT, setup.GENERATOR)
    for init in (ROOT / "codegen").rglob("__init__.py"):
        assert ".".join(init.parent.relative_to(ROOT).parts) in generator, init


def test_a_new_kernel_folder_is_found_and_one_without_init_stops_the_build(tmp_path):
    setup = _setup_module()
    (tmp_path / "generated" / "attnops").mkdir(parents=True)
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels", ignore=_NOT_SOURCE)
    (tmp_path / "kernels" / "newop").mkdir()
    (tmp_path / "kernels" / "newop" / "__init__.py").write_text('"""New op."""\n')
    (tmp_path / "kernels" / "newop" / "triton.py").write_text("")
    packages, _ = setup.discover(tmp_path)
    assert "attnops_kernels.newop" in packages
    (tmp_path / "kernels" / "newop" / "__init__.py").unlink()
    with pytest.raises(SystemExit, match=r"kernels/newop holds Python files but no __init__.py"):
        setup.discover(tmp_path)


def test_the_build_backend_asks_for_the_generator_only_for_a_wheel():
    sys.path.insert(0, str(ROOT / "_build"))
    try:
        import attnops_build
    finally:
        sys.path.remove(str(ROOT / "_build"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    codegen = [str(Requirement(r)) for r in project["optional-dependencies"]["codegen"]]
    generator = sorted(str(Requirement(r)) for r in attnops_build.GENERATOR_REQUIRES)
    assert generator == sorted([*codegen, "torch>=2.11"])
    assert not set(generator) & set(attnops_build.get_requires_for_build_editable())


def _wheel(source: Path, dist: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(dist), str(source)],
        capture_output=True,
        text=True,
    )


def _closure(requirements: list[str], extras: tuple[str, ...] = ()) -> set[str]:
    """The distributions (of this environment) that ``requirements`` pull, transitively."""
    seen: set[str] = set()
    todo = [(Requirement(r), extras) for r in requirements]
    while todo:
        req, chosen = todo.pop()
        env = [{"extra": e} for e in chosen or ("",)]
        if req.marker is not None and not any(req.marker.evaluate(e) for e in env):
            continue
        name = metadata.distribution(req.name).metadata["Name"]
        if name in seen:
            continue
        seen.add(name)
        todo += [(Requirement(r), tuple(req.extras)) for r in metadata.requires(name) or ()]
    return seen


def _site(dists: set[str], folder: Path) -> Path:
    """A folder of links to the top-level files of ``dists``: what pip would have installed."""
    folder.mkdir()
    for name in sorted(dists):
        for entry in metadata.distribution(name).files or ():
            top = entry.parts[0]
            src = Path(entry.locate()).resolve()
            if top == ".." or (folder / top).exists() or top.endswith(".pth"):
                continue
            while src.name != top:  # the entry's top-level file or folder
                src = src.parent
            (folder / top).symlink_to(src)
    return folder


CALL = """
import os, sys, torch
import attnops
assert attnops.__file__.startswith(sys.prefix), attnops.__file__
x = torch.randn(3, 5)
try:
    y = attnops.l2norm(x).y
except ModuleNotFoundError as exc:
    print("ERROR", exc)
    raise SystemExit(0)
expected = x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)
torch.testing.assert_close(y, expected)
loaded = sorted(m for m in ("codegen", "yaml", "jinja2", "ruff", "numpy") if m in sys.modules)
print("OK", loaded)
"""


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path  # of a fresh environment with the wheel and its declared dependencies only
    site_packages: Path
    runtime: list[str]  # the wheel's Requires-Dist without extras
    build_s: float
    install_s: float


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The wheel built from a copy of this tree whose spec was edited without regenerating,
    installed into a fresh environment that sees only its declared dependencies (linked from
    this environment, as pip would install them)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    spec = (source / "ops.yaml").read_text()
    assert spec.count("L2-normalize ``x``") == 1
    (source / "ops.yaml").write_text(spec.replace("L2-normalize ``x``", "Edited: normalize ``x``"))
    start = time.perf_counter()
    built = _wheel(source, tmp / "dist")
    build_s = time.perf_counter() - start
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("attnops-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        info = archive.read(f"{_dist_info(wheel)}/METADATA").decode()
    requires = Parser().parsestr(info).get_all("Requires-Dist")
    runtime = sorted(r for r in requires if "extra ==" not in r)

    start = time.perf_counter()
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site_packages = venv / "lib" / py / "site-packages"
    runtime_site = _site(_closure(runtime), tmp / "runtime")
    (site_packages / "runtime.pth").write_text(f"{runtime_site}\n")
    python = venv / "bin" / "python"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["--no-index", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    install_s = time.perf_counter() - start
    return Installed(wheel, python, site_packages, runtime, build_s, install_s)


def _dist_info(wheel: Path) -> str:
    return "-".join(wheel.name.split("-")[:2]) + ".dist-info"


@pytest.mark.slow
def test_the_wheel_holds_the_operators_generated_at_build_time_and_no_generator(installed):
    with zipfile.ZipFile(installed.wheel) as archive:
        names = archive.namelist()
        l2norm = archive.read("attnops/l2norm.py").decode()
        info = Parser().parsestr(archive.read(f"{_dist_info(installed.wheel)}/METADATA").decode())
    assert {n.split("/")[0] for n in names} == {
        "attnops",
        "attnops_kernels",
        _dist_info(installed.wheel),
    }
    assert "attnops/py.typed" in names
    for folder in (ROOT / "kernels").iterdir():
        if (folder / "triton.py").is_file():
            assert f"attnops_kernels/{folder.name}/triton.py" in names, folder.name
    # The spec's edit, which the committed tree does not have.
    assert "Edited: normalize ``x``" in l2norm
    assert "Edited" not in (ROOT / "generated/attnops/l2norm.py").read_text()
    assert installed.runtime == ["torch>=2.11", "triton>=3.6"]
    requires = info.get_all("Requires-Dist")
    assert [r for r in requires if 'extra == "interpreter"' in r] == [
        'numpy; extra == "interpreter"'
    ]
    print(
        f"wheel build {installed.build_s:.1f} s, environment and install {installed.install_s:.1f} s"
    )


@pytest.mark.slow
def test_the_installed_operators_run_on_cpu_with_their_dependencies_only(installed, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["TRITON_INTERPRET"] = "1"
    python = str(installed.python)
    run = subprocess.run(
        [python, "-c", CALL], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # The interpreter needs numpy, which only the interpreter extra brings.
    assert re.search(
        r"ERROR loading the launcher attnops_kernels\.l2norm\.triton:l2norm_fwd: "
        r"TRITON_INTERPRET=1 .* needs numpy",
        run.stdout,
    ), run.stdout
    numpy = _closure(["numpy"]) - _closure(installed.runtime)
    pth = installed.site_packages / "interpreter.pth"
    pth.write_text(f"{_site(numpy, tmp_path / 'numpy')}\n")
    try:
        run = subprocess.run(
            [python, "-c", CALL], cwd=tmp_path, env=env, capture_output=True, text=True
        )
    finally:
        pth.unlink()
    assert run.returncode == 0, run.stdout + run.stderr
    # Only the interpreter's numpy: nothing of the generator is imported, or importable.
    assert run.stdout.strip().splitlines()[-1] == "OK ['numpy']", run.stdout


# torch's own annotations take mypy about 20 s of CPU to analyse; what is checked here is the
# operators' (their py.typed and what they annotate), so torch is this stub, found first.
TORCH_STUB = """
from typing import Any

class Tensor: ...

def randn(*size: int) -> Tensor: ...
def __getattr__(name: str) -> Any: ...
"""
USER = """
import torch

import attnops

x = torch.randn(2, 3)
r = attnops.l2norm(x)
reveal_type(r.y)
attnops.l2norm(x).nope
"""


@pytest.mark.slow
def test_mypy_reads_the_installed_operators_types(installed, tmp_path):
    (tmp_path / "stubs" / "torch").mkdir(parents=True)
    (tmp_path / "stubs" / "torch" / "__init__.pyi").write_text(TORCH_STUB)
    (tmp_path / "user.py").write_text(USER)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", str(installed.python)]
        + ["--follow-imports=silent", "--no-error-summary", "--cache-dir", str(tmp_path / "c")]
        + ["user.py"],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(tmp_path / "stubs")},
        capture_output=True,
        text=True,
    )
    mypy_s = time.perf_counter() - start
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        'user.py:8: note: Revealed type is "torch.Tensor"',
        'user.py:9: error: "L2normOutput" has no attribute "nope"  [attr-defined]',
    ], result.stdout
    print(f"mypy {mypy_s:.1f} s")


@pytest.mark.slow
def test_a_spec_the_generator_refuses_stops_the_wheel_build(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    spec = (source / "ops.yaml").read_text()
    (source / "ops.yaml").write_text(spec.replace("version: 1", "version: 9", 1))
    built = _wheel(source, tmp_path / "dist")
    assert built.returncode != 0
    assert "unsupported spec version 9" in built.stdout + built.stderr
    assert "generating attnops from ops.yaml failed (exit 2)" in built.stdout + built.stderr
    assert not list(tmp_path.glob("dist/*.whl"))
