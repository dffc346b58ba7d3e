"""The ``recurrent_gla_step`` operator: Triton launchers (``triton.py``), the float32 reference
(``reference.py``) and the benchmark's baseline adapters (``baselines.py``)."""
