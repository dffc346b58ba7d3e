import ctypes
import itertools
import threading

import torch
import triton
import triton.language as tl
from torch import Tensor

from .._triton import CachedLaunches, cdiv, launch_state, next_power_of_2, synchronize

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
# Note [tally]: the count of finished programs takes the low bits of the tally word, so the grid
# stays below 2**_TALLY_BITS programs; the sum of the counts takes the 47 bits above.
_TALLY_BITS = tl.constexpr(16)
_TALLY_LOW = tl.constexpr((1 << 16) - 1)


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
    tally_ptr,
    host_ptr,
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
    BLOCK_ROWS: tl.constexpr,
    BLOCK_KB: tl.constexpr,
):
    # cnt[p]: the True entries of rows [p * rows_per_program, (p + 1) * rows_per_program), for
    # the write pass. Note [tally]: each program also adds one to the low _TALLY_BITS bits of the
    # int64 word at tally_ptr and its count to the bits above, in one atomic; the program whose
    # addition brings the low bits to ``programs`` is the last, and the word then holds the sum
    # of every count: it stores the sum at host_ptr (page-locked host memory) and sets the word
    # back to 0 for the next launch. Read-modify-writes of one word are totally ordered, so the
    # last one's result includes every other; cnt is read by the next launch and host_ptr by the
    # host after the stream synchronizes, both after this kernel ends.
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
    add = (total.to(tl.int64) << _TALLY_BITS) + 1
    now = tl.atomic_add(tally_ptr, add) + add
    if (now & _TALLY_LOW) == programs:
        tl.store(host_ptr, now >> _TALLY_BITS)
        tl.atomic_xchg(tally_ptr, 0)


@triton.jit
def _write_chunk(out_ptr, nnz, active, slot, b, h, q, kv):
    # Entry (r, j) of the chunk goes to slot[r] plus the True entries before it in row r, as one
    # 16-byte (b, h, q, kv) record; returns slot advanced past the row's True entries. No store
    # lands at or past ``nnz`` records, whatever the counts say.
    a32 = active.to(tl.int32)
    dst = slot[:, None] + (tl.cumsum(a32, axis=1) - a32).to(tl.int64)
    c = tl.arange(0, 4)[None, None, :]
    rec = tl.where(
        c == 0,
        b[:, None, None],
        tl.where(c == 1, h[:, None, None], tl.where(c == 2, q[:, None, None], kv[None, :, None])),
    )
    keep = active & (dst < nnz)
    tl.store(out_ptr + dst[:, :, None] * 4 + c, rec, mask=keep[:, :, None] & (c < 4))
    return slot + tl.sum(a32, axis=1).to(tl.int64)


# ``nnz`` (the rows of ``out``) changes from call to call: not specialized on, so the launch
# plan, which does not hold it, still determines the compiled kernel (Note [cached launches]).
@triton.jit(do_not_specialize=["nnz"])
def _block_write_kernel(
    m_ptr,
    cnt_ptr,
    out_ptr,
    nnz,
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
            _write_chunk(out_ptr, nnz, active, slot, b, h, q, kv)
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
                slot = _write_chunk(out_ptr, nnz, active, slot, b, h, q, kv)
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
    if programs >= 1 << _TALLY_BITS.value:
        raise ValueError(f"{programs} programs: the tally word counts fewer (Note [tally])")
    ints = (rows, rows_per_program, H, QB, KB, *strides)
    count_args = (programs, *ints, block_rows, block_kb)
    write_args = (programs, *ints, KB <= block_kb, block_rows, block_kb, next_power_of_2(programs))
    return next(_PLAN_IDS), (programs,), count_args, write_args


_PLANS: dict = {}
_PLAN_IDS = itertools.count()
_MAX_PLANS = 512


class _Scratch:
    # Note [tally]: what a thread's calls on one device reuse: the tally word (device memory,
    # zero between launches), the page-locked int64 the last program stores the sum in, and a
    # ctypes view of that int64 for the host's read.
    __slots__ = ("word", "host", "total")

    def __init__(self, device: torch.device):
        self.word = torch.zeros(1, dtype=torch.int64, device=device)
        self.host = torch.zeros(1, dtype=torch.int64, pin_memory=device.type == "cuda")
        self.total = ctypes.c_int64.from_address(self.host.data_ptr())


class _Scratches(threading.local):
    # Per thread, by device index. A call takes its device's entry out before its count launch
    # and puts it back after reading the sum: a call interrupted in between (an exception, a
    # KeyboardInterrupt) leaves no entry behind and the next call makes a new one, so no two
    # count launches that may run at the same time share a word.
    def __init__(self):
        self.free: dict = {}


_SCRATCH = _Scratches()


def block_mask_worklist(mask) -> Tensor:
    """Coordinates ``(b, h, q, kv)`` of the True blocks of ``mask``, in row-major order.

    Two launches around one host read: per-program counts of True entries (each program a run
    of whole rows of ``(b, h, q)``), whose sum the last program to finish stores in page-locked
    host memory (Note [tally]); then the write pass, where each program adds the counts before
    its own and places each entry at its rank.
    The launch arguments of each mask shape and strides are computed once, and repeated
    launches skip Triton's argument binding (Note [cached launches] in ``_triton``).

    Args:
        mask: ``[B, H, QB, KB]`` bool, any strides (another dtype is read as ``mask != 0``).

    Returns:
        ``coords``: ``[nnz, 4]`` int32, newly allocated and contiguous, one row per True entry,
        ordered as ``torch.nonzero`` orders them; ``nnz`` is data-dependent.

    Mutates nothing. Synchronizes with the host once (``nnz`` sizes the output).
    """
    m = mask if mask.dtype == torch.bool else mask != 0
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
    counts = m.new_empty(grid, dtype=torch.int32)
    state = launch_state(counts)
    cuda = m.is_cuda
    # The scratch of the device the kernels launch on (Triton launches on the current device).
    device = (state[0][0] if state is not None else torch.cuda.current_device()) if cuda else -1
    scratch = _SCRATCH.free.pop(device, None)
    if scratch is None:
        scratch = _Scratch(torch.device("cuda", device) if cuda else m.device)
    # Note [cached launches]: the plan (its int and constexpr arguments) and the 16-byte
    # alignment of each tensor argument determine both compiled kernels (the tensors' dtypes are
    # fixed; plan numbers are never reused). The tally word and its host int64 are allocations
    # of their own, 16-byte aligned.
    aligned = m.data_ptr() & 15 == 0
    c_aligned = counts.data_ptr() & 15 == 0
    c_key = (plan_id, aligned, c_aligned)
    # -1 until the count launch's last program stores the sum.
    scratch.total.value = -1
    _count.launch(
        state,
        grid,
        counts,
        c_key,
        m,
        counts,
        scratch.word,
        scratch.host,
        *count_args,
        num_warps=_NUM_WARPS,
    )
    # The one host sync: nnz sizes the output (the op is registered as opaque). The GPU writes
    # the sum into page-locked host memory directly (mapped, as all page-locked memory is under
    # unified addressing), so the host waits for the stream and reads 8 bytes: no copy back and
    # no reduction on the host.
    if cuda:
        synchronize(device, state[1] if state is not None else None)
    nnz = scratch.total.value
    if nnz < 0:
        # No program saw itself last: the word was not 0 at launch. The scratch is dropped.
        raise RuntimeError(
            "block_mask_worklist: the count launch did not report its total (Note [tally] in "
            "kernels/block_mask_worklist/triton.py)"
        )
    _SCRATCH.free[device] = scratch
    out = counts.new_empty((nnz, 4))
    if nnz == 0:
        return out
    # nnz is not specialized on, but its type is: int32 up to 2**31 - 1, int64 above.
    w_key = (plan_id, aligned, c_aligned, out.data_ptr() & 15 == 0, nnz > 0x7FFFFFFF)
    _write.launch(state, grid, out, w_key, m, counts, out, nnz, *write_args, num_warps=_NUM_WARPS)
    return out


_count = CachedLaunches(_block_count_kernel)
_write = CachedLaunches(_block_write_kernel)
