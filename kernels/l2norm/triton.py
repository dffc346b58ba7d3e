"""L2 normalization over the last dim: y = x / sqrt(sum(x^2) + eps)."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import cdiv, launchable, next_power_of_2


@triton.jit
def _l2norm_fwd_kernel(X, Y, RSTD, n_rows, D, eps, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < D)
    offs = rows[:, None].to(tl.int64) * D + cols[None, :]
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) + eps)
    tl.store(Y + offs, (x * rstd[:, None]).to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + rows, rstd, mask=rows < n_rows)


@triton.jit
def _l2norm_bwd_kernel(X, RSTD, DY, DX, n_rows, D, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < D)
    offs = rows[:, None].to(tl.int64) * D + cols[None, :]
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(RSTD + rows, mask=rows < n_rows, other=0.0)
    y = x * rstd[:, None]
    # d/dx of x * rsqrt(|x|^2 + eps): rstd * (dy - y * <dy, y>)
    dx = rstd[:, None] * (dy - y * tl.sum(dy * y, axis=1)[:, None])
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)


@functools.cache
def _launch_config(D: int) -> tuple[int, int]:
    block_d = next_power_of_2(max(D, 1))
    rows = max(1, min(16, 4096 // block_d))
    return block_d, rows


def l2norm_fwd(x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """Forward of ``l2norm``: ``y = x * rstd`` with ``rstd = 1 / sqrt(sum(x**2, -1) + eps)``.

    Args:
        x: ``[..., D]``, bfloat16, float16 or float32, any number of leading dims, any strides
            (a non-contiguous ``x`` is copied to a contiguous one first).
        eps: added to the sum of squares of each row.

    Returns:
        ``(y, rstd)``, both newly allocated and contiguous: ``y`` is ``[..., D]`` in ``x``'s
        dtype, ``rstd`` is ``[...]`` float32 (kept for the backward). With no rows or ``D == 0``
        nothing is launched and ``rstd`` is ``eps ** -0.5``.

    Mutates nothing. A program holds whole rows (``next_power_of_2(D)`` columns), so there is
    no fixed limit on ``D`` beyond register pressure.
    """
    shape = x.shape
    D = shape[-1]
    y = x.new_empty(shape)
    rstd = x.new_empty(shape[:-1], dtype=torch.float32)
    numel = x.numel()
    if numel == 0:
        # As the reference computes it, in float32 on the device: rsqrt(0 + eps), inf for
        # eps == 0 and nan below (no host round trip).
        rstd.fill_(eps).rsqrt_()
        return y, rstd
    # The kernel reads row r at r * D: a contiguous x already is its own [n_rows, D] view.
    if not x.is_contiguous():
        x = x.contiguous()
    n_rows = numel // D
    block_d, rows = _launch_config(D)
    launchable(_l2norm_fwd_kernel, y)[(cdiv(n_rows, rows),)](
        x, y, rstd, n_rows, D, eps, BLOCK_D=block_d, ROWS=rows
    )
    return y, rstd


def l2norm_bwd(grad_y: Tensor, x: Tensor, rstd: Tensor) -> Tensor:
    """Backward of ``l2norm``: ``grad_x = rstd * (grad_y - y * <grad_y, y>)`` with ``y = x * rstd``.

    Args:
        grad_y: ``[..., D]``, the gradient of ``y`` (any floating dtype, any strides).
        x: ``[..., D]``, the forward input, bfloat16, float16 or float32, any strides.
        rstd: ``[...]`` float32, the second output of :func:`l2norm_fwd`.

    Returns:
        ``grad_x``: ``[..., D]`` in ``x``'s dtype, newly allocated and contiguous.

    Mutates nothing.
    """
    D = x.shape[-1]
    dx = x.new_empty(x.shape)
    numel = x.numel()
    if numel == 0:
        return dx
    # Contiguous operands are their own flat views (row r at r * D, rstd[r] at r).
    if not x.is_contiguous():
        x = x.contiguous()
    if not grad_y.is_contiguous():
        grad_y = grad_y.contiguous()
    if not rstd.is_contiguous():
        rstd = rstd.contiguous()
    n_rows = numel // D
    block_d, rows = _launch_config(D)
    launchable(_l2norm_bwd_kernel, dx)[(cdiv(n_rows, rows),)](
        x, rstd, grad_y, dx, n_rows, D, BLOCK_D=block_d, ROWS=rows
    )
    return dx
