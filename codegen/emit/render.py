"""Rendering: view models through Jinja templates into file contents (no filesystem writes)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources

import jinja2

from ..resolve.resolved import ResolvedOp
from ..spec.errors import Diagnostic, Location, SpecError
from ..spec.model import Spec
from ..spec.names import AMBIGUOUS
from ..spec.shapes import EvaluationError
from ..views.bench_module import bench_view
from ..views.op.module import op_view, package_view
from ..views.reference_page import page_view
from ..views.tests.module import tests_view
from ..views.warmup_module import warmup_view
from .format import Formatter, GeneratorBug
from .format_cache import FormatCache
from .literals import docstring, py
from .locations import template_dir
from .markdown import md_code, md_text
from .marker import MARKER


def header(spec_name: str) -> str:
    return (
        f"# {MARKER} by codegen from {spec_name} — do not edit; run: python -m codegen regenerate"
    )


def _lint_directive(r: ResolvedOp) -> str:
    """A file-level ruff directive for an operator whose schema names an argument ``l``, ``O``
    or ``I`` (as kernel libraries name matrix sizes): the generated code keeps the schema's
    names, which ruff's E741 would flag wherever they are bound."""
    stages = (r.op.forward, r.op.backward, r.op.arity_pair)
    names = {a.name for s in stages if s is not None for a in s.schema.arguments}
    return "\n# ruff: noqa: E741" if names & AMBIGUOUS else ""


# Output path (relative to the output dir) -> module of codegen.runtime copied there.
STATIC = {
    "{package}/_runtime.py": "runtime",
    "{package}/_layout.py": "layout",
    "{package}/_testing.py": "testing",
    "{package}/_testing_cases.py": "testing_cases",
    "{package}/_testing_edges.py": "testing_edges",
    "{package}/_testing_backends.py": "testing_backends",
    "{package}/_bench.py": "bench",
    "{package}/_warmup.py": "warmup",
    "tests/conftest.py": "conftest",
}


def static_source(module: str) -> str:
    """The source of ``codegen.runtime.<module>``, read as package data (no import)."""
    return resources.files("codegen.runtime").joinpath(f"{module}.py").read_text(encoding="utf-8")


def environment() -> jinja2.Environment:
    """The one template environment: strict, and the only place filters are registered.

    One is made per render, and its templates do not change while it lives: each is compiled
    once and, unlike under ``auto_reload``, not looked up on disk again at every import.
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        auto_reload=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["py"] = py
    env.filters["docstring"] = docstring
    env.filters["md_code"] = md_code
    env.filters["md_text"] = md_text
    return env


@contextmanager
def rendering(op: str | None, loc: Location | None = None) -> Iterator[None]:
    """Any failure inside is a GeneratorBug that names ``op`` (the spec was already valid).

    Except a test sample whose sizes divide by zero, which only rendering the tests evaluates:
    that is reported at the operator (``loc``) as a spec error.
    """
    try:
        yield
    except EvaluationError as exc:
        if loc is None:
            raise GeneratorBug(f"{type(exc).__name__}: {exc}", op=op) from exc
        raise SpecError([Diagnostic(loc, op, f"a test sample cannot be sized: {exc}")]) from None
    except GeneratorBug as exc:
        exc.op = exc.op or op
        raise
    except SpecError:
        raise
    except Exception as exc:
        raise GeneratorBug(f"{type(exc).__name__}: {exc}", op=op) from exc


def render(
    spec: Spec, ops: tuple[ResolvedOp, ...], spec_name: str, cache: FormatCache | None = None
) -> dict[str, str]:
    """Map each output path (relative to the output dir) to its content, in path order.

    ``cache`` offers formatted files of the last regenerate (Note [format cache]).
    """
    owner: dict[str, str] = {}  # generated file -> the operator it belongs to
    try:
        with Formatter(cache=cache) as formatter:
            _render_into(formatter, owner, spec, ops, spec_name)
            return formatter.result()
    except GeneratorBug as exc:
        exc.op = exc.op or owner.get(exc.rel or "")
        raise


def _render_into(
    formatter: Formatter,
    owner: dict[str, str],
    spec: Spec,
    ops: tuple[ResolvedOp, ...],
    spec_name: str,
) -> None:
    """Hand every file to ``formatter`` as it is rendered, so ruff formats while this renders."""
    with rendering(None):
        env = environment()
        head = header(spec_name)
        views = {}
        for r in ops:
            with rendering(r.name):
                views[r.name] = op_view(r)
        pkg = package_view(spec.namespace, spec.package, tuple(views.values()))
        root = spec.package
        formatter.add(
            f"{root}/__init__.py", env.get_template("init.py.jinja").render(header=head, pkg=pkg)
        )
        for rel, module in STATIC.items():
            formatter.add(rel.format(package=root), f"{head}\n{static_source(module)}")
        with rendering(None):
            formatter.add(
                f"{root}/_warmup_plan.py",
                env.get_template("warmup_plan.py.jinja").render(
                    header=head + next((d for d in map(_lint_directive, ops) if d), ""),
                    w=warmup_view(spec, ops),
                ),
            )
        # PEP 561: type checkers read the package's annotations (empty: the package is complete).
        formatter.add(f"{root}/py.typed", "")
        # The operators' reference page (Markdown; docs/ops.md links to the shipped one).
        page = page_view(spec, ops, views)
        formatter.add(
            "OPS.md", env.get_template("ops.md.jinja").render(header=head.lstrip("# "), page=page)
        )
        op_template = env.get_template("op.py.jinja")
        test_template = env.get_template("test_op.py.jinja")
        bench_template = env.get_template("bench_op.py.jinja")
        for r in ops:
            with rendering(r.name, r.op.loc):
                view = views[r.name]
                rel = f"{root}/{view.module}.py"
                test_rel = f"tests/{r.names.test_module}.py"
                owner[rel] = owner[test_rel] = r.name
                own = head + _lint_directive(r)
                formatter.add(rel, op_template.render(header=own, op=view))
                tv = tests_view(spec, r)
                formatter.add(test_rel, test_template.render(header=own, t=tv))
                if r.op.benchmark is not None:
                    bench_rel = f"benchmarks/bench_{r.name}.py"
                    owner[bench_rel] = r.name
                    bv = bench_view(spec, r)
                    formatter.add(bench_rel, bench_template.render(header=own, b=bv))
