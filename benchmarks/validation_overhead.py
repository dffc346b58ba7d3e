"""CPU cost of the public functions' argument validation, per call.

Each public function is called on meta tensors (the fakes run, no kernel) next to a direct call
of what it calls after validating (the autograd.Function with its stage callables, or the
forward operator); the
difference of the medians is the validation. Rounds interleave both so machine noise hits both.

    python benchmarks/validation_overhead.py [--rounds 30] [--calls 2000]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

import torch


def _cases():
    m = torch.device("meta")
    q = torch.empty(2, 64, 4, 32, device=m)
    g = torch.empty(2, 64, 4, device=m)
    v = torch.empty(2, 64, 4, 16, device=m)
    x = torch.empty(4, 64, device=m)
    gate_g = torch.empty(3, 4, 16, device=m)
    state = torch.empty(2, 4, 32, 16, device=m)
    return {
        "chunk_gla": (
            (q, q, v, g),
            {},
            "_ChunkGlaFunction",
            ("@_chunk_gla_fwd", "@_chunk_gla_fwd_with_state", "@_chunk_gla_bwd")
            + (q, q, v, g, None, None, None, False),
        ),
        "l2norm": ((x,), {}, "_L2normFunction", ("@_l2norm_fwd", "@_l2norm_bwd", x, 1e-6)),
        "gate": (
            (gate_g,),
            {},
            "_GateFunction",
            ("@_gate_fwd", "@_gate_bwd", gate_g, None, None, "softplus", -5.0),
        ),
        "recurrent_gla_step": (
            (state, q[:, 0], q[:, 0], v[:, 0], g[:, 0], 0.1),
            {},
            "_recurrent_gla_step_fwd",
            (state, q[:, 0], q[:, 0], v[:, 0], g[:, 0], 0.1),
        ),
    }


def _per_call(fn, args, kwargs, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args, **kwargs)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--package", default="attnops")
    args = parser.parse_args()
    print(f"torch {torch.__version__}; {args.rounds} rounds x {args.calls} calls; meta tensors")
    print("| operator | public µs | after validation µs | validation µs |")
    print("|---|---:|---:|---:|")
    for name, (pargs, kwargs, inner, inner_args) in _cases().items():
        module = importlib.import_module(f"{args.package}.{name}")
        public = getattr(module, name)
        target = getattr(module, inner)
        direct = target.apply if hasattr(target, "apply") else target
        # "@name": a module attribute, e.g. the stage callables an autograd.Function takes first.
        inner_args = tuple(
            getattr(module, a[1:]) if isinstance(a, str) and a.startswith("@") else a
            for a in inner_args
        )
        try:
            public(*pargs, **kwargs), direct(*inner_args)
        except ValueError as e:  # e.g. an operator whose integration takes no meta tensors
            print(f"| {name} | skipped: {e} | | |")
            continue
        a, b = [], []
        for _ in range(args.rounds):
            a.append(_per_call(public, pargs, kwargs, args.calls))
            b.append(_per_call(direct, inner_args, {}, args.calls))
        pa, pb = statistics.median(a), statistics.median(b)
        print(f"| {name} | {pa:.2f} | {pb:.2f} | {pa - pb:.2f} |")


if __name__ == "__main__":
    main()
