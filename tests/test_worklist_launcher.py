"""block_mask_worklist's launcher (kernels/block_mask_worklist/triton.py) against ``torch.nonzero``.

A count launch gives each program's count of True entries (a program: a run of whole rows of
``(b, h, q)``, walked in row chunks); the host adds them into ``nnz``; the write launch places
each entry at its rank. These tests lower the chunk and program limits so that small masks take
every path: one chunk per program, several chunks per program with a partial last one, rows
longer than a chunk, and both. The CUDA tests run large masks, where 1024 programs run side by
side, repeatedly.
"""

from __future__ import annotations

import pytest
import torch

from attnops_kernels.block_mask_worklist import triton as W

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: programs running side by side need a GPU (the interpreter runs "
    "them one after another)",
)


def _mask(shape, density, seed=0, device=DEVICE):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=gen) < density).to(device)


def _programs(monkeypatch):
    # The grid of each count launch.
    grids = []
    launchable = W.launchable

    def spy(kernel, like):
        launcher = launchable(kernel, like)
        if kernel is not W._block_count_kernel:
            return launcher

        class Grid:
            def __getitem__(self, grid):
                grids.append(grid[0])
                return launcher[grid]

        return Grid()

    monkeypatch.setattr(W, "launchable", spy)
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
