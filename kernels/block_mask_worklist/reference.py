import torch
from torch import Tensor


def block_mask_worklist_ref(mask: Tensor) -> Tensor:
    """Reference of ``block_mask_worklist``: ``torch.nonzero(mask)`` as int32.

    Args:
        mask: ``[B, H, QB, KB]`` bool.

    Returns:
        ``coords``: ``[nnz, 4]`` int32, contiguous, the ``(b, h, q, kv)`` of each True entry in
        row-major order. Mutates nothing.
    """
    return torch.nonzero(mask).to(torch.int32).contiguous()
