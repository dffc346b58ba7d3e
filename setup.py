"""Package discovery and build-time generation for the wheel; the metadata is in pyproject.toml.

The wheel holds the operators only: ``attnops`` (the generated layer) and ``attnops_kernels``
(``kernels/``). Two folders become import packages under other names, which setuptools'
``packages.find`` cannot map, so the packages are discovered here: every folder below a root
that holds Python files is a subpackage. A folder with Python files but no ``__init__.py`` stops
the build instead of being left out of the wheel.

Note [generated at build time]: building the wheel runs the generator (``python -m codegen
regenerate``, from this source tree) into the build tree and packages that output as
``attnops``, never the committed ``generated/attnops``: the wheel always matches ``ops.yaml``,
the templates and the launchers it is built from, even where the committed tree was not
regenerated after an edit (the build then says which files differ). A spec the generator refuses
stops the build with the generator's messages. The generator itself (``codegen``) is not in the
wheel: it is a tool of this source tree, importable from a checkout and from an editable install
(``pip install -e '.[codegen]'``), which maps ``codegen`` too and generates nothing (it imports
the committed ``generated/attnops``, which ``python -m codegen regenerate`` keeps current).
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = Path(__file__).resolve().parent
# import name -> folder, relative to this file: what the wheel ships
ROOTS = {
    "attnops": "generated/attnops",
    "attnops_kernels": "kernels",
}
# Added by an editable install only (Note [generated at build time]).
GENERATOR = {"codegen": "codegen"}
# What the generator reads to produce ``attnops``.
SPEC = "ops.yaml"
PACKAGE = "attnops"
# Exit status of ``python -m codegen regenerate`` when its own dependencies are missing.
EXIT_ENVIRONMENT = 4


def _subpackages(name: str, folder: Path, root: Path) -> list[str]:
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_dir()):
        rel = path.relative_to(folder)
        if any(part == "__pycache__" or part.startswith(".") for part in rel.parts):
            continue  # bytecode caches, hidden folders (the generator's .codegen-cache)
        if not any(path.glob("*.py")):
            continue
        if not (path / "__init__.py").is_file():
            raise SystemExit(
                f"setup.py: {path.relative_to(root)} holds Python files but no __init__.py; "
                "add one so that the wheel includes it"
            )
        found.append(".".join([name, *rel.parts]))
    return found


def discover(root: Path = HERE, roots: dict[str, str] = ROOTS) -> tuple[list[str], dict[str, str]]:
    """The packages and their folders (relative to ``root``)."""
    packages, package_dir = [], {}
    for name, folder in roots.items():
        packages.append(name)
        package_dir[name] = folder
        packages += [p for p in _subpackages(name, root / folder, root) if p not in roots]
    return packages, package_dir


def generate(root: Path, out: Path) -> Path:
    """Run the generator of the source tree ``root`` on its spec into ``out``; the generated
    package's folder. Stops the build with the generator's own messages when it fails."""
    cmd = [sys.executable, "-m", "codegen", "regenerate", "--spec", SPEC, "--out", str(out)]
    result = subprocess.run([*cmd, "--quiet"], cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        hint = ""
        if result.returncode == EXIT_ENVIRONMENT:
            hint = (
                " Building the wheel runs the generator, which needs torch and the 'codegen' "
                "extra's packages in the building environment: build with "
                "--no-build-isolation from an environment that has them, or let pip install "
                "the build requirements."
            )
        raise SystemExit(
            f"setup.py: generating {PACKAGE} from {SPEC} failed (exit {result.returncode}).{hint}"
        )
    package = out / PACKAGE
    if not (package / "__init__.py").is_file():
        raise SystemExit(f"setup.py: {SPEC} does not generate a package named {PACKAGE!r}")
    return package


def differing(committed: Path, built: Path) -> list[str]:
    """Files of the generated package that differ between the committed tree and the build."""
    names = {
        p.relative_to(folder).as_posix()
        for folder in (committed, built)
        if folder.is_dir()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    return sorted(
        n
        for n in names
        if not (committed / n).is_file()
        or not (built / n).is_file()
        or not filecmp.cmp(committed / n, built / n, shallow=False)
    )


class BuildPy(build_py):
    """``build_py`` that packages a freshly generated ``attnops`` (Note [generated at build
    time]); an editable install's build generates nothing."""

    def run(self) -> None:
        if not self.editable_mode:
            build_temp = Path(self.get_finalized_command("build").build_temp)
            package = generate(HERE, (build_temp / "attnops-generated").resolve())
            stale = differing(HERE / ROOTS[PACKAGE], package)
            if stale:
                self.announce(
                    f"note: the committed {ROOTS[PACKAGE]} differs from what {SPEC} generates "
                    f"({', '.join(stale)}); the wheel ships the generated files. Run: python -m "
                    "codegen regenerate",
                    level=3,  # distutils' WARN: shown without --verbose
                )
            # A package that a build before this one left in the build tree holds modules the
            # spec may no longer produce.
            shutil.rmtree(Path(self.build_lib) / PACKAGE, ignore_errors=True)
            self.package_dir[PACKAGE] = os.path.relpath(package, HERE)
            found = _subpackages(PACKAGE, package, package.parent)
            self.packages = [
                p for p in self.packages if p != PACKAGE and not p.startswith(PACKAGE + ".")
            ] + [PACKAGE, *found]
        super().run()


class EditableWheel(editable_wheel):
    """An editable install maps the generator's package too."""

    def run(self) -> None:
        dist = self.distribution
        packages, package_dir = discover(HERE, GENERATOR)
        dist.packages = [*dist.packages, *(p for p in packages if p not in dist.packages)]
        dist.package_dir = {**dist.package_dir, **package_dir}
        super().run()


if __name__ == "__main__":
    PACKAGES, PACKAGE_DIR = discover()
    setup(
        packages=PACKAGES,
        package_dir=PACKAGE_DIR,
        cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel},
    )
