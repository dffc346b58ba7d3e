"""Launch configs of the chunk_gla forward on a GPU: each candidate, timed and checked.

    PYTHONPATH=<site with attnops_kernels>:. python benchmarks/chunk_gla_fwd_tune.py \\
        [--deadline S] [--out DIR] [--checks-only]

First the launcher's checks against ``chunk_gla_ref`` with its current configs (packed
sequences with empty and one-token sequences, offsets that fall, initial and final states, K
and V not powers of two, fp32, fp16, bf16). Then, for each shape of the suite (bf16,
g = logsigmoid(randn)), the forward with the current configs and with each candidate of
CONFIGS (chunk size, state pass and output pass configs): GPU time of the whole forward by
CUDA-graph replay, the same without the output pass (the cumulative decay and state passes
alone), and the largest error against a float32 chunked evaluation in torch, relative to the
largest output. Configs whose error exceeds 2e-2 or is not finite are marked BAD (Triton
miscompiles some kernels on Hopper). Markdown to stdout, the same as JSON in ``DIR/tune.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _timing import graph_us  # noqa: E402

try:
    from attnops_kernels.chunk_gla import config as launch_config
    from attnops_kernels.chunk_gla import reference
    from attnops_kernels.chunk_gla import triton as mod
except ImportError:
    sys.path.insert(0, str(ROOT))
    from kernels.chunk_gla import config as launch_config
    from kernels.chunk_gla import reference
    from kernels.chunk_gla import triton as mod

# The Triton plans are what this script and those that import it tune and time; the CuTeDSL walk,
# chosen first on Hopper, has its own (chunk_gla_cute_walk.py).
launch_config._CUTE_WALK = False
SHAPES = [
    (4, 4096, 16, 128, 128),
    (8, 2048, 32, 64, 64),
    (1, 32768, 16, 128, 128),
    (1, 8192, 4, 128, 128),
]
# (name, chunk size, state pass (BK, BV, warps, stages), output pass (BK, BV, warps, stages))
CONFIGS = [
    ("64-a", 64, (64, 64, 4, 3), (64, 64, 4, 2)),
    ("128-a", 128, (64, 64, 4, 3), (64, 64, 8, 2)),
    ("64-d", 64, (64, 64, 4, 3), (64, 128, 8, 2)),
    ("128-c", 128, (64, 64, 4, 3), (128, 64, 8, 1)),
    ("64-c", 64, (128, 128, 8, 3), (64, 64, 4, 2)),
    ("128-d", 128, (128, 128, 8, 2), (64, 64, 8, 2)),
    ("64-b", 64, (64, 64, 4, 2), (64, 64, 4, 2)),
    ("128-b", 128, (64, 64, 8, 3), (64, 64, 8, 2)),
]
BAD = 2e-2


def label(shape):
    return "B{} T{} H{} K{} V{}".format(*shape)


def inputs(shape, dtype=torch.bfloat16, seed=0):
    B, T, H, K, V = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, T, H, K, device="cuda", generator=gen).to(dtype)
    k = torch.randn(B, T, H, K, device="cuda", generator=gen).to(dtype)
    v = torch.randn(B, T, H, V, device="cuda", generator=gen).to(dtype)
    g = F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=gen))
    return q, k, v, g


def chunked_ref(q, k, v, g, BT=64):
    """float32 output of chunk_gla by chunks: states walked in torch, one chunk at a time."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    NT = math.ceil(T / BT)
    pad = NT * BT - T

    def split(x):
        x = F.pad(x.float(), (0, 0, 0, 0, 0, pad))
        return x.view(B, NT, BT, H, x.shape[-1]).permute(0, 3, 1, 2, 4)

    q, k, v = split(q), split(k), split(v)
    G = F.pad(g.float(), (0, 0, 0, pad)).view(B, NT, BT, H).permute(0, 3, 1, 2).cumsum(-1)
    GL = G[..., -1:]
    causal = torch.ones(BT, BT, dtype=torch.bool, device=q.device).tril()
    D = torch.exp(torch.where(causal, G[..., :, None] - G[..., None, :], -math.inf))
    o = ((q @ k.transpose(-1, -2)) * D) @ v
    kv = (k * torch.exp(GL - G)[..., None]).transpose(-1, -2) @ v
    S = q.new_zeros(B, H, K, V)
    states = []
    for c in range(NT):
        states.append(S)
        S = S * torch.exp(GL[:, :, c, 0])[..., None, None] + kv[:, :, c]
    o = o + (q * torch.exp(G)[..., None]) @ torch.stack(states, 2)
    o = o * K**-0.5
    return o.permute(0, 2, 3, 1, 4).reshape(B, NT * BT, H, V)[:, :T]


def rel_err(out, ref):
    out = out.float()
    if not torch.isfinite(out).all():
        return math.inf
    return ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()


class _NotLaunched:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def with_config(cfg, fn):
    base = launch_config._fwd_config
    if cfg is not None:
        launch_config._fwd_config = lambda K, V, dtype: (*cfg[1:], base(K, V, dtype)[-1])
    try:
        return fn()
    finally:
        launch_config._fwd_config = base


def measure(data, ref, cfg=None):
    q, k, v, g = data

    def fwd():
        return mod.chunk_gla_fwd(q, k, v, g, None, None, None, False)[0]

    def run():
        err = rel_err(fwd(), ref)
        t = graph_us(fwd)
        kernel = mod._gla_fwd_o_kernel
        mod._gla_fwd_o_kernel = _NotLaunched()
        try:
            ts = graph_us(fwd)
        finally:
            mod._gla_fwd_o_kernel = kernel
        return {"err": err, "fwd_us": t, "state_us": ts}

    try:
        return with_config(cfg, run)
    except Exception as e:  # noqa: BLE001 - a config that fails to compile is reported, not fatal
        return {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:80]}"}


def fits(cfg, K, V):
    P = max(64, mod.next_power_of_2(K)), max(64, mod.next_power_of_2(V))
    return all(c[0] <= P[0] and c[1] <= P[1] for c in cfg[2:])


def cell(r):
    if "error" in r:
        return ("-", "-", "-", r["error"])
    flag = "BAD" if not r["err"] <= BAD else "ok"
    st = f"{r['state_us']:.1f}" if r.get("state_us") is not None else "-"
    return (f"{r['fwd_us']:.1f}", st, f"{r['err']:.1e}", flag)


def table(rows):
    out = [
        "| config | BT | state (BK, BV, warps, stages) | output | fwd us | state pass us | err | |",
        "|---" * 8 + "|",
    ]
    for cfg, r in rows:
        out.append("| " + " | ".join((*map(str, cfg), *cell(r))) + " |")
    return "\n".join(out)


def checks():
    """The launcher with its current configs against chunk_gla_ref on small cases."""
    bf16, fp16, fp32 = torch.bfloat16, torch.float16, torch.float32
    cases = [
        ((1, 200, 2, 100, 100), bf16, [0, 0, 1, 65, 65, 130, 200], True),
        ((2, 129, 2, 256, 256), bf16, None, True),
        ((1, 150, 2, 128, 128), fp32, [0, 1, 64, 64, 150], True),
        ((2, 130, 3, 64, 64), fp16, None, False),
        ((1, 150, 2, 33, 130), bf16, [0, 50, 30, 150], True),
        ((1, 80, 1, 16, 32), bf16, [0, 10, 75, 80], True),
    ]
    lines, bad = [], 0
    for shape, dt, cu, h0 in cases:
        B, T, H, K, V = shape
        q, k, v, g = inputs(shape, dt, seed=1)
        g = g * 0.3
        N = B if cu is None else len(cu) - 1
        s0 = torch.randn(N, H, K, V, device="cuda") if h0 else None
        cut = None if cu is None else torch.tensor(cu, dtype=torch.int32, device="cuda")
        try:
            o, _, ht = mod.chunk_gla_fwd(q, k, v, g, None, s0, cut, True)
            ro, rht = reference.chunk_gla_ref(q, k, v, g, None, s0, True, cut)
            if cu == [0, 50, 30, 150]:
                # sequences [0, 50), [50, 50), [30, 150): rows 30..49 are covered twice, their
                # values unspecified
                eo = max(rel_err(o[:, :30], ro[:, :30]), rel_err(o[:, 50:], ro[:, 50:]))
            else:
                eo = rel_err(o, ro)
            eh = rel_err(ht, rht)
            tol = 1e-4 if dt == torch.float32 else 3e-2
            ok = eo < tol and eh < tol / 3
        except Exception as e:  # noqa: BLE001
            ok, eo, eh = False, math.nan, f"{type(e).__name__}: {e}"
        bad += not ok
        lines.append(f"{'ok ' if ok else 'BAD'} {label(shape)} {dt} cu={cu} h0={h0} o {eo} ht {eh}")
    torch.cuda.synchronize()
    lines.append(f"checks: {bad} failed of {len(cases)}")
    return lines, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deadline", type=float, default=None, help="seconds; skip what is later")
    ap.add_argument("--out", default=None, help="folder for tune.json")
    ap.add_argument("--checks-only", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()
    late = lambda: args.deadline is not None and time.monotonic() - t0 > args.deadline  # noqa: E731
    print(f"# chunk_gla forward configs, {torch.cuda.get_device_name()}")
    results = {}
    lines, bad = checks()
    print("\n".join(lines), flush=True)
    results["checks"] = lines
    if args.checks_only:
        return 1 if bad else 0
    data = {shape: inputs(shape) for shape in SHAPES}
    refs = {shape: chunked_ref(*data[shape]) for shape in SHAPES}
    rows = {
        shape: [(("current", "-", "-", "-"), measure(data[shape], refs[shape]))] for shape in SHAPES
    }
    for cfg in CONFIGS:
        for shape in SHAPES:
            if fits(cfg, *shape[3:]) and not late():
                rows[shape].append((cfg, measure(data[shape], refs[shape], cfg)))
    best = {}
    for shape in SHAPES:
        good = [(c, r) for c, r in rows[shape] if "error" not in r and r["err"] <= BAD]
        if good:
            c, r = min(good, key=lambda cr: cr[1]["fwd_us"])
            best[label(shape)] = (c[0], round(r["fwd_us"], 1))
        print(f"\n## {label(shape)}\n" + table(rows[shape]), flush=True)
        results[label(shape)] = rows[shape]
    print(f"\nbest per shape: {best}\ntune: {time.monotonic() - t0:.0f} s")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "tune.json").write_text(json.dumps(results, indent=1, default=str))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
