import os

import torch

# Tests of the generator import the generated package; without a GPU its Triton launchers run
# through Triton's interpreter, which must be selected before triton is first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
