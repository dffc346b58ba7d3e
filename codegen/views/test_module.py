"""View model of a generated test module: the operator's tables and its input builders.

The module holds data (samples, dtypes, tolerances, configuration axes, ways to break each
argument); ``codegen/runtime/testing.py`` turns the tables into pytest cases at import time, so
one more sample or dtype in the spec is one more row here, not one more block of cases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..emit.layout import INDENT, bracket
from ..resolve.dims import plan
from ..resolve.samples import literal_inputs, sample_dims
from ..spec.model import Integration, Op, Sample, Spec
from ..spec.shapes import ELLIPSIS
from .op_module import OpView

IN1, IN2 = INDENT, INDENT * 2


@dataclass(frozen=True)
class Facts:
    """What the tests read from the model that is derived in more than one place today."""

    optional: tuple[str, ...]  # optional tensor inputs of the forward schema
    literal: frozenset[str]  # inputs whose values samples spell out (given, never generated)
    dims: frozenset[str]  # dims each sample sizes
    pair_extras: tuple[str, ...]  # returns of the arity pair beyond the forward's


def facts(op: Op) -> Facts:
    """The one place the test view reads these from the model (a resolved field can replace it)."""
    fwd = op.forward.schema
    pair = op.arity_pair
    return Facts(
        optional=tuple(a.name for a in fwd.arguments if a.is_tensor and a.optional),
        literal=frozenset(literal_inputs(op)),
        dims=frozenset(sample_dims(op)),
        pair_extras=tuple(r.name for r in pair.schema.returns[len(fwd.returns) :]) if pair else (),
    )


@dataclass(frozen=True)
class TestsView:
    op: str
    package: str
    namespace: str
    reference_module: str
    reference_fn: str
    registered: bool
    triton_op: bool
    has_backward: bool
    has_gradients: bool
    cuda_graph: bool  # no data-dependent sizes: the launchers never sync with the host
    has_pair: bool
    pair_suffix: str
    flag: str | None
    dynamic: bool
    seed: int
    samples: tuple[str, ...]
    dtypes: tuple[str, ...]
    tolerance: tuple[str, ...]
    grad_tolerance: tuple[str, ...]
    variants: tuple[str, ...]
    optional: str
    rejects: tuple[str, ...]
    make_inputs: tuple[str, ...]
    backward_args: tuple[str, ...]
    backward_inputs: str
    incoming_grads: str
    public_outputs: str
    differentiable: str
    mutated: str
    arg_names: str
    compile_dtype: str
    varlen: bool
    varlen_lines: tuple[str, ...]

    @property
    def flag_literal(self) -> str:
        return json.dumps(self.flag) if self.flag else "None"


def _tuple(names) -> str:
    names = list(names)
    if len(names) == 1:
        return f"({json.dumps(names[0])},)"
    return "(" + ", ".join(json.dumps(n) for n in names) + ")"


def _literal(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def sample_id(sample: Sample, dims: set[str]) -> str:
    parts = []
    if sample.batch is not None:
        parts.append("batch" + ("x".join(str(b) for b in sample.batch) if sample.batch else "0"))
    for k, v in sample.entries:
        if k in dims:
            parts.append(f"{k}{v}")
        elif isinstance(v, tuple):
            parts.append(k)
    return "-".join(parts)


def _schema_default_first(values: tuple, default: str | None) -> tuple:
    """Variant values with the schema default (as the schema spells it) first."""
    first = [v for v in values if default in (json.dumps(v), repr(v), str(v))]
    return tuple(first[:1]) + tuple(v for v in values if v not in first[:1])


class _Builder:
    def __init__(self, spec: Spec, op: Op) -> None:
        self.spec, self.op = spec, op
        self.plan = plan(op)
        self.fwd = op.forward.schema
        self.facts = facts(op)
        self.pair = op.arity_pair

    def variants(self) -> list[str]:
        lines = []
        for v in self.op.variants:
            arg = self.fwd.argument(v.arg)
            values = _schema_default_first(v.values, arg.default if arg else None)
            lines.append(f"{IN1}{json.dumps(v.arg)}: {_literal(values)},")
        return lines

    def optional(self) -> str:
        """Optional inputs that configurations give or leave out (literal ones samples decide)."""
        return _tuple([n for n in self.facts.optional if n not in self.facts.literal])

    def make_inputs(self) -> list[str]:
        op, literal = self.op, self.facts.literal
        lines = [
            f"{IN1}_s = SAMPLES[_sample]",
            f"{IN1}_c = CONFIGS[_config]",
            f"{IN1}_dt = DTYPES[_dtype]",
            f"{IN1}_gen = torch.Generator().manual_seed(SEED)",
        ]
        if self.plan.batch_source is not None:
            lines.append(f'{IN1}batch = _s["batch"]')
        for name in sorted(self.facts.dims, key=list(self.plan.bound).index):
            lines.append(f"{IN1}{name} = _s[{json.dumps(name)}]")
        for decl in op.inputs:
            if decl.name in literal:
                dt = f"torch.{decl.dtypes[0].torch_name}" if decl.dtypes else "torch.int32"
                lines.append(f"{IN1}{decl.name} = _s.get({json.dumps(decl.name)})")
                lines.append(f"{IN1}if {decl.name} is not None:")
                lines.append(
                    f"{IN2}{decl.name} = torch.tensor({decl.name}, dtype={dt}, device=_t.DEVICE)"
                )
        for d in op.dims:
            lines.append(f"{IN1}{d.name} = {d.expr.render({})}")
        for decl in op.inputs:
            if decl.name in literal:
                continue
            parts = ["*batch" if e == ELLIPSIS else e.render({}) for e in decl.shape.entries]
            shape = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
            if decl.same_dtype_as is not None:
                dtype = f"{decl.same_dtype_as}.dtype"
            elif set(decl.dtypes) >= set(self.test_dtypes()):
                dtype = "_dt"
            else:
                dtype = f"torch.{decl.dtypes[0].torch_name}"
            call = f"_t.{decl.init}(_gen, {shape}, {dtype})"
            if decl.name in self.facts.optional:
                lines.append(f"{IN1}{decl.name} = {call} if _c[{json.dumps(decl.name)}] else None")
            else:
                lines.append(f"{IN1}{decl.name} = {call}")
        entries = []
        for a in self.fwd.arguments:
            if a.is_tensor:
                entries.append(f"{json.dumps(a.name)}: {a.name}")
            elif op.variant(a.name) is not None:
                entries.append(f"{json.dumps(a.name)}: _c[{json.dumps(a.name)}]")
            elif a.default is not None:
                entries.append(f"{json.dumps(a.name)}: _s.get({json.dumps(a.name)}, {a.default})")
            else:
                entries.append(f"{json.dumps(a.name)}: _s[{json.dumps(a.name)}]")
        lines.append(bracket("return {", entries, "}", IN1))
        return lines

    def test_dtypes(self):
        return self.op.tests.dtypes or self.op.primary.dtypes

    def incoming_grads(self) -> list[str]:
        op = self.op
        return [
            a.name
            for a in op.backward.schema.arguments
            if a.name.startswith("grad_") and op.output(a.name[5:]) is not None
        ]

    def backward_args(self) -> list[str]:
        """Body of ``backward_args(inputs, config, gen)``: the backward's arguments by name."""
        op = self.op
        bwd = op.backward.schema
        lines = []
        fwd_names = [r.name for r in self.fwd.returns]
        base = [o.name for o in op.outputs if not self.pair or o.name in fwd_names]
        args = "*(inputs[k] for k in ARG_NAMES)"
        if self.pair:
            wide = [o.name for o in op.outputs]
            lines.append(f"{IN1}if CONFIGS[config][FLAG]:")
            lines.append(f"{IN2}{', '.join(wide)} = _fwd_pair({args})")
            lines.append(f"{IN1}else:")
            lines.append(f"{IN2}{', '.join(base)} = _fwd({args})")
            for e in self.facts.pair_extras:
                lines.append(f"{IN2}{e} = None")
        else:
            lines.append(f"{IN1}{', '.join(base)} = _fwd({args})")
        entries = []
        for a in bwd.arguments:
            if a.name in self.incoming_grads():
                o = a.name[5:]
                grad = f"_t.randn(gen, {o}.shape, {o}.dtype)"
                if a.optional:
                    grad += f" if {o} is not None else None"
                entries.append(f"{json.dumps(a.name)}: {grad}")
            elif self.fwd.argument(a.name) is not None:
                entries.append(f"{json.dumps(a.name)}: inputs[{json.dumps(a.name)}]")
            else:
                entries.append(f"{json.dumps(a.name)}: {a.name}")
        lines.append(bracket("return {", entries, "}", IN1))
        return lines

    def backward_inputs(self) -> str:
        """Forward inputs the backward takes: the ones a permuted layout can be given there."""
        names = {a.name for a in self.op.backward.schema.arguments}
        return _tuple([d.name for d in self.op.inputs if d.name in names])

    def varlen_lines(self) -> list[str]:
        v = self.op.tests.varlen
        if v is None:
            return []
        idx = {}
        for decl in list(self.op.inputs) + list(self.op.outputs):
            for pos, e in enumerate(decl.shape.entries):
                if e != ELLIPSIS and e.name == v.dim:
                    idx[decl.name] = pos
        return [
            f"PACKED_DIM = {json.dumps(idx, sort_keys=False)}",
            f"PER_SEQUENCE = {_tuple(v.per_sequence) if v.per_sequence else '()'}",
            f"OFFSETS = {json.dumps(v.offsets)}",
        ]

    def samples(self) -> list[str]:
        lines = []
        for s in self.op.tests.samples:
            sid = sample_id(s, self.facts.dims)
            entries = [f'"batch": {tuple(s.batch)!r}'] if s.batch is not None else []
            entries += [f"{json.dumps(k)}: {_literal(v)}" for k, v in s.entries]
            lines.append(f"{IN1}{json.dumps(sid)}: {{{', '.join(entries)}}},")
        return lines

    def build(self) -> TestsView:
        op, t = self.op, self.op.tests
        dtypes = self.test_dtypes()
        tol, gtol = dict(t.tolerance), dict(t.grad_tolerance)
        public = [o.name for o in op.outputs if o.public]
        mutated = [d.name for d in op.inputs if d.mutated]
        return TestsView(
            op=op.name,
            package=self.spec.package,
            namespace=self.spec.namespace,
            reference_module=op.reference.split(":")[0],
            reference_fn=op.reference.split(":")[1],
            registered=op.integration is not Integration.EAGER,
            triton_op=op.integration is Integration.TRITON_OP,
            has_backward=op.backward is not None,
            cuda_graph=not op.dynamic_dims,
            has_gradients=op.backward is not None
            or (op.integration is Integration.EAGER and not mutated),
            has_pair=self.pair is not None,
            pair_suffix=self.pair.suffix if self.pair else "",
            flag=self.pair.flag if self.pair else None,
            dynamic=bool(op.dynamic_dims),
            seed=t.seed,
            samples=tuple(self.samples()),
            dtypes=tuple(f"{IN1}{json.dumps(d.short)}: torch.{d.torch_name}," for d in dtypes),
            tolerance=tuple(
                f"{IN1}{json.dumps(d.short)}: ({tol[d].atol!r}, {tol[d].rtol!r})," for d in dtypes
            ),
            grad_tolerance=tuple(
                f"{IN1}{json.dumps(d.short)}: ({gtol[d].atol!r}, {gtol[d].rtol!r})," for d in dtypes
            ),
            variants=tuple(self.variants()),
            optional=self.optional(),
            rejects=tuple(self.rejects()),
            make_inputs=tuple(self.make_inputs()),
            backward_args=tuple(self.backward_args()) if op.backward else (),
            backward_inputs=self.backward_inputs() if op.backward else "()",
            incoming_grads=_tuple(self.incoming_grads()) if op.backward else "()",
            public_outputs=_tuple(public),
            differentiable=self.differentiable(),
            mutated=_tuple(mutated) if mutated else "()",
            arg_names=_tuple([a.name for a in self.fwd.arguments]),
            compile_dtype=json.dumps(dtypes[0].short),
            varlen=t.varlen is not None,
            varlen_lines=tuple(self.varlen_lines()),
        )

    def rejects(self) -> list[str]:
        """argument -> how to break it: a wrong dtype, a wrong rank, a value outside a variant."""
        wrong_dtypes = ("float64", "int32", "bool")
        lines = []
        for decl in self.op.inputs:
            hows = []
            if decl.same_dtype_as is None:
                allowed = {d.torch_name for d in decl.dtypes}
                hows.append("dtype-" + next(d for d in wrong_dtypes if d not in allowed))
            else:
                hows.append("dtype-other")
            if not decl.shape.has_ellipsis:
                hows.append("rank-plus-one")
            elif decl.shape.min_rank >= 2:
                hows.append("rank-one")
            lines.append(f"{IN1}{json.dumps(decl.name)}: {_literal(tuple(hows))},")
        for v in self.op.variants:
            lines.append(f'{IN1}{json.dumps(v.arg)}: ("value",),')
        return lines

    def differentiable(self) -> str:
        op = self.op
        if op.backward is None and op.integration is not Integration.EAGER:
            return "()"
        names = [
            d.name
            for d in op.inputs
            if d.differentiable
            and not d.mutated
            and any(x.is_floating for x in (d.dtypes or op.primary.dtypes))
        ]
        return _tuple(names) if names else "()"


def tests_view(spec: Spec, op: Op, view: OpView | None = None) -> TestsView:
    return _Builder(spec, op).build()
