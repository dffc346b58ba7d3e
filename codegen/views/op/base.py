"""What every section of an operator module reads: dim reads, the forward call, and the small
expressions (shape tuples, device tests) built from validated identifiers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from ...resolve.dims import TensorPlan, bind_from
from ...resolve.resolved import ResolvedOp
from ...resolve.symbols import batch_local
from ...spec.model import DType, Shape
from ...spec.schema import Argument, Schema
from ...spec.shapes import ELLIPSIS
from .signature import call_args


@dataclass(frozen=True, slots=True)
class Statement:
    """``target = value``; ``value`` is an expression over dims and tensor sizes."""

    kind: ClassVar[str] = "statement"
    target: str
    value: str


@dataclass(frozen=True, slots=True)
class ForwardCall:
    """Statements computing every forward output.

    ``kind``: ``pair`` branches on the arity flag (``wide_*`` when it is on, ``extras`` None
    when it is off); ``bind`` binds ``targets``; ``bare`` calls for the side effect only.
    """

    kind: Literal["pair", "bind", "bare"]
    binding: str
    targets: tuple[str, ...]
    args: tuple[str, ...]
    flag: str | None
    wide_binding: str
    wide_targets: tuple[str, ...]
    extras: tuple[str, ...]  # None when the flag is off


def tuple_expr(parts: list[str]) -> str:
    return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def shape_expr(shape: Shape, batch: str) -> str:
    return tuple_expr([f"*{batch}" if e == ELLIPSIS else e.render({}) for e in shape.entries])


def batch_slice(t: TensorPlan) -> str:
    before, after = len(t.shape.before), len(t.shape.after)
    return f"{t.name}.shape[{before or ''}:{f'-{after}' if after else ''}]"


def names_in(expr: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr))


def starred(a: Argument) -> str:
    """A list argument's tensors spread into a call (an optional list may be None)."""
    return f"*({a.name} or ())" if a.optional else f"*{a.name}"


def tensor_args(schema: Schema) -> tuple[str, ...]:
    """Every tensor argument of ``schema``, lists spread."""
    return tuple(
        starred(a) if a.is_tensor_list else a.name
        for a in schema.arguments
        if a.is_tensor or a.is_tensor_list
    )


def device_args(schema: Schema) -> list[str]:
    """The tensor arguments up to the first one always given (a plain, non-optional Tensor):
    the first tensor present among them decides the device of a call."""
    names = []
    for a in schema.arguments:
        if not (a.is_tensor or a.is_tensor_list):
            continue
        names.append(a.name)
        if a.is_tensor and not a.optional:
            break
    return names


def always_given(schema: Schema, name: str) -> bool:
    return any(a.name == name and a.is_tensor and not a.optional for a in schema.arguments)


class OpBuilder:
    """Dim reads and the forward call, shared by the builders of each section of the module."""

    def __init__(self, r: ResolvedOp) -> None:
        self.r = r
        self.op = r.op
        self.plan = r.plan
        self.fwd = r.op.forward.schema
        self.batch = batch_local(r.op)

    def _closure(self, needed: set[str]) -> set[str]:
        derived = {d.name: d for d in self.op.dims}
        out, frontier = set(needed), list(needed)
        while frontier:
            d = derived.get(frontier.pop())
            for n in d.expr.names if d else ():
                if n not in out:
                    out.add(n)
                    frontier.append(n)
        return out

    def dim_reads(self, needed: set[str], batch: bool, available: set[str] | None):
        """Statements binding ``needed`` dims (and ``batch``) from the tensors ``available``."""
        closure = self._closure(needed)
        out = []
        if batch and self.plan.batch_source is not None:
            src = next(t for t in self.plan.tensors if t.binds_batch)
            out.append(Statement(self.batch, batch_slice(src)))
        for name, b in self.plan.bound.items():
            if name not in closure or b.derived:
                continue
            if available is not None:
                b = bind_from(self.op, self.plan, name, available)
            out.append(Statement(name, f"{b.tensor}.shape[{b.index}]"))
        for d in self.op.dims:
            if d.name in closure:
                out.append(Statement(d.name, d.expr.render({})))
        return out

    def scalar_names(self) -> set[str]:
        return {a.name for a in self.fwd.arguments if a.type in ("int", "SymInt")}

    @staticmethod
    def needs(shape: Shape) -> tuple[set[str], bool]:
        names = {n for e in shape.entries if e != ELLIPSIS for n in e.names}
        return names, shape.has_ellipsis

    def alloc_base(self, available: list[str]) -> str:
        for t in self.plan.tensors:
            if not t.optional and not self.op.input(t.name).mutated and t.name in available:
                return t.name
        return available[0]

    @staticmethod
    def dtype(dtype: DType | None, dtype_of: str | None, base: str) -> str | None:
        if dtype is not None:
            return f"torch.{dtype.torch_name}"
        return None if dtype_of == base else f"{dtype_of}.dtype"

    def forward_call(self, binding: str = "", wide_binding: str = "") -> ForwardCall:
        """The forward through ``binding`` (and ``wide_binding`` for the arity pair's wider
        operator); by default the module-level bindings of the registered operators."""
        r = self.r
        pair = r.pair
        outs = tuple(o.name for o in self.op.outputs if o.name not in r.pair_extras)
        return ForwardCall(
            kind="pair" if r.flag else "bind" if outs else "bare",
            binding=binding or r.forward.names.binding,
            targets=outs,
            args=call_args(self.fwd),
            flag=r.flag,
            wide_binding=(wide_binding or pair.names.binding) if pair else "",
            wide_targets=outs + r.pair_extras,
            extras=r.pair_extras,
        )
