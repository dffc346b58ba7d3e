import torch
from torch import Tensor


def block_mask_worklist_ref(mask: Tensor) -> Tensor:
    """int32 [nnz, 4] (b, h, q, kv) coordinates of the True blocks, in row-major order."""
    return torch.nonzero(mask).to(torch.int32).contiguous()
