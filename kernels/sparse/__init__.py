from .reference import block_mask_worklist_ref
from .triton import block_mask_worklist

__all__ = ["block_mask_worklist", "block_mask_worklist_ref"]
