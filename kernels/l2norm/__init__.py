"""The ``l2norm`` operator: CuTeDSL launchers (``cute.py``), Triton launchers (``triton.py``) and the
float32 reference (``reference.py``)."""
