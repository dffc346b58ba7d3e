"""Checks that span sections of an operator: schemas against declarations, dims, tests."""

from __future__ import annotations

from ..spec.errors import Errors, did_you_mean, one_of
from ..spec.model import DType
from ..spec.names import check_name
from .dims import bind_from
from .resolved import GRAD_PREFIX, ResolvedOp, Role
from .sources import find_function


def validate(ops: tuple[ResolvedOp, ...], errors: Errors, check_imports: bool = True) -> None:
    for r in ops:
        _Op(r, errors, check_imports).run()


class _Op:
    def __init__(self, r: ResolvedOp, errors: Errors, check_imports: bool) -> None:
        self.r = r
        self.op = r.op
        self.errors = errors
        self.check_imports = check_imports

    def error(self, loc, message: str) -> None:
        self.errors.add(loc, message, self.op.name)

    def run(self) -> None:
        op = self.op
        fwd = op.forward.schema
        loc = op.forward.schema_loc
        for arg in fwd.arguments:
            if (problem := check_name(arg.name, "argument name")) is not None:
                self.error(loc, f"forward schema: {problem}")
            if arg.alias and not arg.is_write:
                self.error(
                    loc,
                    f"forward schema: argument '{arg.name}' has a read-only alias annotation; declare in-place updates as 'Tensor(a!) {arg.name}' and return new tensors otherwise",
                )
            if arg.is_tensor_list:
                self.error(
                    loc,
                    f"forward schema: Tensor[] argument '{arg.name}' is not supported by this generator yet",
                )
        for i, ret in enumerate(fwd.returns):
            if ret.name is None:
                self.error(
                    loc,
                    f"forward schema: return {i} has no name; name every return, e.g. '-> (Tensor y, Tensor rstd)'",
                )
            if ret.alias:
                self.error(loc, f"forward schema: return '{ret.name}' must not alias an input")
        if not fwd.returns:
            self.error(loc, "forward schema returns nothing; declare the outputs it returns")
        if op.arity_pair is not None:
            self.arity_pair()
        self.variants()
        self.constraints()
        self.integration()
        self.inputs()
        self.outputs()
        self.dims()
        self.backward()
        self.tests()
        if self.check_imports:
            for stage in (op.forward, op.backward):
                for launcher in stage.launchers if stage else ():
                    if (problem := _find(launcher.module, launcher.function)) is not None:
                        self.error(launcher.loc, f"{launcher.device} launcher: {problem}")
            module, function = op.reference.split(":")
            if (problem := _find(module, function)) is not None:
                self.error(op.reference_loc, f"reference: {problem}")

    def inputs(self) -> None:
        op, fwd = self.op, self.op.forward.schema
        tensor_args = [a.name for a in fwd.tensor_arguments]
        for decl in op.inputs:
            arg = fwd.argument(decl.name)
            if arg is None or not arg.is_tensor:
                self.error(
                    decl.loc,
                    f"input '{decl.name}' is not a Tensor argument of the forward schema"
                    f"{did_you_mean(decl.name, tensor_args)}; tensor arguments: {one_of(tensor_args) or 'none'}",
                )
            if decl.same_dtype_as is not None:
                other = op.input(decl.same_dtype_as)
                if other is None or other.name == decl.name or other.same_dtype_as is not None:
                    self.error(
                        decl.loc,
                        f"dtype of input '{decl.name}' must be a dtype ({one_of(DType.names())}) or another input with 'dtypes', got '{decl.same_dtype_as}'",
                    )
            if arg is not None and arg.is_tensor and decl.mutated != arg.is_write:
                if decl.mutated:
                    self.error(
                        decl.loc,
                        f"input '{decl.name}' is marked 'mutated: true' but the forward schema does not declare it mutable; write 'Tensor(a!) {decl.name}'",
                    )
                else:
                    self.error(
                        decl.loc,
                        f"the forward schema declares '{decl.name}' mutable (a!) but the input is not marked 'mutated: true'",
                    )
            if decl.mutated and op.backward is not None:
                self.error(
                    decl.loc,
                    f"input '{decl.name}' is mutated in place; operators with a backward must be functional",
                )
            if decl.differentiable and not any(d.is_floating for d in self._dtypes(decl)):
                if op.backward is not None:
                    self.error(
                        decl.loc,
                        f"input '{decl.name}' has no floating dtype; mark it 'differentiable: false'",
                    )
        declared = {d.name for d in op.inputs}
        for name in tensor_args:
            if name not in declared:
                self.error(
                    op.forward.schema_loc,
                    f"tensor argument '{name}' has no entry under 'inputs' (shape and dtypes)",
                )

    def _dtypes(self, decl):
        if decl.same_dtype_as is not None:
            other = self.op.input(decl.same_dtype_as)
            return other.dtypes if other is not None else ()
        return decl.dtypes

    def outputs(self) -> None:
        op, fwd = self.op, self.op.forward.schema
        full = op.arity_pair.schema if op.arity_pair is not None else fwd
        returns = [r.name for r in full.returns if r.name]
        arg_names = {a.name for a in fwd.arguments}
        unnamed = any(r.name is None for r in full.returns)
        for decl in op.outputs:
            if (problem := check_name(decl.name, "output name")) is not None:
                self.error(decl.loc, problem)
            if decl.name not in returns and not unnamed:
                self.error(
                    decl.loc,
                    f"output '{decl.name}' is not a return of the forward schema{did_you_mean(decl.name, returns)}; returns: {one_of(returns) or 'none'}",
                )
            if decl.name in arg_names:
                self.error(decl.loc, f"output '{decl.name}' has the name of an argument")
            if decl.dtype_of is not None and op.input(decl.dtype_of) is None:
                self.error(
                    decl.loc,
                    f"dtype of output '{decl.name}' names '{decl.dtype_of}', which is neither a dtype ({one_of(DType.names())}) nor an input",
                )
        declared = [d.name for d in op.outputs]
        if [r for r in returns if r in declared] != [d for d in declared if d in returns]:
            self.error(
                op.outputs[0].loc,
                f"outputs must be listed in the order of the forward returns: {one_of(returns)}",
            )
        for name in returns:
            if name not in declared:
                self.error(
                    op.forward.schema_loc,
                    f"return '{name}' has no entry under 'outputs' (shape and dtype)",
                )
        if not any(o.public for o in op.outputs):
            self.error(
                op.outputs[0].loc, "no output is public; the public function would return nothing"
            )

    def dims(self) -> None:
        op = self.op
        p = self.r.plan
        arg_names = {a.name for a in op.forward.schema.arguments} | {o.name for o in op.outputs}
        derived = {d.name: d for d in op.dims}
        for name, binding in p.bound.items():
            loc = derived[name].loc if binding.derived else op.input(binding.tensor).loc
            if (problem := check_name(name, "dim name")) is not None:
                self.error(loc, problem)
            elif name in arg_names:
                self.error(
                    loc, f"dim '{name}' has the name of an argument or output; rename the dim"
                )
        for name, loc in op.dynamic_dims:
            if name in p.bound:
                self.error(loc, f"dynamic dim '{name}' is also bound by an input")
            if not any(name in e.names for o in op.outputs for e in o.shape.entries if e != "..."):
                self.error(loc, f"dynamic dim '{name}' sizes no output")
            if op.integration.value != "opaque":
                self.error(
                    loc,
                    "data-dependent output sizes need the opaque integration (the fake allocates them)",
                )
        for where, message in p.problems:
            if where.startswith("dim:"):
                self.error(derived[where[4:]].loc, message)
                continue
            decl = op.input(where) or op.output(where)
            self.error(decl.loc, message)

    def backward(self) -> None:
        op = self.op
        if op.backward is None:
            for out in op.outputs:
                if not out.public:
                    self.error(
                        out.loc,
                        f"output '{out.name}' is not public and there is no backward to use it",
                    )
            return
        bwd, loc = op.backward.schema, op.backward.schema_loc
        fwd = op.forward.schema
        public = {o.name for o in op.outputs if o.public}
        used = set()
        for arg, role in zip(bwd.arguments, self.r.backward_args, strict=True):
            if arg.is_write or arg.alias:
                self.error(
                    loc, f"backward schema: argument '{arg.name}' must not be aliased or mutated"
                )
            if role.role is Role.GRADIENT:
                if role.source not in public:
                    self.error(
                        loc,
                        f"backward schema: '{arg.name}' is the gradient of output '{role.source}', which is not public",
                    )
                elif not arg.is_tensor:
                    self.error(loc, f"backward schema: '{arg.name}' must be a Tensor")
                elif arg.optional != (role.source in self.r.pair_extras):
                    kind = (
                        "Tensor? (None when the flag is false)"
                        if arg.optional is False
                        else "Tensor"
                    )
                    self.error(loc, f"backward schema: '{arg.name}' must be {kind}")
                continue
            if role.role is Role.ARGUMENT:
                fa = fwd.argument(arg.name)
                if fa.type != arg.type:
                    self.error(
                        loc,
                        f"backward schema: '{arg.name}' is {arg.type} here but {fa.type} in the forward schema",
                    )
                continue
            if role.role is Role.SAVED:
                used.add(arg.name)
                if arg.type != "Tensor":
                    self.error(loc, f"backward schema: saved output '{arg.name}' must be a Tensor")
                continue
            grads = ", ".join(f"grad_{o}" for o in sorted(public))
            self.error(
                loc,
                f"backward schema: argument '{arg.name}' is neither a forward argument, a forward output, nor an incoming gradient ({grads})",
            )
        for out in op.outputs:
            if not out.public and out.name not in used:
                self.error(
                    out.loc,
                    f"output '{out.name}' is neither public nor used by the backward schema",
                )
        grads = set()
        for i, (ret, grad) in enumerate(zip(bwd.returns, self.r.gradients, strict=True)):
            name = ret.name
            if name is None or not name.startswith(GRAD_PREFIX):
                self.error(
                    loc,
                    f"backward schema: return {i} must be named 'grad_<input>' to say which input it differentiates",
                )
                continue
            if grad.input is None:
                self.error(
                    loc,
                    f"backward schema: return '{name}' names no tensor input '{name[len(GRAD_PREFIX) :]}'",
                )
                continue
            target = op.input(grad.input)
            if not target.differentiable:
                self.error(
                    loc,
                    f"backward schema: input '{target.name}' is marked 'differentiable: false' but has gradient '{name}'",
                )
            grads.add(grad.input)
        self.backward_fake(grads)
        for decl in op.inputs:
            arg = fwd.argument(decl.name)
            if arg is None or not arg.is_tensor:
                continue
            if (
                decl.differentiable
                and decl.name not in grads
                and any(d.is_floating for d in self._dtypes(decl))
            ):
                self.error(
                    decl.loc,
                    f"input '{decl.name}' has no gradient in the backward schema; return 'grad_{decl.name}' or mark it 'differentiable: false'",
                )

    def backward_fake(self, grads: set[str]) -> None:
        """The backward fake sizes each gradient from the backward's own arguments."""
        op, bwd = self.op, self.op.backward.schema
        loc = op.backward.schema_loc
        required = {a.name for a in bwd.arguments if a.is_tensor and not a.optional}
        present = {a.name for a in bwd.arguments}
        p = self.r.plan
        derived = {d.name: d for d in op.dims}
        for name in sorted(grads):
            decl = op.input(name)
            arg = op.forward.schema.argument(name)
            if decl is None or arg is None:
                continue
            if arg.optional and name not in present:
                self.error(
                    loc,
                    f"backward schema: returns 'grad_{name}' of optional input '{name}' but does not take '{name}', so the autograd.Function cannot tell whether it was given",
                )
            if name in required:
                continue
            needed = [n for e in decl.shape.entries if e != "..." for n in e.names]
            seen: set[str] = set()
            missing: list[str] = []
            while needed:
                dim = needed.pop(0)
                if dim in seen:
                    continue
                seen.add(dim)
                if dim in derived:
                    needed.extend(derived[dim].expr.names)
                    missing += [t for t in derived[dim].expr.tensors if t not in present]
                elif dim in p.bound and bind_from(op, p, dim, required) is None:
                    missing.append(p.bound[dim].tensor)
            for tensor in dict.fromkeys(missing):
                self.error(
                    loc,
                    f"backward schema: the fake of 'grad_{name}' needs the sizes of '{tensor}'; "
                    f"add '{tensor}' to the backward arguments",
                )
            if decl.shape.has_ellipsis and p.batch_source not in required:
                self.error(
                    loc,
                    f"backward schema: the fake of 'grad_{name}' needs the leading dims of '{p.batch_source}'; add it to the backward arguments",
                )
            if not decl.same_dtype_as and len(decl.dtypes) > 1:
                self.error(
                    loc,
                    f"backward schema: the fake of 'grad_{name}' cannot know its dtype ({'/'.join(d.torch_name for d in decl.dtypes)}) without a required '{name}' argument",
                )
            elif decl.same_dtype_as and decl.same_dtype_as not in required:
                self.error(
                    loc,
                    f"backward schema: the fake of 'grad_{name}' takes the dtype of '{decl.same_dtype_as}'; add it to the backward arguments",
                )

    def arity_pair(self) -> None:
        op, pair = self.op, self.op.arity_pair
        fwd = op.forward.schema
        loc = pair.schema_loc
        ours = [
            (a.name, a.type, a.default, a.is_write, a.kwarg_only) for a in pair.schema.arguments
        ]
        theirs = [(a.name, a.type, a.default, a.is_write, a.kwarg_only) for a in fwd.arguments]
        if ours != theirs:
            self.error(
                loc, "arity_pair schema must take exactly the arguments of the forward schema"
            )
        n = len(fwd.returns)
        if [r.name for r in pair.schema.returns[:n]] != [r.name for r in fwd.returns]:
            self.error(
                loc,
                "arity_pair schema must return the forward schema's returns first, then the extra ones",
            )
        elif len(pair.schema.returns) == n:
            self.error(
                loc, "arity_pair schema adds no return; the pair differs only by trailing returns"
            )
        if fwd.argument(pair.flag) is not None or op.output(pair.flag) is not None:
            self.error(
                pair.loc, f"arity_pair flag '{pair.flag}' collides with an argument or output name"
            )
        if pair.after is not None and fwd.argument(pair.after) is None:
            self.error(pair.loc, f"arity_pair 'after' names no forward argument: '{pair.after}'")
        for extra in self.r.pair_extras:
            out = op.output(extra)
            if out is not None and not out.public:
                self.error(out.loc, f"output '{extra}' of the arity pair must be public")

    def variants(self) -> None:
        fwd = self.op.forward.schema
        types = {"str": str, "int": int, "SymInt": int, "bool": bool, "float": (int, float)}
        for v in self.op.variants:
            arg = fwd.argument(v.arg)
            if arg is None or arg.type not in types:
                scalars = [a.name for a in fwd.arguments if a.type in types]
                self.error(
                    v.loc,
                    f"variant '{v.arg}' is not a str/int/bool/float argument of the forward schema{did_you_mean(v.arg, scalars)}",
                )
                continue
            for value in v.values:
                ok = isinstance(value, types[arg.type]) and (
                    arg.type == "bool" or not isinstance(value, bool)
                )
                if not ok:
                    self.error(v.loc, f"variant value {value!r} is not a {arg.type}")
            if arg.has_default and not any(
                type(arg.default_value) is type(x) and arg.default_value == x for x in v.values
            ):
                self.error(
                    v.loc,
                    f"the schema default of '{v.arg}' ({arg.default}) is not one of its variant values",
                )

    def constraints(self) -> None:
        op = self.op
        p = self.r.plan
        fwd = op.forward.schema
        for c in op.constraints:
            for n in c.check.names:
                if n not in p.bound:
                    self.error(
                        c.loc, f"constraint '{c.check.text}' reads '{n}', which no input binds"
                    )
            if c.when is not None:
                arg = fwd.argument(c.when)
                if arg is None or not arg.is_tensor or not arg.optional:
                    self.error(
                        c.loc,
                        f"constraint 'when' must name an optional tensor input, got '{c.when}'",
                    )
            literal = self.r.literal_inputs
            for s in op.tests.samples:
                # A literal input is given only by the samples that spell it out; other optional
                # inputs are given in some test configuration of every sample.
                if c.when in literal and s.get(c.when) is None:
                    continue
                env = s.env()
                if all(n in env for n in c.check.names) and not c.check.holds(env):
                    self.error(s.loc, f"sample breaks constraint '{c.check.text}'")

    def integration(self) -> None:
        op = self.op
        if op.integration.value == "opaque":
            return
        for stage in (op.forward, op.backward):
            if stage is not None and len({launcher.ref for launcher in stage.launchers}) != 1:
                self.error(
                    stage.loc,
                    f"integration '{op.integration.value}' registers one launcher for every device; use the same 'module:function' for each",
                )

    def tests(self) -> None:
        op, t = self.op, self.op.tests
        p = self.r.plan
        fwd = op.forward.schema
        needs_batch = p.batch_source is not None
        scalars = {a.name: a for a in fwd.arguments if a.is_scalar}
        literal_ok = {d.name for d in op.inputs}
        for s in t.samples:
            env = s.env()
            for name in self.r.sample_dims:
                if name not in env:
                    self.error(s.loc, f"sample does not give a size for dim '{name}'")
            for name, a in scalars.items():
                if a.default is None and s.get(name) is None:
                    self.error(
                        s.loc,
                        f"sample does not give a value for argument '{name}', which has no default",
                    )
            for name, value in s.entries:
                if name in scalars or name in literal_ok:
                    continue
                if name in {d.name for d in op.dims}:
                    self.error(
                        s.loc,
                        f"sample gives derived dim '{name}'; it is computed from the other sizes",
                    )
                elif name not in p.bound:
                    self.error(
                        s.loc,
                        f"sample gives '{name}', which is neither a dim, a scalar argument nor an input{did_you_mean(name, list(p.bound) + list(scalars))}",
                    )
                elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    self.error(
                        s.loc, f"size of dim '{name}' must be a non-negative integer, got {value!r}"
                    )
            if needs_batch and s.batch is None:
                self.error(s.loc, "sample does not give 'batch' (the sizes of '...')")
            if not needs_batch and s.batch is not None:
                self.error(s.loc, "sample gives 'batch' but no input has '...'")
        first = op.primary if op.primary.dtypes else None
        allowed = first.dtypes if first else ()
        for dt in t.dtypes:
            if allowed and dt not in allowed:
                self.error(
                    t.loc,
                    f"test dtype '{dt.torch_name}' is not allowed for input '{first.name}' ({one_of(d.torch_name for d in allowed)})",
                )
        tested = t.dtypes or allowed
        for what, table in (("tolerance", t.tolerance), ("grad_tolerance", t.grad_tolerance)):
            have = {d for d, _ in table}
            for dt in tested:
                if dt not in have:
                    self.error(t.loc, f"tests have no {what} for dtype '{dt.torch_name}'")
            if t.grad_tolerance is t.tolerance:
                break  # no grad_tolerance given: the forward tolerance serves both
        if t.varlen is not None:
            v = t.varlen
            arg = fwd.argument(v.offsets)
            if arg is None or not arg.is_tensor or not arg.optional:
                self.error(
                    v.loc,
                    f"varlen offsets '{v.offsets}' must be an optional tensor input (Tensor?)",
                )
            elif not any(s.get(v.offsets) is not None for s in t.samples):
                self.error(
                    v.loc, f"no sample gives '{v.offsets}', so the varlen test would not run"
                )
            if v.dim not in p.bound:
                self.error(v.loc, f"varlen dim '{v.dim}' is not a dim bound by the inputs")
            for name in v.per_sequence:
                if op.input(name) is None and op.output(name) is None:
                    self.error(
                        v.loc,
                        f"varlen per_sequence names '{name}', which is neither an input nor an output",
                    )


def _find(module: str, function: str) -> str | None:
    """Locate ``function`` in ``module``'s source without importing anything (resolve/sources.py)."""
    return find_function(module, function)
