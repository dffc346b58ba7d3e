"""The eager fast path section (Note [eager fast path] in _runtime): each stage called without
the dispatcher, and the public function's branch that takes it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .base import ForwardCall, OpBuilder, always_given, device_args, tensor_args
from .function import FunctionBuilder, FunctionView
from .signature import Param, call_args, params, returns_annotation


@dataclass(frozen=True, slots=True)
class DirectStage:
    """A stage's implementation for the eager fast path: the registered shim of the device its
    first tensor argument is on, called without the dispatcher.

    ``kind``: ``by_device`` picks ``cuda`` when ``cuda_test`` holds, else ``cpu``; ``single``
    calls ``shim``, the one shim registered.
    """

    kind: Literal["by_device", "single"]
    name: str  # e.g. _l2norm_fwd_direct
    params: tuple[Param, ...]
    annotation: str
    args: tuple[str, ...]
    shim: str = ""
    cuda: str = ""
    cpu: str = ""
    # The test that picks the CUDA shim: ``x.is_cuda`` for a first tensor argument that is
    # always given; else ``_on_cuda(...)`` over the tensor arguments up to the first such one
    # (an optional tensor may be None, a list empty or hold None).
    cuda_test: str = ""


@dataclass(frozen=True, slots=True)
class DirectCall:
    """The public function's eager fast path (Note [eager fast path] in _runtime).

    ``kind``: ``function`` records the call through ``function`` when ``needs_grad``, else calls
    the stages; ``grad_free`` calls the stages as they are, no input dtype can require grad;
    ``grad_off`` calls them with grad mode off (Note [grad mode on the fast path] in _runtime).
    """

    kind: Literal["function", "grad_free", "grad_off"]
    tensors: tuple[str, ...]  # every tensor argument, for _direct_ok
    needs_grad: str  # when the autograd.Function must record the call ("" without backward)
    function: str  # the Function over the direct stages ("" without backward)
    call: ForwardCall  # the forward through the direct stages
    mutated: tuple[str, ...]  # inputs written in place: their version counters are bumped
    mutated_optional: tuple[str, ...] = ()  # those of them that may be None (Tensor(a!)?)


@dataclass(frozen=True, slots=True)
class FastPathView:
    stages: tuple[DirectStage, ...]
    function: FunctionView | None


class FastPathBuilder(OpBuilder):
    def _name(self, stage) -> str:
        return f"{stage.names.binding}_direct"

    def view(self) -> FastPathView:
        return FastPathView(self._stages(), self._function() if self.op.backward else None)

    def _stages(self) -> tuple[DirectStage, ...]:
        out = []
        for s in self.r.stages:
            by_device = {d: i.name for i in s.impls for d in i.devices}
            cuda, cpu = by_device.get("CUDA"), by_device.get("CPU")
            common = {
                "name": self._name(s),
                "params": params(s.schema),
                "annotation": returns_annotation(s.schema),
                "args": call_args(s.schema),
                "cuda_test": _cuda_test(s),
            }
            if cuda and cpu and cuda != cpu:
                out.append(DirectStage("by_device", cuda=cuda, cpu=cpu, **common))
            else:
                out.append(DirectStage("single", shim=cuda or cpu, **common))
        return tuple(out)

    def _direct_forward(self) -> ForwardCall:
        r = self.r
        call = self.forward_call()
        return replace(
            call,
            binding=self._name(r.forward),
            wide_binding=self._name(r.pair) if r.pair else "",
        )

    def _function(self) -> FunctionView:
        f = FunctionBuilder(self.r).function()
        return replace(
            f,
            name=f.name.removesuffix("Function") + "DirectFunction",
            call=self._direct_forward(),
            backward=self._name(self.r.backward),
        )

    def call(self) -> DirectCall:
        r, op = self.r, self.op
        tensors = tensor_args(self.fwd)
        grads = []
        for a in self.fwd.arguments:
            if a.is_tensor and r.gradient_of(a.name):
                test = f"{a.name}.requires_grad"
                grads.append(f"({a.name} is not None and {test})" if a.optional else test)
        any_grad = grads[0] if len(grads) == 1 else f"({' or '.join(grads)})"
        needs_grad = f"torch.is_grad_enabled() and {any_grad}" if grads and op.backward else ""
        grad_free = not any(_may_require_grad(op, d) for d in op.inputs)
        return DirectCall(
            kind="function" if op.backward else "grad_free" if grad_free else "grad_off",
            tensors=tensors,
            needs_grad=needs_grad,
            function=(
                r.names.function.removesuffix("Function") + "DirectFunction" if op.backward else ""
            ),
            call=self._direct_forward(),
            mutated=tuple(d.name for d in op.inputs if d.mutated),
            mutated_optional=tuple(
                d.name for d in op.inputs if d.mutated and d.name in r.optional_inputs
            ),
        )


def _cuda_test(s) -> str:
    """The direct shim's test for the CUDA shim (``DirectStage.cuda_test``)."""
    names = device_args(s.schema)
    if len(names) == 1 and always_given(s.schema, names[0]):
        return f"{names[0]}.is_cuda"
    return f"_on_cuda({', '.join(names)})"


def _may_require_grad(op, decl) -> bool:
    """Whether an input may be floating (``same_dtype_as`` followed): only floating tensors can
    require grad."""
    seen = {decl.name}
    while decl.same_dtype_as is not None:
        decl = op.input(decl.same_dtype_as)
        if decl is None or decl.name in seen:  # refused by validation; assume the worst
            return True
        seen.add(decl.name)
    return any(d.is_floating for d in decl.dtypes)
