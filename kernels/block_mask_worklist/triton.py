import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import launchable, next_power_of_2


@triton.jit
def _block_row_count_kernel(
    m_ptr,
    cnt_ptr,
    H,
    QB,
    KB,
    m_sb,
    m_sh,
    m_sq,
    m_sk,
    BLOCK_KB: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    qi = row % QB
    bh = row // QB
    h = bh % H
    b = bh // H
    base = m_ptr + b * m_sb + h * m_sh + qi * m_sq
    acc = tl.zeros((BLOCK_KB,), dtype=tl.int32)
    for start in range(0, KB, BLOCK_KB):
        offs = start + tl.arange(0, BLOCK_KB)
        m = tl.load(base + offs * m_sk, mask=offs < KB, other=0)
        acc += (m != 0).to(tl.int32)
    tl.store(cnt_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def _block_row_write_kernel(
    m_ptr,
    end_ptr,
    cnt_ptr,
    out_ptr,
    H,
    QB,
    KB,
    m_sb,
    m_sh,
    m_sq,
    m_sk,
    BLOCK_KB: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    qi = row % QB
    bh = row // QB
    h = bh % H
    b = bh // H
    base = m_ptr + b * m_sb + h * m_sh + qi * m_sq
    # This row's first slot: the inclusive scan of the counts less its own count.
    pos = tl.load(end_ptr + row).to(tl.int64) - tl.load(cnt_ptr + row).to(tl.int64)
    for start in range(0, KB, BLOCK_KB):
        offs = start + tl.arange(0, BLOCK_KB)
        m = tl.load(base + offs * m_sk, mask=offs < KB, other=0)
        active = m != 0
        a32 = active.to(tl.int32)
        # Inclusive scan -> each active column's slot within this row, preserving kv order.
        dst = pos + (tl.cumsum(a32, axis=0) - 1).to(tl.int64)
        out_row = out_ptr + dst * 4
        zero = tl.zeros((BLOCK_KB,), dtype=tl.int32)
        tl.store(out_row + 0, zero + b.to(tl.int32), mask=active)
        tl.store(out_row + 1, zero + h.to(tl.int32), mask=active)
        tl.store(out_row + 2, zero + qi.to(tl.int32), mask=active)
        tl.store(out_row + 3, offs.to(tl.int32), mask=active)
        pos += tl.sum(a32, axis=0).to(tl.int64)


def block_mask_worklist(mask) -> Tensor:
    """Coordinates ``(b, h, q, kv)`` of the True blocks of ``mask``, in row-major order.

    Args:
        mask: ``[B, H, QB, KB]`` bool, any strides (another dtype is read as ``mask != 0``).

    Returns:
        ``coords``: ``[nnz, 4]`` int32, newly allocated and contiguous, one row per True entry,
        ordered as ``torch.nonzero`` orders them; ``nnz`` is data-dependent.

    Mutates nothing. Synchronizes with the host once (``nnz`` sizes the output).
    """
    B, H, QB, KB = mask.shape
    if mask.dtype == torch.bool:
        m = mask.view(torch.uint8)
    else:
        m = mask != 0
        m = m.view(torch.uint8)
    rows = B * H * QB
    if rows == 0 or KB == 0:
        return torch.empty((0, 4), dtype=torch.int32, device=mask.device)
    BLOCK_KB = min(1024, max(16, next_power_of_2(KB)))
    strides = m.stride()
    counts = m.new_empty((rows,), dtype=torch.int32)
    launchable(_block_row_count_kernel, counts)[(rows,)](
        m, counts, H, QB, KB, *strides, BLOCK_KB=BLOCK_KB
    )
    ends = torch.cumsum(counts, dim=0, dtype=torch.int64)
    # The one host sync: nnz sizes the output (the op is registered as opaque).
    nnz = int(ends[-1].item())
    out = counts.new_empty((nnz, 4))
    if nnz == 0:
        return out
    launchable(_block_row_write_kernel, out)[(rows,)](
        m, ends, counts, out, H, QB, KB, *strides, BLOCK_KB=BLOCK_KB
    )
    return out
