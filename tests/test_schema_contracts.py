"""Schemas beyond the shipped ones, end to end: generate, import, call, opcheck.

Each case writes a small spec around a launcher that records what it receives, generates the
layer into a temporary folder and runs a script in a fresh interpreter (the operators register
into torch's global namespace once per process).
"""

from __future__ import annotations

import textwrap

from specs import generate_project, run_generated

LAUNCHERS = """
CALLS = []


def launch(x, *, scale, acc, mf, layout, k, p, s):
    CALLS.append(dict(scale=scale, acc=acc, mf=mf, layout=layout, k=k, p=p, s=s))
    return x * scale


def ref(x, *, scale=1.0, acc=None, mf=None, layout=None, k=None, p=None, s=1):
    return x * scale
"""

SPEC = """\
version: 1
namespace: kwdemo
package: kwdemo
ops:
  scaled:
    doc: Scale x.
    forward:
      schema: '(Tensor x, *, float scale=1.0, ScalarType acc=long, MemoryFormat mf=contiguous_format, Layout layout=strided, int[2] k=[1, 1], int[1]? p=None, Scalar s=1) -> Tensor y'
      launchers: {cpu: kwl:launch}
    inputs:
      x: {shape: [..., D], dtypes: [float32], differentiable: false}
    outputs:
      y: {shape: [..., D], dtype: x}
    reference: kwl:ref
    tests:
      samples: [{batch: [2], D: 3}]
      tolerance: {float32: [0, 0]}
"""

SCRIPT = """
import torch
import kwdemo, kwl

x = torch.randn(2, 3)
kwdemo.scaled(x)
kwdemo.scaled(x, scale=2.0, acc=torch.float32, layout=torch.strided, k=[3, 4], p=[5], s=2.5)
default, given = kwl.CALLS
assert default == dict(
    scale=1.0, acc=torch.int64, mf=torch.contiguous_format, layout=torch.strided,
    k=(1, 1), p=None, s=1,
), default
assert given == dict(
    scale=2.0, acc=torch.float32, mf=torch.contiguous_format, layout=torch.strided,
    k=[3, 4], p=[5], s=2.5,
), given
written = torch._C.parse_schema("kwdemo::scaled_fwd" + SCHEMA)
registered = torch.ops.kwdemo.scaled_fwd.default._schema
assert str(registered) == str(written), (registered, written)
torch.library.opcheck(torch.ops.kwdemo.scaled_fwd.default, (x,), {"scale": 2.0, "acc": torch.float32})
print("ok")
"""


def test_keyword_only_arguments_and_enum_defaults_reach_the_launcher(tmp_path):
    assert generate_project(tmp_path, "kwl", LAUNCHERS, SPEC, "-q") == 0
    schema = SPEC.split("schema: '")[1].split("'\n")[0]
    script = f"SCHEMA = {schema!r}\n" + textwrap.dedent(SCRIPT)
    result = run_generated(tmp_path, "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok"


# The eager fast path's shim picks the implementation by the device of the first tensor
# argument; these schemas start with an optional tensor, or with lists that may be empty or
# hold None. The CUDA launchers refuse to run, so a CPU call that took the CUDA shim fails.
FIRST_LAUNCHERS = """
import torch


def cuda_only(*args):
    raise AssertionError("a CPU call reached the CUDA launcher")


def scale(w, x):
    return (x * 2 if w is None else x * w).contiguous()


def mix(ys, xs, x):
    extra = [t for t in (*ys, *xs) if t is not None]
    return (x + sum(extra, torch.zeros_like(x))).contiguous()
"""

FIRST_SPEC = """\
version: 1
namespace: firstdemo
package: firstdemo
ops:
  scale:
    doc: Scale x by w, or by 2.
    eager_fast_path: true
    forward:
      schema: '(Tensor? w, Tensor x) -> Tensor y'
      launchers: {cuda: firstl:cuda_only, cpu: firstl:scale}
    inputs:
      w: {shape: [D], dtypes: [float32]}
      x: {shape: [D], dtypes: [float32]}
    outputs:
      y: {shape: [D], dtype: x}
    reference: firstl:scale
    tests:
      samples: [{D: 3}]
      tolerance: {float32: [0, 0]}
  mix:
    doc: Add the listed tensors to x.
    eager_fast_path: true
    forward:
      schema: '(Tensor?[] ys, Tensor[] xs, Tensor x) -> Tensor y'
      launchers: {cuda: firstl:cuda_only, cpu: firstl:mix}
    inputs:
      ys: {shape: [D], dtypes: [float32], differentiable: false, list: true}
      xs: {shape: [D], dtypes: [float32], differentiable: false, list: true}
      x: {shape: [D], dtypes: [float32]}
    outputs:
      y: {shape: [D], dtype: x}
    reference: firstl:mix
    tests:
      samples: [{D: 3}]
      tolerance: {float32: [0, 0]}
"""

FIRST_SCRIPT = """
import torch
import firstdemo

x, w = torch.ones(3), torch.full((3,), 3.0)
assert torch.equal(firstdemo.scale(None, x).y, x * 2)
assert torch.equal(firstdemo.scale(w, x).y, x * 3)
for ys, xs in [([], []), ([None], []), ([None, w], [x]), ([], [w])]:
    want = x + sum([t for t in (*ys, *xs) if t is not None], torch.zeros(3))
    assert torch.equal(firstdemo.mix(ys, xs, x).y, want), (ys, xs)
print("ok")
"""


def test_the_fast_path_picks_the_device_of_the_first_tensor_present(tmp_path):
    assert generate_project(tmp_path, "firstl", FIRST_LAUNCHERS, FIRST_SPEC, "-q") == 0
    source = (tmp_path / "out" / "firstdemo" / "scale.py").read_text()
    assert "if _on_cuda(w, x):" in source
    # Note [device guard]: the CUDA implementation finds the first tensor present the same way.
    assert "_device = _other_device(w, x)" in source
    source = (tmp_path / "out" / "firstdemo" / "mix.py").read_text()
    assert "if _on_cuda(ys, xs, x):" in source
    result = run_generated(tmp_path, "-c", FIRST_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok"
