"""Float32 reference for l2norm."""

from __future__ import annotations

import torch
from torch import Tensor


def l2norm_ref(x: Tensor, eps: float = 1e-6) -> Tensor:
    x = x.float()
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)
