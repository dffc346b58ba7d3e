"""The varlen section (``tests.varlen`` in the spec): the packed sequences of a sample against
each sequence run alone, from the dim each tensor packs, the per-sequence arguments and the
offsets input."""

from __future__ import annotations

from dataclasses import dataclass

from ...spec.shapes import ELLIPSIS


@dataclass(frozen=True, slots=True)
class VarlenView:
    packed_dim: dict  # tensor -> position of the packed dim
    per_sequence: tuple[str, ...]
    offsets: str


def varlen_view(op) -> VarlenView | None:
    v = op.tests.varlen
    if v is None:
        return None
    packed = {}
    for decl in list(op.inputs) + list(op.outputs):
        for pos, e in enumerate(decl.shape.entries):
            if e != ELLIPSIS and e.name == v.dim:
                packed[decl.name] = pos
    return VarlenView(packed, v.per_sequence, v.offsets)
