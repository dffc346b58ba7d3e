"""Adapters of other libraries' row norms to ``l2norm``'s arguments, for the generated benchmark
(``ops.yaml``, ``benchmark: baselines``). Each takes the baseline's function, then the public
function's arguments by name, and returns ``y``."""

from __future__ import annotations

# fla's l2norm and quack's rmsnorm take their own epsilon; the benchmark compares at this one.
DEFAULT_EPS = 1e-6
_weights: dict = {}


def fla_l2norm(fn, x, eps):
    """fla-core's ``l2norm(x)``: the same operation, at its default epsilon."""
    if eps != DEFAULT_EPS:
        raise ValueError(f"fla's l2norm is compared at eps={DEFAULT_EPS}, got {eps}")
    return fn(x)


def quack_rmsnorm(fn, x, eps):
    """quack's ``rmsnorm(x, weight, eps=...)`` as an L2 norm: ``x * rsqrt(mean(x**2) + eps / D)
    * D ** -0.5`` is ``x * rsqrt(sum(x**2) + eps)``. The weight is made once per size and
    device, outside the timed calls that follow the first."""
    D = x.shape[-1]
    key = (D, x.device)
    if key not in _weights:
        import torch

        _weights[key] = torch.full((D,), D**-0.5, dtype=torch.float32, device=x.device)
    return fn(x, _weights[key], eps=eps / D)
