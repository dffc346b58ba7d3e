"""The registration section: schema definitions, the shim registered for each device (with its
device guard and backend selection), the ``torch.library.impl`` or ``triton_op`` calls and the
module-level ``torch.ops`` bindings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...resolve.resolved import ResolvedStage
from ...spec.model import Integration
from ...spec.schema import Schema
from .base import OpBuilder, always_given, device_args, tensor_args
from .notes import NoteRef, Notes
from .signature import Param, call_args, params, returns_annotation


@dataclass(frozen=True, slots=True)
class LayoutCheck:
    """``tensor`` meets a backend's layout contract (``_layout.tensor_supports_contiguous_dim``)."""

    tensor: str
    dim: int
    alignment: int | None  # bytes; None: the element size
    optional: bool  # a Tensor? argument: None passes
    max_contiguous: int | None = None  # elements along ``dim``; None: any number


@dataclass(frozen=True, slots=True)
class BackendView:
    """One entry of a CUDA backend list: the conditions under which its launcher runs.

    ``kind``: ``guarded`` runs when its conditions hold; ``fallback`` (the last) runs otherwise.
    """

    kind: Literal["guarded", "fallback"]
    backend: str
    ref: str
    layout: tuple[LayoutCheck, ...]
    # Tensor arguments whose size needs the int64 ABI, which this backend lacks; () if it has it.
    int64_args: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeviceGuard:
    """Note [device guard] (_runtime): ``if test:`` switch to device ``index`` and call again.

    ``kind``: ``inline`` tests the first tensor argument, always given; ``found`` first binds
    ``_device`` to ``_other_device(helper)``, the first tensor present among ``helper``.
    """

    kind: Literal["inline", "found"]
    test: str
    index: str
    note: NoteRef
    helper: str = ""


@dataclass(frozen=True, slots=True)
class ImplView:
    """A shim: the function registered for ``devices``, calling its launcher.

    ``launch``: ``bare`` calls a launcher that returns nothing; ``return`` returns its results;
    ``pair`` (an arity pair) binds the wide results to ``targets`` and returns its own.
    """

    name: str
    ref: str
    devices: tuple[str, ...]
    launcher: str  # module-level launcher name (eager integration only)
    launch: Literal["bare", "return", "pair"]
    flag_arg: str  # the flag as the launcher's last argument (by keyword after keywords)
    targets: tuple[str, ...]  # what the launcher's results are bound to (arity pair only)
    returns: tuple[str, ...]
    backends: tuple[BackendView, ...]  # () for one launcher
    # Registered for CUDA by the opaque or triton_op integration: the call first makes the
    # inputs' device current (Note [device guard] in _runtime); None otherwise.
    device_guard: DeviceGuard | None = None
    # Note [eager launchers], Note [arity pair] and Note [backend selection], where they apply.
    eager_note: NoteRef | None = None
    pair_note: NoteRef | None = None
    backend_note: NoteRef | None = None


@dataclass(frozen=True, slots=True)
class StageView:
    name: str
    qualname: str
    binding: str
    schema: str  # as written in the spec
    params: tuple[Param, ...]
    args: tuple[str, ...]
    annotation: str
    impls: tuple[ImplView, ...]
    mutated: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Registration:
    """``torch.library.impl(qualname, device, impl)``."""

    qualname: str
    device: str
    impl: str


def stage_view(b: OpBuilder, s: ResolvedStage, notes: Notes) -> StageView:
    op = b.op
    eager = op.integration is Integration.EAGER
    impls = tuple(
        ImplView(
            name=i.name,
            ref=i.ref,
            devices=i.devices,
            launcher=i.launcher,
            launch="pair" if s.flag is not None else "return" if s.returns else "bare",
            flag_arg=(
                ""
                if s.flag is None
                else f"{op.arity_pair.flag}={s.flag}"
                if any(a.kwarg_only for a in s.schema.arguments)
                else str(s.flag)
            ),
            targets=tuple(n if n in s.returns else "_" for n in s.launcher_returns),
            returns=s.returns,
            eager_note=notes.ref("eager launchers") if eager else None,
            device_guard=(
                device_guard(s.schema, notes) if "CUDA" in i.devices and not eager else None
            ),
            pair_note=notes.ref("arity pair") if s.flag is not None else None,
            backend_note=notes.ref("backend selection") if i.backends else None,
            backends=_backend_views(s.schema, i.backends),
        )
        for i in s.impls
    )
    return StageView(
        name=s.names.name,
        qualname=s.names.qualname,
        binding=s.names.binding,
        schema=s.schema.text,
        params=params(s.schema),
        args=call_args(s.schema),
        annotation=returns_annotation(s.schema),
        impls=impls,
        mutated=tuple(a.name for a in s.schema.arguments if a.is_write),
    )


def registrations(stages: tuple[StageView, ...]) -> tuple[Registration, ...]:
    return tuple(
        Registration(s.qualname, device, i.name)
        for s in stages
        for i in s.impls
        for device in i.devices
    )


def device_guard(schema: Schema, notes: Notes) -> DeviceGuard:
    """Note [device guard]: a first tensor argument always given is read inline (``is_cuda``
    first: a CUDA implementation called with CPU tensors, as the backend tests do, or on a
    build without CUDA, asks nothing); otherwise the runtime finds the first tensor present."""
    names = device_args(schema)
    if len(names) == 1 and always_given(schema, names[0]):
        t = names[0]
        test = f"{t}.is_cuda and {t}.get_device() != _cuda_device()"
        return DeviceGuard(
            "inline", test, f"{t}.get_device()", notes.ref("device guard", " (_runtime)")
        )
    return DeviceGuard(
        "found",
        "_device is not None",
        "_device",
        notes.ref("device guard", " (_runtime)"),
        ", ".join(names),
    )


def _backend_views(schema: Schema, backends) -> tuple[BackendView, ...]:
    args = {a.name: a for a in schema.arguments}
    tensors = tensor_args(schema)
    return tuple(
        BackendView(
            kind="fallback" if i == len(backends) - 1 else "guarded",
            backend=b.backend,
            ref=b.ref,
            layout=tuple(
                LayoutCheck(
                    r.tensor,
                    r.contiguous_dim,
                    r.alignment,
                    args[r.tensor].optional,
                    r.max_contiguous,
                )
                for r in b.layout
            ),
            int64_args=() if b.int64 else tensors,
        )
        for i, b in enumerate(backends)
    )
