"""Trivial launchers shared by every boundary-overhead variant: they allocate, they do no math."""

from __future__ import annotations

import torch
from torch import Tensor


def trivial_fwd(x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    y = x.new_empty(x.shape)
    rstd = x.new_empty(x.shape[:-1], dtype=torch.float32)
    return y, rstd


def trivial_bwd(grad_y: Tensor, x: Tensor, rstd: Tensor) -> Tensor:
    return x.new_empty(x.shape)


def trivial_ref(x: Tensor, eps: float = 1e-6) -> Tensor:
    return x.float()
