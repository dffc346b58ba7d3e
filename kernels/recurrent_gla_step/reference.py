import torch
from torch import Tensor


def recurrent_gla_step_ref(
    state: Tensor, q: Tensor, k: Tensor, v: Tensor, g: Tensor, scale: float
) -> Tensor:
    """Float32 reference of ``recurrent_gla_step``: ``S <- exp(g) * S + k^T v``, ``o = scale * q @ S``.

    Args:
        state: ``[B, H, K, V]`` (float32). **Mutated**: the new state is copied into it
            (outside autograd).
        q: ``[B, H, K]``; k: ``[B, H, K]``; v: ``[B, H, V]``; any floating dtype.
        g: ``[B, H]`` log-decay.
        scale: multiplies the output.

    Returns:
        ``o``: ``[B, H, V]`` float32, computed from the updated state.
    """
    s = state.float()
    s = (
        torch.exp(g.float())[..., None, None] * s
        + k.float()[..., :, None] * v.float()[..., None, :]
    )
    o = scale * torch.einsum("bhk,bhkv->bhv", q.float(), s)
    with torch.no_grad():
        state.copy_(s)
    return o
