"""chunk_gla's forward in one walk against the state walk and output pass, on a GPU.

    PYTHONPATH=<site with attnops_kernels>:. python benchmarks/chunk_gla_fwd_walk.py

For each shape (bf16, g = logsigmoid(randn)) and each of ``save_states`` False and True: GPU
time of ``chunk_gla_fwd`` by CUDA-graph replay as shipped (``config._fused_plan`` chooses), with
the one-walk plan forced where the shipped plan does not walk (the same segments rule), and with
the state walk and output pass forced; the largest error of each against a float32 chunked
evaluation in torch, relative to the largest output (``BAD`` over 2e-2); and fla-core's
``chunk_simple_gla`` forward, autotuned in this process, where it is importable. Medians of
``--replays`` replays; markdown to stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _timing import graph_us  # noqa: E402
from chunk_gla_fwd_tune import (  # noqa: E402
    chunked_ref,
    inputs,
    label,
    mod,  # noqa: E402
    rel_err,
)
from chunk_gla_fwd_tune import launch_config as CF  # noqa: E402

SHAPES = [
    (4, 4096, 16, 128, 128),
    (8, 2048, 32, 64, 64),
    (1, 32768, 16, 128, 128),
    (1, 8192, 4, 128, 128),
    (1, 131072, 8, 128, 128),
]


def forced_walk(B, T, H, K, V):
    """The one-walk plan for these sizes as if the rule chose it (BV 64, segments to about
    ``_FUSED_SEG_PROGRAMS`` programs where there are at most ``_SEG_MAX_PROGRAMS``)."""
    BK = max(64, 1 << (K - 1).bit_length())
    cfg = (BK, 64, 4, 3 if BK == 64 else 2)
    nt = -(-T // CF._BT)
    programs = B * H * -(-V // 64)
    nseg = 1 if programs > CF._SEG_MAX_PROGRAMS else -(-CF._FUSED_SEG_PROGRAMS // programs)
    cps = -(-nt // min(nseg, nt))
    return cfg, (cps, -(-nt // cps))


def shape_rows(shape, fla_fn, replays):
    """The table's two rows of one shape, and how many timings were BAD."""
    B, T, H, K, V = shape
    q, k, v, g = inputs(shape)
    ref = chunked_ref(q, k, v, g)
    fla = None
    if fla_fn is not None:

        def fla_fwd():
            return fla_fn(q, k, v, g, scale=K**-0.5)[0]

        fla_fwd()  # autotunes here, in this process
        fla = graph_us(fla_fwd, replays=replays)
    shipped, walk = CF._fused_plan, forced_walk(*shape)
    rows, bad = [], 0
    for save in (False, True):

        def fwd(save=save):
            return mod.chunk_gla_fwd(q, k, v, g, None, None, None, False, save_states=save)[0]

        cells = []
        for plan in (shipped, lambda *a: walk, lambda *a: None):
            CF._fused_plan = plan
            try:
                err = rel_err(fwd(), ref)
                us = graph_us(fwd, replays=replays)
            finally:
                CF._fused_plan = shipped
            bad += not err < 2e-2
            cells.append((us, "" if err < 2e-2 else f" BAD {err:.1e}"))
        text = [f"{us:.1f}{tag}" for us, tag in cells]
        extra = ["-", "-"] if fla is None else [f"{fla:.1f}", f"{fla / cells[0][0]:.2f}"]
        rows.append(f"| {label(shape)} | {save} | {' | '.join(text + extra)} |")
    return rows, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replays", type=int, default=7)
    args = ap.parse_args()
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except ImportError as exc:
        chunk_simple_gla = None
        print(f"fla-core: skipped ({exc})")
    print(f"chunk_gla forward, {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, us")
    print("| shape | save_states | shipped | one walk | walk + output pass | fla | fla / shipped |")
    print("|---|---|---:|---:|---:|---:|---:|")
    bad = 0
    for shape in SHAPES:
        rows, n = shape_rows(shape, chunk_simple_gla, args.replays)
        print("\n".join(rows), flush=True)
        bad += n
        torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
