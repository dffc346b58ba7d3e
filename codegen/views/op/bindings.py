"""The bindings section: each stage's operator bound to a module-level name (resolving the
``torch.ops`` attribute chain per call costs time), the operators torch.compile must keep
(``side_effects: true``), and the constants the checks compare with."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.model import Integration
from .checks import Constant


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    target: str  # torch.ops.<namespace>.<op>.default, or the eager integration's shim


@dataclass(frozen=True, slots=True)
class BindingsView:
    bindings: tuple[Binding, ...]
    side_effect_ops: tuple[str, ...]  # forward operators' bindings and packets
    constants: tuple[Constant, ...]


def bindings_view(r: ResolvedOp, constants: list[Constant]) -> BindingsView:
    eager = r.op.integration is Integration.EAGER
    return BindingsView(
        bindings=tuple(
            Binding(
                s.names.binding,
                s.impls[0].name
                if eager
                else "torch.ops." + s.names.qualname.replace("::", ".") + ".default",
            )
            for s in r.stages
        ),
        side_effect_ops=_side_effect_ops(r) if r.op.side_effects else (),
        constants=tuple(constants),
    )


def _side_effect_ops(r: ResolvedOp) -> tuple[str, ...]:
    """Each forward operator's overload binding and its packet (a caller of ``torch.ops``
    reaches the packet), for ``torch.fx.node.has_side_effect``."""
    out = []
    for s in r.stages:
        if s.kind != "bwd":
            out += [s.names.binding, "torch.ops." + s.names.qualname.replace("::", ".")]
    return tuple(out)
