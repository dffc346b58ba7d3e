"""The index-input section (docs/spec.md, "Index inputs"): the rows of the out-of-range tests,
how ``make_inputs`` draws an index input, and which zero sizes an index input refuses."""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.shapes import ELLIPSIS, EvaluationError


@dataclass(frozen=True, slots=True)
class IndexRow:
    """An index input of the out-of-range tests: the dim it indexes, the input and position
    whose size that dim is, whether negative entries skip, and the dtypes tried."""

    name: str
    dim: str
    binder: str
    position: int
    skip: bool
    dtypes: tuple[str, ...]  # its own allowed dtypes; () where another input shares its dtype


def index_rows(r: ResolvedOp) -> tuple[IndexRow, ...]:
    op = r.op
    shared = {d.same_dtype_as for d in op.inputs if d.same_dtype_as}
    rows = []
    for d in op.inputs:
        if not d.indexes:
            continue
        b = r.plan.bound[d.indexes]
        own = d.same_dtype_as is None and d.name not in shared
        dtypes = tuple(x.torch_name for x in d.dtypes) if own else ()
        rows.append(IndexRow(d.name, d.indexes, b.tensor, b.index, d.skips_negative, dtypes))
    return tuple(rows)


def index_bound(r: ResolvedOp, decl) -> str:
    """The size an index input's drawn entries index: the sample's dim, or the shape of the
    spelled-out input that binds it (made before the drawn ones); "" for other inputs."""
    if not decl.indexes or decl.init != "index":
        return ""
    if decl.indexes in r.sample_dims:
        return decl.indexes
    b = r.plan.bound[decl.indexes]
    return f"{b.tensor}.shape[{b.index}]"


def _product(sizes) -> int:
    out = 1
    for size in sizes:
        out *= size
    return out


def index_refuses(op, sample, dim: str) -> bool:
    """Whether some index input of ``dim`` has an entry in ``sample`` once ``dim`` is 0 that no
    size 0 allows: any entry without ``negative: skip``, a spelled-out one >= 0 with it (drawn
    entries are all negative then)."""
    env = {**sample.env(), dim: 0}
    for d in op.inputs:
        if d.indexes != dim:
            continue
        values = sample.get(d.name)
        if isinstance(values, tuple):
            if any(not (d.skips_negative and v < 0) for v in values):
                return True
            continue
        if d.skips_negative:
            continue
        numel = 1
        try:
            for e in d.shape.entries:
                numel *= _product(sample.batch or ()) if e == ELLIPSIS else e.evaluate(env)
        except (EvaluationError, KeyError, IndexError):
            return True  # sized by a derived dim: taken to have entries
        if numel:
            return True
    return False
