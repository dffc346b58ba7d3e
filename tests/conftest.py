# The generated tests' configuration, used by the generator's own tests too: Triton's
# interpreter where there is no GPU (set before triton is first imported), and the tests marked
# slow run only under --full (Note [slow tests] in codegen/runtime/conftest.py).
from codegen.runtime.conftest import (  # noqa: F401
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
)
