"""Index inputs end to end: the runtime check, the test helpers, and a throwaway project of two
Triton gathers (``embed``: spelled-out ids, no skip; ``gather``: drawn 2-D slots with
``negative: skip`` and a backward) whose generated suites pass, whose kernels stay in bounds
with the check off, and whose out-of-range tests fail once the public check is removed or off
by one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
from marks import SLOW
from specs import generate_project, run_generated

from codegen.runtime import runtime, testing, testing_edges

# --- the runtime check --------------------------------------------------------------------


def _refusal(index, bound, skip=False) -> str:
    with pytest.raises(ValueError) as info:
        runtime.check_indexes("op", "ids", index, bound, "V", skip)
    return str(info.value)


def test_the_first_entry_out_of_range_is_named_with_its_position_and_value():
    ids = torch.tensor([[1, 2, 3], [16, 0, 99]], dtype=torch.int32)
    assert _refusal(ids, 16) == "op: ids[1, 0] = 16 is out of range for V = 16 (valid: 0 <= i < 16)"
    assert _refusal(torch.tensor([3, -1, 40]), 16) == (
        "op: ids[1] = -1 is out of range for V = 16 (valid: 0 <= i < 16)"
    )
    assert _refusal(torch.tensor([3, -1, 40]), 16, skip=True) == (
        "op: ids[2] = 40 is out of range for V = 16 (valid: 0 <= i < 16, or negative to skip)"
    )
    assert (
        _refusal(torch.tensor(7), 3) == "op: ids = 7 is out of range for V = 3 (valid: 0 <= i < 3)"
    )
    assert (
        _refusal(torch.tensor([0]), 0)
        == "op: ids[0] = 0 is out of range for V = 0 (no entry is valid)"
    )
    assert _refusal(torch.tensor([-1, 0]), 0, skip=True) == (
        "op: ids[1] = 0 is out of range for V = 0 (only negative entries, which skip, are valid)"
    )
    # Positions are those of the tensor as indexed, whatever its strides.
    strided = torch.tensor([[1, 2], [3, 2**40]]).t()
    assert _refusal(strided, 16) == (
        "op: ids[1, 1] = 1099511627776 is out of range for V = 16 (valid: 0 <= i < 16)"
    )


@pytest.mark.parametrize(
    "index, bound, skip",
    [
        (torch.tensor([0, 15, 3]), 16, False),
        (torch.tensor([-1, 15, -(2**40)]), 16, True),
        (torch.empty(0, dtype=torch.int64), 0, False),  # empty: nothing to index with
        (torch.empty(0, 3, dtype=torch.int32), 4, False),
        (torch.tensor([-1, -7], dtype=torch.int32), 0, True),
        (torch.tensor([5, 9], device="meta"), 4, False),  # meta: no values to read
    ],
)
def test_entries_in_range_pass(index, bound, skip):
    runtime.check_indexes("op", "ids", index, bound, "V", skip)


def test_the_eager_check_is_one_reduction_and_one_read():
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name())
            return func(*args, **(kwargs or {}))

    for skip in (False, True):
        seen.clear()
        with Record():
            runtime.check_indexes("op", "ids", torch.arange(4096), 4096, "V", skip)
        assert len(seen) <= 3, seen  # no operation per entry


def test_the_switch_turns_the_check_off():
    runtime.set_index_check(False)
    try:
        runtime.check_indexes("op", "ids", torch.tensor([99]), 4, "V", False)
    finally:
        runtime.set_index_check(True)
    with pytest.raises(ValueError):
        runtime.check_indexes("op", "ids", torch.tensor([99]), 4, "V", False)


def test_compiled_graphs_check_on_the_device():
    def f(ids, w):
        runtime.check_indexes("op", "ids", ids, w.shape[0], "V", False)
        return w[ids]

    compiled = torch.compile(f, fullgraph=True, backend="eager")  # a host read would break it
    w = torch.randn(4, 2)
    torch.testing.assert_close(compiled(torch.tensor([3, 0]), w), w[[3, 0]])
    with pytest.raises(RuntimeError, match="op: ids holds an entry out of range for V"):
        compiled(torch.tensor([3, 4]), w)
    runtime.set_index_check(False)
    try:  # the switch is read while tracing: a recompiled graph without the assert
        compiled(torch.tensor([3, 1]), w)
        with pytest.raises(IndexError):  # w[4] in eager: no assert ran first
            compiled(torch.tensor([3, 4]), w)
    finally:
        runtime.set_index_check(True)


# --- the test helpers ---------------------------------------------------------------------


def test_drawn_entries_are_in_range_and_some_skip():
    gen = torch.Generator().manual_seed(0)
    plain = testing.index(gen, (64, 8), torch.int32, 5)
    assert plain.dtype == torch.int32 and 0 <= int(plain.min()) and int(plain.max()) == 4
    skipping = testing.index(gen, (64, 8), torch.int64, 5, skip=True)
    negative = skipping < 0
    assert 0.1 < negative.float().mean() < 0.4 and int(skipping.max()) < 5
    assert set(skipping[negative].tolist()) == {-1, -2, -3}
    assert bool((testing.index(gen, (6,), torch.int64, 0, skip=True) < 0).all())
    assert testing.index(gen, (6,), torch.int64, 0).tolist() == [0] * 6  # refused: V is 0


def test_the_out_of_range_forms():
    assert testing_edges.bad_index_forms(False, ("int32",)) == [
        ("past-end", "int32"),
        ("at-end", "int32"),
        ("negative", "int32"),
        ("int32-max", "int32"),
    ]
    assert testing_edges.bad_index_forms(True, ("int32", "int64")) == [
        ("past-end", "int32"),
        ("past-end", "int64"),
        ("at-end", "int32"),
        ("at-end", "int64"),
        ("int32-max", "int32"),
        ("int32-max", "int64"),
        ("huge", "int64"),
    ]


def test_an_accepted_or_misnamed_entry_fails_the_refusal_check():
    def run(fn):
        inputs = {"w": torch.zeros(4, 2), "ids": torch.tensor([[0, 1, 2], [3, 2, 1]])}
        return testing_edges.index_outcomes(fn, inputs, "ids", ("V", "w", 0, False, ("int64",)), {})

    def checked(w, ids):
        runtime.check_indexes("op", "ids", ids, w.shape[0], "V", False)

    def unchecked(w, ids):
        pass

    def misnamed(w, ids):
        raise ValueError("op: ids must be in range")

    row = ("V", "w", 0, False, ("int64",))
    lines = run(checked)
    assert lines[0].startswith("past-end int64 refused ids[1, 0] = 7 is out of range for V = 4 ")
    testing_edges.check_indexes_refused(lines, "op", "ids", row)
    with pytest.raises(AssertionError, match="holding an entry past-end .int64. was accepted"):
        testing_edges.check_indexes_refused(run(unchecked), "op", "ids", row)
    with pytest.raises(AssertionError, match="does not name the entry"):
        testing_edges.check_indexes_refused(run(misnamed), "op", "ids", row)
    with pytest.raises(AssertionError):  # a form left out
        testing_edges.check_indexes_refused(lines[1:], "op", "ids", row)


# --- a project of two gathers -------------------------------------------------------------

LAUNCHERS = '''
"""Gathers by index in Triton: one program per entry, masked so that an entry out of range
(the public check off) reads and writes nothing."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gather_kernel(src, ids, out, rows, cols, s_row, s_col, BLOCK: tl.constexpr):
    e = tl.program_id(0)
    i = tl.load(ids + e).to(tl.int64)
    ok = (i >= 0) & (i < rows)
    i = tl.where(ok, i, 0)
    c = tl.arange(0, BLOCK)
    row = tl.load(src + i * s_row + c * s_col, mask=c < tl.where(ok, cols, 0), other=0.0)
    tl.store(out + e * cols + c, row, mask=c < cols)


@triton.jit
def _scatter_add_kernel(grad, ids, out, rows, cols, BLOCK: tl.constexpr):
    e = tl.program_id(0)
    i = tl.load(ids + e).to(tl.int64)
    ok = (i >= 0) & (i < rows)
    i = tl.where(ok, i, 0)
    c = tl.arange(0, BLOCK)
    g = tl.load(grad + e * cols + c, mask=c < cols, other=0.0)
    tl.atomic_add(out + i * cols + c, g, mask=c < tl.where(ok, cols, 0))


def _gather(src, ids):
    flat = ids.reshape(-1).contiguous()
    out = src.new_empty((flat.numel(), src.shape[1]))
    if out.numel():
        block = triton.next_power_of_2(src.shape[1])
        _gather_kernel[(flat.numel(),)](
            src, flat, out, src.shape[0], src.shape[1], src.stride(0), src.stride(1), BLOCK=block
        )
    return out.view(*ids.shape, src.shape[1])


def embed_fwd(weight, ids):
    """weight [V, D] float32, ids [N] int32/int64 -> out [N, D] (an id out of range: zeros)."""
    return _gather(weight, ids)


def gather_fwd(x, slots):
    """x [S, D] float32, slots [B, L] int32/int64 -> out [B, L, D] (a negative slot: zeros)."""
    return _gather(x, slots)


def gather_bwd(grad_out, x, slots):
    """grad_out [B, L, D], x [S, D], slots [B, L] -> grad_x [S, D] (skipped slots add nothing)."""
    flat = slots.reshape(-1).contiguous()
    grad = grad_out.reshape(flat.numel(), x.shape[1]).contiguous()
    out = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
    if grad.numel():
        block = triton.next_power_of_2(x.shape[1])
        _scatter_add_kernel[(flat.numel(),)](grad, flat, out, x.shape[0], x.shape[1], BLOCK=block)
    return out


def _take(src, ids):
    """Rows of src picked by ids; a negative id gives zeros (also where src has no row)."""
    padded = torch.cat([src, src.new_zeros(1, src.shape[1])])
    return padded[torch.where(ids < 0, src.shape[0], ids).long()]


def embed_ref(weight, ids):
    return _take(weight, ids)


def gather_ref(x, slots):
    return _take(x, slots)
'''

SPEC = """\
version: 1
namespace: idxdemo
package: idxdemo
ops:
  embed:
    doc: The rows of weight that ids pick.
    forward:
      schema: "(Tensor weight, Tensor ids) -> Tensor out"
      launchers: {cpu: idxl:embed_fwd, cuda: idxl:embed_fwd}
    inputs:
      weight: {shape: [V, D], dtypes: [float32]}
      ids: {shape: [N], dtypes: [int64, int32], indexes: V}
    outputs:
      out: {shape: [N, D], dtype: weight}
    reference: idxl:embed_ref
    tests:
      samples:
        - {V: 7, D: 5, ids: [6, 0, 3, 3, 1]}
      tolerance: {float32: [0, 0]}
  gather:
    doc: The rows of x that slots pick; a negative slot gives a row of zeros.
    forward:
      schema: "(Tensor x, Tensor slots) -> Tensor out"
      launchers: {cpu: idxl:gather_fwd, cuda: idxl:gather_fwd}
    backward:
      schema: "(Tensor grad_out, Tensor x, Tensor slots) -> Tensor grad_x"
      launchers: {cpu: idxl:gather_bwd, cuda: idxl:gather_bwd}
    inputs:
      x: {shape: [S, D], dtypes: [float32]}
      slots: {shape: [B, L], dtypes: [int32, int64], indexes: S, negative: skip}
    outputs:
      out: {shape: [B, L, D], dtype: x}
    reference: idxl:gather_ref
    tests:
      samples:
        - {S: 6, D: 4, B: 2, L: 5}
      tolerance: {float32: [1.0e-6, 1.0e-6]}
"""

# The public check off, entries far out of range: masked kernels read nothing for them.
UNCHECKED = """
import os
import torch
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
import pytest
import idxdemo

torch.set_default_device("cuda" if torch.cuda.is_available() else "cpu")
weight = torch.randn(7, 5)
ids = torch.tensor([7, 2**40, -5, 2**31 - 1, 1])
with pytest.raises(ValueError, match=r"^embed: ids\\[0\\] = 7 is out of range for V = 7 "):
    idxdemo.embed(weight, ids)
x = torch.randn(6, 4, requires_grad=True)
slots = torch.tensor([[6, -1, 2], [2**40, 2, -2**40]])
with pytest.raises(ValueError, match=r"^gather: slots\\[0, 0\\] = 6 is out of range for S = 6 "):
    idxdemo.gather(x, slots)
compiled = torch.compile(idxdemo.embed, fullgraph=True, backend="eager")
if not torch.cuda.is_available():  # on CUDA the assert is a device-side one (COMPILED_ASSERT)
    with pytest.raises(RuntimeError, match="embed: ids holds an entry out of range for V"):
        compiled(weight, ids)
idxdemo.set_index_check(False)
out = idxdemo.embed(weight, ids).out
torch.testing.assert_close(out, torch.cat([torch.zeros(4, 5), weight[1:2]]), rtol=0, atol=0)
torch.testing.assert_close(compiled(weight, ids).out, out, rtol=0, atol=0)
got = idxdemo.gather(x, slots).out
want = torch.zeros(2, 3, 4)
want[0, 2] = want[1, 1] = x[2].detach()
torch.testing.assert_close(got, want, rtol=0, atol=0)
got.sum().backward()
grad = torch.zeros(6, 4)
grad[2] = 2.0
torch.testing.assert_close(x.grad, grad, rtol=0, atol=0)
print("ok")
"""

# On CUDA the compiled check is torch._assert_async, a device-side assert: it fails the call (and
# leaves the process's CUDA context unusable), so it runs in a process of its own.
COMPILED_ASSERT = """
import subprocess, sys

CHILD = '''
import torch
import idxdemo

compiled = torch.compile(idxdemo.embed, fullgraph=True, backend="eager")
weight = torch.randn(7, 5, device="cuda")
compiled(weight, torch.tensor([1, 7], device="cuda")).out.sum().item()
torch.cuda.synchronize()
print("no assert")
'''
# A device-side assert can abort the process (an error thrown while freeing memory): the child
# must fail, and say which check failed.
child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
assert child.returncode != 0, child.stdout
assert "embed: ids holds an entry out of range for V" in child.stderr, child.stderr[-2000:]
print("refused on the device")
"""

# The control of benchmarks/index_bounds_gpu.sh: a gather without masks, one id far past the end.
UNMASKED = """
import torch
import triton
import triton.language as tl


@triton.jit
def _unmasked(src, ids, out, cols, BLOCK: tl.constexpr):
    e = tl.program_id(0)
    i = tl.load(ids + e).to(tl.int64)
    c = tl.arange(0, BLOCK)
    tl.store(out + e * cols + c, tl.load(src + i * cols + c, mask=c < cols), mask=c < cols)


src = torch.randn(7, 5, device="cuda")
out = torch.empty(2, 5, device="cuda")
_unmasked[(2,)](src, torch.tensor([1, 100000], device="cuda"), out, 5, BLOCK=8)
torch.cuda.synchronize()
print("ran")
"""


def write_project(root) -> None:
    """The project and scripts that benchmarks/index_bounds_gpu.sh runs on a CUDA machine."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    assert generate_project(root, "idxl", LAUNCHERS, SPEC, "-q") == 0
    for name, text in (
        ("unchecked.py", UNCHECKED),
        ("compiled_assert.py", COMPILED_ASSERT),
        ("unmasked.py", UNMASKED),
    ):
        (root / name).write_text(text)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("indexproject")
    assert generate_project(root, "idxl", LAUNCHERS, SPEC, "-q") == 0
    return root


def _pytest(root: Path, *args: str):
    return run_generated(
        root, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *args, cwd=root / "out"
    )


def test_the_generated_suites_pass(project):
    result = _pytest(project, "-rA", "tests")
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    for test in (
        "test_embed.py::test_rejects_out_of_range_indexes[ids]",
        "test_gather.py::test_rejects_out_of_range_indexes[slots]",
        "test_embed.py::test_zero_sizes[V]",  # refused: no id survives V = 0
        "test_gather.py::test_zero_sizes[S]",  # computed: every slot drawn negative
        "test_gather.py::test_gradients_match_reference[fp32-S6-D4-B2-L5-compact-default]",
    ):
        assert f"PASSED tests/{test}" in out, test
    tests = (project / "out" / "tests" / "test_embed.py").read_text()
    assert 'ZERO_SIZES = {"V": "refused", "D": "computed"}' in tests


def test_the_kernels_stay_in_bounds_with_the_check_off(project):
    result = run_generated(project, "-c", UNCHECKED)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


@SLOW
def test_a_missing_or_off_by_one_check_fails_the_out_of_range_tests(project, tmp_path):
    """embed without its check, gather checking against S + 1: both out-of-range tests fail."""
    broken = tmp_path / "broken"
    shutil.copytree(project, broken)
    package = broken / "out" / "idxdemo"
    for module, old, new in (
        ("embed.py", r'\n\s*_check_indexes\("embed", "ids", ids, V, "V", False\)', "\n"),
        ("gather.py", r'slots, S, "S", True\)', 'slots, S + 1, "S", True)'),
    ):
        source, count = re.subn(old, new, (package / module).read_text())
        assert count == 1, f"the index check of {module} is not where this test expects it"
        (package / module).write_text(source)
    result = _pytest(broken, "-k", "out_of_range", "tests")
    failed = set(re.findall(r"^FAILED (\S+)", result.stdout, flags=re.M))
    assert failed == {
        "tests/test_embed.py::test_rejects_out_of_range_indexes[ids]",
        "tests/test_gather.py::test_rejects_out_of_range_indexes[slots]",
    }, result.stdout[-3000:]
    assert "embed: ids holding an entry past-end (int64) was accepted" in result.stdout
    # Checked against S + 1, the first form (S + 3) is refused, but naming the wrong bound.
    assert "gather: slots past-end (int32): the message does not name the entry" in result.stdout
