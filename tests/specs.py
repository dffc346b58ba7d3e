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


CHUNK = """\
version: 1
namespace: demo
ops:
  chunk:
    doc: Chunked linear attention.
    forward:
      schema: "(Tensor q, Tensor k, Tensor v, Tensor g, float? scale=None, Tensor? initial_state=None, Tensor? cu_seqlens=None) -> Tensor output"
      launchers:
        cpu: attnops_kernels.chunk_gla.triton:chunk_gla_fwd
      arity_pair:
        flag: output_final_state
        after: initial_state
        schema: "(Tensor q, Tensor k, Tensor v, Tensor g, float? scale=None, Tensor? initial_state=None, Tensor? cu_seqlens=None) -> (Tensor output, Tensor final_state)"
    backward:
      schema: "(Tensor q, Tensor k, Tensor v, Tensor g, float? scale, Tensor? initial_state, Tensor? cu_seqlens, Tensor grad_output, Tensor? grad_final_state) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v, Tensor grad_g, Tensor grad_initial_state)"
      launchers:
        cpu: attnops_kernels.chunk_gla.triton:chunk_gla_bwd
    dims:
      N: "B if cu_seqlens is None else cu_seqlens.shape[0] - 1"
    inputs:
      q: {shape: [B, T, H, K], dtypes: [float32]}
      k: {shape: [B, T, H, K], dtype: q}
      v: {shape: [B, T, H, V], dtype: q}
      g: {shape: [B, T, H], dtypes: [float32]}
      initial_state: {shape: [N, H, K, V], dtypes: [float32]}
      cu_seqlens: {shape: [S], dtypes: [int32], differentiable: false}
    outputs:
      output: {shape: [B, T, H, V], dtype: q}
      final_state: {shape: [N, H, K, V], dtype: float32}
    reference: attnops_kernels.chunk_gla.reference:chunk_gla_ref
    tests:
      samples:
        - {B: 2, T: 5, H: 1, K: 16, V: 16}
        - {B: 1, T: 9, H: 1, K: 16, V: 16, cu_seqlens: [0, 4, 9]}
      tolerance:
        float32: [1.0e-4, 1.0e-4]
      varlen: {offsets: cu_seqlens, dim: T, per_sequence: [initial_state, final_state]}
"""

GATE = """\
version: 1
namespace: demo
ops:
  gate:
    doc: Gate.
    integration: triton_op
    forward:
      schema: '(Tensor g, Tensor? A_log=None, str kind="softplus") -> Tensor out'
      launchers:
        cpu: attnops_kernels.gate.triton:gate_fwd
    variants:
      kind: [softplus, lower_bound]
    inputs:
      g: {shape: [..., H, K], dtypes: [float32]}
      A_log: {shape: [H], dtypes: [float32]}
    outputs:
      out: {shape: [..., H, K], dtype: float32}
    reference: attnops_kernels.gate.reference:gate_ref
    tests:
      samples:
        - {batch: [2], H: 2, K: 4}
      tolerance:
        float32: [1.0e-5, 1.0e-5]
  step:
    doc: Step.
    forward:
      schema: "(Tensor(a!) state, Tensor q) -> Tensor output"
      launchers:
        cpu: attnops_kernels.recurrent_gla_step.triton:recurrent_gla_step
    dims:
      nnz: {dynamic: true}
    inputs:
      state: {shape: [B, K], dtypes: [float32], mutated: true}
      q: {shape: [B, K], dtypes: [float32]}
    outputs:
      output: {shape: [B, nnz], dtype: q}
    reference: attnops_kernels.recurrent_gla_step.reference:recurrent_gla_step_ref
    tests:
      samples:
        - {B: 2, K: 4}
      tolerance:
        float32: [1.0e-5, 1.0e-5]
"""


def generate_project(root, module: str, launchers: str, spec: str, *extra: str) -> int:
    """Write ``<module>.py`` and ``ops.yaml`` under ``root`` and run the generator into
    ``root/out`` with ``root`` importable (launcher lookup reads sys.path); its exit status."""
    import sys

    from codegen.cli import main

    (root / f"{module}.py").write_text(launchers)
    (root / "ops.yaml").write_text(spec)
    sys.path.insert(0, str(root))
    try:
        return main(
            ["regenerate", "--spec", str(root / "ops.yaml"), "--out", str(root / "out"), *extra]
        )
    finally:
        sys.path.remove(str(root))


def run_generated(root, *args: str, cwd=None):
    """``python *args`` in a clean interpreter that sees only the generated package and launchers."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={"PYTHONPATH": f"{root / 'out'}:{root}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


def regenerate_project(root, files: dict[str, str]):
    """Write ``files`` (name -> text, ``ops.yaml`` among them) under ``root`` and run the real CLI
    on it in a child process, with ``root`` importable; asserts it succeeded, returns ``root``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    for name, text in files.items():
        (root / name).write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "codegen", "regenerate", "--spec", str(root / "ops.yaml"), "-q"],
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return root
