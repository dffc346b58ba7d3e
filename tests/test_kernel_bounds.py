"""The chunk_gla launchers stay inside their tensors whatever ``cu_seqlens`` holds.

Each malformed-offsets case of ``tests/chunk_gla_bounds.py`` runs in its own process
(without a GPU under ``TRITON_INTERPRET=1``, where a read or write past a tensor corrupts the
heap): a crash fails its case instead of the run. The script itself checks that outputs are
finite, that offsets nondecreasing once clamped into ``[0, T]`` give the clamped offsets' results
bit for bit with zeros in the tokens no sequence covers, and that what must be refused raises a
``ValueError`` naming ``cu_seqlens``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from marks import slow

SCRIPT = Path(__file__).resolve().parent / "chunk_gla_bounds.py"


def _cases():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--list"], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


# By default: valid offsets, offsets past T and a non-monotonic list; --full runs every case.
DEFAULT = ("valid", "last_huge_int64", "non_monotonic")


@pytest.mark.parametrize("case", [c if c in DEFAULT else slow(c, id=c) for c in _cases()])
def test_launchers_stay_in_bounds(case):
    env = dict(os.environ)
    import torch

    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), case], capture_output=True, text=True, env=env, timeout=600
    )
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, f"{case}: exit status {proc.returncode}\n{tail}"
    assert proc.stdout.strip().endswith(f"{case} ok"), tail
