"""The no-gradient section: an operator without a backward returns outputs that never require
grad, as torch's non-differentiable operators do."""

from __future__ import annotations

from ...resolve.resolved import ResolvedOp
from ...spec.model import Integration


def grad_free(r: ResolvedOp) -> tuple[str, ...]:
    """The floating inputs given ``requires_grad`` whose gradient must not reach any output;
    () with a backward, with no output ('-> ()') or under the eager integration."""
    op = r.op
    if op.backward is not None or not r.public_outputs or op.integration is Integration.EAGER:
        return ()
    return tuple(
        d.name
        for d in op.inputs
        if not d.mutated
        and not d.is_list
        and any(x.is_floating for x in (d.dtypes or op.primary.dtypes))
    )
