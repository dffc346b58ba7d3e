"""One generated test module (``generated/tests/test_<op>.py``): a record per section, in the
order the module reads; ``templates/test_op.py.jinja`` includes the partial of each section
(``templates/tests/<section>.py.jinja``), which renders the record built in ``<section>.py``
here.

The module holds data (samples, dtypes, tolerances, configuration axes, ways to break each
argument) and two small builders (the public function's inputs, the backward's arguments);
``codegen/runtime/testing_cases.py`` turns the tables into pytest cases at import time. Values
from the spec stay Python values here; the partials write them with the ``py`` filter.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...resolve.resolved import ResolvedOp
from ...spec.model import Spec
from .backends import BackendsView, backends_view
from .common import OpTests
from .compile import CompileView, compile_view
from .cuda_graph import graphable
from .devices import devices
from .domains import DomainsView, domains_view
from .fast_path import FastPathView, fast_path_view
from .grad_free import grad_free
from .gradients import GradientsView, gradients_view
from .header import HeaderView, header_view
from .indexes import IndexRow, index_rows
from .inputs import BackwardView, InputsView, backward_view, inputs_view
from .numerics import compares
from .offsets import offsets_input
from .opcheck import OpcheckView, opcheck_view
from .side_effects import side_effect_launchers
from .tables import TablesView, tables_view
from .zero_sizes import zero_sizes


@dataclass(frozen=True, slots=True)
class TestsView:
    op: str  # the public function's name (spec text in ids and messages)
    package: str
    namespace: str
    has_gradients: bool  # read by the sections that also check gradients
    header: HeaderView
    tables: TablesView
    inputs: InputsView
    backward: BackwardView | None  # backward_args, without a backward: None
    opcheck: OpcheckView | None  # None for the eager integration
    compares: bool  # numerics: something to compare with the reference
    gradients: GradientsView | None
    domains: DomainsView | None
    offsets: str | None
    indexes: tuple[IndexRow, ...]
    grad_free: tuple[str, ...]
    zero_sizes: dict
    devices: tuple[str, ...]
    compile: CompileView
    side_effect_launchers: dict | None
    cuda_graph: bool
    fast_path: FastPathView | None
    backends: BackendsView | None


def tests_view(spec: Spec, r: ResolvedOp) -> TestsView:
    t = OpTests(spec, r)
    has = compares(r)
    return TestsView(
        op=r.names.public,
        package=spec.package,
        namespace=spec.namespace,
        has_gradients=t.has_gradients(),
        header=header_view(r),
        tables=tables_view(t),
        inputs=inputs_view(t),
        backward=backward_view(r),
        opcheck=opcheck_view(r),
        compares=has,
        gradients=gradients_view(t),
        domains=domains_view(r.op),
        offsets=offsets_input(r.op),
        indexes=index_rows(r),
        grad_free=grad_free(r),
        zero_sizes=zero_sizes(t),
        devices=devices(r),
        compile=compile_view(t),
        side_effect_launchers=side_effect_launchers(r.op),
        cuda_graph=graphable(r.op),
        fast_path=fast_path_view(r),
        backends=backends_view(t),
    )
