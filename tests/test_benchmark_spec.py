"""The ``benchmark`` key (docs/spec.md, "benchmark"): a bad declaration is refused at its place
with every other problem, and a tiny project's generated benchmark runs on CPU under Triton's
interpreter, printing its table, its declared work and the reason a missing baseline is skipped."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

import pytest

from codegen.cli import main
from tests.specs import BASE, generate_project, run_generated

BENCH = """\
    benchmark:
      shapes:
        - {batch: [3, 5], D: 16}
        - {batch: [2], D: 8}
      bytes: "x + y + 4 * batch"
      backward_bytes: "2 * x + y + 4 * batch"
      flops: "3 * batch * D"
      baselines:
        - {name: missing, function: "nolib.mod:fn"}
        - {name: plain, function: "benchbase:plain_l2norm", adapter: "benchbase:by_position"}
"""

BASELINE = '''\
"""A baseline of the benchmark test: the operator in plain PyTorch, and an adapter."""

import torch


def plain_l2norm(x, eps):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + eps)).to(x.dtype)


def by_position(fn, x, eps):
    return fn(x, eps)
'''


def _errors(tmp_path, capsys, spec: str) -> list[str]:
    (tmp_path / "ops.yaml").write_text(spec)
    out = tmp_path / "out"
    assert main(["regenerate", "--spec", str(tmp_path / "ops.yaml"), "--out", str(out)]) == 2
    assert not out.exists(), "a refused spec wrote files"
    err = capsys.readouterr().err.replace(f"{tmp_path}/", "")
    return [line for line in err.splitlines() if ": error: " in line]


def _generated_benchmark(out, op: str):
    """The benchmark of ``op`` in the output folder ``out``, which the writer's manifest lists."""
    listed = (out / ".codegen-manifest").read_text().splitlines()[1:]
    rel = f"benchmarks/bench_{op}.py"
    assert rel in listed, listed
    return out / rel


def _twice(block_a: str, block_b: str) -> str:
    """BASE's operator twice: 'l2norm' with ``block_a``, 'l2norm_b' with ``block_b``."""
    second = BASE[BASE.index("  l2norm:") :].replace("  l2norm:", "  l2norm_b:", 1)
    return BASE + block_a + second + block_b


def test_bad_benchmarks_are_refused_at_their_place_all_at_once(tmp_path, capsys):
    built = """\
    benchmark:
      shapes:
        - {batch: [2], D: 8}
      backward: 3
      flops: [1]
      baselines:
        - {name: ours, function: "nolib"}
      repeat: 2
"""
    checked = """\
    benchmark:
      shapes:
        - {batch: [2], Q: 8}
      dtypes: [float16]
      bytes: "x + yy"
      flops: "x * D"
      given: [x]
      baselines:
        - {name: a, function: "m:f", adapter: "attnops_kernels.l2norm.reference:nothere"}
"""
    errors = _errors(tmp_path, capsys, _twice(built, checked))
    assert errors == [
        "ops.yaml:28:17: error: [l2norm] benchmark backward must be true or false, got int 3",
        "ops.yaml:29:14: error: [l2norm] benchmark flops must be an integer expression over "
        "dims and tensor names, got a list",
        "ops.yaml:31:18: error: [l2norm] baseline name 'ours' names the operator's own rows",
        "ops.yaml:31:34: error: [l2norm] baseline function 'nolib' must be "
        "'package.module:function'",
        "ops.yaml:32:7: error: [l2norm] unknown key 'repeat' in 'benchmark'; expected one of: "
        "shapes, dtypes, bytes, flops, backward_bytes, backward_flops, given, backward, baselines",
        "ops.yaml:56:11: error: [l2norm_b] shape does not give a size for dim 'D'",
        "ops.yaml:56:11: error: [l2norm_b] shape gives 'Q', which is neither a dim, a scalar "
        "argument nor an input",
        "ops.yaml:57:15: error: [l2norm_b] benchmark dtype 'float16' is not allowed for input "
        "'x' (float32)",
        "ops.yaml:58:14: error: [l2norm_b] benchmark bytes reads 'yy', which is neither a dim "
        "of the shapes nor a tensor (did you mean 'y'?); expected one of: D, batch, x, y",
        "ops.yaml:59:14: error: [l2norm_b] benchmark flops reads 'x', which is not a dim (a "
        "tensor's name counts its bytes: use it in bytes or backward_bytes); expected one of: D, "
        "batch",
        "ops.yaml:60:14: error: [l2norm_b] benchmark given names 'x', which is not an optional "
        "input",
        "ops.yaml:62:47: error: [l2norm_b] baseline adapter: module "
        "'attnops_kernels.l2norm.reference' defines no 'nothere'",
    ]


@pytest.mark.parametrize(
    "block, message",
    [
        (
            '      bytes: "__import__(1)"\n',
            "benchmark bytes: unsupported syntax '__import__(1)'; use dim names, integers, "
            "+ - * // and parentheses",
        ),
        (
            '      flops: "' + "(" * 17 + "D" + ")" * 17 + '"\n',
            "benchmark flops: the expression nests parentheses 17 deep; the limit is 16",
        ),
        ("      given: [x, x]\n", "benchmark given lists 'x' twice"),
        ("      backward: true\n", None),
        (
            '      backward_flops: "D"\n',
            "benchmark backward_flops without flops: a forward + backward's flops are the "
            "forward's plus these",
        ),
        (
            '      backward: false\n      bytes: "x"\n      backward_bytes: "x"\n',
            "benchmark backward_bytes: no backward is timed (backward: false)",
        ),
        (
            "      baselines:\n        - {name: a, function: 'm:f'}\n"
            "        - {name: a, function: 'm:g'}\n",
            "baseline name 'a' is used twice",
        ),
    ],
    ids=[
        "call",
        "depth",
        "given-twice",
        "backward",
        "backward-work-alone",
        "backward-work-untimed",
        "duplicate-baseline",
    ],
)
def test_each_malformed_value_is_refused(tmp_path, capsys, block, message):
    spec = BASE + "    benchmark:\n      shapes:\n        - {batch: [2], D: 8}\n" + block
    if message is None:  # the operator has a backward: accepted
        (tmp_path / "ops.yaml").write_text(spec)
        argv = ["regenerate", "--spec", str(tmp_path / "ops.yaml"), "--out", str(tmp_path / "o")]
        assert main(argv) == 0
        assert _generated_benchmark(tmp_path / "o", "l2norm").is_file()
        return
    errors = _errors(tmp_path, capsys, spec)
    assert len(errors) == 1 and errors[0].endswith(f"error: [l2norm] {message}"), errors


def test_backward_without_one_is_refused(tmp_path, capsys):
    spec = re.sub(r"    backward:\n(      .*\n)+?(?=    inputs:)", "", BASE)
    spec = spec.replace(
        "rstd: {shape: [...], dtype: float32, public: false}",
        "rstd: {shape: [...], dtype: float32}",
    )
    spec = spec.replace("(Tensor y, Tensor rstd)", "(Tensor y, Tensor rstd)")
    spec += "    benchmark:\n      shapes:\n        - {batch: [2], D: 8}\n      backward: true\n"
    spec += '      bytes: "x"\n      backward_bytes: "x"\n'
    errors = _errors(tmp_path, capsys, spec)
    assert errors == [
        "ops.yaml:24:17: error: [l2norm] benchmark backward: the operator has no backward to time",
        "ops.yaml:26:23: error: [l2norm] benchmark backward_bytes: no backward is timed (the "
        "operator has no backward)",
    ]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("benchproject")
    assert generate_project(root, "benchbase", BASELINE, BASE + BENCH, "-q") == 0
    return root


def _table(stdout: str) -> tuple[list[str], list[list[str]]]:
    """The measurements' table (after the tables of --compare, if any)."""
    lines = [
        line for line in stdout[stdout.index("| shape ") :].splitlines() if line.startswith("|")
    ]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return cells[0], cells[2:]


def test_the_generated_benchmark_runs_on_cpu(project, tmp_path):
    bench = _generated_benchmark(project / "out", "l2norm")
    plot = tmp_path / "plot.png"
    result = run_generated(
        project, str(bench), "--smallest", "--calls", "3", "--plot", str(plot), "--compare"
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert out.startswith("# l2norm: CPU (no CUDA); torch ")
    assert (
        "baseline missing: skipped: module 'nolib.mod' is not installed "
        "(No module named 'nolib')" in out
    )
    header, rows = _table(out)
    assert header == [
        "shape",
        "dtype",
        "impl",
        "pass",
        "host us",
        "GPU us",
        "events us",
        "bytes",
        "FLOPs",
        "TB/s",
        "% copy",
        "TFLOP/s",
        "% peak",
        "÷ ours",
        "÷ ours (events)",
        "ratio Δ",
        "max abs diff",
    ]
    row = {(r[2], r[3]): dict(zip(header, r, strict=True)) for r in rows}
    # The smallest shape only, forward then forward + backward; 'missing' skipped.
    assert list(row) == [
        ("ours", "fwd"),
        ("plain", "fwd"),
        ("ours", "fwd+bwd"),
        ("plain", "fwd+bwd"),
    ]
    for key, r in row.items():
        assert (r["shape"], r["dtype"]) == ("batch2-D8", "fp32"), r
        assert float(r["host us"]) > 0, r
        gpu_columns = ("GPU us", "events us", "TB/s", "% copy", "TFLOP/s", "% peak")
        gpu_columns += () if key[0] == "ours" else ("÷ ours (events)", "ratio Δ")
        for column in gpu_columns:
            assert r[column] == "no CUDA", (key, column, r)
    for impl in ("ours", "plain"):
        # x and y: 2 * 8 float32 each, rstd 4 bytes a row; 3 FLOPs an element. The backward
        # adds x, grad_y, grad_x and rstd, and declares no FLOPs.
        assert (row[impl, "fwd"]["bytes"], row[impl, "fwd"]["FLOPs"]) == ("136", "48")
        assert (row[impl, "fwd+bwd"]["bytes"], row[impl, "fwd+bwd"]["FLOPs"]) == ("336", "-")
    for p in ("fwd", "fwd+bwd"):  # outputs, then gradients, against the operator's
        assert float(row["plain", p]["max abs diff"]) < 1e-5, row["plain", p]
        assert float(row["plain", p]["÷ ours"]) > 0, row["plain", p]
        assert row["ours", p]["max abs diff"] == row["ours", p]["÷ ours"] == "-"
        assert row["ours", p]["÷ ours (events)"] == row["ours", p]["ratio Δ"] == "-"
    assert "GPU columns: no CUDA here; host cost only" in out
    assert "disagree by more than 5%" not in out  # no GPU ratios to compare
    # --compare: the anchors and the method of each column, before the measurements.
    anchors = out[out.index("| anchor ") : out.index("| column ")]
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in anchors.splitlines()]
    assert lines[0] == ["anchor", "package", "version", "function"]
    import torch

    assert [line for line in lines[2:] if line != [""]] == [
        ["missing", "nolib", "not installed", "nolib.mod:fn"],
        ["plain", "benchbase", "not installed", "benchbase:plain_l2norm"],
        ["ours", "demo", "not installed", "demo.l2norm"],
        ["torch", "torch", torch.__version__, "-"],
        ["triton", "triton", importlib.metadata.version("triton"), "-"],
        ["device", "CPU (no CUDA)", "-", "-"],
    ]
    methods = out[out.index("| column ") : out.index("| shape ")]
    for column in header[4:]:
        if column not in ("bytes", "FLOPs", "TB/s", "% copy", "TFLOP/s", "% peak"):
            assert f"| {column} " in methods, column
    assert "CUDA events around a loop of --graph-calls eager calls" in methods
    # Two cells a row: no text of a method breaks the table.
    assert all(line.count("|") == 3 for line in methods.strip().splitlines()), methods
    if importlib.util.find_spec("matplotlib") is None:
        assert "plot skipped: matplotlib is not installed" in out
    else:
        assert f"plot: {plot}" in out and plot.stat().st_size > 0


def test_an_unknown_shape_is_refused(project):
    bench = _generated_benchmark(project / "out", "l2norm")
    result = run_generated(project, str(bench), "--shapes", "batch9-D8")
    assert result.returncode == 2
    assert "unknown shape 'batch9-D8'; expected one of: batch3x5-D16, batch2-D8" in result.stderr


def test_the_work_rates_of_a_gpu_time():
    """What a CUDA run prints from a GPU time, with the copy and matmul ceilings stubbed."""
    import argparse

    import torch

    from codegen.runtime import bench

    runner = bench.Runner.__new__(bench.Runner)
    runner.args = argparse.Namespace(peak_tflops=None, verbose=False)
    runner.copy_us = lambda nbytes: nbytes / 4e6  # a copy at 4 TB/s
    runner.peak_tflops = lambda dtype: 800.0
    work = {"bytes": 8_000_000, "flops": 1_000_000_000}
    # 8 MB in 4 us: 2 TB/s, half the copy's rate; 1 GFLOP in 4 us: 250 TFLOP/s of 800.
    assert runner.rates(work, 4.0, torch.bfloat16) == ["2.00", "50%", "250.0", "31%"]
    assert runner.rates({"bytes": None, "flops": None}, 4.0, torch.bfloat16) == ["-"] * 4
    assert runner.rates(work, bench.Cell(bench.NO_CUDA), torch.bfloat16) == ["no CUDA"] * 4
    assert bench._ratio(6.0, 4.0) == "1.5" and bench._ratio(bench.Cell("x"), 4.0) == "-"


def test_the_anchors_name_installed_distributions():
    """A baseline from an installed package is named by its distribution and version."""
    from codegen.runtime import bench

    b = bench.Bench(
        op="l2norm",
        fn=importlib.import_module("attnops").l2norm,
        make_inputs=dict,
        shapes={},
        dtypes={},
        flag=None,
        configs={},
        public_outputs=(),
        differentiable=(),
        backward=False,
        graphable=True,
        work=dict,
        baselines=(bench.Baseline("yaml", "yaml:safe_load"),),
    )
    rows = bench.anchors(b)
    assert rows[0] == ["yaml", "PyYAML", importlib.metadata.version("PyYAML"), "yaml:safe_load"]
    assert rows[1][0] == "ours" and rows[1][3] == "attnops.l2norm"
    assert rows[1][1:3] == ["attnops", importlib.metadata.version("attnops")]


def test_the_two_methods_ratios_and_their_disagreement():
    """Synthetic timings: (theirs, ours) by graph replay, then by CUDA events."""
    from codegen.runtime.bench import Cell, compare_ratios

    # Both say 2x: no mark.
    assert compare_ratios(20.0, 10.0, 22.0, 11.0) == ["2", "2", "0.0%"]
    # 2x by graph replay, 1.9x by events: 5.3% apart, marked.
    assert compare_ratios(20.0, 10.0, 19.0, 10.0) == ["2", "1.9", "5.3% !"]
    # Launch-bound: events see the host's 8 us for both, graph replay 2x; marked.
    assert compare_ratios(4.0, 2.0, 8.0, 8.0) == ["2", "1", "100.0% !"]
    # 4.9% apart: not marked; 5.1% apart: marked.
    assert compare_ratios(10.49, 10.0, 10.0, 10.0) == ["1.05", "1", "4.9%"]
    assert compare_ratios(10.0, 10.0, 10.51, 10.0) == ["1", "1.05", "4.9%"]
    assert compare_ratios(10.51, 10.0, 10.0, 10.0) == ["1.05", "1", "5.1% !"]
    # One method missing (no CUDA, a failed cell): no difference to state.
    assert compare_ratios(6.0, 3.0, Cell("no CUDA"), Cell("no CUDA")) == ["2", "-", "-"]
    assert compare_ratios(Cell("err: x"), 3.0, 6.0, 3.0) == ["-", "2", "-"]


CHUNK_BENCH = """\
    benchmark:
      shapes:
        - {B: 2, T: 9, H: 1, K: 16, V: 16}
        - {B: 1, T: 9, H: 1, K: 16, V: 16, output_final_state: true, cu_seqlens: [0, 4, 9]}
        - {B: 2, T: 9, H: 1, K: 16, V: 16}
      given: [initial_state]
      flops: "B * T * H * K * V"
"""


def test_shapes_set_the_flag_variants_and_given_inputs():
    from codegen.pipeline import generate
    from tests.specs import CHUNK, GATE

    def rendered(spec: str, op: str) -> str:
        return generate(spec, "ops.yaml", "ops.yaml", check_imports=False)[
            f"benchmarks/bench_{op}.py"
        ]

    text = rendered(CHUNK + CHUNK_BENCH, "chunk")
    assert (
        'CONFIGS = {\n    "B2-T9-H1-K16-V16": {"initial_state": True, "output_final_state": False},\n'
        '    "B1-T9-H1-K16-V16-cu_seqlens-output_final_state": {\n'
        '        "initial_state": True,\n        "output_final_state": True,\n    },\n'
        '    "B2-T9-H1-K16-V16-2": {"initial_state": True, "output_final_state": False},\n}'
    ) in text
    assert (
        '"flops": _n["B"] * _n["T"] * _n["H"] * _n["K"] * _n["V"],\n'
        '        "backward_bytes": None,\n        "backward_flops": None,\n'
    ) in text
    gate = GATE.replace(
        "        float32: [1.0e-5, 1.0e-5]\n  step:",
        "        float32: [1.0e-5, 1.0e-5]\n    benchmark:\n      shapes:\n"
        "        - {batch: [2], H: 2, K: 4, kind: lower_bound}\n"
        "        - {batch: [2], H: 2, K: 4}\n  step:",
    )
    text = rendered(gate, "gate")
    assert '"batch2-H2-K4-lower_bound": {"kind": "lower_bound", "A_log": False},' in text
    assert '"batch2-H2-K4": {"kind": "softplus", "A_log": False},' in text


def test_shape_values_the_operator_refuses(tmp_path, capsys):
    from tests.specs import CHUNK, GATE

    chunk = CHUNK + (
        "    benchmark:\n      shapes:\n"
        "        - {B: 2, T: 9, H: 1, K: 16, V: 16, output_final_state: 1}\n"
        "        - {B: 1, T: 9, H: 1, K: 16, V: 16, initial_state: [0, 9]}\n"
        "      given: [cu_seqlens]\n"
    )
    errors = _errors(tmp_path, capsys, chunk)
    assert errors == [
        "ops.yaml:40:11: error: [chunk] shape gives the flag output_final_state 1; it takes "
        "true or false",
        "ops.yaml:41:11: error: [chunk] shape spells out input 'initial_state', which no test "
        "sample spells out; the benchmark draws it like the tests do",
        "ops.yaml:42:14: error: [chunk] benchmark given names 'cu_seqlens', whose values the "
        "test samples spell out; spell them out in a shape instead",
    ]
    gate = GATE.replace(
        "        float32: [1.0e-5, 1.0e-5]\n  step:",
        "        float32: [1.0e-5, 1.0e-5]\n    benchmark:\n      shapes:\n"
        "        - {batch: [2], H: 2, K: 4, kind: relu}\n  step:",
    )
    assert _errors(tmp_path, capsys, gate) == [
        "ops.yaml:26:11: error: [gate] shape gives kind 'relu', which is not one of its variants "
        "('softplus', 'lower_bound')",
    ]


def test_why_a_baseline_is_skipped(tmp_path, monkeypatch):
    from codegen.runtime import bench

    (tmp_path / "needs_missing.py").write_text("import nolib_dependency\n\ndef f(x): return x\n")
    (tmp_path / "present.py").write_text(
        "def f(x):\n    return x\n\n\ndef adapt(fn, x):\n    return fn(x) + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = {
        bench.Baseline("a", "nolib.ops:f"): "module 'nolib.ops' is not installed "
        "(No module named 'nolib')",
        bench.Baseline("b", "needs_missing:f"): "module 'needs_missing' needs "
        "'nolib_dependency', which is not installed (No module named 'nolib_dependency')",
        bench.Baseline("c", "present:g"): "'present:g' failed to load: AttributeError: "
        "module 'present' has no attribute 'g'",
        bench.Baseline("d", "present:f", "present:nothere"): "adapter 'present:nothere' failed "
        "to load: AttributeError: module 'present' has no attribute 'nothere'",
    }
    for baseline, why in cases.items():
        assert bench.load_baseline(baseline) == (None, why)
    fn, why = bench.load_baseline(bench.Baseline("e", "present:f", "present:adapt"))
    assert why == "" and fn(x=3) == 4


def test_an_in_place_update_is_timed_on_copies():
    """An operator that updates its state in place: ours is timed first, many calls, and the
    baseline's first call must still see the values ours saw (forward and forward + backward)."""

    import torch

    from codegen.runtime import bench

    def step(state, x):  # state <- state + x, returns 2 * state (the updated state)
        with torch.no_grad():
            state.add_(x.detach())
        return 2 * (state + x - x.detach())

    gen = torch.Generator().manual_seed(0)
    values = {"state": torch.randn(4, 8, generator=gen), "x": torch.randn(4, 8, generator=gen)}
    b = bench.Bench(
        op="step",
        fn=step,
        make_inputs=lambda shape, dtype: {k: v.clone() for k, v in values.items()},
        shapes={"s": {}},
        dtypes={"float32": torch.float32},
        flag=None,
        configs={"s": {}},
        public_outputs=("out",),
        differentiable=("x",),
        backward=True,
        graphable=True,
        work=lambda names: dict.fromkeys(
            ("bytes", "flops", "backward_bytes", "backward_flops"), None
        ),
    )
    args = bench.parse_args(b, ["--calls", "7"])
    rows = bench.Runner(b, args).measure("s", "float32", {"ours": step, "same": step})
    diffs = {(r[2], r[3]): r[-1] for r in rows}
    assert diffs == {
        ("ours", "fwd"): "-",
        ("same", "fwd"): "0",
        ("ours", "fwd+bwd"): "-",
        ("same", "fwd+bwd"): "0",
    }
