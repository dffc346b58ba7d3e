"""Benchmark suite: every operator against fla-core 0.6.0 and torch.compile of its reference.

Run through ``benchmarks/suite.sh`` (it makes the checkout and the carried fla-core wheel
importable). Per operator: host cost per call at small shapes, GPU time by CUDA-graph replay at
the shapes of ``../shared/GPU.md`` (with bandwidth or TFLOP/s), numerics against each baseline in
the same run, first-call latency and recompiles; PNG plots and full logs under ``--out``.

Phases, so that compilation never overlaps a measurement that it would disturb:
  1. first calls of our operators (cold: Triton compile, torch.compile), one process, alone;
  2. fla-core autotuning, one process per shape family in parallel (results land in Triton's
     on-disk autotune cache, so the measuring process later only loads them); meanwhile this
     process compiles the torch.compile references, warms our kernels and checks numerics;
  3. measurements, one operator after another.

    python benchmarks/suite.py [--ops l2norm,gate] [--quick] [--dry-run] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import math
import os
import pstats
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

OPS = ("l2norm", "gate", "chunk_gla", "recurrent_gla_step", "block_mask_worklist")
ALIASES = {
    "recurrent": "recurrent_gla_step",
    "block_mask": "block_mask_worklist",
    "chunk": "chunk_gla",
}
COPY = "d2d copy"
PEAK_TFLOPS = 790.0


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated operators (default all)")
    p.add_argument(
        "--quick", action="store_true", help="fewest shapes and rounds, no compiled refs"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU only (sets TRITON_INTERPRET=1): tiny shapes, no CUDA graphs, no fla-core",
    )
    p.add_argument(
        "--out",
        default=os.environ.get("OUT") or os.path.join(tempfile.gettempdir(), "attnops-suite"),
        help="folder for logs, results.json and plots (default $OUT, else a temp folder)",
    )
    p.add_argument("--no-fla", action="store_true", help="leave fla-core out (columns say n/a)")
    p.add_argument("--no-compile", action="store_true", help="leave every torch.compile out")
    p.add_argument(
        "--profile-compile",
        action="store_true",
        help="cProfile each operator's first dynamic compile into OUT/<op>-first-compile.txt",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=float(os.environ.get("SUITE_DEADLINE", "0")) or None,
        help="seconds after start past which remaining measurements are skipped",
    )
    p.add_argument("--warm-fla", metavar="JOB", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    ops = []
    for name in args.ops.split(","):
        name = ALIASES.get(name.strip(), name.strip())
        if name not in OPS:
            p.error(f"unknown op {name!r}; expected one of: {', '.join(OPS)}")
        if name not in ops:
            ops.append(name)
    args.op_list = ops
    return args


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.dry_run:
    os.environ["TRITON_INTERPRET"] = "1"
# One Triton cache for this process and the fla-core warm-up processes: Inductor points
# TRITON_CACHE_DIR at its own folder on its first compile unless it is set, and the autotuning
# results the warm-up processes leave would then not be found here.
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".triton", "cache"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _timing import (  # noqa: E402
    copy_graph_us,
    graph_us,
    host_us,
    markdown,
    max_abs,
    max_abs_diff,
    synced_us_interleaved,
)


class NA(str):
    """A table cell that holds no number: n/a, an error, a skipped measurement."""


def fmt(v, digits: int = 1) -> str:
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"


def ratio(base, ours) -> str:
    if isinstance(base, (int, float)) and isinstance(ours, (int, float)) and ours > 0:
        return f"{base / ours:.2f}"
    return "-"


class Ctx:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.quick = args.quick
        self.dry = args.dry_run
        self.cuda = torch.cuda.is_available() and not self.dry
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        self.sync = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = open(self.out / "suite.log", "a", encoding="utf-8")  # noqa: SIM115
        self.t0 = time.monotonic()
        self.results: dict = {}
        self.copy_cache: dict[int, float] = {}
        self.fla = None
        self.fla_why = NA("n/a (fla-core not loaded)")
        self.compile_on = not args.no_compile
        self.profile_compile = args.profile_compile
        self.rounds = 3 if self.quick or self.dry else 7
        self.host_calls = 20 if self.dry else 200

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def past_deadline(self) -> bool:
        return self.args.deadline is not None and self.elapsed() > self.args.deadline

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def note(self, text: str) -> None:
        self.log.write(f"[{self.elapsed():7.1f}s] {text}\n")
        self.log.flush()

    def cell(self, what: str, fn: Callable[[], object]):
        """``fn()``, or an NA naming the error (full traceback in suite.log)."""
        if self.past_deadline():
            return NA("skipped (deadline)")
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - one failing cell must not stop the table
            self.note(f"{what}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            return NA(f"err: {type(e).__name__}: {msg[:60]}")

    def host(self, fn, grad: bool = False, calls: int | None = None) -> float:
        return host_us(
            fn, calls=calls or self.host_calls, rounds=self.rounds, sync=self.sync, grad=grad
        )

    def gpu(self, fn, grad: bool = False, calls: int = 20) -> float:
        """GPU time per call: CUDA-graph replay; in a dry run, a plain synchronized loop."""
        if self.cuda:
            return graph_us(fn, calls=calls, replays=5, grad=grad)
        return host_us(fn, calls=2, rounds=2, sync=self.sync, grad=grad)

    def copy_us(self, nbytes: int) -> float:
        if nbytes not in self.copy_cache:
            if self.cuda:
                self.copy_cache[nbytes] = copy_graph_us(nbytes, self.dev)
            else:
                src = torch.empty(max(nbytes // 2, 1), dtype=torch.uint8)
                dst = torch.empty_like(src)
                self.copy_cache[nbytes] = host_us(
                    lambda: dst.copy_(src), calls=2, rounds=2, sync=self.sync
                )
        return self.copy_cache[nbytes]

    def refs_on(self) -> bool:
        """Whether to compile the references: not with --quick/--no-compile, nor late in a run."""
        late = self.args.deadline is not None and self.elapsed() > self.args.deadline - 120
        return self.compile_on and not self.quick and not late

    def compiled(self, fn, **kw):
        if not self.compile_on:
            raise RuntimeError("torch.compile left out (--no-compile)")
        return torch.compile(fn, **kw)

    def record(self, op: str, key: str, value) -> None:
        self.results.setdefault(op, {})[key] = value
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1, default=str))


def load_fla(ctx: Ctx) -> None:
    if ctx.args.no_fla:
        ctx.fla_why = NA("n/a (--no-fla)")
        return
    if not ctx.cuda:
        ctx.fla_why = NA("n/a (no CUDA)")
        return
    try:
        import fla
        from fla.modules.l2norm import l2norm
        from fla.ops.kda.gate import fused_kda_gate
        from fla.ops.simple_gla import chunk_simple_gla, fused_recurrent_simple_gla
        from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
    except Exception as e:  # noqa: BLE001
        ctx.fla_why = NA(f"n/a (fla-core: {type(e).__name__})")
        ctx.note(f"fla-core import failed: {traceback.format_exc()}")
        return

    class Fla:
        pass

    ctx.fla = Fla()
    ctx.fla.version = getattr(fla, "__version__", "?")
    ctx.fla.l2norm = l2norm
    ctx.fla.gate = fused_kda_gate
    ctx.fla.chunk = chunk_simple_gla
    ctx.fla.recurrent = fused_recurrent_simple_gla
    # fla-core's own condition for refusing its gated chunk_bwd_dqkwg (after autotuning the
    # kernels before it, so the refusal is taken from its flags rather than provoked).
    ctx.fla.chunk_bwd_refused = bool(
        IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1
    )


def fla_fn(ctx: Ctx, name: str):
    """The fla-core function, or an NA saying why there is none."""
    if ctx.fla is None:
        return ctx.fla_why
    return getattr(ctx.fla, name)


def call_or_na(ctx: Ctx, what: str, f):
    """Run ``f`` when it is a callable; pass an NA through."""
    if isinstance(f, NA):
        return f
    return ctx.cell(what, f)


def counting_compile(ctx: Ctx, fn):
    """``torch.compile(fn, dynamic=True, fullgraph=True)`` with Inductor, counting graphs."""
    from torch._inductor.compile_fx import compile_fx

    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return compile_fx(gm, example_inputs)

    return ctx.compiled(fn, backend=backend, dynamic=True, fullgraph=True), count


def seeded(seed: int):
    torch.manual_seed(seed)


def randn(shape, dtype, ctx: Ctx, scale: float = 1.0, requires_grad: bool = False):
    x = torch.randn(shape, device=ctx.dev, dtype=torch.float32) * scale
    return x.to(dtype).requires_grad_(requires_grad)


def grad_of(out, inputs, grad_out):
    return torch.autograd.grad(out, inputs, grad_out)


def spy_wrap_triton():
    """Count calls of torch.library.wrap_triton (the helper looks it up on every launch)."""
    orig = torch.library.wrap_triton
    count = [0]

    def spy(kernel):
        count[0] += 1
        return orig(kernel)

    @contextlib.contextmanager
    def active():
        torch.library.wrap_triton = spy
        try:
            yield count
        finally:
            torch.library.wrap_triton = orig

    return active()


@contextlib.contextmanager
def wrap_forced(module):
    """Launch through ``torch.library.wrap_triton`` always: the launch path before the change.

    Launchers that launch through ``CachedLaunches`` reach ``launchable`` in ``_triton``, and
    take that path only where ``launch_state`` gives them no state.
    """
    from attnops_kernels import _triton

    forced = {
        "launchable": lambda kernel, like: torch.library.wrap_triton(kernel),
        "launch_state": lambda like: None,
    }
    saved = [
        (m, name, getattr(m, name))
        for m in {module, _triton}
        for name in forced
        if hasattr(m, name)
    ]
    for m, name, _ in saved:
        setattr(m, name, forced[name])
    try:
        yield
    finally:
        for m, name, orig in saved:
            setattr(m, name, orig)


def first_call(ctx: Ctx, op: str, call: Callable, sizes: list[Callable[[], tuple]]) -> dict:
    """First eager call (cold), second call, wrap_triton calls in eager use, then the first
    ``torch.compile(dynamic=True, fullgraph=True)`` call (graphs the backend compiled in it) and
    the graphs compiled for two more sizes (recompiles)."""
    row: dict = {}
    inputs = sizes[0]()
    ctx.sync()
    start = time.perf_counter()
    eager = call(*inputs)
    ctx.sync()
    row["first eager ms"] = (time.perf_counter() - start) * 1e3
    with spy_wrap_triton() as wrapped:
        start = time.perf_counter()
        call(*sizes[0]())
        ctx.sync()
        row["second eager ms"] = (time.perf_counter() - start) * 1e3
    row["eager wrap_triton calls"] = wrapped[0]

    def compiled():
        fn, count = counting_compile(ctx, call)
        profiler = cProfile.Profile() if ctx.profile_compile else None
        start = time.perf_counter()
        try:
            with profiler if profiler is not None else contextlib.nullcontext():
                out = fn(*sizes[0]())
                ctx.sync()
        finally:
            if profiler is not None:
                # Where a slow first compile spends its time, cumulative, for the logs.
                with open(Path(ctx.out) / f"{op}-first-compile.txt", "w") as f:
                    pstats.Stats(profiler, stream=f).sort_stats("cumulative").print_stats(60)
        row["first compile s"] = time.perf_counter() - start
        diffs = [
            max_abs_diff(a, b)
            for a, b in zip(out, eager, strict=False)
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        ]
        row["compiled vs eager"] = max(diffs) if diffs else 0.0
        row["backend compiles, 1st call"] = first = count[0]
        for make in sizes[1:]:
            fn(*make())
        ctx.sync()
        row["recompiles, sizes 2-3"] = count[0] - first

    if not ctx.compile_on:
        row["first compile s"] = NA("n/a (--no-compile)")
        return row
    err = ctx.cell(f"{op} first compile", compiled)
    if isinstance(err, NA):
        row["first compile s"] = err
    return row


def plot(ctx: Ctx, name: str, title: str, xlabel: str, ylabel: str, xs, series: dict) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped (no matplotlib)"
    if not any(isinstance(y, (int, float)) for ys in series.values() for y in ys):
        return f"plot {name}: no data"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = [str(x) for x in xs]
    pos = list(range(len(xs)))
    for label, ys in series.items():
        pts = [
            (p, y)
            for p, y in zip(pos, ys, strict=True)
            if isinstance(y, (int, float)) and math.isfinite(y)
        ]
        if pts:
            ax.plot([p for p, _ in pts], [y for _, y in pts], marker="o", label=label)
    ax.set_xticks(pos, labels, rotation=15 if max(len(s) for s in labels) > 8 else 0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = ctx.out / f"{name}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot: {path}"


def host_table(ctx: Ctx, rows: list[tuple[str, object, object]]) -> str:
    """rows: (implementation, fwd µs or NA, fwd+bwd µs or NA); ratios against the first row."""
    ours_f, ours_b = rows[0][1], rows[0][2]
    body = [(name, fmt(f), ratio(f, ours_f), fmt(b), ratio(b, ours_b)) for name, f, b in rows]
    head = ("implementation", "fwd us", "÷ ours", "fwd+bwd us", "÷ ours")
    return markdown(head, body)


def check_row(what: str, diff, scale, atol: float, rtol: float):
    if isinstance(diff, str):
        verdict = "error" if diff.startswith("err") else diff.split(" ")[0].rstrip(":")
        return (what, diff, "-", "-", verdict)
    tol = atol + rtol * (scale if isinstance(scale, (int, float)) else 0.0)
    return (what, f"{diff:.3g}", fmt(scale, 3), f"{tol:.3g}", "pass" if diff <= tol else "FAIL")


def numerics_table(rows) -> str:
    return markdown(("check", "max abs diff", "max abs ref", "tolerance", "result"), rows)


def compare(ctx: Ctx, what: str, ours_fn, base_fn, atol: float, rtol: float):
    """One numerics row: ``max |ours - base|`` against ``atol + rtol * max |base|``."""

    def run():
        a, b = ours_fn(), base_fn()
        return max_abs_diff(a, b), max_abs(b)

    got = call_or_na(ctx, what, run) if not isinstance(base_fn, NA) else base_fn
    if isinstance(got, str):
        return check_row(what, got, None, atol, rtol)
    return check_row(what, got[0], got[1], atol, rtol)


# ---------------------------------------------------------------------------------------------
# Operators. Each: first_call(ctx) -> row; fla_jobs(ctx) -> {job: fn} (fla-core autotuning of
# exactly the calls measured later); prepare(ctx) (compiles, warm-ups, nothing timed);
# measure(ctx) -> markdown lines.
# ---------------------------------------------------------------------------------------------


def host_row(ctx: Ctx, name: str, fwd, fwdbwd, force=None) -> tuple:
    """(name, fwd us, fwd+bwd us): ``fwd`` timed without grad, ``fwdbwd`` with; an NA passes
    through; ``force``: a launcher module whose launches go through wrap_triton meanwhile."""

    def one(fn, grad):
        if isinstance(fn, NA):
            return fn
        if fn is None:
            return NA("n/a")

        def run():
            with wrap_forced(force) if force is not None else contextlib.nullcontext():
                return ctx.host(fn, grad=grad)

        return ctx.cell(f"host {name}", run)

    return (name, one(fwd, False), one(fwdbwd, True))


def gpu_times(ctx: Ctx, impls: dict, calls: int = 20) -> dict:
    """name -> GPU us per call, for name -> (fn, grad) or an NA; ``calls`` per CUDA graph."""
    out = {}
    for name, impl in impls.items():
        if isinstance(impl, NA):
            out[name] = impl
        else:
            fn, grad = impl
            out[name] = ctx.cell(
                f"gpu {name}", lambda fn=fn, grad=grad: ctx.gpu(fn, grad=grad, calls=calls)
            )
    return out


def per_s(amount: float, us) -> float | None:
    """``amount`` per microsecond / 1e6: TB/s for bytes, TFLOP/s for FLOPs."""
    return amount / us / 1e6 if isinstance(us, float) and us > 0 else None


def pct(copy_us, t) -> str:
    if isinstance(copy_us, float) and isinstance(t, float) and t > 0:
        return f"{100 * copy_us / t:.0f}%"
    return "-"


def pct_peak(tflops) -> str:
    return f"{100 * tflops / PEAK_TFLOPS:.0f}%" if isinstance(tflops, float) else "-"


NO_CREF = NA("n/a (--quick/--no-compile/time)")
# The varying dim of the first-call compile checks: equal to no other dim of those inputs (duck
# sizing would tie them and recompile) and never 0 or 1 (specialized).
FIRST_CALL_SIZES = (24, 40, 56)


class L2norm:
    name = "l2norm"
    EPS = 1e-6

    def __init__(self, ctx: Ctx):
        import attnops
        from attnops_kernels.l2norm import reference
        from attnops_kernels.l2norm import triton as launchers

        self.public = attnops.l2norm
        self.mod = launchers
        self.ref = reference.l2norm_ref
        self.dt = torch.bfloat16
        self.small = (2, 4, 2, 32) if ctx.dry else (4, 16, 16, 128)
        self.Ds = (32, 64) if ctx.dry else ((128,) if ctx.quick else (64, 128, 256))
        self.lead = (2, 16, 2) if ctx.dry else (4, 8192, 16)
        self.cref = {}

    def inputs(self, ctx, shape, grad=False):
        seeded(0)
        return randn(shape, self.dt, ctx, requires_grad=grad), randn(shape, self.dt, ctx)

    def first_call(self, ctx):
        D = self.small[-1]
        sizes = [lambda t=t: self.inputs(ctx, (4, t, 16, D))[:1] for t in FIRST_CALL_SIZES]
        return first_call(ctx, self.name, self.public, sizes)

    def fla_jobs(self, ctx):
        def job(shape):
            def run():
                x, gy = self.inputs(ctx, shape, grad=True)
                with torch.no_grad():
                    ctx.fla.l2norm(x)
                grad_of(ctx.fla.l2norm(x), x, gy)
                ctx.sync()

            return run

        return {"small": job(self.small), **{f"D{D}": job((*self.lead, D)) for D in self.Ds}}

    def prepare(self, ctx):
        if ctx.refs_on():
            self.cref = {
                "fwd": ctx.compiled(self.ref, dynamic=False),
                "fwdbwd": ctx.compiled(self.ref, dynamic=False),
            }
            x, gy = self.inputs(ctx, self.small, grad=True)
            with torch.no_grad():
                self.cref["fwd"](x, self.EPS)
            grad_of(self.cref["fwdbwd"](x, self.EPS), x, gy.float())
            for D in self.Ds:
                with torch.no_grad():
                    self.cref["fwd"](self.inputs(ctx, (*self.lead, D))[0], self.EPS)
        for shape in [self.small] + [(*self.lead, D) for D in self.Ds]:
            x, gy = self.inputs(ctx, shape, grad=True)
            grad_of(self.public(x).y, x, gy)
        ctx.sync()

    def nbytes(self, shape, bwd):
        n, rows = math.prod(shape), math.prod(shape[:-1])
        fwd = 2 * n * self.dt.itemsize + 4 * rows
        return fwd + (3 * n * self.dt.itemsize + 4 * rows if bwd else 0)

    def measure(self, ctx):
        fla = fla_fn(ctx, "l2norm")
        x, gy = self.inputs(ctx, self.small, grad=True)
        xd, eps = x.detach(), self.EPS
        lf, lb = self.mod.l2norm_fwd, self.mod.l2norm_bwd

        def launch_fb():
            _y, rstd = lf(xd, eps)
            lb(gy, xd, rstd)

        plain = plain_function(lf, lb)

        rows = [
            host_row(
                ctx,
                "attnops.l2norm",
                lambda: self.public(xd),
                lambda: grad_of(self.public(x).y, x, gy),
            ),
            host_row(ctx, "launchers (raw launch)", lambda: lf(xd, eps), launch_fb),
            host_row(
                ctx,
                "plain autograd.Function over the launchers",
                lambda: plain.apply(xd, eps),
                lambda: grad_of(plain.apply(x, eps), x, gy),
            ),
            host_row(
                ctx,
                "launchers, wrap_triton forced (old path)",
                lambda: lf(xd, eps),
                launch_fb,
                force=self.mod,
            ),
            host_row(
                ctx,
                "fla l2norm",
                fla if isinstance(fla, NA) else lambda: fla(xd),
                fla if isinstance(fla, NA) else lambda: grad_of(fla(x), x, gy),
            ),
        ]
        if self.cref:
            cf, cb, gy32 = self.cref["fwd"], self.cref["fwdbwd"], gy.float()
            rows.append(
                host_row(
                    ctx,
                    "torch.compile(l2norm_ref)",
                    lambda: cf(xd, eps),
                    lambda: grad_of(cb(x, eps), x, gy32),
                )
            )
        else:
            rows.append(("torch.compile(l2norm_ref)", NO_CREF, NO_CREF))
        ctx.record(self.name, "host", rows)
        out = [f"### host cost per call, x = {self.small} bf16 (us; ÷ ours: this / ours)"]
        out.append(host_table(ctx, rows))

        table, checks = [], []
        names = ("ours fwd", "fla fwd", "compile(ref) fwd", "ours fwd+bwd", "fla fwd+bwd")
        series = {k: [] for k in (*names, COPY)}
        for D in self.Ds:
            row, t = self.gpu_shape(ctx, (*self.lead, D), fla, series)
            table.append(row)
            ctx.record(self.name, f"gpu D={D}", t)
            checks += self.checks(ctx, (*self.lead, D), fla)
        out.append(
            f"### GPU time (CUDA-graph replay), x = {(*self.lead, 'D')} bf16: us, TB/s, % of a "
            "d2d copy of the same bytes (x, y, rstd; backward adds x, dy, rstd, dx); "
            "ratios baseline / ours"
        )
        head = ("shape", "ours fwd", "TB/s", "% copy", "fla fwd", "fla TB/s", "fla÷ours")
        head += ("compile(ref)", "cref÷ours", "ours f+b", "TB/s", "% copy", "fla f+b", "fla÷ours")
        out.append(markdown(head, table))
        out.append("### numerics")
        out.append(numerics_table(checks))
        out.append(
            plot(
                ctx, "l2norm", f"l2norm, x = {(*self.lead, 'D')} bf16", "D", "TB/s", self.Ds, series
            )
        )
        return out

    def gpu_shape(self, ctx, shape, fla, series):
        x, gy = self.inputs(ctx, shape, grad=True)
        xd = x.detach()
        impls = {
            "ours fwd": (lambda: self.public(xd), False),
            "ours fwd+bwd": (lambda: grad_of(self.public(x).y, x, gy), True),
            "fla fwd": fla if isinstance(fla, NA) else (lambda: fla(xd), False),
            "fla fwd+bwd": fla if isinstance(fla, NA) else (lambda: grad_of(fla(x), x, gy), True),
            "compile(ref) fwd": NO_CREF
            if not self.cref
            else (lambda: self.cref["fwd"](xd, self.EPS), False),
        }
        t = gpu_times(ctx, impls)
        bf, bb = self.nbytes(shape, False), self.nbytes(shape, True)
        t["copy fwd bytes"] = ctx.cell("copy", lambda: ctx.copy_us(bf))
        t["copy fwd+bwd bytes"] = ctx.cell("copy", lambda: ctx.copy_us(bb))
        for k in series:
            if k == COPY:
                series[k].append(per_s(bf, t["copy fwd bytes"]))
            else:
                series[k].append(per_s(bb if "bwd" in k else bf, t[k]))
        of, ob = t["ours fwd"], t["ours fwd+bwd"]
        row = (
            f"D={shape[-1]}",
            fmt(of),
            fmt(per_s(bf, of), 2),
            pct(t["copy fwd bytes"], of),
            fmt(t["fla fwd"]),
            fmt(per_s(bf, t["fla fwd"]), 2),
            ratio(t["fla fwd"], of),
            fmt(t["compile(ref) fwd"]),
            ratio(t["compile(ref) fwd"], of),
            fmt(ob),
            fmt(per_s(bb, ob), 2),
            pct(t["copy fwd+bwd bytes"], ob),
            fmt(t["fla fwd+bwd"]),
            ratio(t["fla fwd+bwd"], ob),
        )
        return row, t

    def checks(self, ctx, shape, fla):
        x, gy = self.inputs(ctx, shape, grad=True)
        xd, D = x.detach(), shape[-1]
        rows = [
            compare(
                ctx,
                f"D={D} y: ours vs l2norm_ref (fp32)",
                lambda: self.public(xd).y,
                lambda: self.ref(xd),
                1.6e-2,
                0,
            ),
            compare(
                ctx,
                f"D={D} y: ours vs fla",
                lambda: self.public(xd).y,
                fla_call(fla, xd),
                1.6e-2,
                0,
            ),
        ]
        if isinstance(fla, NA):
            rows.append(check_row(f"D={D} grad x: ours vs fla", fla, None, 0, 0))
        else:
            rows.append(
                compare(
                    ctx,
                    f"D={D} grad x: ours vs fla",
                    lambda: grad_of(self.public(x).y, x, gy)[0],
                    lambda: grad_of(fla(x), x, gy)[0],
                    0,
                    2e-2,
                )
            )
        return rows


def plain_function(fwd, bwd) -> type[torch.autograd.Function]:
    """An ``autograd.Function`` over the raw l2norm launchers: no registration, no validation,
    no NamedTuple; the floor the generated forward + backward is held against."""

    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, eps):
            y, rstd = fwd(x, eps)
            ctx.save_for_backward(x, rstd)
            return y

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad_y):
            x, rstd = ctx.saved_tensors
            return bwd(grad_y, x, rstd), None

    return Plain


def fla_call(fla, *args, **kwargs):
    """A thunk calling fla-core, or the NA that says why there is none."""
    if isinstance(fla, NA):
        return fla
    return lambda: fla(*args, **kwargs)


class Gate:
    name = "gate"
    KINDS = ("softplus", "lower_bound")

    def __init__(self, ctx: Ctx):
        import attnops
        from attnops_kernels.gate import reference
        from attnops_kernels.gate import triton as launchers

        self.public = attnops.gate
        self.mod = launchers
        self.ref = reference.gate_ref
        self.dt = torch.bfloat16
        if ctx.dry:
            self.B, self.H, self.K, self.small_T, self.Ts = 2, 2, 16, 4, (8, 16)
        else:
            self.B, self.H, self.K, self.small_T = 4, 16, 128, 16
            self.Ts = (8192,) if ctx.quick else (1024, 2048, 4096, 8192)
        self.cref = {}

    def inputs(self, ctx, T, grad=False):
        seeded(0)
        H, K = self.H, self.K
        g = randn((self.B, T, H, K), self.dt, ctx, requires_grad=grad)
        A = randn((H,), torch.float32, ctx, 0.5, requires_grad=grad)
        b = randn((H * K,), torch.float32, ctx, 0.5, requires_grad=grad)
        go = randn((self.B, T, H, K), torch.float32, ctx)
        return g, A, b, go

    @staticmethod
    def lower_bound(kind):
        """fla-core's argument for ``kind``: None selects softplus, a number lower_bound."""
        return None if kind == "softplus" else -5.0

    def first_call(self, ctx):
        sizes = [lambda t=t: self.inputs(ctx, t)[:3] for t in FIRST_CALL_SIZES]
        return first_call(ctx, self.name, self.public, sizes)

    def fla_jobs(self, ctx):
        def run():
            for T in (self.small_T, *self.Ts):
                g, A, b, go = self.inputs(ctx, T, grad=True)
                for kind in self.KINDS:
                    lb = self.lower_bound(kind)
                    with torch.no_grad():
                        ctx.fla.gate(g, A, b, lower_bound=lb)
                    grad_of(ctx.fla.gate(g, A, b, lower_bound=lb), (g, A, b), go)
            ctx.sync()

        return {"all": run}

    def prepare(self, ctx):
        if ctx.refs_on():
            # torch.compile's default (automatic dynamic): a static graph for the first size,
            # then one with T dynamic for the others.
            ref = self.ref
            self.cref = {
                "softplus": ctx.compiled(lambda g, A, b: ref(g, A, b, "softplus", -5.0)),
                "lower_bound": ctx.compiled(lambda g, A, b: ref(g, A, b, "lower_bound", -5.0)),
                "fwdbwd": ctx.compiled(lambda g, A, b: ref(g, A, b, "softplus", -5.0)),
            }
            g, A, b, go = self.inputs(ctx, self.small_T, grad=True)
            with torch.no_grad():
                self.cref["softplus"](g, A, b)
            grad_of(self.cref["fwdbwd"](g, A, b), (g, A, b), go)
            for T in self.Ts:
                g, A, b, _ = self.inputs(ctx, T)
                with torch.no_grad():
                    self.cref["softplus"](g, A, b)
                    if T == self.Ts[-1]:
                        self.cref["lower_bound"](g, A, b)
        for T in (self.small_T, *self.Ts):
            g, A, b, go = self.inputs(ctx, T, grad=True)
            for kind in self.KINDS:
                grad_of(self.public(g, A, b, kind).out, (g, A, b), go)
        ctx.sync()

    def nbytes(self, T, bwd):
        n = self.B * T * self.H * self.K
        return n * (self.dt.itemsize + 4) + (n * (2 * self.dt.itemsize + 4) if bwd else 0)

    def measure(self, ctx):
        fla = fla_fn(ctx, "gate")
        g, A, b, go = self.inputs(ctx, self.small_T, grad=True)
        gd, Ad, bd = g.detach(), A.detach(), b.detach()
        lf, lb = self.mod.gate_fwd, self.mod.gate_bwd

        def launch_f():
            lf(gd, Ad, bd, "softplus", -5.0)

        def launch_fb():
            lf(gd, Ad, bd, "softplus", -5.0)
            lb(gd, Ad, bd, go, "softplus", -5.0)

        rows = [
            host_row(
                ctx,
                "attnops.gate",
                lambda: self.public(gd, Ad, bd),
                lambda: grad_of(self.public(g, A, b).out, (g, A, b), go),
            ),
            host_row(ctx, "launchers (raw launch)", launch_f, launch_fb),
            host_row(
                ctx, "launchers, wrap_triton forced (old path)", launch_f, launch_fb, force=self.mod
            ),
            host_row(
                ctx,
                "fla fused_kda_gate",
                fla_call(fla, gd, Ad, bd),
                fla if isinstance(fla, NA) else lambda: grad_of(fla(g, A, b), (g, A, b), go),
            ),
        ]
        if self.cref:
            cf, cb = self.cref["softplus"], self.cref["fwdbwd"]
            rows.append(
                host_row(
                    ctx,
                    "torch.compile(gate_ref)",
                    lambda: cf(gd, Ad, bd),
                    lambda: grad_of(cb(g, A, b), (g, A, b), go),
                )
            )
        else:
            rows.append(("torch.compile(gate_ref)", NO_CREF, NO_CREF))
        ctx.record(self.name, "host", rows)
        shape = (self.B, self.small_T, self.H, self.K)
        out = [
            f"### host cost per call, kind softplus, g = {shape} bf16, A_log and dt_bias "
            "given (us; ÷ ours: this / ours)"
        ]
        out.append(host_table(ctx, rows))

        table, checks = [], []
        names = ("ours fwd", "fla fwd", "compile(ref) fwd", "ours fwd+bwd", "fla fwd+bwd")
        series = {k: [] for k in (*names, COPY)}
        for T in self.Ts:
            kinds = self.KINDS if T == self.Ts[-1] else self.KINDS[:1]
            for kind in kinds:
                row, t = self.gpu_shape(ctx, T, kind, fla, series if kind == "softplus" else None)
                table.append(row)
                ctx.record(self.name, f"gpu T={T} {kind}", t)
                if T == self.Ts[-1]:
                    checks += self.checks(ctx, T, kind, fla)
        out.append(
            f"### GPU time (CUDA-graph replay), g = ({self.B}, T, {self.H}, {self.K}) bf16, "
            "out fp32: us, TB/s, % of a copy of the same bytes; ratios baseline / ours"
        )
        head = ("shape, kind", "ours fwd", "TB/s", "% copy", "fla fwd", "fla÷ours")
        head += ("compile(ref)", "cref÷ours", "ours f+b", "TB/s", "% copy", "fla f+b", "fla÷ours")
        out.append(markdown(head, table))
        out.append("### numerics")
        out.append(numerics_table(checks))
        title = f"gate softplus, g = ({self.B}, T, {self.H}, {self.K}) bf16"
        out.append(plot(ctx, "gate", title, "T", "TB/s", self.Ts, series))
        return out

    def gpu_shape(self, ctx, T, kind, fla, series):
        g, A, b, go = self.inputs(ctx, T, grad=True)
        gd, Ad, bd = g.detach(), A.detach(), b.detach()
        lb = self.lower_bound(kind)
        impls = {
            "ours fwd": (lambda: self.public(gd, Ad, bd, kind), False),
            "ours fwd+bwd": (lambda: grad_of(self.public(g, A, b, kind).out, (g, A, b), go), True),
            "fla fwd": fla
            if isinstance(fla, NA)
            else (lambda: fla(gd, Ad, bd, lower_bound=lb), False),
            "fla fwd+bwd": fla
            if isinstance(fla, NA)
            else (lambda: grad_of(fla(g, A, b, lower_bound=lb), (g, A, b), go), True),
            "compile(ref) fwd": (lambda: self.cref[kind](gd, Ad, bd), False)
            if kind in self.cref
            else NO_CREF,
        }
        t = gpu_times(ctx, impls)
        bf, bb = self.nbytes(T, False), self.nbytes(T, True)
        t["copy fwd bytes"] = ctx.cell("copy", lambda: ctx.copy_us(bf))
        t["copy fwd+bwd bytes"] = ctx.cell("copy", lambda: ctx.copy_us(bb))
        for k in series or ():
            if k == COPY:
                series[k].append(per_s(bf, t["copy fwd bytes"]))
            else:
                series[k].append(per_s(bb if "bwd" in k else bf, t[k]))
        of, ob = t["ours fwd"], t["ours fwd+bwd"]
        row = (
            f"T={T} {kind}",
            fmt(of),
            fmt(per_s(bf, of), 2),
            pct(t["copy fwd bytes"], of),
            fmt(t["fla fwd"]),
            ratio(t["fla fwd"], of),
            fmt(t["compile(ref) fwd"]),
            ratio(t["compile(ref) fwd"], of),
            fmt(ob),
            fmt(per_s(bb, ob), 2),
            pct(t["copy fwd+bwd bytes"], ob),
            fmt(t["fla fwd+bwd"]),
            ratio(t["fla fwd+bwd"], ob),
        )
        return row, t

    def checks(self, ctx, T, kind, fla):
        g, A, b, go = self.inputs(ctx, T, grad=True)
        gd, Ad, bd = g.detach(), A.detach(), b.detach()
        lb = self.lower_bound(kind)

        def ours():
            return self.public(gd, Ad, bd, kind).out

        rows = [
            compare(
                ctx,
                f"{kind} out: ours vs gate_ref",
                ours,
                lambda: self.ref(gd, Ad, bd, kind, -5.0),
                1e-5,
                1e-5,
            ),
            compare(
                ctx,
                f"{kind} out: ours vs fla",
                ours,
                fla_call(fla, gd, Ad, bd, lower_bound=lb),
                1e-5,
                1e-5,
            ),
        ]
        if isinstance(fla, NA):
            return rows
        grads = {
            "ours": grad_of(self.public(g, A, b, kind).out, (g, A, b), go),
            "fla": grad_of(fla(g, A, b, lower_bound=lb), (g, A, b), go),
        }
        for i, (name, rtol) in enumerate((("dg", 1e-2), ("dA_log", 1e-3), ("ddt_bias", 1e-3))):
            rows.append(
                compare(
                    ctx,
                    f"{kind} {name}: ours vs fla",
                    lambda i=i: grads["ours"][i],
                    lambda i=i: grads["fla"][i],
                    0,
                    rtol,
                )
            )
        return rows


class ChunkGla:
    name = "chunk_gla"

    def __init__(self, ctx: Ctx):
        import attnops
        from attnops_kernels.chunk_gla import reference
        from attnops_kernels.chunk_gla import triton as launchers

        self.public = attnops.chunk_gla
        self.mod = launchers
        self.ref = reference.chunk_gla_ref
        self.dt = torch.bfloat16
        if ctx.dry:
            self.small = (1, 16, 2, 16, 16)
            self.shapes = [(1, 32, 2, 16, 16), (2, 16, 2, 16, 16)]
            self.cref_shape = (1, 4, 2, 16, 16)
        else:
            self.small = (1, 64, 4, 64, 64)
            self.shapes = [
                (4, 4096, 16, 128, 128),
                (8, 2048, 32, 64, 64),
                (1, 32768, 16, 128, 128),
                (1, 8192, 4, 128, 128),
            ][: 1 if ctx.quick else 4]
            self.cref_shape = (1, 8, 4, 64, 64)
        self.cref = None

    def inputs(self, ctx, shape, grad=False):
        B, T, H, K, V = shape
        seeded(0)
        q = randn((B, T, H, K), self.dt, ctx, requires_grad=grad)
        k = randn((B, T, H, K), self.dt, ctx, requires_grad=grad)
        v = randn((B, T, H, V), self.dt, ctx, requires_grad=grad)
        g = F.logsigmoid(torch.randn((B, T, H), device=ctx.dev)).requires_grad_(grad)
        do = randn((B, T, H, V), self.dt, ctx)
        return q, k, v, g, do

    @staticmethod
    def label(shape):
        return "B{} T{} H{} K{} V{}".format(*shape)

    @staticmethod
    def flops(shape, bwd=False):
        """Per token and head, forward: q k^T and A v inside a chunk of 64 (2 * 64 * (K + V))
        plus q S and k^T v (4 * K * V); forward + backward counted as 3x the forward."""
        B, T, H, K, V = shape
        f = B * T * H * (2 * 64 * (K + V) + 4 * K * V)
        return 3 * f if bwd else f

    def first_call(self, ctx):
        B, _, H, K, V = self.small
        sizes = [lambda t=t: self.inputs(ctx, (B, t, H, K, V))[:4] for t in FIRST_CALL_SIZES]
        return first_call(ctx, self.name, self.public, sizes)

    def fla_bwd_na(self, ctx):
        if ctx.fla is not None and ctx.fla.chunk_bwd_refused:
            return NA("n/a (fla refuses its gated bwd on Triton 3.4-3.7.0 on Hopper)")
        return None

    def fla_jobs(self, ctx):
        def job(shape):
            def run():
                q, k, v, g, _ = self.inputs(ctx, shape)
                with torch.no_grad():
                    ctx.fla.chunk(q, k, v, g)
                ctx.sync()

            return run

        return {"small": job(self.small), **{f"s{i}": job(s) for i, s in enumerate(self.shapes)}}

    def prepare(self, ctx):
        if ctx.refs_on():
            ref = self.ref
            self.cref = ctx.compiled(lambda q, k, v, g: ref(q, k, v, g)[0], dynamic=False)
            with torch.no_grad():
                self.cref(*self.inputs(ctx, self.cref_shape)[:4])
        for shape in [self.small, *self.shapes]:
            q, k, v, g, do = self.inputs(ctx, shape, grad=True)
            grad_of(self.public(q, k, v, g).output, (q, k, v, g), do)
        ctx.sync()

    def measure(self, ctx):
        fla = fla_fn(ctx, "chunk")
        fla_bwd = self.fla_bwd_na(ctx)
        q, k, v, g, do = self.inputs(ctx, self.small, grad=True)
        qd, kd, vd, gd = (t.detach() for t in (q, k, v, g))
        lf, lb = self.mod.chunk_gla_fwd, self.mod.chunk_gla_bwd

        def launch_f():
            lf(qd, kd, vd, gd, None, None, None, False)

        def launch_fb():
            hs = lf(qd, kd, vd, gd, None, None, None, False)[1]
            lb(qd, kd, vd, gd, None, None, None, do, None, hs)

        if isinstance(fla, NA):
            fla_fb = fla
        else:
            fla_fb = fla_bwd or (lambda: grad_of(fla(q, k, v, g)[0], (q, k, v, g), do))
        rows = [
            host_row(
                ctx,
                "attnops.chunk_gla",
                lambda: self.public(qd, kd, vd, gd),
                lambda: grad_of(self.public(q, k, v, g).output, (q, k, v, g), do),
            ),
            host_row(ctx, "launchers (raw launch)", launch_f, launch_fb),
            host_row(
                ctx, "launchers, wrap_triton forced (old path)", launch_f, launch_fb, force=self.mod
            ),
            host_row(ctx, "fla chunk_simple_gla", fla_call(fla, qd, kd, vd, gd), fla_fb),
        ]
        name = f"torch.compile(chunk_gla_ref), {self.label(self.cref_shape)}"
        if self.cref is not None:
            cq, ck, cv, cg, _ = self.inputs(ctx, self.cref_shape)
            rows.append(host_row(ctx, name, lambda: self.cref(cq, ck, cv, cg), None))
        else:
            rows.append((name, NO_CREF, NA("n/a")))
        ctx.record(self.name, "host", rows)
        out = [f"### host cost per call, {self.label(self.small)} bf16 (us; ÷ ours: this / ours)"]
        out.append(host_table(ctx, rows))

        table, checks = [], []
        series = {"ours fwd": [], "fla fwd": [], "ours fwd+bwd": []}
        for shape in self.shapes:
            row, t = self.gpu_shape(ctx, shape, fla, fla_bwd, series)
            table.append(row)
            ctx.record(self.name, f"gpu {self.label(shape)}", t)
            checks.append(self.check_fla(ctx, shape, fla))
        checks += self.small_checks(ctx, fla)
        out.append(
            "### GPU time (CUDA-graph replay), q/k/v bf16, g = logsigmoid(randn) fp32: us, "
            f"TFLOP/s, % of {PEAK_TFLOPS:.0f}; ours bwd = (fwd+bwd) - fwd; FLOPs "
            "B*T*H*(128*(K+V) + 4*K*V) forward, 3x that forward+backward"
        )
        head = ("shape", "ours fwd", "TFLOP/s", "% peak", "fla fwd", "fla TFLOP/s", "fla÷ours")
        head += ("ours f+b", "ours bwd", "f+b TFLOP/s", "% peak", "fla f+b")
        out.append(markdown(head, table))
        out.append("### numerics")
        out.append(numerics_table(checks))
        labels = [self.label(s) for s in self.shapes]
        out.append(plot(ctx, "chunk_gla", "chunk_gla bf16", "shape", "TFLOP/s", labels, series))
        return out

    def gpu_shape(self, ctx, shape, fla, fla_bwd, series):
        q, k, v, g, do = self.inputs(ctx, shape, grad=True)
        qd, kd, vd, gd = (t.detach() for t in (q, k, v, g))
        if isinstance(fla, NA):
            fla_f = fla_fb = fla
        else:
            fla_f = (lambda: fla(qd, kd, vd, gd), False)
            fla_fb = fla_bwd or (lambda: grad_of(fla(q, k, v, g)[0], (q, k, v, g), do), True)
        impls = {
            "ours fwd": (lambda: self.public(qd, kd, vd, gd), False),
            "ours fwd+bwd": (
                lambda: grad_of(self.public(q, k, v, g).output, (q, k, v, g), do),
                True,
            ),
            "fla fwd": fla_f,
            "fla fwd+bwd": fla_fb,
        }
        t = gpu_times(ctx, impls)
        of, ob = t["ours fwd"], t["ours fwd+bwd"]
        ff, fb = self.flops(shape), self.flops(shape, True)
        series["ours fwd"].append(per_s(ff, of))
        series["fla fwd"].append(per_s(ff, t["fla fwd"]))
        series["ours fwd+bwd"].append(per_s(fb, ob))
        bwd_only = ob - of if isinstance(of, float) and isinstance(ob, float) else None
        row = (
            self.label(shape),
            fmt(of),
            fmt(per_s(ff, of)),
            pct_peak(per_s(ff, of)),
            fmt(t["fla fwd"]),
            fmt(per_s(ff, t["fla fwd"])),
            ratio(t["fla fwd"], of),
            fmt(ob),
            fmt(bwd_only),
            fmt(per_s(fb, ob)),
            pct_peak(per_s(fb, ob)),
            fmt(t["fla fwd+bwd"]),
        )
        return row, t

    def check_fla(self, ctx, shape, fla):
        q, k, v, g, _ = self.inputs(ctx, shape)
        return compare(
            ctx,
            f"{self.label(shape)} o: ours vs fla",
            lambda: self.public(q, k, v, g).output,
            fla if isinstance(fla, NA) else lambda: fla(q, k, v, g)[0],
            0,
            3e-2,
        )

    def small_checks(self, ctx, fla):
        q, k, v, g, do = self.inputs(ctx, self.small, grad=True)
        label = self.label(self.small)
        rq, rk, rv, rg = (t.detach().float().requires_grad_(True) for t in (q, k, v, g))
        ro = self.ref(rq, rk, rv, rg)[0]
        ref_grads = grad_of(ro, (rq, rk, rv, rg), do.float())
        out = self.public(q, k, v, g).output
        grads = grad_of(out, (q, k, v, g), do)
        vs = "chunk_gla_ref (fp32)"
        rows = [compare(ctx, f"{label} o: ours vs {vs}", lambda: out, lambda: ro, 0, 2e-2)]
        for i, name in enumerate(("dq", "dk", "dv", "dg")):
            rows.append(
                compare(
                    ctx,
                    f"{label} {name}: ours vs {vs}",
                    lambda i=i: grads[i],
                    lambda i=i: ref_grads[i],
                    0,
                    3e-2,
                )
            )
        if not isinstance(fla, NA):
            qd, kd, vd, gd = (t.detach() for t in (q, k, v, g))
            rows.append(
                compare(
                    ctx,
                    f"{label} o: fla vs {vs}",
                    lambda: fla(qd, kd, vd, gd)[0],
                    lambda: ro,
                    0,
                    2e-2,
                )
            )
        if self.cref is not None:
            cq, ck, cv, cg, _ = self.inputs(ctx, self.cref_shape)
            rows.append(
                compare(
                    ctx,
                    f"{self.label(self.cref_shape)} o: ours vs torch.compile(ref)",
                    lambda: self.public(cq, ck, cv, cg).output,
                    lambda: self.cref(cq, ck, cv, cg),
                    0,
                    2e-2,
                )
            )
        return rows


class RecurrentStep:
    name = "recurrent_gla_step"

    def __init__(self, ctx: Ctx):
        import attnops
        from attnops_kernels.recurrent_gla_step import reference
        from attnops_kernels.recurrent_gla_step import triton as launchers

        self.public = attnops.recurrent_gla_step
        self.mod = launchers
        self.ref = reference.recurrent_gla_step_ref
        self.dt = torch.bfloat16
        if ctx.dry:
            self.small, self.shapes = (1, 2, 16, 16), [(1, 2, 16, 16), (4, 2, 16, 16)]
        else:
            self.small, self.shapes = (1, 4, 64, 64), [(1, 32, 128, 128), (64, 32, 128, 128)]
        self.cref = None

    def inputs(self, ctx, shape):
        B, H, K, V = shape
        seeded(0)
        state = randn((B, H, K, V), torch.float32, ctx, 0.1)
        q = randn((B, H, K), self.dt, ctx)
        k = randn((B, H, K), self.dt, ctx)
        v = randn((B, H, V), self.dt, ctx)
        g = F.logsigmoid(torch.randn((B, H), device=ctx.dev))
        return state, q, k, v, g, K**-0.5

    @staticmethod
    def fla_step(fla, state, q, k, v, g, scale):
        """One step through fla-core's recurrence: T = 1, the new state returned (not in place)."""
        o, ht = fla(
            q[:, None],
            k[:, None],
            v[:, None],
            g[:, None],
            scale=scale,
            initial_state=state,
            output_final_state=True,
        )
        return o[:, 0], ht

    def first_call(self, ctx):
        _, H, K, V = self.small
        sizes = [lambda b=b: self.inputs(ctx, (b, H, K, V)) for b in (2, 3, 5)]
        return first_call(ctx, self.name, self.public, sizes)

    def fla_jobs(self, ctx):
        def run():
            for shape in (self.small, *self.shapes):
                with torch.no_grad():
                    self.fla_step(ctx.fla.recurrent, *self.inputs(ctx, shape))
            ctx.sync()

        return {"all": run}

    def prepare(self, ctx):
        if ctx.refs_on():
            self.cref = ctx.compiled(self.ref, dynamic=False)
            with torch.no_grad():
                self.cref(*self.inputs(ctx, self.small))
        with torch.no_grad():
            for shape in (self.small, *self.shapes):
                self.public(*self.inputs(ctx, shape))
        ctx.sync()

    def nbytes(self, shape):
        B, H, K, V = shape
        return 8 * B * H * K * V + self.dt.itemsize * B * H * (2 * K + 2 * V)

    def measure(self, ctx):
        fla = fla_fn(ctx, "recurrent")
        args = self.inputs(ctx, self.small)
        step = self.mod.recurrent_gla_step
        rows = [
            host_row(ctx, "attnops.recurrent_gla_step", lambda: self.public(*args), None),
            host_row(ctx, "launcher (raw launch)", lambda: step(*args), None),
            host_row(
                ctx, "launcher, wrap_triton forced (old path)", lambda: step(*args), None, self.mod
            ),
            host_row(
                ctx,
                "fla fused_recurrent_simple_gla (T=1)",
                fla if isinstance(fla, NA) else lambda: self.fla_step(fla, *args),
                None,
            ),
        ]
        if self.cref is not None:
            rows.append(
                host_row(
                    ctx, "torch.compile(recurrent_gla_step_ref)", lambda: self.cref(*args), None
                )
            )
        else:
            rows.append(("torch.compile(recurrent_gla_step_ref)", NO_CREF, NA("n/a")))
        ctx.record(self.name, "host", rows)
        out = [
            f"### host cost per call, (B, H, K, V) = {self.small}, q/k/v bf16, state fp32 "
            "(us; no backward)"
        ]
        out.append(host_table(ctx, rows))
        table, checks = [], []
        for shape in self.shapes:
            row, t = self.gpu_shape(ctx, shape, fla)
            table.append(row)
            ctx.record(self.name, "gpu B{} H{} K{} V{}".format(*shape), t)
            checks += self.checks(ctx, shape, fla)
        out.append(
            "### GPU time of one step (CUDA-graph replay): us, TB/s (state read and written, "
            "q, k, v, o), % of a copy of the same bytes; ratio baseline / ours"
        )
        head = ("shape", "ours", "TB/s", "% copy", "fla", "fla TB/s", "fla÷ours", "copy us")
        out.append(markdown(head, table))
        out.append("### numerics")
        out.append(numerics_table(checks))
        return out

    def gpu_shape(self, ctx, shape, fla):
        a = self.inputs(ctx, shape)
        impls = {
            "ours": (lambda: self.public(*a), False),
            "fla": fla if isinstance(fla, NA) else (lambda: self.fla_step(fla, *a), False),
        }
        # Single steps of a few microseconds: many per graph, so its launch is amortized.
        t = gpu_times(ctx, impls, calls=100)
        nbytes = self.nbytes(shape)
        t["copy"] = ctx.cell("copy", lambda: ctx.copy_us(nbytes))
        row = (
            "B{} H{} K{} V{}".format(*shape),
            fmt(t["ours"], 2),
            fmt(per_s(nbytes, t["ours"]), 2),
            pct(t["copy"], t["ours"]),
            fmt(t["fla"], 2),
            fmt(per_s(nbytes, t["fla"]), 2),
            ratio(t["fla"], t["ours"]),
            fmt(t["copy"], 2),
        )
        return row, t

    def checks(self, ctx, shape, fla):
        label = "B{} H{}".format(*shape)
        state, q, k, v, g, scale = self.inputs(ctx, shape)
        s_ours, s_ref = state.clone(), state.clone()
        o_ours = self.public(s_ours, q, k, v, g, scale).output
        with torch.no_grad():
            o_ref = self.ref(s_ref, q, k, v, g, scale)
        rows = [
            compare(
                ctx, f"{label} output: ours vs ref (fp32)", lambda: o_ours, lambda: o_ref, 0, 1e-2
            ),
            compare(
                ctx, f"{label} state: ours vs ref (fp32)", lambda: s_ours, lambda: s_ref, 0, 1e-5
            ),
        ]
        if isinstance(fla, NA):
            rows.append(check_row(f"{label}: ours vs fla", fla, None, 0, 0))
            return rows
        o_fla, s_fla = self.fla_step(fla, state.clone(), q, k, v, g, scale)
        rows.append(
            compare(ctx, f"{label} output: ours vs fla", lambda: o_ours, lambda: o_fla, 0, 1e-2)
        )
        rows.append(
            compare(ctx, f"{label} state: ours vs fla", lambda: s_ours, lambda: s_fla, 0, 1e-5)
        )
        return rows


class BlockMask:
    name = "block_mask_worklist"

    def __init__(self, ctx: Ctx):
        import attnops
        from attnops_kernels.block_mask_worklist import reference
        from attnops_kernels.block_mask_worklist import triton as launchers

        self.public = attnops.block_mask_worklist
        self.mod = launchers
        self.ref = reference.block_mask_worklist_ref
        self.small = (1, 2, 8, 8)
        self.big = (2, 2, 16, 16) if ctx.dry else (8, 16, 128, 128)
        self.cref = None

    @staticmethod
    def mask(ctx, shape, density=0.3):
        seeded(0)
        return torch.rand(shape, device=ctx.dev) < density

    def first_call(self, ctx):
        sizes = [lambda q=q: (self.mask(ctx, (2, 3, q, 8)),) for q in FIRST_CALL_SIZES]
        return first_call(ctx, self.name, self.public, sizes)

    def fla_jobs(self, ctx):
        return {}

    def prepare(self, ctx):
        if ctx.refs_on():
            self.cref = ctx.compiled(self.ref, dynamic=False)
            self.cref(self.mask(ctx, self.small))
        self.public(self.mask(ctx, self.big))
        ctx.sync()

    def measure(self, ctx):
        m, wl = self.mask(ctx, self.small), self.mod.block_mask_worklist
        rows = [
            host_row(ctx, "attnops.block_mask_worklist", lambda: self.public(m), None),
            host_row(ctx, "launcher (raw launch)", lambda: wl(m), None),
            host_row(ctx, "launcher, wrap_triton forced (old path)", lambda: wl(m), None, self.mod),
            host_row(ctx, "torch.nonzero", lambda: torch.nonzero(m), None),
        ]
        if self.cref is not None:
            rows.append(
                host_row(ctx, "torch.compile(block_mask_worklist_ref)", lambda: self.cref(m), None)
            )
        else:
            rows.append(("torch.compile(block_mask_worklist_ref)", NO_CREF, NA("n/a")))
        ctx.record(self.name, "host", rows)
        out = [
            f"### host cost per call, mask {self.small}, 30% True (us; each call reads nnz on "
            "the host, so this is synchronized time)"
        ]
        out.append(host_table(ctx, rows))

        mb = self.mask(ctx, self.big)
        calls, rounds = (3, 2) if ctx.dry else (50, 5)
        impls = {
            "attnops.block_mask_worklist": lambda: self.public(mb),
            "launcher (raw launch)": lambda: wl(mb),
            "torch.nonzero": lambda: torch.nonzero(mb),
            "block_mask_worklist_ref (nonzero + int32)": lambda: self.ref(mb),
        }
        # Rounds in turn, so that a drifting host speed favours none of them.
        t = ctx.cell(
            "synced",
            lambda: synced_us_interleaved(impls, calls=calls, rounds=rounds, sync=ctx.sync),
        )
        if isinstance(t, NA):
            t = dict.fromkeys(impls, t)
        ctx.record(self.name, "synced", t)
        ours = t["attnops.block_mask_worklist"]
        out.append(
            f"### eager time per call, synchronized after each (incl. the host read of nnz), "
            f"mask {self.big}, 30% True (us, median of {rounds} rounds of {calls} calls, the "
            "implementations' rounds in turn; ratio baseline / ours)"
        )
        out.append(
            markdown(
                ("implementation", "us/call", "÷ ours"),
                [(name, fmt(v), ratio(v, ours)) for name, v in t.items()],
            )
        )
        checks = [
            self.exact(ctx, f"mask {s}: ours == nonzero().int()", self.mask(ctx, s), self.ref)
            for s in (self.big, self.small)
        ]
        if self.cref is not None:
            checks.append(
                self.exact(ctx, f"mask {self.small}: ours == torch.compile(ref)", m, self.cref)
            )
        out.append("### numerics")
        out.append(numerics_table(checks))
        return out

    def exact(self, ctx, label, mask, base):
        same = ctx.cell(label, lambda: torch.equal(self.public(mask).coords, base(mask)))
        verdict = "pass" if same is True else ("FAIL" if same is False else same)
        return (
            label,
            "0" if same is True else "-",
            "-",
            "exact",
            verdict,
        )


OP_CLASSES = {
    "l2norm": L2norm,
    "gate": Gate,
    "chunk_gla": ChunkGla,
    "recurrent_gla_step": RecurrentStep,
    "block_mask_worklist": BlockMask,
}


# ---------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------


def guarded(ctx: Ctx, what: str, fn):
    """Run one phase of one operator; a failure is reported and the suite goes on."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        ctx.note(f"{what} FAILED: {traceback.format_exc()}")
        ctx.say(f"**{what} failed**: {type(e).__name__}: {str(e).strip()[:300]}")
        return None


def warm_fla_main(args) -> int:
    """One fla-core autotuning job in its own process (``--warm-fla op:job``)."""
    ctx = Ctx(args)
    load_fla(ctx)
    if ctx.fla is None:
        print(f"fla-core unavailable: {ctx.fla_why}")
        return 1
    op, _, job = args.warm_fla.partition(":")
    start = time.monotonic()
    OP_CLASSES[op](ctx).fla_jobs(ctx)[job]()
    print(f"warm {args.warm_fla}: {time.monotonic() - start:.1f} s")
    return 0


def start_warmers(ctx: Ctx, ops: list) -> list:
    if ctx.fla is None:
        return []
    jobs = [f"{op.name}:{job}" for op in ops for job in op.fla_jobs(ctx)]
    warm_dir = Path(tempfile.mkdtemp(prefix="fla-warm-"))
    procs = []
    base = [sys.executable, str(Path(__file__).resolve()), "--out", str(ctx.out)]
    if ctx.quick:
        base.append("--quick")
    for job in jobs:
        log = open(warm_dir / f"{job.replace(':', '-')}.log", "w+")  # noqa: SIM115
        procs.append(
            (
                job,
                subprocess.Popen([*base, "--warm-fla", job], stdout=log, stderr=subprocess.STDOUT),
                log,
                time.monotonic(),
            )
        )
    ctx.note(f"started {len(procs)} fla-core warm-up processes: {jobs}")
    return procs


def wait_warmers(ctx: Ctx, procs: list, limit: float) -> str:
    if not procs:
        return "fla-core warm-up: none"
    end = time.monotonic() + limit
    lines = []
    for job, proc, log, started in procs:
        try:
            rc = proc.wait(timeout=max(end - time.monotonic(), 1))
            lines.append(f"{job}: rc {rc}, {time.monotonic() - started:.0f} s")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            lines.append(f"{job}: stopped after {limit:.0f} s (the measurement autotunes the rest)")
        log.seek(0)
        ctx.note(f"fla-core warm-up {job} log:\n{log.read()[-4000:]}")
        log.close()
    return "fla-core warm-up (parallel, one process per shape family): " + "; ".join(lines)


def main(args) -> int:
    ctx = Ctx(args)
    # The compiled references specialize on every size they see (dynamic=False): more entries
    # than Dynamo's default limit would silently fall back to eager.
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 64))
    import triton

    gpu = torch.cuda.get_device_name() if ctx.cuda else "no GPU (dry run)"
    load_fla(ctx)
    fla_v = ctx.fla.version if ctx.fla is not None else ctx.fla_why
    ctx.say(f"# attnops benchmark suite ({'dry run, CPU' if ctx.dry else gpu})")
    ctx.say(
        f"torch {torch.__version__}, triton {triton.__version__}, python "
        f"{sys.version.split()[0]}, fla-core {fla_v}; ops: {', '.join(args.op_list)}"
        f"{'; --quick' if args.quick else ''}"
    )
    ctx.say(f"command: {' '.join(sys.argv)}")

    ops = []
    for name in args.op_list:
        op = guarded(ctx, f"{name} setup", lambda name=name: OP_CLASSES[name](ctx))
        if op is not None:
            ops.append(op)

    # Process-level one-time costs, kept out of the first-call figures of the first operator.
    start = time.perf_counter()
    torch.ones(1, device=ctx.dev).add_(1)
    ctx.sync()
    init = {"device init s": time.perf_counter() - start}
    if ctx.compile_on:
        start = time.perf_counter()
        guarded(
            ctx,
            "torch.compile warm-up",
            lambda: counting_compile(ctx, lambda t: t * 2)[0](torch.ones(4, device=ctx.dev)),
        )
        ctx.sync()
        init["torch.compile of t * 2 (Inductor start-up) s"] = time.perf_counter() - start

    ctx.say("\n## first calls (this process, cold caches)")
    ctx.say(", ".join(f"{k}: {v:.2f}" for k, v in init.items()))
    rows = []
    for op in ops:
        row = guarded(ctx, f"{op.name} first call", lambda op=op: op.first_call(ctx))
        if row is None:
            continue
        ctx.record(op.name, "first call", row)
        rows.append(
            (
                op.name,
                fmt(row.get("first eager ms")),
                fmt(row.get("second eager ms"), 2),
                str(row.get("eager wrap_triton calls", "-")),
                fmt(row.get("first compile s"), 2),
                str(row.get("backend compiles, 1st call", "-")),
                str(row.get("recompiles, sizes 2-3", "-")),
                fmt(row.get("compiled vs eager"), 3),
            )
        )
    ctx.say(
        markdown(
            (
                "op",
                "1st eager ms",
                "2nd eager ms",
                "wrap_triton calls (eager)",
                "1st compile s",
                "graphs in 1st compile",
                "recompiles, 2 more sizes",
                "compiled vs eager",
            ),
            rows,
        )
    )
    ctx.say(
        "(1st eager: public function, incl. Triton compile; compile: torch.compile(dynamic=True, "
        "fullgraph=True) with Inductor, inference inputs; wrap_triton calls: launches that went "
        "through torch.library.wrap_triton during an eager call, 0 = raw launches)"
    )

    procs = start_warmers(ctx, ops)
    for op in ops:
        ctx.note(f"{op.name} prepare")
        guarded(ctx, f"{op.name} prepare", lambda op=op: op.prepare(ctx))
    ctx.note("prepared")
    limit = 170.0 if not args.deadline else max(args.deadline - ctx.elapsed() - 90, 10)
    ctx.say("\n" + wait_warmers(ctx, procs, limit))

    for op in ops:
        ctx.say(f"\n## {op.name}")
        ctx.note(f"{op.name} measure")
        lines = guarded(ctx, f"{op.name} measure", lambda op=op: op.measure(ctx))
        for line in lines or []:
            ctx.say(line)
    ctx.say(f"\nsuite: {ctx.elapsed():.0f} s; logs, results.json and plots in {ctx.out}")
    return 0


if __name__ == "__main__":
    if ARGS.warm_fla:
        sys.exit(warm_fla_main(ARGS))
    sys.exit(main(ARGS))
