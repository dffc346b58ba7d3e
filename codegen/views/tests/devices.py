"""The devices section: the public function accepts inputs on each device its launchers list
(a CPU launcher, a CUDA launcher), and the tests try each."""

from __future__ import annotations

from ...resolve.resolved import ResolvedOp


def devices(r: ResolvedOp) -> tuple[str, ...]:
    """The devices the public function accepts, in the order the tests try them."""
    return r.devices
