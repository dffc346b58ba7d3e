"""chunk_gla's activation memory: what the forward keeps alive for the backward, and what the
backward pays to recompute it (ops.yaml, ``save_states``).

For each shape (``K = V = 128``, bfloat16) and each of ``save_states=False`` (the default: the
backward recomputes the chunk states), ``save_states=True`` (the forward keeps them) and
fla-core's ``fla.ops.simple_gla:chunk_simple_gla`` where it is importable (through the adapter
of ``kernels/chunk_gla/baselines.py``), one forward with grad enabled on inputs that require
grad, then its backward:

- ``saved``: the bytes autograd holds for the backward beyond the inputs, summed over the
  tensors ``torch.autograd.graph.saved_tensors_hooks`` sees saved (each storage once; any
  device, exact);
- ``kept``: ``torch.cuda.memory_allocated()`` after the forward, the graph and the output
  alive, less before it (the output included: its size is in the ``output`` column);
- ``fwd peak`` / ``fwd+bwd peak``: ``torch.cuda.max_memory_allocated()`` during the forward
  (its scratch included: the chunk states it does not keep), and through its backward (the
  incoming gradient, the output's size, and the input gradients included), less what was
  allocated before the forward;
- ``fwd+bwd``: GPU time of one forward and backward, by CUDA-graph replay (``graph_us`` of
  ``benchmarks/_timing.py``, the generated benchmarks' timing), median of ``--replays``.

Memory figures are the median of ``--repeats`` measurements (they do not vary on an idle
GPU). Run on a GPU::

    python benchmarks/chunk_gla_memory.py

``--dry-run`` runs tiny shapes on the CPU under ``TRITON_INTERPRET=1`` (no CUDA figures, only
``saved``) to check that the script works; ``bash benchmarks/suite.sh`` runs it after the other
scripts when ``chunk_gla`` is among its operators (``--dry-run`` too). Where only a backward
raises (fla-core's refuses Triton 3.4-3.7.0 on Hopper), the forward's columns stay and a line
under the table gives the error. Exit status 1 when a row failed.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
from pathlib import Path

SHAPES = {
    "B4-T4096-H16": dict(B=4, T=4096, H=16, K=128, V=128),
    "B1-T32768-H16": dict(B=1, T=32768, H=16, K=128, V=128),
    "B1-T131072-H8": dict(B=1, T=131072, H=8, K=128, V=128),
}
DRY_SHAPES = {
    "B2-T130-H2-K16-V16": dict(B=2, T=130, H=2, K=16, V=16),
    "B1-T200-H1-K16-V32": dict(B=1, T=200, H=1, K=16, V=32),
}
FLA = (
    "fla",
    "fla.ops.simple_gla:chunk_simple_gla",
    "attnops_kernels.chunk_gla.baselines:fla_chunk_simple_gla",
)
# Figures in MB (kB for the tiny shapes of --dry-run).
UNITS = {False: ("MB", 1e6), True: ("kB", 1e3)}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="tiny shapes on CPU (TRITON_INTERPRET=1)")
    p.add_argument("--shapes", default=None, help="comma-separated shape names (default all)")
    p.add_argument("--no-baselines", action="store_true", help="leave fla-core out")
    p.add_argument("--repeats", type=int, default=3, help="memory measurements (median)")
    p.add_argument("--graph-calls", type=int, default=3, help="calls captured per CUDA graph")
    p.add_argument("--replays", type=int, default=5, help="graph replays timed (median)")
    return p.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.dry_run:
    os.environ["TRITON_INTERPRET"] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _timing import graph_us, markdown  # noqa: E402

from codegen.runtime.bench import Baseline, load_baseline  # noqa: E402


def make_inputs(B, T, H, K, V, device, dtype=torch.bfloat16, seed=0):
    """The public function's arguments; q, k, v and g require grad."""
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(B, T, H, K, generator=gen).to(device, dtype) for _ in range(2))
    v = torch.randn(B, T, H, V, generator=gen).to(device, dtype)
    g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, generator=gen)).to(device)
    for x in (q, k, v, g):
        x.requires_grad_()
    return dict(
        q=q,
        k=k,
        v=v,
        g=g,
        scale=None,
        initial_state=None,
        output_final_state=False,
        cu_seqlens=None,
    )


def implementations(args) -> dict:
    """Name -> a callable of the public function's arguments returning the output, or the
    reason it is skipped."""
    import attnops

    out: dict = {
        "ours, save_states=False": lambda **kw: attnops.chunk_gla(**kw, save_states=False)[0],
        "ours, save_states=True": lambda **kw: attnops.chunk_gla(**kw, save_states=True)[0],
    }
    if not args.no_baselines:
        fn, why = load_baseline(Baseline(*FLA))
        out["fla chunk_simple_gla"] = (lambda **kw: fn(**kw)[0]) if fn is not None else why
    return out


def _storage(t: torch.Tensor) -> tuple:
    return (t.device, t.untyped_storage().data_ptr())


def saved_bytes(fn, inputs: dict) -> tuple[int, torch.Tensor]:
    """(bytes of the tensors saved for the backward beyond the inputs, the output)."""
    given = {_storage(t) for t in inputs.values() if isinstance(t, torch.Tensor)}
    seen: dict = {}

    def pack(t):
        key = _storage(t)
        if key not in given:
            seen[key] = max(seen.get(key, 0), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(**inputs)
    return sum(seen.values()), out


def cuda_memory(fn, inputs: dict) -> tuple[int, int, int | Exception]:
    """(kept after the forward, peak in the forward, peak through its backward), in bytes above
    what was allocated before the forward; the backward's exception in place of its peak where
    it raises (a baseline whose backward refuses this GPU still has its forward measured)."""
    gc.collect()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn(**inputs)
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - base
    fwd_peak = torch.cuda.max_memory_allocated() - base
    leaves = [inputs[n] for n in ("q", "k", "v", "g")]
    try:
        grads = torch.autograd.grad(out, leaves, torch.ones_like(out), allow_unused=True)
    except Exception as exc:  # noqa: BLE001 - reported in the table, the forward figures kept
        return kept, fwd_peak, exc
    torch.cuda.synchronize()
    total_peak = torch.cuda.max_memory_allocated() - base
    del out, grads
    return kept, fwd_peak, total_peak


def fwd_bwd(fn, inputs: dict):
    """One forward and backward, for timing (a fixed incoming gradient)."""
    leaves = [inputs[n] for n in ("q", "k", "v", "g")]
    with torch.no_grad():
        probe = fn(**inputs)
    grad = torch.randn(probe.shape, generator=torch.Generator().manual_seed(1)).to(probe)
    del probe

    def run():
        return torch.autograd.grad(fn(**inputs), leaves, grad, allow_unused=True)

    return run


def _size(x, unit: float) -> str:
    return x if isinstance(x, str) else f"{x / unit:.1f}"


def _first_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def measure(args, shapes: dict) -> tuple[list[list[str]], dict, list[str]]:
    """The table's rows, why each skipped implementation is, and the backwards that raised."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    impls = implementations(args)
    unit = UNITS[args.dry_run][1]
    rows: list[list[str]] = []
    notes: list[str] = []
    skipped = {name: why for name, why in impls.items() if isinstance(why, str)}
    for shape, dims in shapes.items():
        inputs = make_inputs(**dims, device=device)
        output = dims["B"] * dims["T"] * dims["H"] * dims["V"] * 2
        for name, fn in impls.items():
            if isinstance(fn, str):
                rows.append([shape, name, "skipped", *["-"] * 5])
                continue
            try:
                fn(**inputs)  # compiles the kernels outside the measurements
                saved = [saved_bytes(fn, inputs)[0] for _ in range(args.repeats)]
                row = [shape, name, _size(output, unit), _size(statistics.median(saved), unit)]
                if cuda:
                    mem = [cuda_memory(fn, inputs) for _ in range(args.repeats)]
                    row += [_size(statistics.median(m[i] for m in mem), unit) for i in range(2)]
                    bwd_error = next((m[2] for m in mem if isinstance(m[2], Exception)), None)
                    if bwd_error is not None:
                        row += ["bwd err", "-"]
                        notes.append(f"{shape} {name}: backward: {_first_line(bwd_error)}")
                    else:
                        row.append(_size(statistics.median(m[2] for m in mem), unit))
                        us = graph_us(
                            fwd_bwd(fn, inputs),
                            calls=args.graph_calls,
                            replays=args.replays,
                            grad=True,
                        )
                        row.append(f"{us / 1e3:.3f}")
                else:
                    fwd_bwd(fn, inputs)()  # the backward runs (no figure without CUDA)
                    row += ["no CUDA"] * 4
            except Exception as exc:  # noqa: BLE001 - one failing row must not stop the table
                row = [shape, name, f"err: {_first_line(exc)[:90]}", *["-"] * 5]
            rows.append(row)
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
        del inputs
    return rows, skipped, notes


def header(dry_run: bool) -> list[str]:
    u = UNITS[dry_run][0]
    shape = "shape (bf16)" if dry_run else "shape (K=V=128, bf16)"
    sizes = ["output", "saved beyond inputs", "kept after fwd", "fwd peak", "fwd+bwd peak"]
    return [shape, "implementation", *[f"{s} ({u})" for s in sizes], "fwd+bwd (ms)"]


def main(args) -> int:
    shapes = DRY_SHAPES if args.dry_run else SHAPES
    if args.shapes:
        wanted = [s.strip() for s in args.shapes.split(",")]
        unknown = [s for s in wanted if s not in shapes]
        if unknown:
            print(f"unknown shape(s) {unknown}; expected some of: {', '.join(shapes)}")
            return 2
        shapes = {s: shapes[s] for s in wanted}
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (no CUDA)"
    print(f"chunk_gla activation memory; {device}; torch {torch.__version__}")
    rows, skipped, notes = measure(args, shapes)
    print(markdown(header(args.dry_run), rows, left=2))
    for name, why in skipped.items():
        print(f"{name}: skipped: {why}")
    for note in notes:
        print(note)
    failed = [
        f"{row[0]} {row[1]}" for row in rows if row[2].startswith("err: ") or row[6] == "bwd err"
    ]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
