from .reference import recurrent_gla_step_ref
from .triton import recurrent_gla_step

__all__ = ["recurrent_gla_step", "recurrent_gla_step_ref"]
