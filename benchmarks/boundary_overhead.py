"""CPU cost per call of the operator boundaries around one trivial launcher.

Every variant calls the same launchers from ``boundary_launchers`` (they allocate, no math), so the
differences are the boundary: dispatcher registration, autograd wrapping, input validation.

    python benchmarks/boundary_overhead.py [--device cpu|cuda] [--rounds 30] [--calls 2000,500]
                                           [--shape 4,64]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# The launchers are imported by reference ("boundary_launchers:trivial_fwd") while the spec is
# validated and again on first launch; the repo root makes `codegen` importable uninstalled.
sys.path.insert(0, str(BENCH_DIR))
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

import torch  # noqa: E402
from boundary_launchers import trivial_bwd, trivial_fwd  # noqa: E402
from torch import Tensor  # noqa: E402

from codegen.emit.writer import write  # noqa: E402
from codegen.pipeline import generate  # noqa: E402

SPEC_PATH = BENCH_DIR / "boundary.yaml"
BASELINE = "define/impl + Function"
PLAIN = "plain Function"
FAST = "generated, eager fast path"
EPS = 1e-6
Loop = Callable[[int], None]


def load_generated(tmpdir: str):
    files = generate(SPEC_PATH.read_text(encoding="utf-8"), str(SPEC_PATH), SPEC_PATH.name)
    write(files, Path(tmpdir))
    sys.path.insert(0, tmpdir)
    return importlib.import_module("bench_gen")


# define/impl + Function: the generated pattern without input validation and NamedTuple.
torch.library.define(
    "bench_hand::trivial_fwd", "(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)"
)
torch.library.define(
    "bench_hand::trivial_bwd", "(Tensor grad_y, Tensor x, Tensor rstd) -> Tensor grad_x"
)


def _hand_fwd_impl(x: Tensor, eps: float = 1e-06) -> tuple[Tensor, Tensor]:
    return trivial_fwd(x, eps)


def _hand_bwd_impl(grad_y: Tensor, x: Tensor, rstd: Tensor) -> Tensor:
    return trivial_bwd(grad_y, x, rstd)


torch.library.impl("bench_hand::trivial_fwd", "CUDA", _hand_fwd_impl)
torch.library.impl("bench_hand::trivial_fwd", "CPU", _hand_fwd_impl)
torch.library.impl("bench_hand::trivial_bwd", "CUDA", _hand_bwd_impl)
torch.library.impl("bench_hand::trivial_bwd", "CPU", _hand_bwd_impl)


@torch.library.register_fake("bench_hand::trivial_fwd")
def _hand_fwd_fake(x: Tensor, eps: float = 1e-06) -> tuple[Tensor, Tensor]:
    return x.new_empty(x.shape), x.new_empty(x.shape[:-1], dtype=torch.float32)


@torch.library.register_fake("bench_hand::trivial_bwd")
def _hand_bwd_fake(grad_y: Tensor, x: Tensor, rstd: Tensor) -> Tensor:
    return x.new_empty(x.shape)


_hand_fwd = torch.ops.bench_hand.trivial_fwd.default
_hand_bwd = torch.ops.bench_hand.trivial_bwd.default


class _HandFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, eps: float) -> Tensor:
        y, rstd = _hand_fwd(x, eps)
        ctx.save_for_backward(x, rstd)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y: Tensor) -> tuple[Tensor | None, ...]:
        x, rstd = ctx.saved_tensors
        return _hand_bwd(grad_y, x, rstd), None


# custom_op + register_autograd
@torch.library.custom_op("bench_co::trivial_fwd", mutates_args=())
def co_fwd(x: Tensor, eps: float = 1e-06) -> tuple[Tensor, Tensor]:
    return trivial_fwd(x, eps)


@torch.library.custom_op("bench_co::trivial_bwd", mutates_args=())
def co_bwd(grad_y: Tensor, x: Tensor, rstd: Tensor) -> Tensor:
    return trivial_bwd(grad_y, x, rstd)


@co_fwd.register_fake
def _co_fwd_fake(x: Tensor, eps: float = 1e-06) -> tuple[Tensor, Tensor]:
    return x.new_empty(x.shape), x.new_empty(x.shape[:-1], dtype=torch.float32)


@co_bwd.register_fake
def _co_bwd_fake(grad_y: Tensor, x: Tensor, rstd: Tensor) -> Tensor:
    return x.new_empty(x.shape)


def _co_setup_context(ctx, inputs, output) -> None:
    x, _eps = inputs
    _y, rstd = output
    ctx.save_for_backward(x, rstd)


def _co_backward(ctx, grad_y: Tensor, _grad_rstd: Tensor | None) -> tuple[Tensor | None, ...]:
    x, rstd = ctx.saved_tensors
    return co_bwd(grad_y, x, rstd), None


co_fwd.register_autograd(_co_backward, setup_context=_co_setup_context)


# plain Function: no registration; once_differentiable kept so that registration is the only
# difference from the baseline.
class _PlainFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, eps: float) -> Tensor:
        y, rstd = trivial_fwd(x, eps)
        ctx.save_for_backward(x, rstd)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y: Tensor) -> tuple[Tensor | None, ...]:
        x, rstd = ctx.saved_tensors
        return trivial_bwd(grad_y, x, rstd), None


# The loops are written out per variant so the harness adds only a loop iteration per call, not a
# closure call. In fwd+bwd, ``x.grad = None`` keeps AccumulateGrad from adding each new grad_x
# into the last one (an extra add kernel on uninitialised memory); every variant, `direct`
# included, pays that same assignment.
def fwd_loops(gen_trivial: Callable, gen_fast: Callable, x: Tensor) -> dict[str, Loop]:
    def direct(n: int) -> None:
        for _ in range(n):
            trivial_fwd(x, EPS)

    def generated(n: int) -> None:
        for _ in range(n):
            gen_trivial(x, EPS)

    def fast(n: int) -> None:
        for _ in range(n):
            gen_fast(x, EPS)

    def hand(n: int) -> None:
        for _ in range(n):
            _HandFunction.apply(x, EPS)

    def custom_op(n: int) -> None:
        for _ in range(n):
            co_fwd(x, EPS)

    def plain(n: int) -> None:
        for _ in range(n):
            _PlainFunction.apply(x, EPS)

    return _named(direct, generated, fast, hand, custom_op, plain)


def fwd_bwd_loops(
    gen_trivial: Callable, gen_fast: Callable, x: Tensor, grad: Tensor
) -> dict[str, Loop]:
    backward = torch.autograd.backward

    def direct(n: int) -> None:
        for _ in range(n):
            x.grad = None
            _y, rstd = trivial_fwd(x, EPS)
            trivial_bwd(grad, x, rstd)

    def generated(n: int) -> None:
        for _ in range(n):
            x.grad = None
            backward(gen_trivial(x, EPS)[0], grad)

    def fast(n: int) -> None:
        for _ in range(n):
            x.grad = None
            backward(gen_fast(x, EPS)[0], grad)

    def hand(n: int) -> None:
        for _ in range(n):
            x.grad = None
            backward(_HandFunction.apply(x, EPS), grad)

    def custom_op(n: int) -> None:
        for _ in range(n):
            x.grad = None
            backward(co_fwd(x, EPS)[0], grad)

    def plain(n: int) -> None:
        for _ in range(n):
            x.grad = None
            backward(_PlainFunction.apply(x, EPS), grad)

    return _named(direct, generated, fast, hand, custom_op, plain)


def _named(direct: Loop, generated: Loop, fast: Loop, hand: Loop, custom_op: Loop, plain: Loop):
    return {
        "direct": direct,
        "generated": generated,
        FAST: fast,
        BASELINE: hand,
        "custom_op + register_autograd": custom_op,
        PLAIN: plain,
    }


def check(gen_trivial: Callable, gen_fast: Callable, x: Tensor, grad: Tensor) -> None:
    outs = {
        "generated": gen_trivial(x, EPS)[0],
        FAST: gen_fast(x, EPS)[0],
        BASELINE: _HandFunction.apply(x, EPS),
        "custom_op + register_autograd": co_fwd(x, EPS)[0],
        PLAIN: _PlainFunction.apply(x, EPS),
    }
    for name, y in outs.items():
        if y.shape != x.shape or y.grad_fn is None:
            raise RuntimeError(f"{name}: unexpected output {tuple(y.shape)}, {y.grad_fn}")
        x.grad = None
        torch.autograd.backward(y, grad)
        if x.grad is None or x.grad.shape != x.shape:
            raise RuntimeError(f"{name}: backward left no grad for x")
    x.grad = None


def measure(loops: dict[str, Loop], calls: int, rounds: int, sync: Callable[[], None]):
    names = list(loops)
    for name in names:
        loops[name](max(calls // 10, 20))
    sync()
    per_call: dict[str, list[float]] = {name: [] for name in names}
    clock = time.perf_counter_ns
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            loop = loops[name]
            sync()
            start = clock()
            loop(calls)
            sync()
            per_call[name].append((clock() - start) / calls / 1e3)
        # Collect between rounds, not inside timed blocks, so no variant is charged for a
        # collection triggered by garbage from another.
        gc.collect()
    return {name: statistics.median(times) for name, times in per_call.items()}


def table(title: str, medians: dict[str, float]) -> str:
    base, plain = medians[BASELINE], medians[PLAIN]
    head = ("variant", "median us/call", f"ratio vs {BASELINE}", f"ratio vs {PLAIN}")
    rows = [
        (name, f"{us:.2f}", f"{us / base:.2f}", f"{us / plain:.2f}") for name, us in medians.items()
    ]
    w = [max(len(row[i]) for row in (head, *rows)) for i in range(4)]
    lines = [f"## {title}", ""]
    lines.append(
        "| "
        + " | ".join(f"{h:<{w[0]}}" if i == 0 else f"{h:>{w[i]}}" for i, h in enumerate(head))
        + " |"
    )
    lines.append(
        "|"
        + "|".join("-" * (w[0] + 2) if i == 0 else "-" * (w[i] + 1) + ":" for i in range(4))
        + "|"
    )
    for row in rows:
        lines.append(
            "| "
            + " | ".join(f"{c:<{w[0]}}" if i == 0 else f"{c:>{w[i]}}" for i, c in enumerate(row))
            + " |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument(
        "--calls",
        default="2000,500",
        help="calls per variant per round: FWD,FWD_BWD (one number sets both)",
    )
    p.add_argument("--shape", default="4,64", help="input shape, comma-separated")
    args = p.parse_args(argv)
    calls = [int(c) for c in args.calls.split(",")]
    if len(calls) == 1:
        calls *= 2
    if len(calls) != 2 or min(calls) < 1 or args.rounds < 1:
        p.error("--calls takes one or two positive integers; --rounds must be positive")
    args.fwd_calls, args.fwd_bwd_calls = calls
    args.shape_tuple = tuple(int(s) for s in args.shape.split(","))
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: CUDA is not available in this torch build")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(f"torch {torch.__version__}, device {device}, python {sys.version.split()[0]}")
    print(
        f"args: --device {args.device} --rounds {args.rounds} "
        f"--calls {args.fwd_calls},{args.fwd_bwd_calls} --shape {args.shape}"
    )
    print(f"shape {args.shape_tuple} float32; median over rounds of per-call time in each round\n")

    with tempfile.TemporaryDirectory(prefix="bench_gen_") as tmpdir:
        package = load_generated(tmpdir)
        gen_trivial, gen_fast = package.trivial, package.trivial_fast
        x = torch.randn(args.shape_tuple, device=device).requires_grad_(True)
        grad = torch.randn(args.shape_tuple, device=device)
        check(gen_trivial, gen_fast, x, grad)

        gc.disable()
        try:
            fwd = measure(fwd_loops(gen_trivial, gen_fast, x), args.fwd_calls, args.rounds, sync)
            fwd_bwd = measure(
                fwd_bwd_loops(gen_trivial, gen_fast, x, grad),
                args.fwd_bwd_calls,
                args.rounds,
                sync,
            )
        finally:
            gc.enable()

    print(table(f"(a) grad-tracking forward, {args.fwd_calls} calls x {args.rounds}", fwd))
    print()
    print(table(f"(b) forward + backward, {args.fwd_bwd_calls} calls x {args.rounds}", fwd_bwd))


if __name__ == "__main__":
    main()
