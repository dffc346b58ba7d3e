"""The eager fast path (Note [eager fast path] in _runtime): the public function's branch that
calls the shims registered for each stage without the dispatcher, through the one
autograd.Function where autograd records the call (Note [stage callables])."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import ForwardCall, OpBuilder, always_given, device_args, tensor_args
from .function import STAGE_BWD, STAGE_FWD, STAGE_PAIR


@dataclass(frozen=True, slots=True)
class FastStages:
    """The shim of each stage (forward, the arity pair's wider forward, backward), in order.

    ``kind``: ``single``, one shim per stage serves every device: ``names`` are the shims;
    ``by_device``, the shims registered for CUDA or for the CPU: ``names`` are locals bound to
    ``cuda`` when ``test`` holds, else to ``cpu``.
    """

    kind: Literal["single", "by_device"]
    names: tuple[str, ...]
    test: str = ""
    cuda: tuple[str, ...] = ()
    cpu: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DirectCall:
    """The public function's eager fast path.

    ``kind``: ``function`` records the call through ``function`` when ``needs_grad``, else calls
    the stages; ``grad_free`` calls the stages as they are, no input dtype can require grad;
    ``grad_off`` calls them with grad mode off (Note [grad mode on the fast path] in _runtime).
    """

    kind: Literal["function", "grad_free", "grad_off"]
    stages: FastStages
    tensors: tuple[str, ...]  # every tensor argument, for _direct_ok
    needs_grad: str  # when the autograd.Function must record the call ("" without backward)
    function: str  # the autograd.Function ("" without backward)
    call: ForwardCall  # the forward through the stages' shims
    mutated: tuple[str, ...]  # inputs written in place: their version counters are bumped
    mutated_optional: tuple[str, ...] = ()  # those of them that may be None (Tensor(a!)?)


class FastPathBuilder(OpBuilder):
    def _stages(self) -> FastStages:
        stages = [s for s in (self.r.forward, self.r.pair, self.r.backward) if s is not None]
        locals_ = [STAGE_FWD] + ([STAGE_PAIR] if self.r.pair else [])
        locals_ += [STAGE_BWD] if self.r.backward else []
        cuda, cpu = [], []
        for s in stages:
            by_device = {d: i.name for i in s.impls for d in i.devices}
            one = by_device.get("CUDA") or by_device.get("CPU")
            cuda.append(by_device.get("CUDA") or one)
            cpu.append(by_device.get("CPU") or one)
        if cuda == cpu:
            return FastStages("single", tuple(cuda))
        return FastStages(
            "by_device", tuple(locals_), _cuda_test(self.fwd), tuple(cuda), tuple(cpu)
        )

    def call(self) -> DirectCall:
        r, op = self.r, self.op
        grads = []
        for a in self.fwd.arguments:
            if a.is_tensor and r.gradient_of(a.name):
                test = f"{a.name}.requires_grad"
                grads.append(f"({a.name} is not None and {test})" if a.optional else test)
        any_grad = grads[0] if len(grads) == 1 else f"({' or '.join(grads)})"
        needs_grad = f"torch.is_grad_enabled() and {any_grad}" if grads and op.backward else ""
        grad_free = not any(_may_require_grad(op, d) for d in op.inputs)
        stages = self._stages()
        return DirectCall(
            kind="function" if op.backward else "grad_free" if grad_free else "grad_off",
            stages=stages,
            tensors=tensor_args(self.fwd),
            needs_grad=needs_grad,
            function=r.names.function if op.backward else "",
            call=self.forward_call(stages.names[0], stages.names[1] if r.pair else ""),
            mutated=tuple(d.name for d in op.inputs if d.mutated),
            mutated_optional=tuple(
                d.name for d in op.inputs if d.mutated and d.name in r.optional_inputs
            ),
        )


def _cuda_test(schema) -> str:
    """The test for the CUDA shims: ``x.is_cuda`` for a first tensor argument that is always
    given; else ``_on_cuda(...)`` over the tensor arguments up to the first such one (an
    optional tensor may be None, a list empty or hold None)."""
    names = device_args(schema)
    if len(names) == 1 and always_given(schema, names[0]):
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
