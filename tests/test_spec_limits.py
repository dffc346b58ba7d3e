"""Every limit of a spec (docs/spec.md, "Limits") and every reserved name is a located error.

Hostile sizes are refused before anything recursive reads them: the generator exits 2 with the
limit in the message, never 3 with a RecursionError or MemoryError.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
import sys
import time
from pathlib import Path

import pytest
from specs import BASE, GATE, replace

from codegen.cli import main
from codegen.pipeline import parse
from codegen.spec import build, limits, load, names
from codegen.spec.errors import Errors, SpecError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "spec.md"
Y = "y: {shape: [..., D]"  # the output shape of BASE, line 17; its list starts at column 18
CHECK = '    constraints:\n      - {check: "%s"}\n    reference:'
DIM = '    dims:\n      E: "%s"\n    reference:'
SCHEMA = "(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)"


def _shape(expr: str) -> str:
    return replace(Y, "y: {shape: [..., '" + expr + "']")


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    return [str(d) for d in info.value.diagnostics]


def _many(n: int, item: str) -> str:
    return "[" + ", ".join([item] * n) + "]"


SHAPE = "ops.yaml:17:18: error: [l2norm] shape of output 'y': "
CASES = [
    (
        "2,001 terms in a shape",
        _shape("D+D-" * 1000 + "D"),
        [SHAPE + "the expression is 4001 characters long; the limit is 512 characters"],
    ),
    (
        "3,000 unary minus signs",
        _shape("-" * 3000 + "D"),
        [SHAPE + "the expression is 3001 characters long; the limit is 512 characters"],
    ),
    (
        "too many tokens in a shape",
        _shape("D+" * 70 + "D"),
        [SHAPE + "the expression has 141 names, numbers and operators; the limit is 128"],
    ),
    (
        "parentheses nested too deep",
        _shape("(" * 17 + "D" + ")" * 17),
        [SHAPE + "the expression nests parentheses 17 deep; the limit is 16"],
    ),
    (
        "an integer beyond 64 bits in an expression",
        _shape("D + 9223372036854775808"),
        [SHAPE + "integers must fit in 64 bits (-2**63 to 2**63 - 1), got 9223372036854775808"],
    ),
    (
        "a long derived dim",
        replace("    reference:", DIM % ("D+" * 3000 + "D")),
        [
            "ops.yaml:20:10: error: [l2norm] dim 'E': the expression is 6001 characters long; "
            "the limit is 512 characters"
        ],
    ),
    (
        "a derived dim nested too deep",
        replace("    reference:", DIM % ("x.shape[" * 17 + "0" + "]" * 17)),
        [
            "ops.yaml:20:10: error: [l2norm] dim 'E': the expression nests parentheses 17 deep; the limit is 16"
        ],
    ),
    (
        "a long check",
        replace("    reference:", CHECK % ("D+" * 3000 + "D == 1")),
        [
            "ops.yaml:20:17: error: [l2norm] the expression is 6006 characters long; "
            "the limit is 512 characters"
        ],
    ),
    (
        "a check with too many tokens",
        replace("    reference:", CHECK % ("D*" * 70 + "D == 1")),
        [
            "ops.yaml:20:17: error: [l2norm] the expression has 143 names, numbers and operators; "
            "the limit is 128"
        ],
    ),
    (
        "an integer of 100,000 digits in a shape",
        replace(Y, "y: {shape: [..., " + "9" * 100_000 + "]"),
        [
            "ops.yaml:17:24: error: invalid YAML value: an integer written with 100000 "
            "characters; the limit is 80 (integers must fit in 64 bits)"
        ],
    ),
    (
        "a sample size beyond 64 bits",
        replace("D: 8}", "D: 18446744073709551616}"),
        [
            "ops.yaml:22:27: error: invalid YAML value: integers must fit in 64 bits "
            "(-2**63 to 2**63 - 1), got 18446744073709551616"
        ],
    ),
    (
        "an integer key beyond 64 bits",
        replace("    doc:", "    " + "1" * 81 + ": 1\n    doc:"),
        [
            "ops.yaml:5:5: error: invalid YAML key: an integer written with 81 characters; "
            "the limit is 80 (integers must fit in 64 bits)"
        ],
    ),
    (
        "an infinite tolerance",
        replace("float32: [1.0e-5, 1.0e-5]", "float32: [.inf, 1.0e-5]"),
        [
            "ops.yaml:24:18: error: [l2norm] tolerance for float32 must be [atol, rtol], "
            "two finite non-negative numbers"
        ],
    ),
    (
        "an overflowing tolerance",
        replace("float32: [1.0e-5, 1.0e-5]", "float32: [1.0e-5, 1.0e+999]"),
        [
            "ops.yaml:24:18: error: [l2norm] tolerance for float32 must be [atol, rtol], "
            "two finite non-negative numbers"
        ],
    ),
    (
        "a long schema",
        replace(SCHEMA, "(Tensor x, " + "int a = 1, " * 800 + "float eps=1e-6) -> Tensor y"),
        [
            "ops.yaml:7:15: error: [l2norm] forward schema: the schema is 8838 characters long; the limit is 8192 characters"
        ],
    ),
    (
        "a schema nested 2,000 brackets deep",
        replace(SCHEMA, "(Tensor x) -> " + "(" * 2000 + ")" * 2000),
        [
            "ops.yaml:7:15: error: [l2norm] forward schema: the schema nests brackets 2000 deep; the limit is 8"
        ],
    ),
    (
        "a schema nested too deep",
        replace(SCHEMA, "(Tensor x) -> " + "(" * 9 + "Tensor y" + ")" * 9),
        [
            "ops.yaml:7:15: error: [l2norm] forward schema: the schema nests brackets 9 deep; the limit is 8"
        ],
    ),
    (
        "too many arguments",
        replace(
            SCHEMA,
            "(Tensor x, "
            + ", ".join(f"int a{i}=1" for i in range(256))
            + ") -> (Tensor y, Tensor rstd)",
        ),
        ["ops.yaml:7:15: error: [l2norm] forward schema: 257 arguments; the limit is 256"],
    ),
    (
        "too many returns",
        replace(SCHEMA, "(Tensor x) -> (" + ", ".join(f"Tensor r{i}" for i in range(65)) + ")"),
        ["ops.yaml:7:15: error: [l2norm] forward schema: 65 returns; the limit is 64"],
    ),
    (
        "too many entries in a shape",
        replace(Y, "y: {shape: " + _many(33, "D")),
        [SHAPE + "33 entries in the shape; the limit is 32"],
    ),
    (
        "too many dims",
        replace(
            "    reference:",
            "    dims:\n      "
            + "\n      ".join(f"E{i}: D" for i in range(65))
            + "\n    reference:",
        ),
        ["ops.yaml:20:7: error: [l2norm] 'dims': 65 dims; the limit is 64"],
    ),
    (
        "too many constraints",
        replace(
            "    reference:", "    constraints: " + _many(65, "{check: D > 0}") + "\n    reference:"
        ),
        ["ops.yaml:19:18: error: [l2norm] 'constraints': 65 constraints; the limit is 64"],
    ),
    (
        "too many values of a variant",
        replace("kind: [softplus, lower_bound]", "kind: " + _many(65, "softplus"), GATE),
        ["ops.yaml:12:13: error: [gate] variant 'kind': 65 values; the limit is 64"],
    ),
    (
        "too many samples",
        replace("samples:\n        - {batch: [2], D: 8}", "samples: " + _many(65, "{D: 8}")),
        ["ops.yaml:21:16: error: [l2norm] 'samples': 65 samples; the limit is 64"],
    ),
    (
        "too many values in a sample list",
        replace("{batch: [2], D: 8}", "{batch: [2], D: 8, x: " + _many(4097, "1") + "}"),
        ["ops.yaml:22:33: error: [l2norm] sample value of 'x': 4097 values; the limit is 4096"],
    ),
    (
        "too many batch sizes in a sample",
        replace("{batch: [2], D: 8}", "{batch: " + _many(33, "1") + ", D: 8}"),
        [
            "ops.yaml:22:19: error: [l2norm] 'batch': 33 sizes; the limit is 32 (the dims '...' "
            "stands for)"
        ],
    ),
    (
        "a long operator name",
        replace("  l2norm:", "  l" + "x" * 1000 + ":"),
        [  # the diagnostic names the operator by its first 100 characters
            "ops.yaml:4:3: error: [l"
            + "x" * 99
            + "...] operator name is 1001 characters long; the limit is 100"
        ],
    ),
    (
        "a long namespace",
        replace("namespace: demo", "namespace: n" + "x" * 100),
        ["ops.yaml:2:12: error: namespace is 101 characters long; the limit is 100"],
    ),
    (
        "a long package name",
        replace("namespace: demo", "namespace: demo\npackage: p" + "x" * 100),
        ["ops.yaml:3:10: error: package is 101 characters long; the limit is 100"],
    ),
]

NAMES = [
    (
        "torch's namespace",
        replace("namespace: demo", "namespace: aten"),
        [
            "ops.yaml:2:12: error: namespace 'aten' belongs to PyTorch; choose the name of your library"
        ],
    ),
    (
        "a standard library package",
        replace("namespace: demo", "namespace: demo\npackage: os"),
        ["ops.yaml:3:10: error: package 'os' would shadow the standard library module 'os'"],
    ),
    (
        "a namespace that names the package",
        replace("namespace: demo", "namespace: json"),
        [
            "ops.yaml:2:12: error: namespace 'json' would shadow the standard library module "
            "'json' (the package takes its name unless 'package' is set)"
        ],
    ),
    (
        "a package the generated code imports",
        replace("namespace: demo", "namespace: demo\npackage: triton"),
        [
            "ops.yaml:3:10: error: package 'triton' would shadow the package 'triton', which "
            "the generated code or its tests use"
        ],
    ),
    (
        "an operator named like a generated module",
        replace("  l2norm:", "  _runtime:"),
        [
            "ops.yaml:4:3: error: [_runtime] operator name '_runtime' must not start with '_' "
            "(reserved for generated internals)"
        ],
    ),
    (
        "an operator pytest loads",
        replace("  l2norm:", "  conftest:"),
        [
            "ops.yaml:4:3: error: [conftest] operator name 'conftest' would make the module "
            "'conftest.py', which pytest loads as its configuration"
        ],
    ),
    (
        "an operator pytest collects",
        replace("  l2norm:", "  test_norm:"),
        [
            "ops.yaml:4:3: error: [test_norm] operator name 'test_norm' would make the module "
            "'test_norm.py', which pytest collects as a test file; choose a name that neither "
            "starts with 'test_' nor ends with '_test'"
        ],
    ),
    (
        "an operator pytest collects by its suffix",
        replace("  l2norm:", "  norm_test:"),
        [
            "ops.yaml:4:3: error: [norm_test] operator name 'norm_test' would make the module "
            "'norm_test.py', which pytest collects as a test file; choose a name that neither "
            "starts with 'test_' nor ends with '_test'"
        ],
    ),
]


@pytest.mark.parametrize("text, expected", [pytest.param(t, e, id=i) for i, t, e in CASES + NAMES])
def test_limit_is_a_located_error(text, expected):
    assert _errors(text) == expected


def test_case_ids_are_distinct():
    ids = [i for i, _, _ in CASES + NAMES]
    assert len(ids) == len(set(ids))


def test_values_at_the_limits_are_accepted():
    text = _shape("(" * 16 + "D" + ")" * 16 + "+D" * 46 + "+-D")  # depth 16, 128 tokens
    text = text.replace("y: {shape: [..., '", "y: {shape: [" + "1, " * 30 + "..., '")  # rank 32
    text = text.replace("rstd: {shape: [...]", "rstd: {shape: [..., 9223372036854775807]")
    text = text.replace(
        SCHEMA,
        "(Tensor x, "
        + ", ".join(f"int a{i}=1" for i in range(254))
        + ", float eps=1e-6) -> (Tensor y, Tensor rstd)",
    )
    parse(text, "ops.yaml")


def test_every_problem_is_reported_together():
    text = replace("namespace: demo", "namespace: aten\npackage: sys")
    text = replace("  l2norm:", "  conftest:", text)
    text = replace(Y, "y: {shape: [..., '" + "-" * 3000 + "D']", text)
    text = replace("D: 8}", "D: 18446744073709551616}", text)
    assert _errors(text) == [
        "ops.yaml:2:12: error: namespace 'aten' belongs to PyTorch; choose the name of your library",
        "ops.yaml:3:10: error: package 'sys' would shadow the standard library module 'sys'",
        "ops.yaml:5:3: error: [conftest] operator name 'conftest' would make the module "
        "'conftest.py', which pytest loads as its configuration",
        "ops.yaml:18:18: error: [conftest] shape of output 'y': the expression is 3001 "
        "characters long; the limit is 512 characters",
        "ops.yaml:23:27: error: invalid YAML value: integers must fit in 64 bits "
        "(-2**63 to 2**63 - 1), got 18446744073709551616",
    ]


def test_too_many_operators_is_reported_at_the_first_one_over(monkeypatch):
    monkeypatch.setattr(build, "MAX_OPS", 1)
    # The first operator is still built and checked.
    text = replace("kind: [softplus, lower_bound]", "kind: [softplus, softplus]", GATE)
    assert _errors(text) == [
        "ops.yaml:12:13: error: [gate] variant 'kind' lists a value twice",
        "ops.yaml:24:3: error: the spec declares 2 operators; the limit is 1",
    ]


def test_too_many_values_stops_reading(monkeypatch):
    monkeypatch.setattr(load, "MAX_NODES", 1000)
    text = "a: " + _many(2000, "1") + "\nb: &x 1\n"
    with pytest.raises(SpecError) as info:
        load.load_spec(text, "ops.yaml")
    # The 1,001st value is the 998th item of the list (the mapping, 'a' and the list come
    # first); the anchor after it is not read.
    assert [str(d) for d in info.value.diagnostics] == [
        "ops.yaml:1:2996: error: the spec has more than 1000 values (scalars, lists and "
        "mappings); that is the limit"
    ]


def test_a_spec_over_the_size_limit_is_refused_before_parsing():
    # The text is not YAML after the limit: it is refused for its size, never parsed.
    text = BASE + "#" + "é" * (limits.MAX_SPEC_BYTES // 2) + "\n\t[{"
    errors = Errors()
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load.load_spec(text, "ops.yaml", errors)
    assert time.perf_counter() - start < 1.0
    over = limits.MAX_SPEC_BYTES - len(BASE.encode()) - 1  # bytes of the comment within it
    assert [str(d) for d in info.value.diagnostics] == [
        f"ops.yaml:25:{over // 2 + 2}: error: the spec is {len(text.encode())} bytes long; "
        f"the limit is {limits.MAX_SPEC_BYTES} bytes (the text from here on is over it)"
    ]


def test_deep_yaml_nesting_is_refused():
    text = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(SpecError) as info:
        load.load_spec(text, "ops.yaml")
    (diagnostic,) = info.value.diagnostics
    assert str(diagnostic).startswith("ops.yaml:1:")


def _cli(tmp_path: Path, text: str) -> tuple[int, str]:
    (tmp_path / "ops.yaml").write_text(text)
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(["regenerate", "--check", "--out", str(tmp_path / "out")])
    finally:
        os.chdir(cwd)
    return rc, err.getvalue()


def test_deep_expressions_exit_2_at_the_command_line(tmp_path):
    text = replace("    reference:", DIM % ("-" * 3000 + "D"), _shape("D+D-" * 1000 + "D"))
    rc, err = _cli(tmp_path, text)
    assert rc == 2, err
    assert err.splitlines() == [
        SHAPE + "the expression is 4001 characters long; the limit is 512 characters",
        "ops.yaml:20:10: error: [l2norm] dim 'E': the expression is 3001 characters long; "
        "the limit is 512 characters",
        "2 errors; nothing written",
    ]


def test_the_deepest_expressions_within_the_limits_are_generated(tmp_path):
    # 126 unary minus signs: the deepest tree of 127 tokens, walked by every stage up to the
    # generated files' formatting; and brackets nested as deep as allowed.
    text = _shape("-" * 126 + "D")
    deep = "(" * 16 + "D" + ")" * 16
    text = replace("    reference:", CHECK % (deep + " >= 1"), text)
    rc, err = _cli(tmp_path, text)
    assert rc == 1, err  # generated; --check into an empty folder reports the drift


def test_the_limits_are_the_documented_ones():
    """docs/spec.md lists each limit with its value (underscores and spaces as written there)."""
    section = DOCS.read_text().split("## Limits", 1)[1].split("\n## ", 1)[0]
    documented = {
        name: int(value.replace(",", ""))
        for name, value in re.findall(r"`(MAX_[A-Z_]+)` \| ([0-9,]+)", section)
    }
    constants = {
        name: getattr(module, name)
        for module in (limits, load)
        for name in dir(module)
        if name.startswith("MAX_")
    }
    assert documented == constants


def test_torch_namespaces_are_reserved():
    # After 'import torch' alone (in a fresh process: other tests register their own, and
    # torch's submodules add some as they are imported): every namespace torch registers
    # operators in is refused.
    import subprocess

    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch; print('\\n'.join(torch._C._dispatch_get_all_op_names()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    registered = {n.split("::")[0] for n in listed}
    assert {"aten", "prims", "quantized"} <= registered
    unreserved = {n for n in registered if not n.startswith("_")} - names.TORCH_NAMESPACES
    assert not unreserved
    for name in sorted(names.TORCH_NAMESPACES | {"prim", "torch"}):
        assert names.check_namespace(name) == (
            f"namespace '{name}' belongs to PyTorch; choose the name of your library"
        )
    assert names.check_namespace("attnops") is None


def test_reserved_packages():
    stdlib = set(sys.stdlib_module_names) | {"tomllib", "distutils", "imp", "compression"}
    for name in sorted(n for n in stdlib if not n.startswith("_")):
        assert names.check_package(name) == (
            f"package '{name}' would shadow the standard library module '{name}'"
        ), name
    used = ("torch", "triton", "cutlass", "pytest", "numpy", "yaml", "jinja2", "codegen")
    for name in (*used, "attnops_kernels", "tests", "setuptools"):
        assert names.check_package(name) == (
            f"package '{name}' would shadow the package '{name}', which the generated code or "
            "its tests use"
        ), name
    for name in ("attnops", "demo", "mylib", "flash_ops"):
        assert names.check_package(name) is None


def test_operators_whose_result_types_collide():
    op = BASE.split("ops:\n")[1]
    text = BASE + "".join(
        op.replace("  l2norm:", f"  {n}:") for n in ("l2norm_", "l2__norm", "l2_norm")
    )
    assert _errors(text) == [
        "ops.yaml:25:3: error: [l2norm_] operator 'l2norm_' and operator 'l2norm' would both "
        "export the type 'L2normOutput' from the package; rename one",
        "ops.yaml:67:3: error: [l2_norm] operator 'l2_norm' and operator 'l2__norm' would both "
        "export the type 'L2NormOutput' from the package; rename one",
    ]


@pytest.mark.parametrize("name", ["test", "tests", "testing", "attest", "contest", "latest"])
def test_operator_names_near_pytest_ones_are_accepted(name):
    assert names.check_operator_module(name) is None


def test_many_keys_load_in_linear_time():
    """1e5 keys: the loader and each key's lookup stay linear (a quadratic lookup of key
    locations took minutes). CPU time, with the collector paused as the command line does, so
    that other work on the machine does not count."""
    n = 100_000
    text = "version: 1\nnamespace: demo\nops:\n" + "".join(f"  k{i}: 1\n" for i in range(n))
    gc.disable()
    try:
        start = time.process_time()
        root = load.load_spec(text, "ops.yaml")
        ops = root.value.get("ops").value
        for i, key in enumerate(ops.keys()):
            assert ops.get(key) is not None and ops.key_loc(key).col == 3
            if i % 1000 == 0:  # a quadratic lookup fails here in seconds, not minutes
                assert time.process_time() - start < 4.0, i
        errors = Errors()
        build.build(root, "ops.yaml", errors)
        elapsed = time.process_time() - start
    finally:
        gc.enable()
    assert str(errors.items[0]) == (
        f"ops.yaml:1004:3: error: the spec declares {n} operators; the limit is 1000"
    )
    assert len(errors.items) == 1001  # and one for each operator built
    assert elapsed < 4.0, elapsed  # about 1 s
