"""View model of a generated test module: samples, configs, cases and input builders."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from ..emit.layout import INDENT, bracket
from ..resolve.dims import plan
from ..resolve.samples import sample_dims
from ..spec.model import Integration, Op, Sample, Spec
from ..spec.shapes import ELLIPSIS
from .op_module import OpView

IN1, IN2 = INDENT, INDENT * 2


@dataclass(frozen=True)
class TestsView:
    op: str
    invalid_cases: tuple[str, ...]
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
    configs: tuple[str, ...]
    default_config: str
    cases: tuple[str, ...]
    make_inputs: tuple[str, ...]
    bwd_lines: tuple[str, ...]
    public_outputs: str
    differentiable: str
    mutated: str
    arg_names: str
    compile_cases: tuple[str, ...]
    compile_dtype: str
    varlen: bool
    varlen_lines: tuple[str, ...]
    varlen_samples: tuple[str, ...]

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


def permutable(sizes: list[int]) -> bool:
    """A dense permuted copy differs from a compact one only with two dims of size > 1."""
    return sum(1 for s in sizes if s > 1) >= 2


class _Builder:
    def __init__(self, spec: Spec, op: Op, view: OpView) -> None:
        self.spec, self.op, self.view = spec, op, view
        self.plan = plan(op)
        self.fwd = op.forward.schema
        self.optional = [a.name for a in self.fwd.arguments if a.is_tensor and a.optional]
        self.pair = op.arity_pair
        self.dims = sample_dims(op)

    def literal_inputs(self) -> set[str]:
        return {
            d.name
            for d in self.op.inputs
            if any(isinstance(s.get(d.name), tuple) for s in self.op.tests.samples)
        }

    def configs(self) -> list[tuple[str, dict]]:
        axes: list[list[tuple[str, str, object]]] = []
        for v in self.op.variants:
            axes.append([(str(x), v.arg, x) for x in v.values])
        literal = self.literal_inputs()
        for name in self.optional:
            if name not in literal:
                axes.append([(name, name, True), (f"no_{name}", name, False)])
        if self.pair:
            axes.append(
                [
                    (self.pair.flag, self.pair.flag, True),
                    (f"no_{self.pair.flag}", self.pair.flag, False),
                ]
            )
        out = []
        for combo in itertools.product(*axes) if axes else [()]:
            cid = "-".join(part[0] for part in combo) or "default"
            out.append((cid, {key: value for _, key, value in combo}))
        return out

    def sizes(self, decl, sample: Sample, config: dict) -> list[int] | None:
        if isinstance(sample.get(decl.name), tuple):
            return [len(sample.get(decl.name))]
        env = sample.env()
        tensors = {}
        for d in self.op.inputs:
            lit = sample.get(d.name)
            if isinstance(lit, tuple):
                tensors[d.name] = (len(lit),)
            elif d.name in self.optional:
                tensors[d.name] = () if self.present(d.name, sample, config) else None
            else:
                tensors[d.name] = ()
        for d in self.op.dims:
            env[d.name] = d.expr.evaluate(env, tensors)
        sizes = []
        for e in decl.shape.entries:
            if e == ELLIPSIS:
                sizes.extend(sample.batch or ())
            else:
                sizes.append(e.evaluate(env, tensors))
        return sizes

    def present(self, name: str, sample: Sample, config: dict) -> bool:
        if isinstance(sample.get(name), tuple):
            return True
        if name in self.literal_inputs():
            return False
        return config.get(name, True)

    def make_inputs(self) -> list[str]:
        op = self.op
        lines = [
            f"{IN1}_s = SAMPLES[_sample]",
            f"{IN1}_c = CONFIGS[_config]",
            f"{IN1}_dt = DTYPES[_dtype]",
        ]
        lines.append(f"{IN1}_gen = torch.Generator().manual_seed(SEED)")
        if self.plan.batch_source is not None:
            lines.append(f'{IN1}batch = _s["batch"]')
        for name in sorted(self.dims, key=list(self.plan.bound).index):
            lines.append(f"{IN1}{name} = _s[{json.dumps(name)}]")
        literal = self.literal_inputs()
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
            maker = decl.init
            if decl.name in self.optional:
                lines.append(f"{IN1}{decl.name} = None")
                lines.append(f"{IN1}if _c[{json.dumps(decl.name)}]:")
                lines.append(
                    bracket(f"{decl.name} = _t.{maker}(", ["_gen", shape, dtype], ")", IN2)
                )
            else:
                lines.append(
                    bracket(f"{decl.name} = _t.{maker}(", ["_gen", shape, dtype], ")", IN1)
                )
        for decl in op.inputs:
            lines.append(f'{IN1}if _layout == "permuted-{decl.name}":')
            lines.append(f"{IN2}{decl.name} = _t.dense_permuted({decl.name})")
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

    def bwd_lines(self) -> list[str]:
        op = self.op
        bwd = op.backward.schema
        lines = [f"{IN1}c = CONFIGS[config]"] if self.pair else []
        base = [
            o.name
            for o in op.outputs
            if not self.pair or o.name in [r.name for r in self.fwd.returns]
        ]
        args = "*(inputs[k] for k in ARG_NAMES)"
        if self.pair:
            wide = [o.name for o in op.outputs]
            lines.append(f"{IN1}if c[FLAG]:")
            lines.append(f"{IN2}{', '.join(wide)} = _fwd_pair({args})")
            lines.append(f"{IN1}else:")
            lines.append(f"{IN2}{', '.join(base)} = _fwd({args})")
            extras = [r.name for r in self.pair.schema.returns[len(self.fwd.returns) :]]
            for e in extras:
                lines.append(f"{IN2}{e} = None")
        else:
            lines.append(f"{IN1}{', '.join(base)} = _fwd({args})")
        call_args = []
        for a in bwd.arguments:
            if a.name.startswith("grad_") and op.output(a.name[5:]) is not None:
                o = a.name[5:]
                if a.optional:
                    lines.append(f"{IN1}{a.name} = None")
                    lines.append(f"{IN1}if {o} is not None:")
                    lines.append(f"{IN2}{a.name} = _t.randn(gen, {o}.shape, {o}.dtype)")
                else:
                    lines.append(f"{IN1}{a.name} = _t.randn(gen, {o}.shape, {o}.dtype)")
                call_args.append(a.name)
            elif self.fwd.argument(a.name) is not None:
                call_args.append(f"inputs[{json.dumps(a.name)}]")
            else:
                call_args.append(a.name)
        lines.append(bracket("args = [", call_args, "]", IN1))
        return lines

    def varlen_lines(self) -> tuple[list[str], list[str]]:
        v = self.op.tests.varlen
        if v is None:
            return [], []
        idx = {}
        for decl in list(self.op.inputs) + list(self.op.outputs):
            for pos, e in enumerate(decl.shape.entries):
                if e != ELLIPSIS and e.name == v.dim:
                    idx[decl.name] = pos
        lines = [
            f"PACKED_DIM = {json.dumps(idx, sort_keys=False)}",
            f"PER_SEQUENCE = {_tuple(v.per_sequence) if v.per_sequence else '()'}",
            f"OFFSETS = {json.dumps(v.offsets)}",
        ]
        dims = self.dims
        samples = [
            json.dumps(sample_id(s, dims))
            for s in self.op.tests.samples
            if isinstance(s.get(v.offsets), tuple)
        ]
        return lines, samples

    def build(self) -> TestsView:
        op, t = self.op, self.op.tests
        dtypes = self.test_dtypes()
        tol, gtol = dict(t.tolerance), dict(t.grad_tolerance)
        configs = self.configs()
        default_id = next(
            (
                cid
                for cid, c in configs
                if all(c.get(n, True) for n in self.optional)
                and (not self.pair or c[self.pair.flag])
            ),
            configs[0][0],
        )
        default_cfg = dict(configs)[default_id]
        samples, cases, compile_cases = [], [], []
        first_sample = None
        for s in t.samples:
            sid = sample_id(s, self.dims)
            first_sample = first_sample or (s, sid)
            entries = [f'"batch": {tuple(s.batch)!r}'] if s.batch is not None else []
            entries += [f"{json.dumps(k)}: {_literal(v)}" for k, v in s.entries]
            samples.append(bracket(f"{json.dumps(sid)}: {{", entries, "},", IN1))
            permuted = [
                d.name
                for d in op.inputs
                if self.present(d.name, s, default_cfg)
                and permutable(self.sizes(d, s, default_cfg))
            ]
            for dt in dtypes:
                for cid, _ in configs:
                    cases.append((sid, dt.short, "compact", cid))
                for name in permuted:
                    cases.append((sid, dt.short, f"permuted-{name}", default_id))
        case_lines = [
            bracket(
                "pytest.param(",
                [
                    json.dumps(sid),
                    json.dumps(dt),
                    json.dumps(lay),
                    json.dumps(cid),
                    f"id={json.dumps(f'{dt}-{sid}-{lay}-{cid}')}",
                ],
                "),",
                IN1,
            )
            for sid, dt, lay, cid in cases
        ]
        # compile: every config on the first sample, plus the second sample for dynamic reuse
        sids = [sample_id(s, self.dims) for s in t.samples]
        pairs = [(sids[0], cid) for cid, _ in configs]
        if len(sids) > 1:
            pairs.append((sids[1], default_id))
        for sid, cid in pairs:
            compile_cases.append(
                bracket(
                    "pytest.param(",
                    [json.dumps(sid), json.dumps(cid), f"id={json.dumps(f'{sid}-{cid}')}"],
                    "),",
                    IN1,
                )
            )
        config_lines = [
            f"{IN1}{json.dumps(cid)}: {{{', '.join(f'{json.dumps(k)}: {_literal(v)}' for k, v in c.items())}}},"
            for cid, c in configs
        ]
        vlines, vsamples = self.varlen_lines()
        public = [o.name for o in op.outputs if o.public]
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
            or (op.integration is Integration.EAGER and not any(d.mutated for d in op.inputs)),
            has_pair=self.pair is not None,
            pair_suffix=self.pair.suffix if self.pair else "",
            flag=self.pair.flag if self.pair else None,
            dynamic=bool(op.dynamic_dims),
            seed=t.seed,
            samples=tuple(samples),
            dtypes=tuple(f"{IN1}{json.dumps(d.short)}: torch.{d.torch_name}," for d in dtypes),
            tolerance=tuple(
                f"{IN1}{json.dumps(d.short)}: ({tol[d].atol!r}, {tol[d].rtol!r})," for d in dtypes
            ),
            grad_tolerance=tuple(
                f"{IN1}{json.dumps(d.short)}: ({gtol[d].atol!r}, {gtol[d].rtol!r})," for d in dtypes
            ),
            configs=tuple(config_lines),
            default_config=json.dumps(default_id),
            cases=tuple(case_lines),
            make_inputs=tuple(self.make_inputs()),
            bwd_lines=tuple(self.bwd_lines()) if op.backward else (),
            public_outputs=_tuple(public),
            differentiable=self.differentiable(),
            mutated=_tuple([d.name for d in op.inputs if d.mutated])
            if any(d.mutated for d in op.inputs)
            else "()",
            arg_names=_tuple([a.name for a in self.fwd.arguments]),
            compile_cases=tuple(compile_cases),
            compile_dtype=json.dumps(dtypes[0].short),
            invalid_cases=tuple(self.invalid_cases()),
            varlen=t.varlen is not None,
            varlen_lines=tuple(vlines),
            varlen_samples=tuple(vsamples),
        )

    def invalid_cases(self) -> list[str]:
        """(argument, how to break it): a wrong dtype, a wrong rank, a value outside a variant."""
        cases = []
        wrong_dtypes = ("float64", "int32", "bool")
        default = self.configs()[0][1] | {n: True for n in self.optional}
        samples = self.op.tests.samples
        first = sample_id(samples[0], self.dims)
        where = {
            d.name: next(
                (sample_id(s, self.dims) for s in samples if self.present(d.name, s, default)),
                first,
            )
            for d in self.op.inputs
        }
        for decl in self.op.inputs:
            if decl.same_dtype_as is None:
                allowed = {d.torch_name for d in decl.dtypes}
                bad = next(d for d in wrong_dtypes if d not in allowed)
                cases.append((decl.name, f"dtype-{bad}"))
            else:
                cases.append((decl.name, "dtype-other"))
            if not decl.shape.has_ellipsis:
                cases.append((decl.name, "rank-plus-one"))
            elif decl.shape.min_rank >= 2:
                cases.append((decl.name, "rank-one"))
        for v in self.op.variants:
            cases.append((v.arg, "value"))
        return [
            bracket(
                "pytest.param(",
                [
                    json.dumps(where.get(a, first)),
                    json.dumps(a),
                    json.dumps(how),
                    f"id={json.dumps(f'{a}-{how}')}",
                ],
                "),",
                IN2,
            )
            for a, how in cases
        ]

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


def tests_view(spec: Spec, op: Op, view: OpView) -> TestsView:
    return _Builder(spec, op, view).build()
