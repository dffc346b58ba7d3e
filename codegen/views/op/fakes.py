"""The fakes section: one ``register_fake`` function per registered operator, allocating each
output from the dims its inputs give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...resolve.backward_fake import backward_tensors, dtype_source
from ...resolve.backward_fake import reads as backward_reads
from ...resolve.dims import element_dims
from ...resolve.resolved import ResolvedStage
from ...spec.model import OutputDecl
from ...spec.schema import Schema
from ...spec.shapes import ELLIPSIS
from .base import OpBuilder, Statement, shape_expr, tuple_expr
from .notes import NoteRef, Notes
from .signature import Param, params, returns_annotation


@dataclass(frozen=True, slots=True)
class Alloc:
    """One output of a fake, ``base.new_empty(shape, dtype=dtype)``.

    ``kind``: ``plain``; ``optional``, a 'Tensor?' return allocated only when ``test`` holds;
    ``empty_without``, a gradient declared 'absent_gradient: empty', shape (0,) when the
    optional input ``test`` is None; ``list`` (Note [list returns]), ``count`` tensors, element
    ``_i`` allocated by ``shape`` and ``dtype`` (which may read element ``_i`` of a list input).
    """

    kind: Literal["plain", "optional", "empty_without", "list"]
    name: str
    base: str  # the tensor whose device the output takes
    shape: str  # a tuple expression
    dtype: str | None  # None: the dtype of ``base``
    test: str = ""
    count: str = ""
    note: NoteRef | None = None  # Note [list returns]


@dataclass(frozen=True, slots=True)
class FakeView:
    qualname: str
    name: str
    params: tuple[Param, ...]
    annotation: str
    dims: tuple[Statement, ...]
    dynamic: tuple[str, ...]  # data-dependent sizes: one unbacked symbol each
    allocs: tuple[Alloc, ...]
    returns: tuple[str, ...]


class FakeBuilder(OpBuilder):
    def fake(self, s: ResolvedStage, notes: Notes) -> FakeView:
        if s.kind == "bwd":
            dims, dynamic, allocs, returns = self._backward_fake(s.schema)
        else:
            dims, dynamic, allocs, returns = self._forward_fake(s.outputs, notes)
        return FakeView(
            qualname=s.names.qualname,
            name=s.names.fake,
            params=params(s.schema),
            annotation=returns_annotation(s.schema),
            dims=dims,
            dynamic=dynamic,
            allocs=allocs,
            returns=returns,
        )

    def _forward_fake(self, outputs: tuple[OutputDecl, ...], notes: Notes):
        needed: set[str] = set()
        batch = False
        dynamic = [name for name, _ in self.op.dynamic_dims]
        for out in outputs:
            names, b = self.needs(out.shape)
            needed |= names
            batch |= b
        dims = self.dim_reads(needed - set(dynamic), batch, None)
        tensors = [t.name for t in self.plan.tensors]
        if not tensors:  # only list inputs: the public function refuses an empty first list
            tensors = [next(f"{d.name}[0]" for d in self.op.inputs if d.is_list)]
        base = self.alloc_base(tensors)
        allocs = tuple(self._list_alloc(o, base, notes) or self._alloc(o, base) for o in outputs)
        return (
            tuple(dims),
            tuple(n for n in dynamic if n in needed),
            allocs,
            tuple(o.name for o in outputs),
        )

    def _alloc(self, o: OutputDecl, base: str) -> Alloc:
        shape = shape_expr(o.shape, self.batch)
        dtype = self.dtype(o.dtype, o.dtype_of, base)
        if o.when is None:
            return Alloc("plain", o.name, base, shape, dtype)
        # A 'Tensor?' return is given when its ``when`` argument is.
        arg = self.fwd.argument(o.when)
        test = f"{o.when} is not None" if arg is not None and arg.is_tensor else o.when
        return Alloc("optional", o.name, base, shape, dtype, test=test)

    def _list_alloc(self, o: OutputDecl, base: str, notes: Notes) -> Alloc | None:
        """Note [list returns]: a 'Tensor[]' output allocates ``count`` tensors; where the count
        is a list input's length, element ``_i`` reads its own dims (and dtype) from element
        ``_i`` of the list inputs that give them."""
        if o.count is None:
            return None
        per_element = element_dims(self.op, o, set(self.plan.bound) | self.scalar_names())
        rename = {n: f"{lst}[_i].shape[{idx}]" for n, (lst, idx) in per_element.items()}
        shape = tuple_expr(
            [f"*{self.batch}" if e == ELLIPSIS else e.render(rename) for e in o.shape.entries]
        )
        source = self.op.input(o.count) if isinstance(o.count, str) else None
        if source is not None and source.is_list:
            count = f"len({o.count})"
            dtype = f"{o.dtype_of}[_i].dtype" if o.dtype_of == o.count else None
        else:
            count, dtype = str(o.count), None
        dtype = dtype or self.dtype(o.dtype, o.dtype_of, base)
        return Alloc(
            "list", o.name, base, shape, dtype, count=count, note=notes.ref("list returns")
        )

    def _backward_fake(self, schema: Schema):
        available = [a.name for a in schema.arguments if a.is_tensor and not a.optional]
        base = self.alloc_base(available)
        tensors = backward_tensors(self.op)
        needed: set[str] = set()
        batch = False
        allocs = []
        for g in self.r.gradients:
            target = self.op.input(g.input)
            if target.name in available:
                allocs.append(Alloc("plain", g.name, target.name, f"{target.name}.shape", None))
                continue
            names, b = self.needs(target.shape)
            needed |= names
            batch |= b
            dtype = self._gradient_dtype(target, tensors)
            shape = shape_expr(target.shape, self.batch)
            if target.absent_gradient == "empty":
                allocs.append(Alloc("empty_without", g.name, base, shape, dtype, test=target.name))
            else:
                allocs.append(Alloc("plain", g.name, base, shape, dtype))
        dims = self._backward_reads(tensors, needed, batch)
        return tuple(dims), (), tuple(allocs), tuple(g.name for g in self.r.gradients)

    def _backward_reads(self, tensors, needed: set[str], batch: bool) -> list[Statement]:
        """Note [backward fake sources] (resolve/backward_fake.py): each dim from any tensor the
        backward takes that has it, incoming gradients and saved outputs included."""
        found = backward_reads(self.op, self.plan, tensors, needed, batch)
        out = [Statement(self.batch, found.batch)] if found.batch else []
        return out + [Statement(name, value) for name, value in found.dims]

    def _gradient_dtype(self, target, tensors) -> str:
        """The dtype of a gradient whose input the backward does not take: the declared one, else
        that of a backward tensor declared to have the input's dtype."""
        same = target.same_dtype_as
        if same is not None and same in tensors.shapes:
            return f"{same}.dtype"
        if same is None and len(target.dtypes) == 1:
            return f"torch.{target.dtypes[0].torch_name}"
        source = dtype_source(self.op, tensors, target.name)
        if source is not None:
            return f"{source}.dtype"
        # Refused by validation; written as before so that views never fail.
        return f"{same}.dtype" if same is not None else f"torch.{target.dtypes[0].torch_name}"
