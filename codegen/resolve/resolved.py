"""The resolved operator: every fact the later stages ask about an op, computed once.

``resolve`` never fails: it runs on ops that validation will still refuse, and records what it
cannot decide as ``None`` (a backward argument without a role, a gradient naming no input) for
``validate`` to report. Views and templates only print what is here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..spec.model import Integration, Launcher, Op, OutputDecl, Spec, TensorDecl
from ..spec.schema import Schema
from .dims import DimPlan, plan
from .symbols import OpNames, StageNames, op_names, stage_names

GRAD_PREFIX = "grad_"


class Role(enum.Enum):
    """What a backward argument is, by its name."""

    ARGUMENT = "forward argument"  # passed through from the forward call
    SAVED = "saved output"  # a forward output saved for the backward
    GRADIENT = "incoming gradient"  # grad_<public output>


@dataclass(frozen=True, slots=True)
class BackwardArg:
    name: str
    role: Role | None  # None: the name says nothing validate can accept
    source: str | None  # the forward argument, the saved output, or the differentiated output
    is_tensor: bool
    optional: bool


@dataclass(frozen=True, slots=True)
class Gradient:
    name: str  # the backward return, grad_<input>
    input: str | None  # the input it differentiates; None when it names no input


@dataclass(frozen=True, slots=True)
class Impl:
    """One shim registered for some devices, calling one launcher."""

    name: str
    ref: str  # module:function (the last backend's, when it chooses among backends)
    devices: tuple[str, ...]  # dispatch keys: CUDA, CPU
    launcher: str  # module-level name of the launcher (eager integration)
    # The CUDA backend list in declared order (docs/spec.md, "Several backends"); () for one
    # launcher. The shim runs the first backend that is available and whose contract holds.
    backends: tuple[Launcher, ...] = ()


@dataclass(frozen=True, slots=True)
class ResolvedStage:
    kind: str  # fwd, fwd_<suffix>, bwd
    names: StageNames
    schema: Schema
    impls: tuple[Impl, ...]
    flag: bool | None  # the arity flag this operator passes its launcher; None: no pair
    returns: tuple[str, ...]  # what the operator returns
    launcher_returns: tuple[str, ...]  # what its launcher returns (the wide list in a pair)
    outputs: tuple[OutputDecl, ...]  # declared forward outputs it returns; () for the backward


@dataclass(frozen=True, slots=True)
class ResolvedOp:
    op: Op
    namespace: str
    names: OpNames
    plan: DimPlan
    stages: tuple[ResolvedStage, ...]  # forward, its arity twin if any, backward if any
    optional_inputs: tuple[str, ...]  # Tensor? and Tensor[]? inputs, in schema order
    literal_inputs: tuple[str, ...]  # inputs whose values some test sample spells out
    sample_dims: tuple[str, ...]  # dims each test sample must size, in binding order
    base_returns: tuple[str, ...]  # returns of the forward operator
    pair_extras: tuple[str, ...]  # the trailing returns only the arity twin has
    public_outputs: tuple[str, ...]
    reference_returns: tuple[str, ...]  # what the reference returns, in its order
    backward_args: tuple[BackwardArg, ...]
    gradients: tuple[Gradient, ...]
    devices: tuple[str, ...]  # device types the public function accepts

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def integration(self) -> Integration:
        return self.op.integration

    @property
    def forward(self) -> ResolvedStage:
        return self.stages[0]

    @property
    def pair(self) -> ResolvedStage | None:
        return next((s for s in self.stages if s.flag is True), None)

    @property
    def backward(self) -> ResolvedStage | None:
        return next((s for s in self.stages if s.kind == "bwd"), None)

    @property
    def flag(self) -> str | None:
        return self.op.arity_pair.flag if self.op.arity_pair else None

    @property
    def saved_tensors(self) -> tuple[str, ...]:
        """Backward arguments the Function saves with ``save_for_backward``."""
        return tuple(
            a.name for a in self.backward_args if a.role is not Role.GRADIENT and a.is_tensor
        )

    @property
    def saved_scalars(self) -> tuple[str, ...]:
        """Backward arguments the Function keeps on ``ctx``."""
        return tuple(
            a.name for a in self.backward_args if a.role is not Role.GRADIENT and not a.is_tensor
        )

    def decl(self, name: str) -> TensorDecl | None:
        return self.op.input(name)

    def gradient_of(self, input_name: str) -> str | None:
        return next((g.name for g in self.gradients if g.input == input_name), None)


def _impls(op: Op, stage, names: StageNames) -> tuple[Impl, ...]:
    by_ref: dict[str, list[str]] = {}
    listed = tuple(lch for lch in stage.launchers if lch.backend is not None)
    for launcher in stage.launchers:
        if launcher.backend is None:
            by_ref.setdefault(launcher.ref, []).append(launcher.device)
    out = []
    if listed:
        out.append(
            Impl(
                name=names.impl("cuda"),
                ref=listed[-1].ref,
                devices=("CUDA",),
                launcher=names.launcher("cuda"),
                backends=listed,
            )
        )
    shared = len(by_ref) == 1 and not listed
    for ref, devices in by_ref.items():
        device = None if shared else devices[0]
        out.append(
            Impl(
                name=names.impl(device),
                ref=ref,
                devices=tuple(d.upper() for d in devices),
                launcher=names.launcher(device),
            )
        )
    return tuple(out)


def _backward_args(op: Op) -> tuple[BackwardArg, ...]:
    if op.backward is None:
        return ()
    outputs = {o.name for o in op.outputs}
    fwd = op.forward.schema
    args = []
    for a in op.backward.schema.arguments:
        role, source = None, None
        differentiated = a.name[len(GRAD_PREFIX) :]
        if a.name.startswith(GRAD_PREFIX) and differentiated in outputs:
            role, source = Role.GRADIENT, differentiated
        elif fwd.argument(a.name) is not None:
            role, source = Role.ARGUMENT, a.name
        elif a.name in outputs:
            role, source = Role.SAVED, a.name
        args.append(BackwardArg(a.name, role, source, a.is_tensor, a.optional))
    return tuple(args)


def _gradients(op: Op) -> tuple[Gradient, ...]:
    if op.backward is None:
        return ()
    out = []
    for r in op.backward.schema.returns:
        name = r.name or ""
        target = name[len(GRAD_PREFIX) :] if name.startswith(GRAD_PREFIX) else None
        out.append(Gradient(name, target if target and op.input(target) else None))
    return tuple(out)


def _devices(op: Op) -> tuple[str, ...]:
    """Devices with a launcher, and meta where the registered fakes serve a meta call.

    Note [meta]: an opaque operator's fake is its meta kernel. A triton_op runs its shim (the
    Triton launcher) on meta tensors, and a fake that asks for a data-dependent size needs the
    fake-tensor mode that torch.compile provides, so neither can be called on meta tensors.
    """
    devices = [d for d in ("cuda", "cpu") if any(lch.device == d for lch in op.forward.launchers)]
    if op.integration is Integration.OPAQUE and not op.dynamic_dims:
        devices.append("meta")
    return tuple(devices)


def resolve(spec: Spec, op: Op) -> ResolvedOp:
    fwd = op.forward.schema
    dim_plan = plan(op)
    base = tuple(r.name or "" for r in fwd.returns)
    pair = op.arity_pair
    extras = tuple(r.name or "" for r in pair.schema.returns[len(base) :]) if pair else ()
    by_name = {o.name: o for o in op.outputs}

    def stage(kind: str, source, schema: Schema, flag: bool | None, returns) -> ResolvedStage:
        names = stage_names(spec.namespace, op.name, kind)
        wide = base + extras if flag is not None else tuple(returns)
        return ResolvedStage(
            kind=kind,
            names=names,
            schema=schema,
            impls=_impls(op, source, names),
            flag=flag,
            returns=tuple(returns),
            launcher_returns=wide,
            outputs=tuple(by_name[r] for r in returns if r in by_name) if kind != "bwd" else (),
        )

    stages = [stage("fwd", op.forward, fwd, False if pair else None, base)]
    if pair:
        stages.append(stage(f"fwd_{pair.suffix}", op.forward, pair.schema, True, base + extras))
    if op.backward:
        bwd = op.backward.schema
        stages.append(stage("bwd", op.backward, bwd, None, [r.name or "" for r in bwd.returns]))

    literal = tuple(
        d.name for d in op.inputs if any(isinstance(s.get(d.name), tuple) for s in op.tests.samples)
    )
    sample_dims = tuple(
        name for name, b in dim_plan.bound.items() if not b.derived and b.tensor not in literal
    )
    # Dims only list elements use are free per element: the tests take them from the samples.
    scalars = {a.name for a in fwd.arguments if not a.is_tensor and not a.is_tensor_list}
    taken = set(dim_plan.bound) | {d.name for d in op.dims} | scalars
    taken |= {name for name, _ in op.dynamic_dims}
    for d in op.inputs:
        if d.is_list:
            for e in d.shape.entries:
                for n in () if e == "..." else e.names:
                    if n not in taken:
                        taken.add(n)
                        sample_dims += (n,)
    return ResolvedOp(
        op=op,
        namespace=spec.namespace,
        names=op_names(op.name),
        plan=dim_plan,
        stages=tuple(stages),
        optional_inputs=tuple(
            a.name for a in fwd.arguments if (a.is_tensor or a.is_tensor_list) and a.optional
        ),
        literal_inputs=literal,
        sample_dims=sample_dims,
        base_returns=base,
        pair_extras=extras,
        public_outputs=tuple(o.name for o in op.outputs if o.public),
        reference_returns=(
            op.reference_returns
            if op.reference_returns is not None
            else tuple(o.name for o in op.outputs if o.public)
        ),
        backward_args=_backward_args(op),
        gradients=_gradients(op),
        devices=_devices(op),
    )
