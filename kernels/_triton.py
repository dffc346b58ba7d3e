"""Launch helpers shared by the Triton kernels."""

import torch


def wrap_triton(kernel):
    """``torch.library.wrap_triton(kernel)``, also under Triton's interpreter.

    With ``TRITON_INTERPRET=1``, ``@triton.jit`` returns an ``InterpretedFunction``. torch 2.13
    launches it unwrapped; torch 2.11 raises instead ("wrap_triton only works on
    functions annotated with triton.jit"). Interpreted kernels cannot be traced either way, so
    returning them unwrapped gives every supported torch the same behaviour.
    """
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(kernel, InterpretedFunction):
        return kernel
    return torch.library.wrap_triton(kernel)
