"""View models: everything a template prints, computed here.

Templates only lay out fields of these objects and loop over them; any decision (names, checks,
signatures, line wrapping) is made in Python where it can be tested. Lines carry their own
indentation so that ``layout.bracket`` can wrap them exactly as ``ruff format`` would.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass

from ..emit.layout import INDENT, bracket
from ..resolve.dims import DimPlan, TensorPlan, bind_from, plan
from ..spec.model import DType, Integration, Launcher, Op, OutputDecl, Shape, Spec, Stage
from ..spec.names import camel
from ..spec.schema import Schema
from ..spec.shapes import ELLIPSIS

IN1, IN2, IN3 = INDENT, INDENT * 2, INDENT * 3


@dataclass(frozen=True)
class ImplView:
    name: str
    signature: str
    body: tuple[str, ...]
    devices: tuple[str, ...]  # dispatch keys, e.g. ("CUDA", "CPU")
    preload: str  # module-level launcher resolution (eager integration), or ""


@dataclass(frozen=True)
class StageView:
    qualname: str
    define: str
    binding: str
    binding_line: str
    impls: tuple[ImplView, ...]
    registration: tuple[str, ...]  # torch.library.impl(...) / triton_op(...) statements
    fake_name: str
    fake_signature: str
    fake_body: tuple[str, ...]


@dataclass(frozen=True)
class OpView:
    name: str
    module: str
    doc_summary: str
    registered: bool  # opaque or triton_op: operators exist in torch.ops
    opaque: bool
    stages: tuple[StageView, ...]
    function_class: str
    has_function: bool
    fn_forward: tuple[str, ...]
    fn_backward: tuple[str, ...]
    result_class: str
    result_fields: tuple[str, ...]
    public_signature: str
    docstring: str
    checks: tuple[str, ...]
    constants: tuple[str, ...]
    call_lines: tuple[str, ...]
    exports: tuple[str, ...]


def import_order(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _shape_expr(shape: Shape, batch: str | None) -> str:
    parts = [f"*{batch}" if e == ELLIPSIS else e.render({}) for e in shape.entries]
    if len(parts) == 1:
        return f"({parts[0]},)"
    return "(" + ", ".join(parts) + ")"


def _batch_slice(t: TensorPlan) -> str:
    before, after = len(t.shape.before), len(t.shape.after)
    start = str(before) if before else ""
    stop = f"-{after}" if after else ""
    return f"{t.name}.shape[{start}:{stop}]"


def _dtype_literal(dt: DType) -> str:
    return f"torch.{dt.torch_name}"


def _params(schema: Schema) -> list[str]:
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


def _unpack(names: list[str]) -> str:
    """Assignment targets: a one-return operator returns a Tensor, not a tuple."""
    return ", ".join(names)


def _docstring(lines: list[str]) -> str:
    """The indented body of a function docstring, first line right after the quotes."""
    out = [lines[0]] + [f"{IN1}{ln}" if ln else "" for ln in lines[1:]]
    return "\n".join(out) + f"\n{IN1}"


def _drop_unused_bindings(lines: list[str]) -> list[str]:
    """Drop ``name = ...`` lines whose name no later line reads (ruff F841)."""
    kept = []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*) = .*", line, flags=re.S)
        if m and not any(re.search(rf"\b{m.group(1)}\b", later) for later in lines[i + 1 :]):
            continue
        kept.append(line)
    return kept


class _OpViewBuilder:
    def __init__(self, spec: Spec, op: Op) -> None:
        self.spec = spec
        self.op = op
        self.plan: DimPlan = plan(op)
        self.ns = spec.namespace
        self.fwd = op.forward.schema
        self.pair = op.arity_pair
        self.public = [o for o in op.outputs if o.public]
        self.base_returns = [r.name for r in self.fwd.returns]
        self.extras = (
            [r.name for r in self.pair.schema.returns[len(self.base_returns) :]]
            if self.pair
            else []
        )

    # --- dims -------------------------------------------------------------------------------

    def _dim_lines(
        self, needed: set[str], batch: bool, available: set[str] | None, indent: str
    ) -> list[str]:
        """Statements binding ``needed`` dims (and ``batch``) from tensors in ``available``."""
        derived = {d.name: d for d in self.op.dims}
        closure = set(needed)
        frontier = list(needed)
        while frontier:
            d = derived.get(frontier.pop())
            if d is not None:
                for n in d.expr.names:
                    if n not in closure:
                        closure.add(n)
                        frontier.append(n)
        lines = []
        if batch and self.plan.batch_source is not None:
            src = next(t for t in self.plan.tensors if t.binds_batch)
            lines.append(f"{indent}batch = {_batch_slice(src)}")
        for name, b in self.plan.bound.items():
            if name not in closure or b.derived:
                continue
            if available is not None:
                b = bind_from(self.op, name, available)  # validated: some available tensor has it
            lines.append(f"{indent}{name} = {b.tensor}.shape[{b.index}]")
        for d in self.op.dims:
            if d.name in closure:
                lines.append(f"{indent}{d.name} = {d.expr.render({})}")
        return lines

    def _shape_needs(self, shape: Shape) -> tuple[set[str], bool]:
        names: set[str] = set()
        for e in shape.entries:
            if e != ELLIPSIS:
                names.update(e.names)
        return names, shape.has_ellipsis

    def _alloc_base(self, available: list[str]) -> str:
        required = [
            t.name
            for t in self.plan.tensors
            if not t.optional and not self.op.input(t.name).mutated
        ]
        for name in required:
            if name in available:
                return name
        return next(n for n in available)

    def _dtype_kw(self, dtype: DType | None, dtype_of: str | None, base: str) -> str:
        if dtype is not None:
            return f", dtype={_dtype_literal(dtype)}"
        if dtype_of != base:
            return f", dtype={dtype_of}.dtype"
        return ""

    # --- stages -----------------------------------------------------------------------------

    def _impl(
        self, stage: Stage, schema: Schema, base: str, flag: str | None
    ) -> tuple[ImplView, ...]:
        by_ref: dict[str, list[Launcher]] = {}
        for launcher in stage.launchers:
            by_ref.setdefault(launcher.ref, []).append(launcher)
        params = _params(schema)
        ret = _return_annotation(len(schema.returns))
        args = [a.name for a in schema.arguments]
        views = []
        for ref, launchers in by_ref.items():
            suffix = launchers[0].device if len(by_ref) > 1 else "impl"
            name = f"_{base}_{suffix}"
            eager = self.op.integration is Integration.EAGER
            # Note [eager launchers]: torch.compile inlines eager launchers, and Dynamo cannot
            # trace an import, so they are resolved once at import time instead of per call.
            resolved = f"{name}_launcher"
            call = f"{resolved}(" if eager else f"_launcher({json.dumps(ref)})("
            call_args = args + ([flag] if flag else [])
            if flag is None:
                body = [bracket(f"return {call}", call_args, ")", IN1)]
            else:
                # Note [arity pair]: one launcher serves both operators of the pair; it returns
                # every output of the wider schema, with None for the extras when the flag is off.
                n = len(self.base_returns)
                names = self.base_returns + (
                    ["_"] * len(self.extras) if flag == "False" else self.extras
                )
                body = [bracket(f"{_unpack(names)} = {call}", call_args, ")", IN1)]
                kept = names[:n] if flag == "False" else names
                body.append(f"{IN1}return {', '.join(kept)}")
            views.append(
                ImplView(
                    name=name,
                    signature=bracket(f"def {name}(", params, f") -> {ret}:"),
                    body=tuple(body),
                    devices=tuple(launcher.device.upper() for launcher in launchers),
                    preload=f"{resolved} = _launcher({json.dumps(ref)})" if eager else "",
                )
            )
        return tuple(views)

    def _stage(
        self,
        stage: Stage,
        schema: Schema,
        kind: str,
        flag: str | None,
        outputs: list[OutputDecl] | None,
    ) -> StageView:
        op = self.op
        base = f"{op.name}_{kind}"
        qualname = f"{self.ns}::{base}"
        impls = self._impl(stage, schema, base, flag)
        integration = op.integration
        define = ""
        registration: list[str] = []
        binding = f"_{base}"
        if integration is Integration.OPAQUE:
            define = bracket(
                "torch.library.define(", [json.dumps(qualname), json.dumps(schema.text)], ")"
            )
            for impl in impls:
                for device in impl.devices:
                    registration.append(
                        bracket(
                            "torch.library.impl(",
                            [json.dumps(qualname), json.dumps(device), impl.name],
                            ")",
                        )
                    )
            binding_line = f"{binding} = torch.ops.{self.ns}.{base}.default"
        elif integration is Integration.TRITON_OP:
            mutated = [a.name for a in schema.arguments if a.is_write]
            mut = (
                "(" + "".join(f"{json.dumps(m)}, " for m in mutated).rstrip(" ") + ")"
                if mutated
                else "()"
            )
            registration.append(
                bracket("_register_triton_op(", [json.dumps(qualname), impls[0].name, mut], ")")
            )
            binding_line = f"{binding} = torch.ops.{self.ns}.{base}.default"
        else:
            binding_line = f"{binding} = {impls[0].name}"
        fake_name = f"_{base}_fake"
        params = _params(schema)
        ret = _return_annotation(len(schema.returns))
        fake_sig = bracket(f"def {fake_name}(", params, f") -> {ret}:")
        if outputs is not None:
            body = self._forward_fake(outputs)
        else:
            body = self._backward_fake(schema)
        return StageView(
            qualname=qualname,
            define=define,
            binding=binding,
            binding_line=binding_line,
            impls=impls,
            registration=tuple(registration),
            fake_name=fake_name,
            fake_signature=fake_sig,
            fake_body=tuple(body),
        )

    def _forward_fake(self, outputs: list[OutputDecl]) -> list[str]:
        needed: set[str] = set()
        batch = False
        dynamic = {name for name, _ in self.op.dynamic_dims}
        for out in outputs:
            names, b = self._shape_needs(out.shape)
            needed |= names
            batch |= b
        lines = self._dim_lines(needed - dynamic, batch, None, IN1)
        used_dynamic = [name for name, _ in self.op.dynamic_dims if name in needed]
        if used_dynamic:
            # Data-dependent sizes: an unbacked symbol per dim instead of reading the data.
            lines.append(f"{IN1}ctx = torch.library.get_ctx()")
            for name in used_dynamic:
                lines.append(f"{IN1}{name} = ctx.new_dynamic_size()")
        base = self._alloc_base([t.name for t in self.plan.tensors])
        for out in outputs:
            shape = _shape_expr(out.shape, "batch")
            lines.append(
                bracket(
                    f"{out.name} = {base}.new_empty(",
                    [shape + self._dtype_kw(out.dtype, out.dtype_of, base)],
                    ")",
                    IN1,
                )
            )
        lines.append(f"{IN1}return " + ", ".join(o.name for o in outputs))
        return lines

    def _backward_fake(self, schema: Schema) -> list[str]:
        op = self.op
        available = {a.name for a in schema.arguments if a.is_tensor and not a.optional}
        lines: list[str] = []
        allocs: list[str] = []
        names = []
        needed: set[str] = set()
        batch = False
        base = self._alloc_base(sorted(available, key=[a.name for a in schema.arguments].index))
        for ret in schema.returns:
            target = op.input(ret.name[len("grad_") :])
            names.append(ret.name)
            if target.name in available:
                allocs.append(f"{IN1}{ret.name} = {target.name}.new_empty({target.name}.shape)")
                continue
            n, b = self._shape_needs(target.shape)
            needed |= n
            batch |= b
            if target.same_dtype_as is not None:
                dtype = f", dtype={target.same_dtype_as}.dtype"
            else:
                dtype = f", dtype={_dtype_literal(target.dtypes[0])}"
            shape = _shape_expr(target.shape, "batch")
            allocs.append(bracket(f"{ret.name} = {base}.new_empty(", [shape + dtype], ")", IN1))
        lines = self._dim_lines(needed, batch, available, IN1) + allocs
        lines.append(f"{IN1}return " + ", ".join(names))
        return lines

    # --- autograd.Function and public function ----------------------------------------------

    def _forward_call(self, indent: str) -> list[str]:
        """Statements computing every output (public and saved) from the arguments."""
        args = [a.name for a in self.fwd.arguments]
        outs = [o.name for o in self.op.outputs if o.name not in self.extras]
        if self.pair is None:
            return [bracket(f"{_unpack(outs)} = _{self.op.name}_fwd(", args, ")", indent)]
        wide = outs + self.extras
        lines = [f"{indent}if {self.pair.flag}:"]
        lines.append(
            bracket(
                f"{_unpack(wide)} = _{self.op.name}_fwd_{self.pair.suffix}(",
                args,
                ")",
                indent + IN1,
            )
        )
        lines.append(f"{indent}else:")
        lines.append(bracket(f"{_unpack(outs)} = _{self.op.name}_fwd(", args, ")", indent + IN1))
        for extra in self.extras:
            lines.append(f"{indent + IN1}{extra} = None")
        return lines

    def _function(self) -> tuple[list[str], list[str]]:
        op = self.op
        bwd = op.backward.schema
        fn_args = [a.name for a in self.fwd.arguments] + ([self.pair.flag] if self.pair else [])
        params = ["ctx"] + [f"{a.name}: {a.annotation}" for a in self.fwd.arguments]
        if self.pair:
            params.append(f"{self.pair.flag}: bool")
        ret = (
            "Tensor"
            if len(self.public) == 1
            else "tuple["
            + ", ".join("Tensor | None" if o.name in self.extras else "Tensor" for o in self.public)
            + "]"
        )
        fwd = [f"{IN1}@staticmethod", bracket("def forward(", params, f") -> {ret}:", IN1)]
        fwd += self._forward_call(IN2)
        saved = [a.name for a in bwd.arguments if a.is_tensor and not a.name.startswith("grad_")]
        scalars = [
            a.name for a in bwd.arguments if not a.is_tensor and not a.name.startswith("grad_")
        ]
        if saved:
            fwd.append(bracket("ctx.save_for_backward(", saved, ")", IN2))
        for s in scalars:
            fwd.append(f"{IN2}ctx.{s} = {s}")
        nondiff = [o.name for o in self.public if (o.dtype is not None and not o.dtype.is_floating)]
        if nondiff:
            fwd.append(bracket("ctx.mark_non_differentiable(", nondiff, ")", IN2))
        fwd.append(f"{IN2}return " + ", ".join(o.name for o in self.public))

        grads_in = [
            f"grad_{o.name}: Tensor" + (" | None" if o.name in self.extras else "")
            for o in self.public
        ]
        back = [
            f"{IN1}@staticmethod",
            f"{IN1}@torch.autograd.function.once_differentiable",
            bracket("def backward(", ["ctx"] + grads_in, ") -> tuple[Tensor | None, ...]:", IN1),
        ]
        if saved:
            targets = f"({saved[0]},)" if len(saved) == 1 else ", ".join(saved)
            back.append(f"{IN2}{targets} = ctx.saved_tensors")
        for s in scalars:
            back.append(f"{IN2}{s} = ctx.{s}")
        rets = [r.name for r in bwd.returns]
        back.append(
            bracket(f"{_unpack(rets)} = _{op.name}_bwd(", [a.name for a in bwd.arguments], ")", IN2)
        )
        results = []
        optional = {a.name for a in self.fwd.arguments if a.optional}
        for name in fn_args:
            grad = f"grad_{name}"
            if grad not in rets:
                results.append("None")
            elif name in optional:
                results.append(f"{grad} if {name} is not None else None")
            else:
                results.append(grad)
        flat = f"{IN2}return " + ", ".join(results)
        back.append(flat if len(flat) <= 100 else bracket("return (", results, ")", IN2))
        return fwd, back

    def build(self) -> OpView:
        op = self.op
        cls = camel(op.name)
        result_class = f"{cls}Output"
        function_class = f"_{cls}Function"
        stages = [
            self._stage(
                op.forward,
                self.fwd,
                "fwd",
                "False" if self.pair else None,
                [o for o in op.outputs if o.name not in self.extras],
            )
        ]
        if self.pair:
            stages.append(
                self._stage(
                    op.forward,
                    self.pair.schema,
                    f"fwd_{self.pair.suffix}",
                    "True",
                    list(op.outputs),
                )
            )
        if op.backward:
            stages.append(self._stage(op.backward, op.backward.schema, "bwd", None, None))
        fn_forward: list[str] = []
        fn_backward: list[str] = []
        if op.backward:
            fn_forward, fn_backward = self._function()

        sig_params = _params(self.fwd)
        args = [a.name for a in self.fwd.arguments]
        if self.pair:
            flag = f"{self.pair.flag}: bool = False"
            if self.pair.after is not None:
                pos = (
                    next(i for i, p in enumerate(sig_params) if p.split(":")[0] == self.pair.after)
                    + 1
                )
                sig_params.insert(pos, flag)
            else:
                sig_params.append(flag)
        public_signature = bracket(f"def {op.name}(", sig_params, f") -> {result_class}:")
        checks, constants = self.checks()
        public_names = [o.name for o in self.public]
        if op.backward:
            fn_args = args + ([self.pair.flag] if self.pair else [])
            call_lines = [
                bracket(f"{_unpack(public_names)} = {function_class}.apply(", fn_args, ")", IN1)
            ]
        else:
            call_lines = self._forward_call(IN1)
        call_lines.append(f"{IN1}return {result_class}({', '.join(public_names)})")
        fields = tuple(
            f"{o.name}: Tensor | None = None" if o.name in self.extras else f"{o.name}: Tensor"
            for o in self.public
        )
        return OpView(
            name=op.name,
            module=op.name,
            doc_summary=op.doc.splitlines()[0] if op.doc else op.name,
            registered=op.integration is not Integration.EAGER,
            opaque=op.integration is Integration.OPAQUE,
            stages=tuple(stages),
            function_class=function_class,
            has_function=op.backward is not None,
            fn_forward=tuple(fn_forward),
            fn_backward=tuple(fn_backward),
            result_class=result_class,
            result_fields=fields,
            public_signature=public_signature,
            docstring=_docstring(self.docstring()),
            checks=tuple(checks),
            constants=tuple(constants),
            call_lines=tuple(call_lines),
            exports=tuple(sorted((op.name, result_class), key=import_order)),
        )

    def docstring(self) -> list[str]:
        op = self.op
        lines = [ln.rstrip() for ln in (op.doc.splitlines() if op.doc else [op.name])]
        lines += ["", "Args:"]
        for a in self.fwd.arguments:
            decl = op.input(a.name)
            if decl is not None:
                dtypes = (
                    f"dtype of ``{decl.same_dtype_as}``"
                    if decl.same_dtype_as
                    else " | ".join(d.torch_name for d in decl.dtypes)
                )
                extra = ", optional" if a.optional else ""
                extra += ", updated in place" if decl.mutated else ""
                lines.append(f"{IN1}{a.name}: ``{decl.shape}``, {dtypes}{extra}.")
            else:
                variant = op.variant(a.name)
                allowed = (
                    f" One of {', '.join(repr(v) for v in variant.values)}." if variant else ""
                )
                default = f" Default: ``{a.default}``." if a.default is not None else ""
                lines.append(f"{IN1}{a.name}: ``{a.type}``.{allowed}{default}")
            if self.pair and self.pair.after == a.name:
                lines.append(f"{IN1}{self.pair.flag}: also return {', '.join(self.extras)}.")
        if self.pair and self.pair.after is None:
            lines.append(f"{IN1}{self.pair.flag}: also return {', '.join(self.extras)}.")
        lines += ["", "Returns:", f"{IN1}{camel(op.name)}Output with"]
        for o in self.public:
            dtype = o.dtype.torch_name if o.dtype else f"dtype of ``{o.dtype_of}``"
            when = f" (None unless ``{self.pair.flag}``)" if o.name in self.extras else ""
            lines.append(f"{IN2}{o.name}: ``{o.shape}``, {dtype}{when}.")
        wrapped = []
        for ln in lines:
            if len(ln) + 4 > 100:
                indent = ln[: len(ln) - len(ln.lstrip())]
                wrapped.extend(textwrap.wrap(ln, width=96, subsequent_indent=indent + IN1))
            else:
                wrapped.append(ln)
        return wrapped

    def checks(self) -> tuple[list[str], list[str]]:
        op = self.op
        lines: list[str] = []
        constants: list[str] = []
        upper = op.name.upper()
        devices = [
            d
            for d in ("cuda", "cpu", "meta")
            if d == "meta" or any(lch.device == d for lch in op.forward.launchers)
        ]
        first = None
        derived_emitted = False
        # Optional inputs that derived dims read are checked before those dims are computed, so a
        # malformed one is reported as itself rather than as a size mismatch elsewhere.
        read = {name for d in op.dims for name in d.expr.tensors}
        tensors = sorted(self.plan.tensors, key=lambda t: (t.optional, t.name not in read))
        for t in tensors:
            decl = op.input(t.name)
            if t.optional and t.name not in read and not derived_emitted:
                derived_emitted = True
                lines += self._derived_lines()
            ind = IN2 if t.optional else IN1
            inner: list[str] = []

            def fail(cond: str, exc: str, message: str, inner=inner, ind=ind) -> None:
                inner.append(f"{ind}if {cond}:")
                inner.append(bracket(f"raise {exc}(", [f'f"{op.name}: {message}"'], ")", ind + IN1))

            name = t.name
            if decl.same_dtype_as is None:
                const = f"_{upper}_{name.upper()}_DTYPES"
                items = ", ".join(_dtype_literal(d) for d in decl.dtypes)
                constants.append(f"{const} = ({items}{',' if len(decl.dtypes) == 1 else ''})")
                allowed = ", ".join(d.torch_name for d in decl.dtypes)
                fail(
                    f"{name}.dtype not in {const}",
                    "TypeError",
                    f"expected {name} to have dtype {allowed}, got {{{name}.dtype}}",
                )
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
                fail(
                    f"{name}.ndim < {shape.min_rank}",
                    "ValueError",
                    f"expected {name} of shape {shape} (at least {shape.min_rank} dims), {got}",
                )
            else:
                fail(
                    f"{name}.ndim != {shape.min_rank}",
                    "ValueError",
                    f"expected {name} of shape {shape}, {got}",
                )
            if first is None and not t.optional:
                # Device flags, not device.type: the latter costs microseconds per call.
                flags = " or ".join(f"{name}.is_{d}" for d in devices)
                fail(
                    f"not ({flags})",
                    "ValueError",
                    f"{name} is on {{{name}.device}}; supported devices: {', '.join(devices)}",
                )
            elif first is not None:
                fail(
                    f"{name}.device != {first}.device",
                    "ValueError",
                    f"expected {name} on {{{first}.device}} like {first}, got {{{name}.device}}",
                )
            for b in t.bindings:
                inner.append(f"{ind}{b.dim} = {name}.shape[{b.index}]")
            for c in t.checks:
                want = c.expr.render({})
                fail(
                    f"{name}.shape[{c.index}] != {want}",
                    "ValueError",
                    f"expected {name}.shape[{c.index}] == {c.expr.text} ({{{want}}}), {got}",
                )
            if t.binds_batch:
                inner.append(f"{ind}batch = {_batch_slice(t)}")
            if t.checks_batch:
                fail(
                    f"{_batch_slice(t)} != batch",
                    "ValueError",
                    f"expected the leading dims of {name} to equal those of {self.plan.batch_source} ({{tuple(batch)}}), {got}",
                )
            if t.optional:
                lines.append(f"{IN1}if {name} is not None:")
            else:
                first = first or name
            lines.extend(inner)
        if not derived_emitted:
            lines += self._derived_lines()
        for c in op.constraints:
            cond = f"not ({c.check.text})"
            if c.when is not None:
                cond = f"{c.when} is not None and {cond}"
            got = ", ".join(f"{n}={{{n}}}" for n in c.check.names)
            lines.append(f"{IN1}if {cond}:")
            lines.append(
                bracket("raise ValueError(", [f'f"{op.name}: {c.message}; got {got}"'], ")", IN2)
            )
        for v in op.variants:
            const = f"_{upper}_{v.arg.upper()}_VALUES"
            values = ", ".join(json.dumps(x) if isinstance(x, str) else repr(x) for x in v.values)
            constants.append(f"{const} = ({values}{',' if len(v.values) == 1 else ''})")
            lines.append(f"{IN1}if {v.arg} not in {const}:")
            shown = ", ".join(repr(x) for x in v.values)
            lines.append(
                bracket(
                    "raise ValueError(",
                    [f'f"{op.name}: {v.arg} must be one of {shown}, got {{{v.arg}!r}}"'],
                    ")",
                    IN2,
                )
            )
        return _drop_unused_bindings(lines), constants

    def _derived_lines(self) -> list[str]:
        return [f"{IN1}{d.name} = {d.expr.render({})}" for d in self.op.dims]


@dataclass(frozen=True)
class PackageView:
    namespace: str
    package: str
    ops: tuple[OpView, ...]
    exports: tuple[str, ...]


def op_view(spec: Spec, op: Op) -> OpView:
    return _OpViewBuilder(spec, op).build()


def package_view(spec: Spec) -> PackageView:
    ops = tuple(sorted((op_view(spec, op) for op in spec.ops), key=lambda v: v.module))
    exports = tuple(sorted((name for op in ops for name in op.exports), key=import_order))
    return PackageView(spec.namespace, spec.package, ops, exports)
