"""Lazy launcher loading: importing the package loads no kernel backend (Triton, CuTeDSL)."""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable

import torch


@functools.cache
def launcher(ref: str) -> Callable:
    """Import ``module:function`` on first use; later calls are a cache lookup."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


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
