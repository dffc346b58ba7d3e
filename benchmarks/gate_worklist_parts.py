"""Where the time of ``gate`` and ``block_mask_worklist`` goes, kernel by kernel, on one GPU.

Run with the checkout importable as ``suite.sh`` makes it (``attnops``, ``attnops_kernels``):

    python benchmarks/gate_worklist_parts.py [--quick] [--dry-run] [--only worklist|gate]

- ``block_mask_worklist`` at mask (8, 16, 128, 128), 30% True: synchronized time per call
  against ``torch.nonzero``; host cost of each step (count launch, the host read of nnz,
  allocation, write launch; each launch through ``kernel[grid]`` and through the launcher's
  cached path) and GPU time of each kernel by CUDA-graph replay, with the default
  row chunks and with chunks of one and of four rows.
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
from _timing import copy_graph_us, graph_us, markdown, synced_us_interleaved  # noqa: E402

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


def worklist(quick: bool, shape=None, density=0.3):
    from attnops import block_mask_worklist as public
    from attnops_kernels import _triton as T
    from attnops_kernels.block_mask_worklist import triton as W

    torch.manual_seed(0)
    if shape is None:
        shape = (2, 2, 16, 16) if DRY else (8, 16, 128, 128)
    mask = torch.rand(shape, device=DEV) < density
    KB = shape[-1]
    calls, rounds = (2, 1) if DRY else (20, 3) if quick else (50, 5)
    out = [f"## block_mask_worklist, mask {shape}, {density:.0%} True"]

    def parts(tile):
        """Host and GPU cost of each step of the launcher with ``tile`` mask entries a chunk."""
        plan_id, grid, count_args, write_args = W._plan(
            mask.shape, mask.stride(), tile, W._MAX_PROGRAMS
        )
        programs = grid[0]
        counts = mask.new_empty((programs,), dtype=torch.int32)
        # The launcher's own scratch kind (Note [tally]): the word, the host int64, its view.
        scratch = W._Scratch(counts.device)
        rows_a, blocks = count_args[:-2], count_args[-2:]
        one_chunk, block_rows, block_kb, block_p = write_args[-4:]

        def count():
            W._block_count_kernel[grid](
                mask, counts, scratch.word, scratch.host, *rows_a,
                BLOCK_ROWS=blocks[0], BLOCK_KB=blocks[1], num_warps=W._NUM_WARPS,
            )  # fmt: skip

        count()
        sync()
        nnz = scratch.total.value
        res = counts.new_empty((nnz, 4))

        def write():
            W._block_write_kernel[grid](
                mask, counts, res, nnz, *write_args[:-4],
                ONE_CHUNK=one_chunk, BLOCK_ROWS=block_rows, BLOCK_KB=block_kb,
                BLOCK_P=block_p, num_warps=W._NUM_WARPS,
            )  # fmt: skip

        write()
        sync()
        assert torch.equal(res, torch.nonzero(mask).int()), "worklist differs from nonzero"
        # The same launches through the launcher's cached path (Note [cached launches]), keyed
        # as the launcher keys them.
        state = T.launch_state(mask)

        def count_cached():
            W._count.launch(
                state, grid, counts, (plan_id, True, True), mask, counts, scratch.word, scratch.host,
                *count_args, num_warps=W._NUM_WARPS,
            )  # fmt: skip

        def write_cached():
            W._write.launch(
                state, grid, res, (plan_id, True, True, True, nnz > 0x7FFFFFFF), mask, counts, res,
                nnz, *write_args, num_warps=W._NUM_WARPS,
            )  # fmt: skip

        res.zero_()
        count_cached()
        write_cached()
        sync()
        assert torch.equal(res, torch.nonzero(mask).int()), "cached launches differ from nonzero"

        def read_nnz(read):
            count()
            sync()
            start = time.perf_counter_ns()
            read()
            return (time.perf_counter_ns() - start) / 1e3

        def read_tally():
            if not DRY:
                T.synchronize(state[0][0], state[1])
            return scratch.total.value

        copy_us = statistics.median(
            read_nnz(lambda: int(counts.cpu().sum())) for _ in range(2 if DRY else 50)
        )
        read_us = statistics.median(read_nnz(read_tally) for _ in range(2 if DRY else 50))
        rows_out = [
            ("count launch", host_per_call(count), graph_us(count, calls=20)),
            ("host read of nnz (stream sync, the tally's host int64)", read_us, None),
            ("new_empty (nnz, 4)", host_per_call(lambda: counts.new_empty((nnz, 4))), None),
            ("write launch", host_per_call(write), graph_us(write, calls=20)),
        ]
        cached = [
            ("count launch, cached", host_per_call(count_cached)),
            ("write launch, cached", host_per_call(write_cached)),
            ("host read of nnz by a copy back (counts.cpu().sum())", copy_us),
        ]
        return programs, rows_out, cached

    # Rounds in turn, so that a drifting host speed favours none of them.
    t = synced_us_interleaved(
        {
            "attnops.block_mask_worklist": lambda: public(mask),
            "launcher": lambda: W.block_mask_worklist(mask),
            "torch.nonzero": lambda: torch.nonzero(mask),
        },
        calls=calls,
        rounds=rounds,
        sync=sync,
    )
    ours = t["attnops.block_mask_worklist"]
    out.append("### synchronized time per call (us)")
    out.append(
        markdown(
            ("implementation", "us/call", "÷ ours"),
            [(k, f"{v:.1f}", f"{v / ours:.2f}") for k, v in t.items()],
        )
    )
    for tile, label in (
        (W._TILE, "default chunks"),
        (KB, "one row a chunk"),
        (4 * KB, "4 rows a chunk"),
        (4 * W._TILE, "4 times the default chunk"),
    ):
        programs, rows_out, cached = parts(tile)
        out.append(f"### steps, {label} ({programs} programs): host us per call, GPU us")
        body = [(name, f"{h:.1f}", "-" if g is None else f"{g:.1f}") for name, h, g in rows_out]
        body.append(
            (
                "sum",
                f"{sum(h for _, h, _ in rows_out):.1f}",
                f"{sum(g for _, _, g in rows_out if g is not None):.1f}",
            )
        )
        out.append(markdown(("step", "host us", "GPU us (graph)"), body))
        out.append(
            "Other paths: the cached launches, which the launcher takes after the first call "
            "(Note [cached launches]): "
            + ", ".join(f"{name} {h:.1f} us" for name, h in cached)
            + "."
        )
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
    p.add_argument("--only", choices=("worklist", "gate"), help="one section")
    p.add_argument(
        "--mask",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        help="the work list's mask shape B,H,QB,KB (default 8,16,128,128)",
    )
    p.add_argument("--density", type=float, default=0.3, help="the work list's share of True")
    args = p.parse_args()
    if args.mask is not None and len(args.mask) != 4:
        p.error(f"--mask takes B,H,QB,KB, got {args.mask}")
    name = "CPU (dry run)" if DRY else torch.cuda.get_device_name()
    print(f"# parts: {name}, torch {torch.__version__}")
    for section in (worklist, gate):
        if args.only and section.__name__ != args.only:
            continue
        try:
            if section is worklist:
                lines = worklist(args.quick, args.mask, args.density)
            else:
                lines = section(args.quick)
        except Exception as e:  # noqa: BLE001 - report and go on with the other section
            lines = [f"**{section.__name__} failed**: {type(e).__name__}: {e}"]
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
