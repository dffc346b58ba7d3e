"""Calls the chunk_gla launchers directly (no validation) with one malformed ``cu_seqlens``.

    python tests/chunk_gla_bounds.py --list
    python tests/chunk_gla_bounds.py CASE [--dtype float32 --dtype bfloat16]

``tests/test_kernel_bounds.py`` runs every case, and ``benchmarks/chunk_gla_bounds_gpu.sh`` runs
them under ``compute-sanitizer`` on a CUDA machine.

Runs ``chunk_gla_fwd`` (with an initial state and the final state) and ``chunk_gla_bwd`` (with
``dht``) on CUDA when there is a device, else on CPU (then set ``TRITON_INTERPRET=1``). Prints
``CASE ok`` and exits 0 when every check holds; exits 1 naming the failed check otherwise. A
read or write outside the tensors shows as a crash (CPU), an illegal-address error, or an error
from ``compute-sanitizer --tool memcheck`` (run with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` so
that each tensor is its own allocation). Run each case in its own process: an illegal memory
access leaves the CUDA context unusable.

Checks, for every case that is not refused: all outputs finite; for offsets that are
nondecreasing once clamped into ``[0, T]``, the results equal bit for bit those of the clamped
offsets, tokens before the first or after the last sequence are zeros, and covered tokens equal a
run on just the covered slice; cases that must be refused raise ``ValueError`` naming
``cu_seqlens``.
"""

from __future__ import annotations

import argparse
import sys

import torch

from attnops_kernels.chunk_gla.triton import chunk_gla_bwd, chunk_gla_fwd

T, H, K, V = 80, 2, 16, 48
BIG = 2**40

# name -> (offsets, dtype of the offsets); "strided" is a [::2] view of a longer tensor.
CASES = {
    "valid": ([0, 10, 75, 80], torch.int32),
    "last_gt_T": ([0, 10, 75, 200], torch.int32),
    "last_huge_int64": ([0, 10, 75, BIG], torch.int64),
    "all_beyond_T": ([100, 200, 300], torch.int32),
    "negative_inner": ([0, -5, 80], torch.int32),
    "negative_first": ([-100, 40, 80], torch.int64),
    "negative_huge_int64": ([-BIG, 40, 80], torch.int64),
    "int32_extremes": ([-(2**31), 40, 2**31 - 1], torch.int32),
    "strided": ([0, 10, 75, 80], torch.int32),
    "first_nonzero": ([5, 10, 75, 80], torch.int32),
    "last_lt_T": ([0, 10, 60], torch.int64),
    "single_empty": ([40, 40], torch.int32),
    "non_monotonic": ([0, 50, 30, 80], torch.int32),
    "non_monotonic_gap": ([50, 60, 0, 10], torch.int32),
    "length0": ([], torch.int32),
    "length1": ([0], torch.int32),
    "float_dtype": ([0, 10, 80], torch.float32),
    "two_dim": ([[0, 10], [75, 80]], torch.int32),
    "batch2": ([0, 10, 80], torch.int32),
}
REFUSED = {"length0", "length1", "float_dtype", "two_dim", "batch2"}


def offsets(name, device):
    values, dtype = CASES[name]
    cu = torch.tensor(values, dtype=dtype, device=device)
    if name == "strided":
        # every other element is garbage: reading without the stride gives wrong sequences
        wide = torch.full((2 * cu.shape[0],), 99, dtype=dtype, device=device)
        wide[::2] = cu
        cu = wide[::2]
        assert cu.stride(0) == 2
    return cu


def inputs(N, dtype, device, B=1):
    gen = torch.Generator().manual_seed(0)

    def rnd(*shape, dt=dtype):
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dt)

    q, k, v = rnd(B, T, H, K), rnd(B, T, H, K), rnd(B, T, H, V)
    g = torch.nn.functional.logsigmoid(rnd(B, T, H, dt=torch.float32))
    h0 = rnd(N, H, K, V, dt=torch.float32)
    do = rnd(B, T, H, V)
    dht = rnd(N, H, K, V, dt=torch.float32)
    return q, k, v, g, h0, do, dht


def run(cu, inp):
    q, k, v, g, h0, do, dht = inp
    o, hs, ht = chunk_gla_fwd(q, k, v, g, None, h0, cu, True)
    grads = chunk_gla_bwd(q, k, v, g, None, h0, cu, do, dht, hs)
    return (o, ht, *grads)


NAMES = ("output", "final_state", "dq", "dk", "dv", "dg", "dh0")
TOKEN_OUTPUTS = ("output", "dq", "dk", "dv", "dg")


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def check_case(name, dtype, device):
    if name in REFUSED:
        if name == "batch2":
            cu, inp = offsets(name, device), inputs(2, dtype, device, B=2)
        else:
            # N from the offsets' first dim where there is one; states sized to match
            cu = offsets(name, device)
            inp = inputs(max(cu.shape[0] - 1, 1) if cu.ndim else 1, dtype, device)
        for which in ("fwd", "bwd"):
            q, k, v, g, h0, do, dht = inp
            try:
                if which == "fwd":
                    chunk_gla_fwd(q, k, v, g, None, None, cu, True)
                else:
                    chunk_gla_bwd(q, k, v, g, None, None, cu, do, None)
            except ValueError as e:
                check("cu_seqlens" in str(e), f"{which}: ValueError not naming cu_seqlens: {e}")
            else:
                raise Failed(f"{which}: not refused")
        return

    cu = offsets(name, device)
    N = cu.shape[0] - 1
    inp = inputs(N, dtype, device)
    out = dict(zip(NAMES, run(cu, inp), strict=True))
    if device == "cuda":
        torch.cuda.synchronize()
    for key, x in out.items():
        check(bool(torch.isfinite(x).all()), f"{key} has non-finite values")

    # run again: results must be deterministic (no uninitialized memory) where defined
    again = dict(zip(NAMES, run(cu, inp), strict=True))
    values = [int(x) for x in cu.tolist()]
    clamped = [min(max(x, 0), T) for x in values]
    monotone = all(b >= a for a, b in zip(clamped, clamped[1:], strict=False))
    if not monotone:
        # rows covered twice have unspecified values; rows covered by none are zeros
        if name == "non_monotonic_gap":
            # sequences [50, 60), [60, 60), [0, 10): rows 10..49 are covered by none
            for key in TOKEN_OUTPUTS:
                check(bool((out[key][:, 10:50] == 0).all()), f"{key}: uncovered rows not zero")
                check(torch.equal(out[key][:, 10:50], again[key][:, 10:50]), f"{key} changed")
        return

    for key in NAMES:
        check(torch.equal(out[key], again[key]), f"{key} differs between two identical calls")
    ref_cu = torch.tensor(clamped, dtype=torch.int64, device=device)
    ref = dict(zip(NAMES, run(ref_cu, inp), strict=True))
    for key in NAMES:
        check(torch.equal(out[key], ref[key]), f"{key} differs from the clamped offsets' result")
    first, last = clamped[0], clamped[-1]
    for key in TOKEN_OUTPUTS:
        check(bool((out[key][:, :first] == 0).all()), f"{key}: rows before cu[0] not zero")
        check(bool((out[key][:, last:] == 0).all()), f"{key}: rows after cu[-1] not zero")
    if (first, last) != (0, T) and last > first:
        # the covered rows equal a run on the covered slice alone
        q, k, v, g, h0, do, dht = inp
        sl = slice(first, last)
        sub = (q[:, sl], k[:, sl], v[:, sl], g[:, sl], h0, do[:, sl], dht)
        sub_cu = torch.tensor([c - first for c in clamped], dtype=torch.int64, device=device)
        part = dict(zip(NAMES, run(sub_cu, sub), strict=True))
        for key in NAMES:
            mine = out[key][:, sl] if key in TOKEN_OUTPUTS else out[key]
            check(torch.equal(mine, part[key]), f"{key}: covered rows differ from a sliced run")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", nargs="?")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--dtype", action="append", choices=["float32", "bfloat16", "float16"])
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return 0
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for dt in args.dtype or ["float32"]:
        try:
            check_case(args.case, getattr(torch, dt), device)
        except Failed as e:
            print(f"{args.case} {dt} FAILED: {e}")
            return 1
    print(f"{args.case} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
