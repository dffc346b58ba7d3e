"""Lazy launcher loading: importing the package loads no kernel backend (Triton, CuTeDSL)."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable

import torch


@functools.cache
def launcher(ref: str) -> Callable:
    """Import ``module:function`` on first use; later calls are a cache lookup."""
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name == "numpy" and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
            raise ModuleNotFoundError(_NO_NUMPY.format(ref=ref), name="numpy") from exc
        raise


# Note [launcher imports]: under TRITON_INTERPRET=1, importing triton imports its interpreter,
# which imports numpy; triton does not declare it, so an environment with the operators and
# their dependencies only fails there on "No module named 'numpy'". The first launcher that
# needs it says what that is about.
_NO_NUMPY = (
    "loading the launcher {ref}: TRITON_INTERPRET=1 runs Triton kernels through Triton's "
    "interpreter, which needs numpy (triton does not install it); install numpy, or unset "
    "TRITON_INTERPRET on a machine with a GPU"
)


def register_triton_op(qualname: str, fn: Callable, mutates_args: tuple[str, ...]) -> None:
    """Register ``fn`` through ``torch.library.triton_op`` without importing triton.

    Note [triton_op laziness]: triton_op imports triton only to scan ``fn`` for the @triton.jit
    kernels it references directly. Generated shims reach their kernels through ``launcher``, so
    that scan finds none whether or not triton is imported; skipping it keeps importing the
    package free of triton. Inductor still sees the kernels: tracing the shim at compile time
    runs the launcher, whose ``wrap_triton`` calls put them in the graph.
    """
    module = torch._library.triton
    scan = getattr(module, "get_inner_triton_kernels", None)
    if scan is None or "triton" in sys.modules:
        torch.library.triton_op(qualname, fn, mutates_args=mutates_args)
        return
    module.get_inner_triton_kernels = lambda _fn: []
    try:
        torch.library.triton_op(qualname, fn, mutates_args=mutates_args)
    finally:
        module.get_inner_triton_kernels = scan


# Note [validation errors]: the generated public functions test each argument with one
# condition and call these only once it fails, so the wording below costs nothing on the path
# that succeeds. Every message starts with "<op>: <argument> " so callers (and the generated
# tests) can tell which argument was refused.


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _alternatives(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def tensor_error(
    op: str,
    name: str,
    value: object,
    shape: str,
    expected: tuple | None,
    *,
    rank: int,
    variadic: bool = False,
    dtypes: tuple[torch.dtype, ...] = (),
    dtype_of: tuple[str, torch.Tensor] | None = None,
    devices: tuple[str, ...] = (),
    device_of: tuple[str, torch.Tensor] | None = None,
) -> Exception:
    """The error for tensor argument ``name`` of ``op``, naming what is wrong with it.

    ``shape`` is the declared symbolic shape (``[B, T, H, K]``) and ``expected`` its value in
    this call, or None while the dims are still being read from this very argument.
    """
    if not isinstance(value, torch.Tensor):
        return TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")
    if dtype_of is not None:
        other, ref = dtype_of
        if value.dtype != ref.dtype:
            return TypeError(
                f"{op}: {name} must have the dtype of {other} ({_dtype_name(ref.dtype)}), "
                f"got {_dtype_name(value.dtype)}"
            )
    elif value.dtype not in dtypes:
        allowed = _alternatives([_dtype_name(d) for d in dtypes])
        return TypeError(f"{op}: {name} must have dtype {allowed}, got {_dtype_name(value.dtype)}")
    if device_of is not None:
        other, ref = device_of
        if value.device != ref.device:
            return ValueError(
                f"{op}: {name} must be on the device of {other} ({ref.device}), got {value.device}"
            )
    elif value.device.type not in devices:
        return ValueError(
            f"{op}: {name} must be on a {_alternatives(list(devices))} device, got {value.device}"
        )
    got = tuple(value.shape)
    if value.ndim < rank or (value.ndim > rank and not variadic):
        dims = f"{rank} or more dims" if variadic else f"{rank} dim{'s' if rank != 1 else ''}"
        return ValueError(f"{op}: {name} must have shape {shape} ({dims}), got {got}")
    if expected is not None and got != tuple(expected):
        return ValueError(f"{op}: {name} must have shape {shape} = {tuple(expected)}, got {got}")
    return AssertionError(f"{op}: {name} failed a check that names no cause (a generator bug)")


def list_error(
    op: str,
    name: str,
    index: int | None,
    value: object,
    shape: str,
    expected: tuple | None,
    *,
    rank: int,
    same_as: tuple[str, torch.Tensor] | None = None,
    **checks,
) -> Exception:
    """The error for a ``Tensor[]`` argument: the list itself (``index`` None) or element
    ``name[index]``, checked against the element declaration as ``tensor_error`` checks a tensor.
    """
    if index is None:
        if not isinstance(value, (list, tuple)):
            return TypeError(f"{op}: {name} must be a list of Tensors, got {type(value).__name__}")
        return ValueError(f"{op}: {name} must hold at least one tensor of shape {shape}, got none")
    element = f"{name}[{index}]"
    if isinstance(value, torch.Tensor) and same_as is not None:
        other, ref = same_as
        if checks.get("devices") and value.device.type in checks["devices"]:
            if value.device != ref.device:
                return ValueError(
                    f"{op}: {element} must be on the device of {other} ({ref.device}), "
                    f"got {value.device}"
                )
    return tensor_error(op, element, value, shape, expected, rank=rank, **checks)


def constraint_error(op: str, message: str, **dims: int) -> ValueError:
    """A relation between dims does not hold; ``message`` is the spec's own wording."""
    got = ", ".join(f"{k}={v}" for k, v in dims.items())
    return ValueError(f"{op}: {message}; got {got}")


# Note [scalar types]: the public function checks every scalar argument (and the arity flag, a
# bool) against its schema type before anything launches, with one isinstance or two inline; it
# accepts what the dispatcher accepts without reinterpreting it, and refuses the rest:
#
#   bool                          bool (torch.SymBool under compile); not 1, None or numpy.bool_,
#                                 whose truth value the dispatcher would take
#   int, SymInt                   int, torch.SymInt; not a bool (the dispatcher passes True as 1)
#   float                         float, int, torch.SymFloat, torch.SymInt; not a bool
#   Scalar                        bool, int, float and their symbolic types; not complex
#   ScalarType, Layout,           the torch object itself, not the number the dispatcher would
#   MemoryFormat                  read as one (1 is torch.int8)
#   Device                        a torch.device or a string naming one, converted to a
#                                 torch.device (scalar_device); not an int
#   str, Generator                exactly that
#   T[], T[N], T?[]               a list or tuple of T (scalar_list), N long (or as long as the
#                                 schema default); int[N], SymInt[N] and float[N] also take one
#                                 number, repeated N times
#
# NumPy scalars are refused unless their type subclasses the Python one (numpy.float64 is a
# float), as are tensors where a number belongs; the message says how to convert them.


def scalar_error(op: str, name: str, expected: str, value: object) -> TypeError:
    """A non-tensor argument of the wrong type (Note [scalar types])."""
    return TypeError(f"{op}: {name} must be {expected}, got {_described(value)}")


def _described(value: object) -> str:
    """A refused value by type and value, with a hint for NumPy scalars and tensors, which the
    checks refuse where a Python number belongs."""
    kind = type(value)
    if isinstance(value, torch.Tensor):
        return f"Tensor of shape {tuple(value.shape)} (pass a Python number, e.g. .item())"
    numpy = kind.__module__ == "numpy"
    text = str(value) if numpy else repr(value)  # NumPy 2 reprs read np.int64(3)
    text = text if len(text) <= 60 else text[:57] + "..."
    if numpy:
        return f"numpy.{kind.__name__} {text} (convert NumPy scalars with .item())"
    return f"{kind.__name__} {text}"


def scalar_list(
    op: str,
    name: str,
    value: object,
    types: tuple,
    element: str,
    schema_type: str,
    size: int | None,
    *,
    broadcast: bool = False,
    none_elements: bool = False,
    default_size: int | None = None,
) -> list:
    """A list argument (``int[]``, ``float[2]``, ``bool?[]``...) checked element by element as
    a scalar is, returned as the new list the dispatcher would pass the launcher.

    A list or tuple of the element type (a bool is not an int here), of exactly ``size``
    elements for a fixed-size list; with ``broadcast`` (``int[2]``, ``float[2]``) one number
    stands for ``size`` copies of itself, as torch's own ``stride=2`` does. ``default_size``:
    the length of the schema's default where it differs, also allowed (torch writes
    ``int[2] stride=[]`` for "not given", and ``int[1] dim=[-2, -1]``).
    """
    refuse_bool = bool not in types
    if broadcast and isinstance(value, types) and not (refuse_bool and isinstance(value, bool)):
        return [value] * size
    if not isinstance(value, (list, tuple)):
        count = f"{size} " if size is not None else ""
        raise TypeError(
            f"{op}: {name} must be {schema_type}, a list of {count}{element}, got {_described(value)}"
        )
    if size is not None and len(value) != size and len(value) != default_size:
        other = "" if default_size is None else f" or {default_size}, as its default"
        raise ValueError(
            f"{op}: {name} must have {size} elements ({schema_type}){other}, got {len(value)}"
        )
    for i, e in enumerate(value):
        if e is None and none_elements:
            continue
        if not isinstance(e, types) or (refuse_bool and isinstance(e, bool)):
            raise scalar_error(op, f"{name}[{i}]", element, e)
    return list(value)


def scalar_device(op: str, name: str, value: object) -> torch.device:
    """A ``Device`` argument: a torch.device, or a string naming one (converted, as the
    dispatcher converts it, so the launcher receives a torch.device on every path)."""
    if isinstance(value, torch.device):
        return value
    if not isinstance(value, str):
        raise scalar_error(op, name, "torch.device or a device string", value)
    try:
        return torch.device(value)
    except RuntimeError:
        raise ValueError(
            f"{op}: {name} must name a device ('cpu', 'cuda', 'cuda:1', ...), got {value!r}"
        ) from None


def value_error(op: str, name: str, allowed: tuple, value: object) -> ValueError:
    """A variant argument outside its listed values."""
    return ValueError(f"{op}: {name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def count_error(op: str, name: str, output: str, value: int) -> ValueError:
    """Note [list returns]: an int argument giving the number of tensors of a list output."""
    return ValueError(
        f"{op}: {name} must be >= 0 (the number of tensors of output {output}), got {value}"
    )


def length_error(op: str, name: str, like: str, output: str, got: int, want: int) -> ValueError:
    """Note [list returns]: a list input read element by element beside the list that gives a
    list output's count."""
    return ValueError(
        f"{op}: {name} must hold as many tensors as {like} ({want}): element i of output "
        f"{output} reads element i of both; got {got}"
    )


def _byte_range(t: torch.Tensor) -> tuple[int, int] | None:
    if t.numel() == 0 or t.is_meta:
        return None
    extent = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    start = t.data_ptr()
    return start, start + (extent + 1) * t.element_size()


def _flatten(tensors: dict):
    """``name: tensor`` pairs, list arguments as ``name[i]: element`` (None elements left out)."""
    for name, value in tensors.items():
        if isinstance(value, (list, tuple)):
            for i, element in enumerate(value):
                if isinstance(element, torch.Tensor):
                    yield f"{name}[{i}]", element
        elif isinstance(value, torch.Tensor):
            yield name, value


def check_mutated(op: str, name: str, value, others: dict) -> None:
    """Refuse to write ``value`` in place where torch's own in-place operators would refuse.

    Note [mutated inputs]: a leaf that requires grad (with grad mode on), a tensor whose
    elements overlap each other (an expanded view: every write would race), and a tensor
    sharing memory with another argument of the call (the kernel would read what it already
    wrote). Byte ranges are compared conservatively, as torch compares them.
    """
    if value is None:  # an optional input updated in place (Tensor(a!)?) left out
        return
    others = dict(_flatten(others))
    if isinstance(value, (list, tuple)):  # a Tensor(a!)[]: each element, against the rest too
        items = dict(_flatten({name: value}))
        for element, tensor in items.items():
            rest = {**others, **{k: v for k, v in items.items() if k != element}}
            check_mutated(op, element, tensor, rest)
        return
    if value.requires_grad and value.is_leaf and torch.is_grad_enabled():
        raise RuntimeError(
            f"{op}: {name} is a leaf tensor that requires grad and would be updated in place; "
            "detach it, or call under torch.no_grad()"
        )
    if torch._debug_has_internal_overlap(value) == 1:
        raise RuntimeError(
            f"{op}: {name} is updated in place but its elements overlap (strides "
            f"{value.stride()} for shape {tuple(value.shape)}); pass a tensor with its own memory, "
            "e.g. .clone()"
        )
    mine = _byte_range(value)
    if mine is None:
        return
    for other, tensor in others.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        theirs = _byte_range(tensor)
        if theirs is not None and mine[0] < theirs[1] and theirs[0] < mine[1]:
            raise RuntimeError(
                f"{op}: {name} is updated in place and shares memory with {other}; "
                f"pass {other} as a separate tensor (e.g. {other}.clone())"
            )


# Note [offsets]: sequence offsets index every packed row, so a malformed one would make a kernel
# read or write outside its tensors. Eager calls read them on the host (one small copy, a
# synchronization on CUDA) and name the first bad entry; compiled graphs check them on the
# device with torch._assert_async, which refuses before any later kernel runs. Callers that have
# validated their offsets already can turn the host check off (set_offsets_check(False)).
_CHECK_OFFSETS = True


def set_offsets_check(enabled: bool) -> None:
    """Turn the eager check of sequence offsets on or off for every operator of the package."""
    global _CHECK_OFFSETS
    _CHECK_OFFSETS = bool(enabled)


def check_offsets(op: str, name: str, offsets: torch.Tensor, total: int, dim: str) -> torch.Tensor:
    """``offsets`` (contiguous), once it partitions ``[0, total)`` into sequences in order."""
    if offsets.stride(0) != 1:
        offsets = offsets.contiguous()
    n = offsets.shape[0]
    if n < 2:
        raise ValueError(f"{op}: {name} must hold at least two offsets (0 and {dim}), got {n}")
    if torch.compiler.is_compiling():
        ok = (offsets[0] == 0) & (offsets[-1] == total) & (offsets[1:] >= offsets[:-1]).all()
        torch._assert_async(ok, f"{op}: {name} must rise from 0 to {dim} without decreasing")
        return offsets
    if not _CHECK_OFFSETS or offsets.is_meta:
        return offsets
    values = offsets.tolist()
    if values[0] != 0:
        raise ValueError(f"{op}: {name}[0] must be 0, got {values[0]}")
    for i in range(1, n):
        if values[i] < values[i - 1]:
            raise ValueError(
                f"{op}: {name} must not decrease, got {name}[{i}] = {values[i]} after "
                f"{name}[{i - 1}] = {values[i - 1]}"
            )
    if values[-1] != total:
        raise ValueError(f"{op}: {name}[{n - 1}] must equal {dim} = {total}, got {values[-1]}")
    return offsets


# Note [index inputs]: an index input's entries address rows of another input (cache slots, page
# tables, token ids), so one out of range makes a kernel read or write outside that tensor. Eager
# calls reduce the entries to their minimum and maximum (one reduction, one small read on the
# host: a synchronization on CUDA) and only when those are out of range look for the first bad
# entry to name it. Compiled graphs, and CUDA-graph captures (which cannot read on the host),
# check on the device with torch._assert_async instead. set_index_check(False) turns both off
# (Dynamo guards on the switch, so flipping it recompiles).
_CHECK_INDEXES = True
# Devices on which the captured index check's assert kernel has run once (Note [index check
# kernels]).
_ASSERT_LOADED: set = set()


def set_index_check(enabled: bool) -> None:
    """Turn the range check of index inputs on or off for every operator of the package."""
    global _CHECK_INDEXES
    _CHECK_INDEXES = bool(enabled)


def check_indexes(
    op: str, name: str, index: torch.Tensor, bound: int, dim: str, skip: bool
) -> None:
    """Refuse ``index`` unless every entry is in ``[0, bound)`` (or negative, with ``skip``)."""
    if not _CHECK_INDEXES:
        return
    if torch.compiler.is_compiling() or (
        index.is_cuda and torch.cuda.is_current_stream_capturing()
    ):
        ok = index < bound if skip else (index >= 0) & (index < bound)
        torch._assert_async(ok.all(), f"{op}: {name} holds an entry out of range for {dim}")
        return
    if index.is_meta or index.numel() == 0:
        return
    if index.is_cuda:
        # Note [index check kernels]: CUDA loads a kernel on its first launch, which a stream
        # being captured into a graph does not allow. The eager check on CUDA therefore runs the
        # kernels the captured check runs (and the assert's once), so that the warm-up call
        # before a capture has loaded them all.
        ok = (index < bound if skip else (index >= 0) & (index < bound)).all()
        if index.device not in _ASSERT_LOADED:
            torch._assert_async(torch.ones((), dtype=torch.bool, device=index.device))
            _ASSERT_LOADED.add(index.device)
        if bool(ok):
            return
    elif skip:
        if int(index.max()) < bound:
            return
    else:
        low, high = torch.stack(torch.aminmax(index)).tolist()
        if low >= 0 and high < bound:
            return
    raise _index_error(op, name, index, bound, dim, skip)


def _index_error(
    op: str, name: str, index: torch.Tensor, bound: int, dim: str, skip: bool
) -> ValueError:
    """The error naming the first entry of ``index`` out of range, its position and value."""
    bad = index >= bound if skip else (index < 0) | (index >= bound)
    flat = int(bad.reshape(-1).to(torch.uint8).argmax())
    position = []
    for size in reversed(index.shape):
        position.append(flat % size)
        flat //= size
    position.reverse()
    value = int(index[tuple(position)])
    where = f"[{', '.join(map(str, position))}]" if position else ""
    if bound == 0:
        valid = "only negative entries, which skip, are valid" if skip else "no entry is valid"
    else:
        valid = f"valid: 0 <= i < {bound}" + (", or negative to skip" if skip else "")
    return ValueError(
        f"{op}: {name}{where} = {value} is out of range for {dim} = {bound} ({valid})"
    )


# Note [eager fast path]: an operator declared with eager_fast_path calls its implementation
# directly in eager mode, skipping the dispatcher (and, without grad, the autograd.Function).
# The dispatcher still runs whenever something may need to see the operator: torch.compile and
# export (Dynamo folds torch.compiler.is_compiling() to True, so graphs hold the registered
# operator), a dispatch or function mode (FakeTensorMode, make_fx, FlopCounterMode, ...), a
# functorch transform, the profiler (so traces name the operator), and tensor subclasses or meta
# tensors. Autocast behaves the same either way: a custom operator has no autocast rule, so its
# inputs reach the launcher in the dtypes they were given.
_EAGER_FAST_PATH = True
_PLAIN_TENSORS = frozenset((torch.Tensor, torch.nn.Parameter))
_profiler = torch.autograd.profiler
# Bound once: each check below is on every eager call of a fast-path operator.
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_functorch_transforms = torch._C._are_functorch_transforms_active
# Note [grad mode on the fast path]: a fast-path call of an operator without a backward runs its
# launcher with grad mode off, as ``with torch.no_grad():`` would. That statement costs about
# 2.7 us of host time a call (two context-manager objects); reading and setting the flag, with
# the old value restored in ``finally``, does the same for a tenth of it. Where every tensor input
# is declared bool or integer (no such tensor can require grad, so nothing the launcher computes
# from them can), the call leaves grad mode as it is.
grad_enabled = torch.is_grad_enabled
set_grad_enabled = torch._C._set_grad_enabled


def set_eager_fast_path(enabled: bool) -> None:
    """Turn the eager fast path on or off for every operator of the package that declares it."""
    global _EAGER_FAST_PATH
    _EAGER_FAST_PATH = bool(enabled)


# Note [device guard]: Triton and CuTeDSL launch on the current CUDA device and its current
# stream, whatever device the tensors are on; torch's own CUDA operators switch to their inputs'
# device first, and so does every registered CUDA implementation here: where the inputs are on
# another device than the current one, it calls itself again inside ``torch.cuda.device`` of
# theirs (the caller's device comes back on the way out). Where the first tensor argument is
# always given, the check reads two integers inline (``cuda_device``, the current device, without
# torch.cuda's initialization check: a CUDA tensor is at hand); ``other_device`` finds the first
# tensor present otherwise.
cuda_device = getattr(torch._C, "_cuda_getDevice", None)


def other_device(*args) -> int | None:
    """The CUDA device of the first tensor among ``args`` (as for ``on_cuda``) where it is not
    the current device; None where it is, or where that tensor is not a CUDA tensor."""
    for a in args:
        if isinstance(a, (list, tuple)):
            a = next((t for t in a if isinstance(t, torch.Tensor)), None)
        if isinstance(a, torch.Tensor):
            index = a.get_device()
            return None if index < 0 or index == cuda_device() else index
    return None


def on_cuda(*args) -> bool:
    """Whether the first tensor among ``args`` (tensors, None, or lists of tensors and None, in
    schema order) is a CUDA tensor: the device that picks a direct shim's implementation where
    the schema's first tensor argument may be absent. False when there is none."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.is_cuda
        if isinstance(a, (list, tuple)):
            for t in a:
                if isinstance(t, torch.Tensor):
                    return t.is_cuda
    return False


def direct_ok(*tensors) -> bool:
    """Whether an eager call on ``tensors`` may skip the dispatcher (Note [eager fast path])."""
    if (
        not _EAGER_FAST_PATH
        or _profiler._is_profiler_enabled
        or _dispatch_modes()
        or _function_modes()
        or _functorch_transforms()
    ):
        return False
    plain = _PLAIN_TENSORS
    for t in tensors:
        if t is not None and (type(t) not in plain or t.is_meta):
            return False
    return True
