"""The public function section: the result NamedTuple, the signature and docstring, the checks,
the eager fast path's branch and the call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...resolve.resolved import ResolvedOp
from ...spec.model import Integration, OutputDecl
from ...spec.schema import Argument, Schema
from .base import ForwardCall, OpBuilder, Statement
from .checks import (
    CheckBuilder,
    ConstraintCheck,
    CountCheck,
    IndexCheck,
    LengthCheck,
    ListCheck,
    MutationCheck,
    ScalarCheck,
    TensorCheck,
    VariantCheck,
    count_checks,
    length_checks,
)
from .fast_path import DirectCall
from .notes import Notes
from .signature import Param, doc_type, params


@dataclass(frozen=True, slots=True)
class DocArg:
    name: str
    text: str  # generated from validated names and types
    note: str = ""


@dataclass(frozen=True, slots=True)
class Docstring:
    """``returns``: ``result`` (a NamedTuple of ``outputs``), ``updated`` (None; the inputs
    written in place) or ``side_effects`` (None; the call acts outside its tensors)."""

    returns: Literal["result", "updated", "side_effects"]
    doc: str  # spec text: the op's doc, stripped
    args: tuple[DocArg, ...]
    result: str
    outputs: tuple[DocArg, ...]
    updated: tuple[str, ...] = ()  # the inputs written in place


@dataclass(frozen=True, slots=True)
class PublicView:
    """``call``: ``function`` computes the outputs through the autograd.Function; ``forward``
    calls the forward operator; ``no_grad`` calls it under torch.no_grad (Note [no backward])."""

    name: str
    params: tuple[Param, ...]
    result: str
    result_fields: tuple[Param, ...]
    docstring: Docstring
    checks: tuple[TensorCheck | ListCheck | Statement, ...]
    constraints: tuple[ConstraintCheck, ...]
    scalars: tuple[ScalarCheck, ...]
    variants: tuple[VariantCheck, ...]
    mutated: tuple[MutationCheck, ...]
    call: Literal["function", "forward", "no_grad"]
    forward: ForwardCall | None  # the forward call, for ``forward`` and ``no_grad``
    function: str  # the autograd.Function, for ``function``
    stages: tuple[str, ...]  # the registered operators it is given (Note [stage callables])
    function_args: tuple[str, ...]
    outputs: tuple[str, ...]
    direct: DirectCall | None = None
    indexes: tuple[IndexCheck, ...] = ()
    counts: tuple[CountCheck, ...] = ()
    lengths: tuple[LengthCheck, ...] = ()


class PublicBuilder(OpBuilder):
    def public_params(self) -> tuple[Param, ...]:
        out = list(params(self.fwd))
        pair = self.op.arity_pair
        if pair:
            flag = Param(pair.flag, "bool", True, False)
            names = [p.name for p in out]
            pos = names.index(pair.after) + 1 if pair.after in names else len(out)
            out.insert(pos, flag)
        return tuple(out)

    def docstring(self) -> Docstring:
        op, r = self.op, self.r
        pair = op.arity_pair
        args: list[DocArg] = []
        flag_doc = DocArg(pair.flag, f"also return {', '.join(r.pair_extras)}.") if pair else None
        for a in self.fwd.arguments:
            decl = op.input(a.name)
            if decl is not None:
                dtypes = (
                    f"dtype of ``{decl.same_dtype_as}``"
                    if decl.same_dtype_as
                    else " | ".join(d.torch_name for d in decl.dtypes)
                )
                extra = (", optional" if a.optional else "") + (
                    ", updated in place" if decl.mutated else ""
                )
                args.append(
                    DocArg(a.name, f"``{decl.shape}``, {dtypes}{extra}.", _index_note(decl))
                )
            else:
                variant = op.variant(a.name)
                args.append(DocArg(a.name, f"``{doc_type(a)}``.", _arg_note(a, variant)))
            if pair and pair.after == a.name:
                args.append(flag_doc)
        if pair and pair.after is None:
            args.append(flag_doc)
        outputs = [_return_doc(r, self.fwd, o) for o in self.op.outputs if o.public]
        updated = tuple(d.name for d in op.inputs if d.mutated)
        returns = "result" if r.public_outputs else "updated" if updated else "side_effects"
        return Docstring(
            returns, op.doc or op.name, tuple(args), r.names.result, tuple(outputs), updated
        )

    def view(self, direct: DirectCall | None, notes: Notes) -> tuple[PublicView, list]:
        """The public function, and the module constants its checks compare with."""
        op, r = self.op, self.r
        checks = CheckBuilder(r)
        items, constants = checks.checks()
        public_params = self.public_params()
        call = "function" if op.backward else "forward"
        if call == "forward" and op.integration is not Integration.EAGER:
            call = "no_grad"
        public = PublicView(
            name=r.names.public,
            params=public_params,
            # '-> ()': the public function returns None, as the libraries' wrappers do.
            result=r.names.result if r.public_outputs else "",
            result_fields=tuple(
                Param(o, "Tensor | None", True, None)
                if o in r.pair_extras or op.output(o).when is not None
                else Param(o, "list[Tensor]" if op.output(o).count is not None else "Tensor")
                for o in r.public_outputs
            ),
            docstring=self.docstring(),
            checks=tuple(items),
            constraints=checks.constraints(),
            indexes=checks.indexes(notes),
            counts=count_checks(r),
            lengths=length_checks(r),
            scalars=checks.scalars(public_params),
            variants=checks.variants(),
            mutated=checks.mutated(),
            call=call,
            forward=None if op.backward else self.forward_call(),
            function=r.names.function if op.backward else "",
            stages=tuple(s.names.binding for s in r.stages),
            function_args=tuple(a.name for a in self.fwd.arguments) + ((r.flag,) if r.flag else ()),
            outputs=r.public_outputs,
            direct=direct,
        )
        return public, constants


def _arg_note(a: Argument, variant) -> str:
    """Variant values and defaults, as Python reprs (spec text: printed escaped)."""
    parts = []
    if variant is not None:
        parts.append("One of " + ", ".join(repr(v) for v in variant.values) + ".")
    if a.has_default:
        parts.append(f"Default: ``{a.default_value!r}``.")
    return " ".join(parts)


def _return_doc(r: ResolvedOp, fwd: Schema, o: OutputDecl) -> DocArg:
    """How the docstring describes a public output, and when it is None."""
    dtype = o.dtype.torch_name if o.dtype else f"dtype of ``{o.dtype_of}``"
    when = ""
    if o.name in r.pair_extras:
        when = f" (None unless ``{r.op.arity_pair.flag}``)"
    if o.when is not None:
        arg = fwd.argument(o.when)
        given = (
            "is given"
            if arg is not None and arg.is_tensor
            else "is true"
            if arg is None or arg.type.startswith("bool")
            else "is nonzero"
        )
        when = f" (None unless ``{o.when}`` {given})"
    if o.count is not None:
        arg = fwd.argument(o.count) if isinstance(o.count, str) else None
        count = (
            f"list of tensors, one per element of ``{o.count}``"
            if arg is not None and arg.is_tensor_list
            else f"list of ``{o.count}`` tensors"
        )
        if o.dtype_of is not None and o.dtype_of == o.count:
            dtype = f"dtype of that element of ``{o.dtype_of}``"
        return DocArg(o.name, f"{count}, each ``{o.shape}``, {dtype}.")
    return DocArg(o.name, f"``{o.shape}``, {dtype}{when}.")


def _index_note(decl) -> str:
    """What the docstring says of an index input's entries ("" for any other input)."""
    if not decl.indexes:
        return ""
    negative = ", or negative to skip the slot" if decl.skips_negative else ""
    return f"Entries index ``{decl.indexes}``: ``0 <= i < {decl.indexes}``{negative}."
