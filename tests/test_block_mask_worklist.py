"""block_mask_worklist's launcher (kernels/block_mask_worklist/triton.py) against ``torch.nonzero``.

One launch counts and writes into a buffer of at most ``_MAX_RECORDS`` records; a second launch
writes an exact buffer only when more entries are True. These tests lower the limits so that
small masks take every path: several row chunks per program, rows longer than a chunk, the
buffer filled exactly, overflowed by one, and far exceeded, plus what the output's storage
holds. The CUDA tests run large masks, where the programs really run side by side and each waits
for the counts of the runs before its own.
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


def _launches(monkeypatch):
    calls = []
    launch = W._launch

    def spy(m, ws, out, capacity, geometry, first):
        calls.append((first, capacity))
        return launch(m, ws, out, capacity, geometry, first)

    monkeypatch.setattr(W, "_launch", spy)
    return calls


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
    calls = _launches(monkeypatch)
    mask = _mask(shape, density)
    assert W._geometry(mask)[0] == programs
    _check(mask)
    assert calls == [(True, min(W._MAX_RECORDS, mask.numel()))]


def test_strided_and_non_bool_masks():
    base = _mask((3, 9, 5, 11), 0.4)
    for mask in (base.transpose(1, 2), base[:, ::2, :, 1:], base.permute(3, 2, 1, 0)):
        assert not mask.is_contiguous()
        _check(mask)
    ints = base.to(torch.int32) * 7
    assert torch.equal(W.block_mask_worklist(ints), torch.nonzero(ints).to(torch.int32))


@pytest.mark.parametrize("over", [-1, 0, 1, 20])
def test_buffer_limit(monkeypatch, over):
    # nnz minus the buffer's records: below it, filled exactly, overflowed by one, far over.
    monkeypatch.setattr(W, "_TILE", 32)  # 2 rows a chunk, 3 programs of 11 chunks
    monkeypatch.setattr(W, "_MAX_PROGRAMS", 3)
    mask = _mask((2, 3, 11, 9), 0.5, seed=1)
    assert W._geometry(mask)[0] == 3
    nnz = int(mask.sum())
    monkeypatch.setattr(W, "_MAX_RECORDS", nnz - over)
    calls = _launches(monkeypatch)
    got = _check(mask)
    if over > 0:
        assert calls == [(True, nnz - over), (False, nnz)]
        assert got.untyped_storage().nbytes() == got.numel() * 4
    else:
        assert calls == [(True, nnz - over)]


@pytest.mark.parametrize("density", [0.0, 0.05, 0.3, 0.5, 0.9, 1.0])
def test_storage_at_most_twice_the_output(density):
    got = _check(_mask((2, 4, 8, 16), density, seed=2))
    held = got.untyped_storage().nbytes()
    assert held <= max(2 * got.numel() * 4, 0)
    if got.numel() and 2 * got.shape[0] < 2 * 4 * 8 * 16:
        assert held == got.numel() * 4  # an exact copy below half of the buffer


@needs_cuda
@pytest.mark.parametrize("density", [0.0, 0.001, 0.3, 0.7, 1.0])
def test_large_masks_on_cuda(density):
    # 16384 rows: 1024 programs of 16 rows, all publishing and waiting at once. Repeated calls
    # make a race (a program that reads an earlier count before it is published) show up.
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


@needs_cuda
def test_overflow_on_cuda(monkeypatch):
    monkeypatch.setattr(W, "_MAX_RECORDS", 1000)
    calls = _launches(monkeypatch)
    mask = _mask((8, 16, 128, 128), 0.3, seed=5)
    _check(mask)
    assert [first for first, _ in calls] == [True, False]
