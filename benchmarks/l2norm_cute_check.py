"""Check and time the CuTeDSL l2norm launchers beside the Triton ones, on a CUDA machine.

Numerics of ``attnops_kernels.l2norm.cute`` against the float32 reference and the Triton
launchers (every dtype, odd row counts, D from 1 to 4096), the signature each layout selects
(compact, strided rows, misaligned storage, non-collapsible dims), int64-ABI and from_dlpack
equivalence, compile reuse across outer sizes, launches on the current stream (CUDA graph
capture), then a table: GPU time by CUDA-graph replay and host cost per call, Triton vs CuTe.

    bash benchmarks/l2norm_cute_check.sh [--skip-bench] [--sweep]   # unpacks the CuTeDSL bundle

Every check prints one line (PASS/FAIL); the full detail of failures goes to ``$OUT/l2norm_cute_check.log``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from attnops import _layout
from attnops_kernels import _cute
from attnops_kernels.l2norm import cute as lc
from attnops_kernels.l2norm import triton as lt
from attnops_kernels.l2norm.reference import l2norm_ref

EPS = 1e-6
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}
COPY_TBPS = 4.24
SHORT = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}

_results: list[tuple[str, bool, str]] = []
_log = None  # the log file under --out, written as the checks go (a timeout keeps what ran)


def log(msg: str) -> None:
    if _log is not None:
        _log.write(msg + "\n")
        _log.flush()


def record(name: str, ok: bool, detail: str = "") -> None:
    _results.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'} {name}{'' if ok else ': ' + detail[:300]}", flush=True)
    log(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok else f"\n{detail}"))


@contextlib.contextmanager
def check(name: str):
    try:
        yield
    except Exception:
        record(name, False, traceback.format_exc())


# --------------------------------------------------------------------------------------------
# Numerics
# --------------------------------------------------------------------------------------------


def close(got: torch.Tensor, want: torch.Tensor, tol: float) -> str:
    """'' when ``got`` matches ``want`` within atol = rtol = tol, else a description."""
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    g, w = got.float(), want.float()
    if torch.allclose(g, w, atol=tol, rtol=tol, equal_nan=True):
        return ""
    err = (g - w).abs()
    return f"max abs err {err.max().item():.3g} (tol {tol})"


def reference(x: torch.Tensor, dy: torch.Tensor):
    xr = x.detach().float().requires_grad_()
    y = l2norm_ref(xr, EPS)
    y.backward(dy.float())
    rstd = torch.rsqrt(x.float().pow(2).sum(-1) + EPS)
    return y.detach(), rstd, xr.grad


def signatures(trace, op: str) -> list[str]:
    return [name for o, kind, name in trace if o == op and kind == "signature"]


def run_case(name: str, x: torch.Tensor, dy: torch.Tensor, want_sig: str | None = None) -> None:
    """Forward and backward of both launchers against the reference and each other."""
    with check(name):
        with _layout.dispatch_trace() as trace:
            y, rstd = lc.l2norm_fwd(x, EPS)
            dx = lc.l2norm_bwd(dy, x, rstd)
        torch.cuda.synchronize()
        ty, trstd = lt.l2norm_fwd(x, EPS)
        tdx = lt.l2norm_bwd(dy, x, trstd)
        ry, rrstd, rdx = reference(x, dy)
        tol = TOL[x.dtype]
        problems = [
            ("y-ref", close(y, ry, tol)),
            ("rstd-ref", close(rstd, rrstd, 1e-5 * max(1.0, rrstd.abs().max().item()))),
            ("dx-ref", close(dx, rdx, max(tol, TOL[dy.dtype]))),
            ("y-triton", close(y, ty, tol)),
            ("dx-triton", close(dx, tdx, max(tol, TOL[dy.dtype]))),
            ("y-contig", "" if y.is_contiguous() and dx.is_contiguous() else "not contiguous"),
            ("dtype", "" if y.dtype == x.dtype and dx.dtype == x.dtype else "wrong dtype"),
        ]
        sig = signatures(trace, "l2norm_fwd")
        if want_sig is not None and sig != [want_sig]:
            problems.append(("signature", f"{sig} != [{want_sig!r}]"))
        bad = [f"{k}: {v}" for k, v in problems if v]
        record(f"{name} [{sig[0] if sig else '?'}]", not bad, "; ".join(bad))


def check_numerics() -> None:
    torch.manual_seed(0)
    for dtype, D in itertools.product(DTYPES, (1, 7, 63, 64, 100, 128, 256, 1000, 4096)):
        x = torch.randn(3, 37, D, device="cuda", dtype=dtype)
        dy = torch.randn_like(x)
        aligned = (D * x.element_size()) % 16 == 0
        sig = "compact/int32" if aligned else "general/int32"
        run_case(f"numerics {SHORT[dtype]}-R111-D{D}", x, dy, sig)
    # grad_y in another dtype than x.
    for dtype, dy_dtype in ((torch.bfloat16, torch.float32), (torch.float32, torch.float16)):
        x = torch.randn(5, 13, 128, device="cuda", dtype=dtype)
        run_case(
            f"mixed x={SHORT[dtype]} dy={SHORT[dy_dtype]}", x, torch.randn_like(x, dtype=dy_dtype)
        )


def check_layouts() -> None:
    torch.manual_seed(1)
    for dtype, D in itertools.product(DTYPES, (64, 100, 128)):
        tag = f"{SHORT[dtype]}-D{D}"
        big = torch.randn(3, 74, D, device="cuda", dtype=dtype)
        strided = big[:, ::2]  # leading dims collapse into one row mode of stride 2*D
        run_case(f"strided rows {tag}", strided, torch.randn_like(strided), "general/int32")
        n = 37
        flat = torch.randn(n * D + 1, device="cuda", dtype=dtype)
        misaligned = flat[1:].view(n, D)
        run_case(f"misaligned {tag}", misaligned, torch.randn_like(misaligned), "general/int32")
        # (3, 37, D) with strides (D, 3*D, 1): the leading dims do not collapse, so x is copied.
        crossed = torch.randn(37, 3, D, device="cuda", dtype=dtype).transpose(0, 1)
        want = "compact/int32" if (D * crossed.element_size()) % 16 == 0 else "general/int32"
        run_case(f"non-collapsible {tag}", crossed, torch.randn_like(crossed), want)
        # Last dim not contiguous: copied.
        inner = torch.randn(n, D, 2, device="cuda", dtype=dtype)[..., 0]
        run_case(f"strided last dim {tag}", inner, torch.randn_like(inner), want)
    # rstd with a stride (bwd general), grad_y strided while x is compact.
    x = torch.randn(41, 128, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(41, 256, device="cuda", dtype=torch.bfloat16)[:, :128]
    with check("bwd strided grad_y and rstd"), _layout.dispatch_trace() as trace:
        _, rstd = lc.l2norm_fwd(x, EPS)
        rstd_strided = torch.stack([rstd, rstd], -1)[:, 0]
        dx = lc.l2norm_bwd(dy, x, rstd_strided)
        _, _, rdx = reference(x, dy)
        sig = signatures(trace, "l2norm_bwd")
        problem = close(dx, rdx, TOL[x.dtype]) or ("" if sig == ["general/int32"] else f"{sig}")
        record("bwd strided grad_y and rstd", not problem, problem)
    # Empty inputs, as the Triton launchers handle them.
    with check("empty inputs"):
        y, rstd = lc.l2norm_fwd(torch.empty(0, 64, device="cuda"), EPS)
        y2, rstd2 = lc.l2norm_fwd(torch.empty(3, 0, device="cuda"), EPS)
        dx = lc.l2norm_bwd(
            torch.empty(3, 0, device="cuda"), torch.empty(3, 0, device="cuda"), rstd2
        )
        ok = (
            y.shape == (0, 64)
            and rstd.shape == (0,)
            and rstd2.shape == (3,)
            and torch.allclose(rstd2.cpu(), torch.full((3,), EPS**-0.5))
            and dx.shape == (3, 0)
        )
        record("empty inputs", ok, f"{y.shape} {rstd.shape} {rstd2} {dx.shape}")


def check_int64_and_dlpack() -> None:
    torch.manual_seed(2)
    cases = {
        "compact": torch.randn(3, 37, 128, device="cuda", dtype=torch.bfloat16),
        "general": torch.randn(3, 74, 100, device="cuda", dtype=torch.float16)[:, ::2],
        "chunked": torch.randn(9, 4096, device="cuda", dtype=torch.float32),
    }
    for name, x in cases.items():
        dy = torch.randn_like(x)
        y, rstd = lc.l2norm_fwd(x, EPS)
        dx = lc.l2norm_bwd(dy, x, rstd)
        variants = {
            "int64": lambda: _layout.force_int64_abi(),
            "from_dlpack": lambda: _cute.dlpack_launches(),
            "from_dlpack+int64": lambda: _stacked(
                _cute.dlpack_launches(), _layout.force_int64_abi()
            ),
        }
        for vname, ctx in variants.items():
            with check(f"{vname} equals default: {name}"), ctx(), _layout.dispatch_trace() as trace:
                y2, rstd2 = lc.l2norm_fwd(x, EPS)
                dx2 = lc.l2norm_bwd(dy, x, rstd2)
                torch.cuda.synchronize()
                same = torch.equal(y, y2) and torch.equal(rstd, rstd2) and torch.equal(dx, dx2)
                sig = signatures(trace, "l2norm_fwd") + signatures(trace, "l2norm_bwd")
                abi_ok = all(s.endswith("int64") for s in sig) == ("int64" in vname)
                detail = f"equal={same} signatures={sig}"
                if not same:
                    detail += f" max|dy|={(y.float() - y2.float()).abs().max().item():.3g}"
                record(f"{vname} equals default: {name} {sig}", same and abi_ok, detail)


@contextlib.contextmanager
def _stacked(*contexts):
    with contextlib.ExitStack() as stack:
        for c in contexts:
            stack.enter_context(c)
        yield


def check_compile_reuse() -> None:
    with check("compile reuse"):
        x = torch.randn(5, 72, device="cuda", dtype=torch.float16)
        lc.l2norm_bwd(x, x, lc.l2norm_fwd(x, EPS)[1])  # compiles both (if not already)
        before = (lc._FWD.compiles, lc._BWD.compiles)
        with _layout.dispatch_trace() as trace:
            for shape in ((7, 72), (3, 11, 72), (1, 72), (2, 3, 5, 72), (4099, 72)):
                x = torch.randn(shape, device="cuda", dtype=torch.float16)
                y, rstd = lc.l2norm_fwd(x, EPS)
                lc.l2norm_bwd(y, x, rstd)
        after = (lc._FWD.compiles, lc._BWD.compiles)
        compiles = [e for e in trace if e[1] == "compile"]
        ok = before == after and not compiles
        record(
            "second call with new outer sizes compiles nothing",
            ok,
            f"{before} -> {after} {compiles}",
        )


def check_stream() -> None:
    """The kernels launch on the current torch stream: a CUDA graph captures them (a launch on
    another stream would fail the capture or be left out of the replay)."""
    with check("current stream (graph capture, side stream)"):
        for dtype, cols in ((torch.bfloat16, 128), (torch.float32, 100)):
            x = torch.randn(77, cols, device="cuda", dtype=dtype)
            dy = torch.randn_like(x)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                y, rstd = lc.l2norm_fwd(x, EPS)
                lc.l2norm_bwd(dy, x, rstd)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                gy, grstd = lc.l2norm_fwd(x, EPS)
                gdx = lc.l2norm_bwd(dy, x, grstd)
            x.copy_(torch.randn_like(x))
            dy.copy_(torch.randn_like(dy))
            graph.replay()
            torch.cuda.synchronize()
            ry, _, rdx = reference(x, dy)
            problem = close(gy, ry, TOL[dtype]) or close(gdx, rdx, TOL[dtype])
            record(f"graph replay recomputes {SHORT[dtype]}-D{cols}", not problem, problem)


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def graph_time_us(fns: dict[str, Callable[[], object]], inner: int = 20, rounds: int = 15):
    """Median GPU time per call of each function, from CUDA-graph replays in interleaved rounds."""
    graphs = {}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in fns.values():
            for _ in range(3):
                fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    for name, fn in fns.items():
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(inner):
                fn()
        graphs[name] = g
    times: dict[str, list[float]] = {name: [] for name in fns}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(rounds):
        for name, g in graphs.items():
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1e3 / inner)
    del graphs
    return {name: statistics.median(t) for name, t in times.items()}


def host_us(fn: Callable[[], object], calls: int = 300, rounds: int = 7) -> float:
    """Host cost per call: ``calls`` launches without synchronizing, best of ``rounds``."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best = min(best, (t1 - t0) / calls * 1e6)
    return best


def fwd_only(mod, x):
    return lambda: mod.l2norm_fwd(x, EPS)


def bwd_only(mod, dy, x, rstd):
    return lambda: mod.l2norm_bwd(dy, x, rstd)


def fwd_bwd(mod, x, dy):
    def run():
        y, rstd = mod.l2norm_fwd(x, EPS)
        return mod.l2norm_bwd(dy, x, rstd)

    return run


def bench_row(label: str, x: torch.Tensor, small: torch.Tensor, op: str) -> str:
    """One table row: GPU time of both launchers on ``x``, host cost on ``small``."""
    dy, small_dy = torch.randn_like(x), torch.randn_like(small)
    n, es = x.numel() // x.shape[-1], x.element_size()
    fwd_bytes = 2 * x.numel() * es + 4 * n
    nbytes = fwd_bytes if op == "fwd" else fwd_bytes + 3 * x.numel() * es + 4 * n
    if op == "fwd":
        fns = {m: fwd_only(m, x) for m in (lt, lc)}
        hosts = {m: fwd_only(m, small) for m in (lt, lc)}
    else:
        fns = {m: fwd_bwd(m, x, dy) for m in (lt, lc)}
        hosts = {m: fwd_bwd(m, small, small_dy) for m in (lt, lc)}
    gpu = graph_time_us({"triton": fns[lt], "cute": fns[lc]})
    host = {name: host_us(hosts[m]) for name, m in (("triton", lt), ("cute", lc))}
    tbps = {k: nbytes / (v * 1e-6) / 1e12 for k, v in gpu.items()}
    return (
        f"{label:10} {op:8} | {gpu['triton']:9.1f} {tbps['triton']:5.2f} "
        f"{tbps['triton'] / COPY_TBPS:5.2f} | {gpu['cute']:8.1f} {tbps['cute']:5.2f} "
        f"{tbps['cute'] / COPY_TBPS:5.2f} | {gpu['cute'] / gpu['triton']:8.2f} | "
        f"{host['triton']:8.1f} {host['cute']:9.1f}"
    )


def bench() -> list[str]:
    header = (
        f"{'dtype D':10} {'op':8} | {'triton us':>9} {'TB/s':>5} {'frac':>5} | "
        f"{'cute us':>8} {'TB/s':>5} {'frac':>5} | {'cute/tri':>8} | "
        f"{'host tri':>8} {'host cute':>9}"
    )
    rows = [
        "x = (4, 8192, 16, D); TB/s counts bytes read + written; frac of 4.24 TB/s; host us per "
        "call at (4, 16, 16, D)",
        header,
        "-" * len(header),
    ]
    for dtype, D in itertools.product((torch.bfloat16, torch.float32), (64, 128, 256)):
        x = torch.randn(4, 8192, 16, D, device="cuda", dtype=dtype)
        small = torch.randn(4, 16, 16, D, device="cuda", dtype=dtype)
        for op in ("fwd", "fwd+bwd"):
            rows.append(bench_row(f"{SHORT[dtype]} {D}", x, small, op))
            print(rows[-1], flush=True)
        del x
    # Strided rows (general signature for CuTe; Triton copies a non-contiguous x first).
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(4, 8192, 32, 128, device="cuda", dtype=dtype)[:, :, ::2]
        small = torch.randn(4, 16, 32, 128, device="cuda", dtype=dtype)[:, :, ::2]
        for op in ("fwd", "fwd+bwd"):
            rows.append(bench_row(f"{SHORT[dtype]} 128 s", x, small, op))
            print(rows[-1], flush=True)
        del x
    rows.append("(s: x[:, :, ::2] of a (4, 8192, 32, 128) tensor, the general signature)")
    src = torch.randn(4, 8192, 16, 256, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy = graph_time_us({"copy": lambda: dst.copy_(src)})["copy"]
    rows.append(
        f"device-to-device copy of {src.numel() * 2 / 2**20:.0f} MiB: {copy:.1f} us, "
        f"{2 * src.numel() * 2 / (copy * 1e-6) / 1e12:.2f} TB/s (read + written)"
    )
    return rows


def host_breakdown() -> list[str]:
    """Where the host time of one CuTe forward goes (bf16, D = 128, 1024 rows)."""
    x = torch.randn(4, 16, 16, 128, device="cuda", dtype=torch.bfloat16)
    x2 = x.view(-1, 128)
    y2, r2 = torch.empty_like(x2), torch.empty(x2.shape[0], device="cuda")
    fn = lc._FWD.get((x.dtype, 128, True, False))
    saved = lc._FWD.get
    parts = {
        "empty lambda": lambda: None,
        "alloc y + rstd (new_empty, Size)": lambda: (
            x.new_empty(x.shape),
            x.new_empty(x.shape[:-1], dtype=torch.float32),
        ),
        "alloc y + rstd (empty_like, int)": lambda: (
            torch.empty_like(x, memory_format=torch.contiguous_format),
            x.new_empty(1024, dtype=torch.float32),
        ),
        "compiled fn(x2, y2, r2, eps)": lambda: fn(x2, y2, r2, EPS),
        "launcher, kernel call stubbed": lambda: lc.l2norm_fwd(x, EPS),
        "launcher": lambda: lc.l2norm_fwd(x, EPS),
        "triton launcher": lambda: lt.l2norm_fwd(x, EPS),
    }
    rows = ["host breakdown, us per call (bf16, D 128, 1024 rows):"]
    for name, f in parts.items():
        if name == "launcher, kernel call stubbed":
            lc._FWD.get = lambda key: (lambda *args: None)
        try:
            rows.append(f"  {name:36} {host_us(f):6.2f}")
        finally:
            lc._FWD.get = saved
        print(rows[-1], flush=True)
    with _cute.dlpack_launches():
        rows.append(f"  {'launcher, from_dlpack path':36} {host_us(parts['launcher']):6.2f}")
    print(rows[-1], flush=True)
    return rows


def sweep() -> list[str]:
    """GPU time of the compact kernels over tilings, to choose the defaults."""
    rows = [
        "tiling sweep (compact, us per call by graph replay): "
        "r: rows spread over a row's threads, v: vectors per thread first; "
        "loads in flight per thread x CTA threads"
    ]
    saved = (lc._SPREAD_ROWS, lc._LOADS_IN_FLIGHT, lc._CTA_THREADS)
    configs = list(itertools.product((True, False), (1, 2, 4), (128, 256)))
    try:
        for dtype, D in itertools.product((torch.bfloat16, torch.float32), (64, 128, 256)):
            x = torch.randn(4, 8192, 16, D, device="cuda", dtype=dtype)
            dy = torch.randn_like(x)
            _, rstd = lc.l2norm_fwd(x, EPS)
            results = {}
            for config in configs:
                lc._SPREAD_ROWS, lc._LOADS_IN_FLIGHT, lc._CTA_THREADS = config
                lc._FWD.clear()
                lc._BWD.clear()
                fns = {"fwd": fwd_only(lc, x), "bwd": bwd_only(lc, dy, x, rstd)}
                results[config] = graph_time_us(fns, rounds=7)
            for op in ("fwd", "bwd"):
                cells = " ".join(
                    f"{'r' if s else 'v'}{v}x{c}:{t[op]:.1f}" for (s, v, c), t in results.items()
                )
                best = min(results, key=lambda k: results[k][op])
                rows.append(f"{SHORT[dtype]} D{D} {op}: {cells}  best {best}")
                print(rows[-1], flush=True)
            del x, dy, rstd
    finally:
        lc._SPREAD_ROWS, lc._LOADS_IN_FLIGHT, lc._CTA_THREADS = saved
        lc._FWD.clear()
        lc._BWD.clear()
    return rows


def _quack():
    """quack-kernels' row norm (``quack.rmsnorm``), or None where it is not importable."""
    try:
        rmsnorm = importlib.import_module("quack.rmsnorm")
    except Exception as exc:  # noqa: BLE001 - any import failure leaves its column empty
        print(f"quack: not importable ({type(exc).__name__}: {exc})", flush=True)
        return None
    return rmsnorm


def crossover(elements: int, widths: Sequence[int], dtypes: Sequence[torch.dtype]) -> list[str]:
    """GPU time (graph replay) of each backend per row width at a fixed number of elements:
    Triton, CuTe and quack's rmsnorm without weight (the same bytes: x read, y written; rstd
    with grad), forward and backward; host cost per forward call at 1024 rows. Where CuTe is
    slower than Triton, the layout contract should keep it off (docs/performance.md)."""
    q = _quack()
    rows = [
        f"crossover: x = (elements / D, D), {elements} elements; GPU us by graph replay "
        "(median); host us per forward call at 1024 rows",
        "| dtype | D | pass | triton us | cute us | quack us | cute / triton | cute / quack "
        "| host triton | host cute | host quack |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for dtype in dtypes:
        for D in widths:
            x = torch.randn(elements // D, D, device="cuda", dtype=dtype)
            dy = torch.randn_like(x)
            small = torch.randn(1024, D, device="cuda", dtype=dtype)
            _, rstd = lt.l2norm_fwd(x, EPS)
            fns = {
                ("fwd", "triton"): fwd_only(lt, x),
                ("fwd", "cute"): fwd_only(lc, x),
                ("bwd", "triton"): bwd_only(lt, dy, x, rstd),
                ("bwd", "cute"): bwd_only(lc, dy, x, rstd),
            }
            hosts = {"triton": fwd_only(lt, small), "cute": fwd_only(lc, small)}
            if q is not None:
                _, _, qr = q.rmsnorm_fwd(x, None, eps=EPS, store_rstd=True)
                fns["fwd", "quack"] = lambda x=x: q.rmsnorm_fwd(x, None, eps=EPS)
                fns["bwd", "quack"] = lambda x=x, dy=dy, qr=qr: q.rmsnorm_bwd(x, None, dy, qr)
                hosts["quack"] = lambda small=small: q.rmsnorm_fwd(small, None, eps=EPS)
            times = graph_time_us(fns)
            host = {k: host_us(f) for k, f in hosts.items()}
            for p in ("fwd", "bwd"):
                t = {impl: times.get((p, impl)) for impl in ("triton", "cute", "quack")}

                def cell(v):
                    return "-" if v is None else f"{v:.1f}"

                def ratio(a, b):
                    return "-" if a is None or b is None else f"{a / b:.2f}"

                rows.append(
                    f"| {SHORT[dtype]} | {D} | {p} | {cell(t['triton'])} | {cell(t['cute'])} | "
                    f"{cell(t['quack'])} | {ratio(t['cute'], t['triton'])} | "
                    f"{ratio(t['cute'], t['quack'])} | {host['triton']:.1f} | "
                    f"{host['cute']:.1f} | {cell(host.get('quack'))} |"
                )
                print(rows[-1], flush=True)
            del x, dy, rstd
    return rows


def max_values_sweep(elements: int, widths: Sequence[int]) -> list[str]:
    """GPU time of the CuTe kernels at wide rows for several register budgets per thread
    (``_MAX_VALUES``: rows longer than the budget are read twice)."""
    rows = ["CuTe wide rows by _MAX_VALUES (bf16; us per call, graph replay): fwd / bwd"]
    saved = lc._MAX_VALUES
    try:
        for D in widths:
            x = torch.randn(elements // D, D, device="cuda", dtype=torch.bfloat16)
            dy = torch.randn_like(x)
            _, rstd = lt.l2norm_fwd(x, EPS)
            cells = []
            for budget in (64, 128, 256):
                lc._MAX_VALUES = budget
                lc._FWD.clear()
                lc._BWD.clear()
                t = graph_time_us(
                    {"fwd": fwd_only(lc, x), "bwd": bwd_only(lc, dy, x, rstd)}, rounds=7
                )
                cells.append(f"{budget}: {t['fwd']:.1f} / {t['bwd']:.1f}")
            rows.append(f"D {D}: " + "  ".join(cells))
            print(rows[-1], flush=True)
            del x, dy, rstd
    finally:
        lc._MAX_VALUES = saved
        lc._FWD.clear()
        lc._BWD.clear()
    return rows


def versions() -> str:
    import cutlass

    try:
        import tvm_ffi

        ffi = tvm_ffi.__version__
    except ImportError:
        ffi = "not installed"
    return (
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"triton {__import__('triton').__version__}, nvidia-cutlass-dsl "
        f"{getattr(cutlass, '__version__', '?')}, apache-tvm-ffi {ffi}, "
        f"{torch.cuda.get_device_name()}"
    )


def main() -> int:
    global _log
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--sweep", action="store_true", help="also time tilings")
    parser.add_argument(
        "--crossover",
        action="store_true",
        help="only the backends side by side per row width (Triton, CuTe, quack)",
    )
    parser.add_argument("--elements", type=int, default=1 << 25, help="of x, for --crossover")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    if args.crossover:
        widths = [64 << i for i in range(8)]
        rows = crossover(args.elements, widths, (torch.bfloat16, torch.float16))
        rows += max_values_sweep(args.elements, (1024, 2048, 4096, 8192))
        print("\n".join(["", versions(), *rows]))
        return 0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    _log = open(Path(args.out) / "l2norm_cute_check.log", "w")
    log(versions())
    print(versions(), flush=True)
    t0 = time.perf_counter()
    check_numerics()
    check_layouts()
    check_int64_and_dlpack()
    check_compile_reuse()
    check_stream()
    failed = [r for r in _results if not r[1]]
    summary = [
        f"checks: {len(_results) - len(failed)} passed, {len(failed)} failed "
        f"({time.perf_counter() - t0:.1f} s; compiles: fwd {lc._FWD.compiles}, "
        f"bwd {lc._BWD.compiles})"
    ]
    print(summary[0], flush=True)
    if not args.skip_bench:
        summary += bench()
        summary += host_breakdown()
    if args.sweep:
        summary += sweep()
    log("\n".join(summary))
    print("\n".join(["", versions(), *summary]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
