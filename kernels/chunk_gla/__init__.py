"""The ``chunk_gla`` operator: Triton launchers (``triton.py``) and the float32 reference (``reference.py``)."""
