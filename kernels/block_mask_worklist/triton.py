import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import cdiv, launchable, next_power_of_2

# Mask entries per program: BLOCK_ROWS rows of BLOCK_KB columns. Both passes split the rows the
# same way, so that the scan of the first pass's per-program counts gives each program of the
# second its first output slot.
_TILE = 4096
_MAX_BLOCK_KB = 1024
_NUM_WARPS = 4


@triton.jit
def _row_bases(row, H, QB, m_sb, m_sh, m_sq):
    # (b, h, q) of the flat row indices ``row`` (int32, over B * H * QB) and the int64 offsets
    # of the rows' first entries.
    q = row % QB
    bh = row // QB
    h = bh % H
    b = bh // H
    base = b.to(tl.int64) * m_sb + h.to(tl.int64) * m_sh + q.to(tl.int64) * m_sq
    return b, h, q, base


@triton.jit
def _block_count_kernel(
    m_ptr,
    cnt_ptr,
    rows,
    H,
    QB,
    KB,
    m_sb,
    m_sh,
    m_sq,
    m_sk,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_KB: tl.constexpr,
):
    # cnt[p]: the True entries of rows [p * BLOCK_ROWS, (p + 1) * BLOCK_ROWS).
    pid = tl.program_id(0)
    row = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    _, _, _, base = _row_bases(row, H, QB, m_sb, m_sh, m_sq)
    row_ok = row < rows
    total = tl.zeros((), dtype=tl.int32)
    for kv0 in range(0, KB, BLOCK_KB):
        kv = kv0 + tl.arange(0, BLOCK_KB)
        mask = row_ok[:, None] & (kv < KB)[None, :]
        m = tl.load(m_ptr + base[:, None] + (kv * m_sk)[None, :], mask=mask, other=0)
        total += tl.sum(tl.sum((m != 0).to(tl.int32), axis=1), axis=0)
    tl.store(cnt_ptr + pid, total)


@triton.jit
def _write_chunk(out_ptr, m, slot, b, h, q, kv):
    # Entry (r, j) of the chunk goes to slot[r] plus the True entries before it in row r; returns
    # slot advanced past the row's True entries.
    active = m != 0
    a32 = active.to(tl.int32)
    dst = slot[:, None] + (tl.cumsum(a32, axis=1) - a32).to(tl.int64)
    out_row = out_ptr + dst * 4
    zero = tl.zeros(m.shape, dtype=tl.int32)
    tl.store(out_row + 0, zero + b[:, None], mask=active)
    tl.store(out_row + 1, zero + h[:, None], mask=active)
    tl.store(out_row + 2, zero + q[:, None], mask=active)
    tl.store(out_row + 3, zero + kv[None, :], mask=active)
    return slot + tl.sum(a32, axis=1).to(tl.int64)


@triton.jit
def _block_write_kernel(
    m_ptr,
    cnt_ptr,
    end_ptr,
    out_ptr,
    rows,
    H,
    QB,
    KB,
    m_sb,
    m_sh,
    m_sq,
    m_sk,
    ONE_CHUNK: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_KB: tl.constexpr,
):
    # Writes the (b, h, q, kv) of each True entry of this program's rows at its row-major rank:
    # the program's first slot (inclusive scan of the counts less its own count), plus the
    # entries of its earlier rows, plus the earlier entries of the same row.
    pid = tl.program_id(0)
    start = tl.load(end_ptr + pid).to(tl.int64) - tl.load(cnt_ptr + pid).to(tl.int64)
    row = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    b, h, q, base = _row_bases(row, H, QB, m_sb, m_sh, m_sq)
    row_ok = row < rows
    if ONE_CHUNK:
        kv = tl.arange(0, BLOCK_KB)
        mask = row_ok[:, None] & (kv < KB)[None, :]
        m = tl.load(m_ptr + base[:, None] + (kv * m_sk)[None, :], mask=mask, other=0)
        row_total = tl.sum((m != 0).to(tl.int32), axis=1)
        slot = start + (tl.cumsum(row_total, axis=0) - row_total).to(tl.int64)
        _write_chunk(out_ptr, m, slot, b, h, q, kv)
    else:
        # Rows longer than a chunk: their totals first, then the chunks in order with each
        # row's running slot.
        row_total = tl.zeros((BLOCK_ROWS,), dtype=tl.int32)
        for kv0 in range(0, KB, BLOCK_KB):
            kv = kv0 + tl.arange(0, BLOCK_KB)
            mask = row_ok[:, None] & (kv < KB)[None, :]
            m = tl.load(m_ptr + base[:, None] + (kv * m_sk)[None, :], mask=mask, other=0)
            row_total += tl.sum((m != 0).to(tl.int32), axis=1)
        slot = start + (tl.cumsum(row_total, axis=0) - row_total).to(tl.int64)
        for kv0 in range(0, KB, BLOCK_KB):
            kv = kv0 + tl.arange(0, BLOCK_KB)
            mask = row_ok[:, None] & (kv < KB)[None, :]
            m = tl.load(m_ptr + base[:, None] + (kv * m_sk)[None, :], mask=mask, other=0)
            slot = _write_chunk(out_ptr, m, slot, b, h, q, kv)


def block_mask_worklist(mask) -> Tensor:
    """Coordinates ``(b, h, q, kv)`` of the True blocks of ``mask``, in row-major order.

    Three launches around one host read: per-program counts of True entries (each program
    ``BLOCK_ROWS`` rows of ``(b, h, q)``), their inclusive scan (``torch.cumsum``, whose last
    entry is ``nnz``), then the write pass, which places each entry at its rank.

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
    block_kb = min(next_power_of_2(KB), _MAX_BLOCK_KB)
    block_rows = max(_TILE // block_kb, 1)
    programs = cdiv(rows, block_rows)
    s_b, s_h, s_q, s_k = m.stride()
    counts = m.new_empty((programs,), dtype=torch.int32)
    launchable(_block_count_kernel, counts)[(programs,)](
        m,
        counts,
        rows,
        H,
        QB,
        KB,
        s_b,
        s_h,
        s_q,
        s_k,
        BLOCK_ROWS=block_rows,
        BLOCK_KB=block_kb,
        num_warps=_NUM_WARPS,
    )
    # Counts of a few hundred programs: torch's scan is one small launch. int32 unless the mask
    # could hold more True entries than int32 counts.
    wide = rows * KB >= 2**31
    ends = torch.cumsum(counts, 0, dtype=torch.int64 if wide else torch.int32)
    # The one host sync: nnz sizes the output (the op is registered as opaque).
    nnz = int(ends[-1].item())
    out = counts.new_empty((nnz, 4))
    if nnz == 0:
        return out
    launchable(_block_write_kernel, out)[(programs,)](
        m,
        counts,
        ends,
        out,
        rows,
        H,
        QB,
        KB,
        s_b,
        s_h,
        s_q,
        s_k,
        ONE_CHUNK=KB <= block_kb,
        BLOCK_ROWS=block_rows,
        BLOCK_KB=block_kb,
        num_warps=_NUM_WARPS,
    )
    return out
