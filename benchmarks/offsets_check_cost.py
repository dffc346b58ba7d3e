"""Host cost per call of the sequence-offsets check (Note [offsets] in the generated _runtime).

``chunk_gla`` on small CUDA tensors (so the host, not the GPU, sets the time), called N times in a
loop with one synchronize at the end, best of several rounds, interleaved so machine noise hits
every row: packed sequences with the eager check (the default), with the check turned off
(``set_offsets_check(False)``), and the same total length as a batch without offsets; then
``check_offsets`` alone. Forward only, under ``torch.no_grad()``.

    python benchmarks/offsets_check_cost.py [--rounds 7] [--calls 200] [--sequences 4]
"""

from __future__ import annotations

import argparse
import time

import torch


def _per_call(fn, calls: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sequences", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64, help="tokens per sequence")
    args = parser.parse_args()
    import attnops
    from attnops import _runtime

    dev, dt = "cuda", torch.bfloat16
    n, t = args.sequences, args.tokens
    H, K, V = 2, 64, 64
    q = torch.randn(1, n * t, H, K, device=dev, dtype=dt)
    k = torch.randn_like(q)
    v = torch.randn(1, n * t, H, V, device=dev, dtype=dt)
    g = -torch.rand(1, n * t, H, device=dev, dtype=torch.float32)
    cu = torch.arange(0, n * t + 1, t, device=dev, dtype=torch.int32)
    qb, kb, vb, gb = (x.view(n, t, *x.shape[2:]) for x in (q, k, v, g))

    def packed():
        attnops.chunk_gla(q, k, v, g, cu_seqlens=cu)

    def batched():
        attnops.chunk_gla(qb, kb, vb, gb)

    def check_alone():
        _runtime.check_offsets("chunk_gla", "cu_seqlens", cu, n * t, "T")

    # name -> (call, whether the eager check is on while it runs)
    rows = {
        "packed, offsets checked (default)": (packed, True),
        "packed, set_offsets_check(False)": (packed, False),
        "batch of equal lengths, no offsets": (batched, True),
        "check_offsets alone": (check_alone, True),
    }
    best = {name: float("inf") for name in rows}
    with torch.no_grad():
        for fn, _ in rows.values():  # compile the kernels, warm the caches
            fn()
        for _ in range(args.rounds):
            for name, (fn, check) in rows.items():
                attnops.set_offsets_check(check)
                try:
                    best[name] = min(best[name], _per_call(fn, args.calls))
                finally:
                    attnops.set_offsets_check(True)
    print(
        f"torch {torch.__version__}, {torch.cuda.get_device_name()}; {n} sequences x {t} tokens, "
        f"H={H} K={K} V={V} bf16; best of {args.rounds} rounds x {args.calls} calls"
    )
    base = best["packed, set_offsets_check(False)"]
    print("| call | host µs per call | vs check off |")
    print("|---|---:|---:|")
    for name, us in best.items():
        print(f"| {name} | {us:.1f} | {us / base:.2f}x |")


if __name__ == "__main__":
    main()
