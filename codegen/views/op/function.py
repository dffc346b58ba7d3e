"""The autograd.Function section: the forward through the registered operators, what it saves,
and the backward's gradients in the order of the forward's arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import ForwardCall, OpBuilder
from .signature import Param, annotation, call_args


@dataclass(frozen=True, slots=True)
class GradResult:
    """One input's gradient. ``kind``: ``none``, the input gets none; ``always``; ``only_if``, an
    optional input's gradient, returned only when it was given."""

    kind: Literal["none", "always", "only_if"]
    grad: str = ""
    input: str = ""


# Note [stage callables]: the Function takes its stages as its first arguments: the dispatcher
# path passes the registered operators, the eager fast path the shims registered for them, so
# one Function serves both.
STAGE_FWD, STAGE_PAIR, STAGE_BWD = "_fwd", "_fwd_pair", "_bwd"


@dataclass(frozen=True, slots=True)
class FunctionView:
    name: str
    stages: tuple[Param, ...]  # the stage callables (Note [stage callables])
    params: tuple[Param, ...]
    annotation: str
    call: ForwardCall
    saved: tuple[str, ...]
    scalars: tuple[str, ...]
    non_differentiable: tuple[str, ...]
    returns: tuple[str, ...]
    grads_in: tuple[Param, ...]
    backward: str  # the backward stage's parameter, kept on ctx
    backward_targets: tuple[str, ...]
    backward_args: tuple[str, ...]
    results: tuple[GradResult, ...]


class FunctionBuilder(OpBuilder):
    def function(self) -> FunctionView:
        r = self.r
        params = [Param(a.name, a.annotation) for a in self.fwd.arguments]
        if r.flag:
            params.append(Param(r.flag, "bool"))
        public = r.public_outputs
        optional = tuple(o in r.pair_extras for o in public)
        non_diff = tuple(
            o.name
            for o in self.op.outputs
            if o.public and o.dtype is not None and not o.dtype.is_floating
        )
        stages = [STAGE_FWD] + ([STAGE_PAIR] if r.pair else []) + [STAGE_BWD]
        results = [GradResult("none") for _ in stages]
        for name in [a.name for a in self.fwd.arguments] + ([r.flag] if r.flag else []):
            grad = r.gradient_of(name)
            if not grad:
                results.append(GradResult("none"))
            elif name in r.optional_inputs:
                results.append(GradResult("only_if", grad, name))
            else:
                results.append(GradResult("always", grad))
        return FunctionView(
            name=r.names.function,
            stages=tuple(Param(name, "Callable") for name in stages),
            params=tuple(params),
            annotation=annotation(len(public), optional),
            call=self.forward_call(STAGE_FWD, STAGE_PAIR),
            saved=r.saved_tensors,
            scalars=r.saved_scalars,
            non_differentiable=non_diff,
            returns=public,
            grads_in=tuple(
                Param(f"grad_{o}", "Tensor | None" if o in r.pair_extras else "Tensor")
                for o in public
            ),
            backward=STAGE_BWD,
            backward_targets=tuple(g.name for g in r.gradients),
            backward_args=call_args(self.op.backward.schema),
            results=tuple(results),
        )
