"""The gradients section: the public function's gradients against the reference's."""

from __future__ import annotations

from dataclasses import dataclass

from .common import OpTests


@dataclass(frozen=True, slots=True)
class GradientsView:
    # A backward launcher: its incoming gradients are also tried permuted and strided. Without
    # one, autograd differentiates the launcher's torch operations and they are not relaid.
    relaid: bool


def gradients_view(t: OpTests) -> GradientsView | None:
    """None where the public function has no gradients."""
    if not t.has_gradients():
        return None
    return GradientsView(relaid=t.op.backward is not None)
