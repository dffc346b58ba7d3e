"""Timing and table helpers of the hand-written benchmarks: those of the generated benchmarks'
harness (``codegen/runtime/bench.py``, which the generator copies to ``attnops/_bench.py``),
re-exported under the names the scripts import (``../shared/GPU.md``, "Measuring there well").
Read from the checkout, so a script needs only ``attnops_kernels`` importable, not ``attnops``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codegen.runtime.bench import (  # noqa: E402
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
