"""The value-domain section (docs/spec.md, "Value domains"): each input's declared bounds, whose
values the tests place in the inputs; and the drawn inputs whose init reaches outside their
domain, which ``make_inputs`` clamps into it."""

from __future__ import annotations

import math
from dataclasses import dataclass

# The range each init draws from.
INIT_RANGES = {"randn": (-math.inf, math.inf), "logsigmoid": (-math.inf, 0.0)}


@dataclass(frozen=True, slots=True)
class DomainsView:
    # name -> (lower, upper) as ``repr`` strings ("-inf" is no Python literal)
    bounds: dict
    offsets: str | None  # the input declared as sequence offsets (its samples' edges are tried)


def domains_view(op) -> DomainsView | None:
    bounds = {d.name: _bounds(d.domain) for d in op.inputs if d.domain is not None}
    if not bounds:
        return None
    return DomainsView(bounds, next((d.name for d in op.inputs if d.offsets), None))


def clamped(op, literal: set) -> tuple[tuple[str, tuple[str, str]], ...]:
    out = []
    for d in op.inputs:
        if d.domain is None or d.name in literal or d.init not in INIT_RANGES:
            continue
        lo, hi = INIT_RANGES[d.init]
        if d.domain[0] > lo or d.domain[1] < hi:
            out.append((d.name, _bounds(d.domain)))
    return tuple(out)


def _bounds(domain: tuple[float, float]) -> tuple[str, str]:
    return repr(domain[0]), repr(domain[1])
