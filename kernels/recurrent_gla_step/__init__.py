"""The ``recurrent_gla_step`` operator: Triton launchers (``triton.py``) and the float32 reference (``reference.py``)."""
