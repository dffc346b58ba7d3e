"""GPU time of the chunk_gla launchers by CUDA-graph replay, optionally against another version.

    python benchmarks/chunk_gla_timing.py [--baseline OLD/kernels/chunk_gla/triton.py]

Each launcher call is captured ``--calls`` times in one CUDA graph; the replay is timed with CUDA
events (host cost removed) and the median over ``--rounds`` replays is reported per call. With
``--baseline`` the other file is imported as a sibling module of ``attnops_kernels.chunk_gla``,
both versions are timed in alternating rounds, their outputs are compared bit for bit, and the
compiled kernels' registers, spills, shared memory and PTX (up to register names) are compared.
``--aa`` times a second copy of the baseline as well (same compiled kernels), which shows the
replay noise; ``--only TEXT`` keeps the shapes whose label contains TEXT (repeatable).
``--wait-for PATH`` compiles everything first, then waits for PATH to exist before timing (so that
other GPU work started beside it has finished).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import re
import statistics
import sys
import time

import torch

import attnops_kernels.chunk_gla.config as launch_config
import attnops_kernels.chunk_gla.triton as current

# The Triton launchers are timed: the CuTeDSL walk (chosen first on Hopper) stays out.
launch_config._CUTE_WALK = False

KERNELS = (
    "_gla_fwd_g_kernel",
    "_gla_fwd_h_kernel",
    "_gla_fwd_o_kernel",
    "_gla_fwd_fused_kernel",
    "_gla_bwd_dh_kernel",
    "_gla_bwd_dqk_kernel",
    "_gla_bwd_dv_kernel",
    "_gla_bwd_dkv_kernel",
    "_gla_bwd_dq_kernel",
    "_gla_bwd_dg_kernel",
)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# name, dtype, B, T, H, K, V, number of packed sequences (0: none), with states
SHAPES = [
    ("B4 T4096 H16 K=V=128", "bf16", 4, 4096, 16, 128, 128, 0, False),
    ("B8 T2048 H32 K=V=64", "bf16", 8, 2048, 32, 64, 64, 0, False),
    ("varlen 8 seqs T16384 H16 K=V=128 +states", "bf16", 1, 16384, 16, 128, 128, 8, True),
    ("B2 T2048 H16 K=V=128", "fp32", 2, 2048, 16, 128, 128, 0, False),
]


def load_baseline(path):
    name = "attnops_kernels.chunk_gla._baseline_triton"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def make_inputs(dtype, B, T, H, K, V, nseq, states, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def rnd(*shape, dt=dtype):
        return torch.randn(*shape, device="cuda", generator=gen, dtype=torch.float32).to(dt)

    q, k, v = rnd(B, T, H, K), rnd(B, T, H, K), rnd(B, T, H, V)
    g = torch.nn.functional.logsigmoid(rnd(B, T, H, dt=torch.float32)) * 0.1
    cu = None
    N = B
    if nseq:
        cuts = torch.randperm(T - 1, generator=torch.Generator().manual_seed(seed))[: nseq - 1]
        cu = torch.cat([torch.tensor([0]), (cuts + 1).sort().values, torch.tensor([T])])
        cu = cu.to(device="cuda", dtype=torch.int32)
        N = nseq
    h0 = rnd(N, H, K, V, dt=torch.float32) if states else None
    do = rnd(B, T, H, V)
    dht = rnd(N, H, K, V, dt=torch.float32) if states else None
    return q, k, v, g, h0, cu, do, dht


def calls(mod, inp, states):
    q, k, v, g, h0, cu, do, dht = inp

    def fwd():
        return mod.chunk_gla_fwd(q, k, v, g, None, h0, cu, states)

    # The forward's chunk states, which autograd passes to the backward (a version of the
    # launchers from before they were returned: none).
    out = fwd()
    saved = (out[1],) if len(out) == 3 else ()

    def bwd():
        return mod.chunk_gla_bwd(q, k, v, g, None, h0, cu, do, dht, *saved)

    return fwd, bwd


def capture(fn, n):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(n):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_us(graph, n):
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    graph.replay()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1e3 / n


def same(a, b):
    if isinstance(a, (tuple, list)):
        return all(same(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is b
    return torch.equal(a, b)


def compiled(fn):
    """The CompiledKernel objects a JITFunction holds, one per specialization."""
    out = []
    for cache in getattr(fn, "device_caches", {}).values():
        kc = cache[0] if isinstance(cache, tuple) else cache
        for ker in kc.values():
            try:
                ker._init_handles()
            except Exception:
                pass
            out.append(ker)
    return out


def ptx_norm(ptx):
    body = re.split(r"\.section\s*\.debug", ptx)[0]
    lines = []
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".loc", ".file", "$L__")):
            continue
        lines.append(re.sub(r"\$L__\w+", "L", re.sub(r"%[a-z]*\d*", "R", s)))
    return lines


def kernel_report(new_mod, old_mod):
    print("\ncompiled kernels (specializations in launch order): regs / spills / shared bytes")
    for name in KERNELS:
        new = compiled(getattr(new_mod, name))
        old = compiled(getattr(old_mod, name, None)) if old_mod else []
        for i, kn in enumerate(new):
            row = f"  {name:22s} #{i}: new {kn.n_regs}/{kn.n_spills}/{kn.metadata.shared}"
            if i < len(old):
                ko = old[i]
                row += f"  old {ko.n_regs}/{ko.n_spills}/{ko.metadata.shared}"
                a, b = ptx_norm(ko.asm["ptx"]), ptx_norm(kn.asm["ptx"])
                if a == b:
                    row += "  PTX identical (up to register names)"
                elif collections.Counter(a) == collections.Counter(b):
                    moved = sum(x != y for x, y in zip(a, b, strict=True))
                    row += f"  PTX same instructions, {moved} of {len(a)} lines reordered"
                else:
                    diff = collections.Counter(a)
                    diff.subtract(collections.Counter(b))
                    delta = sum(abs(c) for c in diff.values())
                    row += f"  PTX differs: {delta} instruction lines ({len(a)} vs {len(b)})"
            print(row)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="another kernels/chunk_gla/triton.py to compare against")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--aa", action="store_true", help="also time a second copy of the baseline")
    ap.add_argument("--only", action="append", help="keep shapes whose label contains this")
    ap.add_argument("--wait-for", help="compile first, then wait for this path before timing")
    args = ap.parse_args()
    import triton

    print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())
    mods = {"new": current}
    if args.baseline:
        mods["old"] = load_baseline(args.baseline)
        if args.aa:
            mods["old2"] = mods["old"]

    cases = []
    for label, dt, B, T, H, K, V, nseq, states in SHAPES:
        if args.only and not any(o in f"{label} {dt}" for o in args.only):
            continue
        inp = make_inputs(DTYPES[dt], B, T, H, K, V, nseq, states)
        fns = {tag: calls(m, inp, states) for tag, m in mods.items()}
        outs = {tag: (f(), b()) for tag, (f, b) in fns.items()}
        torch.cuda.synchronize()
        bitwise = None
        if "old" in outs:
            bitwise = (same(outs["new"][0], outs["old"][0]), same(outs["new"][1], outs["old"][1]))
        cases.append((f"{label} {dt}", fns, bitwise))
        del outs

    if args.wait_for:
        t0 = time.time()
        while not os.path.exists(args.wait_for):
            time.sleep(1)
        print(f"waited {time.time() - t0:.0f} s for {args.wait_for}")

    print(
        f"\nGPU time per call, us (CUDA-graph replay of {args.calls} calls, median of {args.rounds})"
    )
    head = f"{'shape':46s} {'pass':4s}"
    head += "".join(f" {t:>9s}" for t in mods)
    if "old" in mods:
        head += "  new/old" + ("  old2/old" if "old2" in mods else "") + "  outputs bitwise equal"
    print(head)
    for label, fns, bitwise in cases:
        for j, pas in enumerate(("fwd", "bwd")):
            graphs = {t: capture(fns[t][j], args.calls) for t in mods}
            times = {t: [] for t in mods}
            for _ in range(args.rounds):
                for t in mods:
                    times[t].append(replay_us(graphs[t], args.calls))
            med = {t: statistics.median(v) for t, v in times.items()}
            row = f"{label:46s} {pas:4s}" + "".join(f" {med[t]:9.1f}" for t in mods)
            if "old" in mods:
                row += f"  {med['new'] / med['old']:7.3f}"
                if "old2" in mods:
                    row += f"  {med['old2'] / med['old']:8.3f}"
                row += f"  {bitwise[j]}"
            print(row)
            del graphs
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    kernel_report(current, mods.get("old"))


if __name__ == "__main__":
    main()
