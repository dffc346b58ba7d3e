"""L2 normalization over the last dim: y = x / sqrt(sum(x^2) + eps)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import wrap_triton


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


def _launch_config(D: int) -> tuple[int, int]:
    block_d = triton.next_power_of_2(max(D, 1))
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
    D = x.shape[-1]
    y = x.new_empty(x.shape)
    rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    if x.numel() == 0:
        # As the reference computes it: rsqrt(0 + eps), inf for eps == 0 and nan below.
        rstd.fill_(torch.tensor(eps, dtype=torch.float32).rsqrt().item())
        return y, rstd
    x2 = x.reshape(-1, D).contiguous()
    n_rows = x2.shape[0]
    block_d, rows = _launch_config(D)
    grid = (triton.cdiv(n_rows, rows),)
    wrap_triton(_l2norm_fwd_kernel)[grid](x2, y, rstd, n_rows, D, eps, BLOCK_D=block_d, ROWS=rows)
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
    if x.numel() == 0:
        return dx
    x2 = x.reshape(-1, D).contiguous()
    dy2 = grad_y.reshape(-1, D).contiguous()
    rstd2 = rstd.reshape(-1).contiguous()
    n_rows = x2.shape[0]
    block_d, rows = _launch_config(D)
    grid = (triton.cdiv(n_rows, rows),)
    wrap_triton(_l2norm_bwd_kernel)[grid](x2, rstd2, dy2, dx, n_rows, D, BLOCK_D=block_d, ROWS=rows)
    return dx
