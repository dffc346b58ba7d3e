"""Checks that span sections of an operator, reading the resolved op. ``validate`` runs every check
of each operator and collects the problems in ``errors``; each module checks one concern: ``schema``
(forward arguments and returns), ``options`` (arity pair, variants, constraints, integration),
``tensors`` (inputs and outputs against the schema), ``dims`` (dim names and the dim plan's
problems), ``backward`` (backward arguments, gradients and what its fake needs), ``tests`` (samples,
dtypes, tolerances, varlen), ``bench`` (the benchmark plan), and ``launchers`` (whether each
launcher and reference exists, read from its source).
"""

from __future__ import annotations

from ...spec.errors import Errors
from ..resolved import ResolvedOp
from ..sources import find_function
from . import backward, bench, dims, options, schema, tensors, tests
from .report import Report


def validate(ops: tuple[ResolvedOp, ...], errors: Errors, check_imports: bool = True) -> None:
    for r in ops:
        report = Report(errors, r.name)
        schema.forward(r, report)
        if r.op.arity_pair is not None:
            options.arity_pair(r, report)
        options.variants(r, report)
        options.constraints(r, report)
        options.integration(r, report)
        options.layouts(r, report)
        tensors.inputs(r, report)
        tensors.outputs(r, report)
        dims.dims(r, report)
        backward.backward(r, report)
        tests.tests(r, report)
        bench.bench(r, report, check_imports)
        if check_imports:
            _launchers(r, report)


def _launchers(r: ResolvedOp, report: Report) -> None:
    """Each launcher and the reference name a function their module defines."""
    op = r.op
    for stage in (op.forward, op.backward):
        for launcher in stage.launchers if stage else ():
            if (problem := find_function(launcher.module, launcher.function)) is not None:
                what = (
                    f"{launcher.device} backend '{launcher.backend}'"
                    if launcher.backend
                    else launcher.device
                )
                report.error(launcher.loc, f"{what} launcher: {problem}")
    module, function = op.reference.split(":")
    if (problem := find_function(module, function)) is not None:
        report.error(op.reference_loc, f"reference: {problem}")
