from .reference import gate_ref
from .triton import gate_bwd, gate_fwd

__all__ = ["gate_bwd", "gate_fwd", "gate_ref"]
