"""Float32 reference for l2norm."""

from __future__ import annotations

import torch
from torch import Tensor


def l2norm_ref(x: Tensor, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(sum(x**2, -1) + eps)`` computed in float32.

    Args:
        x: ``[..., D]``, any floating dtype.
        eps: added to the sum of squares of each row.

    Returns:
        ``y``: ``[..., D]`` float32 (not ``x``'s dtype). Differentiable; mutates nothing.
    """
    x = x.float()
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)
