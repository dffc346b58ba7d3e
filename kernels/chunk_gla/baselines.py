"""Adapter of fla-core's chunked simple GLA (a scalar log-decay per head, as ``chunk_gla``) to
``chunk_gla``'s arguments, for the generated benchmark (``ops.yaml``, ``benchmark: baselines``)."""

from __future__ import annotations


def fla_chunk_simple_gla(
    fn, q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, save_states=False
):
    """``chunk_simple_gla(q, k, v, g, ...)``; returns ``(output, final_state)`` as the public
    function does (``final_state`` None unless asked for). ``save_states`` has no counterpart
    there: fla-core keeps only its inputs and recomputes the chunk states in its backward."""
    o, ht = fn(
        q,
        k,
        v,
        g,
        scale=scale,
        initial_state=initial_state,
        output_final_state=output_final_state,
        cu_seqlens=cu_seqlens,
    )
    return o, ht if output_final_state else None
