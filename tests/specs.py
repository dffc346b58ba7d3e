"""A small valid spec that the generator tests break in one place at a time."""

BASE = """\
version: 1
namespace: demo
ops:
  l2norm:
    doc: Normalize x.
    forward:
      schema: "(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)"
      launchers:
        cpu: attnops_kernels.l2norm.triton:l2norm_fwd
    backward:
      schema: "(Tensor grad_y, Tensor x, Tensor rstd) -> Tensor grad_x"
      launchers:
        cpu: attnops_kernels.l2norm.triton:l2norm_bwd
    inputs:
      x: {shape: [..., D], dtypes: [float32]}
    outputs:
      y: {shape: [..., D], dtype: x}
      rstd: {shape: [...], dtype: float32, public: false}
    reference: attnops_kernels.l2norm.reference:l2norm_ref
    tests:
      samples:
        - {batch: [2], D: 8}
      tolerance:
        float32: [1.0e-5, 1.0e-5]
"""


def replace(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)
