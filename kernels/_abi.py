"""What kernel launchers need of the layout runtime of the package that calls them, without
importing that package: the int64 ABI predicate, and the reports of which signature ran and
which kernel compiled.

Note [kernel ABI]: the generated package loads the kernels (its launchers name them), so the
kernels never import it back: they work under whatever package name a project generates into.
Two things still belong to that package's layout runtime (``<package>/_layout.py``, a copy of
``codegen/runtime/layout.py``): ``force_int64_abi()``, which every launcher with an int64
specialization must obey, and ``dispatch_trace()``, which collects the launchers' reports. So
the functions here find the layout runtimes loaded in this process, by what they are (a module
named ``<package>._layout`` with ``requires_int64_abi``, ``note_signature`` and ``note_compile``),
and defer to them: the ABI is forced when one of them forces it, and each report goes to each of
them. With none loaded (a launcher called on its own), the predicate alone decides and reports
go nowhere. ``tests/test_kernel_abi.py`` proves both sides give the same answers.
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType

import torch

INT32_MAX = 2**31 - 1


def exceeds_int32(*tensors: torch.Tensor | None) -> bool:
    """Whether some tensor's sizes, strides or element span do not fit 32-bit indexing
    (``None`` and empty tensors skipped): ``_layout.requires_int64_abi`` outside
    ``force_int64_abi()``."""
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


def requires_int64_abi(*tensors: torch.Tensor | None) -> bool:
    """Whether a launcher takes its int64 specialization: :func:`exceeds_int32`, or a loaded
    layout runtime's ``force_int64_abi()`` is in effect (Note [kernel ABI])."""
    for lay in _runtimes():
        if lay.requires_int64_abi():  # of no tensor: its forced switch alone
            return True
    return exceeds_int32(*tensors)


def note_signature(op: str, signature: str) -> None:
    """Report the compiled signature a launcher chose, to every loaded layout runtime."""
    for lay in _runtimes():
        lay.note_signature(op, signature)


def note_compile(op: str, key: str) -> None:
    """Report a kernel compile (a cache miss) and its key, to every loaded layout runtime."""
    for lay in _runtimes():
        lay.note_compile(op, key)


_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Warn the first time ``key`` is seen in this process."""
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


_FOUND: tuple[int, tuple[ModuleType, ...]] = (-1, ())
_API = ("requires_int64_abi", "note_signature", "note_compile")


def _runtimes() -> tuple[ModuleType, ...]:
    """The layout runtimes loaded in this process, looked for again only when a module was
    loaded or unloaded since the last look (one ``len`` per call otherwise)."""
    global _FOUND
    count, found = _FOUND
    if count != len(sys.modules):
        modules = sys.modules.copy()
        found = tuple(
            module
            for name, module in sorted(modules.items())
            if name.endswith("._layout")
            and module is not None
            and all(callable(getattr(module, attr, None)) for attr in _API)
        )
        _FOUND = (len(modules), found)
    return found
