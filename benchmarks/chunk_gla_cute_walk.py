"""chunk_gla's forward as one CuTeDSL walk (kernels/chunk_gla/cute.py) against the Triton plans
and fla-core, on a Hopper GPU with CuTeDSL installed.

    PYTHONPATH=<site with attnops_kernels>:. python benchmarks/chunk_gla_cute_walk.py

First the checks: outputs and final states of the CuTe walk against the Triton forward on odd
lengths, K and V of 64 to 192, float16, strided inputs, initial states and segments (``BAD``
where the error relative to the largest value passes 2e-2, or anything is not finite). Then GPU
time by CUDA-graph replay (medians of ``--replays``) of the shipped forward (the CuTe walk where
its contract holds), the same with every walk of one warpgroup ("one warpgroup": where the
shipped walk is of three, config._cute_walk_split), with the other split ("other split":
segments where the plan walks whole sequences, whole sequences where it splits them), the
Triton plans forced, and fla-core's
``chunk_simple_gla`` autotuned in this process; markdown to stdout. Every timed forward, fla-core's
included, returns the output alone, as a training step asks (``output_final_state=False``);
``--final-state`` times each returning the final state too. ``--quick`` leaves out the other
split and the longest shape. Exit 1 on any BAD.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _timing import graph_us  # noqa: E402
from chunk_gla_fwd_tune import chunked_ref, inputs, label, mod, rel_err  # noqa: E402
from chunk_gla_fwd_tune import launch_config as CF  # noqa: E402
from chunk_gla_fwd_walk import SHAPES  # noqa: E402  (the same five shapes)

# (B, T, H, K, V, dtype, initial state, strided)
CHECKS = [
    (2, 1000, 3, 128, 128, torch.bfloat16, True, False),
    (1, 300, 2, 64, 64, torch.bfloat16, False, False),
    (2, 777, 2, 128, 64, torch.float16, True, False),
    (1, 650, 2, 64, 192, torch.bfloat16, True, True),
    (1, 129, 1, 128, 96, torch.bfloat16, False, True),
    (1, 8192, 2, 128, 128, torch.bfloat16, True, False),
    (2, 64, 1, 128, 128, torch.bfloat16, True, False),
]
BAD = 2e-2


def forward(q, k, v, g, h0, cute, final=True):
    previous, CF._CUTE_WALK = CF._CUTE_WALK, cute
    try:
        return mod.chunk_gla_fwd(q, k, v, g, None, h0, None, final, save_states=False)
    finally:
        CF._CUTE_WALK = previous


def plan_of(q, k, v):
    previous, CF._CUTE_WALK = CF._CUTE_WALK, True
    try:
        return CF._cute_plan(q, k, v, False, False)
    finally:
        CF._CUTE_WALK = previous


def check(case):
    B, T, H, K, V, dtype, init, strided = case
    gen = torch.Generator(device="cuda").manual_seed(T)

    def rand(*shape):
        if strided:
            # Every other head of a wider tensor: strides that are not the compact ones.
            x = torch.randn(*shape[:2], 2 * shape[2], shape[3], device="cuda", generator=gen)
            return x.to(dtype)[:, :, ::2]
        return torch.randn(*shape, device="cuda", generator=gen).to(dtype)

    q, k, v = rand(B, T, H, K), rand(B, T, H, K), rand(B, T, H, V)
    g = F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=gen))
    h0 = torch.randn(B, H, K, V, device="cuda", generator=gen) if init else None
    plan = plan_of(q, k, v)
    o_c, _, ht_c = forward(q, k, v, g, h0, True)
    o_t, _, ht_t = forward(q, k, v, g, h0, False)
    eo, eh = rel_err(o_c, o_t.float()), rel_err(ht_c, ht_t.float())
    tag = "ok" if eo < BAD and eh < BAD and plan is not None else "BAD"
    name = f"B{B} T{T} H{H} K{K} V{V} {str(dtype)[6:]} init={init} strided={strided}"
    print(f"{tag} {name} plan={plan} o {eo:.1e} ht {eh:.1e}", flush=True)
    return tag == "ok"


def shape_row(shape, fla_fn, replays, quick=False, final=False):
    """The table's row of one shape, and whether the CuTe walk's output was BAD; every forward
    returning its final state too where ``final``."""
    B, T, H, K, V = shape
    q, k, v, g = inputs(shape)
    ref = chunked_ref(q, k, v, g)
    cells = []
    shipped = CF._CUTE_WALK_SPLIT
    for cute, split in ((True, shipped), (True, False), (False, shipped)):

        def fwd(cute=cute):
            return forward(q, k, v, g, None, cute, final)[0]

        CF._CUTE_WALK_SPLIT = split
        cells.append((graph_us(fwd, replays=replays), rel_err(fwd(), ref)))
    CF._CUTE_WALK_SPLIT = shipped
    other = math.nan
    if not quick:
        # The other split: segments for about _CUTE_SEG_PROGRAMS CTAs where the plan walks
        # whole sequences, whole sequences where it splits them.
        below = CF._CUTE_SEG_BELOW
        CF._CUTE_SEG_BELOW = 1 << 30 if plan_of(q, k, v)[1] == 1 else 0
        try:
            other = graph_us(lambda: forward(q, k, v, g, None, True, final)[0], replays=replays)
        finally:
            CF._CUTE_SEG_BELOW = below
    fla = math.nan
    if fla_fn is not None:

        def fla_fwd():
            return fla_fn(q, k, v, g, scale=K**-0.5, output_final_state=final)[0]

        fla_fwd()  # autotunes here, in this process
        fla = graph_us(fla_fwd, replays=replays)
    (c_us, c_err), (s_us, s_err), (t_us, _) = cells
    flop = 2 * B * H * T * (64 * K + 64 * V + 2 * K * V)
    plan = plan_of(q, k, v)
    tag = "" if max(c_err, s_err) < BAD else " BAD"
    row = (
        f"| {label(shape)} | {plan} | {c_us:.1f} | {s_us:.1f} | {other:.1f} | {c_err:.1e}{tag} | "
        f"{t_us:.1f} | "
        f"{fla:.1f} | "
        f"{fla / c_us:.2f} | {t_us / c_us:.2f} | {flop / c_us / 1e6:.0f} |"
    )
    return row, not max(c_err, s_err) < BAD


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replays", type=int, default=7)
    ap.add_argument("--checks-only", action="store_true")
    ap.add_argument(
        "--final-state",
        action="store_true",
        help="every timed forward (fla-core's too) returns the final state as well",
    )
    ap.add_argument("--no-checks", action="store_true")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="without the other split and the longest shape",
    )
    args = ap.parse_args()
    bad = 0 if args.no_checks else sum(not check(c) for c in CHECKS)
    if args.checks_only:
        return 1 if bad else 0
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except ImportError as exc:
        chunk_simple_gla = None
        print(f"fla-core: skipped ({exc})")
    final = "with" if args.final_state else "without"
    print(
        f"chunk_gla forward {final} the final state, {torch.cuda.get_device_name()}, "
        f"torch {torch.__version__}, bf16, us"
    )
    print(
        "| shape | plan | CuTe walk | one warpgroup | other split | err | Triton | fla | fla / CuTe "
        "| Triton / CuTe | TFLOP/s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in SHAPES[:-1] if args.quick else SHAPES:
        row, n = shape_row(shape, chunk_simple_gla, args.replays, args.quick, args.final_state)
        print(row, flush=True)
        bad += n
        torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
