"""Adapter of fla-core's KDA gate to ``gate``'s arguments, for the generated benchmark
(``ops.yaml``, ``benchmark: baselines``)."""

from __future__ import annotations


def fla_gate(fn, g, A_log, dt_bias, kind, lower_bound):
    """``fused_kda_gate(g, A_log, dt_bias, lower_bound=...)``: fla selects softplus with
    ``lower_bound=None`` and the sigmoid form with a number."""
    return fn(g, A_log, dt_bias, lower_bound=None if kind == "softplus" else lower_bound)
