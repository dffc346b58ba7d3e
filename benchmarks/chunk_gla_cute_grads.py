"""chunk_gla's backward with its gradients' pass in CuTeDSL (kernels/chunk_gla/cute_bwd.py)
against the Triton passes, and the whole forward + backward of the public operator with every
CuTeDSL kernel against the Triton kernels alone, on a Hopper GPU with CuTeDSL installed.

    PYTHONPATH=<site with attnops_kernels and attnops>:. python benchmarks/chunk_gla_cute_grads.py

GPU time by CUDA-graph replay (the smallest median of two rounds that alternate the two
versions, ``--replays`` replays each), bf16, g = logsigmoid(randn):

- "bwd": ``chunk_gla_bwd`` alone, given the forward's chunk states (``save_states=True``) or
  recomputing them (the default), Triton passes against the CuTeDSL pass;
- "fwd, states saved": ``chunk_gla_fwd`` keeping the chunk states, the Triton forward against
  the CuTeDSL walk storing them;
- "fwd+bwd": ``torch.autograd.grad`` of one ``attnops.chunk_gla`` call, with the chunk states
  recomputed in the backward (the default ``save_states=False``) or saved by the forward, the
  Triton kernels alone (``ATTNOPS_CHUNK_GLA_CUTE=0``) against the CuTeDSL walk and pass.

``--walk-sweep`` instead times, at K = V = 64, T = 2048 and H = 32 for B of 2 to 16, the
CuTeDSL backward whose gradients' pass walks dh itself (one CTA per sequence and head) against
the one that reads dh from the Triton reverse walk (a CTA per multiprocessor), forced either way
whatever ``config._cute_bwd_walks`` would choose: where its threshold should lie.

``--state-walks`` instead times, at the four shapes, the backward with the CuTeDSL pass whose
state walks are Triton's against the one whose whole walks are CuTeDSL's (cute_states.py,
where ``config._cute_states`` allows them; split walks stay Triton's either way), with the
states saved and recomputed. ``--split-walks`` instead times, the same way, the two steps of
the split state walks in Triton against CuTeDSL (``config._CUTE_SPLIT_WALKS``, with
``config._CUTE_SPLIT_MIN_CHUNKS`` at 0 so that every split walk can go to CuTeDSL: where that
threshold should lie): the backward, and the forward whose segments' start states they give.

``--shapes "B,T,H,K;..."`` (V = K) replaces the four shapes.

``--triton-at DIR`` also times, after the table, the Triton forward + backward of an older tree of
the kernels against the operator with every CuTeDSL kernel (the last table's "fwd+bwd" rows):
``DIR/kernels`` is that tree (``git archive REV kernels | tar -x -C DIR``), imported as a package
of its own, its launchers called one after the other (``chunk_gla_fwd``, then ``chunk_gla_bwd``
with the states it kept, or none), in rounds alternating with ours. The Triton kernels of the
checkout gain with every change to the walks they share with the CuTeDSL plans; this is the
pair as it was at REV, measured in the same run.

Before timing, each shape's gradients of the two backwards are compared (``BAD`` where one
differs from the other by more than 2e-2 of its largest value, or is not finite); exit 1 on any.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _timing import graph_us, markdown  # noqa: E402

import attnops_kernels.chunk_gla.config as CF  # noqa: E402
import attnops_kernels.chunk_gla.triton as C  # noqa: E402

SHAPES = [(4, 4096, 16, 128), (8, 2048, 32, 64), (1, 32768, 16, 128), (1, 8192, 4, 128)]
BAD = 2e-2


def inputs(B, T, H, K):
    gen = torch.Generator(device="cuda").manual_seed(T + H)
    q, k, v, do = (
        torch.randn(B, T, H, K, device="cuda", generator=gen).bfloat16() for _ in range(4)
    )
    g = F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=gen))
    return q, k, v, g, do


def switch(cute):
    CF._CUTE_WALK = CF._CUTE_BWD = cute


def backward(q, k, v, g, do, h, save):
    return C.chunk_gla_bwd(q, k, v, g, None, None, None, do, None, h, save_states=save)


def step(attnops, xs, do, save=False):
    out = attnops.chunk_gla(*xs, save_states=save)
    return torch.autograd.grad(out.output, xs, do)


def pair(fn, replays, grad=False, choose=switch):
    # Both versions (choose(False), then choose(True)), alternating, twice: the smaller median
    # of each.
    times = {False: [], True: []}
    for _ in range(2):
        for on in (False, True):
            choose(on)
            times[on].append(graph_us(fn, calls=5, replays=replays, grad=grad))
    return min(times[False]), min(times[True])


def compare(ours, theirs):
    # The largest difference of any gradient from the other's, relative to its largest value,
    # and whether that is within BAD with every gradient finite.
    worst = max(
        (a.float() - b.float()).abs().max().item() / b.float().abs().max().item()
        for a, b in zip(ours, theirs, strict=True)
    )
    return worst, worst <= BAD and all(torch.isfinite(a).all() for a in ours)


def report(title, columns, rows, bad):
    # The table (shape, what, the two versions' times and their ratio, largest difference);
    # exit 1 where any comparison was BAD.
    name = torch.cuda.get_device_name()
    print(f"{title}, {name}, torch {torch.__version__}, bf16, us")
    print(markdown(["shape", "what", *columns, "largest diff"], rows))
    sys.exit(1 if bad else 0)


def load_tree(path):
    """``path/kernels`` imported as the package ``attnops_kernels_then``: its chunk_gla launchers."""
    import importlib
    import importlib.util

    root = Path(path).resolve() / "kernels"
    name = "attnops_kernels_then"
    spec = importlib.util.spec_from_file_location(
        name, root / "__init__.py", submodule_search_locations=[str(root)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return importlib.import_module(f"{name}.chunk_gla.triton")


def pair_then(then, q, k, v, g, do, save):
    # The older tree's forward, then its backward with the states it kept (or none).
    _, h, _ = then.chunk_gla_fwd(q, k, v, g, None, None, None, False, save_states=save)
    h = h if save else None
    return then.chunk_gla_bwd(q, k, v, g, None, None, None, do, None, h, save_states=save)


def against_tree(path, replays):
    """Forward + backward of the older tree's Triton launchers against the operator with every
    CuTeDSL kernel, both ways of the chunk states, at each shape (``--triton-at``)."""
    import attnops

    then = load_tree(path)
    switch(True)
    rows = []
    for B, T, H, K in SHAPES:
        q, k, v, g, do = inputs(B, T, H, K)
        xs = [x.detach().requires_grad_() for x in (q, k, v, g)]
        for save in (False, True):
            theirs = functools.partial(pair_then, then, q, k, v, g, do, save)
            ours = functools.partial(step, attnops, xs, do, save)
            worst, ok = compare(ours(), theirs()[:4])
            times = {0: [], 1: []}
            for _ in range(2):
                times[0].append(graph_us(theirs, calls=5, replays=replays))
                times[1].append(graph_us(ours, calls=5, replays=replays, grad=True))
            t_then, t_ours = min(times[0]), min(times[1])
            kind = "fwd+bwd, states " + ("saved" if save else "recomputed")
            err = f"{worst:.1e}" + ("" if ok else " BAD")
            label = f"B{B} T{T} H{H} K=V={K}"
            rows.append(
                [label, kind, f"{t_then:.1f}", f"{t_ours:.1f}", f"{t_then / t_ours:.2f}", err]
            )
        torch.cuda.empty_cache()
    print(f"\nagainst the Triton kernels of {path}:")
    print(markdown(["shape", "what", "Triton then", "CuTeDSL", "ratio", "largest diff"], rows))
    return sum("BAD" in r[-1] for r in rows)


def setter(name):
    return lambda on: setattr(CF, name, on)


def walk_sweep(replays):
    switch(True)
    CF._CUTE_BWD_WALK_FILL = 0
    rows = []
    for B in (2, 4, 6, 7, 8, 9, 16):
        T, H, K = 2048, 32, 64
        q, k, v, g, do = inputs(B, T, H, K)
        h = C.chunk_gla_fwd(q, k, v, g, None, None, None, False, save_states=True)[1]
        for save in (True, False):
            run = functools.partial(backward, q, k, v, g, do, h if save else None, save)
            apart, walked = pair(run, replays, choose=setter("_CUTE_BWD_WALK"))
            kind = "bwd, states " + ("saved" if save else "recomputed")
            rows.append(
                [f"B{B} T{T} H{H} K=V={K}", B * H, kind, f"{apart:.1f}", f"{walked:.1f}",
                 f"{apart / walked:.2f}"]
            )  # fmt: skip
        del h
        torch.cuda.empty_cache()
    name = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"chunk_gla backward, CuTeDSL pass walking dh or not, {name} ({sms} SMs), bf16, us")
    header = ["shape", "B x H", "what", "dh walked apart", "walked in the pass", "ratio"]
    print(markdown(header, rows))


def state_walks(replays, knob="_CUTE_STATES"):
    # The backward (and with _CUTE_SPLIT_WALKS the forward too, whose segment starts it
    # changes) with ``knob`` off, then on.
    switch(True)
    if knob == "_CUTE_SPLIT_WALKS":
        CF._CUTE_SPLIT_MIN_CHUNKS = 0
    rows, bad = [], 0
    for B, T, H, K in SHAPES:
        q, k, v, g, do = inputs(B, T, H, K)
        h = C.chunk_gla_fwd(q, k, v, g, None, None, None, False, save_states=True)[1]
        runs = [
            ("bwd, states " + ("saved" if save else "recomputed"),
             functools.partial(backward, q, k, v, g, do, h if save else None, save))
            for save in (True, False)
        ]  # fmt: skip
        if knob == "_CUTE_SPLIT_WALKS":
            runs += [
                (f"fwd, states {'saved' if save else 'not kept'}",
                 functools.partial(C.chunk_gla_fwd, q, k, v, g, None, None, None, True,
                                   save_states=save))
                for save in (True, False)
            ]  # fmt: skip
        for kind, run in runs:
            outs = {}
            for cute in (False, True):
                setattr(CF, knob, cute)
                outs[cute] = [x for x in run() if x is not None and x.numel()]
            worst, ok = compare(outs[True], outs[False])
            bad += not ok
            tri, cute = pair(run, replays, choose=setter(knob))
            err = f"{worst:.1e}" + ("" if ok else " BAD")
            rows.append(
                [f"B{B} T{T} H{H} K=V={K}", kind, f"{tri:.1f}", f"{cute:.1f}",
                 f"{tri / cute:.2f}", err]
            )  # fmt: skip
        del h
        torch.cuda.empty_cache()
    if knob == "_CUTE_SPLIT_WALKS":
        title = "chunk_gla with the CuTeDSL kernels, split state walks' steps Triton's or CuTeDSL's"
    else:
        title = "chunk_gla backward with the CuTeDSL pass, state walks Triton's or CuTeDSL's"
    report(title, ["Triton walks", "CuTeDSL walks", "ratio"], rows, bad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replays", type=int, default=7)
    ap.add_argument("--walk-sweep", action="store_true", help="see the module docstring")
    ap.add_argument("--state-walks", action="store_true", help="see the module docstring")
    ap.add_argument("--split-walks", action="store_true", help="see the module docstring")
    ap.add_argument("--shapes", help="B,T,H,K;... (V = K), instead of the four shapes")
    ap.add_argument("--triton-at", metavar="DIR", help="see the module docstring")
    args = ap.parse_args()
    if args.shapes:
        SHAPES[:] = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";")]
    if args.split_walks:
        state_walks(args.replays, "_CUTE_SPLIT_WALKS")
        return
    if args.walk_sweep:
        walk_sweep(args.replays)
        return
    if args.state_walks:
        state_walks(args.replays)
        return
    import attnops

    rows, bad = [], 0
    for B, T, H, K in SHAPES:
        q, k, v, g, do = inputs(B, T, H, K)
        label = f"B{B} T{T} H{H} K=V={K}"
        switch(False)
        h = C.chunk_gla_fwd(q, k, v, g, None, None, None, False, save_states=True)[1]
        for save in (True, False):
            hs = h if save else None
            outs = {}
            for cute in (False, True):
                switch(cute)
                outs[cute] = backward(q, k, v, g, do, hs, save)
            worst, ok = compare(outs[True], outs[False])
            bad += not ok
            run = functools.partial(backward, q, k, v, g, do, hs, save)
            t_tri, t_cute = pair(run, args.replays)
            kind = "bwd, states saved" if save else "bwd, states recomputed"
            err = f"{worst:.1e}" + ("" if ok else " BAD")
            rows.append(
                [label, kind, f"{t_tri:.1f}", f"{t_cute:.1f}", f"{t_tri / t_cute:.2f}", err]
            )
        del h
        fwd = functools.partial(C.chunk_gla_fwd, q, k, v, g, None, None, None, False)
        t_tri, t_cute = pair(functools.partial(fwd, save_states=True), args.replays)
        ratio = f"{t_tri / t_cute:.2f}"
        rows.append([label, "fwd, states saved", f"{t_tri:.1f}", f"{t_cute:.1f}", ratio, ""])
        xs = [x.detach().requires_grad_() for x in (q, k, v, g)]
        for save in (False, True):
            run = functools.partial(step, attnops, xs, do, save)
            t_tri, t_cute = pair(run, args.replays, grad=True)
            ratio = f"{t_tri / t_cute:.2f}"
            kind = "fwd+bwd, states " + ("saved" if save else "recomputed")
            rows.append([label, kind, f"{t_tri:.1f}", f"{t_cute:.1f}", ratio, ""])
        torch.cuda.empty_cache()
    if args.triton_at:
        bad += against_tree(args.triton_at, args.replays)
    report("chunk_gla backward", ["Triton", "CuTeDSL", "Triton / CuTeDSL"], rows, bad)


if __name__ == "__main__":
    main()
