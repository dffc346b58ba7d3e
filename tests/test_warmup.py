"""``warmup`` (docs/spec.md, "Warm-up"): it calls every operator once per variant value, dtype and
pass, on a tiny generated project and on the shipped package; ``ops=`` and ``dtypes=`` choose,
unknown names are refused with the valid choices, and a second call runs nothing."""

from __future__ import annotations

import json
import time

import pytest
import torch

from tests.specs import BASE, generate_project, run_generated

# BASE's l2norm (Triton launchers, a backward) with 'scale': a variant, an optional input and
# plain-PyTorch launchers (LAUNCHERS) that count their calls.
SPEC = (
    BASE
    + """\
  scale:
    doc: Scale x.
    forward:
      schema: '(Tensor x, Tensor? bias=None, str mode="double") -> Tensor out'
      launchers:
        cpu: warmupbase:scale_fwd
    variants:
      mode: [double, half]
    inputs:
      x: {shape: [..., D], dtypes: [float32, bfloat16]}
      bias: {shape: [D], dtypes: [float32]}
    outputs:
      out: {shape: [..., D], dtype: x}
    reference: warmupbase:scale_ref
    tests:
      samples:
        - {batch: [2], D: 4}
        - {batch: [3], D: 8}
      tolerance:
        float32: [1.0e-5, 1.0e-5]
        bfloat16: [1.0e-2, 1.0e-2]
  cudaonly:
    doc: Scale x on CUDA only.
    forward:
      schema: "(Tensor x) -> Tensor out"
      launchers:
        cuda: warmupbase:cuda_fwd
    inputs:
      x: {shape: [..., D], dtypes: [float32]}
    outputs:
      out: {shape: [..., D], dtype: x}
    reference: warmupbase:cuda_ref
    tests:
      samples:
        - {batch: [2], D: 4}
      tolerance:
        float32: [1.0e-5, 1.0e-5]
"""
)
LAUNCHERS = """\
import torch

CALLS = []


def scale_fwd(x, bias, mode):
    CALLS.append((tuple(x.shape), str(x.dtype), bias is not None, mode))
    out = x * (2.0 if mode == "double" else 0.5)
    return out if bias is None else out + bias.to(x.dtype)


def cuda_fwd(x):
    return x * 2


def cuda_ref(x):
    return x.float() * 2


def scale_ref(x, bias=None, mode="double"):
    out = x.float() * (2.0 if mode == "double" else 0.5)
    return out if bias is None else out + bias.float()
"""

SCRIPT = """\
import json, os, sys, time
os.environ["TRITON_INTERPRET"] = "1"
import demo
from warmupbase import CALLS as calls

def rows(entries):
    return [[e.op, e.variant, e.dtype, e.pass_, e.calls, e.cached] for e in entries]

out = {"chosen": rows(demo.warmup(ops=["scale"], dtypes=[__import__("torch").bfloat16]))}
out["chosen_calls"] = list(calls)
del calls[:]
out["first"] = rows(demo.warmup(dtypes=None))
out["first_calls"] = list(calls)
start = time.perf_counter()
out["second"] = rows(demo.warmup())
out["second_s"] = time.perf_counter() - start
out["second_calls"] = len(calls) - len(out["first_calls"])
del calls[:]
own = {"scale": [{"batch": [5], "D": 16}]}
out["own"] = rows(demo.warmup(ops="scale", dtypes="float32", samples=own))
out["own_calls"] = list(calls)
out["own_again"] = rows(demo.warmup(ops="scale", dtypes="float32", samples=own))
errors = []
for kw in ({"ops": ["scale", "nothere"]}, {"ops": ["cudaonly"]}, {"dtypes": ["float16"]}, {"ops": "l2norm", "dtypes": "bf16"},
           {"samples": {"scale": [{"batch": [5]}]}}, {"samples": {"scale": [{"D": 4, "T": 3}]}},
           {"samples": {"nothere": []}}):
    try:
        demo.warmup(**kw)
    except ValueError as exc:
        errors.append(str(exc))
out["errors"] = errors
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("warmupproject")
    assert generate_project(root, "warmupbase", LAUNCHERS, SPEC, "-q") == 0
    return root


def test_warmup_of_a_tiny_project(project, tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    result = run_generated(project, str(script))
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    # ops= and dtypes= first: scale's two modes in bfloat16, each on both samples with bias
    # given and left out.
    assert out["chosen"] == [
        ["scale", "mode=double", "bfloat16", "fwd", 4, False],
        ["scale", "mode=half", "bfloat16", "fwd", 4, False],
    ]
    calls = [[2, 4], [2, 4], [3, 8], [3, 8]]
    assert out["chosen_calls"] == [
        [shape, "torch.bfloat16", bias, mode]
        for mode in ("double", "half")
        for shape, bias in zip(calls, [True, False] * 2, strict=True)
    ]
    # Then all: one entry per (operator, variant value, dtype, pass), operators in name order,
    # a backward pass for l2norm only (the operator with a backward stage); the bfloat16 entries
    # of scale were done above and run nothing; cudaonly has no CPU launcher and is left out.
    assert out["first"] == [
        ["l2norm", "default", "float32", "fwd", 1, False],
        ["l2norm", "default", "float32", "fwd+bwd", 1, False],
        ["scale", "mode=double", "float32", "fwd", 4, False],
        ["scale", "mode=double", "bfloat16", "fwd", 0, True],
        ["scale", "mode=half", "float32", "fwd", 4, False],
        ["scale", "mode=half", "bfloat16", "fwd", 0, True],
    ]
    assert [c[1:] for c in out["first_calls"]] == [
        ["torch.float32", bias, mode] for mode in ("double", "half") for bias in [True, False] * 2
    ]
    # The second call runs nothing and takes next to no time.
    assert out["second"] == [[*r[:4], 0, True] for r in out["first"]]
    assert out["second_calls"] == 0
    assert out["second_s"] < 0.01, out["second_s"]
    # Samples of one's own: the spec's sample format, cached apart from the spec's samples.
    assert out["own"] == [
        ["scale", "mode=double", "float32", "fwd", 2, False],
        ["scale", "mode=half", "float32", "fwd", 2, False],
    ]
    assert [c[:3] for c in out["own_calls"]] == [[[5, 16], "torch.float32", b] for b in [1, 0] * 2]
    assert out["own_again"] == [[*r[:4], 0, True] for r in out["own"]]
    assert out["errors"] == [
        "warmup: unknown operator 'nothere'; expected one of: cudaonly, l2norm, scale",
        "warmup: operator 'cudaonly' has no launcher for device 'cpu'; it has: cuda",
        "warmup: dtype 'float16' is not a dtype of the operators warmed up; expected one of: "
        "bfloat16, float32",
        "warmup: dtype 'bf16' is not a dtype of the operators warmed up; expected one of: float32",
        "warmup: sample {'batch': [5]} of 'scale' lacks 'D'; a sample gives: D, batch",
        "warmup: sample {'D': 4, 'T': 3} of 'scale' lacks 'batch'; gives unknown 'T'; a sample "
        "gives: D, batch",
        "warmup: samples name unknown operator 'nothere'; expected one of: cudaonly, l2norm, scale",
    ]


@pytest.mark.parametrize("name", ["warmup", "WarmupEntry"])
def test_an_operator_cannot_take_the_names_of_warmup(tmp_path, capsys, name):
    from codegen.cli import main

    (tmp_path / "ops.yaml").write_text(BASE.replace("  l2norm:", f"  {name}:"))
    out = tmp_path / "out"
    assert main(["regenerate", "--spec", str(tmp_path / "ops.yaml"), "--out", str(out)]) == 2
    assert not out.exists()
    assert f"'{name}' is reserved by the generated code" in capsys.readouterr().err


def test_warmup_of_the_shipped_package():
    """Every shipped operator, forward only, in float32 (bool: the mask of
    block_mask_worklist) to stay cheap under the interpreter; then a second call."""
    import attnops

    entries = attnops.warmup(dtypes=["float32", torch.bool], backward=False)
    got = [(e.op, e.variant, e.dtype, e.pass_, e.cached) for e in entries]
    assert got == [
        ("block_mask_worklist", "default", "bool", "fwd", False),
        ("chunk_gla", "save_states=False", "float32", "fwd", False),
        ("chunk_gla", "save_states=True", "float32", "fwd", False),
        ("gate", "kind=softplus", "float32", "fwd", False),
        ("gate", "kind=lower_bound", "float32", "fwd", False),
        ("l2norm", "default", "float32", "fwd", False),
        ("recurrent_gla_step", "default", "float32", "fwd", False),
    ]
    assert all(e.calls > 0 and e.seconds > 0 for e in entries), entries
    start = time.perf_counter()
    again = attnops.warmup(dtypes=["float32", torch.bool], backward=False)
    elapsed = time.perf_counter() - start
    assert [(e.op, e.variant, e.dtype, e.pass_) for e in again] == [g[:4] for g in got]
    assert all(e.cached and e.calls == 0 and e.seconds == 0 for e in again), again
    assert elapsed < 0.01, elapsed
    with pytest.raises(ValueError, match=r"unknown operator 'l2_norm'; expected one of: "):
        attnops.warmup(ops="l2_norm")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiles only happen on a GPU")
def test_after_warmup_the_tested_calls_compile_nothing():
    """On a GPU: after ``warmup``, each generated test's own inputs (every sample, dtype and
    configuration, built by the test module) compile no Triton kernel, forward or backward."""
    import importlib.util
    from pathlib import Path

    import attnops
    from attnops import _warmup

    attnops.warmup()
    folder = Path(__file__).resolve().parent.parent / "generated" / "tests"
    for plan in _warmup._plans("attnops"):
        path = folder / f"test_{plan.op}.py"
        spec = importlib.util.spec_from_file_location(f"_warmed_{plan.op}", path)
        tests = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tests)
        fn = getattr(attnops, plan.public)
        for sample in tests.SAMPLES:
            for dtype in tests.DTYPES:
                for config in tests.CONFIGS:
                    inputs = tests.make_inputs(sample, dtype, config)
                    flag = tests.FLAG
                    extra = {flag: tests.CONFIGS[config][flag]} if flag else {}
                    leaves = []
                    for name in tests.DIFFERENTIABLE if plan.backward else ():
                        x = inputs.get(name)
                        if isinstance(x, torch.Tensor) and x.is_floating_point():
                            inputs[name] = x.detach().requires_grad_(True)
                            leaves.append(inputs[name])
                    with _warmup.triton_compiles() as compiled:
                        out = fn(**inputs, **extra)
                        outs = [
                            t for t in out or () if isinstance(t, torch.Tensor) and t.requires_grad
                        ]
                        if leaves and outs:
                            grads = [torch.ones_like(t) for t in outs]
                            torch.autograd.grad(outs, leaves, grads, allow_unused=True)
                        torch.cuda.synchronize()
                    assert compiled == [], (plan.op, sample, dtype, config, compiled)
