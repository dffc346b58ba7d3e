"""chunk_gla's Triton launchers against another copy of them on the CPU: every result bit for bit.

    git show REV:kernels/chunk_gla/triton.py > /tmp/old_triton.py
    python benchmarks/chunk_gla_aa_cpu.py /tmp/old_triton.py

``OLD`` is a single-file ``kernels/chunk_gla/triton.py`` (loaded as a module of the package, as
``benchmarks/chunk_gla_ab.py`` loads its ``OTHER.py``); the launchers of this checkout are the
new ones. Both run under ``TRITON_INTERPRET=1`` on small shapes: float32 and bfloat16, K = V and
K != V (K over 64 too, for the dv pass of its own), equal-length and packed sequences (valid,
with an empty sequence, and falling offsets for the sequential kernels), with and without an
initial state and the final state, T not a multiple of 64, runs of resets and large log-decays
in g, the state walks whole and split into segments (thresholds lowered in both modules), the
backward given the forward's states and recomputing them, and ``chunk_gla_bwd_sequential``.
Every result must hold the same bits (NaNs too: the chunk states ``h`` of falling offsets hold
some), and both must launch the same kernels (the split cases the segment kernels); prints a
line per case and exits 1 on any difference. ``--cases 0,3`` runs only those.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# The old single-file module's tunables, and where the new layout keeps them.
THRESHOLDS = (
    "_SEG_MAX_PROGRAMS",
    "_SEG_PROGRAMS",
    "_SEG_MIN_CHUNKS",
    "_BWD_SEG_MAX_PROGRAMS",
    "_BWD_SEG_MAX_PROGRAMS_RECOMPUTING",
)
SPLIT = dict(
    _SEG_MAX_PROGRAMS=1 << 20,
    _SEG_PROGRAMS=1 << 20,
    _SEG_MIN_CHUNKS=1,
    _BWD_SEG_MAX_PROGRAMS=1 << 20,
    _BWD_SEG_MAX_PROGRAMS_RECOMPUTING=1 << 20,
)

# Kernels of the old single file that the new layout merged.
RENAMED = {
    "_gla_fwd_hcomb_kernel": "_gla_seg_carry_kernel",
    "_gla_bwd_dhcomb_kernel": "_gla_seg_carry_kernel",
}
SEGMENTED = {"_gla_fwd_hseg_kernel", "_gla_bwd_dhseg_kernel", "_gla_seg_carry_kernel"}

# B, T, H, K, V, dtype, cu_seqlens, initial state, final state, split walks
CASES = [
    (2, 150, 2, 32, 48, torch.float32, None, True, True, False),
    (1, 200, 1, 64, 64, torch.float32, None, False, False, False),
    (2, 130, 2, 64, 64, torch.bfloat16, None, True, True, False),
    (1, 100, 2, 40, 24, torch.bfloat16, None, False, True, False),
    (1, 130, 1, 100, 72, torch.bfloat16, None, True, True, False),
    (1, 200, 1, 100, 40, torch.float32, [0, 64, 65, 70, 200], True, True, False),
    (1, 140, 2, 16, 32, torch.bfloat16, [0, 10, 10, 140], True, False, False),
    (1, 150, 1, 64, 64, torch.bfloat16, [0, 90, 30, 150], True, True, False),
    (1, 150, 1, 32, 48, torch.float32, [0, 90, 30, 150], False, True, False),
    (1, 320, 1, 32, 48, torch.float32, None, True, True, True),
    (2, 301, 1, 16, 16, torch.float32, None, False, False, True),
    (1, 257, 1, 64, 64, torch.bfloat16, None, True, True, True),
    (1, 200, 1, 100, 40, torch.bfloat16, None, True, True, True),
]
# Cases whose g also holds runs of resets and of large log-decays (Note [log-decay floor]).
RESETS = {0, 2, 7, 9}


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def thresholds(module, values):
    old = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(module, name, value)


@contextlib.contextmanager
def launches(module, seen):
    """Records into ``seen`` the name of every kernel that ``module``'s launchers launch."""
    launch = module.launchable

    def spy(kernel, like):
        seen.add(RENAMED.get(kernel.fn.__name__, kernel.fn.__name__))
        return launch(kernel, like)

    module.launchable = spy
    try:
        yield
    finally:
        module.launchable = launch


def inputs(B, T, H, K, V, dtype, N, seed, resets):
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen)

    q, k, v = rnd(B, T, H, K).to(dtype), rnd(B, T, H, K).to(dtype), rnd(B, T, H, V).to(dtype)
    g = F.logsigmoid(rnd(B, T, H))
    if resets:
        g[:, 5:45] = -float("inf")
        g[:, 70:100:3] = -1e4
    return q, k, v, g, rnd(N, H, K, V), rnd(B, T, H, V).to(dtype), rnd(N, H, K, V)


def same_bits(a, b) -> bool:
    """Whether a and b are both None or hold the same bits (NaNs included) in the same shape."""
    if a is None or b is None:
        return a is b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))


def run(m, x, cu, h0, final):
    q, k, v, g, s0, do, dht = x
    s0 = s0 if h0 else None
    dht = dht if final else None
    o, h, ht = m.chunk_gla_fwd(q, k, v, g, None, s0, cu, final)
    out = {"o": o, "h": h, "ht": ht}
    names = ("dq", "dk", "dv", "dg", "dh0")
    given = m.chunk_gla_bwd(q, k, v, g, None, s0, cu, do, dht, h)
    again = m.chunk_gla_bwd(q, k, v, g, None, s0, cu, do, dht)
    seq = m.chunk_gla_bwd_sequential(q, k, v, g, None, s0, cu, do, dht)
    for tag, grads in (("given h", given), ("recomputed", again), ("sequential", seq)):
        out.update({f"{n} ({tag})": t for n, t in zip(names, grads, strict=True)})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("--cases", default="", help="comma-separated indices (default: all)")
    args = parser.parse_args()
    from attnops_kernels.chunk_gla import config
    from attnops_kernels.chunk_gla import triton as new

    old = load(args.old, "attnops_kernels.chunk_gla._aa_old")
    bad = 0
    chosen = [int(i) for i in args.cases.split(",")] if args.cases else range(len(CASES))
    for i in chosen:
        B, T, H, K, V, dtype, cu, h0, final, split = CASES[i]
        cut = None if cu is None else torch.tensor(cu, dtype=torch.int32)
        N = B if cu is None else len(cu) - 1
        x = inputs(B, T, H, K, V, dtype, N, seed=i, resets=i in RESETS)
        with (
            thresholds(old, SPLIT if split else {}),
            thresholds(config, SPLIT if split else {}),
        ):
            seen_a, seen_b = set(), set()
            with launches(old, seen_a):
                a = run(old, x, cut, h0, final)
            with launches(new, seen_b):
                b = run(new, x, cut, h0, final)
        differ = [name for name in a if not same_bits(a[name], b[name])]
        if seen_a != seen_b:
            differ.append(f"kernels launched {sorted(seen_a ^ seen_b)}")
        if split != (SEGMENTED <= seen_b):
            differ.append("the walks did not split" if split else "the walks split")
        bad += bool(differ)
        label = f"B{B} T{T} H{H} K{K} V{V} {str(dtype)[6:]} cu={cu} h0={h0} final={final}"
        label += " split" if split else ""
        label += " resets" if i in RESETS else ""
        print(f"{'ok  ' if not differ else 'DIFF'} {label}: {len(a)} results", end="")
        print(f", differ: {', '.join(differ)}" if differ else "", flush=True)
    print(f"{len(chosen) - bad} of {len(chosen)} cases equal bit for bit")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
