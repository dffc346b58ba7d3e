"""Adapter of fla-core's fused recurrent simple GLA to ``recurrent_gla_step``'s arguments, for the
generated benchmark (``ops.yaml``, ``benchmark: baselines``)."""

from __future__ import annotations


def fla_recurrent_step(fn, state, q, k, v, g, scale):
    """One step through ``fused_recurrent_simple_gla`` (a sequence of one token, the state
    returned, not updated in place); returns ``output``."""
    o, _ = fn(
        q[:, None],
        k[:, None],
        v[:, None],
        g[:, None],
        scale=scale,
        initial_state=state,
        output_final_state=True,
    )
    return o[:, 0]
