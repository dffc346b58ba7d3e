"""View model of a generated test module: samples, dtypes, layouts and input builders."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .dims import plan
from .layout import INDENT, bracket
from .model import Op, Sample, Spec
from .shapes import ELLIPSIS
from .views import OpView


@dataclass(frozen=True)
class TestsView:
    op: str
    package: str
    namespace: str
    public_fn: str
    reference_module: str
    reference_fn: str
    seed: int
    samples: tuple[str, ...]  # lines of the SAMPLES dict body
    dtypes: tuple[str, ...]
    tolerance: tuple[str, ...]
    grad_tolerance: tuple[str, ...]
    cases: tuple[str, ...]
    make_inputs: tuple[str, ...]
    call_args: str  # how the public function and ops take inputs
    fwd_args: str
    has_backward: bool
    bwd_args: tuple[str, ...]
    bwd_lines: tuple[str, ...]
    public_outputs: tuple[str, ...]
    differentiable: tuple[str, ...]
    tensor_inputs: tuple[str, ...]
    compile_samples: tuple[str, ...]
    compile_dtype: str
    arg_names: tuple[str, ...]

    @property
    def public_outputs_literal(self) -> str:
        return _tuple_literal(self.public_outputs)

    @property
    def arg_names_literal(self) -> str:
        return _tuple_literal(self.arg_names)

    @property
    def differentiable_literal(self) -> str:
        return _tuple_literal(self.differentiable)


def _tuple_literal(names: tuple[str, ...]) -> str:
    if len(names) == 1:
        return f"({json.dumps(names[0])},)"
    return "(" + ", ".join(json.dumps(n) for n in names) + ")"


def sample_id(sample: Sample) -> str:
    parts = []
    if sample.batch is not None:
        parts.append("batch" + ("x".join(str(b) for b in sample.batch) if sample.batch else "0"))
    parts.extend(f"{k}{v}" for k, v in sample.sizes)
    return "-".join(parts)


def _shape_sizes(shape, sample: Sample) -> list[int]:
    env = sample.env()
    sizes = []
    for entry in shape.entries:
        if entry == ELLIPSIS:
            sizes.extend(sample.batch or ())
        else:
            sizes.append(entry.evaluate(env))
    return sizes


def permutable(sizes: list[int]) -> bool:
    """A dense permuted copy differs from a compact one only with two dims of size > 1."""
    return sum(1 for s in sizes if s > 1) >= 2


def tests_view(spec: Spec, op: Op, view: OpView) -> TestsView:
    p = plan(op)
    t = op.tests
    fwd = op.forward.schema
    first = next(d for d in op.inputs if d.dtypes)
    dtypes = t.dtypes or first.dtypes
    tol = dict(t.tolerance)
    gtol = dict(t.grad_tolerance)
    samples = []
    cases = []
    ids = []
    for s in t.samples:
        sid = sample_id(s)
        ids.append(sid)
        entries = [f'"batch": {tuple(s.batch)!r}'] if s.batch is not None else []
        entries += [f"{json.dumps(k)}: {v}" for k, v in s.sizes]
        samples.append(f"{INDENT}{json.dumps(sid)}: {{{', '.join(entries)}}},")
        layouts = ["compact"]
        for decl in op.inputs:
            if permutable(_shape_sizes(decl.shape, s)):
                layouts.append(f"permuted-{decl.name}")
        for dt in dtypes:
            for layout in layouts:
                cases.append(
                    f'{INDENT}pytest.param({json.dumps(sid)}, {json.dumps(dt.short)}, {json.dumps(layout)}, id="{dt.short}-{sid}-{layout}"),'
                )
    make = []
    for decl in op.inputs:
        parts = []
        for entry in decl.shape.entries:
            if entry == ELLIPSIS:
                parts.append('*s["batch"]')
            else:
                parts.append(entry.render({n: f"s[{json.dumps(n)}]" for n in entry.names}))
        shape = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if decl.same_dtype_as is not None:
            dtype = "dtype"
        elif set(decl.dtypes) >= set(dtypes):
            dtype = "dtype"
        else:
            dtype = f"torch.{decl.dtypes[0].torch_name}"
        make.append(bracket(f"{decl.name} = randn(", ["gen", shape, dtype], ")", INDENT))
    for decl in op.inputs:
        make.append(f'{INDENT}if layout == "permuted-{decl.name}":')
        make.append(f"{INDENT * 2}{decl.name} = dense_permuted({decl.name})")
    scalars = [a for a in fwd.arguments if not a.is_tensor]
    names = [d.name for d in op.inputs]
    entries = [f"{json.dumps(n)}: {n}" for n in names] + [f"{json.dumps(a.name)}: {a.default}" for a in scalars]
    make.append(bracket("return {", entries, "}", INDENT))
    bwd_lines: list[str] = []
    bwd_args: tuple[str, ...] = ()
    if op.backward is not None:
        bwd = op.backward.schema
        outs = ", ".join(o.name for o in op.outputs)
        bwd_lines.append(f"{INDENT}{outs} = _fwd(*(inputs[k] for k in ARG_NAMES))")
        for a in bwd.arguments:
            if a.name.startswith("grad_") and op.output(a.name[5:]) is not None:
                bwd_lines.append(f"{INDENT}{a.name} = randn(gen, {a.name[5:]}.shape, {a.name[5:]}.dtype)")
        args = []
        for a in bwd.arguments:
            if a.name in {d.name for d in op.inputs} or not a.is_tensor and fwd.argument(a.name):
                args.append(f'inputs["{a.name}"]')
            else:
                args.append(a.name)
        bwd_args = tuple(args)
        bwd_lines.append(bracket("args = [", args, "]", INDENT))
        bwd_lines.append(f'{INDENT}if layout != "compact":')
        bwd_lines.append(f"{INDENT * 2}args = [dense_permuted(a) if can_permute(a) else a for a in args]")
    public = tuple(o.name for o in op.outputs if o.public)
    diff = tuple(d.name for d in op.inputs if d.differentiable) if op.backward else ()
    module, fn = op.reference.split(":")
    return TestsView(
        op=op.name,
        package=spec.package,
        namespace=spec.namespace,
        public_fn=op.name,
        reference_module=module,
        reference_fn=fn,
        seed=t.seed,
        samples=tuple(samples),
        dtypes=tuple(f"{INDENT}{json.dumps(d.short)}: torch.{d.torch_name}," for d in dtypes),
        tolerance=tuple(f"{INDENT}{json.dumps(d.short)}: ({tol[d].atol!r}, {tol[d].rtol!r})," for d in dtypes),
        grad_tolerance=tuple(f"{INDENT}{json.dumps(d.short)}: ({gtol[d].atol!r}, {gtol[d].rtol!r})," for d in dtypes),
        cases=tuple(cases),
        make_inputs=tuple(make),
        call_args="**inputs",
        fwd_args="**inputs",
        has_backward=op.backward is not None,
        bwd_args=bwd_args,
        bwd_lines=tuple(bwd_lines),
        public_outputs=public,
        differentiable=diff,
        tensor_inputs=tuple(names),
        compile_samples=tuple(json.dumps(i) for i in ids[:2]),
        compile_dtype=json.dumps(dtypes[0].short),
        arg_names=tuple(a.name for a in fwd.arguments),
    )
