"""Where chunk_gla's state walks should split into segments: forward and backward GPU time, on the
H200, with the walks whole and split into 2 to 32 segments.

    PYTHONPATH=<site with attnops_kernels and fla-core>:. python benchmarks/chunk_gla_split_sweep.py

For each shape of the suite (bf16, ``g = logsigmoid(randn)``): the forward's GPU time by
CUDA-graph replay (median of three graph timings, with their min and max) for each
(``_SEG_MAX_PROGRAMS``, ``_SEG_PROGRAMS``, ``_SEG_MIN_CHUNKS``) of FORWARD that gives the shape
a segment count not yet timed, with the largest difference of its output and final state
against the single walk's (relative to the largest); fla-core's ``chunk_simple_gla`` forward
beside it when it imports. Then the backward for each (``_BWD_SEG_MAX_PROGRAMS``, and the same
for ``_BWD_SEG_MAX_PROGRAMS_RECOMPUTING``; ``_SEG_PROGRAMS``) of BACKWARD, given the forward's
chunk states and recomputing them, with the largest gradient difference against the whole
walks. Markdown to stdout. docs/performance.md (chunk_gla tuning history) keeps its figures.

``--carry-elements N [N ...]`` runs the whole sweep once for each size of the blocks of state
elements that the carry across segments takes per program (``config._CARRY_ELEMENTS``), a
heading before each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import graph_us  # noqa: E402
from chunk_gla_fwd_tune import SHAPES, launch_config, mod  # noqa: E402

DEVICE = "cuda"
# (name, max programs, target programs, min chunks per segment)
FORWARD = [
    ("whole", 0, 256, 8),
    ("p256", 256, 256, 8),
    ("p512", 256, 512, 8),
    ("p1024", 256, 1024, 8),
    ("p2048", 256, 2048, 8),
    ("p1024m4", 256, 1024, 4),
    ("p2048m4", 256, 2048, 4),
]
# (name, max programs, target programs)
BACKWARD = [
    ("whole", 0, 256),
    ("<=32", 32, 256),
    ("<=64", 64, 256),
    ("<=64 p512", 64, 512),
    ("<=256 p512", 256, 512),
]


def fla_forward():
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except Exception as e:  # noqa: BLE001 - any import failure leaves the column empty
        print(f"fla-core not loaded: {type(e).__name__}: {e}")
        return None
    return chunk_simple_gla


def set_thresholds(**values):
    old = {name: getattr(launch_config, name) for name in values}
    for name, value in values.items():
        setattr(launch_config, name, value)
    return old


def rel(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30)).item()


def timed(fn, calls):
    ts = [graph_us(fn, calls=calls, replays=5) for _ in range(3)]
    return statistics.median(ts), min(ts), max(ts)


def sweep(shape, fla):
    B, T, H, K, V = shape
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    q, k, v = (torch.randn(B, T, H, d, device=DEVICE, generator=gen).bfloat16() for d in (K, K, V))
    g = F.logsigmoid(torch.randn(B, T, H, device=DEVICE, generator=gen))
    programs = B * H * -(-K // 64) * -(-V // 64)
    NT = -(-T // 64)
    base = set_thresholds(_SEG_MAX_PROGRAMS=0)
    ref_o, ref_h, ref_ht = mod.chunk_gla_fwd(q, k, v, g, None, None, None, True)
    rows, seen = [], set()
    for name, maxp, segp, minc in FORWARD:
        set_thresholds(_SEG_MAX_PROGRAMS=maxp, _SEG_PROGRAMS=segp, _SEG_MIN_CHUNKS=minc)
        nseg = launch_config._walk_segments(programs, NT, False)[1]
        if nseg in seen:
            continue
        seen.add(nseg)
        o, _, ht = mod.chunk_gla_fwd(q, k, v, g, None, None, None, True)
        t = timed(lambda: mod.chunk_gla_fwd(q, k, v, g, None, None, None, False), 10)
        rows.append((name, nseg, *t, rel(o, ref_o), rel(ht, ref_ht)))
    set_thresholds(**base)
    fla_t = None
    if fla is not None:
        with torch.no_grad():
            fla_t = timed(lambda: fla(q, k, v, g=g, output_final_state=False), 10)[0]
    print(f"\n## forward B{B} T{T} H{H} K{K} V{V}: fla-core {fla_t and round(fla_t, 1)} µs")
    print("| variant | segments | median µs | min | max | diff o | diff final state | fla÷ours |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, nseg, med, lo, hi, eo, eh in rows:
        r = f"{fla_t / med:.2f}" if fla_t else "-"
        print(f"| {name} | {nseg} | {med:.1f} | {lo:.1f} | {hi:.1f} | {eo:.1e} | {eh:.1e} | {r} |")

    do = torch.randn_like(ref_o)
    limits = ("_BWD_SEG_MAX_PROGRAMS", "_BWD_SEG_MAX_PROGRAMS_RECOMPUTING", "_SEG_PROGRAMS")
    base = set_thresholds(**{n: getattr(launch_config, n) for n in limits})
    set_thresholds(_BWD_SEG_MAX_PROGRAMS=0, _BWD_SEG_MAX_PROGRAMS_RECOMPUTING=0)
    want = mod.chunk_gla_bwd(q, k, v, g, None, None, None, do, None, ref_h)
    print("| backward | states | segments | median µs | min | max | largest gradient diff |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, maxp, segp in BACKWARD:
        set_thresholds(
            _BWD_SEG_MAX_PROGRAMS=maxp, _BWD_SEG_MAX_PROGRAMS_RECOMPUTING=maxp, _SEG_PROGRAMS=segp
        )
        nseg = launch_config._walk_segments(programs, NT, False, maxp)[1]
        for given in (ref_h, None):
            got = mod.chunk_gla_bwd(q, k, v, g, None, None, None, do, None, given)
            err = max(rel(a, b) for a, b in zip(got, want, strict=True))
            t = timed(
                lambda h=given: mod.chunk_gla_bwd(q, k, v, g, None, None, None, do, None, h), 5
            )
            how = "given" if given is not None else "recomputed"
            print(f"| {name} | {how} | {nseg} | {t[0]:.1f} | {t[1]:.1f} | {t[2]:.1f} | {err:.1e} |")
    set_thresholds(**base)
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--carry-elements", type=int, nargs="+", default=[launch_config._CARRY_ELEMENTS]
    )
    args = ap.parse_args()
    start = time.monotonic()
    fla = fla_forward()
    for elements in args.carry_elements:
        launch_config._CARRY_ELEMENTS = elements
        print(f"\n# carry across segments in blocks of {elements} elements")
        for shape in SHAPES:
            sweep(shape, fla)
    print(f"\n{time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
