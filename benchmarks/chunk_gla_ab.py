"""chunk_gla's Triton launchers against another copy of them: GPU time and results, side by side.

    PYTHONPATH=<site with attnops_kernels>:. python benchmarks/chunk_gla_ab.py OTHER.py [--label L]

``OTHER.py`` is another version of ``kernels/chunk_gla/triton.py`` (``git show REV:kernels/
chunk_gla/triton.py > OTHER.py``; the same file gives an A/A run). For each suite shape (bf16,
``g = logsigmoid(randn)``, with an initial state and the final state): the forward's and the
backward's GPU time by CUDA-graph replay (median of three graph timings), interleaved A, B, A, B
so that drift shows, and the largest difference of every result of B against A (0 means bit for
bit). Markdown to stdout.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import graph_us  # noqa: E402

SHAPES = [
    (4, 4096, 16, 128, 128),
    (8, 2048, 32, 64, 64),
    (1, 32768, 16, 128, 128),
    (1, 8192, 4, 128, 128),
]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(B, T, H, K, V):
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k = (
        torch.randn(B, T, H, K, device="cuda", generator=gen, dtype=torch.bfloat16)
        for _ in range(2)
    )
    v = torch.randn(B, T, H, V, device="cuda", generator=gen, dtype=torch.bfloat16)
    g = F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=gen))
    h0 = torch.randn(B, H, K, V, device="cuda", generator=gen)
    do = torch.randn(B, T, H, V, device="cuda", generator=gen, dtype=torch.bfloat16)
    dht = torch.randn(B, H, K, V, device="cuda", generator=gen)
    return q, k, v, g, h0, do, dht


def _fwd(m, x):
    q, k, v, g, h0, _, _ = x
    return m.chunk_gla_fwd(q, k, v, g, None, h0, None, True)


def _bwd(m, x, h):
    q, k, v, g, h0, do, dht = x
    return m.chunk_gla_bwd(q, k, v, g, None, h0, None, do, dht, h)


def diff(a, b) -> float:
    if a is None or b is None:
        return 0.0 if a is b else float("inf")
    return (a.float() - b.float()).abs().max().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path)
    parser.add_argument("--label", default="B")
    args = parser.parse_args()
    import attnops_kernels.chunk_gla.config as launch_config
    import attnops_kernels.chunk_gla.triton as a_mod

    # Both copies' Triton forward: the CuTeDSL walk (chosen first on Hopper) stays out.
    launch_config._CUTE_WALK = False

    # A module of the package, so that its relative imports resolve as the original's do.
    b_mod = load(args.other, "attnops_kernels.chunk_gla._ab_other")
    print(
        f"torch {torch.__version__}, {torch.cuda.get_device_name()}; A = kernels/chunk_gla/triton.py, {args.label} = {args.other}"
    )
    print()
    print(
        "| shape | fwd A us | fwd B us | B/A | bwd A us | bwd B us | B/A | max diff fwd | max diff bwd |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for B, T, H, K, V in SHAPES:
        x = inputs(B, T, H, K, V)
        runs = {}
        results = {}
        for name, m in (("A", a_mod), ("B", b_mod)):
            o, h, ht = _fwd(m, x)
            results[name] = (o, ht, *_bwd(m, x, h))
            runs[name] = (lambda m=m, x=x: _fwd(m, x), lambda m=m, x=x, h=h: _bwd(m, x, h))
        times = {(n, s): [] for n in "AB" for s in (0, 1)}
        for _ in range(3):
            for n in "AB":
                for s in (0, 1):
                    times[(n, s)].append(graph_us(runs[n][s], calls=5, replays=5))
        med = {key: statistics.median(v) for key, v in times.items()}
        d_fwd = max(diff(x, y) for x, y in zip(results["A"][:2], results["B"][:2], strict=True))
        d_bwd = max(diff(x, y) for x, y in zip(results["A"][2:], results["B"][2:], strict=True))
        print(
            f"| B{B} T{T} H{H} K{K} V{V} | {med[('A', 0)]:.1f} | {med[('B', 0)]:.1f} | "
            f"{med[('B', 0)] / med[('A', 0)]:.3f} | {med[('A', 1)]:.1f} | {med[('B', 1)]:.1f} | "
            f"{med[('B', 1)] / med[('A', 1)]:.3f} | {d_fwd:.3g} | {d_bwd:.3g} |"
        )


if __name__ == "__main__":
    main()
