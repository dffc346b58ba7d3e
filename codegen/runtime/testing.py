"""Helpers shared by the generated operator tests (not imported by the package itself)."""

from __future__ import annotations

import importlib
import itertools
import math
import os
import re
import subprocess
import sys
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
                        name, what, _count(f) + " (the fake, from the spec)", _count(r)
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


def _count(value) -> str:
    """How many tensors a list result holds, or what it is instead."""
    return f"a list of {len(value)} tensors" if isinstance(value, list) else describe(value)


def broken(value, how: str):
    """``value`` made invalid in the way ``how`` names (see ``Suite.check_rejects``).

    A list of tensors is broken in its first element.
    """
    if how == "negative":  # an int argument that gives a list output's count
        return -1
    wrong = _scalar_broken(value, how)
    if wrong is not _NOT_SCALAR:
        return wrong
    if isinstance(value, list) and how != "type":
        return [broken(value[0], how), *value[1:]]
    if how.startswith("dtype-"):
        name = how[len("dtype-") :]
        if name == "other":
            return value.to(torch.float64 if value.dtype != torch.float64 else torch.float32)
        return value.to(getattr(torch, name))
    if how == "rank-plus-one":
        return value.unsqueeze(0)
    if how == "rank-one":
        return value.reshape(-1)
    if how == "type":
        return object()
    if how == "value":
        return "not-a-variant" if isinstance(value, str) else -12345
    raise ValueError(how)


# A value of each kind, as the ``type-<kind>`` and ``element-<kind>`` ways of breaking a scalar
# argument name it (Note [scalar types] in _runtime says what each schema type refuses).
WRONG_VALUES = {"bool": True, "int": 1, "float": 1.5, "complex": 1j, "str": "x", "none": None}
_NOT_SCALAR = object()


def _scalar_broken(value, how: str):
    """``type-<kind>``: a value of that kind instead; ``element-<kind>``: the first element of a
    list so replaced; ``length``: a fixed-size list one element longer. Else ``_NOT_SCALAR``."""
    kind = how.partition("-")[2]
    if how.startswith("type-"):
        return WRONG_VALUES[kind]
    if how.startswith("element-"):
        items = list(value)
        return [WRONG_VALUES[kind], *items[1:]]
    if how == "length":
        return [*value, value[0]]
    return _NOT_SCALAR


# --- case tables -------------------------------------------------------------------------
#
# A generated test module holds its operator's tables (samples, dtypes, tolerances, the axes of
# its configurations, how to break each argument) and builds its pytest cases from them here,
# at import time, so that one more sample or dtype in the spec is one more table row.

COMPACT = "compact"
PERMUTED = "permuted-"
STRIDED = "strided-"
GRADS = "permuted-grads"  # every incoming gradient of a backward call permuted at once
STRIDED_GRADS = "strided-grads"  # every incoming gradient strided at once
# The layouts of the incoming gradients only: the inputs stay compact.
GRAD_LAYOUTS = (GRADS, STRIDED_GRADS)


def configs(variants: dict, optional: Iterable[str] = (), flag: str | None = None) -> dict:
    """Every configuration: each variant value x each optional input given or None x the flag.

    The first value of each axis is the default (variants list the schema default first;
    optional inputs are given, the flag is on); the first configuration, ``"default"``, takes
    every default, and the id of any other names where it departs from it: the variant value,
    ``no_<input>``, ``no_<flag>``.
    """
    axes: list[list[tuple[str | None, str, object]]] = []
    for name, values in variants.items():
        axes.append(
            [(None if i == 0 else _value_id(name, v), name, v) for i, v in enumerate(values)]
        )
    for name in optional:
        axes.append([(None, name, True), (f"no_{name}", name, False)])
    if flag is not None:
        axes.append([(None, flag, True), (f"no_{flag}", flag, False)])
    out = {}
    for combo in itertools.product(*axes):
        cid = "-".join(part for part, _, _ in combo if part) or "default"
        out[cid] = {name: value for _, name, value in combo}
    return out


def _value_id(name: str, value) -> str:
    return value if isinstance(value, str) else f"{name}{value}"


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


def case_id(*parts: str) -> str:
    return "-".join(parts)


def cases(
    samples: dict,
    dtypes: Iterable[str],
    configs: dict,
    make_inputs: Callable,
    names: Iterable[str] | None = None,
    extra_layouts: Iterable[str] = (),
) -> list:
    """``pytest.param(sample, dtype, layout, config)`` for every run of the numeric tests.

    Per sample and dtype: every configuration on compact inputs, then, on the default
    configuration, one dense permuted layout per input of ``names`` (default: every input) that
    ``make_inputs(sample, dtype, config)`` builds with two dims of size > 1, then
    ``extra_layouts``. On the first dtype only, also one strided layout per input of ``names``
    with a dim of size > 1 (1-D inputs and list elements included), on the first sample that
    gives it a value: strides are a property of the kernel's indexing, which one sample shows.
    Ids read ``<dtype>-<sample>-<layout>-<config>``.
    """
    dtypes = list(dtypes)
    default = next(iter(configs))
    out = []
    strided_already: set[str] = set()
    for sample in samples:
        inputs = make_inputs(sample, dtypes[0], default)
        layouts = [PERMUTED + n for n in permutable(inputs, names)] + list(extra_layouts)
        to_stride = [n for n in stridable(inputs, names) if n not in strided_already]
        strided_already.update(to_stride)
        for j, dtype in enumerate(dtypes):
            runs = [(COMPACT, c) for c in configs] + [(lay, default) for lay in layouts]
            if j == 0:
                runs += [(STRIDED + n, default) for n in to_stride]
            out += [
                pytest.param(sample, dtype, lay, c, id=case_id(dtype, sample, lay, c))
                for lay, c in runs
            ]
    return out


def first_cases(
    samples: dict, dtypes: Iterable[str], configs: dict, layouts: Iterable[str], config=None
):
    """``pytest.param(sample, dtype, layout, config)`` of each of ``layouts`` on the first
    sample and dtype and the default configuration, or ``config`` (layouts of what only exists
    after the forward: incoming gradients, saved outputs)."""
    sample, dtype = next(iter(samples)), next(iter(dtypes))
    config = next(iter(configs)) if config is None else config
    return [
        pytest.param(sample, dtype, lay, config, id=case_id(dtype, sample, lay, config))
        for lay in layouts
    ]


def default_cases(cases: list) -> list:
    """``cases`` with those a consistency check need not run by default marked ``slow``.

    Kept by default, on the first dtype: every sample and configuration on compact inputs and
    each dense permuted layout once (on the first sample that has it); on every other dtype the
    first compact case. Strided layouts and the rest of the dtypes are marked, and ``--full``
    runs them. Used for opcheck and for the eager fast path against the dispatcher: the numeric
    tests against the reference run every case, and what these two compare (the registration,
    the path a call takes) changes with a layout only through the strides the fake and the
    kernel are handed.
    """
    if not cases:
        return cases
    first_dtype = cases[0].values[1]
    kept: set = set()
    out = []
    for case in cases:
        _, dtype, layout, _ = case.values
        if dtype == first_dtype:
            key = None if layout == COMPACT else layout
            keep = layout == COMPACT or (layout.startswith(PERMUTED) and key not in kept)
        else:
            key = (dtype,)
            keep = layout == COMPACT and key not in kept
        if keep:
            if key is not None:
                kept.add(key)
            out.append(case)
        else:
            out.append(
                pytest.param(*case.values, id=case.id, marks=[*case.marks, pytest.mark.slow])
            )
    return out


def saved_layouts(saved: Iterable[str]) -> list[str]:
    """A dense permuted and a strided layout of each saved output a backward takes."""
    return [prefix + name for name in saved for prefix in (PERMUTED, STRIDED)]


def saved_cases(
    samples: dict, dtypes: Iterable[str], configs: dict, saved: Iterable[str], variants: dict
) -> list:
    """:func:`first_cases` of each saved output's layouts on the default configuration and on
    each one departing from it by a single variant value: a variant may change what the forward
    saves (``chunk_gla`` keeps its chunk states only with ``save_states=True``; where a saved
    output is empty, ``with_layout`` skips the case)."""
    layouts = saved_layouts(saved)
    if not layouts:
        return []
    ids = [None] + [_value_id(n, v) for n, values in variants.items() for v in values[1:]]
    return [case for c in ids for case in first_cases(samples, dtypes, configs, layouts, c)]


def present_in(samples: dict, dtype: str, config: str, make_inputs: Callable, name: str) -> str:
    """The first sample whose inputs give ``name`` a value (an optional input may be literal)."""
    for sample in samples:
        if make_inputs(sample, dtype, config).get(name) is not None:
            return sample
    raise AssertionError(f"no sample gives {name!r} a value")


def reject_cases(rejects: dict, samples: dict, dtype: str, configs: dict, make_inputs) -> list:
    """``pytest.param(sample, name, how)`` for each way ``rejects`` breaks each argument."""
    default = next(iter(configs))

    def sample_for(name: str, how: str) -> str:
        # A value of the wrong type replaces whatever the argument held, None included.
        if how == "type" or how.startswith("type-"):
            return next(iter(samples))
        return present_in(samples, dtype, default, make_inputs, name)

    return [
        pytest.param(sample_for(name, how), name, how, id=f"{name}-{how}")
        for name, hows in rejects.items()
        for how in hows
    ]


def compile_cases(samples: dict, configs: dict) -> list:
    """Every configuration on the first sample; the second sample reuses the dynamic graph."""
    names = list(samples)
    runs = [(names[0], c) for c in configs]
    if len(names) > 1:
        runs.append((names[1], next(iter(configs))))
    return [pytest.param(s, c, id=case_id(s, c)) for s, c in runs]


def varlen_samples(samples: dict, offsets: str) -> list[str]:
    """The samples that pack sequences (they spell out ``offsets``)."""
    return [name for name, s in samples.items() if s.get(offsets) is not None]


def rejection_pattern(op: str, name: str) -> str:
    """A message about argument ``name`` of ``op``: ``"<op>: <name> must ..."`` (or, for a
    list, about one of its elements: ``"<op>: <name>[0] must ..."``)."""
    return rf"^{re.escape(op)}: {re.escape(name)}(\[\d+\])? "


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

    def _reference_public(self, **kwargs) -> tuple:
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

    def check_rejects(self, sample: str, config: str, name: str, how: str, op_name: str) -> None:
        """The public function refuses the bad argument, as the subject of its message.

        The message must read ``"<op>: <name> ..."``: naming the argument anywhere would let
        another argument's check (``"k must have the dtype of q"``) stand in for a missing one.
        """
        inputs = self.make_inputs(sample, next(iter(self.tolerance)), config)
        if self.flag:  # the arity flag is broken like any argument
            inputs[self.flag] = self.configs[config][self.flag]
        replaced = how == "type" or how.startswith("type-")
        assert replaced or inputs[name] is not None, f"{sample} gives {name} no value to break"
        inputs[name] = broken(inputs[name], how)
        with pytest.raises((TypeError, ValueError), match=rejection_pattern(op_name, name)):
            self.fn(**inputs)

    def check_gradients(self, sample: str, dtype: str, layout: str, config: str) -> None:
        """Gradients against the reference's, with the inputs in ``layout``, or with the
        incoming gradients in it (a layout of ``GRAD_LAYOUTS``)."""
        inputs = self.inputs(sample, dtype, layout, config)
        gen = torch.Generator().manual_seed(self.seed + 2)
        grad_layout = layout if layout in GRAD_LAYOUTS else COMPACT
        _, weights, grads = self.loss_and_grads(self.fn, inputs, config, gen, None, grad_layout)
        reference = float32_copies(inputs)
        _, _, expected = self.loss_and_grads(
            self._reference_public, reference, config, gen, weights
        )
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


def check_side_effects(suite: Suite, compiled, launchers: dict, sample: str, dtype: str) -> None:
    """Note [side effects]: an operator declared ``side_effects: true`` reaches its forward
    launcher once per call, eager and fullgraph-compiled alike (torch.compile drops a call
    of an operator that returns nothing unless it is registered as having side effects).
    ``launchers`` maps a device to the forward's launcher references there."""
    refs = launchers.get(DEVICE, ())
    assert refs, f"{suite.op}: no forward launcher for {DEVICE}"
    calls: list[str] = []
    saved = []
    for ref in refs:
        module_name, _, name = ref.partition(":")
        module = importlib.import_module(module_name)
        original = getattr(module, name)

        def spy(*args, _original=original, _ref=ref, **kwargs):
            calls.append(_ref)
            return _original(*args, **kwargs)

        saved.append((module, name, original))
        setattr(module, name, spy)
    # The generated shims look launchers up through a cache: start from an empty one.
    runtime = importlib.import_module(suite.fn.__module__.rpartition(".")[0] + "._runtime")
    runtime.launcher.cache_clear()
    try:
        for label, fn in (("an eager", suite.fn), ("a compiled", compiled)):
            for _ in range(2):
                before = len(calls)
                suite.call(fn, suite.make_inputs(sample, dtype, "default"), "default")
                assert len(calls) == before + 1, (
                    f"{suite.op}: {label} call reached the launcher {len(calls) - before} "
                    "times, expected once"
                )
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
        runtime.launcher.cache_clear()


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
            contract_mismatch(suite.op, f"output {name}", f"a list of {count} tensors", _count(got))
        )
    if not isinstance(want, (list, tuple)) or len(want) != count:
        raise AssertionError(
            f"{suite.op}: the reference returned {_count(want)} for output {name}; the spec "
            f"declares a list of {count} tensors"
        )
    source = suite.output_dtypes.get(name)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if isinstance(source, str) and isinstance(inputs.get(source), (list, tuple)):
            dtype = inputs[source][i].dtype
        else:
            dtype = suite.output_dtype(name, inputs)
        check_layout(suite.op, f"output {name}[{i}]", g, w.shape, dtype)


# Hostile inputs. Each is refused by the public function before anything is launched; the
# offsets cases run in a child process so that a launcher reached by mistake (and the memory it
# would corrupt) fails the test instead of ending the test run.

MALFORMED_OFFSETS = ("past-end", "short", "negative", "first-not-zero", "decreasing", "one", "none")


def malformed_offsets(offsets: Tensor, how: str) -> Tensor:
    """Valid sequence offsets made invalid in the way ``how`` names."""
    values = offsets.tolist()
    if how == "past-end":
        values[-1] += 5
    elif how == "short":
        values[-1] -= 1
    elif how == "negative":
        values[1] = -3
    elif how == "first-not-zero":
        values[0] = 1
    elif how == "decreasing":
        values[1] = values[-1] + 1
    elif how == "one":
        values = values[:1]
    elif how == "none":
        values = []
    else:
        raise ValueError(how)
    return torch.tensor(values, dtype=offsets.dtype, device=offsets.device)


def offsets_outcomes(fn: Callable, inputs: dict, name: str, flags: dict) -> list[str]:
    """``<how> refused|ACCEPTED <message>`` for every malformed form of ``inputs[name]``."""
    lines = []
    for how in MALFORMED_OFFSETS:
        bad = {**inputs, name: malformed_offsets(inputs[name], how)}
        try:
            fn(**bad, **flags)
        except ValueError as exc:
            lines.append(f"{how} refused {exc}")
        else:
            lines.append(f"{how} ACCEPTED")
    return lines


def run_isolated(test_file: str, function: str, *args) -> list[str]:
    """Call ``function(*args)`` of the test module in a child process; its printed lines."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('isolated_tests', {test_file!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        f"for line in module.{function}(*{args!r}):\n"
        "    print(line)\n"
    )
    env = dict(os.environ)
    if DEVICE == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, (
        f"the child process ended with status {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout.splitlines()


def check_offsets_refused(lines: list[str], op: str, name: str) -> None:
    assert len(lines) == len(MALFORMED_OFFSETS), lines
    for line in lines:
        how, outcome, *message = line.split(" ", 2)
        assert outcome == "refused", f"{op}: {name} {how} was accepted"
        assert message and message[0].startswith(f"{op}: {name}"), line


# Out-of-range entries of an index input, one at a time in the middle of valid ones: each must
# be refused with a message naming the entry (Note [index inputs] in _runtime). Each applies to
# the dtypes whose range holds it, "negative" only where negative entries are not skipped.
INT32_MAX = 2**31 - 1
BAD_INDEXES = ("past-end", "at-end", "negative", "int32-max", "huge", "huge-negative")


def bad_index_value(how: str, bound: int) -> int:
    return {
        "past-end": bound + 3,
        "at-end": bound,
        "negative": -1,
        "int32-max": INT32_MAX,
        "huge": 2**40,
        "huge-negative": -(2**40),
    }[how]


def bad_index_forms(skip: bool, dtypes: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(how, dtype)`` of every out-of-range entry tried for an index input."""
    out = []
    for how in BAD_INDEXES:
        if skip and how in ("negative", "huge-negative"):
            continue
        for dtype in dtypes:
            if how.startswith("huge") and dtype != "int64":
                continue
            out.append((how, dtype))
    return out


def sample_with_entries(samples: dict, dtype: str, make_inputs: Callable, name: str) -> str:
    """The first sample whose inputs give index input ``name`` at least one entry."""
    for sample in samples:
        value = make_inputs(sample, dtype).get(name)
        if value is not None and value.numel():
            return sample
    raise AssertionError(f"no sample gives {name!r} an entry")


def index_outcomes(fn: Callable, inputs: dict, name: str, row: tuple, flags: dict) -> list[str]:
    """``<how> <dtype> refused|ACCEPTED <expected start>\t<message>`` for each out-of-range entry
    of ``inputs[name]`` (``row``: the test module's INDEXES entry)."""
    dim, binder, position, skip, dtypes = row
    valid = inputs[name]
    bound = int(inputs[binder].shape[position])
    at = valid.numel() // 2
    where = []
    rest = at
    for size in reversed(valid.shape):
        where.append(rest % size)
        rest //= size
    subscript = f"[{', '.join(map(str, reversed(where)))}]" if valid.ndim else ""
    lines = []
    names = dtypes or (str(valid.dtype).removeprefix("torch."),)
    for how, dtype in bad_index_forms(skip, names):
        value = bad_index_value(how, bound)
        bad = valid.to(getattr(torch, dtype)).contiguous().clone()
        bad.view(-1)[at] = value
        expected = f"{name}{subscript} = {value} is out of range for {dim} = {bound} "
        try:
            fn(**{**inputs, name: bad}, **flags)
        except ValueError as exc:
            lines.append(f"{how} {dtype} refused {expected}\t{exc}")
        else:
            lines.append(f"{how} {dtype} ACCEPTED {expected}\t")
    return lines


def check_indexes_refused(lines: list[str], op: str, name: str, row: tuple) -> None:
    """Every out-of-range form was refused, by a message about that very entry."""
    _, _, _, skip, dtypes = row
    got = [tuple(line.split(" ", 2)[:2]) for line in lines]
    assert got, f"{op}: no out-of-range entry of {name} was tried"
    assert got == bad_index_forms(skip, dtypes or (got[0][1],)), lines
    for line in lines:
        how, dtype, rest = line.split(" ", 2)
        outcome, _, rest = rest.partition(" ")
        expected, _, message = rest.partition("\t")
        assert outcome == "refused", f"{op}: {name} holding an entry {how} ({dtype}) was accepted"
        assert message.startswith(f"{op}: {expected}"), (
            f"{op}: {name} {how} ({dtype}): the message does not name the entry as "
            f"'{op}: {expected}...': {message}"
        )


def aliased_mutations(inputs: dict, name: str, others: Iterable[str]) -> list[tuple[str, dict]]:
    """Ways to pass the mutated input ``name`` that torch's in-place operators refuse."""
    if isinstance(inputs[name], list):  # a Tensor(a!)[]: break its first element
        first = {**inputs, name: inputs[name][0]}
        return [
            (how, {**bad, name: [bad[name], *inputs[name][1:]]})
            for how, bad in aliased_mutations(first, name, others)
        ]
    value = inputs[name]
    cases = []
    if value.ndim >= 1 and value.shape[0] > 1:
        expanded = value[:1].expand_as(value)
        cases.append(("expanded", {**inputs, name: expanded}))
    for other in others:
        theirs = inputs[other]
        if not isinstance(theirs, Tensor) or theirs.numel() == 0 or theirs.numel() > value.numel():
            continue
        view = value.detach().reshape(-1)[: theirs.numel()].view(theirs.shape)
        if view.dtype == theirs.dtype:
            cases.append((f"shares-{other}", {**inputs, other: view}))
    leaf = value.detach().clone().requires_grad_() if value.is_floating_point() else None
    if leaf is not None:
        cases.append(("leaf-requires-grad", {**inputs, name: leaf}))
    return cases


def check_device(fn: Callable, inputs: dict, flags: dict, device: str) -> None:
    """The public function called with every tensor on ``device`` (meta: shapes only)."""
    expected = expand_lists(as_tuple(fn(**clone_inputs(inputs), **flags)))
    moved = {k: map_tensors(v, lambda t: t.to(device)) for k, v in inputs.items()}
    got = expand_lists(as_tuple(fn(**moved, **flags)))
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert (g is None) == (e is None), f"output {i}"
        if g is None:
            continue
        assert g.device.type == device, f"output {i} is on {g.device}, not {device}"
        if device == "meta":
            assert g.shape == e.shape and g.dtype == e.dtype, f"output {i}: {g.shape} vs {e.shape}"
        else:
            assert_close(g.cpu(), e.cpu(), 0.0, 0.0, f"output {i} on {device}")


def check_mutation_refused(call: Callable, op: str, name: str, cases: list) -> None:
    """Each ``(how, inputs)`` of ``aliased_mutations`` is refused with a message about ``name``."""
    assert cases, f"no unsafe way to pass {name} was built"
    for how, bad in cases:
        try:
            call(bad)
        except RuntimeError as exc:
            message = str(exc)
            other = how.removeprefix("shares-") if how.startswith("shares-") else None
            if other is not None and re.match(rejection_pattern(op, other), message):
                # Two inputs updated in place that share memory: either check may refuse first,
                # naming the other.
                assert re.search(rf"\b{re.escape(name)}\b", message), f"{how}: {exc}"
                continue
            assert re.match(rejection_pattern(op, name), message), f"{how}: {exc}"
        else:
            raise AssertionError(f"{op} accepted {name} passed {how}")


def check_zero_size(suite: Suite, samples: dict, sample: str, dim: str, gradients: bool) -> None:
    """``sample`` with ``dim`` (or the leading dims of '...') made 0 matches the reference."""
    sizes = dict(samples[sample])
    sizes[dim] = (0, *sizes[dim][1:]) if dim == "batch" else 0
    key = f"{sample}-{dim}0"
    samples[key] = sizes
    try:
        dtype = next(iter(suite.tolerance))
        suite.check_forward(key, dtype, "compact", "default")
        if gradients and suite.differentiable:
            _check_zero_size_gradients(suite, key, dtype)
    finally:
        del samples[key]


def _check_zero_size_gradients(suite: Suite, sample: str, dtype: str) -> None:
    """Gradients through empty outputs. A reference written for non-empty inputs may build an
    output that no input reaches; inputs it does not reach have zero gradients."""
    inputs = suite.make_inputs(sample, dtype, "default")
    gen = torch.Generator().manual_seed(suite.seed + 4)
    _, weights, grads = suite.loss_and_grads(suite.fn, inputs, "default", gen)
    reference = float32_copies(inputs)
    leaves = {k: reference[k].detach().requires_grad_() for k in grads}
    out = suite.reference_outputs({**reference, **leaves}, "default")
    present = [o for o in expand_lists(out) if o is not None]
    loss = sum((o.float() * w).sum() for o, w in zip(present, weights, strict=True))
    if isinstance(loss, Tensor) and loss.requires_grad:
        found = torch.autograd.grad(
            loss, list(leaves.values()), allow_unused=True, materialize_grads=True
        )
    else:
        found = [torch.zeros_like(v) for v in leaves.values()]
    atol, rtol = suite.grad_tolerance[dtype]
    for (name, got), want in zip(grads.items(), found, strict=True):
        x = inputs[name]
        check_layout(suite.op, f"gradient of {name}", got, x.shape, x.dtype)
        assert_close(got, want, atol, rtol, f"grad of {name}")


def check_eager_fast_path(
    suite: Suite, module: str, bindings: tuple, sample, dtype, layout, config, gradients: bool
) -> None:
    """The eager fast path gives what the dispatcher gives, bit for bit, without calling it.

    The module's operator bindings are swapped for stubs that fail, so a fast path that still
    went through the dispatcher (forward or backward) fails here.
    """
    runtime = importlib.import_module(module.rpartition(".")[0] + "._runtime")
    mod = importlib.import_module(module)
    inputs = suite.inputs(sample, dtype, layout, config)
    gen_seed = suite.seed + 2

    def run(args: dict):
        gen = torch.Generator().manual_seed(gen_seed)
        if gradients and any(args[k] is not None for k in suite.differentiable):
            out, _, grads = suite.loss_and_grads(suite.fn, args, config, gen)
        else:
            with torch.no_grad():
                out, grads = suite.call(suite.fn, args, config), {}
        # What the call wrote in place is compared as well as what it returned.
        return out, grads, tuple(args[k] for k in suite.mutated)

    runtime.set_eager_fast_path(False)
    try:
        expected = run(clone_inputs(inputs))
    finally:
        runtime.set_eager_fast_path(True)

    def untouched(*args, **kwargs):
        raise AssertionError(f"{suite.op}: the eager fast path called the dispatcher")

    saved = {name: getattr(mod, name) for name in bindings}
    for name in bindings:
        setattr(mod, name, untouched)
    try:
        got = run(clone_inputs(inputs))
    finally:
        for name, value in saved.items():
            setattr(mod, name, value)
    assert got[0] or got[2], f"{suite.op}: the call returned and updated nothing to compare"
    assert len(got[0]) == len(expected[0]), f"{suite.op}: {len(got[0])} outputs"
    for i, (a, b) in enumerate(zip(got[0], expected[0], strict=True)):
        if isinstance(a, list) or isinstance(b, list):  # a list output: as many tensors
            assert isinstance(a, list) and isinstance(b, list) and len(a) == len(b), (
                f"{suite.op}: output {i} holds {_count(a)}, the dispatcher's {_count(b)}"
            )
    pairs = (
        ("output", expand_lists(got[0]), expand_lists(expected[0])),
        ("gradient", got[1], expected[1]),
        ("input updated in place", expand_lists(got[2]), expand_lists(expected[2])),
    )
    for what, g, e in pairs:
        if isinstance(g, dict):
            assert g.keys() == e.keys(), what
            g, e = tuple(g.values()), tuple(e.values())
        for i, (a, b) in enumerate(zip(g, e, strict=True)):
            assert (a is None) == (b is None), f"{what} {i}"
            if a is not None:
                assert torch.equal(a, b), f"{suite.op}: {what} {i} differs from the dispatcher's"


def check_dispatcher_visible(suite: Suite, qualnames: tuple, sample, dtype) -> None:
    """Under a dispatch mode and under the profiler the call goes through the registered
    operator, so tracers, FLOP counters and profiles see it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name())
            return func(*args, **(kwargs or {}))

    inputs = suite.make_inputs(sample, dtype)
    with torch.no_grad():
        with Record():
            suite.call(suite.fn, inputs, "default")
        assert set(qualnames) & set(seen), f"none of {qualnames} dispatched: {seen}"
        # CPU activities name the operator; CUDA activities (CUPTI) are not needed for that.
        cpu = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=cpu, acc_events=True) as prof:
            suite.call(suite.fn, inputs, "default")
    names = {e.name for e in prof.events()}
    assert set(qualnames) & names, f"none of {qualnames} profiled: {sorted(names)[:50]}"


# Value domains (docs/spec.md, "Value domains"): the values at the edges of an input's declared
# range, where a test puts them, and what of the results is compared with the reference's.

# Finite stand-ins for an infinite bound, as far out as log-decays and logits are written.
HUGE = (1e4, 1e10)


def domain_values(domain: tuple[str, str], bounds_only: bool = False) -> list[float]:
    """The edge values of ``domain`` (its bounds as ``repr`` strings): each bound, -1e10 and -1e4
    beside an infinite lower one (1e4 and 1e10 beside an infinite upper one), and 0 where it
    lies inside; with ``bounds_only`` the bounds alone."""
    lo, hi = float(domain[0]), float(domain[1])
    values = [lo]
    if not bounds_only:
        values += [-h for h in reversed(HUGE)] if lo == -math.inf else []
        values.append(0.0)
        values += list(HUGE) if hi == math.inf else []
    values.append(hi)
    out: list[float] = []
    for v in values:
        if lo <= v <= hi and v not in out:
            out.append(v)
    return out


def domain_cases(
    samples: dict, domains: dict, offsets: str | None = None, configs=None, variants=()
) -> list:
    """``pytest.param(sample, config, name, value)``: every edge value of each input's domain on
    the first sample and the default configuration; its bounds on each configuration that
    departs from the default only in ``variants`` (a variant is another computation), and on
    each sample that spells out the offsets input ``offsets`` (values inside and across packed
    sequences)."""
    configs = configs or {"default": {}}
    default = next(iter(configs.values()))
    kept = [
        c
        for c, values in configs.items()
        if all(v == default[k] for k, v in values.items() if k not in variants)
    ]
    first = next(iter(samples))
    out = []
    for sample, sizes in samples.items():
        if sample != first and (offsets is None or sizes.get(offsets) is None):
            continue
        for config in kept:
            for name, domain in domains.items():
                every = sample == first and config == kept[0]
                for v in domain_values(domain, bounds_only=not every):
                    vid = case_id(sample, config, f"{name}={v:g}")
                    out.append(pytest.param(sample, config, name, v, id=vid))
    return out


def into_domain(x: Tensor | None, domain: tuple[str, str]) -> Tensor | None:
    """Drawn values clamped into ``domain`` (an init that reaches outside it)."""
    return None if x is None else x.clamp(float(domain[0]), float(domain[1]))


def with_edge(x: Tensor, value: float) -> Tensor:
    """A copy of ``x`` holding ``value`` along its longest dim (the first of equal ones) at index
    0, at a third of its length and over its last third, the last index included: a first
    element, a single one inside, and a run to the end (in a sequence: the first token, one
    token, and the tokens across the boundaries of chunks and packed sequences there)."""
    out = x.detach().clone()
    if out.numel() == 0:
        return out
    if out.dim() == 0:
        return out.fill_(value)
    dim = max(range(out.dim()), key=lambda d: (out.shape[d], -d))
    n = out.shape[dim]
    picked = sorted({0, n // 3, *range(min(n - 1, n - n // 3), n)})
    return out.index_fill_(dim, torch.tensor(picked, device=out.device), value)


def assert_close_at_edge(
    actual: Tensor, expected: Tensor, atol: float, rtol: float, what: str, infinities: bool
) -> None:
    """Where the reference's entry is finite, ``actual``'s must be finite and close to it; with
    ``infinities`` (results), where it is infinite, the same infinity. The reference's NaNs
    (``0 * inf`` of the math, as in a gradient at an infinite input) and, for gradients, its
    infinities are not compared."""
    a, e = actual.detach().float(), expected.detach().float()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    finite = torch.isfinite(e)
    for bad, where in (
        (finite & ~torch.isfinite(a), "not finite where the reference's are"),
        (torch.isinf(e) & (a != e) if infinities else None, "not the reference's infinity"),
    ):
        if bad is not None and bad.any():
            i = tuple(int(j) for j in bad.nonzero()[0])
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {e.numel()} entries are {where} (first at {i}: "
                f"{a[i].item()}, the reference {e[i].item()})"
            )
    torch.testing.assert_close(
        a[finite], e[finite], atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}"
    )


def check_domain_edge(
    suite: Suite,
    sample: str,
    dtype: str,
    name: str,
    value: float,
    gradients: bool,
    config: str = "default",
) -> None:
    """The public function with input ``name`` holding ``value`` (``with_edge``) against the
    reference, on ``config``: its results and mutated inputs and, where the operator has
    gradients, the gradients of a random projection of its results."""
    inputs = suite.make_inputs(sample, dtype, config)
    inputs[name] = with_edge(inputs[name], value)
    what = f"{suite.op} with {name} = {value:g}" + (f" ({config})" if config != "default" else "")
    expected_inputs = float32_copies(inputs)
    grads, expected_grads = {}, {}
    if gradients:
        gen = torch.Generator().manual_seed(suite.seed + 2)
        out, weights, grads = suite.loss_and_grads(suite.fn, inputs, config, gen)
        expected, _, expected_grads = suite.loss_and_grads(
            suite._reference_public, expected_inputs, config, gen, weights
        )
    else:
        out = suite.call(suite.fn, inputs, config)
        expected = suite.reference_outputs(expected_inputs, config)
    suite.check_results(out, expected, inputs)
    atol, rtol = suite.tolerance[dtype]
    for out_name, got, want in zip(suite.public_outputs, out, expected, strict=True):
        if got is not None:
            assert_close_at_edge(got, want, atol, rtol, f"{what}: output {out_name}", True)
    for m in suite.mutated:
        if inputs[m] is not None:
            got, want = inputs[m], expected_inputs[m]
            assert_close_at_edge(got, want, atol, rtol, f"{what}: {m} after the call", True)
    atol, rtol = suite.grad_tolerance[dtype]
    for k, got in grads.items():
        assert_close_at_edge(got, expected_grads[k], atol, rtol, f"{what}: grad of {k}", False)
