"""Records for the generated warm-up plan (``generated/<package>/_warmup_plan.py``): per operator,
its test samples, variant values, optional inputs, arity flag, dtypes and the builder of the
public function's inputs (the generated tests' builder: the same view, the same template
partial). ``codegen/runtime/warmup.py`` (the package's ``_warmup``) runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..resolve.resolved import ResolvedOp
from ..spec.model import Spec
from .tests.common import DTypeRow, OpTests
from .tests.inputs import InputsView, inputs_view


@dataclass(frozen=True, slots=True)
class WarmupOp:
    op: str
    module: str
    public: str
    seed: int
    samples: dict  # id -> the sample's entries
    variants: dict  # variant argument -> its values, the schema default first
    optional: tuple[str, ...]  # optional inputs drawn (given or None)
    flag: str | None
    dtypes: tuple[DTypeRow, ...]
    differentiable: tuple[str, ...]
    backward: bool  # the operator has a backward stage: warm it up too
    devices: tuple[str, ...]  # the device types its forward has launchers for
    inputs: InputsView


@dataclass(frozen=True, slots=True)
class WarmupView:
    package: str
    ops: tuple[WarmupOp, ...]


def warmup_op(spec: Spec, r: ResolvedOp) -> WarmupOp:
    b = OpTests(spec, r)
    return WarmupOp(
        op=r.name,
        module=r.names.module,
        public=r.names.public,
        seed=r.op.tests.seed,
        samples=b.samples(),
        variants=b.variants(),
        optional=tuple(n for n in r.optional_inputs if n not in r.literal_inputs),
        flag=r.flag,
        dtypes=tuple(DTypeRow(d.short, d.torch_name) for d in b.test_dtypes()),
        differentiable=b.differentiable(),
        backward=r.op.backward is not None,
        devices=tuple(sorted({x.device for x in r.op.forward.launchers})),
        inputs=inputs_view(b),
    )


def warmup_view(spec: Spec, ops: tuple[ResolvedOp, ...]) -> WarmupView:
    return WarmupView(
        package=spec.package,
        ops=tuple(warmup_op(spec, r) for r in sorted(ops, key=lambda r: r.name)),
    )
