"""The compile section: ``torch.compile(fullgraph=True)`` of the public function, static and
dynamic, against eager on each sample and configuration."""

from __future__ import annotations

from dataclasses import dataclass

from ...spec.model import Integration
from .common import OpTests


@dataclass(frozen=True, slots=True)
class CompileView:
    # The dtype the compiled, CUDA-graph, varlen and backend-reuse tests run in: the first tested.
    dtype: str
    triton_op: bool  # Note [triton_op on CPU]
    dynamic: bool  # data-dependent output sizes: dynamo must capture them


def compile_view(t: OpTests) -> CompileView:
    return CompileView(
        dtype=t.test_dtypes()[0].short,
        triton_op=t.op.integration is Integration.TRITON_OP,
        dynamic=bool(t.op.dynamic_dims),
    )
