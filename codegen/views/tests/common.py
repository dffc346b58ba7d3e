"""What the sections of a generated test module and the generated benchmark share: the builder
that reads an operator's test declarations (the dtypes swept, the samples, the variant values,
the differentiable inputs), the dtype rows, and sample ids."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.model import DType, Integration, Sample, Spec


@dataclass(frozen=True, slots=True)
class DTypeRow:
    short: str  # the id used in test ids: fp32, bf16
    name: str  # the torch attribute: float32


def sample_id(sample: Sample, dims: tuple[str, ...]) -> str:
    parts = []
    if sample.batch is not None:
        parts.append("batch" + ("x".join(str(b) for b in sample.batch) if sample.batch else "0"))
    for k, v in sample.entries:
        if k in dims:
            parts.append(f"{k}{v}")
        elif isinstance(v, tuple):
            parts.append(k)
    return "-".join(parts)


class OpTests:
    """An operator's test declarations, read by each section; the benchmark's builder sweeps its
    own dtypes by overriding ``test_dtypes``."""

    def __init__(self, spec: Spec, r: ResolvedOp) -> None:
        self.spec, self.r, self.op = spec, r, r.op
        self.fwd = r.op.forward.schema

    def test_dtypes(self) -> tuple[DType, ...]:
        return self.op.tests.dtypes or self.op.primary.dtypes

    def dtype_rows(self) -> tuple[DTypeRow, ...]:
        return tuple(DTypeRow(d.short, d.torch_name) for d in self.test_dtypes())

    def samples(self) -> dict:
        out = {}
        for s in self.op.tests.samples:
            entries = {"batch": tuple(s.batch)} if s.batch is not None else {}
            entries.update(s.entries)
            out[sample_id(s, self.r.sample_dims)] = entries
        return out

    def variants(self) -> dict:
        """Variant values, the schema default first: the "default" configuration takes it."""
        out = {}
        for v in self.op.variants:
            arg = self.fwd.argument(v.arg)
            first = [x for x in v.values if arg.has_default and x == arg.default_value]
            out[v.arg] = tuple(first[:1]) + tuple(x for x in v.values if x not in first[:1])
        return out

    def has_gradients(self) -> bool:
        """A backward, or the eager integration's autograd through torch operations."""
        op = self.op
        mutates = any(d.mutated for d in op.inputs)
        return op.backward is not None or (op.integration is Integration.EAGER and not mutates)

    def differentiable(self) -> tuple[str, ...]:
        op = self.op
        if op.backward is None and op.integration is not Integration.EAGER:
            return ()
        return tuple(
            d.name
            for d in op.inputs
            if d.differentiable
            and not d.mutated
            and any(x.is_floating for x in (d.dtypes or op.primary.dtypes))
        )
