"""The backward's fake sizes each gradient from any tensor the backward takes: a forward input,
a saved output or an incoming gradient (Note [backward fake sources] in
codegen/resolve/backward_fake.py), so a backward need not take an input it does not read."""

from __future__ import annotations

from pathlib import Path

import pytest
from specs import CHUNK, generate_project, run_generated

from codegen.pipeline import generate, parse
from codegen.spec.errors import SpecError

LAUNCHERS = """
import torch


def scale_fwd(x, w):
    return (x * w.to(x.dtype)).contiguous()


def scale_bwd(grad_out, w):
    # grad_x needs neither x nor its sizes: grad_out has the shape and dtype of out, x's.
    return (grad_out * w.to(grad_out.dtype)).contiguous()


def scale_ref(x, w):
    return x * w
"""

SPEC = """\
version: 1
namespace: fakesrc
package: fakesrc
ops:
  scale:
    doc: Scale the last dim of x by w.
    forward:
      schema: "(Tensor x, Tensor w) -> Tensor out"
      launchers: {cpu: fakel:scale_fwd}
    backward:
      schema: "(Tensor grad_out, Tensor w) -> Tensor grad_x"
      launchers: {cpu: fakel:scale_bwd}
    inputs:
      x: {shape: [..., H, D], dtypes: [float32, bfloat16]}
      w: {shape: [D], dtypes: [float32], differentiable: false}
    outputs:
      out: {shape: [..., H, D], dtype: x}
    reference: fakel:scale_ref
    tests:
      samples:
        - {batch: [2, 3], H: 4, D: 5}
        - {batch: [3], H: 2, D: 8}
      tolerance:
        float32: [1.0e-6, 1.0e-6]
        bfloat16: [1.0e-2, 1.0e-2]
"""

FAKE = """\
@torch.library.register_fake("fakesrc::scale_bwd")
def _scale_bwd_fake(grad_out: Tensor, w: Tensor) -> Tensor:
    batch = grad_out.shape[:-2]
    H = grad_out.shape[-2]
    D = w.shape[0]
    grad_x = w.new_empty((*batch, H, D), dtype=grad_out.dtype)
    return grad_x
"""


def test_a_backward_without_the_input_it_does_not_read_passes_its_generated_suite(tmp_path: Path):
    assert generate_project(tmp_path, "fakel", LAUNCHERS, SPEC, "-q") == 0
    # The leading dims, H and the dtype from the incoming gradient, D from w (the forward's own
    # source, x, is not taken).
    assert FAKE in (tmp_path / "out" / "fakesrc" / "scale.py").read_text()
    tests = run_generated(
        tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=tmp_path / "out"
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout


# Launchers that validation finds without importing them (their signatures do not matter here).
FOUND = {
    "fakel:scale_fwd": "attnops_kernels.l2norm.triton:l2norm_fwd",
    "fakel:scale_bwd": "attnops_kernels.l2norm.triton:l2norm_bwd",
    "fakel:scale_ref": "attnops_kernels.l2norm.reference:l2norm_ref",
}


def _found(spec: str) -> str:
    for ref, shipped in FOUND.items():
        spec = spec.replace(ref, shipped)
    return spec


def _diagnostics(spec: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse(_found(spec), "ops.yaml")
    return [str(d) for d in info.value.diagnostics]


def test_a_dim_no_backward_argument_has_is_a_located_error():
    # out reduces over D: nothing the backward takes has D any more.
    spec = SPEC.replace("out: {shape: [..., H, D]", "out: {shape: [..., H]").replace(
        "(Tensor grad_out, Tensor w)", "(Tensor grad_out)"
    )
    assert _diagnostics(spec) == [
        "ops.yaml:11:15: error: [scale] backward schema: the fake of 'grad_x' cannot size dim 'D' "
        "of [..., H, D]: no tensor the backward takes has it; add 'x' (or another tensor with dim "
        "'D') to the backward arguments"
    ]


def test_leading_dims_no_backward_argument_has_are_a_located_error():
    spec = SPEC.replace("out: {shape: [..., H, D]", "out: {shape: [H, D]")
    assert _diagnostics(spec) == [
        "ops.yaml:11:15: error: [scale] backward schema: the fake of 'grad_x' cannot size the "
        "leading dims '...' of [..., H, D]: no tensor the backward takes has them; add 'x' (or "
        "another tensor whose shape has '...') to the backward arguments"
    ]


def test_a_gradient_dtype_no_backward_argument_carries_is_a_located_error():
    spec = SPEC.replace(
        "out: {shape: [..., H, D], dtype: x}", "out: {shape: [..., H, D], dtype: float32}"
    )
    assert _diagnostics(spec) == [
        "ops.yaml:11:15: error: [scale] backward schema: the fake of 'grad_x' cannot know its "
        "dtype (float32/bfloat16) without a required 'x' argument or a tensor declared with its "
        "dtype"
    ]


INT_DIM = """\
version: 1
namespace: fakesrc
ops:
  tile:
    doc: Repeat x R times along a new last dim.
    forward:
      schema: "(Tensor x, int R) -> Tensor out"
      launchers: {cpu: fakel:scale_fwd}
    backward:
      schema: "(Tensor grad_out) -> Tensor grad_x"
      launchers: {cpu: fakel:scale_bwd}
    inputs:
      x: {shape: [D, R], dtypes: [float32]}
    outputs:
      out: {shape: [D], dtype: x}
    reference: fakel:scale_ref
    tests:
      samples:
        - {D: 3, R: 2}
      tolerance:
        float32: [0, 0]
"""


def test_an_int_argument_sizing_a_gradient_comes_from_the_backward_or_a_tensor(tmp_path):
    assert _diagnostics(INT_DIM) == [
        "ops.yaml:10:15: error: [tile] backward schema: the fake of 'grad_x' cannot size dim 'R' "
        "of [D, R]: no tensor the backward takes has it; add the argument 'R' to the backward "
        "arguments"
    ]
    parse(_found(INT_DIM.replace("(Tensor grad_out)", "(Tensor grad_out, int R)")), "ops.yaml")
    parse(_found(INT_DIM.replace("out: {shape: [D]", "out: {shape: [D, R]")), "ops.yaml")


def test_a_derived_dim_is_read_where_its_expression_cannot_be_computed():
    # N is derived from cu_seqlens, which the backward leaves out: nothing else has N ...
    text = CHUNK.replace("Tensor? cu_seqlens, Tensor grad_output", "Tensor grad_output")
    assert _diagnostics(text) == [
        "ops.yaml:15:15: error: [chunk] backward schema: the fake of 'grad_initial_state' cannot "
        "size dim 'N' of [N, H, K, V]: no tensor the backward takes has it; add 'cu_seqlens' "
        "(read by derived dim 'N') or another tensor with dim 'N' to the backward arguments"
    ]
    # ... until the backward takes a saved output that has it.
    text = text.replace(
        "      final_state: {shape: [N, H, K, V], dtype: float32}",
        "      states: {shape: [N, H, K, V], dtype: float32, public: false}\n"
        "      final_state: {shape: [N, H, K, V], dtype: float32}",
    )
    text = text.replace("Tensor? grad_final_state)", "Tensor? grad_final_state, Tensor states)")
    text = text.replace('-> Tensor output"', '-> (Tensor output, Tensor states)"').replace(
        "-> (Tensor output, Tensor final_state)",
        "-> (Tensor output, Tensor states, Tensor final_state)",
    )
    module = generate(text, "ops.yaml", "ops.yaml")["demo/chunk.py"]
    fake = module[module.index('register_fake("demo::chunk_bwd")') :]
    assert "    N = states.shape[0]\n" in fake
