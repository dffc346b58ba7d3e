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
