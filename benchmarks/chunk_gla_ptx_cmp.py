"""chunk_gla's kernels compiled for a GPU from another copy of the launchers and from these: PTX.

    git show REV:kernels/chunk_gla/triton.py > /tmp/old_triton.py
    python benchmarks/chunk_gla_ptx_cmp.py /tmp/old_triton.py [--arch 90] [--diff KERNEL]

``OLD`` is a single-file ``kernels/chunk_gla/triton.py``. Both launchers run on CPU tensors (bf16,
K = V = 128 and 64, and one long sequence whose state walks split) with every launch replaced
by a compile for ``cuda`` at ``--arch`` (as ``benchmarks/triton_compile_check.py`` does; no GPU
needed). For each kernel and specialization compiled by both, the PTX body (debug sections,
locations and parameter names left out) is compared: ``same`` when it is the same text,
``same opcodes`` when only the order of instructions and the register numbers differ (the
count of every opcode is the same), else the opcodes whose count changed. ``--diff KERNEL``
also prints the first lines of a unified diff for that kernel. Run it with the Triton of the
target machine. Exits 0.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import os
import re
import sys
from collections import Counter
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.compiler import compile as triton_compile  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Kernels of the old single file that the new layout merged.
RENAMED = {
    "_gla_fwd_hcomb_kernel": "_gla_seg_carry_kernel",
    "_gla_bwd_dhcomb_kernel": "_gla_seg_carry_kernel",
}
# B, T, H, K, V
SHAPES = [(2, 200, 2, 128, 128), (2, 200, 2, 64, 64), (1, 4096, 1, 64, 64)]


class Capture:
    """What a launcher indexes with the grid: compiles the kernel and keeps its PTX."""

    def __init__(self, kernel, backend, target, out):
        self.kernel, self.backend, self.target, self.out = kernel, backend, target, out
        self.binder = create_function_from_signature(kernel.signature, kernel.params, backend)

    def __getitem__(self, grid):
        return self.compile

    def compile(self, *args, **kwargs):
        kwargs = dict(kwargs, debug=False)
        bound, spec, options = self.binder(*args, **kwargs)
        options, signature, constexprs, attrs = self.kernel._pack_args(
            self.backend, kwargs, bound, spec, options
        )
        src = ASTSource(self.kernel, signature, constexprs, attrs)
        compiled = triton_compile(src, target=self.target, options=options.__dict__)
        params = self.kernel.params
        # Specialized by value: the constexpr parameters (None tensors are left out: the
        # merged kernels name them differently).
        consts = sorted(
            (params[p[0]].name, str(v))
            for p, v in constexprs.items()
            if len(p) == 1 and params[p[0]].is_constexpr
        )
        name = self.kernel.fn.__name__
        self.out[(RENAMED.get(name, name), tuple(consts))] = compiled.asm["ptx"], name


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def body(ptx: str, name: str) -> list[str]:
    """The instructions of a kernel's PTX, without debug sections, locations and names."""
    ptx = re.split(r"\.section\s+\.debug", ptx)[0].replace(name, "KERNEL")
    ptx = re.sub(r"_param_\d+", "_param_N", ptx)
    skip = ("//", ".loc", ".file", "$L__tmp", ".reg", ".param", "ld.param")
    return [
        line.strip()
        for line in ptx.splitlines()
        if line.strip() and not line.strip().startswith(skip)
    ]


def opcodes(lines: list[str]) -> Counter:
    return Counter(
        line.split()[0] for line in lines if not line.endswith(":") and line not in ("{", "}")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--diff", default="")
    args = parser.parse_args()
    target = GPUTarget("cuda", args.arch, 32)
    backend = make_backend(target)
    from kernels.chunk_gla import triton as new

    old = load(args.old, "kernels.chunk_gla._ptx_old")
    found = {}
    for tag, module in (("old", old), ("new", new)):
        out = found.setdefault(tag, {})
        module.launchable = lambda kernel, like, out=out: Capture(kernel, backend, target, out)
        for B, T, H, K, V in SHAPES:
            q, k = (torch.randn(B, T, H, K).bfloat16() for _ in range(2))
            v, g, h0 = (
                torch.randn(B, T, H, V).bfloat16(),
                torch.randn(B, T, H),
                torch.randn(B, H, K, V),
            )
            h = module.chunk_gla_fwd(q, k, v, g, None, h0, None, True)[1]
            module.chunk_gla_bwd(q, k, v, g, None, h0, None, v, h0, h)
            module.chunk_gla_bwd(q, k, v, g, None, h0, None, v, h0)
    for key in sorted(set(found["old"]) | set(found["new"])):
        name, consts = key
        label = f"{name} {dict(consts)}"
        if key not in found["old"] or key not in found["new"]:
            print(f"only {'old' if key in found['old'] else 'new'}: {label}")
            continue
        a = body(*found["old"][key])
        b = body(*found["new"][key])
        ca, cb = opcodes(a), opcodes(b)
        changed = {op: cb[op] - ca[op] for op in sorted(set(ca) | set(cb)) if ca[op] != cb[op]}
        verdict = "same" if a == b else "same opcodes" if not changed else f"opcodes {changed}"
        print(f"{verdict}: {label}, {sum(ca.values())} / {sum(cb.values())} instructions")
        if name == args.diff:
            print("\n".join(list(difflib.unified_diff(a, b, lineterm="", n=1))[:80]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
