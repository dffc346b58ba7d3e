"""The CuTeDSL disk cache on the H200 (Note [CuTe disk cache] in kernels/_cute.py): in a fresh
cache folder, process 1 runs chunk_gla's forward through the public launcher (the CuTeDSL walk on
Hopper) and l2norm's CuTeDSL forward, compiling both; process 2 does the same and must load both
from the disk cache, compile nothing, and give bitwise the same outputs. Prints each process's
first-call wall times; exits 1 on any miss or mismatch.

    d=$(mktemp -d) && tar -xJf .device/cutedsl-site.tar.xz -C "$d"
    export PYTHONPATH="$d:$d/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
    python benchmarks/cute_cache_check.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(out: Path) -> None:
    t0 = time.perf_counter()
    import torch
    import torch.nn.functional as F

    from attnops_kernels.chunk_gla import triton as C

    gen = torch.Generator().manual_seed(0)
    B, T, H, K, V = 1, 256, 2, 64, 64
    q, k = (torch.randn(B, T, H, K, generator=gen).bfloat16().cuda() for _ in range(2))
    v = torch.randn(B, T, H, V, generator=gen).bfloat16().cuda()
    g = F.logsigmoid(torch.randn(B, T, H, generator=gen)).cuda()
    x = torch.randn(4, 33, 128, generator=gen).bfloat16().cuda()
    torch.cuda.synchronize()
    report = {"setup_s": time.perf_counter() - t0}

    t = time.perf_counter()
    o, _, ht = C.chunk_gla_fwd(q, k, v, g, None, None, None, True, save_states=False)
    torch.cuda.synchronize()
    report["chunk_gla_first_call_s"] = time.perf_counter() - t
    from attnops_kernels.chunk_gla import cute as W

    report["walk"] = [W._WALK.compiles, W._WALK.loads]

    from attnops_kernels.l2norm import cute as L

    t = time.perf_counter()
    y, rstd = L.l2norm_fwd(x, 1e-6)
    torch.cuda.synchronize()
    report["l2norm_first_call_s"] = time.perf_counter() - t
    report["l2norm"] = [L._FWD.compiles, L._FWD.loads]
    torch.save({"o": o, "ht": ht, "y": y, "rstd": rstd}, out)
    print(json.dumps(report))


def main() -> int:
    import torch

    work = Path(tempfile.mkdtemp(prefix="cute-cache-check-"))
    site = work / "site"  # the import names pyproject.toml maps, as benchmarks/*.sh give them
    site.mkdir()
    (site / "attnops").symlink_to(ROOT / "generated" / "attnops")
    (site / "attnops_kernels").symlink_to(ROOT / "kernels")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "ATTNOPS_CUTE_CACHE_DIR": str(work / "cute"),
        "ATTNOPS_CUTE_CACHE": "1",
        "TRITON_CACHE_DIR": str(work / "triton"),
    }
    print(
        f"cache folder {work / 'cute'}; {torch.cuda.get_device_name()}, torch {torch.__version__}"
    )
    reports, ok = [], True
    for n in (1, 2):
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(work / f"p{n}.pt")],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            print(f"process {n} failed:\n{done.stderr[-4000:]}")
            return 1
        for line in done.stderr.splitlines():
            if "CuTeDSL" in line:  # the cache's warnings (a folder not written, a failed save)
                print(f"process {n}: {line.strip()}")
        r = json.loads(done.stdout.splitlines()[-1])
        reports.append(r)
        print(
            f"process {n}: setup {r['setup_s']:.2f} s; first call chunk_gla_fwd "
            f"{r['chunk_gla_first_call_s']:.3f} s (walk compiles, loads: {r['walk']}), "
            f"l2norm_fwd {r['l2norm_first_call_s']:.3f} s ({r['l2norm']})"
        )
        if n == 1:
            entries = sorted(p.name for p in (work / "cute").iterdir())
            print(f"entries after process 1: {entries}")
    first, second = reports
    for name in ("walk", "l2norm"):
        if first[name] != [1, 0]:
            print(
                f"FAIL: process 1 should compile {name} once, got (compiles, loads) {first[name]}"
            )
            ok = False
        if second[name] != [0, 1]:
            print(f"FAIL: process 2 should load {name} from disk, got {second[name]}")
            ok = False
    a, b = (torch.load(work / f"p{n}.pt") for n in (1, 2))
    for name in a:
        same = torch.equal(a[name], b[name])
        print(f"{name}: bitwise equal across processes: {same}")
        ok &= same
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(Path(sys.argv[2]))
    else:
        sys.exit(main())
