"""``kernels/_triton.py``'s ``CachedLaunches`` (Note [cached launches]) against a stub kernel.

The stub stands for a ``@triton.jit`` function: indexing it with a grid launches through "JIT"
(recorded) and returns a stub compiled kernel whose ``run`` (the C launcher) is recorded too. The
device and stream functions are replaced, so these run without a GPU; the CUDA tests of
``tests/test_worklist_launcher.py`` run the real launches with ``VERIFY`` on.
"""

from __future__ import annotations

import pytest
import torch
from triton.knobs import HookChain

from attnops_kernels import _triton as T


class Compiled:
    def __init__(self, calls, tag, hash=None):
        self.calls, self.tag = calls, tag
        self.hash = f"hash-{tag}" if hash is None else hash
        self.function, self.packed_metadata = f"function-{tag}", f"meta-{tag}"

    def run(self, *args):
        self.calls.append(("direct", self.tag, args))


class StubKernel:
    __name__ = "stub_kernel"

    def __init__(self):
        self.calls = []
        self.pre_run_hooks = []
        self.compiles = 0
        self.warm = None

    def __getitem__(self, grid):
        def jit(*args, **options):
            self.compiles += 1
            self.calls.append(("jit", grid, args, options))
            return Compiled(self.calls, self.compiles)

        return jit

    def warmup(self, *args, grid, **options):
        return self.warm


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setattr(T, "launchable", lambda kernel, like: kernel)
    monkeypatch.setattr(T, "_traced", lambda like: False)
    monkeypatch.setattr(T, "_CACHEABLE", True)
    monkeypatch.setattr(T, "_on_gpu", lambda like: True)
    monkeypatch.setattr(T, "_current_device", lambda: 0)
    monkeypatch.setattr(T, "_raw_stream", lambda device: 1000 + device)
    kernel = StubKernel()
    return kernel, T.CachedLaunches(kernel)


LIKE = torch.empty(1)


def test_first_launch_of_a_key_compiles_later_ones_go_to_the_c_launcher(stub):
    kernel, launch = stub
    launch((4,), LIKE, "a", 1, 2, num_warps=4)
    launch((5, 2), LIKE, "a", 3, 4, num_warps=4)
    launch((6,), LIKE, "b", 5, 6, num_warps=4)
    launch((7,), LIKE, "b", 7, 8, num_warps=4)
    assert kernel.calls == [
        ("jit", (4,), (1, 2), {"num_warps": 4}),
        ("direct", 1, (5, 2, 1, 1000, "function-1", "meta-1", None, None, None, 3, 4)),
        ("jit", (6,), (5, 6), {"num_warps": 4}),
        ("direct", 2, (7, 1, 1, 1000, "function-2", "meta-2", None, None, None, 7, 8)),
    ]


def test_each_device_compiles_its_own(stub, monkeypatch):
    kernel, launch = stub
    launch((1,), LIKE, "a", 1)
    monkeypatch.setattr(T, "_current_device", lambda: 1)
    launch((1,), LIKE, "a", 2)
    launch((1,), LIKE, "a", 3)
    assert [c[0] for c in kernel.calls] == ["jit", "jit", "direct"]
    assert kernel.calls[2][2][3] == 1001  # the stream of device 1


def test_empty_or_missing_hooks_keep_the_cached_path(stub, monkeypatch):
    kernel, launch = stub
    monkeypatch.setattr(T._runtime_knobs, "launch_enter_hook", None)
    monkeypatch.setattr(T._runtime_knobs, "launch_exit_hook", HookChain())
    launch((1,), LIKE, "a", 1)
    launch((1,), LIKE, "a", 2)
    assert [c[0] for c in kernel.calls] == ["jit", "direct"]


def test_a_changed_triton_debug_knob_compiles_again(stub, monkeypatch):
    kernel, launch = stub
    launch((1,), LIKE, "a", 1)
    monkeypatch.setattr(T._runtime_knobs, "debug", True)
    launch((1,), LIKE, "a", 2)
    assert [c[0] for c in kernel.calls] == ["jit", "jit"]


@pytest.mark.parametrize(
    ("hook", "form"),
    [("enter", "chain"), ("exit", "chain"), ("enter", "callable"), ("pre_run", "list")],
)
def test_installed_hooks_send_every_launch_through_triton(stub, monkeypatch, hook, form):
    kernel, launch = stub
    launch((1,), LIKE, "a", 1)
    # Triton 3.6 chains launch hooks in a HookChain; earlier versions held one callable.
    chain = HookChain()
    chain.add(lambda metadata: None)
    if hook == "pre_run":
        kernel.pre_run_hooks.append(lambda *args, **kwargs: None)
    else:
        value = chain if form == "chain" else (lambda metadata: None)
        monkeypatch.setattr(T._runtime_knobs, f"launch_{hook}_hook", value)
    launch((1,), LIKE, "a", 2)
    launch((1,), LIKE, "a", 3)
    assert [c[0] for c in kernel.calls] == ["jit", "jit", "jit"]


def test_traced_launches_go_through_what_launchable_returns(stub, monkeypatch):
    kernel, launch = stub
    wrapped = StubKernel()
    launch((1,), LIKE, "a", 1)
    monkeypatch.setattr(T, "launchable", lambda k, like: wrapped)
    monkeypatch.setattr(T, "_traced", lambda like: True)
    launch((1,), LIKE, "a", 2)
    assert [c[0] for c in kernel.calls] == ["jit"]
    assert [c[0] for c in wrapped.calls] == ["jit"]


def test_verify_refuses_a_key_that_maps_to_another_kernel(stub, monkeypatch):
    kernel, launch = stub
    launch((1,), LIKE, "a", 1)
    monkeypatch.setattr(T, "VERIFY", True)
    kernel.warm = Compiled(kernel.calls, "other")
    with pytest.raises(AssertionError, match="key 'a' maps to a kernel compiled for other"):
        launch((1,), LIKE, "a", 16)
    cached = next(iter(launch._compiled.values()))[0]
    kernel.warm = cached
    launch((1,), LIKE, "a", 2)
    # Another object of the same kernel: two threads compiled the specialization at once.
    kernel.warm = Compiled(kernel.calls, "twin", hash=cached.hash)
    launch((1,), LIKE, "a", 3)
    assert [c[0] for c in kernel.calls] == ["jit", "direct", "direct"]


def test_the_cache_is_bounded(stub, monkeypatch):
    kernel, launch = stub
    monkeypatch.setattr(T, "_MAX_KEYS", 3)
    for key in range(5):
        launch((1,), LIKE, key, key)
    assert len(launch._compiled) == 2
    launch((1,), LIKE, 4, 4)
    launch((1,), LIKE, 0, 0)
    assert [c[0] for c in kernel.calls] == ["jit"] * 5 + ["direct", "jit"]


def test_the_interpreter_is_never_bypassed():
    from triton.runtime.interpreter import InterpretedFunction

    def kernel(x):
        pass

    assert not T.CachedLaunches(InterpretedFunction(kernel))._usable


def test_one_state_serves_several_launches(stub, monkeypatch):
    kernel, launch = stub
    other = T.CachedLaunches(StubKernel())
    state = T.launch_state(LIKE)
    launch.launch(state, (1,), LIKE, "a", 1)
    other.launch(state, (1,), LIKE, "a", 2)
    monkeypatch.setattr(T, "_raw_stream", lambda device: 2000)  # read once, in the state
    launch.launch(state, (1,), LIKE, "a", 3)
    other.launch(state, (1,), LIKE, "a", 4)
    assert [c[:2] for c in kernel.calls] == [("jit", (1,)), ("direct", 1)]
    assert [c[0] for c in other.kernel.calls] == ["jit", "direct"]
    assert kernel.calls[1][2][3] == 1000 and other.kernel.calls[1][2][3] == 1000


def test_no_state_where_launches_must_bind(stub, monkeypatch):
    assert T.launch_state(LIKE) is not None
    monkeypatch.setattr(T, "_traced", lambda like: True)
    assert T.launch_state(LIKE) is None
    monkeypatch.setattr(T, "_traced", lambda like: False)
    monkeypatch.setattr(T, "_CACHEABLE", False)
    assert T.launch_state(LIKE) is None
    monkeypatch.setattr(T, "_CACHEABLE", True)
    monkeypatch.setattr(T, "_on_gpu", lambda like: like.is_cuda)
    assert T.launch_state(LIKE) is None  # a CPU tensor


class Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


def test_synchronize_keeps_one_stream_object_per_handle(monkeypatch):
    # Note [stream objects]: the object made for a handle waits for later calls with it.
    made, waited = [], []

    def current_stream(device):
        made.append(device)
        return Stream(handles[device])

    handles = {0: 1000, 1: 2000}
    monkeypatch.setattr(T, "_STREAMS", {})
    monkeypatch.setattr(T, "_stream_synchronize", lambda stream: waited.append(stream))
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    for _ in range(3):
        T.synchronize(0, 1000)
    T.synchronize(1, 2000)
    handles[0] = 3000  # another stream made current on device 0
    T.synchronize(0, 3000)
    assert made == [0, 1, 0]
    assert [s.cuda_stream for s in waited] == [1000, 1000, 1000, 2000, 3000]
    assert waited[0] is waited[1] is waited[2]
    # A handle that is not the device's current stream is refused, not waited on.
    with pytest.raises(ValueError, match="is not the current stream of device 0"):
        T.synchronize(0, 1000 + 1)
    assert len(waited) == 5
