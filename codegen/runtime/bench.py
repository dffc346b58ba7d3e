"""The harness of the generated benchmarks (``generated/benchmarks/bench_<op>.py``), and the timing
helpers the hand-written scripts of ``benchmarks/`` share (docs/spec.md, "benchmark").

A generated benchmark is data: its shapes, dtypes, the inputs it draws with the tests' helpers,
the work of one call and its baselines; :func:`main` measures it. Per shape, dtype and
implementation (the operator, then each baseline, measured in this process, each warmed up, so
one that autotunes tunes here and alone):

- host cost: wall time of one eager call with the device idle (synchronized before each call),
  median of many (:func:`host_call_us`);
- GPU time: ``calls`` calls captured in one CUDA graph, its replay timed with CUDA events, median
  of ``replays`` (:func:`graph_us`); an operator with data-dependent sizes reads them on the host,
  which no graph can hold, so it is timed with a synchronize after each call (:func:`synced_us`);
- the same GPU time by a second, independent method: CUDA events around ``calls`` eager calls
  queued behind a sleep kernel that outlasts their launch, median of ``replays``
  (:func:`events_us`); a ratio against a baseline whose two values differ by over 5% is marked
  (:func:`compare_ratios`);
- the declared work of one call, ``bytes`` and ``flops``, and its rate: TB/s and % of a
  device-to-device copy of as many bytes, TFLOP/s and % of a dense matmul measured here in the
  same dtype;
- a baseline's largest absolute difference from the operator's outputs, and its time over the
  operator's (GPU time where there is CUDA, else host cost).

Without CUDA only the host cost is measured: each GPU cell says why it is empty. This module is
copied into the generated package as ``_bench.py``; it imports nothing of the generator.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib
import importlib.metadata
import math
import os
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

# Without a GPU the Triton launchers run on CPU tensors through Triton's interpreter; it must be
# chosen before triton is first imported, which the launchers do lazily.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

Fn = Callable[[], object]

# ---------------------------------------------------------------------------------------------
# Timing (the method of ../shared/GPU.md, "Measuring there well")
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _gc_paused():
    """The garbage collector off inside the block, as it was after: none lands in a timed loop."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def host_call_us(fn: Fn, *, calls: int, sync: Fn, grad: bool = False) -> float:
    """Host cost of one call in microseconds: each call timed alone with the device idle (one
    synchronize before it, none inside), median of ``calls``."""
    with torch.set_grad_enabled(grad):
        fn()
        sync()
        times = []
        with _gc_paused():
            for _ in range(calls):
                sync()
                start = time.perf_counter_ns()
                fn()
                times.append(time.perf_counter_ns() - start)
            sync()
    return statistics.median(times) / 1e3


def host_us(fn: Fn, *, calls: int, rounds: int, sync: Fn, grad: bool = False) -> float:
    """Host cost per call in microseconds: ``calls`` calls in a loop with no synchronize inside
    it, one after it; best of ``rounds`` (GPU work overlaps; small shapes keep it below)."""
    with torch.set_grad_enabled(grad):
        fn()
        sync()
        best = float("inf")
        with _gc_paused():
            for _ in range(rounds):
                sync()
                start = time.perf_counter_ns()
                for _ in range(calls):
                    fn()
                sync()
                best = min(best, (time.perf_counter_ns() - start) / calls)
                # Between rounds, never inside a timed loop.
                gc.collect()
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
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
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


@functools.cache
def _sleep_cycles_per_us() -> float:
    """Clock cycles of ``torch.cuda._sleep`` per microsecond on this GPU, measured once."""
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    torch.cuda._sleep(1000)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    return 10_000_000 / (start.elapsed_time(end) * 1e3)


def events_us(fn: Fn, *, calls: int = 10, rounds: int = 5, grad: bool = False) -> float:
    """GPU time per call in microseconds, by CUDA events recorded around a loop of ``calls``
    eager calls, median of ``rounds``. Each loop is queued behind a sleep kernel that lasts twice
    as long as the host took to issue the warm-up loop (plus a millisecond), so the calls run
    back to back on the GPU and the events time the GPU's work, not the host's launch cost, by
    a method independent of :func:`graph_us` (no graph: the eager launches, caching allocator
    and all). A call that synchronizes (data-dependent sizes) still waits for the GPU."""
    with torch.set_grad_enabled(grad):
        torch.cuda.synchronize()
        issued = time.perf_counter()
        for _ in range(calls):
            fn()
        issued = time.perf_counter() - issued
        torch.cuda.synchronize()
        cycles = int((2 * issued * 1e6 + 1000) * _sleep_cycles_per_us())
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        times = []
        with _gc_paused():
            for _ in range(rounds):
                torch.cuda.synchronize()
                torch.cuda._sleep(cycles)
                start.record()
                for _ in range(calls):
                    fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e3 / calls)
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
    dst = torch.empty(n, dtype=torch.uint8, device=device)
    return graph_us(lambda: dst.copy_(src), **kw)


def matmul_tflops(dtype: torch.dtype, device: torch.device, n: int = 8192) -> float:
    """Dense matmul rate in TFLOP/s (``n`` x ``n`` x ``n`` in ``dtype``, by graph replay): the
    ceiling a declared ``flops`` is compared with."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    us = graph_us(lambda: a @ b, calls=5, replays=5)
    return 2 * n**3 / us / 1e6


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest ``|a - b|`` in float32 (0 for empty tensors); shapes must agree."""
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return (a.float() - b.float()).abs().max().item()


def max_abs(a: torch.Tensor) -> float:
    return a.float().abs().max().item() if a.numel() else 0.0


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A markdown table; the first ``left`` columns left-aligned, the others right-aligned."""
    cells = [list(map(str, header)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: list[str]) -> str:
        parts = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(
        "-" * (w + 2) if i < left else "-" * (w + 1) + ":" for i, w in enumerate(widths)
    )
    return "\n".join([line(cells[0]), rule + "|", *(line(r) for r in cells[1:])])


# ---------------------------------------------------------------------------------------------
# The generated benchmarks
# ---------------------------------------------------------------------------------------------

OURS = "ours"
NO_CUDA = "no CUDA"
FWD, FWD_BWD = "fwd", "fwd+bwd"
COLUMNS = (
    "shape",
    "dtype",
    "impl",
    "pass",
    "host us",
    "GPU us",
    "events us",
    "bytes",
    "FLOPs",
    "TB/s",
    "% copy",
    "TFLOP/s",
    "% peak",
    "÷ ours",
    "÷ ours (events)",
    "ratio Δ",
    "max abs diff",
)
# Two methods' ratios against a baseline farther apart than this are marked.
DISAGREE = 0.05
MARK = "!"
# What each column measures (printed by --compare).
METHODS = {
    "host us": "wall time of one eager call with the device idle (a synchronize before it), "
    "median of --calls",
    "GPU us": "CUDA-graph replay of --graph-calls calls timed with CUDA events, median of "
    "--replays; an operator with data-dependent sizes: wall time with a synchronize after each "
    "call",
    "events us": "CUDA events around a loop of --graph-calls eager calls queued behind a sleep "
    "kernel that outlasts their launch (the GPU runs them back to back), median of "
    "--replays; a call that synchronizes still waits for the GPU",
    "TB/s, % copy": "declared bytes / GPU us; against a device-to-device copy of as many bytes",
    "TFLOP/s, % peak": "declared flops / GPU us; against a dense matmul in the dtype "
    "(or --peak-tflops)",
    "÷ ours": "the baseline's GPU us / ours (host us without CUDA)",
    "÷ ours (events)": "the baseline's events us / ours",
    "ratio Δ": f"how far apart the two ratios are, abs(÷ ours / ÷ ours (events) - 1); marked "
    f"{MARK} above {DISAGREE:.0%}",
    "max abs diff": "largest abs(baseline - ours) over outputs (gradients for fwd+bwd)",
}


class Cell(str):
    """A table cell that holds no number: why it is empty, or the error that emptied it."""


@dataclass(frozen=True)
class Baseline:
    """``function`` of another library; ``adapter(function, **arguments)`` maps the public
    function's arguments to its call and returns its results in the order of the operator's
    public outputs (without one: ``function(**arguments)``)."""

    name: str
    function: str
    adapter: str | None = None


@dataclass(frozen=True)
class Bench:
    """One operator's benchmark, as its generated module declares it."""

    op: str
    fn: Callable
    make_inputs: Callable[[str, str], dict]
    shapes: dict
    dtypes: dict
    flag: str | None
    configs: dict  # shape -> its configuration (variant values, optional inputs given, flag)
    public_outputs: tuple[str, ...]
    differentiable: tuple[str, ...]
    backward: bool
    graphable: bool  # no data-dependent sizes: a CUDA graph can hold a call
    work: Callable[[dict], dict]
    baselines: tuple[Baseline, ...] = ()


def _load(ref: str) -> Callable:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def load_baseline(b: Baseline) -> tuple[Callable | None, str]:
    """The baseline as a callable of the operator's arguments, or None and why it is skipped."""
    module = b.function.partition(":")[0]
    try:
        function = _load(b.function)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module == missing or module.startswith(missing + "."):
            return None, f"module '{module}' is not installed ({exc})"
        return None, f"module '{module}' needs '{missing}', which is not installed ({exc})"
    except Exception as exc:  # noqa: BLE001 - a broken library skips its rows, never the run
        return None, f"'{b.function}' failed to load: {type(exc).__name__}: {exc}"
    if b.adapter is None:
        return function, ""
    try:
        adapter = _load(b.adapter)
    except Exception as exc:  # noqa: BLE001 - as above, and the reason names the adapter
        return None, f"adapter '{b.adapter}' failed to load: {type(exc).__name__}: {exc}"
    return (lambda **kw: adapter(function, **kw)), ""


def _error(exc: BaseException) -> Cell:
    first = (str(exc).strip().splitlines() or [""])[0]
    return Cell(f"err: {type(exc).__name__}: {first[:60]}")


def _tensors(result) -> list[torch.Tensor]:
    """The tensors of a result: a tensor, a NamedTuple or a tuple of tensors (Nones dropped)."""
    items = [result] if isinstance(result, torch.Tensor) else list(result or ())
    return [t for t in items if isinstance(t, torch.Tensor)]


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _prod(sizes) -> int:
    return math.prod(int(s) for s in sizes)


def work_names(bench: Bench, shape: str, inputs: dict, result) -> dict:
    """The names a work expression reads: the shape's dims, ``batch`` (the product of the '...'
    sizes), and the bytes of each input and public output of the call."""
    s = bench.shapes[shape]
    names = {k: v for k, v in s.items() if isinstance(v, int) and not isinstance(v, bool)}
    if "batch" in s:
        names["batch"] = _prod(s["batch"])
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor) or value is None:
            names[name] = 0 if value is None else value.numel() * value.element_size()
    outputs = [result] if isinstance(result, torch.Tensor) else list(result or ())
    for name, value in zip(bench.public_outputs, outputs, strict=False):
        names[name] = 0 if value is None else value.numel() * value.element_size()
    return names


def _smallest(bench: Bench) -> str:
    def size(shape: str) -> int:
        s = bench.shapes[shape]
        values = [v for v in s.values() if isinstance(v, int) and not isinstance(v, bool)]
        return _prod(values) * _prod(s.get("batch", ()))

    return min(bench.shapes, key=size)


class Runner:
    """Measures every (shape, dtype, implementation) of one benchmark; holds the options."""

    def __init__(self, bench: Bench, args: argparse.Namespace) -> None:
        self.bench, self.args = bench, args
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.sync = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.copy: dict[int, float] = {}
        self.peak: dict[torch.dtype, float] = {}

    def call(self, impl: Callable, inputs: dict, shape: str) -> Fn:
        flag = self.bench.flag
        extra = {flag: self.bench.configs[shape][flag]} if flag else {}
        return lambda: impl(**inputs, **extra)

    def fwd_bwd(self, impl: Callable, inputs: dict, shape: str) -> Fn:
        """One forward and backward: gradients of every floating output, seeded, w.r.t. every
        differentiable input given."""
        leaves = {
            k: v.detach().clone().requires_grad_(True)
            for k, v in inputs.items()
            if k in self.bench.differentiable and isinstance(v, torch.Tensor)
        }
        args = {**inputs, **leaves}
        call = self.call(impl, args, shape)
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():  # the outputs' shapes, from a call on copies
            probe = self.call(impl, _clone_all(inputs), shape)
            shapes = [t for t in _tensors(probe()) if t.is_floating_point()]
        grads = [torch.randn(t.shape, generator=gen).to(t) for t in shapes]
        targets = list(leaves.values())

        def run():
            outs = [t for t in _tensors(call()) if t.is_floating_point()]
            return torch.autograd.grad(outs, targets, grads, allow_unused=True)

        return run

    def gpu(self, fn: Fn, grad: bool) -> float | Cell:
        if not self.cuda:
            return Cell(NO_CUDA)
        if self.bench.graphable:
            return graph_us(fn, calls=self.args.graph_calls, replays=self.args.replays, grad=grad)
        return synced_us(
            fn, calls=self.args.graph_calls, rounds=self.args.replays, sync=self.sync, grad=grad
        )

    def events(self, fn: Fn, grad: bool) -> float | Cell:
        if not self.cuda:
            return Cell(NO_CUDA)
        return events_us(fn, calls=self.args.graph_calls, rounds=self.args.replays, grad=grad)

    def host(self, fn: Fn, grad: bool) -> float:
        return host_call_us(fn, calls=self.args.calls, sync=self.sync, grad=grad)

    def cell(self, fn: Callable[[], object]):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - one failing cell must not stop the table
            if self.args.verbose:
                traceback.print_exc()
            return _error(exc)

    def copy_us(self, nbytes: int) -> float:
        if nbytes not in self.copy:
            self.copy[nbytes] = copy_graph_us(nbytes, self.device)
        return self.copy[nbytes]

    def peak_tflops(self, dtype: torch.dtype) -> float:
        if self.args.peak_tflops:
            return self.args.peak_tflops
        if dtype not in self.peak:
            self.peak[dtype] = matmul_tflops(dtype, self.device)
        return self.peak[dtype]

    def rates(self, work: dict, gpu, dtype: torch.dtype) -> list[str]:
        """TB/s, % copy, TFLOP/s, % peak."""
        if not isinstance(gpu, float):
            why = gpu if gpu == NO_CUDA else "-"
            return [why] * 4
        out = ["-"] * 4
        if work.get("bytes"):
            out[0] = f"{work['bytes'] / gpu / 1e6:.2f}"
            copy = self.cell(lambda: self.copy_us(work["bytes"]))
            out[1] = f"{100 * copy / gpu:.0f}%" if isinstance(copy, float) else copy
        if work.get("flops"):
            tflops = work["flops"] / gpu / 1e6
            out[2] = f"{tflops:.1f}"
            peak = self.cell(lambda: self.peak_tflops(dtype)) if dtype.is_floating_point else None
            out[3] = f"{100 * tflops / peak:.0f}%" if isinstance(peak, float) else "-"
        return out

    def measure(self, shape: str, dtype: str, impls: dict) -> list[list[str]]:
        """Rows of one shape and dtype: each implementation's forward, then (where the
        benchmark times it) its forward + backward."""
        bench = self.bench
        inputs = bench.make_inputs(shape, dtype)
        passes = (FWD, FWD_BWD) if bench.backward else (FWD,)
        rows, results, times, events = [], {}, {}, {}
        for p in passes:
            for name, impl in impls.items():
                # The first calls (compiles, autotuning) happen in ``results``, untimed.
                fn, got = self.prepare(p, impl, inputs, shape)
                results[p, name] = got
                grad = p == FWD_BWD
                if fn is None:  # the forward + backward could not be set up: got says why
                    host = gpu = ev = got
                else:
                    host = self.cell(lambda fn=fn, grad=grad: self.host(fn, grad))
                    gpu = self.cell(lambda fn=fn, grad=grad: self.gpu(fn, grad))
                    ev = self.cell(lambda fn=fn, grad=grad: self.events(fn, grad))
                times[p, name] = gpu if self.cuda else host
                events[p, name] = ev
                # The declared work is the operator's, whichever implementation runs it: it
                # reads our outputs, so a baseline that failed still shows it.
                work = self.cell(
                    lambda got=results[FWD, OURS], p=p: self.work(p, shape, inputs, got)
                )
                amounts = [_amount(work, k) for k in ("bytes", "flops")]
                rates = (
                    self.rates(work, gpu, bench.dtypes[dtype])
                    if isinstance(work, dict)
                    else [work] * 4
                )
                if name == OURS:
                    ratios, diff = ["-"] * 3, "-"
                else:
                    ratios = compare_ratios(
                        times[p, name], times[p, OURS], events[p, name], events[p, OURS]
                    )
                    if not self.cuda:
                        ratios = [ratios[0], NO_CUDA, NO_CUDA]
                    diff = self.cell(lambda got=got, p=p: _diff(results[p, OURS], got))
                diff = diff if isinstance(diff, str) else f"{diff:.3g}"
                row = [shape, dtype, name, p, _fmt(host), _fmt(gpu), _fmt(ev), *amounts, *rates]
                rows.append(row + [*ratios, diff])
        return rows

    def prepare(self, p: str, impl: Callable, inputs: dict, shape: str):
        """The timed call of pass ``p`` (None where it cannot be set up), and what its first
        call returned (outputs; gradients for forward + backward) or the error that stopped it.
        Every call works on copies of ``inputs``, the timed ones too (a CUDA graph replays an
        in-place update thousands of times): the next implementation's first call then sees
        the values ours saw, and their results compare."""
        if p == FWD:
            got = self.cell(lambda: self.call(impl, _clone_all(inputs), shape)())
            return self.call(impl, _clone_all(inputs), shape), got
        fb = self.cell(lambda: self.fwd_bwd(impl, _clone_all(inputs), shape))
        if isinstance(fb, Cell):
            return None, fb
        return fb, self.cell(self.fwd_bwd(impl, _clone_all(inputs), shape))

    def work(self, p: str, shape: str, inputs: dict, got) -> dict:
        """The declared work of pass ``p``: a forward + backward adds the backward's, and has
        none where the backward declares none."""
        work = self.bench.work(work_names(self.bench, shape, inputs, got))
        if p == FWD:
            return {"bytes": work["bytes"], "flops": work["flops"]}
        return {
            k: None
            if work[f"backward_{k}"] is None or work[k] is None
            else work[k] + work[f"backward_{k}"]
            for k in ("bytes", "flops")
        }


def _amount(work, key: str) -> str:
    if not isinstance(work, dict):
        return work
    return "-" if work[key] is None else str(work[key])


def _clone_all(inputs: dict) -> dict:
    return {k: _clone(v) for k, v in inputs.items()}


def _diff(ours, theirs) -> float:
    if isinstance(ours, Cell) or isinstance(theirs, Cell):
        raise RuntimeError("no result to compare")
    a, b = _tensors(ours), _tensors(theirs)
    if not a or not b:
        raise RuntimeError("no tensor result to compare")
    return max(max_abs_diff(x, y) for x, y in zip(a, b, strict=False))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def _ratio(theirs, ours) -> str:
    q = _quotient(theirs, ours)
    return "-" if q is None else f"{q:.3g}"


def compare_ratios(
    theirs: object, ours: object, theirs_events: object, ours_events: object
) -> list[str]:
    """A baseline's ratio to ours by the first method (graph replay, or host cost without
    CUDA) and by CUDA events, and how far apart they are: ``|a / b - 1|`` in percent, marked
    with ``MARK`` above ``DISAGREE``. A time that is not a positive number (a Cell: why it is
    empty) leaves its ratio and the difference as '-'."""
    a, b = _quotient(theirs, ours), _quotient(theirs_events, ours_events)
    if a is None or b is None:
        delta = "-"
    else:
        apart = abs(a / b - 1)
        delta = f"{100 * apart:.1f}%" + (f" {MARK}" if apart > DISAGREE else "")
    return [_ratio(theirs, ours), _ratio(theirs_events, ours_events), delta]


def _quotient(theirs, ours) -> float | None:
    if isinstance(theirs, float) and isinstance(ours, float) and ours > 0 and theirs > 0:
        return theirs / ours
    return None


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment(bench: Bench) -> str:
    """The hardware and library versions, for the header and the plot's title."""
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (no CUDA)"
    parts = [device, f"torch {torch.__version__}", f"triton {_version('triton')}"]
    for b in bench.baselines:
        parts.append(f"{b.name} {_version(distribution(b.function.partition(':')[0]))}")
    return "; ".join(parts)


def distribution(module: str) -> str:
    """The installed distribution that provides the top-level package of ``module`` (its own
    name where none is known)."""
    top = module.split(".")[0]
    names = importlib.metadata.packages_distributions().get(top, [])
    return names[0] if names else top


def anchors(bench: Bench) -> list[list[str]]:
    """What the numbers are relative to: each baseline's package and version (from
    importlib.metadata, or "not installed"), ours, torch, triton and the device."""
    rows = []
    for b in bench.baselines:
        dist = distribution(b.function.partition(":")[0])
        rows.append([b.name, dist, _version(dist), b.function])
    package = (getattr(bench.fn, "__module__", None) or "").split(".")[0]
    ours = distribution(package)
    rows.append([OURS, ours, _version(ours), f"{package}.{bench.op}"])
    rows.append(["torch", "torch", torch.__version__, "-"])
    rows.append(["triton", "triton", _version("triton"), "-"])
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (no CUDA)"
    rows.append(["device", device, "-", "-"])
    return rows


def compare(bench: Bench) -> str:
    """The tables --compare prints: the anchors, then the method of each column."""
    return "\n\n".join(
        [
            markdown(("anchor", "package", "version", "function"), anchors(bench), left=4),
            markdown(("column", "method"), list(METHODS.items()), left=2),
        ]
    )


def plot(bench: Bench, rows: list[list[str]], path: str, env: str, cuda: bool) -> str:
    """Bars of each implementation's time per (shape, dtype, pass): no lines between unrelated
    shapes, y from zero, hardware and versions in the title."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed"
    column = COLUMNS.index("GPU us" if cuda else "host us")
    groups = list(dict.fromkeys((r[0], r[1], r[3]) for r in rows))
    impls = list(dict.fromkeys(r[2] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * len(impls)), 4.5))
    width = 0.8 / max(len(impls), 1)
    for i, impl in enumerate(impls):
        xs, ys = [], []
        for g, group in enumerate(groups):
            for r in rows:
                if (r[0], r[1], r[3]) == group and r[2] == impl:
                    try:
                        ys.append(float(r[column]))
                        xs.append(g + i * width)
                    except ValueError:
                        pass
        ax.bar(xs, ys, width=width, label=impl)
    ax.set_xticks(
        [g + width * (len(impls) - 1) / 2 for g in range(len(groups))],
        [f"{s}\n{d} {p}" for s, d, p in groups],
        fontsize=7,
    )
    ax.set_ylim(bottom=0)
    ax.set_ylabel("GPU time per call (us)" if cuda else "host cost per call (us)")
    ax.set_title(f"{bench.op}: {env}", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot: {path}"


def parse_args(bench: Bench, argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=f"Benchmark of {bench.op} (docs/spec.md, benchmark)")
    p.add_argument("--shapes", help=f"comma-separated shape ids; of: {', '.join(bench.shapes)}")
    p.add_argument("--smallest", action="store_true", help="only the smallest shape")
    p.add_argument("--dtypes", help=f"comma-separated dtypes; of: {', '.join(bench.dtypes)}")
    p.add_argument("--no-baselines", action="store_true", help="the operator alone")
    p.add_argument("--calls", type=int, default=100, help="timed calls of host cost (median)")
    p.add_argument("--graph-calls", type=int, default=20, help="calls per CUDA graph")
    p.add_argument("--replays", type=int, default=5, help="graph replays (median)")
    p.add_argument("--peak-tflops", type=float, help="dense peak (default: a matmul, measured)")
    p.add_argument("--plot", metavar="FILE", help="bar plot of the times (needs matplotlib)")
    p.add_argument("--verbose", action="store_true", help="tracebacks of failed cells")
    p.add_argument(
        "--compare",
        action="store_true",
        help="also print the anchors (baselines' packages and versions, ours, torch, triton, "
        "device) and the method of each column",
    )
    args = p.parse_args(argv)
    for what, table in (("shapes", bench.shapes), ("dtypes", bench.dtypes)):
        chosen = getattr(args, what)
        for name in chosen.split(",") if chosen else ():
            if name not in table:
                p.error(f"unknown {what[:-1]} {name!r}; expected one of: {', '.join(table)}")
    return args


def main(bench: Bench, argv: Sequence[str] | None = None) -> int:
    args = parse_args(bench, argv)
    runner = Runner(bench, args)
    env = environment(bench)
    impls: dict[str, Callable] = {OURS: bench.fn}
    lines = [f"# {bench.op}: {env}"]
    for b in () if args.no_baselines else bench.baselines:
        fn, why = load_baseline(b)
        if fn is None:
            lines.append(f"baseline {b.name}: skipped: {why}")
        else:
            impls[b.name] = fn
    print("\n".join(lines), flush=True)
    if args.compare:
        print(compare(bench), flush=True)
    shapes = (
        [_smallest(bench)]
        if args.smallest
        else (args.shapes.split(",") if args.shapes else list(bench.shapes))
    )
    dtypes = args.dtypes.split(",") if args.dtypes else list(bench.dtypes)
    rows = []
    for shape in shapes:
        for dtype in dtypes:
            rows += runner.measure(shape, dtype, impls)
    print(markdown(COLUMNS, rows))
    if not runner.cuda:
        print(f"GPU columns: {NO_CUDA} here; host cost only (÷ ours compares host cost).")
    flagged = [r for r in rows if r[COLUMNS.index("ratio Δ")].endswith(MARK)]
    if flagged:
        print(
            f"{MARK}: {len(flagged)} ratio(s) where graph replay and CUDA events disagree by more "
            f"than {DISAGREE:.0%}; do not quote them without looking at both."
        )
    if args.plot:
        print(plot(bench, rows, args.plot, env, runner.cuda))
    return 0


def script(bench: Bench) -> None:
    """Run as a generated benchmark's ``__main__``: :func:`main`, its status the exit status."""
    raise SystemExit(main(bench))
