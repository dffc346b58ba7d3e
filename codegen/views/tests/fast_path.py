"""The eager fast path's section (Note [eager fast path]): eager calls skip the dispatcher and
match it, and the dispatcher still runs under a dispatch mode and the profiler."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp


@dataclass(frozen=True, slots=True)
class FastPathView:
    module: str  # the operator's module in the package
    # The module-level bindings of the registered operators, which the fast path never calls.
    bindings: tuple[str, ...]
    forward_qualnames: tuple[str, ...]  # the forward operator and its arity pair


def fast_path_view(r: ResolvedOp) -> FastPathView | None:
    """None without 'eager_fast_path: true'."""
    if not r.op.eager_fast_path:
        return None
    return FastPathView(
        module=r.names.module,
        bindings=tuple(s.names.binding for s in r.stages),
        forward_qualnames=tuple(s.names.qualname for s in (r.forward, r.pair) if s is not None),
    )
