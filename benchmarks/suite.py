"""What the generated benchmarks cannot say: first calls, recompiles and the layers of a call.

The shapes, GPU times, work rates, numerics and baselines of every operator are declared in
``ops.yaml`` (``benchmark:``) and measured by ``generated/benchmarks/bench_<op>.py``, which
``benchmarks/suite.sh`` runs first. This script adds, per operator, on the smallest shape of its
benchmark (its inputs drawn by the benchmark's own ``make_inputs``):

- the first eager call in this process (Triton compile included) and the second, and the
  ``wrap_triton`` calls an eager call makes (0: launches go straight to the kernel);
- ``torch.compile(dynamic=True, fullgraph=True)``: the first call, the graphs it compiled, and
  the graphs compiled for two more sizes (recompiles);
- host cost of the layers under the public function: the eager fast path, the dispatcher path
  (``set_eager_fast_path(False)``) and the forward launcher called directly.

    python benchmarks/suite.py [--ops l2norm,gate] [--dry-run] [--no-compile] [--warmup]

``--warmup`` first runs ``attnops.warmup()`` on the first-call shapes and prints its time: the
first eager calls that follow then show what a user pays after warming up.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPS = ("l2norm", "gate", "chunk_gla", "recurrent_gla_step", "block_mask_worklist")
ALIASES = {"recurrent": "recurrent_gla_step", "block_mask": "block_mask_worklist"}
ALIASES["chunk"] = "chunk_gla"
# The varying size of the first-call compile checks: equal to no other dim of the shapes (duck
# sizing would tie them and recompile) and never 0 or 1 (specialized).
FIRST_CALL_SIZES = (24, 40, 56)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated operators (default all)")
    p.add_argument("--dry-run", action="store_true", help="CPU (sets TRITON_INTERPRET=1)")
    p.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    p.add_argument("--calls", type=int, default=200, help="timed calls of host cost (median)")
    p.add_argument(
        "--warmup",
        action="store_true",
        help="attnops.warmup() on the first-call shapes first: the first calls then compile nothing",
    )
    args = p.parse_args(argv)
    args.op_list = []
    for name in args.ops.split(","):
        name = ALIASES.get(name.strip(), name.strip())
        if name not in OPS:
            p.error(f"unknown op {name!r}; expected one of: {', '.join(OPS)}")
        if name not in args.op_list:
            args.op_list.append(name)
    return args


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.dry_run:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import yaml  # noqa: E402

_bench = importlib.import_module("attnops._bench")
_runtime = importlib.import_module("attnops._runtime")


def benchmark_module(op: str):
    """``generated/benchmarks/bench_<op>.py``, imported by path (the folder is no package)."""
    path = ROOT / "generated" / "benchmarks" / f"bench_{op}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{op}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BENCH


def forward_launcher(op: str):
    """The forward launcher the CUDA implementation runs last (the portable one), or the CPU one,
    and the names of the forward schema's keyword-only arguments (passed by keyword, the arity
    flag too where there are some: docs/spec.md, *`forward` and `backward`*)."""
    spec = yaml.safe_load((ROOT / "ops.yaml").read_text(encoding="utf-8"))
    forward = spec["ops"][op]["forward"]
    launchers = forward["launchers"]
    ref = launchers.get("cuda") if torch.cuda.is_available() else launchers["cpu"]
    if isinstance(ref, list):
        ref = ref[-1]["launcher"]
    module, _, name = ref.partition(":")
    schema = torch._C.parse_schema(f"{op}{forward['schema']}")
    keywords = {a.name for a in schema.arguments if a.kwarg_only}
    return getattr(importlib.import_module(module), name), keywords


def resized(bench, shape: str, size: int) -> dict:
    """The shape with its first size (the first '...' size, else the first dim) set to ``size``."""
    s = dict(bench.shapes[shape])
    if s.get("batch"):
        s["batch"] = (size, *s["batch"][1:])
    else:
        first = next(k for k, v in s.items() if isinstance(v, int) and not isinstance(v, bool))
        s[first] = size
    return s


def inputs_of(bench, shape: dict, dtype: str) -> dict:
    """The benchmark's inputs for a shape that need not be one of its own."""
    name = "__suite__"
    bench.shapes[name] = shape
    bench.configs[name] = bench.configs[next(iter(bench.configs))]
    try:
        return bench.make_inputs(name, dtype)
    finally:
        del bench.shapes[name], bench.configs[name]


def call(bench, inputs: dict, shape: str):
    extra = {bench.flag: bench.configs[shape][bench.flag]} if bench.flag else {}
    return lambda: bench.fn(**inputs, **extra)


def counting_compile(fn):
    """``torch.compile(fn, dynamic=True, fullgraph=True)`` with Inductor, counting graphs."""
    from torch._inductor.compile_fx import compile_fx

    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return compile_fx(gm, example_inputs)

    return torch.compile(fn, backend=backend, dynamic=True, fullgraph=True), count


@contextlib.contextmanager
def counting_wrap_triton():
    orig = torch.library.wrap_triton
    count = [0]

    def spy(kernel):
        count[0] += 1
        return orig(kernel)

    torch.library.wrap_triton = spy
    try:
        yield count
    finally:
        torch.library.wrap_triton = orig


def first_calls(op: str, bench, args, sync) -> list[str]:
    shape = next(iter(bench.shapes))
    dtype = next(iter(bench.dtypes))
    sizes = [inputs_of(bench, resized(bench, shape, n), dtype) for n in FIRST_CALL_SIZES]
    extra = {bench.flag: bench.configs[shape][bench.flag]} if bench.flag else {}
    row = [op]
    start = time.perf_counter()
    bench.fn(**sizes[0], **extra)
    sync()
    row.append(f"{(time.perf_counter() - start) * 1e3:.1f}")
    with counting_wrap_triton() as wrapped:
        start = time.perf_counter()
        bench.fn(**sizes[0], **extra)
        sync()
        row.append(f"{(time.perf_counter() - start) * 1e3:.2f}")
    row.append(str(wrapped[0]))
    if args.no_compile:
        return row + ["n/a (--no-compile)"] * 3
    fn, count = counting_compile(lambda kw: bench.fn(**kw, **extra))
    start = time.perf_counter()
    fn(sizes[0])
    sync()
    row += [f"{time.perf_counter() - start:.2f}", str(count[0])]
    first = count[0]
    for kw in sizes[1:]:
        fn(kw)
    sync()
    return row + [str(count[0] - first)]


def layers(op: str, bench, args, sync) -> list[str]:
    shape = next(iter(bench.shapes))
    dtype = next(iter(bench.dtypes))
    inputs = bench.make_inputs(shape, dtype)
    launcher, keywords = forward_launcher(op)
    positional = [v for k, v in inputs.items() if k not in keywords]
    by_name = {k: v for k, v in inputs.items() if k in keywords}
    flag = [bench.configs[shape][bench.flag]] if bench.flag else []
    if flag and keywords:
        by_name[bench.flag], flag = flag[0], []
    fns = {
        "public": call(bench, inputs, shape),
        "launcher": lambda: launcher(*positional, *flag, **by_name),
    }
    row = [f"{op}, {shape} {dtype}"]
    for name, fn in fns.items():
        row.append(f"{_bench.host_call_us(fn, calls=args.calls, sync=sync):.1f}")
        if name == "public":
            _runtime.set_eager_fast_path(False)
            try:
                row.append(f"{_bench.host_call_us(fn, calls=args.calls, sync=sync):.1f}")
            finally:
                _runtime.set_eager_fast_path(True)
    return row


def guarded(what: str, fn, width: int) -> list[str]:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one operator's failure must not stop the others
        traceback.print_exc(file=sys.stderr)
        return [what] + [f"err: {type(exc).__name__}"] * (width - 1)


def warm(benches: dict) -> None:
    """``attnops.warmup`` on the shape and dtype the first calls use (test-sample keys only),
    timed per operator; prints its table."""
    import attnops
    from attnops import _warmup

    plans = {p.op: p for p in _warmup._plans("attnops")}
    samples, dtypes = {}, []
    for op, bench in benches.items():
        known = set().union(*(s.keys() for s in plans[op].samples.values()))
        shape = resized(bench, next(iter(bench.shapes)), FIRST_CALL_SIZES[0])
        samples[op] = [{k: v for k, v in shape.items() if k in known}]
        dtypes.append(next(iter(bench.dtypes)))
    start = time.perf_counter()
    entries = attnops.warmup(dtypes=sorted(set(dtypes)), ops=list(benches), samples=samples)
    total = time.perf_counter() - start
    rows = {}
    for e in entries:
        row = rows.setdefault(e.op, [e.op, 0, 0.0, 0])
        row[1] += e.calls
        row[2] += e.seconds
        row[3] += len(e.kernels)
    print(f"### attnops.warmup() on those shapes: {total:.2f} s in all")
    head = ("op", "calls", "seconds", "Triton kernels compiled or loaded")
    print(
        _bench.markdown(head, [[r[0], str(r[1]), f"{r[2]:.2f}", str(r[3])] for r in rows.values()])
    )


def main(args) -> int:
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    benches = {op: benchmark_module(op) for op in args.op_list}
    if args.warmup:
        warm(benches)
    head = ("op", "1st eager ms", "2nd eager ms", "wrap_triton calls", "1st compile s")
    head += ("graphs", "recompiles, 2 more sizes")
    rows = [
        guarded(op, lambda op=op: first_calls(op, benches[op], args, sync), 7) for op in benches
    ]
    print("### first calls and recompiles (smallest benchmark shape, its first size varied)")
    print(_bench.markdown(head, rows))
    head = ("op, shape", "public us", "dispatcher path us", "launcher us")
    rows = [guarded(op, lambda op=op: layers(op, benches[op], args, sync), 4) for op in benches]
    print("### host cost per forward call, median with the device idle before each call")
    print(_bench.markdown(head, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(ARGS))
