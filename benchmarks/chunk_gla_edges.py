"""chunk_gla at the edges of its log-decay domain against the token-by-token reference.

    TRITON_INTERPRET=1 python benchmarks/chunk_gla_edges.py      # CPU (about 30 s)
    python benchmarks/chunk_gla_edges.py                         # a GPU

Each row sets ``g`` to one value at some tokens of every head (B = 2, T = 130, H = 2,
K = V = 16, float32, with an initial state; packed rows B = 1 with offsets [0, 10, 75, 130]) and
prints, for the output, the final state and each gradient (of a random projection of both), the
largest absolute error against the reference where the reference is finite, and how many
entries are not finite there. A last row calls it with ``scale = inf``. Exit status 1 when an
entry is not finite where the reference's is, or an error is above 1e-3.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from attnops_kernels.chunk_gla import reference as R
from attnops_kernels.chunk_gla import triton as C

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INF = float("inf")
ONE = [70]
CASES = [
    ("g = -inf at one token", -INF, ONE, None),
    ("g = -1e4 at one token", -1e4, ONE, None),
    ("g = -1e6 at one token", -1e6, ONE, None),
    ("g = -1e10 at one token", -1e10, ONE, None),
    ("g = -100 at one token", -100.0, ONE, None),
    ("g = 0 at one token", 0.0, ONE, None),
    ("g = -inf, first + last token", -INF, [0, 129], None),
    ("g = -inf over chunk 2", -INF, list(range(64, 128)), None),
    ("packed, g = -inf at 10, 40", -INF, [10, 40], [0, 10, 75, 130]),
    ("packed, g = -1e10 at 40, 74", -1e10, [40, 74], [0, 10, 75, 130]),
]
NAMES = ("o", "final", "dq", "dk", "dv", "dg", "dh0")


def _measure(value, tokens, cu):
    gen = torch.Generator().manual_seed(0)
    B, T, H, K, V = (1 if cu else 2), 130, 2, 16, 16
    N = len(cu) - 1 if cu else B

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(DEVICE)

    q, k, v, g = rnd(B, T, H, K), rnd(B, T, H, K), rnd(B, T, H, V), F.logsigmoid(rnd(B, T, H))
    g[:, tokens] = value
    h0, do, dht = rnd(N, H, K, V), rnd(B, T, H, V), rnd(N, H, K, V)
    cu_t = torch.tensor(cu, dtype=torch.int32, device=DEVICE) if cu else None
    o, h, ht = C.chunk_gla_fwd(q, k, v, g, None, h0, cu_t, True)
    got = [o, ht, *C.chunk_gla_bwd(q, k, v, g, None, h0, cu_t, do, dht, h)]
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, h0)]
    ro, rht = R.chunk_gla_ref(*leaves[:4], None, leaves[4], True, cu_t)
    want = [ro, rht, *torch.autograd.grad((ro * do).sum() + (rht * dht).sum(), leaves)]
    out = []
    for a, b in zip(got, want, strict=True):
        a, b = a.detach().float(), b.detach().float()
        finite = torch.isfinite(b)
        bad = int((finite & ~torch.isfinite(a)).sum())
        both = (a - b)[finite & torch.isfinite(a)]
        err = both.abs().max().item() if both.numel() else 0.0
        out.append((err, bad))
    return out


def main() -> int:
    print("| case | " + " | ".join(NAMES) + " |")
    print("|---|" + "---:|" * len(NAMES))
    failed = False
    for name, value, tokens, cu in CASES:
        cells = []
        for err, bad in _measure(value, tokens, cu):
            cells.append(f"{err:.2g}" + (f" ({bad} non-finite)" if bad else ""))
            failed |= bad > 0 or err > 1e-3
        print(f"| {name} | " + " | ".join(cells) + " |")
    q = torch.randn(1, 8, 1, 16, device=DEVICE)
    g = torch.zeros(1, 8, 1, device=DEVICE)
    try:
        o = C.chunk_gla_fwd(q, q, q, g, INF, None, None, False)[0]
        ro = R.chunk_gla_ref(q, q, q, g, INF)[0]
        nan = int((o.isnan() & ~ro.isnan()).sum())
        print(f"| scale = inf | {nan} NaN of {o.numel()} where the reference is +-inf |")
        failed = True
    except ValueError as exc:
        print(f"| scale = inf | refused: {exc} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
