"""block_mask_worklist's launcher (kernels/block_mask_worklist/triton.py) against ``torch.nonzero``.

A count launch gives each program's count of True entries (a program: a run of whole rows of
``(b, h, q)``, walked in row chunks), and its last program to finish stores their sum ``nnz``
for the host (Note [tally]); the write launch places each entry at its rank. These tests lower the chunk and program limits so that small masks take
every path: one chunk per program, several chunks per program with a partial last one, rows
longer than a chunk, and both. The CUDA tests run large masks, where 1024 programs run side by
side, repeatedly.
"""

from __future__ import annotations

import threading

import pytest
import torch

from attnops_kernels import _triton as T
from attnops_kernels.block_mask_worklist import triton as W

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: programs running side by side need a GPU (the interpreter runs "
    "them one after another)",
)
needs_compiled = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: cached launches call compiled kernels (the interpreter compiles none)",
)


def _mask(shape, density, seed=0, device=DEVICE):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=gen) < density).to(device)


def _programs(monkeypatch):
    # The grid of each count launch.
    grids = []
    count = W._count

    class Spy:
        def launch(self, state, grid, *args, **kwargs):
            grids.append(grid[0])
            return count.launch(state, grid, *args, **kwargs)

    monkeypatch.setattr(W, "_count", Spy())
    return grids


def _check(mask):
    got = W.block_mask_worklist(mask)
    want = torch.nonzero(mask).to(torch.int32)
    assert got.dtype == torch.int32 and got.is_contiguous()
    assert torch.equal(got, want)
    return got


@pytest.mark.parametrize(
    ("shape", "density", "tile", "max_programs", "programs"),
    [
        ((2, 3, 7, 13), 0.3, 2048, 1024, 1),  # one chunk
        ((2, 3, 7, 13), 0.3, 64, 1024, 11),  # one chunk per program, a partial last one
        ((2, 3, 37, 13), 0.5, 64, 5, 5),  # several chunks per program
        ((1, 2, 3, 1500), 0.2, 2048, 1024, 3),  # rows longer than a chunk
        ((1, 2, 9, 1500), 0.2, 2048, 4, 3),  # both
        ((2, 2, 5, 5), 0.0, 16, 1024, 10),
        ((2, 2, 5, 5), 1.0, 16, 1024, 10),
    ],
)
def test_matches_nonzero(monkeypatch, shape, density, tile, max_programs, programs):
    monkeypatch.setattr(W, "_TILE", tile)
    monkeypatch.setattr(W, "_MAX_PROGRAMS", max_programs)
    grids = _programs(monkeypatch)
    _check(_mask(shape, density))
    assert grids == [programs]


def test_strided_and_non_bool_masks():
    base = _mask((3, 9, 5, 11), 0.4)
    for mask in (base.transpose(1, 2), base[:, ::2, :, 1:], base.permute(3, 2, 1, 0)):
        assert not mask.is_contiguous()
        _check(mask)
    ints = base.to(torch.int32) * 7
    assert torch.equal(W.block_mask_worklist(ints), torch.nonzero(ints).to(torch.int32))


@needs_cuda
@pytest.mark.parametrize("density", [0.0, 0.001, 0.3, 0.7, 1.0])
def test_large_masks_on_cuda(density):
    # 16384 rows: 1024 programs of 16 rows, each adding the counts of the programs before it.
    mask = _mask((8, 16, 128, 128), density, seed=3)
    want = torch.nonzero(mask).to(torch.int32)
    for _ in range(20):
        assert torch.equal(W.block_mask_worklist(mask), want)


@needs_cuda
@pytest.mark.parametrize(
    "shape", [(4, 8, 64, 3000), (1, 1, 100000, 7), (3, 5, 77, 333), (64, 32, 32, 32)]
)
def test_odd_shapes_on_cuda(shape):
    mask = _mask(shape, 0.3, seed=4)
    for view in (mask, mask.transpose(0, 2)):
        want = torch.nonzero(view).to(torch.int32)
        for _ in range(5):
            assert torch.equal(W.block_mask_worklist(view), want)


def _unaligned(shape, density, offset, seed=7):
    # A mask view whose first entry sits ``offset`` bytes past a 16-byte boundary.
    n = shape[0] * shape[1] * shape[2] * shape[3]
    flat = _mask((n + 16,), density, seed=seed)
    return flat[offset : offset + n].view(shape)


@needs_compiled
def test_cached_launches_pick_the_kernel_triton_would(monkeypatch):
    # Note [cached launches]: with VERIFY, every launch that skips Triton's binding first checks
    # that the binding would have picked the same compiled kernel.
    monkeypatch.setattr(T, "VERIFY", True)
    base = _mask((4, 6, 40, 50), 0.3, seed=5)
    masks = [
        base,
        base.transpose(1, 2),
        base[:, :, 1:],
        base[:, :, :, 1:],
        _unaligned((4, 6, 40, 50), 0.3, 1),
        _unaligned((4, 6, 40, 50), 0.3, 16),
        _unaligned((2, 2, 16, 16), 0.5, 8),
        _mask((1, 1, 1, 1), 1.0),
        _mask((2, 1, 3, 1), 0.5),
        _mask((1, 16, 16, 16), 0.5),
    ]
    for _ in range(3):
        for mask in masks:
            assert torch.equal(W.block_mask_worklist(mask), torch.nonzero(mask).int())


@needs_compiled
def test_verify_catches_a_key_that_ignores_the_mask_alignment(monkeypatch):
    # The check above can fail: a key without the mask's alignment maps an unaligned mask to
    # the kernel compiled for an aligned one.
    monkeypatch.setattr(T, "VERIFY", True)
    count = T.CachedLaunches(W._block_count_kernel)

    class Careless:
        # The plan alone as the key: the alignment flags dropped.
        def launch(self, state, grid, like, key, *args, **kwargs):
            return count.launch(state, grid, like, key[0], *args, **kwargs)

    monkeypatch.setattr(W, "_count", Careless())
    W.block_mask_worklist(_unaligned((1, 1, 4, 64), 0.5, 0))
    with pytest.raises(AssertionError, match="misses something Triton specializes on"):
        W.block_mask_worklist(_unaligned((1, 1, 4, 64), 0.5, 1))


@needs_compiled
def test_repeated_calls_skip_tritons_binding(monkeypatch):
    mask = _mask((3, 5, 64, 64), 0.3, seed=8)
    want = torch.nonzero(mask).int()
    assert torch.equal(W.block_mask_worklist(mask), want)
    bound = []
    for kernel in (W._block_count_kernel, W._block_write_kernel):
        run = kernel.run

        def spy(*args, _run=run, **kwargs):
            bound.append(kwargs.get("warmup"))
            return _run(*args, **kwargs)

        monkeypatch.setattr(kernel, "run", spy)
    for _ in range(5):
        assert torch.equal(W.block_mask_worklist(mask), want)
    assert bound == []


def test_launch_plans_are_bounded_and_never_reuse_a_number(monkeypatch):
    # A plan's number keys the compiled kernels of its launches: a number reused after the plans
    # are dropped would find the kernels compiled for another shape.
    monkeypatch.setattr(W, "_PLANS", {})
    monkeypatch.setattr(W, "_MAX_PLANS", 2)
    numbers = []
    for shape in [(1, 1, 2, 3), (1, 2, 2, 3), (2, 1, 3, 5), (1, 1, 2, 3)]:
        mask = _mask(shape, 0.5)
        _check(mask)
        assert len(W._PLANS) <= 2
        numbers.append(W._PLANS[(mask.shape, mask.stride(), W._TILE, W._MAX_PROGRAMS)][0])
    # The first shape's plan was dropped with the others; it came back under a new number.
    assert len(set(numbers)) == 4


@needs_compiled
def test_threads_on_their_own_streams(monkeypatch):
    # Each call reads its own stream and device for its cached launches and waits on that
    # stream for its counts.
    monkeypatch.setattr(T, "VERIFY", True)
    masks = [_mask((4, 8, 64, 64), d, seed=10 + i) for i, d in enumerate((0.1, 0.5, 0.9, 0.3))]
    wants = [torch.nonzero(m).int() for m in masks]
    torch.cuda.synchronize()
    errors = []

    def work(i):
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                for _ in range(20):
                    got = W.block_mask_worklist(masks[i])
                    assert torch.equal(got, wants[i])
        except BaseException as e:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(masks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _scratch_device():
    return torch.cuda.current_device() if DEVICE == "cuda" else -1


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 7, 13), (1, 3, 20, 33)])
def test_the_tally_word_is_zero_after_each_call(monkeypatch, shape):
    # Note [tally]: the last program of each count launch sets the word back to 0, so the next
    # launch's programs start from 0; a word left with anything in it would offset every later
    # sum.
    monkeypatch.setattr(W, "_TILE", 64)
    for seed, density in enumerate((0.3, 1.0, 0.0, 0.6)):
        _check(_mask(shape, density, seed=seed))
        scratch = W._SCRATCH.free[_scratch_device()]
        assert scratch.word.item() == 0


def test_an_interrupted_call_leaves_no_scratch_behind(monkeypatch):
    # A call that dies between its count launch and its read of the sum may leave a launch
    # running on its word: the next call must not share that word.
    mask = _mask((2, 3, 7, 13), 0.4)
    _check(mask)
    device = _scratch_device()
    before = W._SCRATCH.free[device]
    count = W._count

    class Interrupted:
        def launch(self, *args, **kwargs):
            count.launch(*args, **kwargs)
            raise KeyboardInterrupt

    monkeypatch.setattr(W, "_count", Interrupted())
    with pytest.raises(KeyboardInterrupt):
        W.block_mask_worklist(mask)
    assert device not in W._SCRATCH.free
    monkeypatch.setattr(W, "_count", count)
    _check(mask)
    assert W._SCRATCH.free[device] is not before


def test_the_write_pass_stores_nothing_past_nnz_rows():
    # The output is sized by the tally's sum and filled by the counts' ranks; were the two ever
    # to disagree, no store may land past the rows the output has.
    mask = _mask((2, 3, 7, 13), 0.5, seed=11)
    want = torch.nonzero(mask).int()
    plan_id, grid, count_args, write_args = W._plan(mask.shape, mask.stride(), 64, 1024)
    per_row = mask.reshape(-1, mask.shape[-1]).sum(1)
    rows_per_program = count_args[2]
    counts = torch.stack(
        [per_row[p * rows_per_program : (p + 1) * rows_per_program].sum() for p in range(grid[0])]
    ).to(torch.int32)
    out = torch.full((len(want), 4), -7, dtype=torch.int32, device=DEVICE)
    keep = len(want) // 2
    W._block_write_kernel[grid](mask, counts, out, keep, *write_args, num_warps=W._NUM_WARPS)
    assert torch.equal(out[:keep], want[:keep])
    assert (out[keep:] == -7).all()
