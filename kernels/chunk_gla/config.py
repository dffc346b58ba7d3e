"""chunk_gla's launch configurations: blocks, warps and stages of each pass, the split of the
state walks into segments, and the grids of the persistent passes. What was measured to choose
them is in docs/performance.md ("chunk_gla tuning history"); tests and benchmarks change these
names here to force other paths."""

import functools
import importlib.util

import torch

from .._env import switch as _env_switch
from .._triton import cdiv, interpreted, next_power_of_2
from .fwd import _gla_fwd_g_kernel

_BT = 64
_BH = 16  # heads per program of the forward's cumulative-decay pass
_MAX_K = 256

_INTERPRETED = interpreted(_gla_fwd_g_kernel)


@functools.cache
def _mode(dtype):
    # The kernels' MODE (common.py): 1 for float32, 2 for bfloat16 under the interpreter, else 0.
    if dtype == torch.float32:
        return 1
    return 2 if _INTERPRETED and dtype == torch.bfloat16 else 0


@functools.cache
def _config(K, V, dtype, bwd):
    """(BK, BV, num_warps, num_stages) for a launch of the sequential kernels."""
    if K > _MAX_K:
        raise ValueError(f"chunk_gla: K={K} exceeds the supported maximum {_MAX_K}")
    BK = max(64, next_power_of_2(K))
    if dtype == torch.float32:
        # ieee fp32 dots run on FMA units, not wgmma.
        return BK, 32, 4, 1
    # BV=32 next to BK>=64 hit sporadic illegal shared-memory accesses in wgmma code from
    # Triton 3.6 on H200 (num_warps 4 and 8); BK>=64 with BV=64 ran clean, so small K/V are
    # padded up rather than given smaller blocks.
    return BK, 64, 8 if bwd or BK <= 64 else 4, 1


@functools.cache
def _fwd_config(K, V, dtype):
    """Forward launch configs: (chunk size BT of the state and output passes, then each as
    (BK, BV, num_warps, num_stages): the state pass, the output pass, and the walk behind
    them where packed offsets fall, _gla_fwd_fused_kernel)."""
    fallback = _config(K, V, dtype, False)
    if dtype == torch.float32:
        return _BT, (64, 32, 4, 1), (64, 32, 4, 1), fallback
    # 16-bit blocks stay at 64 or more (see _config).
    BV = 128 if V > 64 else 64
    return _BT, (64, 64, 4, 3), (64, BV, 8 if BV > 64 else 4, 2), fallback


# The forward in one walk (_gla_fwd_fused_kernel) where it measured faster than the state walk
# and output pass (docs/performance.md, "chunk_gla: the forward in one walk"): 16-bit inputs
# without packed sequences, K <= 64 on enough programs, or K <= 128 on long sequences split
# into at least _FUSED_SEG_PROGRAMS programs of segments of _FUSED_SEG_MIN_CHUNKS chunks or more
# (when the chunk states are not kept: storing them there measured slower).
_FUSED_SEG_PROGRAMS = 256
_FUSED_SEG_MIN_CHUNKS = 16


def _fused_plan(B, T, H, K, V, dtype, use_cu, save_states):
    """((BK, BV, num_warps, num_stages), (chunks per segment, segments)) of the forward in one
    walk for these sizes, or None for the state walk and output pass. Not cached: a few integer
    operations, and a cache keyed by batch and length would grow with every length a caller
    passes."""
    if use_cu or dtype == torch.float32 or K > 128:
        return None
    BK = max(64, next_power_of_2(K))
    cfg = (BK, 64, 4, 3 if BK == 64 else 2)
    NT = cdiv(T, _BT)
    programs = B * H * cdiv(V, cfg[1])
    if programs > _SEG_MAX_PROGRAMS:
        return (cfg, (NT, 1)) if BK == 64 else None
    nseg = cdiv(_FUSED_SEG_PROGRAMS, programs)
    if save_states or NT < nseg * _FUSED_SEG_MIN_CHUNKS:
        return None
    cps = cdiv(NT, nseg)
    return cfg, (cps, cdiv(NT, cps))


# A 16-bit backward with K <= _BWD_FUSED_MAX_K computes dv in the dq/dk/dg pass (one item per
# chunk and head over all of K) rather than in a dv pass of its own.
_BWD_FUSED_MAX_K = 64


@functools.cache
def _bwd_config(K, V, dtype):
    """Backward launch configs: (chunk size BT, then each as (BK, BV, num_warps, num_stages): the
    two state walks (the forward's state pass recomputing the chunk states and the reverse one),
    the dq/dk/dg pass and the dv pass, each with a fifth entry (programs per SM of a persistent
    grid, Note [persistent passes]; 0: one program per item), and the sequential fallback
    kernels). When the dq/dk/dg pass's BK covers K, it computes dv as well and the dv pass is not
    launched (None)."""
    BT, state, _, _ = _fwd_config(K, V, dtype)
    fallback = _config(K, V, dtype, True)
    if dtype == torch.float32:
        return BT, state, (64, 32, 4, 1, 0), (64, 32, 4, 1, 0), fallback
    # 16-bit blocks stay at 64 or more (see _config). The dq/dk/dg pass at K = 128 walks two V
    # blocks, so a persistent grid cannot pipeline across its items (and spills there).
    BK = max(64, next_power_of_2(K))
    if BK <= _BWD_FUSED_MAX_K:
        return BT, state, (BK, 64, 4, 2, 2), None, fallback
    if BK == 128:
        return BT, state, (64, 64, 4, 3, 0), (128, 64, 4, 2, 0), fallback
    return BT, state, (64, 64, 8, 2, 0), (64, 64, 4, 2, 0), fallback


# The state walks go through each sequence's chunks in order, one program per (sequence, head,
# state tile): with very few of them (one long sequence, few heads) most of the GPU idles.
# Equal-length sequences are then split into segments of whole chunks, for about _SEG_PROGRAMS
# programs with at least _SEG_MIN_CHUNKS chunks a segment, each walked twice side by side: the
# walks are short, but there are three launches and twice the products, so the forward splits
# only where its walk has at most _SEG_MAX_PROGRAMS programs. The backward splits its reverse
# walk where it alone has at most _BWD_SEG_MAX_PROGRAMS; without the forward's states the split
# recomputes them too, each of its three steps in the same launch as the reverse walk's
# (_gla_bwd_states_seg_kernel), where the whole walks share one (_gla_bwd_states_kernel): it
# then splits only at _BWD_SEG_MAX_PROGRAMS_RECOMPUTING or fewer (docs/performance.md, "chunk_gla:
# the forward in one walk").
_SEG_MAX_PROGRAMS = 64
_SEG_PROGRAMS = 256
_SEG_MIN_CHUNKS = 8
_BWD_SEG_MAX_PROGRAMS = 64
_BWD_SEG_MAX_PROGRAMS_RECOMPUTING = 32
# The carry across segments (Note [carry across segments], walks.py) runs as blocks of at most
# _CARRY_ELEMENTS state elements over every segment, so that a split walk of one long sequence
# and few heads still has hundreds of programs carrying. A program per state tile, each waiting
# on memory at every segment, took 12.2 us at B1 T8192 H4 K = V = 128 (16 segments) on the H200;
# blocks of 2048 / 4096 / 8192 elements took 5.0 / 4.9 / 4.2 us (forward) and 10.2 / 10.1 / 7.4
# (the backward's two carries), an unrolled loop over the segments 4.4 and 5.5 but 7.3 for the
# forward's 32 segments at B1 T16384 H2 (5.4 scanned); docs/performance.md, "chunk_gla tuning
# history".
_CARRY_ELEMENTS = 8192


# The states at the segments' starts of a forward in one walk (triton._segment_starts, for the
# Triton walk and the CuTeDSL one) come from each segment's own walk and the carry across
# segments: two of the three launches of a split walk. That own walk is one chain per
# (sequence, segment, head, state tile) over the segment's chunks, so it takes as long as its
# longest chain. It runs on segments _SEG_START_SPLIT times finer (the largest divisor of the
# plan's chunks per segment up to it that leaves at least _SEG_START_MIN_CHUNKS chunks), as
# many times more chains each as many times shorter, the carry then over the finer segments
# and every r-th start taken; in CuTeDSL each CTA of that finer walk then holds the whole
# state (_CUTE_START_TILE_FINER), so that the CTAs stay as many. On the H200 that took B1
# T32768 H16's forward from 292.9 to 286.2 us and B1 T131072 H8's from 578.2 to 547.0, and
# made those with shorter segments 4-12% slower (docs/performance.md, "chunk_gla: the CuTeDSL
# walk", *How sequences are split*).
_SEG_START_SPLIT = 2
_SEG_START_MIN_CHUNKS = 64


def _start_segments(cps: int, chunks: int) -> tuple[int, int, int]:
    """(chunks per segment, segments, r) of the walk that gives the start states of segments of
    ``cps`` chunks over ``chunks`` chunks: segments r times finer, r the largest divisor of cps
    up to ``_SEG_START_SPLIT`` that leaves ``_SEG_START_MIN_CHUNKS`` chunks or more (else 1), so
    that every r-th finer segment starts one of the plan's."""
    finer = range(2, max(1, _SEG_START_SPLIT) + 1)
    r = max([1] + [d for d in finer if cps % d == 0 and cps // d >= _SEG_START_MIN_CHUNKS])
    fine = cps // r
    return fine, cdiv(chunks, fine), r


def _carry_blocks(nseg: int, elements: int) -> tuple[int, int, int]:
    """(rows, elements per block, blocks) of the carry over ``nseg`` segments of states of
    ``elements`` elements: rows a power of two above ``nseg`` (the identity and each segment)."""
    rows = next_power_of_2(nseg + 1)
    per = max(16, min(next_power_of_2(elements), _CARRY_ELEMENTS // rows))
    return rows, per, cdiv(elements, per)


def _segments(programs: int, chunks: int, max_programs: int | None = None) -> int:
    """Segments per sequence for a state walk of ``programs`` programs over ``chunks`` chunks
    (1: no split); the split applies at ``max_programs`` programs or fewer (default: the
    forward's ``_SEG_MAX_PROGRAMS``)."""
    if programs > (_SEG_MAX_PROGRAMS if max_programs is None else max_programs):
        return 1
    return max(1, min(cdiv(_SEG_PROGRAMS, programs), chunks // _SEG_MIN_CHUNKS))


def _walk_segments(programs: int, chunks: int, use_cu: bool, max_programs: int | None = None):
    """(chunks per segment, segments) of a state walk: packed sequences are walked whole."""
    nseg = 1 if use_cu else _segments(programs, chunks, max_programs)
    cps = cdiv(chunks, nseg)
    return cps, cdiv(chunks, cps)


# Note [persistent passes]: the dq/dk/dg and dv passes do one chunk's work per item, and with one
# program per item a program's loads wait on memory with nothing to hide them behind but the
# few other programs its registers leave room for (one or two per SM). Where the pass's config
# gives a number of programs per SM (_bwd_config), and without packed sequences (whose items
# branch on the offsets), that many programs per SM instead take the items in turn; where an
# item's work has no inner loop of several steps (one V block in the dq/dk/dg pass, one K block
# in the dv pass), the compiler then pipelines the next item's loads into shared memory behind
# this item's products.


@functools.cache
def _sm_count(device: torch.device) -> int:
    # Streaming multiprocessors of a CUDA device; elsewhere (the interpreter) a few programs, so
    # that each takes several items.
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 3


def _items_grid(items_per_head: int, H: int, device: torch.device, per_sm: int):
    # The grid of a pass over items_per_head * H items (Note [persistent passes]).
    if per_sm:
        return (per_sm * _sm_count(device),)
    return (items_per_head, H)


def _state_slots(B, T, N, use_cu):
    # State slots of the chunk states: one per chunk of each sequence; packed sequences also
    # leave at most one gap slot each.
    NT = cdiv(T, _BT)
    return NT + N - 1 if use_cu else B * NT


# The forward in one walk in CuTeDSL (cute.py) on Hopper, where its contract holds (see
# _cute_plan): chosen first, as it measured faster than the Triton plans at every benchmark shape
# on the H200 (docs/performance.md, "chunk_gla: the CuTeDSL walk").
# ATTNOPS_CHUNK_GLA_CUTE=0 (or false, no, off) in the environment, read at import, turns it
# off; tests and benchmarks set _CUTE_WALK to choose. A segment's start state costs a Triton
# walk of its own, more than a second CTA on each multiprocessor gains, so sequences are split
# into segments only where fewer than _CUTE_SEG_BELOW CTAs would walk: then until about
# _CUTE_SEG_PROGRAMS walk, each segment of at least _CUTE_SEG_MIN_CHUNKS chunks; but at K = 128,
# where whole multiples of the CTAs fill at least _CUTE_SEG_FILL of the multiprocessors, until
# one walks on each, as three warpgroups (_cute_walk_split), which measured up to 11% faster (3%
# at B1 T32768 H16) where this applies (docs/performance.md, "chunk_gla: the CuTeDSL walk", *How
# sequences are split*).
_CUTE_WALK = _env_switch("ATTNOPS_CHUNK_GLA_CUTE", True)
# The backward's gradients' pass in CuTeDSL (cute_bwd.py), under the same switch; tests and
# benchmarks set _CUTE_BWD to choose. It computes K = V of 64 or 128 and measured faster than
# the Triton passes at both (docs/performance.md, "chunk_gla: the CuTeDSL gradients' pass").
_CUTE_BWD = _CUTE_WALK
_CUTE_BWD_KS = (64, 128)
# The backward's state walks in CuTeDSL (cute_states.py) where the gradients' pass is CuTeDSL's
# and a walk is not split into segments; tests and benchmarks set _CUTE_STATES to choose.
_CUTE_STATES = _CUTE_WALK
# At K = V = 64 the gradients' pass can walk the state's gradient itself, one CTA per (sequence,
# head) taking its chunks last first with dh on chip (Note [chunk_gla CuTe gradients' walk]): the
# reverse state walk's launch and the round trip of dh through memory go, but each CTA's chunks
# run one after another, so it gains only where its CTAs fill whole waves of
# _CUTE_BWD_WALK_PER_SM on every multiprocessor (to _CUTE_BWD_WALK_FILL of them) and loses
# badly elsewhere (docs/performance.md, "chunk_gla: the CuTeDSL gradients' pass"). Tests and
# benchmarks set these to choose.
_CUTE_BWD_WALK = True
_CUTE_BWD_WALK_PER_SM = 2
_CUTE_BWD_WALK_FILL = 0.8
_CUTE_SEG_BELOW = 128
# The walk as three warpgroups where each CTA has a multiprocessor (_cute_walk_split).
_CUTE_WALK_SPLIT = True
_CUTE_SEG_PROGRAMS = 256
_CUTE_SEG_FILL = 0.9
_CUTE_SEG_MIN_CHUNKS = 8
_MAX_GRID_YZ = 65535


@functools.cache
def _cute_available(device_index):
    """Whether the CuTeDSL walk can run on this CUDA device: a Hopper GPU (compute capability
    9.0) and the ``cutlass`` package importable (found, not imported)."""
    if importlib.util.find_spec("cutlass") is None:
        return False
    return torch.cuda.get_device_capability(device_index) == (9, 0)


def _tma_ready(t):
    """A tensor the TMA can read: last mode contiguous, 16-byte aligned base and strides."""
    size = t.element_size()
    return (
        t.stride(-1) == 1
        and t.data_ptr() % 16 == 0
        and all(s * size % 16 == 0 for s in t.stride()[:-1])
    )


def _cute_bwd_plan(q, k, v, do, use_cu):
    """Whether the CuTeDSL gradients' pass (cute_bwd.py) computes dq, dk, dv and dg after the
    backward's state walks: 16-bit CUDA inputs on Hopper with CuTeDSL installed, k, v and do of
    q's dtype and shape, K = V in ``_CUTE_BWD_KS``, no packed sequences, every tensor TMA-ready
    and 32-bit indices (its grid is one CTA per multiprocessor, whatever B and H)."""
    if not _CUTE_BWD or use_cu or not q.is_cuda:
        return False
    B, T, H, K = q.shape
    if q.dtype not in (torch.bfloat16, torch.float16) or K not in _CUTE_BWD_KS:
        return False
    if not q.dtype == k.dtype == v.dtype == do.dtype:
        return False
    if not q.shape == k.shape == v.shape == do.shape or min(B, T, H) == 0:
        return False
    slots = B * cdiv(T, _BT) * H * K * K
    if max(q.numel(), slots, B * H * 2 * T) >= 2**31:
        return False
    return all(_tma_ready(t) for t in (q, k, v, do)) and _cute_available(q.device.index)


def _cute_bwd_walks(device, B, H, K):
    """Whether the CuTeDSL gradients' pass, where ``_cute_bwd_plan`` accepts the inputs, also
    walks the state's gradient (one CTA per sequence and head): K = V = 64, and the CTAs fill
    their waves (see _CUTE_BWD_WALK)."""
    if not _CUTE_BWD_WALK or K != 64 or B * H == 0:
        return False
    slots = _CUTE_BWD_WALK_PER_SM * _sm_count(device)
    return B * H >= _CUTE_BWD_WALK_FILL * cdiv(B * H, slots) * slots


def _cute_states(B, T, H):
    """Whether the backward's state walks run in CuTeDSL (cute_states.py), where the gradients'
    pass does (``_cute_bwd_plan``) and a walk is whole: T a multiple of 4 (the TMA reads the
    log-decay's rows of T float32), and the grid's second and third sizes (H, and B for each
    of two walks) at most 65535."""
    return _CUTE_STATES and T % 4 == 0 and H <= _MAX_GRID_YZ and 2 * B <= _MAX_GRID_YZ


# The two steps of a state walk split into segments (each segment's own walk, then the walk
# from each segment's start; the carry across segments between them stays Triton's) in CuTeDSL
# (cute_states.py, Note [chunk_gla CuTe split walks]) where _cute_split_walks accepts the
# inputs: for the forward's segment starts and the backward's split walks, under the switch of
# the CuTeDSL walk. On the H200 a walk alone gained 1-10% from segments of 16 chunks on (more
# the longer the segments) and lost 2% at 8; the backward's two walks side by side in one
# launch (states recomputed) lost 4% at 16, tied at 32 and gained 4-10% from 64 on
# (docs/performance.md, "chunk_gla: the CuTeDSL state walks"). Tests and benchmarks set these
# to choose.
_CUTE_SPLIT_WALKS = _CUTE_WALK
_CUTE_SPLIT_MIN_CHUNKS = 16
_CUTE_SPLIT_MIN_CHUNKS_BOTH = 64
# The (rows of K, columns of V) of the state that each CTA of the forward's segment-start walk
# (its first step alone) holds: all 128 rows (half the CTAs, one to a multiprocessor) measured
# 1.2-1.8% faster forwards than 64 at B1 T16384 H8, T32768 H3, T32768 H16 and T65536 H4, and
# 1.1% slower at B1 T131072 H8; in the backward's first steps it changed nothing beyond 1% but
# at B1 T131072 H8 (-1.6% with the states saved, +2.2% recomputing), so they keep 64. The whole
# state per CTA alone (a quarter of the CTAs) was 10-15% slower; with the finer segments of
# _SEG_START_SPLIT, as many CTAs again, it is what runs there (docs/performance.md, "chunk_gla:
# the CuTeDSL state walks").
_CUTE_START_TILE = (128, 64)
_CUTE_START_TILE_FINER = (128, 128)


def _cute_split_walks(a, b, N: int, segments: tuple[int, int], out=None, both=False) -> bool:
    """Whether the steps of a state walk split into ``segments`` (chunks per segment, segments)
    of each of ``N`` equal-length sequences run in CuTeDSL: segments of at least
    ``_CUTE_SPLIT_MIN_CHUNKS`` chunks (``_CUTE_SPLIT_MIN_CHUNKS_BOTH`` where ``both`` walks of
    the backward run side by side), ``a, b`` (k and v, or q and do) 16-bit CUDA tensors
    of one dtype on Hopper with CuTeDSL installed, K = V of 64 or 128, T a multiple of 4 (the
    TMA reads the log-decay's rows), both TMA-ready, 32-bit indices, the grid's second and
    third sizes (H, and N * nseg for each of two walks) at most 65535, and the chunk states
    ``out`` (when given) of their dtype."""
    cps, nseg = segments
    least = _CUTE_SPLIT_MIN_CHUNKS_BOTH if both else _CUTE_SPLIT_MIN_CHUNKS
    if not _CUTE_SPLIT_WALKS or not a.is_cuda or cps < least:
        return False
    B, T, H, K = a.shape
    if a.dtype not in (torch.bfloat16, torch.float16) or b.dtype != a.dtype:
        return False
    if K not in _CUTE_BWD_KS or b.shape != a.shape or (out is not None and out.dtype != a.dtype):
        return False
    if T % 4 or H > _MAX_GRID_YZ or 2 * N * nseg > _MAX_GRID_YZ or min(B, T, H) == 0:
        return False
    if max(a.numel(), B * cdiv(T, _BT) * H * K * K, B * H * 2 * T) >= 2**31:
        return False
    return _tma_ready(a) and _tma_ready(b) and _cute_available(a.device.index)


def _cute_walk_split(device, ctas: int) -> bool:
    """Whether the CuTeDSL walk of ``ctas`` CTAs runs as three warpgroups (a state's and two
    outputs', cute.py's _WalkWS): where every CTA has a multiprocessor of its own. Where more
    CTAs walk, two of one warpgroup share each multiprocessor and measured faster (the table
    of docs/performance.md, "chunk_gla: the CuTeDSL walk")."""
    return _CUTE_WALK_SPLIT and ctas <= _sm_count(device)


def _cute_plan(q, k, v, use_cu, save_states, sequences=None):
    """(chunks per segment, segments) of the CuTeDSL walk for these inputs, or None where its
    contract does not hold: 16-bit CUDA inputs on Hopper with CuTeDSL installed (k and v of q's
    dtype, k of q's shape, v of q's batch, length and heads, none of them empty), K of 64 or
    128, V of 64 or more and a multiple of 8, every tensor TMA-ready, and 32-bit indices (of
    the initial, segment-start and final states too, and of the chunk states when
    ``save_states``: the walk then stores them). Packed sequences are walked whole (one
    segment). ``sequences``: how many (default B); with the segments of each, the grid's third
    size (at most 65535, as H)."""
    if not _CUTE_WALK or not q.is_cuda:
        return None
    B, T, H, K = q.shape
    V = v.shape[-1]
    # V of 64 or more (a TMA box of 64 columns; smaller V was never run) in 16-byte rows.
    if q.dtype not in (torch.bfloat16, torch.float16) or K not in (64, 128) or V % 8 or V < 64:
        return None
    # The TMA reads k and v with q's element type, and the grid walks q's batch and heads.
    if not q.dtype == k.dtype == v.dtype or k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        return None
    if max(q.numel(), v.numel(), B * H * 2 * T, T * 64) >= 2**31 or min(B, T, H, V) == 0:
        return None
    slots = _state_slots(B, T, B if sequences is None else sequences, use_cu)
    if save_states and slots * H * K * V >= 2**31:
        return None
    if not all(_tma_ready(t) for t in (q, k, v)) or not _cute_available(q.device.index):
        return None
    NT = cdiv(T, _BT)
    if use_cu:
        plan = NT, 1
    else:
        programs = B * H * cdiv(V, 64)
        nseg = 1
        if programs < _CUTE_SEG_BELOW:
            sm = _sm_count(q.device)
            target = cdiv(_CUTE_SEG_PROGRAMS, programs)
            if K == 128 and sm // programs * programs >= _CUTE_SEG_FILL * sm:
                target = sm // programs  # a CTA of three warpgroups on each multiprocessor
            nseg = min(target, max(1, NT // _CUTE_SEG_MIN_CHUNKS))
        cps = cdiv(NT, nseg)
        plan = cps, cdiv(NT, cps)
    # The grid is (V blocks, H, sequences x segments): its second and third sizes stop at 65535.
    rows = (B if sequences is None else sequences) * plan[1]
    # The states at the walk's start and end ([rows, H, K, V] float32) are indexed in 32 bits:
    # with few tokens per sequence they outgrow q.
    if H > _MAX_GRID_YZ or rows > _MAX_GRID_YZ or rows * H * K * V >= 2**31:
        return None
    return plan
