from .chunk import chunk_gla_bwd, chunk_gla_fwd
from .reference import chunk_gla_ref

__all__ = ["chunk_gla_bwd", "chunk_gla_fwd", "chunk_gla_ref"]
