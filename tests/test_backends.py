"""Several CUDA backends behind one operator pair: the spec form, its located errors, the layout
predicates, the generated selection and the generated layout-case tests, all on the CPU."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from marks import slow
from specs import GATE, generate_project, replace, run_generated

from codegen.pipeline import generate, parse
from codegen.runtime import layout
from codegen.spec.errors import SpecError

FWD = "        cpu: attnops_kernels.l2norm.triton:l2norm_fwd"
TRITON_FWD = "attnops_kernels.l2norm.triton:l2norm_fwd"


def _backends(*entries: str) -> str:
    """BASE with its forward's cuda launcher given as a backend list (one flow mapping a line)."""
    lines = "\n".join(f"          - {e}" for e in entries)
    return replace(FWD, f"{FWD}\n        cuda:\n{lines}")


FAST = f"{{backend: cutedsl, launcher: '{TRITON_FWD}', layout: {{x: {{alignment: 16}}}}}}"
SLOW = f"{{backend: triton, launcher: '{TRITON_FWD}'}}"


# --- the predicates ---------------------------------------------------------------------------


def test_contiguous_dim_predicate_follows_strides_and_alignment():
    x = torch.zeros(4, 8)  # float32: rows of 32 bytes
    assert layout.tensor_supports_contiguous_dim(x, -1)
    assert layout.tensor_supports_contiguous_dim(x, -1, 16)
    assert not layout.tensor_supports_contiguous_dim(x.t(), -1)  # stride 4 along the last dim
    assert layout.tensor_supports_contiguous_dim(x.t(), 0)
    padded = torch.zeros(4, 10)[:, :8]  # row stride 40 bytes: 8-aligned, not 16
    assert layout.tensor_supports_contiguous_dim(padded, -1, 8)
    assert not layout.tensor_supports_contiguous_dim(padded, -1, 16)
    shifted = torch.zeros(33)[1:].view(4, 8)  # compact, base 4 bytes past an aligned address
    assert shifted.is_contiguous()
    assert layout.tensor_supports_contiguous_dim(shifted, -1)
    assert not layout.tensor_supports_contiguous_dim(shifted, -1, 8)
    assert not layout.tensor_supports_tma(shifted)  # and .contiguous() would not change that
    assert shifted.contiguous().data_ptr() == shifted.data_ptr()
    # A mode of one element has no stride to honour.
    assert layout.tensor_supports_contiguous_dim(torch.zeros(4, 1, 8)[:, :, :8], -1, 16)
    assert not layout.tensor_supports_contiguous_dim(torch.zeros(()), -1)


def test_int64_abi_predicate_and_its_switch():
    small = torch.zeros(4, 8)
    assert not layout.requires_int64_abi(small, None)
    wide = torch.zeros(2, 1).expand(2, 2**30)  # stride 0: a span that fits 32 bits
    assert not layout.requires_int64_abi(wide)
    assert layout.requires_int64_abi(torch.zeros(1).expand(2**31))  # a size that does not
    tall = torch.empty(2, 4, device="meta").as_strided((2, 4), (2**31, 1))  # no storage
    assert layout.requires_int64_abi(tall)
    with layout.force_int64_abi():
        assert layout.requires_int64_abi(small)
        assert layout.signature_of(small) == "general/int64"  # a CPU tensor never takes TMA
    assert not layout.requires_int64_abi(small)
    assert layout.signature_of(small) == "general/int32"


def test_backend_switches_nest_and_restore():
    assert layout.backend_available("triton")
    with layout.backends_disabled("triton"):
        assert not layout.backend_available("triton")
        with layout.backends_disabled("triton", "cutedsl"):
            assert not layout.backend_available("triton")
        assert not layout.backend_available("triton")
    assert layout.backend_available("triton")
    layout.set_backend_enabled("triton", False)
    try:
        assert not layout.backend_available("triton")
    finally:
        layout.set_backend_enabled("triton", True)
    with pytest.raises(TypeError, match="backend must be a str"):
        layout.set_backend_enabled(None, False)


# --- the spec form ----------------------------------------------------------------------------


def test_a_backend_list_generates_one_selecting_cuda_implementation():
    module = generate(_backends(FAST, SLOW), "ops.yaml", "ops.yaml")["demo/l2norm.py"]
    assert module.count("torch.library.define(") == 2  # one fwd/bwd pair, whatever the backends
    assert 'torch.library.impl("demo::l2norm_fwd", "CUDA", _l2norm_fwd_cuda)' in module
    assert 'torch.library.impl("demo::l2norm_fwd", "CPU", _l2norm_fwd_cpu)' in module
    assert "_tensor_supports_contiguous_dim(x, -1, 16)" in module
    assert "_requires_int64_abi" not in module  # int64 defaults to supported
    assert "use_" not in module  # no backend flag reaches the Function


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    return [str(d) for d in info.value.diagnostics]


@pytest.mark.parametrize(
    "entries, where, message",
    [
        (
            (FAST,),
            "- ",
            "forward cuda backends: list at least two (the first whose layout contract holds "
            "runs); for one backend write its 'module:function' alone",
        ),
        (
            (FAST.replace("cutedsl", "cute"), SLOW),
            "cute,",
            "unknown backend 'cute' (did you mean 'cutedsl'?); expected one of: cutedsl, triton",
        ),
        (
            (FAST, SLOW.replace("backend: triton", "backend:  cutedsl")),
            "backend:  cutedsl",
            "forward cuda backends: 'cutedsl' is listed twice",
        ),
        (
            (SLOW, FAST),
            "layout",
            "forward backend 'cutedsl' is the last backend, which runs whenever no earlier one "
            "qualifies: it cannot declare a layout contract",
        ),
        (
            (FAST.replace("x:", "z:"), SLOW),
            "z:",
            "forward backend 'cutedsl': layout names 'z', which is not a Tensor argument of the "
            "schema; expected one of: x",
        ),
        (
            (FAST.replace("16", "24"), SLOW),
            "24",
            "layout of 'x': alignment must be a power of two from 1 to 256 (bytes), got int 24",
        ),
        (
            (FAST.replace("alignment: 16", "max_contiguous: 0"), SLOW),
            "0}",
            "layout of 'x': max_contiguous must be an int from 1 to 2**62 (elements along "
            "contiguous_dim), got int 0",
        ),
        (
            (FAST.replace("alignment: 16", "max_contiguous: 1.5"), SLOW),
            "1.5",
            "layout of 'x': max_contiguous must be an int from 1 to 2**62 (elements along "
            "contiguous_dim), got float 1.5",
        ),
        (
            (FAST.replace("alignment: 16", "contiguous_dim: -2"), SLOW),
            "x:",
            "layout of 'x': contiguous_dim -2 is not a dim of its declared shape [..., D]",
        ),
        (
            (FAST.replace("16}}}", "16}}, int64: 1}"), SLOW),
            "1}",
            "forward backend 'cutedsl': int64 must be true or false, got int 1",
        ),
        (
            (FAST.replace("16}}}", "16}}, signatures: [fast]}"), SLOW),
            "fast]",
            "forward backend 'cutedsl': signature str 'fast' is unknown or repeated; expected "
            "one of: compact, general",
        ),
    ],
)
def test_bad_backend_lists_are_located(entries, where, message):
    text = _backends(*entries)
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if where in line)
    col = text.splitlines()[line_no - 1].index(where) + 1
    assert _errors(text) == [f"ops.yaml:{line_no}:{col}: error: [l2norm] {message}"]


def test_every_bad_backend_is_reported_at_once():
    text = _backends(FAST.replace("cutedsl", "cuda"), SLOW.replace("triton", "trition"))
    assert [e.split("error: ")[1] for e in _errors(text)] == [
        "[l2norm] unknown backend 'cuda'; expected one of: cutedsl, triton",
        "[l2norm] unknown backend 'trition' (did you mean 'triton'?); expected one of: "
        "cutedsl, triton",
    ]


def test_only_cuda_lists_backends():
    text = replace(FWD, f"        cpu:\n          - {FAST}\n          - {SLOW}")
    assert [e.split("error: ")[1] for e in _errors(text)] == [
        "[l2norm] forward cpu launcher: only the cuda launcher may list backends"
    ]


def test_a_traced_integration_cannot_choose_backends():
    gate = "attnops_kernels.gate.triton:gate_fwd"
    entries = (
        f"{{backend: cutedsl, launcher: '{gate}', layout: {{g: {{alignment: 16}}}}}}",
        f"{{backend: triton, launcher: '{gate}'}}",
    )
    old = f"        cpu: {gate}"
    lines = "\n".join(f"          - {e}" for e in entries)
    errors = _errors(replace(old, f"{old}\n        cuda:\n{lines}", GATE))
    assert len(errors) == 1
    assert "integration 'triton_op' cannot choose among CUDA backends" in errors[0]


# --- the generated selection and tests, run on the CPU ----------------------------------------

LAUNCHERS = """\
import importlib


def _lay():
    return importlib.import_module("twobk._layout")


def fast(x, w=None):
    _lay().note_signature("scale_fwd", _lay().signature_of(x, w))
    return x * 2 + (0 if w is None else w)


def slow(x, w=None):
    return x * 2 + (0 if w is None else w)


def ref(x, w=None):
    return x * 2 + (0 if w is None else w)
"""

SPEC = """\
version: 1
namespace: twobk
ops:
  scale:
    doc: Double x, plus w.
    forward:
      schema: "(Tensor x, Tensor? w=None) -> Tensor y"
      launchers:
        cuda:
          - backend: cutedsl
            launcher: "tbk_launch:fast"
            layout:
              x: {alignment: 16, max_contiguous: 8}
              w: {contiguous_dim: 0}
            int64: false
            signatures: [compact, general]
          - {backend: triton, launcher: "tbk_launch:slow"}
        cpu: "tbk_launch:slow"
    inputs:
      x: {shape: [N, D], dtypes: [float32, bfloat16]}
      w: {shape: [D], dtype: x}
    outputs:
      y: {shape: [N, D], dtype: x}
    reference: "tbk_launch:ref"
    tests:
      samples: [{N: 3, D: 8}]
      tolerance: {float32: [1.0e-6, 1.0e-6], bfloat16: [1.0e-2, 1.0e-2]}
"""

# Serves CPU tensors with the CUDA selection shim and counts the backend as installed, so the
# generated backend tests run where there is no GPU.
DRIVER = """\
import importlib, sys, pytest, torch
mod = importlib.import_module("twobk.scale")
torch.library.impl("twobk::scale_fwd", "CPU", mod._scale_fwd_cuda)
importlib.import_module("twobk._layout")._AVAILABLE["cutedsl"] = True
importlib.import_module("twobk._testing_backends").skip_unless_runnable = lambda *a: None
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "out/tests/test_scale.py", "-k", "backend"]))
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("twobk")
    assert generate_project(root, "tbk_launch", LAUNCHERS, SPEC) == 0
    (root / "drive.py").write_text(DRIVER)
    return root


def _drive(root: Path) -> subprocess.CompletedProcess:
    return run_generated(root, "drive.py", cwd=root)


def test_generated_backend_tests_pass_on_the_declared_selection(project):
    result = _drive(project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # 2 dtypes x 9 layouts (compact, int64, disabled, and 3 for each of x and w), 2 backends x
    # 2 dtypes against the reference, and the compiled reuse; nothing skipped
    assert "23 passed" in result.stdout, result.stdout[-2000:]


@pytest.mark.parametrize(
    "old, new, failing",
    [
        # The alignment promise dropped: a misaligned x reaches the fast backend.
        ("_tensor_supports_contiguous_dim(x, -1, 16)", "True", "misaligned-x"),
        # The int64 guard dropped: a forced int64 call reaches a backend without that ABI.
        slow("and not _requires_int64_abi(x, w)", "", "int64"),
        # The switch ignored: a turned-off backend still runs.
        slow('_backend_available("cutedsl")', '_backend_available("anything")', "disabled"),
        # The launchers mixed up: the fast branch runs the fallback's launcher.
        slow('_launcher("tbk_launch:fast")', '_launcher("tbk_launch:slow")', "compact"),
    ],
)
def test_generated_backend_tests_catch_a_broken_selection(project, tmp_path, old, new, failing):
    module = project / "out" / "twobk" / "scale.py"
    text = module.read_text()
    assert old in text
    module.write_text(text.replace(old, new))
    try:
        result = _drive(project)
    finally:
        module.write_text(text)
    assert result.returncode != 0
    assert f"fwd-cutedsl-{failing}-fp32" in result.stdout, result.stdout[-3000:]


def test_selection_runs_the_first_qualifying_backend(project):
    script = """\
import importlib, torch
mod = importlib.import_module("twobk.scale")
lay = importlib.import_module("twobk._layout")
lay._AVAILABLE["cutedsl"] = True
x = torch.ones(4, 8)
def chosen(*args):
    with lay.dispatch_trace() as t:
        mod._scale_fwd_cuda(*args)
    return [e[2] for e in t if e[1] == "backend"][0]
print(chosen(x), chosen(x.t().contiguous().t()), chosen(torch.ones(4, 10)[:, :8]),
      chosen(torch.ones(4, 12)[:, :8]), chosen(x, torch.ones(16)[::2]))
with lay.backends_disabled("cutedsl"):
    print(chosen(x))
lay._AVAILABLE["cutedsl"] = False
print(chosen(x))
"""
    result = run_generated(project, "-c", script, cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "cutedsl",  # compact, 16-byte aligned
        "triton",  # last dim not contiguous
        "triton",  # rows of 40 bytes break the 16-byte promise
        "cutedsl",  # rows of 48 bytes keep it
        "triton",  # w strided along its contiguous dim
        "triton",  # turned off
        "triton",  # not installed
    ]


def test_selection_keeps_rows_over_max_contiguous_off_the_backend(project):
    """``max_contiguous: 8`` on x: rows of 8 run the first backend, rows of 12 or 16 the
    fallback; with the generated size check taken out, they would reach the first backend."""
    script = """\
import importlib, torch
mod = importlib.import_module("twobk.scale")
lay = importlib.import_module("twobk._layout")
lay._AVAILABLE["cutedsl"] = True
def chosen(x):
    with lay.dispatch_trace() as t:
        mod._scale_fwd_cuda(x)
    return [e[2] for e in t if e[1] == "backend"][0]
print(chosen(torch.ones(4, 8)), chosen(torch.ones(3, 12)), chosen(torch.ones(2, 16)))
"""
    module = project / "out" / "twobk" / "scale.py"
    text = module.read_text()
    check = "and x.shape[-1] <= 8"
    assert text.count(check) == 1, text
    result = run_generated(project, "-c", script, cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["cutedsl", "triton", "triton"]
    module.write_text(text.replace(check, ""))
    try:
        broken = run_generated(project, "-c", script, cwd=project)
    finally:
        module.write_text(text)
    assert broken.returncode == 0, broken.stderr
    assert broken.stdout.split() == ["cutedsl", "cutedsl", "cutedsl"]


def test_the_layout_cases_expect_the_fallback_over_max_contiguous():
    """The generated layout tests' expectation reads max_contiguous as the selection does."""
    from codegen.runtime import testing_backends as tb

    b = tb.Backend("cutedsl", "m:f", {"x": (-1, None, 8)})
    assert tb._meets(layout, b, {"x": torch.ones(3, 8)}, False)
    assert not tb._meets(layout, b, {"x": torch.ones(3, 9)}, False)
    assert tb._meets(layout, b, {"x": None}, False)


# --- packaging --------------------------------------------------------------------------------


def test_importing_and_calling_the_package_never_imports_cutlass(tmp_path):
    """A ``cutlass`` that fails on import proves that nothing imports it before a CuTeDSL launch,
    while selection still sees it as installed."""
    fake = tmp_path / "cutlass"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('cutlass was imported')\n")
    script = """\
import torch, attnops, sys
from attnops import _layout
y = attnops.l2norm(torch.randn(3, 8)).y
assert _layout.backend_available("cutedsl")
assert "cutlass" not in sys.modules
print("ok")
"""
    import os

    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env["TRITON_INTERPRET"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"
    assert importlib.util.find_spec("attnops") is not None


# --- the eager fast path -------------------------------------------------------------------


def test_eager_fast_path_is_refused_for_the_eager_integration():
    old = "    integration: triton_op\n"
    text = replace(old, "    integration: eager\n    eager_fast_path: true\n", GATE)
    errors = _errors(text)
    assert len(errors) == 1, errors
    assert "eager_fast_path needs the opaque or triton_op integration, not 'eager'" in errors[0]
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "eager_fast_path" in t)
    assert errors[0].startswith(f"ops.yaml:{line}:22: error: [gate] ")


def test_eager_fast_path_is_accepted_for_a_triton_op():
    old = "    integration: triton_op\n"
    spec = parse(replace(old, old + "    eager_fast_path: true\n", GATE), "ops.yaml")
    assert [op.eager_fast_path for op in spec.ops if op.name == "gate"] == [True]


def test_eager_fast_path_must_be_a_bool():
    old = "    doc: Normalize x.\n"
    errors = _errors(replace(old, old + "    eager_fast_path: fast\n"))
    assert [e.split("error: ")[1] for e in errors] == [
        "[l2norm] eager_fast_path must be true or false, got str 'fast'"
    ]
