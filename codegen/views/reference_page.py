"""The view of ``OPS.md``: every operator's contract as a reference page (Markdown).

Read from the resolved operators and their module views, never from the spec's text: the page
says what the generated code does. Every cell is plain text; the template escapes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..resolve.resolved import ResolvedOp
from ..spec.model import Launcher, Spec
from ..spec.shapes import ELLIPSIS, Shape
from .op.module import OpView
from .op.signature import Param


@dataclass(frozen=True, slots=True)
class Row:
    """One table row: a name and its cells."""

    name: str
    cells: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OpEntry:
    name: str
    summary: str  # the doc's first line
    integration: str
    schemas: tuple[Row, ...]  # (qualified operator name, schema as written)
    params: tuple[Param, ...]  # the public function's
    result: str
    result_fields: tuple[Param, ...]
    inputs: tuple[Row, ...]  # shape, dtypes, notes
    outputs: tuple[Row, ...]  # shape, dtype, notes
    dims: tuple[Row, ...]  # how it is sized
    variants: tuple[Row, ...]  # values, the default first
    constraints: tuple[Row, ...]  # condition -> the message refusing a call
    backends: tuple[Row, ...]  # (stage, device) -> launchers in the order tried


@dataclass(frozen=True, slots=True)
class PageView:
    namespace: str
    package: str
    ops: tuple[OpEntry, ...]


def _shape(shape: Shape) -> str:
    return "[" + ", ".join("..." if e == ELLIPSIS else e.text for e in shape.entries) + "]"


def _launcher(launcher: Launcher) -> str:
    text = f"{launcher.module}:{launcher.function}"
    if launcher.backend:
        text = f"{launcher.backend}: {text}"
    rules = [
        f"{r.tensor} contiguous in dim {r.contiguous_dim}"
        + (f", {r.alignment}-byte aligned" if r.alignment else "")
        + (f", at most {r.max_contiguous} along it" if r.max_contiguous else "")
        for r in launcher.layout
    ]
    if rules:
        text += " (where " + "; ".join(rules) + ")"
    return text


def _backends(r: ResolvedOp) -> tuple[Row, ...]:
    rows = []
    for label, stage in (("forward", r.op.forward), ("backward", r.op.backward)):
        if stage is None:
            continue
        devices: dict[str, list[str]] = {}
        for launcher in stage.launchers:
            devices.setdefault(launcher.device, []).append(_launcher(launcher))
        rows += [Row(f"{label}, {device}", tuple(ls)) for device, ls in devices.items()]
    return tuple(rows)


def _inputs(r: ResolvedOp) -> tuple[Row, ...]:
    optional = set(r.optional_inputs)
    rows = []
    for t in r.op.inputs:
        dtypes = (
            f"as {t.same_dtype_as}"
            if t.same_dtype_as
            else ", ".join(d.torch_name for d in t.dtypes)
        )
        notes = [
            note
            for note, present in (
                ("optional", t.name in optional),
                ("list", t.is_list),
                ("mutated", t.mutated),
                ("no gradient", not t.differentiable),
                (f"indexes {t.indexes}", t.indexes is not None),
                (f"offsets of {t.offsets}", t.offsets is not None),
            )
            if present
        ]
        rows.append(Row(t.name, (_shape(t.shape), dtypes, ", ".join(notes))))
    return tuple(rows)


def _outputs(r: ResolvedOp) -> tuple[Row, ...]:
    rows = []
    for o in r.op.outputs:
        dtype = o.dtype.torch_name if o.dtype is not None else f"as {o.dtype_of}"
        notes = [] if o.public else ["saved for the backward, not returned"]
        if o.when:
            notes.append(f"only when {o.when}")
        rows.append(Row(o.name, (_shape(o.shape), dtype, ", ".join(notes))))
    return tuple(rows)


def _entry(r: ResolvedOp, view: OpView) -> OpEntry:
    op = r.op
    dims = [Row(d.name, (d.expr.text,)) for d in op.dims]
    dims += [Row(name, ("data-dependent (known after the launch)",)) for name, _ in op.dynamic_dims]
    return OpEntry(
        name=op.name,
        summary=view.summary,
        integration=view.integration,
        schemas=tuple(Row(s.qualname, (s.schema,)) for s in view.stages),
        params=view.public.params,
        result=view.public.result,
        result_fields=view.public.result_fields,
        inputs=_inputs(r),
        outputs=_outputs(r),
        dims=tuple(dims),
        variants=tuple(Row(v.arg, tuple(repr(x) for x in v.values)) for v in op.variants),
        constraints=tuple(
            Row(
                f"{c.check.left.text} {c.check.op} {c.check.right.text}",
                (f"{c.message} (checked when {c.when} is given)" if c.when else c.message,),
            )
            for c in op.constraints
        ),
        backends=_backends(r),
    )


def page_view(spec: Spec, ops: tuple[ResolvedOp, ...], views: dict[str, OpView]) -> PageView:
    return PageView(
        namespace=spec.namespace,
        package=spec.package,
        ops=tuple(_entry(r, views[r.name]) for r in ops),
    )
