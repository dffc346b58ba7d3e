"""Checks the declared inputs and outputs against the forward schema. Each input is a Tensor
argument with a valid dtype source and matching mutability, functional when there is a backward, and
floating when differentiable; each return has an output, listed in return order, with a valid dtype
source, and some output is public.
"""

from __future__ import annotations

import re

from ...spec.errors import Location, did_you_mean, one_of
from ...spec.model import DType, Op, TensorDecl
from ...spec.names import check_name
from ...spec.schema import returns_offset
from ...spec.shapes import ELLIPSIS, EvaluationError
from ..resolved import ResolvedOp
from .report import Report


def inputs(r: ResolvedOp, report: Report) -> None:
    op, fwd = r.op, r.op.forward.schema
    tensor_args = [a.name for a in fwd.arguments if a.is_tensor or a.is_tensor_list]
    for decl in op.inputs:
        arg = fwd.argument(decl.name)
        if arg is None or not (arg.is_tensor or arg.is_tensor_list):
            report.error(
                decl.loc,
                f"input '{decl.name}' is not a Tensor argument of the forward schema"
                f"{did_you_mean(decl.name, tensor_args)}; tensor arguments: {one_of(tensor_args) or 'none'}",
            )
        if decl.same_dtype_as is not None:
            other = op.input(decl.same_dtype_as)
            if other is None or other.name == decl.name or other.same_dtype_as is not None:
                report.error(
                    decl.loc,
                    f"dtype of input '{decl.name}' must be a dtype ({one_of(DType.names())}) or another input with 'dtypes', got '{decl.same_dtype_as}'",
                )
        if arg is not None and (arg.is_tensor or arg.is_tensor_list):
            _list(r, decl, arg, report)
        if (
            arg is not None
            and (arg.is_tensor or arg.is_tensor_list)
            and decl.mutated != arg.is_write
        ):
            if decl.mutated:
                report.error(
                    decl.loc,
                    f"input '{decl.name}' is marked 'mutated: true' but the forward schema does not declare it mutable; write 'Tensor(a!) {decl.name}'",
                )
            else:
                report.error(
                    decl.loc,
                    f"the forward schema declares '{decl.name}' mutable (a!) but the input is not marked 'mutated: true'",
                )
        if decl.mutated and op.backward is not None:
            report.error(
                decl.loc,
                f"input '{decl.name}' is mutated in place; operators with a backward must be functional",
            )
        if decl.differentiable and not any(d.is_floating for d in allowed_dtypes(r.op, decl)):
            if op.backward is not None:
                report.error(
                    decl.loc,
                    f"input '{decl.name}' has no floating dtype; mark it 'differentiable: false'",
                )
        if decl.offsets is not None:
            _offsets(r, decl, report)
        if decl.indexes is not None:
            _indexes(r, decl, report)
        if decl.domain is not None:
            _domain(r, decl, report)
    declared = {d.name for d in op.inputs}
    for name in tensor_args:
        if name not in declared:
            report.error(
                op.forward.schema_loc,
                f"tensor argument '{name}' has no entry under 'inputs' (shape and dtypes)",
            )


def _list(r: ResolvedOp, decl: TensorDecl, arg, report: Report) -> None:
    """A Tensor[] argument is declared 'list: true' (and vice versa); its elements bind no dims."""
    if arg.is_tensor_list and not decl.is_list:
        report.error(
            decl.loc,
            f"input '{decl.name}' is a {arg.type} argument; add 'list: true' (the shape and "
            "dtypes then describe each element)",
        )
    elif decl.is_list and not arg.is_tensor_list:
        report.error(
            decl.loc,
            f"input '{decl.name}' is marked 'list: true' but its schema type is {arg.type}",
        )
    elif decl.is_list:
        if decl.differentiable and r.op.backward is not None:
            report.error(
                decl.loc,
                f"list input '{decl.name}' must be marked 'differentiable: false': "
                "autograd.Function does not track tensors inside a list",
            )
        if decl.offsets is not None:
            report.error(decl.offsets_loc, f"list input '{decl.name}' cannot hold offsets")


def _offsets(r: ResolvedOp, decl: TensorDecl, report: Report) -> None:
    """Sequence offsets: a 1-D integer input partitioning a dim that a required input binds."""
    loc = decl.offsets_loc
    if decl.shape.has_ellipsis or len(decl.shape.entries) != 1:
        report.error(loc, f"offsets input '{decl.name}' must have a 1-D shape, got {decl.shape}")
    dtypes = allowed_dtypes(r.op, decl)
    if not dtypes or any(d not in (DType.INT32, DType.INT64) for d in dtypes):
        report.error(loc, f"offsets input '{decl.name}' must allow only int32 and int64 dtypes")
    if decl.differentiable:
        report.error(loc, f"offsets input '{decl.name}' must be marked 'differentiable: false'")
    if decl.name not in r.literal_inputs:
        report.error(
            loc,
            f"no test sample spells out '{decl.name}' (e.g. {decl.name}: [0, 5, 20]), so the "
            "malformed-offsets tests would not run",
        )
    binding = r.plan.bound.get(decl.offsets)
    if binding is None or binding.derived or binding.optional:
        bound = [n for n, b in r.plan.bound.items() if not b.derived and not b.optional]
        report.error(
            loc,
            f"offsets of '{decl.name}' partition dim '{decl.offsets}', which no required input "
            f"binds{did_you_mean(decl.offsets, bound)}; dims: {one_of(bound)}",
        )


def _domain(r: ResolvedOp, decl: TensorDecl, report: Report) -> None:
    """A value domain belongs to a single tensor of floating dtypes (docs/spec.md)."""
    dtypes = allowed_dtypes(r.op, decl)
    if dtypes and not all(d.is_floating for d in dtypes):
        report.error(
            decl.domain_loc,
            f"'domain' of input '{decl.name}' applies only to floating inputs; its dtypes are "
            + one_of(d.torch_name for d in dtypes),
        )
    if decl.is_list:
        report.error(
            decl.domain_loc, f"'domain' of input '{decl.name}' is not supported on a tensor list"
        )


def allowed_dtypes(op: Op, decl: TensorDecl) -> tuple[DType, ...]:
    """The dtypes an input allows, following ``same_dtype_as`` to the input it names."""
    if decl.same_dtype_as is not None:
        other = op.input(decl.same_dtype_as)
        return other.dtypes if other is not None else ()
    return decl.dtypes


def outputs(r: ResolvedOp, report: Report) -> None:
    op, fwd = r.op, r.op.forward.schema
    full = op.arity_pair.schema if op.arity_pair is not None else fwd
    returns = [r.name for r in full.returns if r.name]
    arg_names = {a.name for a in fwd.arguments}
    unnamed = any(r.name is None for r in full.returns)
    for decl in op.outputs:
        if (problem := check_name(decl.name, "output name", builtins_ok=True)) is not None:
            report.error(decl.loc, problem)
        if decl.name not in returns and not unnamed:
            report.error(
                decl.loc,
                f"output '{decl.name}' is not a return of the forward schema{did_you_mean(decl.name, returns)}; returns: {one_of(returns) or 'none'}",
            )
        if decl.name in arg_names:
            report.error(decl.loc, f"output '{decl.name}' has the name of an argument")
        if decl.dtype_of is not None and op.input(decl.dtype_of) is None:
            report.error(
                decl.loc,
                f"dtype of output '{decl.name}' names '{decl.dtype_of}', which is neither a dtype ({one_of(DType.names())}) nor an input",
            )
    _optional_returns(r, report)
    _list_returns(r, report)
    declared = [d.name for d in op.outputs]
    if not full.returns:
        # '-> ()': the operator updates its Tensor(a!) arguments and returns nothing.
        if op.reference_returns:
            report.error(
                op.reference_returns_loc,
                "reference_returns: the forward schema returns nothing ('-> ()'); the reference "
                "updates the mutated inputs and returns None",
            )
        return
    if [r for r in returns if r in declared] != [d for d in declared if d in returns]:
        report.error(
            op.outputs[0].loc,
            f"outputs must be listed in the order of the forward returns: {one_of(returns)}",
        )
    for name in returns:
        if name not in declared:
            report.error(
                op.forward.schema_loc,
                f"return '{name}' has no entry under 'outputs' (shape and dtype)",
            )
    if op.outputs and not any(o.public for o in op.outputs):
        report.error(
            op.outputs[0].loc, "no output is public; the public function would return nothing"
        )
    if op.reference_returns is not None:
        _reference_returns(r, report)


def _reference_returns(r: ResolvedOp, report: Report) -> None:
    """``reference_returns`` names declared outputs and lists every public one."""
    op, loc = r.op, r.op.reference_returns_loc
    declared = [d.name for d in op.outputs]
    for name in op.reference_returns:
        if name not in declared:
            report.error(
                loc,
                f"reference_returns: '{name}' is not an output{did_you_mean(name, declared)}; outputs: {one_of(declared)}",
            )
    missing = [o for o in r.public_outputs if o not in op.reference_returns]
    if missing:
        report.error(
            loc,
            f"reference_returns must list every public output (the tests compare each); missing: {one_of(missing)}",
        )


# The scalar arguments a 'when' may name: the return is given when the value is true (nonzero).
WHEN_SCALARS = ("bool", "int", "SymInt", "float")


def _deciders(schema) -> list[str]:
    """The arguments a 'Tensor?' return's 'when' may name."""
    return [
        a.name
        for a in schema.arguments
        if a.type.rstrip("?") in WHEN_SCALARS or (a.is_tensor and a.optional)
    ]


def _return_loc(op: Op, name: str) -> Location:
    """Where return ``name`` is written in the forward schema (its type), else the returns."""
    stage = op.forward
    text, at = stage.schema.text, stage.returns_loc
    first = returns_offset(text)
    if at is None or first is None:
        return stage.schema_loc
    m = re.compile(r"Tensor\s*\?\s*" + re.escape(name) + r"\b").search(text, first)
    return at if m is None else Location(at.path, at.line, at.col + m.start() - first)


def _optional_returns(r: ResolvedOp, report: Report) -> None:
    """A 'Tensor?' return names, with 'when', the argument that decides whether it is given (the
    fake must return None exactly when the launcher does)."""
    op = r.op
    full = op.arity_pair.schema if op.arity_pair is not None else op.forward.schema
    kinds = {ret.name: ret.type for ret in full.returns if ret.name}
    for decl in op.outputs:
        optional = kinds.get(decl.name) == "Tensor?"
        if optional and decl.when is None and not _deciders(op.forward.schema):
            # No argument could say: the presence depends on the data, which no fake can know.
            report.error(
                _return_loc(op, decl.name),
                f"forward schema: return '{decl.name}' is 'Tensor?' but no argument says when "
                "it is given (a bool, int or float argument, or a Tensor? input): a fake must "
                "return None exactly when the kernel does, so a presence that depends on the "
                "data cannot be compiled; return an empty tensor instead, or add the flag",
            )
            continue
        if optional and decl.when is None:
            report.error(
                decl.loc,
                f"output '{decl.name}' is a 'Tensor?' return: say when it is given with "
                "'when: <a bool, int or float argument, or a Tensor? input>'",
            )
        if decl.when is None:
            continue
        if not optional:
            report.error(
                decl.loc,
                f"output '{decl.name}' has 'when' but its return is not 'Tensor?'",
            )
        arg = op.forward.schema.argument(decl.when)
        if arg is None or not (
            arg.type.rstrip("?") in WHEN_SCALARS or (arg.is_tensor and arg.optional)
        ):
            report.error(
                decl.loc,
                f"'when' of output '{decl.name}' must name a bool, int or float argument or a "
                f"Tensor? input of the forward schema, not '{decl.when}'",
            )
        if op.backward is not None:
            report.error(
                decl.loc,
                f"output '{decl.name}' is optional ('Tensor?') in an operator with a backward; "
                "declare the two arities with 'arity_pair' instead",
            )


def _indexes(r: ResolvedOp, decl: TensorDecl, report: Report) -> None:
    """An index input: int32/int64 entries indexing a dim that another required input binds
    (docs/spec.md, "Index inputs"); what the samples spell out is in range."""
    loc, dim = decl.indexes_loc, decl.indexes
    if decl.is_list:
        report.error(loc, f"list input '{decl.name}' cannot hold indexes")
        return
    dtypes = allowed_dtypes(r.op, decl)
    if not dtypes or any(d not in (DType.INT32, DType.INT64) for d in dtypes):
        report.error(
            loc,
            f"index input '{decl.name}' must allow only int32 and int64 dtypes (the dtypes "
            "torch indexes with)",
        )
    bound = _indexable_dims(r, decl)
    if dim not in bound:
        report.error(
            loc,
            f"index input '{decl.name}' indexes dim '{dim}', which no other required input "
            f"binds{did_you_mean(dim, bound)}; dims: {one_of(bound) or 'none'}",
        )
        return
    _index_samples(r, decl, report)


def _indexable_dims(r: ResolvedOp, decl: TensorDecl) -> list[str]:
    """Dims that a required tensor input other than ``decl`` binds by name, in binding order."""
    optional = set(r.optional_inputs)
    named = set()
    for d in r.op.inputs:
        if d.name != decl.name and d.name not in optional and not d.is_list:
            named |= {e.name for e in d.shape.entries if e != ELLIPSIS and e.name}
    return [n for n, b in r.plan.bound.items() if n in named and not b.derived and not b.optional]


def _index_samples(r: ResolvedOp, decl: TensorDecl, report: Report) -> None:
    """Spelled-out values of an index input are integers in range; a required index input is
    spelled out by every sample or by none; some sample gives it an entry (the out-of-range
    tests need one to corrupt)."""
    name, samples = decl.name, r.op.tests.samples
    spelled = [s for s in samples if isinstance(s.get(name), tuple)]
    if spelled and name not in r.optional_inputs:
        for s in samples:
            if not isinstance(s.get(name), tuple):
                report.error(
                    s.loc,
                    f"sample does not spell out '{name}', which another sample does; a required "
                    "input is spelled out by every sample or by none",
                )
    if spelled and (decl.shape.has_ellipsis or len(decl.shape.entries) != 1):
        report.error(
            spelled[0].loc,
            f"sample spells out index input '{name}' of shape {decl.shape}; only a 1-D input "
            "can be spelled out",
        )
        return
    entries = False
    for s in samples:
        values = s.get(name)
        if isinstance(values, tuple):
            entries = entries or bool(values)
            _index_literal(r, decl, s, values, report)
        elif values is None:
            entries = entries or _drawn_numel(decl, s) != 0
    if not entries:
        report.error(
            decl.indexes_loc,
            f"no test sample gives '{name}' an entry, so the out-of-range index tests would not "
            "run",
        )


def _index_literal(r: ResolvedOp, decl: TensorDecl, sample, values: tuple, report) -> None:
    """Each spelled-out value is an integer in range for the sample's size of the dim."""
    dim, skip = decl.indexes, decl.skips_negative
    size = sample.env().get(dim)
    binding = r.plan.bound[dim]
    binder = r.op.input(binding.tensor)
    if size is None and isinstance(sample.get(binder.name), tuple) and binder.shape.min_rank == 1:
        size = len(sample.get(binding.tensor))  # bound by another spelled-out (1-D) input
    for i, v in enumerate(values):
        if not isinstance(v, int) or isinstance(v, bool):
            report.error(
                sample.loc,
                f"sample gives {decl.name}[{i}] = {v!r}; index values must be integers",
            )
            return
        if size is not None and (v >= size or (v < 0 and not skip)):
            valid = f"0 <= i < {size}" + (", or negative to skip" if skip else "")
            report.error(
                sample.loc,
                f"sample gives {decl.name}[{i}] = {v}, which is out of range for {dim} = {size} "
                f"(valid: {valid})",
            )
            return


def _drawn_numel(decl: TensorDecl, sample) -> int | None:
    """How many entries the tests draw for ``decl`` in ``sample`` (None: not computable)."""
    env, numel = sample.env(), 1
    for e in decl.shape.entries:
        if e == ELLIPSIS:
            for b in sample.batch or ():
                numel *= b
            continue
        try:
            numel *= e.evaluate(env)
        except (EvaluationError, KeyError, IndexError):
            return None
    return numel


# Note [list returns]: a 'Tensor[]' return is a list whose length the fake must know, so its
# output declares 'count': a literal (libraries return '[xq, scale]' typed as a list), an int
# argument (its value, checked >= 0 by the public function), or a 'Tensor[]' input (one tensor per
# element). Each element has the declared shape; with a list input's count, a dim that only list
# inputs give is read from element i of the list that has it (element i of another list only
# where the public function has checked that it is as long as the count's), and 'dtype: <that
# list>' is element i's dtype. The fake allocates each element with new_empty (contiguous).
# List returns are always given and public, and never belong to an operator with a backward or
# an arity pair: autograd.Function does not track tensors inside a list. 'Tensor?[]' and
# 'Tensor[]?' returns are refused where the schema is parsed: no declaration could say which
# elements (or whether the list) the fake returns as None.


def _list_returns(r: ResolvedOp, report: Report) -> None:
    """Note [list returns]: a 'Tensor[]' return says how many tensors it holds with 'count' (an
    integer, an int argument, or a list input), is public and given always, and belongs to an
    operator without a backward (an arity pair's schema refuses it where it is parsed)."""
    op = r.op
    full = op.arity_pair.schema if op.arity_pair is not None else op.forward.schema
    kinds = {ret.name: ret.type for ret in full.returns if ret.name}
    for decl in op.outputs:
        is_list = kinds.get(decl.name) == "Tensor[]"
        if not is_list:
            if decl.count is not None:
                report.error(
                    decl.count_loc,
                    f"output '{decl.name}' has 'count' but its return is not 'Tensor[]'",
                )
            continue
        if decl.count is None:
            report.error(
                decl.loc,
                f"output '{decl.name}' is a 'Tensor[]' return: say how many tensors it holds with "
                "'count: <an integer, an int argument, or a list input>'",
            )
        elif isinstance(decl.count, str):
            _count_source(r, decl, report)
        if op.backward is not None:
            report.error(
                decl.loc,
                f"output '{decl.name}' is a list ('Tensor[]') in an operator with a backward: "
                "autograd.Function does not track tensors inside a list; return a fixed number of "
                "tensors (-> (Tensor a, Tensor b))",
            )
        if not decl.public:
            report.error(
                decl.loc,
                f"output '{decl.name}' is a list ('Tensor[]'), which is always public (an "
                "operator with a list output has no backward to read a saved one); drop "
                "'public: false'",
            )
        if decl.dtype_of is not None and (src := op.input(decl.dtype_of)) is not None:
            if src.is_list and decl.dtype_of != decl.count:
                report.error(
                    decl.loc,
                    f"dtype of list output '{decl.name}' names list input '{decl.dtype_of}', "
                    f"whose elements may differ in dtype; element i takes element i's dtype only "
                    f"where 'count: {decl.dtype_of}'",
                )


def _count_source(r: ResolvedOp, decl, report: Report) -> None:
    """'count' names a required int/SymInt argument or a 'Tensor[]' input of the forward."""
    op, name = r.op, decl.count
    arg = op.forward.schema.argument(name)
    if arg is None:
        names = [
            a.name for a in op.forward.schema.arguments if a.type in ("int", "SymInt", "Tensor[]")
        ]
        report.error(
            decl.count_loc,
            f"'count' of output '{decl.name}' names '{name}', which is not an argument of the "
            f"forward schema{did_you_mean(name, names)}; it is an integer, an int argument or a "
            "list input",
        )
    elif arg.type not in ("int", "SymInt", "Tensor[]"):
        why = ""
        if arg.type in ("int?", "SymInt?", "Tensor[]?"):
            why = f" ('{arg.type}' may be None, which gives no number of tensors)"
        elif arg.type == "Tensor?[]":
            why = " (a None element of a 'Tensor?[]' has nothing to size an output element)"
        report.error(
            decl.count_loc,
            f"'count' of output '{decl.name}' names '{name}' of type '{arg.type}'; it must name "
            f"an 'int' or 'SymInt' argument or a 'Tensor[]' input{why}",
        )
