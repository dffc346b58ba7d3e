"""Helpers shared by the CuTeDSL kernel modules: fake signatures, a compile cache keyed on static
properties and kept on disk, and launching through TVM-FFI (or, without it, ``from_dlpack``).

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

Note [CuTe disk cache]: a compile costs seconds (2.5 s per key of chunk_gla's walk), and CuTeDSL
keeps nothing across processes for ``cute.compile``: it turns its own caches off there
(``no_cache=True`` in cutlass/base_dsl/compiler.py), and the file cache of implicit ``@jit`` calls
is keyed on the traced IR, so a hit there still traces the kernel and builds its host code again.
So a miss here also saves the compiled function, under a digest of everything that changes the
binary (``_entry_name``), in ``ATTNOPS_CUTE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/attnops/cute``,
else ``~/.cache/attnops/cute``); ``ATTNOPS_CUTE_CACHE=0`` turns that off. Through TVM-FFI an entry
is a shared library: the object file of ``export_to_c`` (host launcher with the cubin inside),
linked by the C compiler (``$CC``, else ``cc``; Triton needs one too) against CuTeDSL's runtime and
libtvm_ffi. ``tvm_ffi.load_module`` opens it in 2 ms without importing ``cutlass`` (the object
file alone loads through ``cutlass.runtime.load_module``, which needs CuTeDSL set up: 1.2 s in a
process that has not imported a kernel module), and its function is the same positional
``tvm_ffi.Function`` a compile gives. Without TVM-FFI an entry is the object file of
``dump_to_object``, read back by ``cutlass.runtime.load_module``. Entries are written into
a temporary folder beside them and renamed into place, so a reader sees a whole entry or none; one
that fails to load is compiled again and replaced. Cache trouble never raises: a folder that
cannot be created turns the cache off, one that cannot be written is only read, each with one
warning. ``CompileCache.clear`` turns it off for that operator: sweeps clear after changing module
state that neither the key nor the source text shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from . import _abi
from ._env import switch as _switch

if TYPE_CHECKING:
    import cutlass

_FORCE_DLPACK = False
_ENTRY_FORMAT = "1"  # changed whenever what an entry holds, or how it is loaded, changes
_DISK_WRITES = True  # False once the cache folder could not be written (Note [CuTe disk cache])
# Distributions whose versions change what a compile produces or what loads it.
_TOOLCHAIN = (
    "nvidia-cutlass-dsl",
    "nvidia-cutlass-dsl-libs-base",
    "nvidia-cutlass-dsl-libs-core",
    "nvidia-cutlass-dsl-libs-cu12",
    "nvidia-cutlass-dsl-libs-cu13",
    "apache-tvm-ffi",
)


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


def cache_path() -> Path | None:
    """The folder of the disk cache (Note [CuTe disk cache]), or None where ``ATTNOPS_CUTE_CACHE``
    turns it off: ``ATTNOPS_CUTE_CACHE_DIR`` when set, else ``attnops/cute`` under
    ``$XDG_CACHE_HOME`` (when absolute) or ``~/.cache``. Reads the environment, creates nothing."""
    if not _switch("ATTNOPS_CUTE_CACHE", True):
        return None
    given = os.environ.get("ATTNOPS_CUTE_CACHE_DIR", "")
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "attnops" / "cute"


@functools.cache
def _cache_dir() -> Path | None:
    """:func:`cache_path`, created on first use; None (after one warning) where it cannot be."""
    path = cache_path()
    if path is not None:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            _abi.warn_once(
                "cute-cache",
                f"cannot create the CuTeDSL kernel cache {path} ({e}): kernels compile in every "
                "process",
            )
            return None
    return path


@functools.cache
def _source_digest(path: str) -> str:
    """The digest of a source file's text, read once a process (the module loaded is that one)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@functools.cache
def _toolchain() -> tuple[str, ...]:
    """What builds and loads an entry besides the sources: the versions of ``_TOOLCHAIN`` (found,
    not imported), where ``cutlass`` and ``tvm_ffi`` are installed (an entry links their runtime
    libraries by folder), Python's version and the host machine."""
    versions = []
    for dist in _TOOLCHAIN:
        try:
            versions.append(f"{dist}={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} absent")
    places = [getattr(importlib.util.find_spec(m), "origin", None) for m in ("cutlass", "tvm_ffi")]
    python = "python {}.{}".format(*sys.version_info[:2])
    return (*versions, *map(str, places), python, platform.machine())


def _target_arch() -> str:
    """The GPU architecture CuTeDSL compiles for: ``CUTE_DSL_ARCH``, else device 0's, spelled as
    CuTeDSL detects it (``sm_90a``); "none" without a GPU."""
    arch = os.environ.get("CUTE_DSL_ARCH", "")
    if arch:
        return arch
    if not torch.cuda.is_available():
        return "none"
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def _entry_name(op: str, key: Hashable, sources: Sequence[str], tvm_ffi: bool) -> str:
    """An entry's file name without suffix, also the symbol it exports: the operator, then a
    digest of what changes the binary: the key, the launch path, the source files, the toolchain,
    the target and every ``CUTE_DSL_*`` setting (Note [CuTe disk cache])."""
    parts = [_ENTRY_FORMAT, op, repr(key), "tvm-ffi" if tvm_ffi else "dlpack"]
    parts += [_source_digest(s) for s in sources]
    parts += [*_toolchain(), _target_arch()]
    parts += sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("CUTE_DSL_"))
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    return re.sub(r"\W", "_", op) + "_" + digest


def _entry_sources(build_file: str) -> tuple[str, ...]:
    """The source files an entry's name covers: every module in the folder of the one that
    defines the kernel's build (kernels there share helpers), then this one."""
    return (*sorted(map(str, Path(build_file).parent.glob("*.py"))), __file__)


def _suffix(tvm_ffi: bool) -> str:
    return ".so" if tvm_ffi else ".o"


def _c_compiler() -> list[str]:
    """The C compiler that links TVM-FFI entries: ``$CC``, else ``cc``, ``gcc`` or ``clang``."""
    given = shlex.split(os.environ.get("CC", ""))
    if given:
        return given
    for name in ("cc", "gcc", "clang"):
        if found := shutil.which(name):
            return [found]
    raise RuntimeError("no C compiler to link it (set CC)")


def _write_entry(fn: Any, folder: str, name: str, tvm_ffi: bool) -> str:
    """Write the compiled ``fn`` into ``folder`` as the entry ``name``; return its path."""
    obj = os.path.join(folder, name + ".o")
    if not tvm_ffi:
        Path(obj).write_bytes(fn.dump_to_object(name))
        return obj
    from cutlass.runtime import find_runtime_libraries

    fn.export_to_c(obj, function_name=name, export_only_tvm_ffi_symbols=True)
    lib = os.path.join(folder, name + ".so")
    libs = find_runtime_libraries(enable_tvm_ffi=True)
    rpaths = [f"-Wl,-rpath,{os.path.dirname(p)}" for p in libs]
    done = subprocess.run(
        [*_c_compiler(), "-shared", "-o", lib, obj, *libs, *rpaths], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"linking failed: {done.stderr.strip()[-500:]}")
    return lib


def _read_entry(path: Path, name: str, tvm_ffi: bool) -> Any:
    """The compiled function of the entry at ``path``; raises whatever loading it raises."""
    if tvm_ffi:
        import tvm_ffi as ffi

        return ffi.load_module(str(path))[name]
    from cutlass.runtime import load_module

    return load_module(str(path), enable_tvm_ffi=False)[name]


def _load(folder: Path, name: str, tvm_ffi: bool) -> Any | None:
    """The entry ``name`` of the cache, or None where it is missing or does not load (truncated,
    not an entry, another version's): the caller compiles it again and replaces it."""
    path = folder / (name + _suffix(tvm_ffi))
    if not path.is_file():
        return None
    try:
        return _read_entry(path, name, tvm_ffi)
    except Exception:  # noqa: BLE001 - any entry that does not load is compiled again
        return None


def _save(fn: Any, folder: Path, name: str, tvm_ffi: bool) -> None:
    """Write the entry ``name`` into a temporary folder inside ``folder``, then rename it into
    place (atomic on one file system). Warns once and carries on where that fails."""
    global _DISK_WRITES
    if not _DISK_WRITES:
        return
    try:
        scratch = tempfile.TemporaryDirectory(dir=folder, prefix=".tmp-")
    except OSError as e:
        _DISK_WRITES = False
        _abi.warn_once(
            "cute-cache",
            f"cannot write the CuTeDSL kernel cache {folder} ({e}): its entries load, new "
            "kernels are not kept",
        )
        return
    try:
        with scratch as tmp:
            os.replace(_write_entry(fn, tmp, name, tvm_ffi), folder / (name + _suffix(tvm_ffi)))
    except Exception as e:  # noqa: BLE001 - a kernel that cannot be saved still runs
        _abi.warn_once(
            "cute-cache-save",
            f"could not save a compiled CuTeDSL kernel in {folder} ({type(e).__name__}: {e}): "
            "it compiles again in the next process",
        )


class CompileCache:
    """Compiled kernels of one operator, keyed only on static properties (Note [CuTe signatures]).

    ``build(key)`` returns ``(jit_fn, tensor_args, scalar_examples, int64)``: the ``@cute.jit``
    callable to compile, how its tensor arguments are described, example values of its scalar
    arguments (their types matter, not their values), and the ABI. A miss compiles against fake
    tensors only, never real data; each launch path (Note [CuTe launch paths]) has its own table.
    Behind the tables is the disk cache (Note [CuTe disk cache]); its entries are named after the
    source of every module in the folder of the one that defines ``build`` (which must hold what
    it builds) and of this one.
    """

    def __init__(
        self, op: str, build: Callable[[Hashable], tuple[Any, Sequence[TensorArg], tuple, bool]]
    ) -> None:
        self.op = op
        self._build = build
        self._tables: tuple[dict, dict] = ({}, {})  # default launch path, forced from_dlpack
        self._disk = True
        self.compiles = 0  # cache misses compiled in this process
        self.loads = 0  # kernels loaded from the disk cache

    def get(self, key: Hashable) -> Callable[..., None]:
        """The compiled kernel for ``key``, loaded from the disk cache or else compiled on the
        first request: call it with the tensors (torch tensors shaped as described) and then the
        scalars, positionally."""
        table = self._tables[_FORCE_DLPACK]
        kernel = table.get(key)
        if kernel is None:
            kernel = table[key] = self._kernel(key, tvm_ffi_available() and not _FORCE_DLPACK)
        return kernel

    def clear(self) -> None:
        """Forget every compiled kernel and stop using the disk cache (for tuning sweeps that
        change how keys build: the entries' names would not show it)."""
        self._disk = False
        for table in self._tables:
            table.clear()

    def _kernel(self, key: Hashable, tvm_ffi: bool) -> Callable[..., None]:
        if not tvm_ffi_available():
            _abi.warn_once(
                "cute-dlpack",
                "apache-tvm-ffi is not installed: CuTeDSL kernels launch through from_dlpack, "
                "which costs tens of microseconds more per call than TVM-FFI",
            )
        folder = _cache_dir() if self._disk else None
        name = self._entry_name(key, tvm_ffi) if folder is not None else None
        if name is not None:
            fn = _load(folder, name, tvm_ffi)
            if fn is not None:
                self.loads += 1
                if tvm_ffi:
                    return fn
                _, args, _, int64 = self._build(key)
                return _DlpackLaunch(fn, args, int64)
        fn, kernel = self._compile(key, tvm_ffi)
        if name is not None:
            _save(fn, folder, name, tvm_ffi)
        return kernel

    def _entry_name(self, key: Hashable, tvm_ffi: bool) -> str | None:
        try:
            return _entry_name(self.op, key, _entry_sources(inspect.getfile(self._build)), tvm_ffi)
        except (OSError, TypeError):  # a build without a source file is not kept on disk
            return None

    def _compile(self, key: Hashable, tvm_ffi: bool) -> tuple[Any, Callable[..., None]]:
        """Compile ``key``: the function ``cute.compile`` returns, and the kernel to call."""
        import cutlass.cute as cute

        jit_fn, args, scalars, int64 = self._build(key)
        fakes = _fake_args(args, int64, tvm_ffi)
        stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=tvm_ffi)
        options = "--enable-tvm-ffi" if tvm_ffi else ""
        fn = cute.compile(jit_fn, *fakes, *scalars, stream, options=options)
        self.compiles += 1
        _abi.note_compile(self.op, repr(key))
        if not tvm_ffi:
            return fn, _DlpackLaunch(fn, args, int64)
        # The plain TVM-FFI function, positional only, skips the Python keyword-argument wrapper
        # that cute.compile puts around it; it keeps the compiled module alive itself.
        plain = getattr(fn, "__tvm_ffi_object__", None)
        return fn, (plain() if plain is not None else None) or fn


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
