"""Timing and table helpers for the benchmarks (``../shared/GPU.md``, "Measuring there well").

- host cost of a call: ``calls`` calls in a loop with no synchronize inside it, one after it;
  best of ``rounds`` (:func:`host_us`);
- GPU time of a call: ``calls`` calls captured in one CUDA graph, its replay timed with CUDA
  events; median of ``replays`` (:func:`graph_us`);
- a call that synchronizes anyway (a data-dependent output size read on the host): each call
  followed by a synchronize, median over rounds (:func:`synced_us`).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence

import torch

Fn = Callable[[], object]


def host_us(fn: Fn, *, calls: int, rounds: int, sync: Fn, grad: bool = False) -> float:
    """Host cost per call in microseconds (GPU work overlaps; small shapes keep it below)."""
    with torch.set_grad_enabled(grad):
        fn()
        sync()
        best = float("inf")
        enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(rounds):
                sync()
                start = time.perf_counter_ns()
                for _ in range(calls):
                    fn()
                sync()
                best = min(best, (time.perf_counter_ns() - start) / calls)
                # Between rounds, never inside a timed loop.
                gc.collect()
        finally:
            if enabled:
                gc.enable()
    return best / 1e3


def graph_us(fn: Fn, *, calls: int = 10, replays: int = 5, grad: bool = False) -> float:
    """GPU time per call in microseconds, by CUDA-graph replay (host cost removed)."""
    with torch.set_grad_enabled(grad):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
    try:
        graph.replay()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(replays):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / calls)
    finally:
        del graph
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return statistics.median(times)


def synced_us(fn: Fn, *, calls: int, rounds: int, sync: Fn, grad: bool = False) -> float:
    """Wall time per call with a synchronize after each call, median over rounds."""
    with torch.set_grad_enabled(grad):
        fn()
        sync()
        per_round = []
        for _ in range(rounds):
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn()
                sync()
            per_round.append((time.perf_counter_ns() - start) / calls / 1e3)
    return statistics.median(per_round)


def synced_us_interleaved(
    fns: dict[str, Fn], *, calls: int, rounds: int, sync: Fn
) -> dict[str, float]:
    """``synced_us`` of each of ``fns``, their rounds taken in turn: a host whose speed drifts
    during the run (clock ramps, neighbours) favours none of them. Median over rounds."""
    per_round: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
        sync()
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn()
                sync()
            per_round[name].append((time.perf_counter_ns() - start) / calls / 1e3)
    return {name: statistics.median(v) for name, v in per_round.items()}


def copy_graph_us(nbytes: int, device: torch.device, **kw) -> float:
    """GPU time of a device-to-device copy moving ``nbytes`` (read + written), by graph replay."""
    n = max(nbytes // 2, 1)
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return graph_us(lambda: dst.copy_(src), **kw)


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest ``|a - b|`` in float32 (0 for empty tensors); shapes must agree."""
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return (a.float() - b.float()).abs().max().item()


def max_abs(a: torch.Tensor) -> float:
    return a.float().abs().max().item() if a.numel() else 0.0


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table; the first column left-aligned, the others right-aligned."""
    cells = [list(map(str, header)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: list[str]) -> str:
        parts = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(
        "-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)
    )
    return "\n".join([line(cells[0]), rule + "|", *(line(r) for r in cells[1:])])
