"""What the test samples spell out: literal input values and the dims each sample sizes."""

from __future__ import annotations

from ..spec.model import Op
from .dims import plan


def literal_inputs(op: Op) -> set[str]:
    """Inputs whose values some sample spells out (e.g. sequence offsets)."""
    return {
        d.name for d in op.inputs if any(isinstance(s.get(d.name), tuple) for s in op.tests.samples)
    }


def sample_dims(op: Op) -> set[str]:
    """Dims each sample must size: those bound by inputs the tests generate."""
    literal = literal_inputs(op)
    return {name for name, b in plan(op).bound.items() if not b.derived and b.tensor not in literal}
