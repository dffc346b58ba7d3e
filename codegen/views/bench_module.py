"""Records for one generated benchmark (``generated/benchmarks/bench_<op>.py``, docs/spec.md,
"benchmark").

The module is data: shapes, their configurations, dtypes, the work expressions, baselines, and
the builder of the public function's inputs, which is the generated tests' (the same view, the
same template partial, the same ``_testing`` draws). ``codegen/runtime/bench.py`` measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..resolve.resolved import ResolvedOp
from ..spec.model import DType, Integration, Sample, Spec
from ..spec.shapes import Expr
from .tests.common import DTypeRow, OpTests, sample_id
from .tests.inputs import InputsView, inputs_view


@dataclass(frozen=True, slots=True)
class BaselineRow:
    name: str
    function: str
    adapter: str | None


@dataclass(frozen=True, slots=True)
class BenchView:
    op: str
    package: str
    namespace: str
    seed: int
    shapes: dict  # id -> the shape's entries, as a test sample's
    configs: dict  # id -> variant values, optional inputs given, the arity flag
    dtypes: tuple[DTypeRow, ...]
    flag: str | None
    public_outputs: tuple[str, ...]
    differentiable: tuple[str, ...]
    backward: bool
    graphable: bool
    # Python expressions over the work names, read from ``_n``: bytes, flops, backward_bytes,
    # backward_flops (None: not declared).
    work: dict
    baselines: tuple[BaselineRow, ...]
    inputs: InputsView


class _BenchBuilder(OpTests):
    """The tests' builder, sweeping the benchmark's dtypes: an input follows the swept dtype
    where it allows all of them, as in the tests."""

    def test_dtypes(self) -> tuple[DType, ...]:
        b = self.op.benchmark
        return b.dtypes or self.op.tests.dtypes or self.op.primary.dtypes


def _work(expr: Expr | None) -> str | None:
    if expr is None:
        return None
    return expr.render({n: f"_n[{n!r}]" for n in expr.names})


def shape_id(sample: Sample, dims: tuple[str, ...], variants: dict, flag: str | None) -> str:
    """The test sample's id, then each variant value or flag the shape sets."""
    parts = [sample_id(sample, dims)]
    for k, v in sample.entries:
        if k == flag:
            parts.append(k if v else f"no_{k}")
        elif k in variants:
            parts.append(v if isinstance(v, str) else f"{k}{v}")
    return "-".join(p for p in parts if p)


def bench_view(spec: Spec, r: ResolvedOp) -> BenchView:
    op, b = r.op, r.op.benchmark
    builder = _BenchBuilder(spec, r)
    variants = builder.variants()
    shapes, configs = {}, {}
    for s in b.shapes:
        sid = base = shape_id(s, r.sample_dims, variants, r.flag)
        n = 1
        while sid in shapes:
            n += 1
            sid = f"{base}-{n}"
        entries = {"batch": tuple(s.batch)} if s.batch is not None else {}
        entries.update(s.entries)
        shapes[sid] = entries
        config = {name: s.get(name, values[0]) for name, values in variants.items()}
        for name in r.optional_inputs:
            if name not in r.literal_inputs:
                config[name] = name in b.given
        if r.flag is not None:
            config[r.flag] = bool(s.get(r.flag, False))
        configs[sid] = config
    mutated = any(d.mutated for d in op.inputs)
    has_gradients = op.backward is not None or (op.integration is Integration.EAGER and not mutated)
    return BenchView(
        op=r.names.public,
        package=spec.package,
        namespace=spec.namespace,
        seed=op.tests.seed,
        shapes=shapes,
        configs=configs,
        dtypes=tuple(DTypeRow(d.short, d.torch_name) for d in builder.test_dtypes()),
        flag=r.flag,
        public_outputs=r.public_outputs,
        differentiable=builder.differentiable(),
        backward=has_gradients if b.backward is None else b.backward,
        graphable=not op.dynamic_dims,
        work={
            "bytes": _work(b.bytes),
            "flops": _work(b.flops),
            "backward_bytes": _work(b.backward_bytes),
            "backward_flops": _work(b.backward_flops),
        },
        baselines=tuple(BaselineRow(x.name, x.function, x.adapter) for x in b.baselines),
        inputs=inputs_view(builder),
    )
