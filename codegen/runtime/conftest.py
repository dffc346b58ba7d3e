"""Test configuration: Triton kernels run under its interpreter where there is no GPU."""

import os

import torch

# Without a GPU the Triton launchers run on CPU tensors through Triton's interpreter. The
# variable must be set before triton is first imported, which the launchers do lazily.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
