import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import cdiv, launchable, next_power_of_2

# Each program owns a run of whole rows of (b, h, q), walked BLOCK_ROWS rows at a time in
# [BLOCK_ROWS, BLOCK_KB] chunks. At most _MAX_PROGRAMS programs: the write pass finds its first
# output slot by summing the counts of the programs before it in one masked load, so no scan
# launch sits between the passes and the host needs only the total.
_TILE = 2048
_MAX_BLOCK_KB = 1024
_MAX_PROGRAMS = 1024
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
def _load_chunk(m_ptr, base, row_ok, kv, KB, m_sk):
    mask = row_ok[:, None] & (kv < KB)[None, :]
    m = tl.load(m_ptr + base[:, None] + (kv.to(tl.int64) * m_sk)[None, :], mask=mask, other=0)
    return m != 0


@triton.jit
def _block_count_kernel(
    m_ptr,
    cnt_ptr,
    rows,
    rows_per_program,
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
    # cnt[p]: the True entries of rows [p * rows_per_program, (p + 1) * rows_per_program).
    pid = tl.program_id(0)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, rows)
    total = tl.zeros((), dtype=tl.int32)
    for r0 in range(first, last, BLOCK_ROWS):
        row = r0 + tl.arange(0, BLOCK_ROWS)
        _, _, _, base = _row_bases(row, H, QB, m_sb, m_sh, m_sq)
        row_ok = row < last
        for kv0 in range(0, KB, BLOCK_KB):
            active = _load_chunk(m_ptr, base, row_ok, kv0 + tl.arange(0, BLOCK_KB), KB, m_sk)
            total += tl.sum(tl.sum(active.to(tl.int32), axis=1), axis=0)
    tl.store(cnt_ptr + pid, total)


@triton.jit
def _write_chunk(out_ptr, active, slot, b, h, q, kv):
    # Entry (r, j) of the chunk goes to slot[r] plus the True entries before it in row r, as one
    # 16-byte (b, h, q, kv) record; returns slot advanced past the row's True entries.
    a32 = active.to(tl.int32)
    dst = slot[:, None] + (tl.cumsum(a32, axis=1) - a32).to(tl.int64)
    c = tl.arange(0, 4)[None, None, :]
    rec = tl.where(
        c == 0,
        b[:, None, None],
        tl.where(c == 1, h[:, None, None], tl.where(c == 2, q[:, None, None], kv[None, :, None])),
    )
    tl.store(out_ptr + dst[:, :, None] * 4 + c, rec, mask=active[:, :, None] & (c < 4))
    return slot + tl.sum(a32, axis=1).to(tl.int64)


@triton.jit
def _block_write_kernel(
    m_ptr,
    cnt_ptr,
    out_ptr,
    programs,
    rows,
    rows_per_program,
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
    BLOCK_P: tl.constexpr,
):
    # Writes the (b, h, q, kv) of each True entry of this program's rows at its row-major rank:
    # the counts of the programs before it, plus the entries of its earlier rows, plus the
    # earlier entries of the same row.
    pid = tl.program_id(0)
    p = tl.arange(0, BLOCK_P)
    before = tl.load(cnt_ptr + p, mask=(p < pid) & (p < programs), other=0)
    start = tl.sum(before.to(tl.int64), axis=0)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, rows)
    for r0 in range(first, last, BLOCK_ROWS):
        row = r0 + tl.arange(0, BLOCK_ROWS)
        b, h, q, base = _row_bases(row, H, QB, m_sb, m_sh, m_sq)
        row_ok = row < last
        if ONE_CHUNK:
            kv = tl.arange(0, BLOCK_KB)
            active = _load_chunk(m_ptr, base, row_ok, kv, KB, m_sk)
            row_total = tl.sum(active.to(tl.int32), axis=1)
            slot = start + (tl.cumsum(row_total, axis=0) - row_total).to(tl.int64)
            _write_chunk(out_ptr, active, slot, b, h, q, kv)
        else:
            # Rows longer than a chunk: their totals first, then the chunks in order with each
            # row's running slot.
            row_total = tl.zeros((BLOCK_ROWS,), dtype=tl.int32)
            for kv0 in range(0, KB, BLOCK_KB):
                kv = kv0 + tl.arange(0, BLOCK_KB)
                active = _load_chunk(m_ptr, base, row_ok, kv, KB, m_sk)
                row_total += tl.sum(active.to(tl.int32), axis=1)
            slot = start + (tl.cumsum(row_total, axis=0) - row_total).to(tl.int64)
            for kv0 in range(0, KB, BLOCK_KB):
                kv = kv0 + tl.arange(0, BLOCK_KB)
                active = _load_chunk(m_ptr, base, row_ok, kv, KB, m_sk)
                slot = _write_chunk(out_ptr, active, slot, b, h, q, kv)
        start += tl.sum(row_total.to(tl.int64), axis=0)


def block_mask_worklist(mask) -> Tensor:
    """Coordinates ``(b, h, q, kv)`` of the True blocks of ``mask``, in row-major order.

    Two launches around one host read: per-program counts of True entries (each program a run
    of whole rows of ``(b, h, q)``), copied to the host and added into ``nnz``; then the write
    pass, where each program adds the counts before its own and places each entry at its rank.

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
    # Whole row chunks per program, and no more programs than the write pass's offset load covers.
    rows_per_program = block_rows * cdiv(cdiv(rows, _MAX_PROGRAMS), block_rows)
    programs = cdiv(rows, rows_per_program)
    s_b, s_h, s_q, s_k = m.stride()
    counts = m.new_empty((programs,), dtype=torch.int32)
    launchable(_block_count_kernel, counts)[(programs,)](
        m,
        counts,
        rows,
        rows_per_program,
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
    # The one host sync: nnz sizes the output (the op is registered as opaque). The counts of at
    # most _MAX_PROGRAMS programs come over in one copy and are added here, in int64.
    nnz = int(counts.cpu().sum())
    out = counts.new_empty((nnz, 4))
    if nnz == 0:
        return out
    launchable(_block_write_kernel, out)[(programs,)](
        m,
        counts,
        out,
        programs,
        rows,
        rows_per_program,
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
        BLOCK_P=next_power_of_2(programs),
        num_warps=_NUM_WARPS,
    )
    return out
