"""The opcheck section of a registered operator: ``torch.library.opcheck`` on the forward and
backward operators over their own layouts, and the backward on each saved output relaid."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.model import Integration
from .inputs import BackwardView, backward_view


@dataclass(frozen=True, slots=True)
class OpcheckView:
    triton_op: bool  # Note [triton_op on CPU]: skipped where fake tensors cannot run
    pair: bool  # the arity twin, called when the configuration sets the flag
    backward: BackwardView | None


def opcheck_view(r: ResolvedOp) -> OpcheckView | None:
    """None for the eager integration: no registered operator to check."""
    if r.op.integration is Integration.EAGER:
        return None
    return OpcheckView(
        triton_op=r.op.integration is Integration.TRITON_OP,
        pair=r.pair is not None,
        backward=backward_view(r),
    )
