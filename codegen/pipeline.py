"""load -> model -> validate -> view -> render, all pure; the CLI adds the writer."""

from __future__ import annotations

from .emit.render import render
from .resolve.validate import validate
from .spec.errors import Errors
from .spec.load import load_spec
from .spec.model import Spec, build


def parse(text: str, path: str, check_imports: bool = True) -> Spec:
    """Load, build and validate a spec; raises SpecError listing every problem."""
    errors = Errors()
    root = load_spec(text, path, errors)
    spec = build(root, path, errors)
    if spec is not None:
        # Ops that failed to build are left out; the rest are still validated so that one run
        # reports every problem.
        validate(spec, errors, check_imports=check_imports)
    errors.raise_if_any()
    return spec


def generate(text: str, path: str, spec_name: str, check_imports: bool = True) -> dict[str, str]:
    return render(parse(text, path, check_imports), spec_name)
