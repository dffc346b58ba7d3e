"""The tables section: the data every test reads (samples, dtypes, tolerances, configuration
axes, ways to break each argument, the outputs and how they compare), which
``codegen/runtime/testing_cases.py`` turns into pytest cases at import time: one more sample or
dtype in the spec is one more row, not one more block of cases."""

from __future__ import annotations

from dataclasses import dataclass

from .common import DTypeRow, OpTests
from .mutation import mutated
from .rejects import rejects
from .varlen import VarlenView, varlen_view


@dataclass(frozen=True, slots=True)
class OutputDType:
    """A public output's declared dtype: ``torch.<dtype>``, or the input whose dtype it takes."""

    name: str
    dtype: str | None  # a torch attribute: float32
    input: str | None


@dataclass(frozen=True, slots=True)
class TablesView:
    seed: int
    samples: dict
    dtypes: tuple[DTypeRow, ...]
    tolerance: dict
    grad_tolerance: dict
    variants: dict
    optional: tuple[str, ...]
    flag: str | None
    rejects: dict
    arg_names: tuple[str, ...]
    public_outputs: tuple[str, ...]
    reference_returns: tuple[str, ...]  # what the reference returns, in its order
    output_dtypes: tuple[OutputDType, ...]  # of each public output
    # List outputs ('Tensor[]') and their counts: an integer or an argument's name.
    output_counts: dict | None
    differentiable: tuple[str, ...]
    mutated: tuple[str, ...]
    varlen: VarlenView | None  # PACKED_DIM, PER_SEQUENCE, OFFSETS


def tables_view(t: OpTests) -> TablesView:
    r, op, tests = t.r, t.op, t.op.tests
    dtypes = t.test_dtypes()
    tol, gtol = dict(tests.tolerance), dict(tests.grad_tolerance)
    return TablesView(
        seed=tests.seed,
        samples=t.samples(),
        dtypes=t.dtype_rows(),
        tolerance={d.short: (tol[d].atol, tol[d].rtol) for d in dtypes},
        grad_tolerance={d.short: (gtol[d].atol, gtol[d].rtol) for d in dtypes},
        variants=t.variants(),
        optional=tuple(n for n in r.optional_inputs if n not in r.literal_inputs),
        flag=r.flag,
        rejects=rejects(t),
        arg_names=tuple(a.name for a in t.fwd.arguments),
        public_outputs=r.public_outputs,
        reference_returns=r.reference_returns,
        output_dtypes=tuple(
            OutputDType(o.name, o.dtype.torch_name if o.dtype else None, o.dtype_of)
            for o in op.outputs
            if o.public
        ),
        output_counts={o.name: o.count for o in op.outputs if o.count is not None} or None,
        differentiable=t.differentiable(),
        mutated=mutated(op),
        varlen=varlen_view(op),
    )
