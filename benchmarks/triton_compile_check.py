"""Compiles every Triton kernel configuration the launchers use, for a GPU target, without a GPU.

    python benchmarks/triton_compile_check.py [--arch 90] [--only TEXT]

Triton's interpreter (CI's CPU path) runs the kernels as Python, so it never sees what Triton's
compiler refuses or how it lowers them; the H200's Triton may also differ from the one installed
here. This script runs each launcher on CPU tensors with every launch replaced by a compile of
the same kernel, arguments and options for ``cuda`` at ``--arch`` (front end, optimizer, PTX and
``ptxas``), so that the compiler's errors for the installed Triton show up on any machine. Run it
in an environment with the Triton of the target machine (e.g. a venv with ``triton==3.6.0``).
Nothing is launched: the outputs are garbage and are not looked at. Prints one line per distinct
compile and exits 1 when any compile fails.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.compiler import compile as triton_compile  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import kernels._triton as T  # noqa: E402

FAILED: list[str] = []
SEEN: set = set()


RESOURCES = False
# Shared memory per block that a kernel may use (opt-in maximum), by compute capability.
SHARED_LIMIT = {80: 166912, 86: 101376, 89: 101376, 90: 232448, 100: 232448}


def resources(compiled) -> str:
    """Registers, stack (spills) and shared memory of a compiled kernel, as cuobjdump reports
    them from its cubin."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        out = subprocess.run(
            [str(tool), "--dump-resource-usage", f.name], capture_output=True, text=True
        ).stdout
    found = dict(re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", out))
    return "[" + " ".join(f"{k.lower()} {v}" for k, v in found.items()) + "]"


class _CompileOnly:
    def __init__(self, kernel, target, backend):
        self.kernel, self.target, self.backend = kernel, target, backend
        self.binder = create_function_from_signature(kernel.signature, kernel.params, backend)

    def __getitem__(self, grid):
        return self.compile

    def compile(self, *args, **kwargs):
        kwargs = dict(kwargs, debug=False)
        try:
            bound, spec, options = self.binder(*args, **kwargs)
            key = (self.kernel.fn.__name__, str(spec), str(options))
            if key in SEEN:
                return
            SEEN.add(key)
            options, signature, constexprs, attrs = self.kernel._pack_args(
                self.backend, kwargs, bound, spec, options
            )
            consts = {
                self.kernel.params[p[0]].name: v for p, v in constexprs.items() if len(p) == 1
            }
            start = time.perf_counter()
            src = ASTSource(self.kernel, signature, constexprs, attrs)
            compiled = triton_compile(src, target=self.target, options=options.__dict__)
            took = time.perf_counter() - start
            shared = compiled.metadata.shared
            if shared > SHARED_LIMIT.get(self.target.arch, shared):
                # Triton only refuses this when the kernel is loaded on the device.
                raise RuntimeError(
                    f"needs {shared} bytes of shared memory, over sm_{self.target.arch}'s "
                    f"{SHARED_LIMIT[self.target.arch]}"
                )
            use = f" {resources(compiled)}" if RESOURCES else ""
            print(f"ok   {self.kernel.fn.__name__} {consts} ({took:.1f} s){use}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the run goes on
            last = str(e).strip().splitlines()
            FAILED.append(f"{self.kernel.fn.__name__}: {type(e).__name__}")
            print(f"FAIL {self.kernel.fn.__name__} {kwargs}\n{traceback.format_exc(limit=1)}")
            print("\n".join(last[-25:]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--only", default="")
    p.add_argument(
        "--resources",
        action="store_true",
        help="print each kernel's registers, stack (spills), shared and local memory",
    )
    args = p.parse_args()
    global RESOURCES
    RESOURCES = args.resources
    target = GPUTarget("cuda", args.arch, 32)
    backend = make_backend(target)
    wrappers: dict = {}

    def launchable(kernel, like):
        if kernel not in wrappers:
            wrappers[kernel] = _CompileOnly(kernel, target, backend)
        return wrappers[kernel]

    from kernels.block_mask_worklist import triton as W
    from kernels.chunk_gla import triton as C
    from kernels.gate import triton as G
    from kernels.l2norm import triton as L
    from kernels.recurrent_gla_step import triton as R

    for mod in (T, W, C, G, L, R):
        mod.launchable = launchable
    print(f"triton {triton.__version__}, target {target}")

    def rnd(*shape, dtype=torch.float32):
        return torch.randn(shape).to(dtype)

    cases = []
    dtypes = (torch.float32, torch.bfloat16, torch.float16)
    for dt in dtypes:
        x = rnd(4, 8, 2, 64, dtype=dt)
        cases.append(("l2norm", lambda x=x: L.l2norm_bwd(x, x, L.l2norm_fwd(x, 1e-6)[1])))
        for D in (100, 256):
            y = rnd(2, 3, 2, D, dtype=dt)
            cases.append(("l2norm", lambda y=y: L.l2norm_bwd(y, y, L.l2norm_fwd(y, 1e-6)[1])))
        g = rnd(2, 16, 4, 32, dtype=dt)
        A, b = rnd(4), rnd(4 * 32)
        for kind in ("softplus", "lower_bound"):
            for AA, bb in ((A, b), (None, None)):
                cases.append(
                    (
                        "gate",
                        lambda g=g, A=AA, b=bb, kind=kind: (
                            G.gate_fwd(g, A, b, kind, -5.0),
                            G.gate_bwd(g, A, b, g.float(), kind, -5.0),
                        ),
                    )
                )
        for K, V in ((16, 16), (16, 32), (48, 100), (64, 64), (128, 128), (256, 256)):
            q, k = rnd(2, 70, 2, K, dtype=dt), rnd(2, 70, 2, K, dtype=dt)
            v, gg = rnd(2, 70, 2, V, dtype=dt), rnd(2, 70, 2)
            h0 = rnd(2, 2, K, V)
            cases.append(
                (
                    "chunk_gla",
                    lambda q=q, k=k, v=v, gg=gg, h0=h0: (
                        C.chunk_gla_bwd(
                            q,
                            k,
                            v,
                            gg,
                            None,
                            h0,
                            None,
                            v,
                            h0,
                            C.chunk_gla_fwd(q, k, v, gg, None, h0, None, True)[1],
                        ),
                        C.chunk_gla_bwd(q, k, v, gg, None, h0, None, v, h0),
                        C.chunk_gla_bwd(q, k, v, gg, None, None, None, v, None),
                    ),
                )
            )
            # One long sequence: the state walks split into segments.
            ql, kl = rnd(1, 1024, 1, K, dtype=dt), rnd(1, 1024, 1, K, dtype=dt)
            vl, gl, hl = rnd(1, 1024, 1, V, dtype=dt), rnd(1, 1024, 1), rnd(1, 1, K, V)
            cases.append(
                (
                    "chunk_gla",
                    lambda q=ql, k=kl, v=vl, gg=gl, h=hl: (
                        C.chunk_gla_fwd(q, k, v, gg, None, h, None, True),
                        C.chunk_gla_fwd(q, k, v, gg, None, None, None, False),
                        C.chunk_gla_bwd(q, k, v, gg, None, h, None, v, h),
                        C.chunk_gla_bwd(q, k, v, gg, None, None, None, v, None),
                    ),
                )
            )
            cu = torch.tensor([0, 10, 10, 80, 140], dtype=torch.int32)
            q1, k1 = q.reshape(1, 140, 2, K), k.reshape(1, 140, 2, K)
            v1, g1 = v.reshape(1, 140, 2, V), gg.reshape(1, 140, 2)
            h1 = rnd(4, 2, K, V)
            cases.append(
                (
                    "chunk_gla",
                    lambda q=q1, k=k1, v=v1, gg=g1, h=h1, cu=cu: (
                        C.chunk_gla_bwd(
                            q,
                            k,
                            v,
                            gg,
                            None,
                            h,
                            cu,
                            v,
                            h,
                            C.chunk_gla_fwd(q, k, v, gg, None, h, cu, True)[1],
                        ),
                        C.chunk_gla_bwd(q, k, v, gg, None, h, cu, v, h),
                    ),
                )
            )
            st = rnd(3, 2, K, V)
            qs, ks = rnd(3, 2, K, dtype=dt), rnd(3, 2, K, dtype=dt)
            vs, gs = rnd(3, 2, V, dtype=dt), rnd(3, 2)
            cases.append(
                (
                    "recurrent_gla_step",
                    lambda st=st, q=qs, k=ks, v=vs, g=gs: R.recurrent_gla_step(st, q, k, v, g, 0.1),
                )
            )
    for shape in ((2, 3, 7, 13), (1, 2, 16, 2000), (1, 2, 8, 8), (8, 16, 128, 128)):
        mask = torch.rand(shape) < 0.3
        # Nothing runs here: nnz is read as 1 (Scratch below) to keep the allocation small.
        cases.append(("block_mask_worklist", lambda mask=mask: W.block_mask_worklist(mask)))

    class OneTotal:
        # The sum the count launch would store (Note [tally]); nothing runs here, so 1.
        value = property(lambda self: 1, lambda self, value: None)

    class Scratch(W._Scratch):
        __slots__ = ()

        def __init__(self, device):
            super().__init__(device)
            self.total = OneTotal()

    W._Scratch = Scratch
    real_cpu = torch.Tensor.cpu
    torch.Tensor.cpu = lambda self, *a, **k: real_cpu(self, *a, **k).zero_() + 1
    try:
        for name, case in cases:
            if args.only and args.only not in name:
                continue
            try:
                case()
            except Exception:  # noqa: BLE001
                FAILED.append(f"{name}: launcher raised")
                print(f"FAIL launcher {name}\n{traceback.format_exc(limit=3)}")
    finally:
        torch.Tensor.cpu = real_cpu
    print(f"{len(SEEN)} distinct compiles, {len(FAILED)} failed")
    for f in FAILED:
        print("  " + f)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
