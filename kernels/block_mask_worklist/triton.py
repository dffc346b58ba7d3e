import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import cdiv, launchable, next_power_of_2

# Each program owns a run of whole rows of (b, h, q), walked BLOCK_ROWS rows at a time in
# [BLOCK_ROWS, BLOCK_KB] chunks. One launch counts and writes: a program takes the next run in
# ticket order, publishes its count, waits until every earlier run has published, and writes its
# entries after theirs (Note [one launch]). At most _MAX_PROGRAMS runs, so that wait is one
# masked load. Records go to a buffer of _MAX_RECORDS at most; only when more entries than that
# are True does a second launch write them into an exact buffer, from the published counts.
_TILE = 2048
_MAX_BLOCK_KB = 1024
_MAX_PROGRAMS = 1024
_MAX_RECORDS = 1 << 22  # 64 MiB of 16-byte records
_NUM_WARPS = 4

# Note [one launch]: runs are handed out by an atomic ticket, not by program id, so a program
# only ever waits for runs whose programs already hold a ticket, are running, and publish
# their count before they wait themselves: the wait ends however the programs are scheduled.
# Counts are published as count + 1 so that the zeroed workspace reads as "not yet".
# Workspace (int64, zeroed per call): [0] the next ticket, [1] nnz (written by the last run),
# [2 + t] run t's count + 1.


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
def _write_chunk(out_ptr, capacity, active, slot, b, h, q, kv):
    # Entry (r, j) of the chunk goes to slot[r] plus the True entries before it in row r, as one
    # 16-byte (b, h, q, kv) record, if that slot is below capacity; returns slot advanced past
    # the row's True entries.
    a32 = active.to(tl.int32)
    dst = slot[:, None] + (tl.cumsum(a32, axis=1) - a32).to(tl.int64)
    c = tl.arange(0, 4)[None, None, :]
    rec = tl.where(
        c == 0,
        b[:, None, None],
        tl.where(c == 1, h[:, None, None], tl.where(c == 2, q[:, None, None], kv[None, :, None])),
    )
    keep = (active & (dst < capacity))[:, :, None] & (c < 4)
    tl.store(out_ptr + dst[:, :, None] * 4 + c, rec, mask=keep)
    return slot + tl.sum(a32, axis=1).to(tl.int64)


@triton.jit
def _worklist_kernel(
    m_ptr,
    ws_ptr,
    out_ptr,
    capacity,
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
    FIRST: tl.constexpr,
    ONE_CHUNK: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_KB: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    # Writes the (b, h, q, kv) of each True entry of this program's run of rows at its row-major
    # rank (below ``capacity``): the counts of the earlier runs, plus the entries of its earlier
    # rows, plus the earlier entries of the same row. FIRST: take a ticket, count the run and
    # publish the count (Note [one launch]); otherwise every count is already published and run
    # t is program t.
    if FIRST:
        tile = tl.atomic_add(ws_ptr, 1).to(tl.int32)
    else:
        tile = tl.program_id(0)
    first = tile * rows_per_program
    last = tl.minimum(first + rows_per_program, rows)
    if FIRST:
        total = tl.zeros((), dtype=tl.int64)
        for r0 in range(first, last, BLOCK_ROWS):
            row = r0 + tl.arange(0, BLOCK_ROWS)
            _, _, _, base = _row_bases(row, H, QB, m_sb, m_sh, m_sq)
            row_ok = row < last
            for kv0 in range(0, KB, BLOCK_KB):
                active = _load_chunk(m_ptr, base, row_ok, kv0 + tl.arange(0, BLOCK_KB), KB, m_sk)
                total += tl.sum(tl.sum(active.to(tl.int32), axis=1), axis=0).to(tl.int64)
        tl.atomic_xchg(ws_ptr + 2 + tile, total + 1)
    p = tl.arange(0, BLOCK_P)
    earlier = p < tile
    seen = tl.load(ws_ptr + 2 + p, mask=earlier, other=1, volatile=True)
    while tl.min(seen, axis=0) == 0:
        seen = tl.load(ws_ptr + 2 + p, mask=earlier, other=1, volatile=True)
    start = tl.sum(tl.where(earlier, seen - 1, 0), axis=0)
    if FIRST:
        if tile == programs - 1:
            tl.store(ws_ptr + 1, start + total)
    for r0 in range(first, last, BLOCK_ROWS):
        row = r0 + tl.arange(0, BLOCK_ROWS)
        b, h, q, base = _row_bases(row, H, QB, m_sb, m_sh, m_sq)
        row_ok = row < last
        if ONE_CHUNK:
            kv = tl.arange(0, BLOCK_KB)
            active = _load_chunk(m_ptr, base, row_ok, kv, KB, m_sk)
            row_total = tl.sum(active.to(tl.int32), axis=1)
            slot = start + (tl.cumsum(row_total, axis=0) - row_total).to(tl.int64)
            _write_chunk(out_ptr, capacity, active, slot, b, h, q, kv)
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
                slot = _write_chunk(out_ptr, capacity, active, slot, b, h, q, kv)
        start += tl.sum(row_total.to(tl.int64), axis=0)


def block_mask_worklist(mask) -> Tensor:
    """Coordinates ``(b, h, q, kv)`` of the True blocks of ``mask``, in row-major order.

    One launch counts and writes (Note [one launch]): each program counts a run of whole rows of
    ``(b, h, q)``, publishes the count, adds the counts of the runs before its own and places
    each entry at its rank, into a buffer of ``min(mask.numel(), _MAX_RECORDS)`` records; the
    host then reads ``nnz`` once. Only when ``nnz`` exceeds that buffer does a second launch
    write every entry into an exact one from the published counts.

    Args:
        mask: ``[B, H, QB, KB]`` bool, any strides (another dtype is read as ``mask != 0``).

    Returns:
        ``coords``: ``[nnz, 4]`` int32, contiguous, one row per True entry, ordered as
        ``torch.nonzero`` orders them; ``nnz`` is data-dependent. Its storage holds at most
        twice ``nnz`` records: the buffer itself when ``nnz`` fills half of it or more, else an
        exact copy.

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
    geometry = _geometry(m)
    capacity = min(rows * KB, _MAX_RECORDS)
    ws = torch.zeros((geometry[0] + 2,), dtype=torch.int64, device=m.device)
    buf = ws.new_empty((capacity, 4), dtype=torch.int32)
    _launch(m, ws, buf, capacity, geometry, first=True)
    # The one host sync: nnz sizes the output (the op is registered as opaque).
    nnz = int(ws[1])
    if nnz <= capacity:
        return buf[:nnz] if 2 * nnz >= capacity else buf[:nnz].clone()
    out = ws.new_empty((nnz, 4), dtype=torch.int32)
    _launch(m, ws, out, nnz, geometry, first=False)
    return out


def _geometry(m):
    # (programs, rows per program, rows per chunk, mask entries per chunk) for a [B, H, QB, KB]
    # mask: whole row chunks per program, and no more programs than the wait's one load covers.
    B, H, QB, KB = m.shape
    rows = B * H * QB
    block_kb = min(next_power_of_2(KB), _MAX_BLOCK_KB)
    block_rows = max(_TILE // block_kb, 1)
    rows_per_program = block_rows * cdiv(cdiv(rows, _MAX_PROGRAMS), block_rows)
    return cdiv(rows, rows_per_program), rows_per_program, block_rows, block_kb


def _launch(m, ws, out, capacity, geometry, first):
    # One launch of _worklist_kernel over the uint8 mask m: the first (ticket, count, publish,
    # write below capacity) or the second (every count published in ws; write all).
    B, H, QB, KB = m.shape
    programs, rows_per_program, block_rows, block_kb = geometry
    launchable(_worklist_kernel, out)[(programs,)](
        m,
        ws,
        out,
        capacity,
        programs,
        B * H * QB,
        rows_per_program,
        H,
        QB,
        KB,
        *m.stride(),
        FIRST=first,
        ONE_CHUNK=KB <= block_kb,
        BLOCK_ROWS=block_rows,
        BLOCK_KB=block_kb,
        BLOCK_P=next_power_of_2(programs),
        num_warps=_NUM_WARPS,
    )
