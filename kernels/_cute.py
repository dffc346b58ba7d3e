"""Helpers shared by the CuTeDSL kernel modules: fake signatures, a compile cache keyed on static
properties, and launching through TVM-FFI (or, without it, through ``from_dlpack``).

Only CuTe kernel modules import this, on their first launch; ``import attnops`` never reaches it.
``cutlass`` is imported where it is used, so that a kernel loaded from the disk cache (Note [CuTe
disk cache]) needs none of it, and the cache's helpers are tested where CuTeDSL is not installed.

Note [CuTe signatures]: a launcher compiles each kernel once per static key and reuses it for
every outer size. Sizes that change per call (rows) are symbolic in the fake tensors it compiles
against; strides are static where the signature promises a layout (compact) and symbolic where
it does not (general). Alignment is a promise: ``assumed_align`` is what every call guarantees,
and TVM-FFI checks it (with shapes, strides and dtypes) on each call.

Note [CuTe launch paths]: with ``apache-tvm-ffi`` installed, kernels are compiled with
``--enable-tvm-ffi``, take torch tensors directly (4.2 us a call for l2norm's forward on the
H200) and launch on the torch stream current at the call (the env stream TVM-FFI reads from the
first CUDA tensor argument). Without it, each call wraps its tensors with ``from_dlpack`` and
passes the current torch stream explicitly (91 us for the same launcher); that path warns once.
``from_dlpack`` can only describe a compact tensor with a dynamic first mode, or a tensor whose
every mode is dynamic but one stride, always with 32-bit sizes, so the fake tensors of that path
mirror exactly those types.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import _abi

if TYPE_CHECKING:
    import cutlass

_FORCE_DLPACK = False


@functools.cache
def tvm_ffi_available() -> bool:
    """Whether ``apache-tvm-ffi`` imports (Note [CuTe launch paths])."""
    try:
        import tvm_ffi  # noqa: F401
    except ImportError:
        return False
    return True


def cute_dtype(dtype: torch.dtype) -> type[cutlass.Numeric]:
    """The CuTe numeric type of a torch dtype (bfloat16, float16, float32, int32)."""
    import cutlass

    types = {
        torch.bfloat16: cutlass.BFloat16,
        torch.float16: cutlass.Float16,
        torch.float32: cutlass.Float32,
        torch.int32: cutlass.Int32,
    }
    try:
        return types[dtype]
    except KeyError:
        raise TypeError(f"no CuTe kernel for dtype {dtype}") from None


def sym_int(int64: bool) -> Any:
    """A new symbolic size: 64-bit for the int64 ABI, else 32-bit."""
    import cutlass.cute as cute

    return cute.sym_int64() if int64 else cute.sym_int32()


def make_fake_strided_tensor(
    dtype: torch.dtype | type[cutlass.Numeric],
    shape: Sequence[int | None | Any],
    contiguous_dim: int = -1,
    *,
    int64: bool = False,
    assumed_align: int | None = None,
) -> Any:
    """A fake ``cute.Tensor`` whose ``contiguous_dim`` has stride 1 and every other stride is dynamic.

    Args:
        dtype: element type (torch or CuTe).
        shape: one entry per mode: an ``int`` is a static size, ``None`` a new symbolic size,
            a symbolic size (``cute.sym_int*``) is used as given, so tensors can share one.
        contiguous_dim: the mode with stride 1.
        int64: 64-bit symbolic sizes and strides, else 32-bit.
        assumed_align: the byte alignment every call guarantees for the base address;
            defaults to the element size (the honest minimum).

    Returns:
        The fake tensor, to pass to ``cute.compile`` in place of a real one.
    """
    from cutlass.cute.runtime import make_fake_tensor

    dtype = cute_dtype(dtype) if isinstance(dtype, torch.dtype) else dtype
    dims = tuple(sym_int(int64) if s is None else s for s in shape)
    contiguous_dim %= len(dims)
    stride = tuple(1 if k == contiguous_dim else sym_int(int64) for k in range(len(dims)))
    return make_fake_tensor(dtype, dims, stride, assumed_align=_align(dtype, assumed_align))


def make_fake_row_major_tensor(
    dtype: torch.dtype | type[cutlass.Numeric],
    shape: Sequence[int | None | Any],
    *,
    int64: bool = False,
    assumed_align: int | None = None,
) -> Any:
    """A fake compact row-major ``cute.Tensor``: strides follow from ``shape``, so they are static
    where the inner sizes are. Arguments as in :func:`make_fake_strided_tensor`."""
    from cutlass.cute.runtime import make_fake_compact_tensor

    dtype = cute_dtype(dtype) if isinstance(dtype, torch.dtype) else dtype
    dims = tuple(sym_int(int64) if s is None else s for s in shape)
    order = tuple(reversed(range(len(dims))))
    return make_fake_compact_tensor(
        dtype,
        dims,
        stride_order=order,
        assumed_align=_align(dtype, assumed_align),
        use_32bit_stride=not int64,
    )


def _align(dtype: type[cutlass.Numeric], assumed_align: int | None) -> int:
    return max(1, dtype.width // 8) if assumed_align is None else assumed_align


@dataclasses.dataclass(frozen=True, slots=True)
class TensorArg:
    """How one tensor argument is described to the compiler (see Note [CuTe signatures]).

    ``shape`` holds static sizes, ``None`` for symbolic ones; a ``str`` names a symbolic size
    shared with the other arguments that use the same name (TVM-FFI then checks they agree).
    ``compact`` tensors are row-major with static inner strides; the others have stride 1 in
    their last mode and dynamic strides elsewhere.
    """

    dtype: torch.dtype
    shape: tuple[int | str | None, ...]
    compact: bool
    align: int | None = None


def _fake_args(args: Sequence[TensorArg], int64: bool, tvm_ffi: bool) -> list[Any]:
    symbols: dict[str, Any] = {}
    fakes = []
    for a in args:
        if tvm_ffi:
            shape = [
                symbols.setdefault(s, sym_int(int64)) if isinstance(s, str) else s for s in a.shape
            ]
        elif a.compact:
            # from_dlpack(...).mark_compact_shape_dynamic(mode=0): a 32-bit first mode.
            shape = [sym_int(False), *a.shape[1:]]
        else:
            # from_dlpack(...).mark_layout_dynamic(...): every size dynamic, 32-bit.
            shape = [sym_int(False) for _ in a.shape]
        make = make_fake_row_major_tensor if a.compact else make_fake_strided_tensor
        fakes.append(make(a.dtype, shape, int64=int64, assumed_align=a.align))
    return fakes


def _dlpack_arg(t: torch.Tensor, a: TensorArg, int64: bool) -> Any:
    from cutlass.cute.runtime import from_dlpack

    c = from_dlpack(t.detach(), assumed_align=a.align, use_32bit_stride=not int64)
    if a.compact:
        return c.mark_compact_shape_dynamic(mode=0, stride_order=tuple(range(t.ndim)))
    return c.mark_layout_dynamic(leading_dim=t.ndim - 1)


class _DlpackLaunch:
    """Calls a function compiled without TVM-FFI: wraps each tensor with ``from_dlpack`` as its
    fake was described, then passes the current torch stream (Note [CuTe launch paths])."""

    def __init__(self, fn: Any, args: Sequence[TensorArg], int64: bool) -> None:
        self._fn = fn
        self._args = tuple(args)
        self._int64 = int64

    def __call__(self, *args: Any) -> None:
        import cuda.bindings.driver as cuda

        n = len(self._args)
        tensors, scalars = args[:n], args[n:]
        wrapped = [_dlpack_arg(t, a, self._int64) for t, a in zip(tensors, self._args, strict=True)]
        stream = cuda.CUstream(torch.cuda.current_stream(tensors[0].device).cuda_stream)
        self._fn(*wrapped, *scalars, stream)


class CompileCache:
    """Compiled kernels of one operator, keyed only on static properties (Note [CuTe signatures]).

    ``build(key)`` returns ``(jit_fn, tensor_args, scalar_examples, int64)``: the ``@cute.jit``
    callable to compile, how its tensor arguments are described, example values of its scalar
    arguments (their types matter, not their values), and the ABI. A miss compiles against fake
    tensors only, never real data; each launch path (Note [CuTe launch paths]) has its own table.
    """

    def __init__(
        self, op: str, build: Callable[[Hashable], tuple[Any, Sequence[TensorArg], tuple, bool]]
    ) -> None:
        self.op = op
        self._build = build
        self._tables: tuple[dict, dict] = ({}, {})  # default launch path, forced from_dlpack
        self.compiles = 0

    def get(self, key: Hashable) -> Callable[..., None]:
        """The compiled kernel for ``key``, compiling it on the first request: call it with the
        tensors (torch tensors shaped as described) and then the scalars, positionally."""
        table = self._tables[_FORCE_DLPACK]
        kernel = table.get(key)
        if kernel is None:
            kernel = table[key] = self._compile(key, tvm_ffi_available() and not _FORCE_DLPACK)
        return kernel

    def clear(self) -> None:
        """Forget every compiled kernel (for tuning sweeps that change how keys build)."""
        for table in self._tables:
            table.clear()

    def _compile(self, key: Hashable, tvm_ffi: bool) -> Callable[..., None]:
        if not tvm_ffi_available():
            _abi.warn_once(
                "cute-dlpack",
                "apache-tvm-ffi is not installed: CuTeDSL kernels launch through from_dlpack, "
                "which costs tens of microseconds more per call than TVM-FFI",
            )
        import cutlass.cute as cute

        jit_fn, args, scalars, int64 = self._build(key)
        fakes = _fake_args(args, int64, tvm_ffi)
        stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=tvm_ffi)
        options = "--enable-tvm-ffi" if tvm_ffi else ""
        fn = cute.compile(jit_fn, *fakes, *scalars, stream, options=options)
        self.compiles += 1
        _abi.note_compile(self.op, repr(key))
        if not tvm_ffi:
            return _DlpackLaunch(fn, args, int64)
        # The plain TVM-FFI function, positional only, skips the Python keyword-argument wrapper
        # that cute.compile puts around it; it keeps the compiled module alive itself.
        plain = getattr(fn, "__tvm_ffi_object__", None)
        return (plain() if plain is not None else None) or fn


@contextlib.contextmanager
def dlpack_launches(enabled: bool = True) -> Iterator[None]:
    """Within the block, kernels compile and launch through ``from_dlpack`` even when TVM-FFI is
    installed: tests use it to prove both launch paths compute the same thing."""
    global _FORCE_DLPACK
    previous, _FORCE_DLPACK = _FORCE_DLPACK, enabled
    try:
        yield
    finally:
        _FORCE_DLPACK = previous
