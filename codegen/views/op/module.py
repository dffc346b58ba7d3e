"""One generated operator module (``generated/<package>/<op>.py``): a record per section, in the
order the module reads; ``templates/op.py.jinja`` includes the partial of each section
(``templates/op/<section>.py.jinja``), which renders the record built in ``<section>.py`` here.

Each record is data about one piece of emitted code: a shim, a fake, the autograd.Function, the
checks of the public function. The templates show what that code looks like; the only code
fragments here are expressions over validated identifiers (shape tuples, dim reads), never spec
text. Spec text (docs, messages, variant values, defaults) stays a Python value until the
template's ``py`` or ``docstring`` filter turns it into a literal.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.model import Integration
from .base import OpBuilder
from .bindings import BindingsView, bindings_view
from .fakes import FakeBuilder, FakeView
from .fast_path import FastPathBuilder
from .function import FunctionBuilder, FunctionView
from .imports import ImportsView, imports_view
from .notes import Notes
from .public import PublicBuilder, PublicView
from .registration import Registration, StageView, registrations, stage_view


@dataclass(frozen=True, slots=True)
class OpView:
    name: str
    module: str
    summary: str  # spec text: the doc's first line
    integration: str
    imports: ImportsView
    # registration: schema definitions, shims, impl calls (opaque) or triton_op registration
    stages: tuple[StageView, ...]
    registrations: tuple[Registration, ...]
    fakes: tuple[FakeView, ...]  # opaque integration only
    bindings: BindingsView
    function: FunctionView | None  # None without a backward
    public: PublicView  # with the eager fast path's branch ('eager_fast_path: true')
    exports: tuple[str, ...]


def import_order(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def op_view(r: ResolvedOp) -> OpView:
    op = r.op
    opaque = op.integration is Integration.OPAQUE
    notes = Notes()  # sections in module order (Note [notes once])
    base = OpBuilder(r)
    stages = tuple(stage_view(base, s, notes) for s in r.stages)
    fakes = tuple(FakeBuilder(r).fake(s, notes) for s in r.stages) if opaque else ()
    direct = FastPathBuilder(r).call() if op.eager_fast_path else None
    public, constants = PublicBuilder(r).view(direct, notes)
    return OpView(
        name=op.name,
        module=r.names.module,
        summary=(op.doc.splitlines()[0] if op.doc else op.name),
        integration=op.integration.value,
        imports=imports_view(r, stages, public),
        stages=stages,
        registrations=registrations(stages) if opaque else (),
        fakes=fakes,
        bindings=bindings_view(r, constants),
        function=FunctionBuilder(r).function() if op.backward else None,
        public=public,
        exports=tuple(
            sorted(
                (r.names.public, r.names.result) if r.public_outputs else (r.names.public,),
                key=import_order,
            )
        ),
    )


@dataclass(frozen=True, slots=True)
class PackageView:
    namespace: str
    package: str
    ops: tuple[OpView, ...]
    exports: tuple[str, ...]


def package_view(namespace: str, package: str, ops: tuple[OpView, ...]) -> PackageView:
    ops = tuple(sorted(ops, key=lambda v: v.module))
    names = [name for op in ops for name in op.exports] + [
        "set_offsets_check",
        "set_index_check",
        "WarmupEntry",
        "warmup",
    ]
    exports = tuple(sorted(names, key=import_order))
    return PackageView(namespace, package, ops, exports)
