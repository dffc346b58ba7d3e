"""View models: everything a template prints, computed here.

Templates only lay out fields of these objects and loop over them; any decision (names, checks,
signatures, line wrapping) is made in Python where it can be tested.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass

from .dims import DimPlan, TensorPlan, plan
from .layout import INDENT, bracket
from .model import DType, Launcher, Op, OutputDecl, Shape, Spec, Stage
from .names import camel
from .shapes import ELLIPSIS


@dataclass(frozen=True)
class ImplView:
    name: str  # generated impl function
    signature: str  # full "def ...:" line(s)
    ref: str  # module:function
    call: str  # return line body
    devices: tuple[str, ...]  # dispatch keys, e.g. ("CUDA", "CPU")


@dataclass(frozen=True)
class StageView:
    qualname: str
    define: str  # the torch.library.define(...) statement
    binding: str  # module-level name bound to torch.ops...default
    binding_line: str
    impls: tuple[ImplView, ...]
    fake_name: str
    fake_signature: str
    fake_body: tuple[str, ...]


@dataclass(frozen=True)
class OpView:
    name: str
    module: str
    doc_summary: str
    forward: StageView
    backward: StageView | None
    function_class: str
    fn_forward_signature: str
    fn_forward_body: tuple[str, ...]
    fn_backward_signature: str
    fn_backward_body: tuple[str, ...]
    result_class: str
    result_fields: tuple[str, ...]
    public_signature: str
    docstring: str
    checks: tuple[str, ...]
    constants: tuple[str, ...]
    call_lines: tuple[str, ...]
    exports: tuple[str, ...]

    @property
    def stages(self) -> tuple[StageView, ...]:
        return (self.forward,) if self.backward is None else (self.forward, self.backward)


def _shape_expr(shape: Shape, rename: dict[str, str], batch: str | None) -> str:
    parts = []
    for entry in shape.entries:
        if entry == ELLIPSIS:
            parts.append(f"*{batch}")
        else:
            parts.append(entry.render(rename))
    if len(parts) == 1:
        return f"({parts[0]},)"
    return "(" + ", ".join(parts) + ")"


def _index(idx: int) -> str:
    return str(idx)


def _batch_slice(t: TensorPlan) -> str:
    before, after = len(t.shape.before), len(t.shape.after)
    start = str(before) if before else ""
    stop = f"-{after}" if after else ""
    return f"{t.name}.shape[{start}:{stop}]"


def _dtype_literal(dt: DType) -> str:
    return f"torch.{dt.torch_name}"


def _fmt_shape_hint(shape: Shape) -> str:
    return str(shape)


class _OpViewBuilder:
    def __init__(self, spec: Spec, op: Op) -> None:
        self.spec = spec
        self.op = op
        self.plan: DimPlan = plan(op)
        self.ns = spec.namespace

    def impls(self, stage: Stage, base: str) -> tuple[ImplView, ...]:
        by_ref: dict[str, list[Launcher]] = {}
        for launcher in stage.launchers:
            by_ref.setdefault(launcher.ref, []).append(launcher)
        schema = stage.schema
        params = _params(schema)
        ret = _return_annotation(len(schema.returns))
        args = [a.name for a in schema.arguments]
        views = []
        for ref, launchers in by_ref.items():
            suffix = launchers[0].device if len(by_ref) > 1 else "impl"
            name = f"_{base}_{suffix}"
            views.append(
                ImplView(
                    name=name,
                    signature=bracket(f"def {name}(", params, f") -> {ret}:"),
                    ref=ref,
                    call=bracket(f"return _launcher({json.dumps(ref)})(", args, ")", indent=INDENT),
                    devices=tuple(launcher.device.upper() for launcher in launchers),
                )
            )
        return tuple(views)

    def stage(self, stage: Stage, kind: str) -> StageView:
        op = self.op
        base = f"{op.name}_{kind}"
        qualname = f"{self.ns}::{base}"
        define = bracket(
            "torch.library.define(", [json.dumps(qualname), json.dumps(stage.schema.text)], ")"
        )
        binding = f"_{base}"
        schema = stage.schema
        params = _params(schema)
        ret = _return_annotation(len(schema.returns))
        fake_name = f"_{base}_fake"
        fake_sig = bracket(f"def {fake_name}(", params, f") -> {ret}:")
        body = self.forward_fake() if kind == "fwd" else self.backward_fake(stage)
        return StageView(
            qualname=qualname,
            define=define,
            binding=binding,
            binding_line=f"{binding} = torch.ops.{self.ns}.{base}.default",
            impls=self.impls(stage, base),
            fake_name=fake_name,
            fake_signature=fake_sig,
            fake_body=tuple(body),
        )

    def _bind_lines(self, needed: set[str], batch_needed: bool) -> list[str]:
        lines = []
        if batch_needed and self.plan.batch_source is not None:
            src = next(t for t in self.plan.tensors if t.binds_batch)
            lines.append(f"{INDENT}batch = {_batch_slice(src)}")
        for name, b in self.plan.bound.items():
            if name in needed:
                lines.append(f"{INDENT}{name} = {b.tensor}.shape[{_index(b.index)}]")
        return lines

    def _alloc_base(self) -> str:
        return next(t.name for t in self.plan.tensors if not t.optional)

    def _dtype_kw(self, dtype: DType | None, dtype_of: str | None) -> str:
        if dtype is not None:
            return f", dtype={_dtype_literal(dtype)}"
        base = self._alloc_base()
        if dtype_of != base:
            return f", dtype={dtype_of}.dtype"
        return ""

    def forward_fake(self) -> list[str]:
        needed: set[str] = set()
        batch = False
        for out in self.op.outputs:
            batch |= out.shape.has_ellipsis
            for e in out.shape.entries:
                if e != ELLIPSIS:
                    needed.update(e.names)
        lines = self._bind_lines(needed, batch)
        base = self._alloc_base()
        for out in self.op.outputs:
            shape = _shape_expr(out.shape, {}, "batch")
            lines.append(
                bracket(f"{out.name} = {base}.new_empty(", [shape + self._dtype_kw(out.dtype, out.dtype_of)], ")", INDENT)
            )
        lines.append(f"{INDENT}return " + ", ".join(o.name for o in self.op.outputs))
        return lines

    def backward_fake(self, stage: Stage) -> list[str]:
        lines = []
        names = []
        for ret in stage.schema.returns:
            target = ret.name[len("grad_") :]
            lines.append(f"{INDENT}{ret.name} = {target}.new_empty({target}.shape)")
            names.append(ret.name)
        lines.append(f"{INDENT}return " + ", ".join(names))
        return lines

    def build(self) -> OpView:
        op = self.op
        fwd_schema = op.forward.schema
        cls = camel(op.name)
        public = [o for o in op.outputs if o.public]
        result_class = f"{cls}Output"
        function_class = f"_{cls}Function"
        args = [a.name for a in fwd_schema.arguments]
        forward = self.stage(op.forward, "fwd")
        backward = self.stage(op.backward, "bwd") if op.backward else None

        # autograd.Function
        fn_fwd_params = ["ctx"] + [f"{a.name}: {a.annotation}" for a in fwd_schema.arguments]
        fn_ret = "Tensor" if len(public) == 1 else "tuple[" + ", ".join("Tensor" for _ in public) + "]"
        fn_forward_signature = bracket("def forward(", fn_fwd_params, f") -> {fn_ret}:", INDENT)
        outs = ", ".join(o.name for o in op.outputs)
        in2 = INDENT * 2
        body = [bracket(f"{outs} = {forward.binding}(", args, ")", in2)]
        fn_backward_signature = ""
        fn_backward_body: list[str] = []
        if backward is not None:
            bwd = op.backward.schema
            saved = [a.name for a in bwd.arguments if a.is_tensor and not a.name.startswith("grad_")]
            scalars = [a.name for a in bwd.arguments if not a.is_tensor and not a.name.startswith("grad_")]
            if saved:
                body.append(bracket("ctx.save_for_backward(", saved, ")", in2))
            for s in scalars:
                body.append(f"{in2}ctx.{s} = {s}")
            grads_in = [f"grad_{o.name}: Tensor" for o in public]
            fn_backward_signature = bracket(
                "def backward(", ["ctx"] + grads_in, f") -> {_grad_annotation(len(args))}:", INDENT
            )
            if saved:
                fn_backward_body.append(f"{in2}{', '.join(saved)}{',' if len(saved) == 1 else ''} = ctx.saved_tensors")
            for s in scalars:
                fn_backward_body.append(f"{in2}{s} = ctx.{s}")
            rets = [r.name for r in bwd.returns]
            bwd_args = [a.name for a in bwd.arguments]
            fn_backward_body.append(bracket(f"{', '.join(rets)} = {backward.binding}(", bwd_args, ")", in2))
            results = []
            for a in fwd_schema.arguments:
                results.append(f"grad_{a.name}" if f"grad_{a.name}" in rets else "None")
            fn_backward_body.append(f"{in2}return " + ", ".join(results))
        body.append(f"{in2}return " + ", ".join(o.name for o in public))

        # public function
        sig_params = _params(fwd_schema)
        public_signature = bracket(f"def {op.name}(", sig_params, f") -> {result_class}:")
        checks, constants = self.checks()
        if backward is not None:
            call_lines = [bracket(f"{', '.join(o.name for o in public)} = {function_class}.apply(", args, ")", INDENT)]
        else:
            call_lines = [bracket(f"{outs} = {forward.binding}(", args, ")", INDENT)]
        call_lines.append(f"{INDENT}return {result_class}({', '.join(o.name for o in public)})")
        return OpView(
            name=op.name,
            module=op.name,
            doc_summary=op.doc.splitlines()[0] if op.doc else op.name,
            forward=forward,
            backward=backward,
            function_class=function_class,
            fn_forward_signature=fn_forward_signature,
            fn_forward_body=tuple(body),
            fn_backward_signature=fn_backward_signature,
            fn_backward_body=tuple(fn_backward_body),
            result_class=result_class,
            result_fields=tuple(f"{o.name}: Tensor" for o in public),
            public_signature=public_signature,
            docstring=_docstring(self.docstring(public)),
            checks=tuple(checks),
            constants=tuple(constants),
            call_lines=tuple(call_lines),
            exports=tuple(sorted((op.name, result_class), key=import_order)),
        )

    def docstring(self, public: list[OutputDecl]) -> list[str]:
        op = self.op
        lines = op.doc.splitlines() if op.doc else [op.name]
        lines = [ln.rstrip() for ln in lines]
        lines.append("")
        lines.append("Args:")
        for a in op.forward.schema.arguments:
            decl = op.input(a.name)
            if decl is not None:
                dtypes = (
                    f"dtype of ``{decl.same_dtype_as}``"
                    if decl.same_dtype_as
                    else " | ".join(d.torch_name for d in decl.dtypes)
                )
                opt = ", optional" if a.optional else ""
                lines.append(f"{INDENT}{a.name}: ``{decl.shape}``, {dtypes}{opt}.")
            else:
                default = f" Default: ``{a.default}``." if a.default is not None else ""
                lines.append(f"{INDENT}{a.name}: ``{a.type}``.{default}")
        lines.append("")
        lines.append("Returns:")
        lines.append(f"{INDENT}{camel(op.name)}Output with")
        for o in public:
            dtype = o.dtype.torch_name if o.dtype else f"dtype of ``{o.dtype_of}``"
            lines.append(f"{INDENT * 2}{o.name}: ``{o.shape}``, {dtype}.")
        wrapped = []
        for ln in lines:
            if len(ln) + 4 > 100:
                indent = ln[: len(ln) - len(ln.lstrip())]
                wrapped.extend(textwrap.wrap(ln, width=96, subsequent_indent=indent + INDENT))
            else:
                wrapped.append(ln)
        return wrapped

    def checks(self) -> tuple[list[str], list[str]]:
        op = self.op
        lines: list[str] = []
        constants: list[str] = []
        devices = sorted({launcher.device for launcher in op.forward.launchers} | {"meta"})
        dev_const = f"_{op.name.upper()}_DEVICES"
        constants.append(f"{dev_const} = ({', '.join(json.dumps(d) for d in devices)})")
        first = None
        for t in self.plan.tensors:
            decl = op.input(t.name)
            ind = INDENT * (2 if t.optional else 1)
            inner: list[str] = []

            def fail(cond: str, exc: str, message: str) -> None:
                inner.append(f"{ind}if {cond}:")
                inner.append(bracket(f"raise {exc}(", [f'f"{op.name}: {message}"'], ")", indent=ind + INDENT))

            name = t.name
            if decl.same_dtype_as is None:
                const = f"_{op.name.upper()}_{name.upper()}_DTYPES"
                items = ", ".join(_dtype_literal(d) for d in decl.dtypes)
                constants.append(f"{const} = ({items}{',' if len(decl.dtypes) == 1 else ''})")
                allowed = ", ".join(d.torch_name for d in decl.dtypes)
                fail(f"{name}.dtype not in {const}", "TypeError", f"expected {name} to have dtype {allowed}, got {{{name}.dtype}}")
            else:
                other = decl.same_dtype_as
                fail(
                    f"{name}.dtype != {other}.dtype",
                    "TypeError",
                    f"expected {name} to have the dtype of {other} ({{{other}.dtype}}), got {{{name}.dtype}}",
                )
            shape = t.shape
            got = f"got shape {{tuple({name}.shape)}}"
            if shape.has_ellipsis:
                fail(f"{name}.ndim < {shape.min_rank}", "ValueError", f"expected {name} of shape {shape} (at least {shape.min_rank} dims), {got}")
            else:
                fail(f"{name}.ndim != {shape.min_rank}", "ValueError", f"expected {name} of shape {shape}, {got}")
            if first is None and not t.optional:
                fail(
                    f"{name}.device.type not in {dev_const}",
                    "ValueError",
                    f"{name} is on {{{name}.device}}; supported devices: {', '.join(devices)}",
                )
            elif first is not None:
                fail(f"{name}.device != {first}.device", "ValueError", f"expected {name} on {{{first}.device}} like {first}, got {{{name}.device}}")
            for b in t.bindings:
                inner.append(f"{ind}{b.dim} = {name}.shape[{b.index}]")
            for c in t.checks:
                want = c.expr.render({})
                fail(f"{name}.shape[{c.index}] != {want}", "ValueError", f"expected {name}.shape[{c.index}] == {c.expr.text} ({{{want}}}), {got}")
            if t.binds_batch:
                inner.append(f"{ind}batch = {_batch_slice(t)}")
            if t.checks_batch:
                fail(
                    f"{_batch_slice(t)} != batch",
                    "ValueError",
                    f"expected the leading dims of {name} to equal those of {self.plan.batch_source} ({{tuple(batch)}}), {got}",
                )
            if t.optional:
                lines.append(f"{INDENT}if {name} is not None:")
            else:
                first = first or name
            lines.extend(inner)
        return _drop_unused_bindings(lines), constants


def import_order(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _docstring(lines: list[str]) -> str:
    """The indented body of a function docstring, first line right after the quotes."""
    out = [lines[0]] + [f"{INDENT}{ln}" if ln else "" for ln in lines[1:]]
    return "\n".join(out) + f"\n{INDENT}"


def _drop_unused_bindings(lines: list[str]) -> list[str]:
    """Drop ``name = ...`` lines whose name no later line reads (ruff F841)."""
    kept = []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*) = .*", line)
        if m and not any(re.search(rf"\b{m.group(1)}\b", later) for later in lines[i + 1 :]):
            continue
        kept.append(line)
    return kept


def _params(schema) -> list[str]:
    """Python parameters for a schema, defaults included.

    Note [kernel defaults]: the dispatcher leaves out trailing arguments that equal their
    schema default when it calls a Python kernel or fake, so every generated function taking
    schema arguments repeats the defaults.
    """
    params = []
    for a in schema.arguments:
        text = f"{a.name}: {a.annotation}"
        if a.default is not None:
            text += f" = {a.default}"
        params.append(text)
    kw_index = next((i for i, a in enumerate(schema.arguments) if a.kwarg_only), None)
    if kw_index is not None:
        params.insert(kw_index, "*")
    return params


def _return_annotation(n: int) -> str:
    if n == 1:
        return "Tensor"
    return "tuple[" + ", ".join("Tensor" for _ in range(n)) + "]"


def _grad_annotation(n: int) -> str:
    return "tuple[Tensor | None, ...]"


@dataclass(frozen=True)
class PackageView:
    namespace: str
    package: str
    ops: tuple[OpView, ...]
    exports: tuple[str, ...]


def package_view(spec: Spec) -> PackageView:
    ops = tuple(_OpViewBuilder(spec, op).build() for op in spec.ops)
    exports = tuple(sorted((name for op in ops for name in op.exports), key=import_order))
    return PackageView(spec.namespace, spec.package, ops, exports)
