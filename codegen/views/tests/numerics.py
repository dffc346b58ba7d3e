"""The numerics section: the public function against the float32 reference on every case."""

from __future__ import annotations

from ...resolve.resolved import ResolvedOp


def compares(r: ResolvedOp) -> bool:
    """Something to compare with the reference: a public output or a mutated input
    ('side_effects' operators may have neither; their test is that every call reaches the
    launcher)."""
    return bool(r.public_outputs) or any(d.mutated for d in r.op.inputs)
