"""load -> build -> resolve -> validate -> view -> render, all pure; the CLI adds the writer."""

from __future__ import annotations

from pathlib import Path

from .emit.format_cache import FormatCache
from .emit.render import render
from .resolve.resolved import ResolvedOp, resolve
from .resolve.sources import searching, sources_read
from .resolve.validate import validate
from .spec.build import build
from .spec.errors import Errors
from .spec.load import load_spec
from .spec.model import Spec


def analyse(
    text: str, path: str, check_imports: bool = True, sources: dict[str, str] | None = None
) -> tuple[Spec, tuple[ResolvedOp, ...]]:
    """Load, build, resolve and validate a spec; raises SpecError listing every problem.

    ``sources``, when given, receives each launcher or reference module that was read, with the
    SHA-256 of its source (for the manifest's digest, Note [no-op digest] in emit/digest.py).
    """
    errors = Errors()
    root = load_spec(text, path, errors)
    # A value the loader refused (a bad tag, a date) is read as missing by the later stages;
    # what they would say about it at the same place is a consequence, not a second problem.
    loaded = len(errors.items)
    refused = {d.loc for d in errors.items}
    spec = build(root, path, errors)
    ops: tuple[ResolvedOp, ...] = ()
    if spec is not None:
        # Ops that failed to build are left out; the rest are still resolved and validated so
        # that one run reports every problem.
        ops = tuple(resolve(spec, op) for op in spec.ops)
        # Launchers are looked up beside the spec too; unreadable launcher files are reported
        # at their own file:line:col (Note [static lookup] in resolve/sources.py).
        with searching(Path(path).parent) as unreadable:
            validate(ops, errors, check_imports=check_imports)
            if sources is not None:
                sources.update(sources_read())
        errors.items.extend(unreadable)
    if refused:
        later = [d for d in errors.items[loaded:] if d.loc not in refused]
        errors.items[loaded:] = later
    errors.raise_if_any()
    return spec, ops


def parse(text: str, path: str, check_imports: bool = True) -> Spec:
    return analyse(text, path, check_imports)[0]


def generate(
    text: str,
    path: str,
    spec_name: str,
    check_imports: bool = True,
    sources: dict[str, str] | None = None,
    cache: FormatCache | None = None,
) -> dict[str, str]:
    """Every generated file's path and content; ``cache`` as for ``render``."""
    spec, ops = analyse(text, path, check_imports, sources)
    return render(spec, ops, spec_name, cache)
