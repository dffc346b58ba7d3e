"""Launch helpers shared by the Triton kernels."""

import torch
import triton
from torch.utils._python_dispatch import is_in_torch_dispatch_mode
from triton.runtime.interpreter import InterpretedFunction

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
    if (
        _is_compiling()
        or _dispatch_stack_len()
        or is_in_torch_dispatch_mode()
        or type(like) is not _Tensor
        or like.is_meta
    ) and not isinstance(kernel, InterpretedFunction):
        return torch.library.wrap_triton(kernel)
    return kernel


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
