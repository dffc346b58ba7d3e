import torch
from torch import Tensor


def recurrent_gla_step_ref(
    state: Tensor, q: Tensor, k: Tensor, v: Tensor, g: Tensor, scale: float
) -> Tensor:
    """S <- exp(g) * S + k^T v (written into `state`); returns o = scale * q @ S in float32."""
    s = state.float()
    s = (
        torch.exp(g.float())[..., None, None] * s
        + k.float()[..., :, None] * v.float()[..., None, :]
    )
    o = scale * torch.einsum("bhk,bhkv->bhv", q.float(), s)
    with torch.no_grad():
        state.copy_(s)
    return o
