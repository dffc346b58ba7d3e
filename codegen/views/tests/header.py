"""The header section: the module's imports, the operator and its reference bound to names no
spec can give, and the registered operators opcheck calls."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.model import Integration


@dataclass(frozen=True, slots=True)
class HeaderView:
    reference: str  # module:function
    registered: bool  # not the eager integration: the stages are torch.library operators
    forward: str  # registered operator names
    pair: str | None
    backward_op: str | None
    triton_op: bool  # Note [triton_op on CPU]


def header_view(r: ResolvedOp) -> HeaderView:
    op = r.op
    return HeaderView(
        reference=op.reference,
        registered=op.integration is not Integration.EAGER,
        forward=r.forward.names.name,
        pair=r.pair.names.name if r.pair else None,
        backward_op=r.backward.names.name if r.backward else None,
        triton_op=op.integration is Integration.TRITON_OP,
    )
