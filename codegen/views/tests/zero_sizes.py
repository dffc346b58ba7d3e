"""The zero-size section: each dim of the first sample set to 0 (for '...': its first leading
dim) is computed as the reference computes it, or refused before any launch."""

from __future__ import annotations

from .common import OpTests
from .indexes import index_refuses


def zero_sizes(t: OpTests) -> dict:
    """Each dim of the first sample -> "computed", or "refused" where a constraint forbids 0
    (or an index input of that dim has entries no size 0 allows, Note [index inputs])."""
    first = t.op.tests.samples[0]
    dims = list(t.r.sample_dims) + (["batch"] if first.batch is not None else [])
    out = {}
    for dim in dims:
        env = {**first.env(), dim: 0} if dim != "batch" else first.env()
        refused = any(
            (c.when is None or first.get(c.when) is not None)
            and all(n in env for n in c.check.names)
            and not c.check.holds(env)
            for c in t.op.constraints
        )
        if dim != "batch" and index_refuses(t.op, first, dim):
            refused = True
        out[dim] = "refused" if refused else "computed"
    return out
