"""Checks the chunk_gla backward against autograd of a float64 reference, then times it.

    PYTHONPATH=<site with attnops_kernels>:. python benchmarks/chunk_gla_bwd_check.py \\
        [--dry-run] [--timing-only] [--only TEXT] [--calls N]

Checks (every device): ``chunk_gla_bwd``, given the forward's chunk states and recomputing them,
against the gradients that autograd takes through a
float64 copy of ``chunk_gla_ref``'s token-by-token recurrence, on the same (rounded) inputs:
dq, dk, dv, dg and dh0 for odd T, T = 1, packed sequences with empty and one-token sequences and
sequences crossing chunk boundaries, offsets that fall (rows covered once against each sequence
alone), with and without initial state and dht, K = V in {16, 64, 100, 128, 256} and K != V,
float32, float16 and bfloat16, permuted and strided inputs, strong decay. Errors are the largest
absolute error relative to the largest reference gradient.

``--dry-run`` runs a smaller set of checks and no timing (the CPU, under ``TRITON_INTERPRET=1``).
On a GPU the full set runs, then, for each shape of the suite (bf16, ``g = logsigmoid(randn)``,
no states), the GPU time of the forward and of the backward (given the forward's chunk states,
as autograd calls it) by CUDA-graph replay, of the backward recomputing the chunk states (its
two state walks in one launch) and of the sequential backward it replaced (``chunk_gla_bwd_sequential``), and the largest difference between the chunked and the
sequential backward relative to the largest gradient (BAD above 2e-2, which flags a miscompile):
a markdown table, then the registers and spills of the compiled kernels. Exit status 1 when a
check fails or a row is BAD.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

try:
    from attnops_kernels.chunk_gla import config, reference
    from attnops_kernels.chunk_gla import triton as mod
except ImportError:
    sys.path.insert(0, str(ROOT))
    from kernels.chunk_gla import config, reference
    from kernels.chunk_gla import triton as mod

SHAPES = [
    (4, 4096, 16, 128, 128),
    (8, 2048, 32, 64, 64),
    (1, 32768, 16, 128, 128),
    (1, 8192, 4, 128, 128),
]
BAD = 2e-2
NAMES = ("dq", "dk", "dv", "dg", "dh0")
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
TOL = {F32: 2e-4, F16: 2e-2, BF16: 4e-2}

# (B, T, H, K, V), dtype, cu_seqlens, initial state, dht, layout, decay factor; dry-run subset
# first.
CASES = [
    ((2, 70, 2, 16, 16), F32, None, True, True, "contiguous", 1.0),
    ((1, 200, 2, 100, 100), BF16, [0, 0, 1, 65, 65, 130, 200], True, True, "contiguous", 1.0),
    ((1, 150, 2, 33, 130), F32, [0, 50, 30, 150], True, True, "contiguous", 1.0),
    ((2, 67, 3, 64, 48), F32, None, True, True, "permuted", 1.0),
    ((1, 257, 1, 128, 128), F16, [0, 63, 64, 129, 130, 131, 257], False, True, "strided", 1.0),
    ((1, 130, 2, 64, 64), F32, None, True, True, "contiguous", 8.0),
    ((1, 1, 2, 16, 16), BF16, None, True, True, "contiguous", 1.0),
    ((1, 80, 1, 16, 32), BF16, [0, 10, 75, 80], True, True, "contiguous", 1.0),
    # full set only
    ((2, 129, 2, 256, 256), BF16, None, True, True, "contiguous", 1.0),
    ((1, 150, 2, 128, 128), F32, [0, 1, 64, 64, 150], False, True, "permuted", 1.0),
    ((2, 130, 3, 64, 64), F16, None, False, False, "contiguous", 1.0),
    ((1, 150, 2, 33, 130), BF16, [0, 50, 30, 150], True, True, "permuted", 1.0),
    ((1, 190, 2, 100, 100), F32, [0, 0, 1, 65, 65, 130, 190], True, False, "strided", 1.0),
    ((2, 99, 2, 256, 256), F32, None, True, True, "permuted", 1.0),
    ((1, 200, 2, 64, 64), BF16, [0, 3, 130, 200], True, True, "contiguous", 8.0),
    ((3, 65, 2, 33, 130), F16, None, True, True, "strided", 1.0),
    ((1, 260, 2, 128, 64), BF16, [0, 64, 128, 129, 260], False, False, "permuted", 1.0),
]
DRY = 8


def layout(x, how):
    """x (contiguous) with the same values under another memory layout."""
    if how == "permuted":
        # [B, T, H, D] stored as [H, D, B, T]
        perm = (2, 3, 0, 1)[: x.ndim] if x.ndim == 4 else (2, 0, 1)
        inv = [perm.index(i) for i in range(x.ndim)]
        return x.permute(*perm).contiguous().permute(*inv)
    if how == "strided":
        # every other element of a wider last (or time) dimension
        wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
        wide[..., ::2] = x
        return wide[..., ::2]
    return x


def ref64(q, k, v, g, scale, s0, cu, dht, do):
    """The loss sum(o * do) + sum(final_state * dht) of chunk_gla_ref's recurrence in float64."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    seqs = (
        [(b, 0, T) for b in range(B)]
        if cu is None
        else [(0, a, b) for a, b in zip(cu, cu[1:], strict=False)]
    )
    loss = q.new_zeros(())
    for n, (b, bos, eos) in enumerate(seqs):
        S = s0[n] if s0 is not None else q.new_zeros(H, K, V)
        for t in range(bos, eos):
            S = torch.exp(g[b, t])[:, None, None] * S + k[b, t][:, :, None] * v[b, t][:, None, :]
            loss = loss + scale * torch.einsum("hk,hkv,hv->", q[b, t], S, do[b, t])
        if dht is not None:
            loss = loss + (S * dht[n]).sum()
    return loss


def ref_grads(q, k, v, g, s0, cu, do, dht):
    """float64 autograd gradients (dq, dk, dv, dg, dh0) of ref64 at the given values."""
    K = q.shape[-1]
    leaves = [x.detach().to(torch.float64).requires_grad_() for x in (q, k, v, g)]
    H, V = q.shape[2], v.shape[-1]
    N = q.shape[0] if cu is None else len(cu) - 1
    s = torch.zeros(N, H, K, V, dtype=torch.float64) if s0 is None else s0.double()
    s = s.detach().requires_grad_()
    d64 = None if dht is None else dht.double()
    loss = ref64(*leaves, K**-0.5, s, cu, d64, do.double())
    return torch.autograd.grad(loss, [*leaves, s], allow_unused=True)


def rel(a, r):
    a = a.double().cpu()
    r = torch.zeros_like(a) if r is None else r.double().cpu()
    if not torch.isfinite(a).all():
        return math.inf
    return ((a - r).abs().max() / r.abs().max().clamp_min(1e-6)).item() if a.numel() else 0.0


def check_case(shape, dtype, cu, use_h0, use_dht, how, decay, device, seed=0):
    B, T, H, K, V = shape
    N = B if cu is None else len(cu) - 1
    gen = torch.Generator().manual_seed(seed)

    def rnd(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float64)

    q, k, v, do = rnd(B, T, H, K), rnd(B, T, H, K), rnd(B, T, H, V), rnd(B, T, H, V)
    g = F.logsigmoid(rnd(B, T, H)) * decay
    s0 = rnd(N, H, K, V) if use_h0 else None
    dht = rnd(N, H, K, V) if use_dht else None
    # inputs as the kernel sees them, and the reference on the same rounded values
    q, k, v, do = (x.to(dtype) for x in (q, k, v, do))
    g, s0, dht = (None if x is None else x.float() for x in (g, s0, dht))

    def dev(x):
        return None if x is None else layout(x.to(device), how)

    cut = None if cu is None else torch.tensor(cu, dtype=torch.int32, device=device)
    args = (dev(q), dev(k), dev(v), dev(g), None, dev(s0), cut)
    # The backward given the forward's chunk states (as autograd calls it), and recomputing them.
    hs = mod.chunk_gla_fwd(*args, False)[1]
    outs = (
        mod.chunk_gla_bwd(*args, dev(do), dev(dht), hs),
        mod.chunk_gla_bwd(*args, dev(do), dev(dht)),
    )

    def errors(out):
        clamped = None if cu is None else [min(max(c, 0), T) for c in cu]
        falls = clamped is not None and any(
            b < a for a, b in zip(clamped, clamped[1:], strict=False)
        )
        errs = {}
        if not falls:
            ref = ref_grads(q, k, v, g, s0, clamped, do, dht)
            for name, a, r in zip(NAMES, out, ref, strict=False):
                errs[name] = rel(a, r)
        else:
            # Rows covered by one sequence get that sequence's gradients (dg: see below); each
            # dh0[n] its own.
            cover = torch.zeros(T, dtype=torch.int64)
            for a, b in zip(clamped, clamped[1:], strict=False):
                cover[a:b] += 1
            errs = dict.fromkeys(NAMES, 0.0)
            for n, (a, b) in enumerate(zip(clamped, clamped[1:], strict=False)):
                sl = slice(a, b)
                one = (cover[sl] == 1).nonzero().flatten()
                sub = [x[:, sl] for x in (q, k, v, g)]
                r = ref_grads(
                    *sub,
                    None if s0 is None else s0[n : n + 1],
                    None,
                    do[:, sl],
                    None if dht is None else dht[n : n + 1],
                )
                # dg sums over the sequence's later tokens: the sequential kernels give a token its
                # sequence's dg only where no later token of it is covered twice.
                twice = (cover[sl] > 1).nonzero().flatten()
                if twice.numel():
                    one_g = one[one > twice.max()]
                else:
                    one_g = one
                for i, name in enumerate(NAMES[:4]):
                    rows = one_g if name == "dg" else one
                    mine = out[i][:, sl][:, rows]
                    ri = (
                        torch.zeros(mine.shape, dtype=torch.float64)
                        if r[i] is None
                        else r[i][:, rows]
                    )
                    errs[name] = max(errs[name], rel(mine, ri))
                errs["dh0"] = max(errs["dh0"], rel(out[4][n : n + 1], r[4]))
        return errs

    first, second = (errors(o) for o in outs)
    errs = {n: max(first[n], second[n]) for n in NAMES}
    worst = max(errs.values())
    ok = worst <= TOL[dtype]
    cu_s = "" if cu is None else f" cu={cu}"
    label = f"B{B} T{T} H{H} K{K} V{V} {str(dtype)[6:]}{cu_s} h0={use_h0} dht={use_dht}"
    text = " ".join(f"{n} {e:.1e}" for n, e in errs.items())
    return ok, f"{'ok ' if ok else 'BAD'} {label} {how} decay={decay}: {text}"


def check_autograd_ref(device):
    """ref64 agrees with chunk_gla_ref's own autograd (float32) on a packed case."""
    gen = torch.Generator().manual_seed(1)
    B, T, H, K, V = 1, 40, 2, 8, 12
    x = [torch.randn(B, T, H, d, generator=gen) for d in (K, K, V)]
    g = F.logsigmoid(torch.randn(B, T, H, generator=gen))
    s0 = torch.randn(3, H, K, V, generator=gen)
    do, dht = torch.randn(B, T, H, V, generator=gen), torch.randn(3, H, K, V, generator=gen)
    cu = [0, 7, 7, 40]
    leaves = [t.clone().requires_grad_() for t in (*x, g, s0)]
    o, ht = reference.chunk_gla_ref(*leaves[:4], None, leaves[4], True, torch.tensor(cu))
    ref = torch.autograd.grad((o * do).sum() + (ht * dht).sum(), leaves)
    mine = ref_grads(*x, g, s0, cu, do, dht)
    err = max(rel(a, b) for a, b in zip(mine, ref, strict=False))
    return (
        err < 1e-4,
        f"{'ok ' if err < 1e-4 else 'BAD'} float64 reference vs chunk_gla_ref: {err:.1e}",
    )


def checks(device, dry):
    lines, bad = [], 0
    for ok, line in (check_autograd_ref(device),):
        bad += not ok
        lines.append(line)
        print(line, flush=True)
    for case in CASES[:DRY] if dry else CASES:
        try:
            ok, line = check_case(*case, device)
        except Exception as e:  # noqa: BLE001 - a failing case is reported, the others still run
            ok, line = False, f"BAD {case}: {type(e).__name__}: {e}"
        bad += not ok
        lines.append(line)
        print(line, flush=True)
    print(f"checks: {bad} failed of {len(lines)}", flush=True)
    return bad


def fwd_flops(B, T, H, K, V, BT=64):
    """Matmul FLOPs of the chunked forward (as the chunk_gla benchmark in ops.yaml counts them)."""
    return 2 * B * T * H * (2 * K * V + BT * K + BT * V)


def timing(only, calls):
    from _timing import graph_us

    rows, frows, bad = [], [], 0
    try:
        from fla.ops.simple_gla import chunk_simple_gla as fla_chunk
    except ImportError:
        fla_chunk = None
    for shape in SHAPES:
        B, T, H, K, V = shape
        label = f"B{B} T{T} H{H} K=V={K}" if K == V else f"B{B} T{T} H{H} K{K} V{V}"
        if only and not any(o in label for o in only):
            continue
        gen = torch.Generator(device="cuda").manual_seed(0)

        def rnd(*s, dt=torch.bfloat16, gen=gen):
            return torch.randn(*s, device="cuda", generator=gen).to(dt)

        q, k, v, do = rnd(B, T, H, K), rnd(B, T, H, K), rnd(B, T, H, V), rnd(B, T, H, V)
        g = F.logsigmoid(rnd(B, T, H, dt=torch.float32))
        args = (q, k, v, g, None, None, None)

        def fwd(args=args):
            return mod.chunk_gla_fwd(*args, False)

        hs = fwd()[1]

        def bwd(args=args, do=do, hs=hs):
            return mod.chunk_gla_bwd(*args, do, None, hs)

        def bwd_re(args=args, do=do):
            return mod.chunk_gla_bwd(*args, do, None)

        def seq(args=args, do=do):
            return mod.chunk_gla_bwd_sequential(*args, do, None)

        new, old = bwd(), seq()
        err = max(rel(a, b) for a, b in zip(new, old, strict=False))
        del new, old
        nseg = config._segments(B * H * -(-K // 64) * -(-V // 64), -(-T // config._BT))

        def fwd1(args=args):
            saved = config._SEG_MAX_PROGRAMS
            config._SEG_MAX_PROGRAMS = 0
            try:
                return mod.chunk_gla_fwd(*args, False)
            finally:
                config._SEG_MAX_PROGRAMS = saved

        err_f = rel(fwd()[0], fwd1()[0])
        t_f1 = graph_us(fwd1, calls=calls)
        t_fla = float("nan")
        if fla_chunk is not None:
            with torch.no_grad():
                fla_o = fla_chunk(q, k, v, g)[0]
                err_fla = rel(fwd()[0], fla_o)
                t_fla = graph_us(lambda a=(q, k, v, g): fla_chunk(*a), calls=calls)
            print(f"fla-core forward vs ours: {err_fla:.1e}", flush=True)
        t_f = graph_us(fwd, calls=calls)
        t_b = graph_us(bwd, calls=calls)
        t_s = graph_us(seq, calls=calls)
        t_r = graph_us(bwd_re, calls=calls)
        flag = "ok" if max(err, err_f) <= BAD else "BAD"
        bad += flag == "BAD"
        rows.append((label, t_f, t_b, t_b / t_f, t_r, t_s, t_s / t_b, err, flag))
        frows.append((label, shape, nseg, t_f, t_f1, t_fla, err_f))
        print(f"timed {label}: fwd {t_f:.1f} us, bwd {t_b:.1f} us, {flag}", flush=True)
        del hs
        torch.cuda.empty_cache()
    print(f"\n## chunk_gla backward, bf16, {torch.cuda.get_device_name()}\n")
    print(
        "| shape | fwd us | bwd us | bwd / fwd | bwd recomputing the states, us | "
        "sequential bwd us | speedup | max diff vs sequential | |"
    )
    print("|---" * 9 + "|")
    for label, t_f, t_b, r, t_r, t_s, sp, err, flag in rows:
        print(
            f"| {label} | {t_f:.1f} | {t_b:.1f} | {r:.2f} | {t_r:.1f} | "
            f"{t_s:.1f} | {sp:.1f}x | {err:.1e} | {flag} |"
        )
    print(f"\n## chunk_gla forward, bf16, {torch.cuda.get_device_name()}\n")
    print(
        "| shape | segments | fwd us | fwd, one walk, us | fla-core fwd us | fla / ours | "
        "TFLOP/s | max diff split vs one walk |"
    )
    print("|---" * 8 + "|")
    for label, (B, T, H, K, V), nseg, t_f, t_f1, t_fla, err_f in frows:
        flops = fwd_flops(B, T, H, K, V)
        print(
            f"| {label} | {nseg} | {t_f:.1f} | {t_f1:.1f} | {t_fla:.1f} | {t_fla / t_f:.2f} | "
            f"{flops / t_f / 1e6:.1f} | {err_f:.1e} |"
        )
    kernels = (
        "_gla_fwd_h_kernel",
        "_gla_bwd_dh_kernel",
        "_gla_bwd_states_kernel",
        "_gla_bwd_dqk_kernel",
        "_gla_bwd_dv_kernel",
    )
    print("\ncompiled kernels: registers / spills / shared bytes per specialization")
    for name in kernels:
        for cache in getattr(getattr(mod, name), "device_caches", {}).values():
            kc = cache[0] if isinstance(cache, tuple) else cache
            for ker in kc.values():
                try:
                    ker._init_handles()
                    print(f"  {name}: {ker.n_regs} / {ker.n_spills} / {ker.metadata.shared}")
                except Exception as e:  # noqa: BLE001 - the report is informative only
                    print(f"  {name}: {type(e).__name__}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="fewer checks, no timing")
    ap.add_argument("--only", action="append", help="time the shapes whose label has TEXT")
    ap.add_argument("--calls", type=int, default=10, help="calls per captured graph")
    ap.add_argument(
        "--timing-only",
        action="store_true",
        help="skip the checks against float64 autograd (the timing still compares each shape "
        "with the sequential backward)",
    )
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.monotonic()
    bad = 0 if args.timing_only else checks(device, args.dry_run)
    if device == "cuda" and not args.dry_run:
        bad += timing(args.only, args.calls)
    print(f"\n{time.monotonic() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
