"""Package discovery for the wheel and the editable install; the metadata is in pyproject.toml.

Three folders become three import packages under other names (``kernels/`` is
``attnops_kernels``, ``generated/attnops/`` is ``attnops``, ``templates/`` is
``codegen.templates``), which setuptools' ``packages.find`` cannot map, so the packages are
discovered here: every folder below a root that holds Python files is a subpackage. A folder
with Python files but no ``__init__.py`` stops the build instead of being left out of the wheel.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
# import name -> folder, relative to this file
ROOTS = {
    "codegen": "codegen",
    "codegen.templates": "templates",
    "attnops": "generated/attnops",
    "attnops_kernels": "kernels",
}


def _subpackages(name: str, folder: Path, root: Path) -> list[str]:
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_dir()):
        rel = path.relative_to(folder)
        if any(part == "__pycache__" or part.startswith(".") for part in rel.parts):
            continue  # bytecode caches, hidden folders
        if not any(path.glob("*.py")):
            continue
        if not (path / "__init__.py").is_file():
            raise SystemExit(
                f"setup.py: {path.relative_to(root)} holds Python files but no __init__.py; "
                "add one so that the wheel includes it"
            )
        found.append(".".join([name, *rel.parts]))
    return found


def discover(root: Path = HERE) -> tuple[list[str], dict[str, str]]:
    """The packages and their folders (relative to ``root``)."""
    packages, package_dir = [], {}
    for name, folder in ROOTS.items():
        packages.append(name)
        package_dir[name] = folder
        packages += [p for p in _subpackages(name, root / folder, root) if p not in ROOTS]
    return packages, package_dir


if __name__ == "__main__":
    PACKAGES, PACKAGE_DIR = discover()
    setup(packages=PACKAGES, package_dir=PACKAGE_DIR)
