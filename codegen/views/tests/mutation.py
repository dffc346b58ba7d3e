"""The unsafe-mutation section: each mutated input aliased with another input, or overlapping
itself, is refused before any launch."""

from __future__ import annotations


def mutated(op) -> tuple[str, ...]:
    """The inputs the operator writes, in declaration order."""
    return tuple(d.name for d in op.inputs if d.mutated)
