"""chunk_gla's chunk size is declared once, as the dim ``BT`` of ops.yaml, and the fakes size the
saved chunk states ``h`` from it; the kernel must use the same chunk size, or a fake and the
kernel disagree on ``h`` under torch.compile. Here the kernel itself is asked: with ``T = BT``
tokens one sequence fills one chunk state, with ``T = BT + 1`` two."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from attnops_kernels.chunk_gla import triton as kernel
from codegen.pipeline import analyse

ROOT = Path(__file__).resolve().parent.parent


def declared_chunk_size(text: str) -> int:
    _, ops = analyse(text, str(ROOT / "ops.yaml"), check_imports=False)
    op = next(r.op for r in ops if r.op.name == "chunk_gla")
    (bt,) = [d for d in op.dims if d.name == "BT"]
    return ast.literal_eval(bt.expr.render({}))  # a number, not an expression of other dims


def chunk_states(T: int) -> int:
    """How many chunk states the kernel saves for one sequence of ``T`` tokens."""
    q = torch.randn(1, T, 1, 16)
    v = torch.randn(1, T, 1, 16)
    g = -torch.rand(1, T, 1)
    _, h, _ = kernel.chunk_gla_fwd(q, q, v, g, None, None, None, False)
    return h.shape[0]


def test_the_kernel_uses_the_declared_chunk_size():
    bt = declared_chunk_size((ROOT / "ops.yaml").read_text(encoding="utf-8"))
    assert (chunk_states(bt), chunk_states(bt + 1)) == (1, 2), (
        f"ops.yaml declares chunk_gla's BT = {bt}; the kernel's chunks are another size"
    )


def test_a_declared_size_the_kernel_does_not_use_is_caught():
    text = (ROOT / "ops.yaml").read_text(encoding="utf-8").replace('BT: "64"', 'BT: "32"', 1)
    bt = declared_chunk_size(text)
    assert bt == 32
    assert (chunk_states(bt), chunk_states(bt + 1)) != (1, 2)


def test_the_generated_fake_reads_the_declared_size():
    source = (ROOT / "generated" / "attnops" / "chunk_gla.py").read_text(encoding="utf-8")
    assert "BT = 64" in source and "// 64" not in source and "63" not in source
