"""Test configuration: Triton kernels run under its interpreter where there is no GPU; tests
marked ``slow`` run only under ``--full`` (or ``ATTNOPS_FULL_TESTS=1``)."""

import os

import pytest
import torch

# Without a GPU the Triton launchers run on CPU tensors through Triton's interpreter. The
# variable must be set before triton is first imported, which the launchers do lazily.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Note [slow tests]: the default run covers every operator and every stage; the tests marked
# ``slow`` add more of the same (more layouts under opcheck, more fuzzed specs, builds and
# installs in subprocesses). ``--full`` runs them too, which CI does.
FULL_ENV = "ATTNOPS_FULL_TESTS"
SLOW_REASON = "slow: run with --full (or ATTNOPS_FULL_TESTS=1)"


def pytest_addoption(parser):
    try:
        parser.addoption(
            "--full",
            action="store_true",
            default=False,
            help="also run the tests marked slow (the full matrix)",
        )
    except ValueError:  # another conftest of the same run already added it
        pass


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: part of the full matrix; runs only under --full")


def full_run(config) -> bool:
    return bool(config.getoption("--full", default=False)) or os.environ.get(FULL_ENV) == "1"


def pytest_collection_modifyitems(config, items):
    if full_run(config):
        return
    skip = pytest.mark.skip(reason=SLOW_REASON)
    for item in items:
        # Another conftest of the same run may have marked it already.
        reasons = [m.kwargs.get("reason") for m in item.iter_markers("skip")]
        if item.get_closest_marker("slow") is not None and SLOW_REASON not in reasons:
            item.add_marker(skip)
