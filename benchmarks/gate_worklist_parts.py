"""Where the time of ``gate`` and ``block_mask_worklist`` goes, kernel by kernel, on one GPU.

Run with the checkout importable as ``suite.sh`` makes it (``attnops``, ``attnops_kernels``):

    python benchmarks/gate_worklist_parts.py [--quick] [--dry-run]

- ``block_mask_worklist`` at mask (8, 16, 128, 128), 30% and 70% True: synchronized time per
  call against ``torch.nonzero``; host cost of each step (zeroed workspace, the launch that
  counts and writes, the host read of nnz, the exact copy, and the second launch taken only when
  nnz overflows the buffer) and GPU time of each by CUDA-graph replay, with the default row
  chunks and with chunks of one and of four rows.
- ``gate`` at g = (4, 8192, 16, 128) bf16: GPU time of each kernel (forward; backward
  elementwise pass; sum of the partials) against a device-to-device copy of the same bytes,
  and a few other tile shapes and warp counts of the same kernels (numerics checked against
  the default tiles).

Markdown tables on stdout. ``--dry-run``: tiny shapes on the CPU under Triton's interpreter
(a check of the script itself; its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DRY = "--dry-run" in sys.argv
if DRY:
    import os

    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
from _timing import copy_graph_us, graph_us, markdown, synced_us  # noqa: E402

DEV = "cpu" if DRY else "cuda"
sync = (lambda: None) if DRY else torch.cuda.synchronize
if DRY:

    def graph_us(fn, calls=20):  # noqa: F811 - no CUDA graphs on the CPU
        return host_per_call(fn, calls=2, rounds=1)

    def copy_graph_us(nbytes, device):  # noqa: F811
        return 1.0


def host_per_call(fn, calls=200, rounds=5):
    """Host time of ``fn`` per call (us), GPU work left to run behind; best of rounds."""
    if DRY:
        calls, rounds = 1, 1
    fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        sync()
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / calls / 1e3)
        sync()
    return best


def worklist(quick: bool):
    from attnops import block_mask_worklist as public
    from attnops_kernels.block_mask_worklist import triton as W

    shape = (2, 2, 16, 16) if DRY else (8, 16, 128, 128)
    B, H, QB, KB = shape
    calls, rounds = (2, 1) if DRY else (20, 3) if quick else (50, 5)
    out = [f"## block_mask_worklist, mask {shape}"]

    def mask_of(density):
        torch.manual_seed(0)
        return torch.rand(shape, device=DEV) < density

    def parts(m, tile):
        """Host and GPU cost of each step of the launcher with ``tile`` mask entries a chunk."""
        saved = W._TILE
        W._TILE = tile
        try:
            geo = W._geometry(m)
        finally:
            W._TILE = saved
        programs = geo[0]
        capacity = min(m.numel(), W._MAX_RECORDS)
        ws = torch.zeros(programs + 2, dtype=torch.int64, device=DEV)
        buf = ws.new_empty((capacity, 4), dtype=torch.int32)

        def zeros():
            return torch.zeros(programs + 2, dtype=torch.int64, device=DEV)

        def first():
            # The tickets need a zeroed workspace on every launch.
            ws.zero_()
            W._launch(m, ws, buf, capacity, geo, first=True)

        first()
        sync()
        nnz = int(ws[1])
        exact = ws.new_empty((nnz, 4), dtype=torch.int32)

        def second():
            W._launch(m, ws, exact, nnz, geo, first=False)

        second()
        sync()
        ref = torch.nonzero(m.bool()).int()
        assert torch.equal(buf[:nnz], ref), "first launch differs from nonzero"
        assert torch.equal(exact, ref), "second launch differs from nonzero"

        def read_nnz():
            first()
            sync()
            start = time.perf_counter_ns()
            int(ws[1])
            return (time.perf_counter_ns() - start) / 1e3

        item_us = statistics.median(read_nnz() for _ in range(2 if DRY else 50))
        zero_gpu = graph_us(lambda: ws.zero_(), calls=20)
        rows_out = [
            ("workspace torch.zeros", host_per_call(zeros), zero_gpu),
            ("count + write launch (after a zero_)", host_per_call(first), graph_us(first) - zero_gpu),
            ("host read of nnz (int(ws[1]))", item_us, None),
            ("exact copy (buf[:nnz].clone())", host_per_call(lambda: buf[:nnz].clone()),
             graph_us(lambda: buf[:nnz].clone(), calls=20)),
        ]  # fmt: skip
        second_row = (
            "second launch (nnz over the buffer)",
            host_per_call(second),
            graph_us(second),
        )
        return programs, rows_out, second_row

    impls = {}
    for density in (0.3, 0.7):
        m = mask_of(density)
        impls[f"attnops.block_mask_worklist, {density:.0%} True"] = lambda m=m: public(m)
        impls[f"launcher, {density:.0%} True"] = lambda m=m: W.block_mask_worklist(m)
        impls[f"torch.nonzero, {density:.0%} True"] = lambda m=m: torch.nonzero(m)
    for m in (mask_of(0.3), mask_of(0.7)):
        res = public(m).coords
        assert torch.equal(res, torch.nonzero(m).int()), "worklist differs from nonzero"
    t = {k: synced_us(fn, calls=calls, rounds=rounds, sync=sync) for k, fn in impls.items()}
    out.append(
        "### synchronized time per call (us; ÷ ours: against the public call at the same density)"
    )
    body = []
    for k, v in t.items():
        ours = t[f"attnops.block_mask_worklist, {k.rsplit(', ', 1)[1]}"]
        body.append((k, f"{v:.1f}", f"{v / ours:.2f}"))
    out.append(markdown(("implementation", "us/call", "÷ ours"), body))
    m = mask_of(0.3)
    for tile, label in (
        (W._TILE, "default chunks"),
        (KB, "one row a chunk"),
        (4 * KB, "4 rows a chunk"),
    ):
        programs, rows_out, second_row = parts(m.view(torch.uint8), tile)
        out.append(f"### steps at 30% True, {label} ({programs} programs): host us, GPU us")
        body = [(name, f"{h:.1f}", "-" if g is None else f"{g:.1f}") for name, h, g in rows_out]
        body.append(
            (
                "sum",
                f"{sum(h for _, h, _ in rows_out):.1f}",
                f"{sum(g for _, _, g in rows_out if g is not None):.1f}",
            )
        )
        name, h, g = second_row
        body.append((f"({name})", f"{h:.1f}", f"{g:.1f}"))
        out.append(markdown(("step", "host us", "GPU us (graph)"), body))
    return out


def gate(quick: bool):
    from attnops_kernels.gate import triton as G

    torch.manual_seed(0)
    shape = (2, 16, 2, 16) if DRY else (4, 8192, 16, 128)
    H, K = shape[-2:]
    g = torch.randn(shape, device=DEV).to(torch.bfloat16)
    A = torch.randn(H, device=DEV) * 0.5
    b = torch.randn(H * K, device=DEV) * 0.5
    go = torch.randn(shape, device=DEV)
    n = g.numel()
    fwd_bytes, bwd_bytes = n * (2 + 4), n * (2 + 4 + 2)
    copy_f, copy_b = copy_graph_us(fwd_bytes, g.device), copy_graph_us(bwd_bytes, g.device)
    out = [f"## gate, g = {shape} bf16, A_log and dt_bias given"]
    out.append(
        f"d2d copy of the forward's bytes ({fwd_bytes / 1e6:.1f} MB): {copy_f:.1f} us "
        f"({fwd_bytes / copy_f / 1e6:.2f} TB/s); of the backward pass's "
        f"({bwd_bytes / 1e6:.1f} MB): {copy_b:.1f} us ({bwd_bytes / copy_b / 1e6:.2f} TB/s)"
    )

    names = ("_FWD_TILE", "_FWD_WARPS", "_BWD_TILE", "_BWD_WARPS", "_BWD_STAGES")
    defaults = {k: getattr(G, k) for k in (*names, "_BWD_TARGET_PROGRAMS")}
    variants = [dict(defaults)]
    if not quick:
        variants += [
            dict(defaults, _FWD_TILE=2048),
            dict(defaults, _FWD_TILE=8192, _FWD_WARPS=8),
            dict(defaults, _BWD_STAGES=1),
            dict(defaults, _BWD_STAGES=2),
            dict(defaults, _BWD_TILE=2048, _BWD_WARPS=8),
            dict(defaults, _BWD_TARGET_PROGRAMS=2048),
            dict(defaults, _BWD_TARGET_PROGRAMS=8192),
        ]
    ref = {}
    body = []
    for v in variants:
        for k, val in v.items():
            setattr(G, k, val)
        G._block_sizes_cached.cache_clear()
        label = ", ".join(
            f"{k.strip('_').lower()}={val}" for k, val in v.items() if val != defaults[k]
        )
        for kind in ("softplus", "lower_bound"):
            fwd = G.gate_fwd(g, A, b, kind, -5.0)
            bwd = G.gate_bwd(g, A, b, go, kind, -5.0)
            if not label:
                ref[kind] = (fwd, *bwd)
                diff = "-"
            else:
                diff = max(
                    (x.float() - y.float()).abs().max().item()
                    for x, y in zip((fwd, *bwd), ref[kind], strict=True)
                )
                diff = f"{diff:.2g}"
            tf = graph_us(lambda kind=kind: G.gate_fwd(g, A, b, kind, -5.0), calls=20)
            tb = graph_us(lambda kind=kind: G.gate_bwd(g, A, b, go, kind, -5.0), calls=20)
            body.append(
                (
                    label or "default",
                    kind,
                    f"{tf:.1f}",
                    f"{fwd_bytes / tf / 1e6:.2f}",
                    f"{100 * copy_f / tf:.0f}%",
                    f"{tb:.1f}",
                    f"{bwd_bytes / tb / 1e6:.2f}",
                    f"{100 * copy_b / tb:.0f}%",
                    f"{tf + tb:.1f}",
                    diff,
                )
            )
    for k, val in defaults.items():
        setattr(G, k, val)
    G._block_sizes_cached.cache_clear()
    out.append(
        "### GPU time by CUDA-graph replay (us); bwd = elementwise pass + sum of the partials; "
        "diff: max |this - default| over out, dg, dA_log, ddt_bias"
    )
    out.append(
        markdown(
            ("tiles", "kind", "fwd", "TB/s", "% copy", "bwd", "TB/s", "% copy", "fwd+bwd", "diff"),
            body,
        )
    )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="default tiles only, fewer rounds")
    p.add_argument("--dry-run", action="store_true", help="CPU, interpreter, tiny shapes")
    args = p.parse_args()
    name = "CPU (dry run)" if DRY else torch.cuda.get_device_name()
    print(f"# parts: {name}, torch {torch.__version__}")
    for section in (worklist, gate):
        try:
            lines = section(args.quick)
        except Exception as e:  # noqa: BLE001 - report and go on with the other section
            lines = [f"**{section.__name__} failed**: {type(e).__name__}: {e}"]
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
