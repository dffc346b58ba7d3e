"""Checks that span sections of an operator: schemas against declarations, dims, tests."""

from __future__ import annotations

import ast
import importlib.util
from functools import cache

from .dims import plan
from .errors import Errors, did_you_mean, one_of
from .model import DType, Op, Spec
from .names import check_name


def validate(spec: Spec, errors: Errors, check_imports: bool = True) -> None:
    seen: dict[str, Op] = {}
    for op in spec.ops:
        _Op(op, errors, check_imports).run()
        seen[op.name] = op


class _Op:
    def __init__(self, op: Op, errors: Errors, check_imports: bool) -> None:
        self.op = op
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
            if arg.is_write or arg.alias:
                self.error(loc, f"forward schema: argument '{arg.name}' is annotated as aliased/mutated; mutation is not supported by this generator yet")
            if arg.is_tensor_list:
                self.error(loc, f"forward schema: Tensor[] argument '{arg.name}' is not supported by this generator yet")
        for i, ret in enumerate(fwd.returns):
            if ret.name is None:
                self.error(loc, f"forward schema: return {i} has no name; name every return, e.g. '-> (Tensor y, Tensor rstd)'")
            if ret.alias:
                self.error(loc, f"forward schema: return '{ret.name}' must not alias an input")
        if not fwd.returns:
            self.error(loc, "forward schema returns nothing; declare the outputs it returns")
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
                    self.error(decl.loc, f"dtype of input '{decl.name}' must be a dtype ({one_of(DType.names())}) or another input with 'dtypes', got '{decl.same_dtype_as}'")
            if decl.differentiable and not any(d.is_floating for d in self._dtypes(decl)):
                if op.backward is not None:
                    self.error(decl.loc, f"input '{decl.name}' has no floating dtype; mark it 'differentiable: false'")
        declared = {d.name for d in op.inputs}
        for name in tensor_args:
            if name not in declared:
                self.error(op.forward.schema_loc, f"tensor argument '{name}' has no entry under 'inputs' (shape and dtypes)")

    def _dtypes(self, decl):
        if decl.same_dtype_as is not None:
            other = self.op.input(decl.same_dtype_as)
            return other.dtypes if other is not None else ()
        return decl.dtypes

    def outputs(self) -> None:
        op, fwd = self.op, self.op.forward.schema
        returns = [r.name for r in fwd.returns if r.name]
        arg_names = {a.name for a in fwd.arguments}
        unnamed = any(r.name is None for r in fwd.returns)
        for decl in op.outputs:
            if (problem := check_name(decl.name, "output name")) is not None:
                self.error(decl.loc, problem)
            if decl.name not in returns and not unnamed:
                self.error(decl.loc, f"output '{decl.name}' is not a return of the forward schema{did_you_mean(decl.name, returns)}; returns: {one_of(returns) or 'none'}")
            if decl.name in arg_names:
                self.error(decl.loc, f"output '{decl.name}' has the name of an argument")
            if decl.dtype_of is not None and op.input(decl.dtype_of) is None:
                self.error(decl.loc, f"dtype of output '{decl.name}' names '{decl.dtype_of}', which is neither a dtype ({one_of(DType.names())}) nor an input")
        declared = [d.name for d in op.outputs]
        if [r for r in returns if r in declared] != [d for d in declared if d in returns]:
            self.error(op.outputs[0].loc, f"outputs must be listed in the order of the forward returns: {one_of(returns)}")
        for name in returns:
            if name not in declared:
                self.error(op.forward.schema_loc, f"return '{name}' has no entry under 'outputs' (shape and dtype)")
        if not any(o.public for o in op.outputs):
            self.error(op.outputs[0].loc, "no output is public; the public function would return nothing")

    def dims(self) -> None:
        p = plan(self.op)
        arg_names = {a.name for a in self.op.forward.schema.arguments}
        for name, binding in p.bound.items():
            if (problem := check_name(name, "dim name")) is not None:
                self.error(self.op.input(binding.tensor).loc, problem)
            elif name in arg_names:
                self.error(self.op.input(binding.tensor).loc, f"dim '{name}' has the name of an argument; rename the dim")
        for where, message in p.problems:
            decl = self.op.input(where) or self.op.output(where)
            self.error(decl.loc, message)

    def backward(self) -> None:
        op = self.op
        if op.backward is None:
            for out in op.outputs:
                if not out.public:
                    self.error(out.loc, f"output '{out.name}' is not public and there is no backward to use it")
            return
        bwd, loc = op.backward.schema, op.backward.schema_loc
        fwd = op.forward.schema
        public = {o.name for o in op.outputs if o.public}
        outputs = {o.name for o in op.outputs}
        used = set()
        for arg in bwd.arguments:
            if arg.is_write or arg.alias:
                self.error(loc, f"backward schema: argument '{arg.name}' must not be aliased or mutated")
            if arg.name.startswith("grad_") and arg.name[5:] in outputs:
                if arg.name[5:] not in public:
                    self.error(loc, f"backward schema: '{arg.name}' is the gradient of output '{arg.name[5:]}', which is not public")
                elif not arg.is_tensor or arg.optional:
                    self.error(loc, f"backward schema: '{arg.name}' must be a Tensor")
                continue
            fa = fwd.argument(arg.name)
            if fa is not None:
                if fa.type != arg.type:
                    self.error(loc, f"backward schema: '{arg.name}' is {arg.type} here but {fa.type} in the forward schema")
                continue
            if arg.name in outputs:
                used.add(arg.name)
                if arg.type != "Tensor":
                    self.error(loc, f"backward schema: saved output '{arg.name}' must be a Tensor")
                continue
            grads = ", ".join(f"grad_{o}" for o in sorted(public))
            self.error(loc, f"backward schema: argument '{arg.name}' is neither a forward argument, a forward output, nor an incoming gradient ({grads})")
        for out in op.outputs:
            if not out.public and out.name not in used:
                self.error(out.loc, f"output '{out.name}' is neither public nor used by the backward schema")
        grads = set()
        for i, ret in enumerate(bwd.returns):
            name = ret.name
            if name is None or not name.startswith("grad_"):
                self.error(loc, f"backward schema: return {i} must be named 'grad_<input>' to say which input it differentiates")
                continue
            target = op.input(name[5:])
            if target is None:
                self.error(loc, f"backward schema: return '{name}' names no tensor input '{name[5:]}'")
            elif not target.differentiable:
                self.error(loc, f"backward schema: input '{target.name}' is marked 'differentiable: false' but has gradient '{name}'")
            grads.add(name[5:])
        for decl in op.inputs:
            arg = fwd.argument(decl.name)
            if arg is None or not arg.is_tensor:
                continue
            if decl.differentiable and decl.name not in grads and any(d.is_floating for d in self._dtypes(decl)):
                self.error(decl.loc, f"input '{decl.name}' has no gradient in the backward schema; return 'grad_{decl.name}' or mark it 'differentiable: false'")

    def tests(self) -> None:
        op, t = self.op, self.op.tests
        p = plan(op)
        needs_batch = p.batch_source is not None
        for s in t.samples:
            env = s.env()
            for name in p.bound:
                if name not in env:
                    self.error(s.loc, f"sample does not give a size for dim '{name}'")
            for name in env:
                if name not in p.bound:
                    self.error(s.loc, f"sample gives dim '{name}', which no input binds{did_you_mean(name, list(p.bound))}")
            if needs_batch and s.batch is None:
                self.error(s.loc, "sample does not give 'batch' (the sizes of '...')")
            if not needs_batch and s.batch is not None:
                self.error(s.loc, "sample gives 'batch' but no input has '...'")
        first = next((d for d in op.inputs if d.dtypes and len(d.dtypes) > 0), None)
        allowed = first.dtypes if first else ()
        for dt in t.dtypes:
            if allowed and dt not in allowed:
                self.error(t.loc, f"test dtype '{dt.torch_name}' is not allowed for input '{first.name}' ({one_of(d.torch_name for d in allowed)})")
        tested = t.dtypes or allowed
        have = {d for d, _ in t.tolerance}
        for dt in tested:
            if dt not in have:
                self.error(t.loc, f"tests have no tolerance for dtype '{dt.torch_name}'")


@cache
def _find(module: str, function: str) -> str | None:
    """Locate ``function`` in ``module`` without importing the module itself."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        return f"cannot locate module '{module}': {exc}"
    if found is None or not found.origin or not found.origin.endswith(".py"):
        return f"module '{module}' not found"
    with open(found.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=found.origin)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    if function not in names:
        return f"module '{module}' defines no '{function}'{did_you_mean(function, sorted(names))}"
    return None
