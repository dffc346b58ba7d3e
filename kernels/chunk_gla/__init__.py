"""The ``chunk_gla`` operator: Triton launchers (``triton.py``; their kernels in ``fwd.py``,
``walks.py``, ``bwd.py`` and ``sequential.py`` over the jit helpers of ``common.py``, their launch
configurations in ``config.py``), the float32 reference (``reference.py``) and the benchmark's
baseline adapters (``baselines.py``)."""
