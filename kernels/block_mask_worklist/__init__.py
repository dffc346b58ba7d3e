"""The ``block_mask_worklist`` operator: Triton launchers (``triton.py``) and the float32 reference (``reference.py``)."""
