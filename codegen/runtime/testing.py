"""Helpers shared by the generated operator tests (not imported by the package itself).

What every operator's tests build on: seeded draws of inputs, the layouts a case gives them
(dense permuted, strided, and those of the incoming gradients), comparisons with the reference
and with the declaration (shapes, dtypes, strides), ``opcheck`` of a registered operator, and
``Suite``, the numeric, gradient, compile and CUDA-graph checks parameterized by an operator's
tables. Its siblings (``_testing_cases`` and ``_testing_edges`` in a generated package) turn
the tables into pytest cases, and check hostile inputs and edge cases.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable

import pytest
import torch
from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def load(ref: str) -> Callable:
    """The function named by ``module:function``."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def randn(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """Seeded standard-normal values, drawn on the CPU so every device sees the same data."""
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=DEVICE, dtype=dtype)


def logsigmoid(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """Negative log-decays, as gates produce them."""
    return torch.nn.functional.logsigmoid(randn(gen, shape, torch.float32)).to(dtype)


def mask(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """A boolean mask with about half of the entries set."""
    return (torch.rand(shape, generator=gen) < 0.5).to(device=DEVICE, dtype=dtype)


def index(
    gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype, bound: int, skip: bool = False
) -> Tensor:
    """Seeded entries of an index input, uniform in ``[0, bound)``; with ``skip`` about a quarter
    of them negative (-1, -2 or -3: any negative entry skips its slot), all of them where
    ``bound`` is 0. Without ``skip`` and with ``bound`` 0 the entries are 0, which the public
    function refuses (no entry is in range)."""
    values = torch.randint(0, max(int(bound), 1), shape, generator=gen)
    if skip:
        negative = -torch.randint(1, 4, shape, generator=gen)
        drop = torch.rand(shape, generator=gen) < 0.25
        values = torch.where(drop | (bound == 0), negative, values)
    return values.to(device=DEVICE, dtype=dtype)


def into_domain(x: Tensor | None, domain: tuple[str, str]) -> Tensor | None:
    """Drawn values clamped into ``domain`` (an init that reaches outside it)."""
    return None if x is None else x.clamp(float(domain[0]), float(domain[1]))


def float32_copies(inputs: dict) -> dict:
    """Independent float32 copies of floating tensors (the reference computes in float32)."""

    def copy(t: Tensor) -> Tensor:
        return t.detach().clone().float() if t.is_floating_point() else t

    return {k: map_tensors(v, copy) for k, v in inputs.items()}


def _inner_pair(t: Tensor) -> tuple[int, int] | None:
    # An empty tensor has no element a kernel could read in the wrong place: no other layout.
    dims = [d for d in range(t.ndim) if t.shape[d] > 1] if t.numel() else []
    return (dims[-2], dims[-1]) if len(dims) >= 2 else None


def can_permute(t) -> bool:
    return isinstance(t, Tensor) and _inner_pair(t) is not None


def dense_permuted(t: Tensor) -> Tensor:
    """The same values in a dense, non-contiguous layout (two innermost non-trivial dims swapped).

    Padded or sliced inputs do not substitute: a stride-preserving allocation from a non-dense
    tensor is already contiguous, so a fake that copies input strides would still pass.
    """
    pair = _inner_pair(t)
    assert pair is not None, f"shape {tuple(t.shape)} has no two dims of size > 1 to permute"
    a, b = pair
    out = t.transpose(a, b).contiguous().transpose(a, b)
    assert not out.is_contiguous() and out.data_ptr() != t.data_ptr()
    return out


def _strided_dim(t: Tensor) -> int | None:
    dims = [d for d in range(t.ndim) if t.shape[d] > 1] if t.numel() else []
    return dims[-1] if dims else None


def can_stride(t) -> bool:
    """A tensor with a dim of size > 1, or a list holding one (each element is strided)."""
    if isinstance(t, list):
        return any(can_stride(v) for v in t)
    return isinstance(t, Tensor) and _strided_dim(t) is not None


def strided(t: Tensor) -> Tensor:
    """The same values in a non-dense layout: every other element of a buffer twice as long in
    the last dim of size > 1 (the only dim of a 1-D tensor), so that dim has a stride of 2.

    The elements in between are poison, not values of ``t``: NaN for floating dtypes, the
    negation for ``bool``, the neighbouring value for integers (in range for an index, wrong in
    place). A kernel that reads the tensor as if it were compact reads them.
    """
    d = _strided_dim(t)
    assert d is not None, f"shape {tuple(t.shape)} has no dim of size > 1 to stride"
    shape = list(t.shape)
    shape[d] *= 2
    buffer = t.new_empty(shape)
    keep = [slice(None)] * t.ndim
    gaps = [slice(None)] * t.ndim
    keep[d], gaps[d] = slice(0, None, 2), slice(1, None, 2)
    out = buffer[tuple(keep)]
    out.copy_(t)
    if t.is_floating_point() or t.is_complex():
        buffer[tuple(gaps)].fill_(float("nan"))
    elif t.dtype == torch.bool:
        buffer[tuple(gaps)].copy_(~t)
    else:
        buffer[tuple(gaps)].copy_(t)
    assert out.stride(d) == 2 * contiguous_strides(t.shape)[d] and not out.is_contiguous()
    return out


def clone_layout(t: Tensor) -> Tensor:
    """A copy of ``t`` with its strides and what lies between its elements.

    ``Tensor.clone`` keeps the strides of a dense tensor only: a ``strided`` one comes back
    contiguous. This copies the storage span ``t`` addresses and views it as ``t`` is viewed.
    """
    copy = t.clone()
    if copy.stride() == t.stride() or t.numel() == 0:
        return copy
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    region = torch.as_strided(t, (span,), (1,), t.storage_offset()).clone()
    return region.as_strided(t.shape, t.stride())


def map_tensors(value, fn: Callable):
    """``fn`` applied to a tensor, or to each tensor of a list (a Tensor[] argument)."""
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, list):
        return [fn(v) if isinstance(v, Tensor) else v for v in value]
    return value


def as_tuple(result) -> tuple[Tensor, ...]:
    """A call's results as a tuple; None (an operator returning nothing, '-> ()') is ()."""
    if result is None:
        return ()
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def expand_lists(results: tuple) -> tuple:
    """``results`` with each list output (a 'Tensor[]' return) replaced by its elements."""
    out: list = []
    for r in results:
        out += list(r) if isinstance(r, (list, tuple)) else [r]
    return tuple(out)


def op_results(op, result) -> tuple:
    """A registered operator's results, one per schema return: a 'Tensor[]' return is one
    list, not as many results as it holds."""
    return (result,) if len(op._schema.returns) == 1 else as_tuple(result)


def assert_close(actual: Tensor, expected: Tensor, atol: float, rtol: float, what: str) -> None:
    if isinstance(actual, list):  # a list argument, compared element by element
        assert isinstance(expected, list) and len(actual) == len(expected), what
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert (a is None) == (e is None), f"{what}[{i}]"
            if a is not None:
                assert_close(a, e, atol, rtol, f"{what}[{i}]")
        return
    shapes = f"{tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.shape == expected.shape, f"{what}: shape {shapes}"
    torch.testing.assert_close(
        actual.float(), expected.float(), atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}"
    )


def clone_inputs(inputs: dict) -> dict:
    """Copies of the tensors of ``inputs`` in their layouts (``clone_layout``)."""
    return {k: map_tensors(v, clone_layout) for k, v in inputs.items()}


def contiguous_strides(shape) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape``."""
    strides, step = [], 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))


def describe(t) -> str:
    """``shape (2, 3), dtype torch.float32, strides (3, 1)`` (and the device) of a tensor."""
    if not isinstance(t, Tensor):
        return f"{type(t).__name__} {t!r}"
    return f"shape {tuple(t.shape)}, dtype {t.dtype}, strides {t.stride()}, device {t.device.type}"


def contract_mismatch(op: str, what: str, expected: str, received: str, hint: str = "") -> str:
    """The message of a result that disagrees with the spec: op, result, expected vs received."""
    return f"{op}: {what}: expected {expected}; received {received}{hint}"


def _empty_hint(expected_numel: int | None, got: Tensor) -> str:
    if got.numel() == 0 and expected_numel != 0:
        return (
            " (a backward that returns an empty tensor for an optional input the caller left out "
            "declares 'absent_gradient: empty' on that input)"
        )
    return ""


def check_layout(op: str, what: str, got, shape, dtype: torch.dtype | None) -> None:
    """``got`` has ``shape``, ``dtype`` (None: any) and contiguous strides, or the test fails
    with a message naming ``op`` and ``what`` with the expected and the received metadata.
    Strides of dims of size 0 or 1 are not compared (they do not address memory)."""
    shape = tuple(int(s) for s in shape)
    strides = contiguous_strides(shape)
    want_dtype = "" if dtype is None else f", dtype {dtype}"
    expected = f"shape {shape}{want_dtype}, strides {strides} (contiguous)"
    if not isinstance(got, Tensor):
        raise AssertionError(contract_mismatch(op, what, expected, describe(got)))
    ok = tuple(got.shape) == shape and (dtype is None or got.dtype == dtype)
    ok = ok and all(got.stride(d) == strides[d] for d in range(got.ndim) if shape[d] > 1)
    if not ok:
        numel = 1
        for size in shape:
            numel *= size
        hint = _empty_hint(numel, got)
        raise AssertionError(contract_mismatch(op, what, expected, describe(got), hint))


def bind(op, named: dict) -> tuple[tuple, dict]:
    """``named`` (argument name -> value) as ``op``'s schema takes it: the positional arguments
    in schema order, the keyword-only ones (after ``*``) by keyword."""
    args, kwargs = [], {}
    for a in op._schema.arguments:
        if a.name not in named:
            raise AssertionError(f"{op._schema.name}: no value for argument '{a.name}'")
        if a.kwarg_only:
            kwargs[a.name] = named[a.name]
        else:
            args.append(named[a.name])
    extra = set(named) - {a.name for a in op._schema.arguments}
    if extra:
        raise AssertionError(f"{op._schema.name}: no argument named {sorted(extra)}")
    return tuple(args), kwargs


def call_op(op, named: dict):
    """Call the registered operator ``op`` with ``named`` bound as its schema says."""
    args, kwargs = bind(op, named)
    return op(*args, **kwargs)


def opcheck(op, named: dict) -> None:
    """A comparison of each real output with the fake's, then ``torch.library.opcheck``.

    ``named`` maps each schema argument to its value; keyword-only ones are passed by keyword.

    The fakes are built from the spec, so a launcher that disagrees with the declaration fails
    here first, with a message naming the operator, the output, and the fake's (expected) against
    the launcher's (received) shape, dtype, strides and device. opcheck's ``test_faketensor``
    compares strides in torch 2.13; torch 2.11 checks only sizes and dtypes there, so this
    comparison also gives every supported torch the same check. Sizes that are data-dependent in
    the fake, and strides of dims of size 0 or 1, are not compared.
    """
    name = op._schema.name
    outputs = [r.name or f"output {i}" for i, r in enumerate(op._schema.returns)]
    args, kwargs = bind(op, named)
    real = op_results(
        op,
        op(
            *(map_tensors(a, clone_layout) for a in args),
            **{k: map_tensors(v, clone_layout) for k, v in kwargs.items()},
        ),
    )
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:

        def fake_of(a):
            return map_tensors(a, lambda t: mode.from_tensor(t, static_shapes=True))

        fake = op_results(
            op, op(*(fake_of(a) for a in args), **{k: fake_of(v) for k, v in kwargs.items()})
        )
    if len(real) != len(fake):
        raise AssertionError(
            f"{name}: the launcher returned {len(real)} result(s), the fake {len(fake)} "
            f"(the schema returns {', '.join(outputs)})"
        )
    pairs = []
    for i, (r, f) in enumerate(zip(real, fake, strict=True)):
        what = outputs[i] if i < len(outputs) else f"output {i}"
        if isinstance(r, list) or isinstance(f, list):
            # A 'Tensor[]' return: as many tensors as the fake, each compared with its own.
            if not (isinstance(r, list) and isinstance(f, list)) or len(r) != len(f):
                raise AssertionError(
                    contract_mismatch(
                        name, what, tensors_held(f) + " (the fake, from the spec)", tensors_held(r)
                    )
                )
            pairs += [(f"{what}[{j}]", rj, fj) for j, (rj, fj) in enumerate(zip(r, f, strict=True))]
        else:
            pairs.append((what, r, f))
    for what, r, f in pairs:
        if r is None or f is None:
            if (r is None) != (f is None):
                raise AssertionError(
                    contract_mismatch(name, what, describe(f) + " (fake)", describe(r))
                )
            continue
        dims = range(r.ndim)
        ok = r.ndim == f.ndim and r.dtype == f.dtype and r.device.type == f.device.type
        ok = ok and all(not isinstance(f.shape[d], int) or f.shape[d] == r.shape[d] for d in dims)
        significant = [d for d in dims if r.shape[d] > 1]
        ok = ok and all(
            not isinstance(f.stride(d), int) or f.stride(d) == r.stride(d) for d in significant
        )
        if not ok:
            numel = f.numel() if isinstance(f.numel(), int) else None
            raise AssertionError(
                contract_mismatch(
                    name,
                    what,
                    describe(f) + " (the fake, from the spec)",
                    describe(r) + " (the launcher)",
                    _empty_hint(numel, r),
                )
            )
    torch.library.opcheck(op, args, kwargs)


def tensors_held(value) -> str:
    """How many tensors a list result holds, or what it is instead."""
    return f"a list of {len(value)} tensors" if isinstance(value, list) else describe(value)


# The layouts a case gives its inputs: compact, one input dense permuted (``permuted-<name>``)
# or strided (``strided-<name>``), or every incoming gradient of a backward call at once.
COMPACT = "compact"
PERMUTED = "permuted-"
STRIDED = "strided-"
GRADS = "permuted-grads"  # every incoming gradient of a backward call permuted at once
STRIDED_GRADS = "strided-grads"  # every incoming gradient strided at once
# The layouts of the incoming gradients only: the inputs stay compact.
GRAD_LAYOUTS = (GRADS, STRIDED_GRADS)


def permutable(inputs: dict, names: Iterable[str] | None = None) -> list[str]:
    """Arguments that ``dense_permuted`` can give a layout differing from the compact one."""
    keep = None if names is None else set(names)
    return [k for k, v in inputs.items() if can_permute(v) and (keep is None or k in keep)]


def stridable(inputs: dict, names: Iterable[str] | None = None) -> list[str]:
    """Arguments that ``strided`` can give a non-dense layout (lists: each element)."""
    keep = None if names is None else set(names)
    return [k for k, v in inputs.items() if can_stride(v) and (keep is None or k in keep)]


def _relayout(layout: str):
    """(what can take it, the function giving it) for a layout's prefix."""
    if layout.startswith(STRIDED):
        return can_stride, lambda v: map_tensors(v, strided)
    assert layout.startswith(PERMUTED), layout
    return can_permute, dense_permuted


def with_layout(args: dict, layout: str, grads: Iterable[str] = ()) -> dict:
    """``args`` with the argument that ``layout`` names in a dense permuted or strided layout.

    ``"compact"`` leaves them alone; ``"permuted-<name>"`` (``dense_permuted``) and
    ``"strided-<name>"`` (``strided``, each element of a list) relayout that argument only;
    ``"permuted-grads"`` and ``"strided-grads"`` each of ``grads`` that can take the layout.
    Where the arguments are only known after the forward (incoming gradients, saved outputs)
    and none can take it, the test is skipped, not passed.
    """
    if layout == COMPACT:
        return args
    can, relayout = _relayout(layout)
    if layout in GRAD_LAYOUTS:
        names = [k for k in grads if can(args[k])]
        if not names:
            pytest.skip(f"no incoming gradient of {list(grads)} can take the layout {layout}")
    else:
        names = [layout[len(PERMUTED if layout.startswith(PERMUTED) else STRIDED) :]]
        assert names[0] in args, f"{layout}: no argument {names[0]!r} in {list(args)}"
        if not can(args[names[0]]):
            pytest.skip(f"{names[0]} ({describe(args[names[0]])}) cannot take the layout {layout}")
    return {k: relayout(v) if k in names else v for k, v in args.items()}


class _GradLayout(torch.autograd.Function):
    """The identity, whose backward hands on the incoming gradient in a layout."""

    @staticmethod
    def forward(ctx, x: Tensor, layout: str) -> Tensor:
        ctx.layout = layout
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _relayout(ctx.layout)[1](grad), None


def check_layout_results(op, args: dict, laid: dict, atol: float, rtol: float) -> None:
    """``op`` on ``laid`` (``args`` in another layout, the same values) returns what it
    returns on ``args``: a kernel that reads an argument as if it were compact fails."""
    name = op._schema.name
    outputs = [r.name or f"output {i}" for i, r in enumerate(op._schema.returns)]
    want = as_tuple(call_op(op, clone_inputs(args)))
    got = as_tuple(call_op(op, clone_inputs(laid)))
    relaid = [k for k in args if laid[k] is not args[k]]
    for what, g, w in zip(outputs, got, want, strict=True):
        assert (g is None) == (w is None), f"{name}: {what}"
        if g is not None:
            assert_close(g, w, atol, rtol, f"{name}: {what} with {', '.join(relaid)} relaid")


class Suite:
    """The checks every generated operator test runs, parameterized by the operator's tables.

    ``make_inputs(sample, dtype, config)`` builds the public function's keyword arguments,
    compact; ``inputs`` gives them a layout (see ``with_layout``); ``configs`` maps a configuration id to variant values, the presence of optional
    inputs and the arity flag (named ``flag``, or None without an arity pair).
    """

    def __init__(
        self,
        *,
        fn: Callable,
        reference: Callable,
        make_inputs: Callable,
        configs: dict,
        flag: str | None,
        public_outputs: tuple[str, ...],
        differentiable: tuple[str, ...],
        mutated: tuple[str, ...],
        tolerance: dict,
        grad_tolerance: dict,
        seed: int,
        op: str = "",
        reference_returns: tuple[str, ...] | None = None,
        output_dtypes: dict | None = None,
        output_counts: dict | None = None,
    ) -> None:
        self.fn = fn
        self.reference = reference
        self.make_inputs = make_inputs
        self.configs = configs
        self.flag = flag
        self.public_outputs = public_outputs
        self.differentiable = differentiable
        self.mutated = mutated
        self.tolerance = tolerance
        self.grad_tolerance = grad_tolerance
        self.seed = seed
        self.op = op or getattr(fn, "__name__", "op")
        # What the reference returns, in its order (the spec's reference_returns).
        self.reference_returns = (
            tuple(reference_returns) if reference_returns is not None else tuple(public_outputs)
        )
        # Each public output's dtype: a torch.dtype, or the name of the input whose dtype it takes.
        self.output_dtypes = dict(output_dtypes or {})
        # Each list output ('Tensor[]') and its count: an integer, or the name of the int
        # argument or list input that gives it.
        self.output_counts = dict(output_counts or {})

    def inputs(self, sample: str, dtype: str, layout: str, config: str) -> dict:
        """The inputs in ``layout``; compact for a layout of the incoming gradients."""
        inputs = self.make_inputs(sample, dtype, config)
        return inputs if layout in GRAD_LAYOUTS else with_layout(inputs, layout)

    def call(self, fn: Callable, inputs: dict, config: str) -> tuple:
        """Call the public function (or the reference) the way a user would."""
        flags = {self.flag: self.configs[config][self.flag]} if self.flag else {}
        return as_tuple(fn(**inputs, **flags))

    def reference_outputs(self, inputs: dict, config: str) -> tuple:
        """The reference's public outputs, in the order of ``public_outputs``."""
        flags = {self.flag: self.configs[config][self.flag]} if self.flag else {}
        return self._public_of_reference(self.reference(**inputs, **flags))

    def reference_public(self, **kwargs) -> tuple:
        """The reference called like the public function, returning its public outputs."""
        return self._public_of_reference(self.reference(**kwargs))

    def _public_of_reference(self, results) -> tuple:
        """The reference returns the outputs that ``reference_returns`` names, in that order; one
        result more or fewer fails with both lists instead of being matched up by position. A
        reference of one list output returns that list."""
        if len(self.reference_returns) == 1 and self.reference_returns[0] in self.output_counts:
            results = (results,)
        results = as_tuple(results)
        if len(results) != len(self.reference_returns):
            got = "; ".join(describe(r) for r in results)
            raise AssertionError(
                f"{self.op}: the reference returned {len(results)} result(s), but "
                f"reference_returns declares {len(self.reference_returns)}: "
                f"{', '.join(self.reference_returns)}; received: {got} (declare what the "
                "reference returns, in its order, with 'reference_returns')"
            )
        by_name = dict(zip(self.reference_returns, results, strict=True))
        return tuple(by_name[name] for name in self.public_outputs)

    def output_dtype(self, name: str, inputs: dict) -> torch.dtype | None:
        """The declared dtype of public output ``name`` for these inputs (None: not declared)."""
        d = self.output_dtypes.get(name)
        if d is None or isinstance(d, torch.dtype):
            return d
        return inputs[d].dtype

    def check_results(self, out: tuple, reference: tuple, inputs: dict) -> None:
        """The public function's results against the declaration: one per public output, each
        shaped like the reference's, of the declared dtype, contiguous."""
        if len(out) != len(self.public_outputs):
            raise AssertionError(
                f"{self.op}: the public function returned {len(out)} result(s); the spec declares "
                f"{len(self.public_outputs)} public output(s): {', '.join(self.public_outputs)}"
            )
        for name, got, want in zip(self.public_outputs, out, reference, strict=True):
            if (got is None) != (want is None):
                raise AssertionError(
                    contract_mismatch(self.op, f"output {name}", describe(want), describe(got))
                )
            if name in self.output_counts:
                check_list_output(self, name, got, want, inputs)
            elif got is not None:
                what = f"output {name}"
                check_layout(self.op, what, got, want.shape, self.output_dtype(name, inputs))

    def loss_and_grads(
        self, fn: Callable, inputs: dict, config: str, gen, weights=None, grad_layout=COMPACT
    ):
        """Outputs, the projection weights, and gradients of a random projection of the outputs.

        ``grad_layout`` (one of ``GRAD_LAYOUTS``) gives the incoming gradient of each output that
        can take it that layout on its way into ``fn``'s backward.
        """
        names = [k for k in self.differentiable if inputs[k] is not None]
        assert names, f"no differentiable input of {self.differentiable} is given"
        leaves = {k: inputs[k].detach().requires_grad_() for k in names}
        out = self.call(fn, {**inputs, **leaves}, config)
        present = [o for o in expand_lists(out) if o is not None]
        if grad_layout != COMPACT:
            can, _ = _relayout(grad_layout)
            if not any(o.requires_grad and can(o) for o in present):
                pytest.skip(f"no output that needs a gradient can take the layout {grad_layout}")
            present = [
                _GradLayout.apply(o, grad_layout) if o.requires_grad and can(o) else o
                for o in present
            ]
        if weights is None:
            weights = [randn(gen, o.shape, torch.float32) for o in present]
        loss = sum((o.float() * w).sum() for o, w in zip(present, weights, strict=True))
        grads = torch.autograd.grad(loss, [leaves[k] for k in names])
        return out, weights, dict(zip(names, grads, strict=True))

    def check_forward(self, sample: str, dtype: str, layout: str, config: str) -> None:
        inputs = self.inputs(sample, dtype, layout, config)
        expected_inputs = float32_copies(inputs)
        out = self.call(self.fn, inputs, config)
        expected = self.reference_outputs(expected_inputs, config)
        self.check_results(out, expected, inputs)
        assert any(o is not None for o in out) or self.mutated, "no output to compare"
        atol, rtol = self.tolerance[dtype]
        for name, got, want in zip(self.public_outputs, out, expected, strict=True):
            if got is not None:
                assert_close(got, want, atol, rtol, name)
        for name in self.mutated:
            if inputs[name] is None:  # an optional input updated in place, left out
                assert expected_inputs[name] is None, name
                continue
            assert_close(inputs[name], expected_inputs[name], atol, rtol, f"{name} after the call")

    def check_gradients(self, sample: str, dtype: str, layout: str, config: str) -> None:
        """Gradients against the reference's, with the inputs in ``layout``, or with the
        incoming gradients in it (a layout of ``GRAD_LAYOUTS``)."""
        inputs = self.inputs(sample, dtype, layout, config)
        gen = torch.Generator().manual_seed(self.seed + 2)
        grad_layout = layout if layout in GRAD_LAYOUTS else COMPACT
        _, weights, grads = self.loss_and_grads(self.fn, inputs, config, gen, None, grad_layout)
        reference = float32_copies(inputs)
        _, _, expected = self.loss_and_grads(self.reference_public, reference, config, gen, weights)
        atol, rtol = self.grad_tolerance[dtype]
        assert grads.keys() == expected.keys()
        for name, got in grads.items():
            x = inputs[name]
            check_layout(self.op, f"gradient of {name}", got, x.shape, x.dtype)
            assert_close(got, expected[name], atol, rtol, f"grad of {name}")

    def check_varlen(self, sample, config, dtype, offsets, packed_dim, per_sequence) -> None:
        """A packed batch must equal running each of its sequences on its own."""
        inputs = self.make_inputs(sample, dtype, config)
        packed = self.call(self.fn, inputs, config)
        bounds = inputs[offsets].tolist()
        assert len(bounds) >= 3, f"{sample} packs {len(bounds) - 1} sequence(s); varlen needs 2"
        atol, rtol = self.tolerance[dtype]
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            single = {}
            for name, value in inputs.items():
                if name == offsets:
                    single[name] = None
                elif not isinstance(value, Tensor):
                    single[name] = value
                elif name in per_sequence:
                    single[name] = value[i : i + 1]
                elif name in packed_dim:
                    single[name] = value.narrow(packed_dim[name], lo, hi - lo)
                else:
                    single[name] = value
            alone = self.call(self.fn, single, config)
            for name, whole, part in zip(self.public_outputs, packed, alone, strict=True):
                if whole is None:
                    assert part is None, name
                    continue
                if name in per_sequence:
                    want = whole[i : i + 1]
                else:
                    want = whole.narrow(packed_dim[name], lo, hi - lo)
                assert_close(part, want, atol, rtol, f"{name} of sequence {i}")

    def check_compile(self, compiled, sample, config, dtype, gradients: bool) -> None:
        """A fullgraph-compiled call (and its backward) against eager."""
        inputs = self.make_inputs(sample, dtype, config)
        eager_inputs = clone_inputs(inputs)
        if gradients:
            gen = torch.Generator().manual_seed(self.seed + 3)
            out, weights, grads = self.loss_and_grads(compiled, inputs, config, gen)
            eager_out, _, eager_grads = self.loss_and_grads(
                self.fn, eager_inputs, config, gen, weights
            )
            assert grads.keys() == eager_grads.keys()
            for name, got in grads.items():
                assert_close(got, eager_grads[name], 1e-5, 1e-5, f"compiled grad of {name}")
        else:
            out = self.call(compiled, inputs, config)
            eager_out = self.call(self.fn, eager_inputs, config)
        for name, got, want in zip(self.public_outputs, out, eager_out, strict=True):
            assert (got is None) == (want is None), name
            if got is not None:
                assert_close(got, want, 1e-5, 1e-5, f"compiled {name}")
        for name in self.mutated:
            if inputs[name] is not None:
                assert_close(inputs[name], eager_inputs[name], 1e-5, 1e-5, f"{name} after compile")

    def check_cuda_graph(self, sample: str, config: str, dtype: str, gradients: bool) -> None:
        """Capture forward (and backward), replay on new values, compare with eager."""
        if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"):
            # Without the caching allocator every allocation is a cudaMalloc, which a stream
            # being captured does not permit: the capture fails whatever the operator does.
            pytest.skip(
                "CUDA graphs need PyTorch's caching allocator "
                "(PYTORCH_NO_CUDA_MEMORY_CACHING is set)"
            )
        static = self.make_inputs(sample, dtype, config)
        fresh = {
            k: v * 0.5 if isinstance(v, Tensor) and v.is_floating_point() else v
            for k, v in self.make_inputs(sample, dtype, config).items()
        }
        names = [k for k in self.differentiable if static[k] is not None] if gradients else []
        for k in names:
            static[k].requires_grad_()

        def step(inputs: dict):
            present = [o for o in expand_lists(self.call(self.fn, inputs, config)) if o is not None]
            if not names:
                return present, ()
            loss = sum(o.float().sum() for o in present)
            return present, torch.autograd.grad(loss, [inputs[k] for k in names])

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_out, graph_grads = step(static)
        with torch.no_grad():
            for k, v in fresh.items():
                if isinstance(v, Tensor):
                    static[k].copy_(v)
        expected_inputs = clone_inputs(fresh)
        for k in names:
            expected_inputs[k] = expected_inputs[k].detach().requires_grad_()
        graph.replay()
        torch.cuda.synchronize()
        out, grads = step(expected_inputs)
        assert graph_out or self.mutated, "the captured step returned nothing to compare"
        for got, want in zip(graph_out, out, strict=True):
            assert_close(got, want, 1e-5, 1e-5, "graph replay output")
        for got, want in zip(graph_grads, grads, strict=True):
            assert_close(got, want, 1e-5, 1e-5, "graph replay gradient")
        for name in self.mutated:
            if static[name] is not None:
                assert_close(
                    static[name], expected_inputs[name], 1e-5, 1e-5, f"{name} after replay"
                )


def expected_count(suite: Suite, name: str, inputs: dict) -> int:
    """How many tensors list output ``name`` holds for these inputs, as declared."""
    count = suite.output_counts[name]
    if isinstance(count, int):
        return count
    value = inputs[count]
    return len(value) if isinstance(value, (list, tuple)) else int(value)


def check_list_output(suite: Suite, name: str, got, want, inputs: dict) -> None:
    """A list output: a list of the declared count, each element shaped like the reference's,
    of the declared dtype (element i's of a list input), contiguous."""
    count = expected_count(suite, name, inputs)
    if not isinstance(got, list) or len(got) != count:
        raise AssertionError(
            contract_mismatch(
                suite.op, f"output {name}", f"a list of {count} tensors", tensors_held(got)
            )
        )
    if not isinstance(want, (list, tuple)) or len(want) != count:
        raise AssertionError(
            f"{suite.op}: the reference returned {tensors_held(want)} for output {name}; the spec "
            f"declares a list of {count} tensors"
        )
    source = suite.output_dtypes.get(name)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if isinstance(source, str) and isinstance(inputs.get(source), (list, tuple)):
            dtype = inputs[source][i].dtype
        else:
            dtype = suite.output_dtype(name, inputs)
        check_layout(suite.op, f"output {name}[{i}]", g, w.shape, dtype)
