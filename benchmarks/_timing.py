"""Timing and table helpers of the hand-written benchmarks: the generated benchmarks' harness
(``codegen/runtime/bench.py``, copied to ``attnops/_bench.py``), re-exported under the names the
scripts import (``../shared/GPU.md``, "Measuring there well")."""

from __future__ import annotations

from attnops._bench import (
    copy_graph_us,
    graph_us,
    host_call_us,
    host_us,
    markdown,
    max_abs,
    max_abs_diff,
    synced_us,
    synced_us_interleaved,
)

__all__ = [
    "copy_graph_us",
    "graph_us",
    "host_call_us",
    "host_us",
    "markdown",
    "max_abs",
    "max_abs_diff",
    "synced_us",
    "synced_us_interleaved",
]
