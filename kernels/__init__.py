"""Hand-written kernels (Triton, CuTeDSL) and float32 references, imported as ``attnops_kernels``."""
