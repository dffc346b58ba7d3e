"""The wheel holds every package: setup.py discovers them instead of a hand-written list."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _setup_module():
    spec = importlib.util.spec_from_file_location("attnops_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() runs only as __main__
    return module


def test_every_kernel_folder_and_generator_subpackage_is_a_package():
    packages, package_dir = _setup_module().discover()
    for folder in sorted((ROOT / "kernels").iterdir()):
        if folder.is_dir() and any(folder.glob("*.py")):
            assert f"attnops_kernels.{folder.name}" in packages, folder
    for init in (ROOT / "codegen").rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        assert ".".join(rel.parts) in packages, rel
    assert {"attnops", "attnops_kernels", "codegen", "codegen.templates"} <= set(packages)
    assert package_dir["attnops_kernels"] == "kernels"
    assert package_dir["codegen.templates"] == "templates"


def test_a_new_kernel_folder_is_found_and_one_without_init_stops_the_build(tmp_path):
    setup = _setup_module()
    for name in ("codegen", "templates", "generated/attnops"):
        (tmp_path / name).mkdir(parents=True)
    shutil.copytree(
        ROOT / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "kernels" / "newop").mkdir()
    (tmp_path / "kernels" / "newop" / "__init__.py").write_text('"""New op."""\n')
    (tmp_path / "kernels" / "newop" / "triton.py").write_text("")
    packages, _ = setup.discover(tmp_path)
    assert "attnops_kernels.newop" in packages
    (tmp_path / "kernels" / "newop" / "__init__.py").unlink()
    with pytest.raises(SystemExit, match=r"kernels/newop holds Python files but no __init__.py"):
        setup.discover(tmp_path)
