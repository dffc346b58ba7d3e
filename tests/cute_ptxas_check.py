"""Compile the CuTeDSL kernels of chunk_gla for sm_90a and ask ptxas whether it serializes their
warpgroup matrix products (no GPU needed: CuTeDSL, and ptxas or cuobjdump).

    PYTHONPATH=<site with attnops_kernels>:. python tests/cute_ptxas_check.py [--all]

Where a ``wgmma`` sits on a path that ptxas cannot prove every thread of the warpgroup takes (a
branch on the thread index, a warp of the warpgroup alone waiting on an mbarrier, an accumulator
written under a per-thread condition), ptxas waits for each product before issuing the next one
and says so only as advisory C7520 ("wgmma.mma_async instructions are serialized"); the kernel
stays correct and gets slower. This script keeps each kernel's PTX, compiles it again with
``ptxas -v`` and prints, per compile key, the registers, spills and advisories; exit 1 where
any key is serialized or spills. Where no ptxas here takes the PTX (one older than the CuTeDSL
build), it reads the cubin that CuTeDSL built instead: serialized where cuobjdump shows a wait
for every product. By default twenty-one keys that cover every flag of the forward walk (both of
its organizations), the gradients' pass and the state walks (whole and split into segments);
``--all`` every key of the walk (128, minutes).
ptxas and cuobjdump: ``$PTXAS`` / ``$CUOBJDUMP``, the PATH, ``/usr/local/cuda/bin``, Triton's.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def tools(name: str) -> list[str]:
    """Every copy of a CUDA tool found here: the variable of its name in capitals (``$PTXAS``,
    ``$CUOBJDUMP``), the PATH, CUDA's folder and Triton's own, in that order."""
    found = [os.environ.get(name.upper()), shutil.which(name), f"/usr/local/cuda/bin/{name}"]
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin is not None:
        found.append(str(Path(spec.origin).parent / "backends" / "nvidia" / "bin" / name))
    out: list[str] = []
    for path in found:
        if path and Path(path).is_file() and path not in out:
            out.append(path)
    return out


def read_ptx(ptx: Path) -> tuple[str, str, list[str], bool] | None:
    """Registers, spilled bytes, advisories and whether the products are serialized, from the
    first ptxas here that takes this PTX (a ptxas older than the CuTeDSL build refuses its PTX
    version), or None."""
    for ptxas in tools("ptxas"):
        run = subprocess.run(
            [ptxas, "-arch=sm_90a", "-v", str(ptx), "-o", os.devnull],
            capture_output=True,
            text=True,
        )
        if run.returncode == 0:
            regs = re.search(r"Used (\d+) registers", run.stderr)
            spills = re.search(r"(\d+) bytes spill stores", run.stderr)
            advice = sorted(set(re.findall(r"\((C75\d\d)\)", run.stderr)))
            return (
                regs.group(1) if regs else "?",
                spills.group(1) if spills else "?",
                advice,
                "C7520" in advice,
            )
    return None


def read_cubin(cubin: Path) -> tuple[str, str, list[str], bool] | None:
    """The same from the cubin CuTeDSL built, where no ptxas here takes its PTX: serialized
    where each product is waited for (as many ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` as ``HGMMA``),
    spills as a stack frame or local memory."""
    for cuobjdump in tools("cuobjdump"):
        sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True)
        res = subprocess.run([cuobjdump, "-res-usage", str(cubin)], capture_output=True, text=True)
        if sass.returncode or res.returncode:
            continue
        products = len(re.findall(r"\bHGMMA\.", sass.stdout))
        waits = len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0\b", sass.stdout))
        found = dict(re.findall(r"(REG|STACK|LOCAL):(\d+)", res.stdout))
        spilled = int(found.get("STACK", 0)) + int(found.get("LOCAL", 0))
        note = f"SASS: {products} products, {waits} waits for all"
        return found.get("REG", "?"), str(spilled), [note], products > 0 and waits >= products
    return None


def walk_keys(every: bool):
    import torch

    if every:
        for dtype, K, split, *flags in itertools.product(
            (torch.bfloat16, torch.float16), (64, 128), (True, False), *[(True, False)] * 4
        ):
            use_s0, store_ht, use_cu, store_h = flags
            yield (dtype, K, use_s0, store_ht, use_cu, True, store_h, split)
        return
    for split in (True, False):
        for flags in ((False,) * 4, (True,) * 4, (True, True, True, False)):
            use_s0, store_ht, use_cu, store_h = flags
            yield (torch.bfloat16, 128, use_s0, store_ht, use_cu, True, store_h, split)
        yield (torch.float16, 64, True, True, False, True, True, split)


def grads_keys():
    import torch

    # The pass that walks dh itself exists for K = 64 only (cute_bwd._WG_COLS).
    yield (torch.bfloat16, 64, True, True)
    yield (torch.float16, 64, True, False)
    yield (torch.bfloat16, 64, False, False)
    yield (torch.bfloat16, 128, False, True)


def states_keys():
    import torch

    # (dtype, K, reverse per walk, use_s0 per walk, store_end per walk, own per walk, state
    # rows and columns per CTA), as the backward launches them: both walks, the reverse alone
    # (states saved), the forward alone (K = 64); then the two steps of walks split into
    # segments (both walks, the forward alone), the first step of the forward alone also with
    # all rows, and all rows and columns (the forward's segment starts).
    yield (torch.bfloat16, 128, (False, True), (True, True), (False, True), (False, False), 64, 64)
    yield (torch.bfloat16, 64, (False, True), (False, False), (False, True), (False, False), 64, 64)
    yield (torch.bfloat16, 128, (True,), (False,), (True,), (False,), 64, 64)
    yield (torch.float16, 64, (False,), (True,), (False,), (False,), 64, 64)
    yield (torch.bfloat16, 128, (False, True), (False, False), (True, True), (True, True), 64, 64)
    yield (torch.bfloat16, 128, (False,), (False,), (True,), (True,), 128, 64)
    yield (torch.bfloat16, 128, (False,), (False,), (True,), (True,), 128, 128)
    yield (torch.bfloat16, 128, (False, True), (True, True), (False, False), (False, False), 64, 64)
    yield (torch.float16, 64, (False,), (False,), (True,), (True,), 64, 64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="every key of the forward walk")
    args = ap.parse_args()
    if not tools("ptxas") and not tools("cuobjdump"):
        print("neither ptxas nor cuobjdump found (set PTXAS or CUOBJDUMP)")
        return 2
    dump = Path(tempfile.mkdtemp(prefix="cute_ptx_"))
    # Read by CuTeDSL when it is first imported, so before the kernels' modules.
    os.environ.update(
        CUTE_DSL_KEEP_PTX="1",
        CUTE_DSL_KEEP_CUBIN="1",
        CUTE_DSL_DUMP_DIR=str(dump),
        ATTNOPS_CUTE_CACHE="0",
    )
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    import attnops_kernels.chunk_gla.cute as walk
    import attnops_kernels.chunk_gla.cute_bwd as grads
    import attnops_kernels.chunk_gla.cute_states as states

    jobs = [(walk._WALK, k) for k in walk_keys(args.all)]
    jobs += [(grads._GRADS, k) for k in grads_keys()]
    jobs += [(states._STATES, k) for k in states_keys()]
    bad = 0
    try:
        for cache, key in jobs:
            for old in dump.iterdir():
                old.unlink()
            cache._kernel(key, False)
            (ptx,) = dump.glob("*.ptx")
            (cubin,) = dump.glob("*.cubin")
            read = read_ptx(ptx) or read_cubin(cubin)
            if read is None:
                print(f"BAD {cache.op} {key}: no ptxas took its PTX and no cuobjdump its cubin")
                bad += 1
                continue
            regs, spilled, advice, serial = read
            fail = serial or spilled != "0"
            bad += fail
            print(
                f"{'BAD' if fail else 'ok '} {cache.op} {key}: {regs} registers, {spilled} bytes "
                f"spilled, {'serialized' if serial else 'not serialized'}; "
                f"{', '.join(advice) or 'no advisories'}",
                flush=True,
            )
    finally:
        shutil.rmtree(dump, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
