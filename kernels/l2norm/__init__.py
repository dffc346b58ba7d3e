"""The ``l2norm`` operator: CuTeDSL launchers (``cute.py``), Triton launchers (``triton.py``), the
float32 reference (``reference.py``) and the benchmark's baseline adapters (``baselines.py``)."""
