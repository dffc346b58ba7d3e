"""Launch helpers shared by the Triton kernels."""

import os
import sys

import torch
import triton
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_dispatch_stack_len = torch._C._len_torch_dispatch_stack


def launchable(kernel, like: torch.Tensor):
    """What to index with the grid: ``kernel`` itself, or ``wrap_triton(kernel)`` when traced.

    Note [direct launches]: ``torch.library.wrap_triton(kernel)[grid](...)`` outside tracing goes
    through the ``triton_kernel_wrapper_mutation`` higher-order operator on every launch (side
    table entries, HOP dispatch, argument re-packing: about 114 us of host time per launch on
    the H200 against 20.7 us for ``kernel[grid](...)``), and that operator then launches the raw
    kernel from its dense implementation anyway. That dense path is what the dispatcher picks
    unless one of these holds, so the raw kernel is launched unless one of them does:

    - Dynamo traces this Python code (``torch.compiler.is_compiling()``, folded to True there;
      checked first, so Dynamo never evaluates the rest);
    - a ``TorchDispatchMode`` is on the dispatch stack (``FakeTensorMode``,
      ``FunctionalTensorMode``, ``ProxyTorchDispatchMode``: AOTAutograd, ``make_fx``, export,
      triton_op's decomposition under compile, a fake implementation), or one has been entered
      and is only popped while its own handler runs, or lives on the pre-dispatch stack (both
      seen by ``is_in_torch_dispatch_mode()``, which is conservative: a user's own mode sends
      launches through ``wrap_triton`` as before);
    - ``like``, a tensor the launcher allocated from its inputs, is a subclass (a fake or
      functional tensor) or a meta tensor (triton_op registers its impl as the meta kernel).

    Where ``wrap_triton`` is used, it still returns the raw kernel when triton_op has turned it
    off for its own eager calls. With ``TRITON_INTERPRET=1``, ``@triton.jit`` returns an
    ``InterpretedFunction``: torch 2.13 launches it unwrapped, torch 2.11 raises ("wrap_triton
    only works on functions annotated with triton.jit"); it cannot be traced either way, so it is
    always returned as it is.
    """
    if _traced(like) and not interpreted(kernel):
        return torch.library.wrap_triton(kernel)
    return kernel


def interpreted(kernel) -> bool:
    """Whether ``kernel`` is Triton's ``InterpretedFunction`` (TRITON_INTERPRET=1).

    Triton imports its interpreter, and with it numpy, only under TRITON_INTERPRET=1; where it is
    not imported no kernel is one, and the kernels never import it (or numpy) themselves.
    """
    interpreter = sys.modules.get("triton.runtime.interpreter")
    return interpreter is not None and isinstance(kernel, interpreter.InterpretedFunction)


def _traced(like: torch.Tensor) -> bool:
    # Whether a launch for ``like`` goes through wrap_triton (``launchable``).
    return bool(
        _is_compiling()
        or _dispatch_stack_len()
        or is_in_torch_dispatch_mode()
        or type(like) is not _Tensor
        or like.is_meta
    )


def cdiv(a: int, b: int) -> int:
    """``triton.cdiv(a, b)`` without Triton's constexpr-function wrapper (microseconds a call).

    The same arithmetic as Triton's (``a >= 0``, ``b > 0``), so a SymInt (a triton_op traced by
    torch.compile) gets the same expression as before.
    """
    return (a + b - 1) // b


def next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2(n)``, on a Python int without Triton's wrapper; anything else
    (a SymInt under tracing) goes to Triton's own, as before."""
    if type(n) is int:
        return 1 << (n - 1).bit_length() if n > 0 else 0
    return triton.next_power_of_2(n)


# Note [cached launches]: ``kernel[grid](*args)`` spends 13-18 us of host time per launch on the
# H200's host before the kernel is queued (binding and specializing every argument, computing
# the cache key, reading Triton's knobs, building launch metadata); the launch itself, the
# compiled kernel's C launcher, takes about 6. Where a launcher knows a cheap key that
# determines the compiled kernel (the values of its int and constexpr arguments, its launch
# options and the 16-byte alignment of each tensor argument: everything Triton specializes on,
# for fixed tensor dtypes), ``CachedLaunches`` makes the first launch of each key through
# ``kernel[grid]``, keeps the compiled kernel it returns, and sends later launches with that key
# straight to its C launcher on the current device and stream. It falls back to
# ``kernel[grid]`` wherever that would do more than launch: under tracing (``launchable``),
# under Triton's interpreter, and while Triton launch hooks (a profiler such as proton) or
# pre-run hooks are installed. A launcher that launches several kernels reads that state once
# (``launch_state``) and passes it to each. ``VERIFY`` (for tests) checks on every cached launch
# that Triton's own binding picks the same compiled kernel (the same hash: two threads that
# compile one specialization at once keep two equal kernel objects).
VERIFY = False
_MAX_KEYS = 512
_knobs = getattr(triton, "knobs", None)
_runtime_knobs = getattr(_knobs, "runtime", None)
_compilation_knobs = getattr(_knobs, "compilation", None)
# The C launcher's arguments are those of Triton's CUDA backend, from 3.x with knobs on.
_CACHEABLE = _runtime_knobs is not None and _compilation_knobs is not None
_CACHEABLE = _CACHEABLE and torch.version.hip is None

# The current CUDA device without torch.cuda's lazy-init check (a CUDA tensor is at hand, so
# CUDA is initialized); torch.cuda's own, which explains itself, on a build without CUDA.
_get_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)


def _current_device() -> int:
    return _get_device()


def _on_gpu(like: torch.Tensor) -> bool:
    return like.is_cuda


def _raw_stream(device: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device)


# Note [stream objects]: ``torch.cuda.current_stream()`` builds a new Python ``Stream`` object on
# every call (microseconds of host time), where a launcher that waits for its own launches only
# needs the stream it launched on. ``synchronize`` keeps one object per (device, raw handle): the
# object waits on its handle, and a raw handle names one live stream at a time, so an object
# made for the handle waits on whichever stream holds it now.
_STREAMS: dict = {}
_MAX_STREAMS = 64
_stream_synchronize = getattr(torch._C, "_CudaStreamBase", None)
_stream_synchronize = getattr(_stream_synchronize, "synchronize", None)


def synchronize(device: int, raw_stream: int | None = None) -> None:
    """Wait for the work queued on the current stream of CUDA device ``device``; ``raw_stream``
    is that stream's handle when the caller has it (``launch_state``'s)."""
    if raw_stream is None or _stream_synchronize is None:
        torch.cuda.current_stream(device).synchronize()
        return
    stream = _STREAMS.get((device, raw_stream))
    if stream is None:
        stream = torch.cuda.current_stream(device)
        if stream.cuda_stream != raw_stream:
            raise ValueError(
                f"stream handle {raw_stream:#x} is not the current stream of device {device}"
            )
        if len(_STREAMS) >= _MAX_STREAMS:
            _STREAMS.clear()
        _STREAMS[(device, raw_stream)] = stream
    _stream_synchronize(stream)


def launch_state(like: torch.Tensor):
    """What cached launches for ``like`` (a tensor the launcher allocated) need: ``(compiled
    kernels' key prefix, stream)``, or None where every launch must go through
    ``launchable(kernel, like)[grid]`` (Note [cached launches])."""
    rt = _runtime_knobs
    if (
        not _CACHEABLE
        or not _on_gpu(like)  # a CPU tensor: only Triton's interpreter launches for it
        or _traced(like)
        # Installed launch hooks: Triton 3.6 keeps them in a HookChain (its ``calls``), earlier
        # versions as a callable or None.
        or getattr(rt.launch_enter_hook, "calls", rt.launch_enter_hook)
        or getattr(rt.launch_exit_hook, "calls", rt.launch_exit_hook)
    ):
        return None
    device = _current_device()
    # Triton compiles per device and folds its debug and instrumentation knobs into the kernel.
    prefix = (device, rt.debug, _compilation_knobs.instrumentation_mode)
    return prefix, _raw_stream(device)


def _same_kernel(a, b) -> bool:
    # Two threads that compile one specialization at once each get a compiled kernel object, and
    # Triton's cache keeps the last one: the same kernel, told by its hash.
    return a is b or getattr(a, "hash", a) == getattr(b, "hash", b)


class CachedLaunches:
    """Launches of one ``@triton.jit`` kernel by a key the caller computes (Note [cached
    launches])."""

    __slots__ = ("kernel", "_compiled", "_usable")

    # Each entry of ``_compiled``: (compiled kernel, its launcher object, its CUfunction, its
    # packed metadata), read once: the compiled kernel's attributes are properties.

    def __init__(self, kernel):
        self.kernel = kernel
        self._compiled: dict = {}
        self._usable = not interpreted(kernel) and hasattr(kernel, "pre_run_hooks")

    def __call__(self, grid: tuple, like: torch.Tensor, key, *args, **options) -> None:
        """``kernel[grid](*args, **options)``, every kernel argument positional (constexprs
        included). ``key`` must determine the compiled kernel: every int and constexpr argument
        (or what Triton specializes on in it), the alignment of every tensor argument to 16 bytes,
        and ``options``; tensor dtypes must be fixed at the call site."""
        self.launch(launch_state(like), grid, like, key, *args, **options)

    def launch(self, state, grid: tuple, like: torch.Tensor, key, *args, **options) -> None:
        """``self(grid, like, key, *args, **options)`` with ``state = launch_state(like)`` read
        by the caller, once for all the launches of one call."""
        kernel = self.kernel
        if state is None or not self._usable or kernel.pre_run_hooks:
            launchable(kernel, like)[grid](*args, **options)
            return
        prefix, stream = state
        full_key = (prefix, key)
        entry = self._compiled.get(full_key)
        if entry is None:
            compiled = kernel[grid](*args, **options)
            if len(self._compiled) >= _MAX_KEYS:
                self._compiled.clear()
            self._compiled[full_key] = (
                compiled,
                compiled.run,
                compiled.function,
                compiled.packed_metadata,
            )
            return
        compiled, run, function, metadata = entry
        if VERIFY and not _same_kernel(kernel.warmup(*args, grid=grid, **options), compiled):
            raise AssertionError(
                f"cached launch of {kernel.__name__}: key {key!r} maps to a kernel compiled for "
                "other arguments (the key misses something Triton specializes on)"
            )
        n = len(grid)
        run(
            grid[0],
            grid[1] if n > 1 else 1,
            grid[2] if n > 2 else 1,
            stream,
            function,
            metadata,
            None,
            None,
            None,
            *args,
        )


# Note [no driver]: Triton launches a kernel through the one driver that is active (a GPU's), or
# through its interpreter where TRITON_INTERPRET=1 was set before the kernels were defined. With
# neither (a machine without a GPU, the interpreter off), every launch fails deep in Triton with
# "0 active drivers ([]). There should only be one.": that is told here, when the first
# launcher module imports this one, naming what to set (a missing numpy under the interpreter is
# told where the generated package loads a launcher, Note [launcher imports]). A process
# without a driver gets a ``launchable`` that refuses every launch that is not traced (a fake or meta tensor's
# still goes through ``wrap_triton``, launching nothing); one with a driver keeps the one above,
# at no cost per launch.


def _interpreting() -> bool:
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is not None:
        return bool(runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


def _active_drivers() -> int | None:
    """How many of Triton's backends have an active driver; None where that cannot be told
    (another Triton layout, or TRITON_DEFAULT_BACKEND picks one: Triton then speaks itself)."""
    if os.environ.get("TRITON_DEFAULT_BACKEND"):
        return None
    try:
        from triton.backends import backends

        return sum(1 for backend in backends.values() if backend.driver.is_active())
    except Exception:  # noqa: BLE001 - a Triton without these internals: leave it to Triton
        return None


NO_DRIVER = (
    "Triton has no active driver here (no GPU it can use) and its interpreter is off, so its "
    "kernels cannot run on {device} tensors: set TRITON_INTERPRET=1 in the environment before "
    "triton is first imported (e.g. TRITON_INTERPRET=1 python script.py) to run them on the CPU "
    "through Triton's interpreter"
)


def _refuse_launch(kernel, like: torch.Tensor):
    """``launchable`` where no Triton launch can succeed (Note [no driver])."""
    if _traced(like):
        return torch.library.wrap_triton(kernel)
    raise RuntimeError(NO_DRIVER.format(device=like.device.type))


if not _interpreting() and _active_drivers() == 0:
    launchable = _refuse_launch
