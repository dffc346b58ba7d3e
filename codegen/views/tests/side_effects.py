"""The side-effects section ('side_effects: true'): every call, eager and compiled, reaches the
forward's launcher, which a test spies on."""

from __future__ import annotations


def side_effect_launchers(op) -> dict | None:
    """Device -> the forward's launcher references there (every backend of a list); None
    without 'side_effects: true'."""
    if not op.side_effects:
        return None
    out: dict[str, tuple[str, ...]] = {}
    for lch in op.forward.launchers:
        out[lch.device] = out.get(lch.device, ()) + (f"{lch.module}:{lch.function}",)
    return out
