"""The imports section: the NamedTuple import, and the helpers of ``_layout`` and ``_runtime``
that the other sections call, each under its reserved ``_`` name."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.model import Integration
from .checks import ListCheck, TensorCheck
from .public import PublicView
from .registration import StageView


@dataclass(frozen=True, slots=True)
class ImportsView:
    named_tuple: bool  # the public function returns a NamedTuple
    callable: bool  # the autograd.Function annotates its stage callables
    layout: tuple[str, ...]  # helpers of _layout (backend selection), sorted
    runtime: tuple[str, ...]  # helpers of _runtime, sorted


def imports_view(r: ResolvedOp, stages: tuple[StageView, ...], public: PublicView) -> ImportsView:
    return ImportsView(
        named_tuple=bool(public.result),
        callable=r.op.backward is not None,
        layout=_layout(r),
        runtime=_runtime(r, stages, public),
    )


def _layout(r: ResolvedOp) -> tuple[str, ...]:
    used = set()
    for stage in r.stages:
        for impl in stage.impls:
            for b in impl.backends:
                used |= {"backend_available", "note_backend"}
                if b.layout:
                    used.add("tensor_supports_contiguous_dim")
                if not b.int64:
                    used.add("requires_int64_abi")
    return tuple(sorted(used))


def _runtime(r: ResolvedOp, stages: tuple[StageView, ...], public: PublicView) -> tuple[str, ...]:
    used = {"launcher", "tensor_error"}
    if public.mutated:
        used.add("check_mutated")
    if any(isinstance(c, ListCheck) for c in public.checks):
        used.add("list_error")
    if any(isinstance(c, TensorCheck) and c.offsets for c in public.checks):
        used.add("check_offsets")
    if public.indexes:
        used.add("check_indexes")
    if public.constraints:
        used.add("constraint_error")
    if public.counts:
        used.add("count_error")
    if public.lengths:
        used.add("length_error")
    if public.variants:
        used.add("value_error")
    if any(sc.kind == "test" for sc in public.scalars):
        used.add("scalar_error")
    used.update(sc.convert for sc in public.scalars if sc.convert)
    if r.op.integration is Integration.TRITON_OP:
        used.add("register_triton_op")
    for guard in (i.device_guard for st in stages for i in st.impls if i.device_guard):
        used.add("other_device" if guard.kind == "found" else "cuda_device")
    if public.direct is not None:
        used.add("direct_ok")
        if public.direct.stages.test.startswith("_on_cuda("):
            used.add("on_cuda")
        if public.direct.kind == "grad_off":
            used.update(("grad_enabled", "set_grad_enabled"))
    return tuple(sorted(used))
