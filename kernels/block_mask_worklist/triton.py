import itertools

import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import CachedLaunches, cdiv, launch_state, next_power_of_2

# Each program owns a run of whole rows of (b, h, q), walked BLOCK_ROWS rows at a time in
# [BLOCK_ROWS, BLOCK_KB] chunks. At most _MAX_PROGRAMS programs: the write pass finds its first
# output slot by summing the counts of the programs before it in one masked load, so no scan
# launch sits between the passes and the host needs only the total.
# Chunks of 1024 entries and two warps: at mask (8, 16, 128, 128) on the H200 the write pass
# took 7.6 us at 30% True (5% True: 6.0) against 9.0 (6.6) with 2048 entries and four warps,
# and the count pass 3.3 against 3.1 (benchmarks/gate_worklist_parts.py has the tiles).
_TILE = 1024
_MAX_BLOCK_KB = 1024
_MAX_PROGRAMS = 1024
_NUM_WARPS = 2


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
    host_ptr,
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
    # cnt[p]: the True entries of rows [p * rows_per_program, (p + 1) * rows_per_program),
    # stored twice: for the write pass, and in page-locked host memory for the host's sum.
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
    tl.store(host_ptr + pid, total)


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


def _plan(shape, strides, tile, max_programs):
    # A number naming the plan in launch keys, the grid and the int and constexpr arguments of
    # both launches for a mask of this shape and strides; None for an empty mask.
    B, H, QB, KB = shape
    rows = B * H * QB
    if rows == 0 or KB == 0:
        return None
    block_kb = min(next_power_of_2(KB), _MAX_BLOCK_KB)
    block_rows = max(tile // block_kb, 1)
    # Whole row chunks per program, and no more programs than the write pass's offset load covers.
    rows_per_program = block_rows * cdiv(cdiv(rows, max_programs), block_rows)
    programs = cdiv(rows, rows_per_program)
    ints = (rows, rows_per_program, H, QB, KB, *strides)
    count_args = (*ints, block_rows, block_kb)
    write_args = (programs, *ints, KB <= block_kb, block_rows, block_kb, next_power_of_2(programs))
    return next(_PLAN_IDS), (programs,), count_args, write_args


_PLANS: dict = {}
_PLAN_IDS = itertools.count()
_MAX_PLANS = 512


def block_mask_worklist(mask) -> Tensor:
    """Coordinates ``(b, h, q, kv)`` of the True blocks of ``mask``, in row-major order.

    Two launches around one host read: per-program counts of True entries (each program a run
    of whole rows of ``(b, h, q)``), written to device and host memory and added into ``nnz``
    on the host; then the write pass, where each program adds the counts before its own and
    places each entry at its rank.
    The launch arguments of each mask shape and strides are computed once, and repeated
    launches skip Triton's argument binding (Note [cached launches] in ``_triton``).

    Args:
        mask: ``[B, H, QB, KB]`` bool, any strides (another dtype is read as ``mask != 0``).

    Returns:
        ``coords``: ``[nnz, 4]`` int32, newly allocated and contiguous, one row per True entry,
        ordered as ``torch.nonzero`` orders them; ``nnz`` is data-dependent.

    Mutates nothing. Synchronizes with the host once (``nnz`` sizes the output).
    """
    m = mask.view(torch.uint8) if mask.dtype == torch.bool else (mask != 0).view(torch.uint8)
    key = (m.shape, m.stride(), _TILE, _MAX_PROGRAMS)
    plan = _PLANS.get(key, False)
    if plan is False:
        plan = _plan(*key)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    if plan is None:
        return torch.empty((0, 4), dtype=torch.int32, device=mask.device)
    plan_id, grid, count_args, write_args = plan
    # Note [cached launches]: the plan (its int and constexpr arguments) and the 16-byte
    # alignment of each tensor argument determine both compiled kernels (the tensors' dtypes are
    # fixed; plan numbers are never reused).
    aligned = m.data_ptr() & 15 == 0
    counts = m.new_empty(grid, dtype=torch.int32)
    c_aligned = counts.data_ptr() & 15 == 0
    state = launch_state(counts)
    # The one host sync: nnz sizes the output (the op is registered as opaque). The count pass
    # also writes the counts of its (at most _MAX_PROGRAMS) programs into page-locked host
    # memory, which the GPU writes directly (mapped, as all page-locked memory is under unified
    # addressing), so the host waits for the pass and adds them in int64 with no copy: a copy
    # back (``counts.cpu()``) cost about 11 us of host time on the H200 against 5-7 for the
    # stream synchronization.
    host = torch.empty(grid, dtype=torch.int32, pin_memory=True) if m.is_cuda else counts
    c_key = (plan_id, aligned, c_aligned, host.data_ptr() & 15 == 0)
    _count.launch(state, grid, counts, c_key, m, counts, host, *count_args, num_warps=_NUM_WARPS)
    if m.is_cuda:
        # Triton launched on the current device's current stream.
        torch.cuda.current_stream().synchronize()
    nnz = int(host.sum())
    out = counts.new_empty((nnz, 4))
    if nnz == 0:
        return out
    w_key = (plan_id, aligned, c_aligned, out.data_ptr() & 15 == 0)
    _write.launch(state, grid, out, w_key, m, counts, out, *write_args, num_warps=_NUM_WARPS)
    return out


_count = CachedLaunches(_block_count_kernel)
_write = CachedLaunches(_block_write_kernel)
