"""Scalar arguments end to end: the public function checks each one by its schema type (and the
arity flag as a bool) before anything launches, and hands the launcher what the dispatcher would
(Note [scalar types] in codegen/runtime/runtime.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from specs import generate_project, run_generated

from codegen.runtime.runtime import scalar_device, scalar_error, scalar_list
from codegen.views.op.checks import scalar_check

LAUNCHERS = """
import torch

CALLS = []


def every_fwd(x, i, si, f, b, s, sc, il, i2, fl, bl, sl, oi, dt, lay, mf, dev, gen, with_copy):
    CALLS.append(dict(i=i, f=f, sc=sc, il=il, i2=i2, fl=fl, sl=sl, dev=dev, with_copy=with_copy))
    y = (x * f).contiguous()
    return y, (y.clone() if with_copy else None)


def every_ref(x, f, with_copy=False, **_):
    y = x * f
    return y, (y.clone() if with_copy else None)
"""

ARGS = (
    "Tensor x, int i, SymInt si, float f, bool b, str s, Scalar sc, int[] il, int[2] i2, "
    "float[] fl, bool[] bl, SymInt[]? sl=None, int? oi=None, ScalarType dt=float, "
    'Layout lay=strided, MemoryFormat mf=contiguous_format, Device dev="cpu", Generator? gen=None'
)

SPEC = f"""\
version: 1
namespace: scalardemo
package: scalardemo
ops:
  every:
    doc: Scale x by f; one argument of each scalar schema type, all passed to the launcher.
    eager_fast_path: true
    forward:
      schema: '({ARGS}) -> Tensor y'
      launchers: {{cpu: scalarl:every_fwd}}
      arity_pair:
        flag: with_copy
        schema: '({ARGS}) -> (Tensor y, Tensor y_copy)'
    inputs:
      x: {{shape: [B, D], dtypes: [float32]}}
    outputs:
      y: {{shape: [B, D], dtype: x}}
      y_copy: {{shape: [B, D], dtype: x}}
    reference: scalarl:every_ref
    tests:
      samples:
        - {{B: 2, D: 3, i: 2, si: 3, f: 0.5, b: true, s: v, sc: 1.5, il: [1, 2], i2: [3, 4],
            fl: [0.5], bl: [true, false]}}
      tolerance: {{float32: [0, 0]}}
"""

SCRIPT = r"""
import numpy as np
import pytest, torch
import scalardemo, scalarl
from scalardemo._runtime import set_eager_fast_path

x = torch.randn(2, 3)
good = dict(i=2, si=3, f=0.5, b=True, s="v", sc=1.5, il=[1, 2], i2=[3, 4], fl=[0.5], bl=[True])
bad = {
    "every: i must be int, got bool True": dict(i=True),
    "every: f must be float, got bool False": dict(f=False),
    "every: f must be float, got complex 1j": dict(f=1j),
    "every: f must be float, got Tensor of shape () (pass a Python number, e.g. .item())": dict(
        f=torch.tensor(0.5)
    ),
    "every: i must be int, got numpy.int64 3 (convert NumPy scalars with .item())": dict(
        i=np.int64(3)
    ),
    "every: b must be bool, got int 1": dict(b=1),
    "every: b must be bool, got NoneType None": dict(b=None),
    "every: b must be bool, got numpy.bool True (convert NumPy scalars with .item())": dict(
        b=np.bool_(True)
    ),
    "every: sc must be a real number (bool, int or float), got complex (1+2j)": dict(sc=1 + 2j),
    "every: dt must be torch.dtype, got int 6": dict(dt=6),
    "every: lay must be torch.layout, got int 0": dict(lay=0),
    "every: dev must be torch.device or a device string, got int 0": dict(dev=0),
    "every: dev must name a device ('cpu', 'cuda', 'cuda:1', ...), got 'gpu0'": dict(dev="gpu0"),
    "every: gen must be torch.Generator, got int 0": dict(gen=0),
    "every: il must be int[], a list of int, got int 1": dict(il=1),
    "every: il[1] must be int, got float 2.0": dict(il=[1, 2.0]),
    "every: i2 must have 2 elements (int[2]), got 3": dict(i2=[1, 2, 3]),
    "every: i2 must be int[2], a list of 2 int, got bool True": dict(i2=True),
    "every: bl[0] must be bool, got int 1": dict(bl=[1]),
    "every: fl[0] must be float, got bool True": dict(fl=(True,)),
    "every: sl[0] must be int, got str 'a'": dict(sl=["a"]),
    "every: oi must be int, got float 1.5": dict(oi=1.5),
    "every: with_copy must be bool, got str 'yes'": dict(with_copy="yes"),
}
for fast in (True, False):
    set_eager_fast_path(fast)
    for message, change in bad.items():
        scalarl.CALLS.clear()
        with pytest.raises((TypeError, ValueError)) as info:
            scalardemo.every(x, **{**good, **change})
        assert str(info.value) == message, (str(info.value), message)
        assert not scalarl.CALLS, message  # refused before the launcher ran

    # What the launcher receives, on the fast path and through the dispatcher alike.
    scalarl.CALLS.clear()
    out = scalardemo.every(
        x, **{**good, "il": (1, 2), "i2": 5, "fl": (1, 2.5), "sl": (3,), "dev": "cpu"},
        with_copy=True,
    )
    got = scalarl.CALLS[-1]
    assert got["il"] == [1, 2] and type(got["il"]) is list, got
    assert got["i2"] == [5, 5] and got["fl"] == [1.0, 2.5] and got["sl"] == [3], got
    assert got["dev"] == torch.device("cpu"), got
    assert got["with_copy"] is True and out.y_copy is not None
    # Accepted as the dispatcher accepts them: an int for a float, a float subclass, a bool Scalar.
    scalardemo.every(x, **{**good, "f": 2, "sc": True})
    scalardemo.every(x, **{**good, "f": np.float64(0.25)})
    torch.testing.assert_close(scalarl.CALLS[-1]["f"], 0.25)
print("ok")
"""


def test_scalar_arguments_are_checked_by_type_and_pass_their_generated_tests(tmp_path: Path):
    assert generate_project(tmp_path, "scalarl", LAUNCHERS, SPEC, "-q") == 0
    result = run_generated(tmp_path, "-c", SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")
    # The generated suite breaks every scalar with a value of a wrong type, the flag included.
    tests = run_generated(
        tmp_path, "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests", cwd=tmp_path / "out"
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout
    for case in (
        "i-type-bool",
        "sc-type-complex",
        "with_copy-type-str",
        "i2-length",
        "dev-type-str",
    ):
        assert f"test_rejects_invalid_arguments[{case}] PASSED" in tests.stdout, case


@pytest.mark.parametrize(
    "schema_type, test",
    [
        ("int", "not isinstance(a, (int, torch.SymInt)) or isinstance(a, bool)"),
        (
            "float?",
            "a is not None and (not isinstance(a, (float, int, torch.SymFloat, "
            "torch.SymInt)) or isinstance(a, bool))",
        ),
        ("bool", "not isinstance(a, (bool, torch.SymBool))"),
        ("ScalarType?", "a is not None and not isinstance(a, torch.dtype)"),
    ],
)
def test_scalar_checks_refuse_bool_where_an_int_is_meant(schema_type, test):
    assert scalar_check("a", schema_type).test == test


def test_list_and_device_checks_convert_through_the_runtime():
    check = scalar_check("a", "SymInt[3]?")
    assert (check.convert, check.size, check.broadcast, check.optional) == (
        "scalar_list",
        3,
        True,
        True,
    )
    assert not scalar_check("a", "bool[3]").broadcast  # one bool is not a mask
    assert scalar_check("a", "float?[]").none_elements
    assert scalar_check("a", "Device?").convert == "scalar_device"


INTS = (int, torch.SymInt)


def test_scalar_list_checks_each_element_and_returns_a_new_list():
    value = (1, 2)
    assert scalar_list("op", "a", value, INTS, "int", "int[]", None) == [1, 2]
    assert scalar_list("op", "a", [1, None], INTS, "int", "int?[]", None, none_elements=True) == [
        1,
        None,
    ]
    with pytest.raises(TypeError, match=r"^op: a\[1\] must be int, got NoneType None$"):
        scalar_list("op", "a", [1, None], INTS, "int", "int[]", None)
    assert scalar_list("op", "a", 4, INTS, "int", "int[2]", 2, broadcast=True) == [4, 4]
    with pytest.raises(TypeError, match=r"^op: a must be int\[2\], a list of 2 int, got int 4$"):
        scalar_list("op", "a", 4, INTS, "int", "int[2]", 2)
    with pytest.raises(ValueError, match=r"^op: a must have 2 elements \(int\[2\]\), got 1$"):
        scalar_list("op", "a", [4], INTS, "int", "int[2]", 2, broadcast=True)
    bools = (bool, torch.SymBool)
    assert scalar_list("op", "a", [True], bools, "bool", "bool[]", None) == [True]


def test_scalar_device_converts_strings_and_refuses_ints():
    assert scalar_device("op", "d", "cpu") == torch.device("cpu")
    device = torch.device("meta")
    assert scalar_device("op", "d", device) is device
    with pytest.raises(TypeError, match=r"^op: d must be torch.device or a device string, got"):
        scalar_device("op", "d", 0)
    with pytest.raises(ValueError, match=r"^op: d must name a device"):
        scalar_device("op", "d", "nowhere")


def test_scalar_error_shortens_long_values():
    message = str(scalar_error("op", "s", "int", "x" * 200))
    assert message.startswith("op: s must be int, got str 'xxx") and message.endswith("...")
    assert len(message) < 100
