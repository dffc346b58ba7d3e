"""One chunk_gla backward through the CuTeDSL gradients' pass, for Nsight Compute to profile
(Hopper, with CuTeDSL installed). The first call compiles; the second is the one to profile:

    PYTHONPATH=<site with attnops_kernels>:. ncu --clock-control none -k regex:cutlass \\
        --launch-skip 1 --launch-count 1 --set full --import-source no -o grads \\
        python benchmarks/chunk_gla_cute_grads_profile.py [--shape B T H K]
    ncu -i grads.ncu-rep --page raw | grep issue_stalled       # stall reasons
    ncu -i grads.ncu-rep --page source --print-source sass --csv > grads.csv  # per instruction

bf16 inputs, ``g = logsigmoid(randn)``, the forward's chunk states given (so that the only
CuTeDSL launch is the pass). ``--walk`` makes the pass walk the state's gradient itself (one CTA
per sequence and head, K = 64) whatever the number of sequences and heads.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import attnops_kernels.chunk_gla.config as CF
import attnops_kernels.chunk_gla.triton as C


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs=4, default=(4, 4096, 16, 128))
    ap.add_argument("--walk", action="store_true", help="see the module docstring")
    args = ap.parse_args()
    B, T, H, K = args.shape
    if args.walk:
        CF._CUTE_BWD_WALK_FILL = 0
    q, k, v, do = (torch.randn(B, T, H, K, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    g = F.logsigmoid(torch.randn(B, T, H, device="cuda"))
    CF._CUTE_WALK = False  # the Triton forward keeps the chunk states
    h = C.chunk_gla_fwd(q, k, v, g, None, None, None, False, save_states=True)[1]
    CF._CUTE_BWD = True
    print(f"B{B} T{T} H{H} K=V={K}: pass {CF._cute_bwd_plan(q, k, v, do, False)}", flush=True)
    for _ in range(2):
        C.chunk_gla_bwd(q, k, v, g, None, None, None, do, None, h, save_states=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
