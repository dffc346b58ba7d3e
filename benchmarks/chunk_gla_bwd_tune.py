"""Launch configs of the chunk_gla backward on a GPU: each candidate timed and checked, and the
GPU time of each of its kernels.

    PYTHONPATH=<site with attnops_kernels>:. python benchmarks/chunk_gla_bwd_tune.py \\
        [--only TEXT] [--config TEXT] [--deadline S]

For each shape of the suite (bf16, ``g = logsigmoid(randn)``, no states): the GPU time of the
forward and of the backward (given the forward's chunk states ``h``, as autograd calls it) by
CUDA-graph replay, with the current configs and with each
candidate of CONFIGS (the state walks' config and whether they split into segments, and the
dq/dk/dg pass's config with dv computed in it or in its own pass), and the largest difference of
every gradient against the backward with dv in its own pass and unsplit walks, relative to the largest gradient (BAD above 2e-2 or not
finite: Triton miscompiles some kernels on Hopper). Then each kernel's mean GPU time over ten
backward calls under ``torch.profiler``, with the current configs. Markdown to stdout.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _timing import graph_us  # noqa: E402
from chunk_gla_fwd_tune import BAD, SHAPES, label, launch_config, mod, rel_err  # noqa: E402
from chunk_gla_fwd_tune import inputs as fwd_inputs  # noqa: E402

# (name, state walks (BK, BV, warps, stages) or None: current, dq/dk/dg pass (BV, warps,
# stages[, programs per SM]) with BK covering K and dv computed there, "apart": dv in its own pass
# (or ("apart", dq/dk/dg pass config with BK 0 for all of K, dv pass config), each config
# (BK, BV, warps, stages[, programs per SM])), or None: current, largest walk that splits into
# segments or None: current). Programs per SM: a persistent grid (Note [persistent passes] in
# the kernels); left out or 0, one program per item.
CONFIGS = [
    ("current", None, None, None),
    ("apart 64/64/4/3, dv 64/64/4/3", None, ("apart", (64, 64, 4, 3), (64, 64, 4, 3)), None),
    ("apart 64/64/4/3, dv 128/64/4/2", None, ("apart", (64, 64, 4, 3), (128, 64, 4, 2)), None),
    ("apart 64/64/4/3, dv 128/64/4/2 x2", None, ("apart", (64, 64, 4, 3), (128, 64, 4, 2, 2)), None),
    ("apart 0/64/8/2, dv 128/64/4/2", None, ("apart", (0, 64, 8, 2), (128, 64, 4, 2)), None),
    ("apart 0/64/8/3, dv 128/64/4/2 x2", None, ("apart", (0, 64, 8, 3), (128, 64, 4, 2, 2)), None),
    ("apart 64/64/4/3, dv 128/64/4/2 x1", None, ("apart", (64, 64, 4, 3), (128, 64, 4, 2, 1)), None),
    ("apart 64/64/4/3 x2, dv 64/64/4/3 x2", None, ("apart", (64, 64, 4, 3, 2), (64, 64, 4, 3, 2)), None),
    ("apart 64/64/4/3, dv 128/128/8/2", None, ("apart", (64, 64, 4, 3), (128, 128, 8, 2)), None),
    ("apart 64/64/4/3, dv 128/128/4/2", None, ("apart", (64, 64, 4, 3), (128, 128, 4, 2)), None),
    ("apart 64/64/4/3, dv 128/128/8/2 x1", None, ("apart", (64, 64, 4, 3), (128, 128, 8, 2, 1)), None),
    ("apart 64/64/4/3, dv 128/128/4/2 x2", None, ("apart", (64, 64, 4, 3), (128, 128, 4, 2, 2)), None),
    ("fused 64/4/2", None, (64, 4, 2), None),
    ("fused 64/4/2 x2", None, (64, 4, 2, 2), None),
    ("fused 64/4/2 x1", None, (64, 4, 2, 1), None),
    ("fused 64/8/2 x1", None, (64, 8, 2, 1), None),
    ("K64 apart 64/64/4/2, dv 64/64/4/2 x3", None, ("apart", (64, 64, 4, 2), (64, 64, 4, 2, 3)), None),
    ("K64 apart 64/64/4/2 x2, dv 64/64/4/2 x3", None, ("apart", (64, 64, 4, 2, 2), (64, 64, 4, 2, 3)), None),
    ("walks never split", None, None, 0),
    ("walks 64/64/4/2", (64, 64, 4, 2), None, None),
    ("walks 64/64/4/4", (64, 64, 4, 4), None, None),
    ("walks 64/64/8/3", (64, 64, 8, 3), None, None),
    ("walks 64/128/4/3", (64, 128, 4, 3), None, None),
    ("walks 64/128/8/3", (64, 128, 8, 3), None, None),
    ("walks 128/64/8/3", (128, 64, 8, 3), None, None),
    ("walks 128/128/8/2", (128, 128, 8, 2), None, None),
    ("states recomputed", None, None, None),
]  # fmt: skip
# Candidates that call the backward without the forward's chunk states (it recomputes them).
RECOMPUTE = {"states recomputed"}


def _five(cfg):
    # A pass config with its programs per SM (0 when left out).
    return (*cfg, 0) if len(cfg) == 4 else tuple(cfg)


def inputs(shape, seed=0):
    """The forward tuning's inputs (bf16, g = logsigmoid(randn)) and an output gradient."""
    q, k, v, g = fwd_inputs(shape, seed=seed)
    gen = torch.Generator(device="cuda").manual_seed(seed + 1)
    return q, k, v, g, torch.randn(v.shape, device="cuda", generator=gen).to(v.dtype)


def with_config(walks, dqk, fn, seg=None):
    """Runs fn with the backward's configs replaced (None keeps the current one)."""
    base = launch_config._bwd_config
    base_seg = launch_config._BWD_SEG_MAX_PROGRAMS, launch_config._BWD_SEG_MAX_PROGRAMS_RECOMPUTING
    if seg is not None:
        launch_config._BWD_SEG_MAX_PROGRAMS = launch_config._BWD_SEG_MAX_PROGRAMS_RECOMPUTING = seg

    def patched(K, V, dtype):
        BT, state, qcfg, dv_cfg, fb = base(K, V, dtype)
        if walks is not None:
            state = walks
        full = max(64, 1 << (K - 1).bit_length())
        if dqk == "apart":
            qcfg, dv_cfg = (64, 64, 8, 2, 0), (64, 64, 4, 2, 0)
        elif isinstance(dqk, tuple) and dqk[0] == "apart":
            qcfg, dv_cfg = _five((dqk[1][0] or full, *dqk[1][1:])), _five(dqk[2])
        elif dqk is not None:
            qcfg, dv_cfg = _five((full, *dqk)), None
        return BT, state, qcfg, dv_cfg, fb

    launch_config._bwd_config = patched
    try:
        return fn()
    finally:
        launch_config._bwd_config = base
        launch_config._BWD_SEG_MAX_PROGRAMS, launch_config._BWD_SEG_MAX_PROGRAMS_RECOMPUTING = (
            base_seg
        )


def profile(fn, calls=10):
    """{kernel name: mean GPU µs per call} over ``calls`` calls of fn under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t:
            out[e.key] = out.get(e.key, 0.0) + t / calls
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="the shapes whose label has TEXT")
    ap.add_argument(
        "--config", action="append", help="the configs whose name has TEXT (and current)"
    )
    ap.add_argument("--deadline", type=float, default=1e9, help="stop starting shapes after S s")
    args = ap.parse_args()
    t0 = time.monotonic()
    rows, prof_rows, bad = [], [], 0
    for shape in SHAPES:
        name = label(shape)
        if args.only and not any(o in name for o in args.only):
            continue
        if time.monotonic() - t0 > args.deadline:
            print(f"deadline: {name} not run", flush=True)
            break
        q, k, v, g, do = inputs(shape)
        a = (q, k, v, g, None, None, None)
        hs = mod.chunk_gla_fwd(*a, False)[1]
        saved = [hs]

        def bwd(a=a, do=do, saved=saved):
            return mod.chunk_gla_bwd(*a, do, None, saved[0])

        t_f = graph_us(lambda a=a: mod.chunk_gla_fwd(*a, False))
        ref = with_config(None, "apart", bwd, seg=0)
        for cname, walks, dqk, seg in CONFIGS:
            if args.config and cname != "current" and not any(c in cname for c in args.config):
                continue
            saved[0] = None if cname in RECOMPUTE else hs
            try:
                out = with_config(walks, dqk, bwd, seg)
                err = max(rel_err(x, r.float()) for x, r in zip(out, ref, strict=True))
                del out
                t = with_config(walks, dqk, lambda: graph_us(bwd), seg)
            except Exception as e:  # noqa: BLE001 - a config that fails to compile is reported
                print(f"{name} {cname}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                rows.append((name, cname, t_f, math.nan, math.nan, "ERROR"))
                continue
            flag = "ok" if err <= BAD else "BAD"
            bad += flag == "BAD"
            rows.append((name, cname, t_f, t, err, flag))
            print(f"{name} {cname}: {t:.1f} us (fwd {t_f:.1f}), {err:.1e} {flag}", flush=True)
        saved[0] = hs
        for cname, dqk in (("current", None), ("apart", "apart")):
            try:
                times = with_config(None, dqk, lambda: profile(bwd))
            except Exception as e:  # noqa: BLE001 - reported, and the other shapes still run
                print(f"{name} profile {cname}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            for kname, us in sorted(times.items()):
                prof_rows.append((name, cname, kname, us))
        del ref, hs, saved
        torch.cuda.empty_cache()

    print(f"\n## chunk_gla backward configs, bf16, {torch.cuda.get_device_name()}\n")
    print("| shape | config | fwd us | bwd us | bwd / fwd | max diff vs apart, unsplit | |")
    print("|---" * 7 + "|")
    for name, cname, t_f, t, err, flag in rows:
        print(f"| {name} | {cname} | {t_f:.1f} | {t:.1f} | {t / t_f:.2f} | {err:.1e} | {flag} |")
    print("\n## GPU time per kernel (torch.profiler, mean of 10 backward calls)\n")
    print("| shape | configs | kernel | us |")
    print("|---|---|---|---:|")
    for name, cname, kname, us in prof_rows:
        print(f"| {name} | {cname} | {kname[:60]} | {us:.1f} |")
    print(f"\n{time.monotonic() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
