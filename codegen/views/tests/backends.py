"""The backends section (docs/spec.md, "Several backends"): each declared CUDA backend of a
stage with its layout contract, tried on the layouts it accepts and refuses, against the
reference, and for compiled reuse."""

from __future__ import annotations

from dataclasses import dataclass

from ...spec.shapes import ELLIPSIS
from .common import OpTests


@dataclass(frozen=True, slots=True)
class BackendRow:
    """One declared CUDA backend of a stage, as ``_testing_backends.Backend`` takes it."""

    name: str
    ref: str
    layout: dict  # tensor -> (contiguous_dim, alignment or None)
    int64: bool
    signatures: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BackendsView:
    stages: dict  # "fwd" / "bwd" -> tuple[BackendRow, ...]
    qualnames: dict  # "fwd" / "bwd" -> the registered operator's qualified name
    names: tuple[str, ...]  # every backend named, in first-seen order
    # The first sample and a copy with one outer dim grown by one, for compiled reuse; None when
    # every dim of the sample sits in some contract's contiguous mode.
    resized: tuple[str, dict] | None


def backends_view(t: OpTests) -> BackendsView | None:
    """The CUDA backend lists of the forward and backward stages; None without any."""
    stages, qualnames, names = {}, {}, []
    for key, stage in (("fwd", t.r.forward), ("bwd", t.r.backward)):
        impl = next((i for i in stage.impls if i.backends), None) if stage else None
        if impl is None:
            continue
        stages[key] = tuple(
            BackendRow(
                b.backend,
                b.ref,
                {
                    rule.tensor: (rule.contiguous_dim, rule.alignment, rule.max_contiguous)
                    for rule in b.layout
                },
                b.int64,
                b.signatures,
            )
            for b in impl.backends
        )
        qualnames[key] = stage.names.qualname
        names += [b.backend for b in impl.backends if b.backend not in names]
    if not stages:
        return None
    return BackendsView(stages, qualnames, tuple(names), _resized(t))


def _resized(t: OpTests) -> tuple[str, dict] | None:
    """The first sample with its first outer dim (one no contract needs contiguous) grown."""
    inner = _contiguous_dims(t.op)
    first_id, first = next(iter(t.samples().items()))
    grown = dict(first)
    if first.get("batch"):
        grown["batch"] = (first["batch"][0] + 1, *first["batch"][1:])
        return first_id, grown
    for name, value in first.items():
        if name != "batch" and isinstance(value, int) and name not in inner:
            grown[name] = value + 1
            return first_id, grown
    return None


def _contiguous_dims(op) -> set[str]:
    """The dims that some backend's layout contract needs contiguous."""
    inner = set()
    for stage in (op.forward, op.backward):
        for launcher in stage.launchers if stage else ():
            for rule in launcher.layout:
                decl = op.input(rule.tensor)
                if decl is not None and decl.shape.min_rank:
                    entries = [e for e in decl.shape.entries if e != ELLIPSIS]
                    d = rule.contiguous_dim
                    if -len(entries) <= d < len(entries):
                        inner.update(entries[d].names)
    return inner
