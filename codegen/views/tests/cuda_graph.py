"""The CUDA-graph section: a captured call replayed on new inputs matches eager."""

from __future__ import annotations


def graphable(op) -> bool:
    """No data-dependent sizes: the launchers never sync with the host, so a call can be
    captured."""
    return not op.dynamic_dims
