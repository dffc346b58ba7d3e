"""Layout predicates for backends with layout contracts, and the record of which backend ran.

Copied into the generated package as ``<package>/_layout.py``. Pure torch: the generated CUDA
implementations evaluate the predicates a backend declares (``docs/spec.md``, ``backends``) on
real tensors to choose the backend, and kernel modules (CuTeDSL launchers) use the same
predicates to choose among their compiled signatures, so both sides agree on one definition.

Note [layout contracts]: a backend declares the weakest layout it needs per tensor: which mode
must be contiguous (stride 1) and which byte alignment every slice along it must keep. Alignment
is a promise to the compiler (wide loads), never repaired at run time: ``.contiguous()`` returns
an already-contiguous tensor unchanged, so it cannot fix a misaligned storage offset. A tensor
that breaks a declared contract sends the call to the next backend in the declared order.
"""

from __future__ import annotations

import contextlib
import importlib.util
import warnings
from collections.abc import Iterator

import torch

INT32_MAX = 2**31 - 1


def tensor_supports_contiguous_dim(
    tensor: torch.Tensor, dim: int = -1, alignment_bytes: int | None = None
) -> bool:
    """``dim`` has stride 1 (or size 1) and every slice origin along the other modes is aligned.

    Slice origins are ``data_ptr + sum(i_k * stride_k)`` over the other modes, so they are all
    ``alignment_bytes``-aligned exactly when the base address and every other mode's byte stride
    (of a mode with more than one element) are. ``alignment_bytes`` defaults to the element size.
    """
    if tensor.ndim == 0:
        return False
    dim = dim % tensor.ndim
    if tensor.stride(dim) != 1 and tensor.shape[dim] > 1:
        return False
    size = tensor.element_size()
    align = size if alignment_bytes is None else alignment_bytes
    if tensor.numel() == 0:
        return True
    if tensor.data_ptr() % align:
        return False
    for k in range(tensor.ndim):
        if k != dim and tensor.shape[k] > 1 and (tensor.stride(k) * size) % align:
            return False
    return True


def tensor_supports_tma(tensor: torch.Tensor, dim: int = -1) -> bool:
    """The 16-byte specialization of :func:`tensor_supports_contiguous_dim` (TMA descriptors and
    128-bit vector loads need 16-byte-aligned base and strides), on a CUDA tensor."""
    return tensor.is_cuda and tensor_supports_contiguous_dim(tensor, dim, alignment_bytes=16)


def tensor_is_compact(tensor: torch.Tensor) -> bool:
    """Row-major contiguous: one flat array, so its outer modes collapse into one."""
    return tensor.is_contiguous()


def requires_int64_abi(*tensors: torch.Tensor | None) -> bool:
    """Whether some tensor's sizes, strides or element span do not fit 32-bit indexing.

    Kernels compiled with 32-bit sizes and strides compute element offsets in 32 bits; this
    selects the independent wide specialization. :func:`force_int64_abi` turns it on for every
    call, which the generated tests use to prove both specializations compute the same thing.
    """
    if _FORCE_INT64:
        return True
    for t in tensors:
        if t is None or t.numel() == 0:
            continue
        span = 1
        for size, stride in zip(t.shape, t.stride(), strict=True):
            if size > INT32_MAX or abs(stride) > INT32_MAX:
                return True
            span += (size - 1) * abs(stride)
        if span > INT32_MAX:
            return True
    return False


_FORCE_INT64 = False


@contextlib.contextmanager
def force_int64_abi(enabled: bool = True) -> Iterator[None]:
    """Within the block, every backend with an int64 specialization uses it."""
    global _FORCE_INT64
    previous, _FORCE_INT64 = _FORCE_INT64, enabled
    try:
        yield
    finally:
        _FORCE_INT64 = previous


# Note [backend selection]: the CUDA implementation of an operator with several backends runs the
# first backend, in declared order, that is installed, enabled and whose layout contract the
# call's tensors meet; the last listed backend declares no contract and always qualifies.
_AVAILABLE: dict[str, bool] = {}
_DISABLED: set[str] = set()
_MODULES = {"cutedsl": "cutlass"}


def backend_available(backend: str) -> bool:
    """Whether ``backend``'s compiler is importable and not turned off; looks, never imports."""
    if backend in _DISABLED:
        return False
    found = _AVAILABLE.get(backend)
    if found is None:
        module = _MODULES.get(backend)
        found = module is None or importlib.util.find_spec(module) is not None
        _AVAILABLE[backend] = found
    return found


def set_backend_enabled(backend: str, enabled: bool) -> None:
    """Turn a backend off (or back on) for every operator of the package.

    A turned-off backend is skipped by selection as if its layout contract failed, so calls fall
    through to the next declared backend. The last declared backend of an operator always runs.
    """
    if not isinstance(backend, str):
        raise TypeError(f"set_backend_enabled: backend must be a str, got {type(backend).__name__}")
    if enabled:
        _DISABLED.discard(backend)
    else:
        _DISABLED.add(backend)


@contextlib.contextmanager
def backends_disabled(*names: str) -> Iterator[None]:
    """Within the block, the named backends are turned off."""
    added = [n for n in names if n not in _DISABLED]
    _DISABLED.update(added)
    try:
        yield
    finally:
        _DISABLED.difference_update(added)


# The record of which backend and signature ran, for tests and debugging. Off, it costs one
# global read per call.
_TRACE: list[tuple[str, str, str]] | None = None


def note_backend(op: str, backend: str) -> None:
    """Called by generated selection code once it has chosen ``backend`` for ``op``."""
    if _TRACE is not None:
        _TRACE.append((op, "backend", backend))


def signature_of(*tensors: torch.Tensor | None, dim: int = -1) -> str:
    """The signature a launcher with several reports (docs/spec.md, "Several backends").

    "compact" when every given tensor (None skipped) is row-major contiguous and meets the
    16-byte contract along ``dim`` (128-bit vector loads), else "general"; then "/int64" when
    :func:`requires_int64_abi` says so, else "/int32".
    """
    given = [t for t in tensors if t is not None]
    compact = all(t.is_contiguous() and tensor_supports_tma(t, dim) for t in given)
    abi = "int64" if requires_int64_abi(*given) else "int32"
    return f"{'compact' if compact else 'general'}/{abi}"


def note_signature(op: str, signature: str) -> None:
    """Called by a launcher with several compiled signatures once it has chosen one."""
    if _TRACE is not None:
        _TRACE.append((op, "signature", signature))


def note_compile(op: str, key: str) -> None:
    """Called by a launcher each time it compiles a kernel (a cache miss), with its cache key."""
    if _TRACE is not None:
        _TRACE.append((op, "compile", key))


@contextlib.contextmanager
def dispatch_trace() -> Iterator[list[tuple[str, str, str]]]:
    """Collect ``(op, "backend" | "signature" | "compile", name)`` for each selection and
    compilation made in the block."""
    global _TRACE
    previous, _TRACE = _TRACE, []
    try:
        yield _TRACE
    finally:
        _TRACE = previous


_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Warn the first time ``key`` is seen in this process."""
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
