"""chunk_gla's CuTeDSL walk against other copies of it: GPU time and outputs, side by side.

    PYTHONPATH=<site with attnops_kernels>:. python benchmarks/chunk_gla_cute_ab.py \\
        [OTHER.py ...] [--knob "NAME=VALUE ..." ...] [--shapes "B,T,H,K;..."] [--rounds 3] [--h0] \\
        [--save-states]

Each ``OTHER.py`` is another version of ``kernels/chunk_gla/cute.py`` (``git show
REV:kernels/chunk_gla/cute.py > OTHER.py``; the same file gives an A/A run), loaded as a
module of the package beside the checkout's, with its compiled kernels kept apart (its cache
cleared: no disk cache). Each ``--knob "NAME=VALUE ..."`` is one more version: the checkout's,
with each ``config.NAME`` set to its VALUE (a Python literal) while it runs, e.g. ``--knob
_CUTE_SPLIT_WALKS=False`` or ``--knob "_CUTE_SPLIT_WALKS=True _CUTE_SPLIT_MIN_CHUNKS=0"``. For
each shape (K = V, bf16, ``g = logsigmoid(randn)``; by default the four of the suite), the
whole forward as the operator runs it (``chunk_gla_fwd`` with the shipped plan) with each
version of the walk: GPU time by CUDA-graph replay (median of five replays a round), the
versions interleaved round by round so that drift shows, and the largest difference of each
version's output and final state from the checkout's, relative to its largest value (0 means
bit for bit). One line per version: median, ratio to the checkout's,
every round, the differences.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import graph_us  # noqa: E402

SHAPES = "4,4096,16,128;8,2048,32,64;1,32768,16,128;1,8192,4,128"


def load(path: Path):
    """``path`` as ``attnops_kernels.chunk_gla.<its stem>``, so that its relative imports
    resolve to the checkout's package; its kernels compile apart from the checkout's."""
    name = f"attnops_kernels.chunk_gla.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    module._WALK.clear()
    return module


def use(package, version, defaults) -> None:
    """Make ``version`` (name, walk module, config knobs) the one that runs: its walk module, and
    every knob of the run at the version's value or else the checkout's."""
    _, module, knobs = version
    # triton.py's _cute_fwd imports the walk as ``from . import cute`` at each call.
    package.cute = module
    sys.modules["attnops_kernels.chunk_gla.cute"] = module
    for name, value in {**defaults, **knobs}.items():
        setattr(package.config, name, value)


def knob(text: str) -> tuple[str, dict[str, object]]:
    """``NAME=VALUE[ NAME=VALUE ...]`` as (the text, {NAME: the literal VALUE})."""
    knobs = {}
    for item in text.split():
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {item!r}")
        try:
            knobs[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError) as exc:
            raise argparse.ArgumentTypeError(f"{value!r} is not a Python literal") from exc
    if not knobs:
        raise argparse.ArgumentTypeError("expected NAME=VALUE, got nothing")
    return text, knobs


def run_shape(shape, versions, defaults, package, args) -> None:
    """Time and compare every version at one shape; print its lines."""
    from attnops_kernels.chunk_gla import config, triton

    B, T, H, K = (int(x) for x in shape.split(","))
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        torch.randn(B, T, H, K, device="cuda", generator=gen, dtype=torch.bfloat16)
        for _ in range(3)
    )
    g = F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=gen))
    h0 = torch.randn(B, H, K, K, device="cuda", generator=gen) if args.h0 else None

    def forward():
        return triton.chunk_gla_fwd(q, k, v, g, None, h0, None, True, save_states=args.save_states)

    results, times = {}, {version[0]: [] for version in versions}
    for version in versions:
        use(package, version, defaults)
        o, _, ht = forward()
        results[version[0]] = o.float(), ht
    for _ in range(args.rounds):
        for version in versions:
            use(package, version, defaults)
            times[version[0]].append(graph_us(lambda: forward()[0], replays=5))
    use(package, versions[0], defaults)
    plan = config._cute_plan(q, k, v, False, args.save_states)
    print(f"B{B} T{T} H{H} K=V={K} plan {plan}")
    base = statistics.median(times["checkout"])
    o0, ht0 = results["checkout"]
    for name, _, _ in versions:
        o, ht = results[name]
        d_o = ((o - o0).abs().max() / o0.abs().max()).item()
        d_ht = ((ht - ht0).abs().max() / ht0.abs().max()).item() if ht is not None else 0.0
        us = statistics.median(times[name])
        rounds = " ".join(f"{t:.1f}" for t in times[name])
        print(
            f"  {name}: {us:.1f} us ({us / base:.3f}) [{rounds}] "
            f"output diff {d_o:.1e}, final state diff {d_ht:.1e}",
            flush=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("others", nargs="*", type=Path)
    ap.add_argument(
        "--knob", type=knob, action="append", default=[], help="NAME=VALUE [NAME=VALUE ...]"
    )
    ap.add_argument("--shapes", default=SHAPES, help="B,T,H,K;... (V = K)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--h0", action="store_true", help="with an initial state")
    ap.add_argument("--save-states", action="store_true")
    args = ap.parse_args()

    import attnops_kernels.chunk_gla as package
    import attnops_kernels.chunk_gla.cute as tree
    from attnops_kernels.chunk_gla import config  # also package.config from here on

    tree._WALK.clear()
    versions = [("checkout", tree, {})] + [(p.stem, load(p), {}) for p in args.others]
    versions += [(text, tree, knobs) for text, knobs in args.knob]
    names = {name for _, knobs in args.knob for name in knobs}
    for name in sorted(names):
        if not hasattr(config, name):
            ap.error(f"config has no {name}")
    defaults = {name: getattr(config, name) for name in names}
    for shape in args.shapes.split(";"):
        run_shape(shape, versions, defaults, package, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
