"""One chunk_gla forward through the CuTeDSL walk, for Nsight Compute to profile (Hopper, with
CuTeDSL installed). The first call compiles; the second is the one to profile:

    PYTHONPATH=<site with attnops_kernels>:. ncu --clock-control none -k regex:cutlass \\
        --launch-skip 1 --launch-count 1 --set full --import-source no -o walk \\
        python benchmarks/chunk_gla_cute_profile.py [--shape B T H K V]
    ncu -i walk.ncu-rep --page raw | grep issue_stalled       # stall reasons per issue
    ncu -i walk.ncu-rep --page source --print-source sass --csv > walk.csv  # per instruction

bf16 inputs, ``g = logsigmoid(randn)``, no states: the walk as the operator runs it, with the
shipped plan (printed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chunk_gla_cute_walk import forward, plan_of  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs=5, default=(4, 4096, 16, 128, 128))
    B, T, H, K, V = ap.parse_args().shape
    q, k = (torch.randn(B, T, H, K, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    v = torch.randn(B, T, H, V, device="cuda", dtype=torch.bfloat16)
    g = F.logsigmoid(torch.randn(B, T, H, device="cuda"))
    print(f"B{B} T{T} H{H} K{K} V{V}: plan {plan_of(q, k, v)}", flush=True)
    for _ in range(2):
        forward(q, k, v, g, None, True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
