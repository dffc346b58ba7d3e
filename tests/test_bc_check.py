"""``python -m codegen bc-check``: every class of change, located, with its exit status."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from specs import BASE, GATE, replace

from codegen import cli

L2_SCHEMA = '"(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)"'
L2_BWD = '"(Tensor grad_y, Tensor x, Tensor rstd) -> Tensor grad_x"'


def _check(tmp_path: Path, old: str, new: str, capsys) -> tuple[int, list[str], str]:
    (tmp_path / "old.yaml").write_text(old)
    (tmp_path / "ops.yaml").write_text(new)
    status = cli.main(
        ["bc-check", "--base", str(tmp_path / "old.yaml"), "--spec", str(tmp_path / "ops.yaml")]
    )
    out = capsys.readouterr()
    return status, out.out.splitlines(), out.err


def _where(text: str, needle: str, path: Path) -> str:
    """``path:LINE:COL`` of the first occurrence of ``needle`` in ``text``."""
    at = text.index(needle)
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    return f"{path}:{line}:{col}"


def _schema(new_schema: str, text: str = BASE) -> str:
    return replace(L2_SCHEMA, new_schema, text)


def test_no_change_prints_nothing_and_exits_0(tmp_path, capsys):
    status, lines, err = _check(tmp_path, BASE, BASE, capsys)
    assert (status, lines) == (0, [])
    assert "0 breaking, 0 compatible, 0 internal" in err


def test_changed_default_is_breaking_at_the_argument(tmp_path, capsys):
    new = _schema('"(Tensor x, float eps=1e-5) -> (Tensor y, Tensor rstd)"')
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    where = _where(new, "eps=1e-5", tmp_path / "ops.yaml")
    assert status == 1
    assert lines == [f"{where}: breaking: [l2norm] default of 'eps' changed from 1e-06 to 1e-05"]


def test_removed_default_is_breaking(tmp_path, capsys):
    new = _schema('"(Tensor x, float eps) -> (Tensor y, Tensor rstd)"')
    new = replace("{batch: [2], D: 8}", "{batch: [2], D: 8, eps: 1.0e-6}", new)
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    assert status == 1
    assert lines[0].endswith("breaking: [l2norm] default of 'eps' removed (was 1e-06)")


def test_equal_default_written_differently_is_no_change(tmp_path, capsys):
    new = _schema('"(Tensor x, float eps=0.000001) -> (Tensor y, Tensor rstd)"')
    assert _check(tmp_path, BASE, new, capsys)[:2] == (0, [])


def test_removed_argument_is_breaking_and_names_its_old_place(tmp_path, capsys):
    new = _schema('"(Tensor x) -> (Tensor y, Tensor rstd)"')
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    old_at = _where(BASE, "eps=1e-6", tmp_path / "old.yaml")
    new_at = _where(new, '"(Tensor x)', tmp_path / "ops.yaml")
    assert status == 1
    assert lines == [
        f"{new_at}: breaking: [l2norm] argument 'eps' removed (was 'float eps=1e-06' at {old_at})"
    ]


@pytest.mark.parametrize(
    "schema, severity, message",
    [
        (
            '"(Tensor x, int n, float eps=1e-6) -> (Tensor y, Tensor rstd)"',
            "breaking",
            "argument 'n' added without a default",
        ),
        (
            '"(Tensor x, float eps=1e-6, int n=2) -> (Tensor y, Tensor rstd)"',
            "note",
            "argument 'n' added with default 2",
        ),
        (
            '"(Tensor x, float eps=1e-6, *, int n=2) -> (Tensor y, Tensor rstd)"',
            "note",
            "argument 'n' added with default 2",
        ),
        (
            '"(Tensor x, float eps=1e-6, *, int n) -> (Tensor y, Tensor rstd)"',
            "breaking",
            "argument 'n' added without a default",
        ),
    ],
    ids=["positional-no-default", "positional-default", "kwonly-default", "kwonly-no-default"],
)
def test_added_argument(tmp_path, capsys, schema, severity, message):
    new = replace("{batch: [2], D: 8}", "{batch: [2], D: 8, n: 2}", _schema(schema))
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    assert status == (1 if severity == "breaking" else 0)
    where = _where(new, " n", tmp_path / "ops.yaml").rsplit(":", 2)[0]
    # (a positional one without a default comes before those with one: they move, too)
    assert lines[0].startswith(where), lines
    assert lines[0].endswith(f"{severity}: [l2norm] {message}")


def test_reordered_positional_arguments_are_breaking(tmp_path, capsys):
    old = _schema('"(Tensor x, float eps=1e-6, float scale=1.0) -> (Tensor y, Tensor rstd)"')
    new = _schema('"(Tensor x, float scale=1.0, float eps=1e-6) -> (Tensor y, Tensor rstd)"')
    status, lines, _ = _check(tmp_path, old, new, capsys)
    assert status == 1
    assert [line.split(": ", 1)[1] for line in lines] == [
        "breaking: [l2norm] positional argument 'scale' moved from position 2 to 1",
        "breaking: [l2norm] positional argument 'eps' moved from position 1 to 2",
    ]


def test_positional_argument_made_keyword_only_is_breaking(tmp_path, capsys):
    new = _schema('"(Tensor x, *, float eps=1e-6) -> (Tensor y, Tensor rstd)"')
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    assert status == 1
    assert lines[0].endswith("argument 'eps' became keyword-only (callers pass it by position)")
    # and the way back is compatible
    status, lines, _ = _check(tmp_path, new, BASE, capsys)
    assert status == 0
    assert lines[0].endswith("note: [l2norm] argument 'eps' may now be passed by position")


def test_keyword_only_reorder_is_breaking_by_torchs_check(tmp_path, capsys):
    """Python callers pass keyword-only arguments by name, so the rules see no break; torch's
    schema check refuses the reorder (the registered schema's order is its ABI) and wins."""
    old = _schema('"(Tensor x, *, float eps=1e-6, float s=1.0) -> (Tensor y, Tensor rstd)"')
    new = _schema('"(Tensor x, *, float s=1.0, float eps=1e-6) -> (Tensor y, Tensor rstd)"')
    status, lines, _ = _check(tmp_path, old, new, capsys)
    assert status == 1
    assert len(lines) == 1
    assert "breaking: [l2norm] torch finds 'demo::l2norm_fwd' not backward compatible" in lines[0]


@pytest.mark.parametrize(
    "old_type, new_type, severity",
    [("float", "int", "breaking"), ("int", "SymInt", "note"), ("int", "int?", "note")],
)
def test_retyped_argument(tmp_path, capsys, old_type, new_type, severity):
    old = _schema(f'"(Tensor x, {old_type} n=1) -> (Tensor y, Tensor rstd)"')
    new = _schema(f'"(Tensor x, {new_type} n=1) -> (Tensor y, Tensor rstd)"')
    status, lines, _ = _check(tmp_path, old, new, capsys)
    assert status == (1 if severity == "breaking" else 0)
    verb = "changed" if severity == "breaking" else "widened"
    assert lines[0].endswith(
        f"{severity}: [l2norm] type of 'n' {verb} from {old_type} to {new_type}"
    )


def test_return_arity_name_and_type_are_breaking(tmp_path, capsys):
    fewer = _schema('"(Tensor x, float eps=1e-6) -> Tensor y"')
    fewer = replace("      rstd: {shape: [...], dtype: float32, public: false}\n", "", fewer)
    fewer = replace(L2_BWD, '"(Tensor grad_y, Tensor x) -> Tensor grad_x"', fewer)
    status, lines, _ = _check(tmp_path, BASE, fewer, capsys)
    assert status == 1
    assert any(
        "breaking: [l2norm] return arity changed from 2 to 1: (Tensor y, Tensor rstd) became "
        "(Tensor y)" in line
        for line in lines
    ), lines
    renamed = _schema('"(Tensor x, float eps=1e-6) -> (Tensor y, Tensor inv)"')
    renamed = replace("rstd: {shape", "inv: {shape", renamed)
    renamed = replace(L2_BWD, '"(Tensor grad_y, Tensor x, Tensor inv) -> Tensor grad_x"', renamed)
    status, lines, _ = _check(tmp_path, BASE, renamed, capsys)
    assert status == 1
    assert any("return 1 renamed from 'rstd' to 'inv'" in line for line in lines), lines


PUBLIC_RSTD = replace(
    "rstd: {shape: [...], dtype: float32, public: false}", "rstd: {shape: [...], dtype: float32}"
)


def test_public_output_added_removed_or_renamed_is_breaking(tmp_path, capsys):
    status, lines, _ = _check(tmp_path, BASE, PUBLIC_RSTD, capsys)
    where = _where(PUBLIC_RSTD, "rstd: {shape", tmp_path / "ops.yaml")
    assert status == 1
    assert lines == [
        f"{where}: breaking: [l2norm] public output 'rstd' added: the result has one more "
        "field, which breaks callers that unpack it"
    ]
    status, lines, _ = _check(tmp_path, PUBLIC_RSTD, BASE, capsys)
    assert status == 1
    assert lines == [f"{where}: breaking: [l2norm] public output 'rstd' removed (no longer public)"]
    renamed = replace('Tensor y, Tensor rstd)"', 'Tensor y, Tensor inv)"', PUBLIC_RSTD)
    renamed = replace("rstd: {shape", "inv: {shape", renamed)
    renamed = replace(L2_BWD, '"(Tensor grad_y, Tensor x, Tensor inv) -> Tensor grad_x"', renamed)
    status, lines, _ = _check(tmp_path, PUBLIC_RSTD, renamed, capsys)
    assert status == 1
    messages = [line.split(": ", 1)[1] for line in lines]
    assert "breaking: [l2norm] public output 'rstd' removed" in messages
    assert any(m.startswith("breaking: [l2norm] public output 'inv' added") for m in messages)
    assert "breaking: [l2norm] return 1 renamed from 'rstd' to 'inv'" in messages


def test_output_dtype_and_shape_of_a_public_output_are_breaking(tmp_path, capsys):
    new = replace("y: {shape: [..., D], dtype: x}", "y: {shape: [..., D], dtype: float32}")
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    assert status == 1
    assert lines[0].endswith(
        "breaking: [l2norm] dtype of output 'y' changed from the dtype of 'x' to float32"
    )
    new = replace("rstd: {shape: [...], dtype: float32", "rstd: {shape: [...], dtype: x")
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    assert status == 0
    assert lines[0].endswith(
        "info: [l2norm] dtype of non-public output 'rstd' changed from float32 to the dtype of 'x'"
    )


WIDE = replace(
    "float32: [1.0e-5, 1.0e-5]",
    "float32: [1.0e-5, 1.0e-5]\n        bfloat16: [1.6e-2, 1.6e-2]",
    replace("dtypes: [float32]}", "dtypes: [float32, bfloat16]}"),
)


def test_narrowed_dtypes_are_breaking_widened_compatible(tmp_path, capsys):
    status, lines, _ = _check(tmp_path, WIDE, BASE, capsys)
    where = _where(BASE, "x: {shape", tmp_path / "ops.yaml")
    assert status == 1
    assert lines == [
        f"{where}: breaking: [l2norm] dtypes of 'x' narrowed: bfloat16 no longer accepted"
    ]
    status, lines, _ = _check(tmp_path, BASE, WIDE, capsys)
    assert status == 0
    assert lines[0].endswith("note: [l2norm] dtypes of 'x' widened: bfloat16 accepted")


def _shaped(x: str, y: str, rstd: str, sample: str) -> str:
    text = replace("x: {shape: [..., D]", f"x: {{shape: {x}")
    text = replace("y: {shape: [..., D]", f"y: {{shape: {y}", text)
    text = replace("rstd: {shape: [...]", f"rstd: {{shape: {rstd}", text)
    return replace("{batch: [2], D: 8}", sample, text)


SHAPES = {
    "[..., D]": _shaped("[..., D]", "[..., D]", "[...]", "{batch: [2], D: 8}"),
    "[..., E]": _shaped("[..., E]", "[..., E]", "[...]", "{batch: [2], E: 8}"),
    "[B, D]": _shaped("[B, D]", "[B, D]", "[B]", "{B: 2, D: 8}"),
    "[B, C, D]": _shaped("[B, C, D]", "[B, C, D]", "[B, C]", "{B: 2, C: 3, D: 8}"),
    "[..., 4, D]": _shaped("[..., 4, D]", "[..., 4, D]", "[...]", "{batch: [2], D: 8}"),
    "[..., F, D]": _shaped("[..., F, D]", "[..., F, D]", "[...]", "{batch: [2], F: 4, D: 8}"),
    "[..., D, D]": _shaped("[..., D, D]", "[..., D, D]", "[...]", "{batch: [2], D: 8}"),
}


@pytest.mark.parametrize(
    "old_shape, new_shape, verdict",
    [
        ("[..., D]", "[..., E]", None),  # every D renamed E: the same contract
        ("[..., D]", "[B, D]", "narrowed"),  # any rank >= 1 became exactly 2
        ("[B, D]", "[..., D]", "widened"),
        ("[B, D]", "[B, C, D]", "narrowed"),  # rank 2 became rank 3
        ("[..., 4, D]", "[..., F, D]", "widened"),  # a literal size became a free one
        ("[..., F, D]", "[..., 4, D]", "narrowed"),
        ("[..., F, D]", "[..., D, D]", "narrowed"),  # a new equality between dims
    ],
)
def test_shape_contract(tmp_path, capsys, old_shape, new_shape, verdict):
    status, lines, err = _check(tmp_path, SHAPES[old_shape], SHAPES[new_shape], capsys)
    assert status in (0, 1), err
    shape_lines = [line for line in lines if "shape of input 'x'" in line]
    if verdict is None:
        assert (status, lines) == (0, [])
        return
    assert len(shape_lines) == 1, lines
    severity = "breaking" if verdict == "narrowed" else "note"
    assert shape_lines[0].endswith(
        f"{severity}: [l2norm] shape of input 'x' {verdict} from {old_shape} to {new_shape}"
    )
    if verdict == "narrowed":
        assert status == 1


def test_mutation_added_or_removed_is_breaking(tmp_path, capsys):
    old = replace(
        '"(Tensor(a!) state, Tensor q) -> Tensor output"',
        '"(Tensor state, Tensor q) -> Tensor output"',
        GATE,
    )
    old = replace("dtypes: [float32], mutated: true}", "dtypes: [float32]}", old)
    status, lines, _ = _check(tmp_path, old, GATE, capsys)
    assert status == 1
    where = _where(GATE, "state,", tmp_path / "ops.yaml")
    assert f"{where}: breaking: [step] argument 'state' is now mutated in place" in lines
    status, lines, _ = _check(tmp_path, GATE, old, capsys)
    assert any("argument 'state' is no longer mutated in place" in line for line in lines)
    assert status == 1


def test_variants_narrowed_are_breaking_widened_compatible(tmp_path, capsys):
    narrow = replace("kind: [softplus, lower_bound]", "kind: [softplus]", GATE)
    status, lines, _ = _check(tmp_path, GATE, narrow, capsys)
    where = _where(narrow, "kind: [softplus]", tmp_path / "ops.yaml")
    assert status == 1
    assert lines == [
        f"{where}: breaking: [gate] variants of 'kind' narrowed: 'lower_bound' no longer accepted"
    ]
    status, lines, _ = _check(tmp_path, narrow, GATE, capsys)
    assert status == 0
    assert lines[0].endswith("note: [gate] variants of 'kind' widened: 'lower_bound' accepted")


def test_integration_and_launchers_are_info(tmp_path, capsys):
    new = replace("    integration: triton_op\n", "", GATE)
    status, lines, _ = _check(tmp_path, GATE, new, capsys)
    assert status == 0
    # An opaque operator's fake also serves meta tensors.
    assert [line.split(": ", 1)[1] for line in lines] == [
        "note: [gate] now runs on meta",
        "info: [gate] integration changed from triton_op to opaque",
    ]
    new = replace(
        "cpu: attnops_kernels.l2norm.triton:l2norm_fwd",
        "cpu: attnops_kernels.l2norm.triton:l2norm_fwd\n        cuda: attnops_kernels.l2norm.triton:l2norm_fwd",
    )
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    assert status == 0
    assert [line.split(": ", 1)[1] for line in lines] == [
        "note: [l2norm] now runs on cuda",
        "info: [l2norm] forward launchers or backends changed",
    ]


def test_removed_operator_points_into_the_base(tmp_path, capsys):
    without = GATE[: GATE.index("  step:\n")]
    status, lines, _ = _check(tmp_path, GATE, without, capsys)
    where = _where(GATE, "step:", tmp_path / "old.yaml")
    assert status == 1
    assert lines == [f"{where}: breaking: [step] operator removed"]
    status, lines, _ = _check(tmp_path, without, GATE, capsys)
    assert status == 0
    assert lines == [f"{_where(GATE, 'step:', tmp_path / 'ops.yaml')}: note: [step] operator added"]


def test_an_invalid_base_or_spec_exits_2(tmp_path, capsys):
    broken = replace("dtypes: [float32]}", "dtypes: [float31]}")
    status, lines, err = _check(tmp_path, broken, BASE, capsys)
    assert (status, lines) == (2, [])
    assert f"{tmp_path / 'old.yaml'}:" in err and "unknown dtype 'float31'" in err
    assert f"the base spec {tmp_path / 'old.yaml'} is invalid" in err
    status, lines, err = _check(tmp_path, BASE, broken, capsys)
    assert (status, lines) == (2, [])
    assert f"{tmp_path / 'ops.yaml'} is invalid" in err


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_revision_as_base(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "specs").mkdir(parents=True)
    spec = repo / "specs" / "ops.yaml"
    _git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-qm", "first")
    spec.write_text(BASE)
    _git(repo, "add", "specs/ops.yaml")
    _git(repo, "commit", "-qm", "spec")
    new = _schema('"(Tensor x, float eps=1e-5) -> (Tensor y, Tensor rstd)"')
    spec.write_text(new)
    monkeypatch.chdir(repo / "specs")

    assert cli.main(["bc-check", "--base", "HEAD", "--spec", "ops.yaml"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{_where(new, 'eps=1e-5', Path('ops.yaml'))}: breaking: [l2norm] default of 'eps' "
        "changed from 1e-06 to 1e-05"
    ]
    # A removed operator points into the revision, at the spec's path in the repository.
    spec.write_text(BASE.replace("  l2norm:", "  norm2:"))
    assert cli.main(["bc-check", "--base", "HEAD", "--spec", "ops.yaml"]) == 1
    out = capsys.readouterr().out
    assert (
        f"{_where(BASE, 'l2norm:', Path('HEAD:specs/ops.yaml'))}: breaking: [l2norm] operator removed"
        in out
    )
    # The first commit has no spec: every operator is new.
    assert cli.main(["bc-check", "--base", "HEAD~1", "--spec", "ops.yaml"]) == 0
    captured = capsys.readouterr()
    assert "note: HEAD~1:specs/ops.yaml does not exist: every operator is new" in captured.err
    assert captured.out.endswith("note: [norm2] operator added\n")
    assert cli.main(["bc-check", "--base", "no-such-ref", "--spec", "ops.yaml"]) == 2
    assert (
        "error: 'no-such-ref' is neither a file nor a git revision of this repository"
        in capsys.readouterr().err
    )


def test_a_revision_outside_a_repository_exits_2(tmp_path, capsys, monkeypatch):
    (tmp_path / "ops.yaml").write_text(BASE)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bc-check", "--base", "HEAD", "--spec", "ops.yaml"]) == 2
    err = capsys.readouterr().err
    assert "error: 'HEAD' is not a file, and . is not inside a git repository" in err


def test_constraint_added_is_breaking_removed_compatible(tmp_path, capsys):
    new = replace(
        "    reference:",
        '    constraints:\n      - {check: "D <= 64", message: "D up to 64"}\n    reference:',
    )
    status, lines, _ = _check(tmp_path, BASE, new, capsys)
    where = _where(new, '{check: "D <= 64"', tmp_path / "ops.yaml")
    assert status == 1
    assert lines == [
        f"{where}: breaking: [l2norm] constraint added: D <= 64 (refuses calls it accepted)"
    ]
    status, lines, _ = _check(tmp_path, new, BASE, capsys)
    assert status == 0
    assert lines[0].endswith("note: [l2norm] constraint removed: D <= 64")


def test_a_device_without_a_launcher_any_more_is_breaking(tmp_path, capsys):
    both = replace(
        "cpu: attnops_kernels.l2norm.triton:l2norm_fwd",
        "cpu: attnops_kernels.l2norm.triton:l2norm_fwd\n        cuda: attnops_kernels.l2norm.triton:l2norm_fwd",
    )
    status, lines, _ = _check(tmp_path, both, BASE, capsys)
    assert status == 1
    assert lines[0].endswith("breaking: [l2norm] no longer runs on cuda (no cuda launcher)")


# (old arguments, new arguments) of the l2norm forward schema: every argument change torch's own
# check classifies, with the values samples must give for arguments without a default.
TORCH_CASES = [
    ("Tensor x, float eps=1e-6", "Tensor x, float eps=1e-5"),
    ("Tensor x, float eps=1e-6", "Tensor x, float eps"),
    ("Tensor x, float eps", "Tensor x, float eps=1e-6"),
    ("Tensor x, float eps=1e-6", "Tensor x, float eps=1e-6, int n=2"),
    ("Tensor x, float eps=1e-6", "Tensor x, int n, float eps=1e-6"),
    ("Tensor x, float eps=1e-6", "Tensor x, float eps=1e-6, *, int n=2"),
    ("Tensor x, float eps=1e-6", "Tensor x, float eps=1e-6, *, int n"),
    ("Tensor x, float eps=1e-6", "Tensor x"),
    ("Tensor x, float a=1.0, float b=2.0", "Tensor x, float b=2.0, float a=1.0"),
    ("Tensor x, float a=1.0, float b=2.0", "Tensor x, float a=1.0, float c=2.0"),
    ("Tensor x, float eps=1e-6", "Tensor x, int eps=1"),
    ("Tensor x, int n=1", "Tensor x, SymInt n=1"),
    ("Tensor x, int n=1", "Tensor x, int? n=1"),
    ("Tensor x, float eps=1e-6", "Tensor x, *, float eps=1e-6"),
    ("Tensor x, *, float eps=1e-6", "Tensor x, float eps=1e-6"),
    ("Tensor x, *, float a=1.0, float b=2.0", "Tensor x, *, float b=2.0, float a=1.0"),
]


def _args_spec(args: str) -> str:
    text = _schema(f'"({args}) -> (Tensor y, Tensor rstd)"')
    values = "".join(
        f", {a.split()[-1]}: 2" for a in args.split(", ")[1:] if "=" not in a and a != "*"
    )
    return replace("{batch: [2], D: 8}", "{batch: [2], D: 8" + values + "}", text)


@pytest.mark.parametrize("old, new", TORCH_CASES, ids=[f"{o} -> {n}" for o, n in TORCH_CASES])
def test_the_rules_agree_with_torch_on_every_argument_change(tmp_path, capsys, old, new):
    import torch

    def parse(args):
        return torch._C.parse_schema(f"demo::l2norm_fwd({args}) -> (Tensor y, Tensor rstd)")

    torch_ok = parse(new).is_backward_compatible_with(parse(old))
    status, lines, err = _check(tmp_path, _args_spec(old), _args_spec(new), capsys)
    assert status in (0, 1), err
    ours = [line for line in lines if ": breaking: " in line and "torch finds" not in line]
    kw_reorder = old.startswith("Tensor x, *, float a")
    if kw_reorder:  # the one change the rules leave to torch (docs/review.md)
        assert (ours, torch_ok, status) == ([], False, 1)
    else:
        assert bool(ours) == (not torch_ok), lines
        assert not [line for line in lines if "torch finds" in line]


def test_review_reads_only_the_spec_and_resolve_stages():
    import ast

    from test_architecture import CODEGEN, _imported_stages

    for path in sorted((CODEGEN / "review").glob("*.py")):
        found = _imported_stages(path, ast.parse(path.read_text())) - {"review"}
        assert found <= {"spec", "resolve"}, (path.name, found)


def test_a_retyped_return_and_an_output_that_may_be_none_are_breaking(tmp_path, capsys):
    old = replace(
        '"(Tensor(a!) state, Tensor q) -> Tensor output"',
        '"(Tensor(a!) state, Tensor q, bool give=True) -> Tensor output"',
        GATE,
    )
    new = replace('-> Tensor output"', '-> Tensor? output"', old)
    new = replace(
        "output: {shape: [B, nnz], dtype: q}",
        "output: {shape: [B, nnz], dtype: q, when: give}",
        new,
    )
    status, lines, _ = _check(tmp_path, old, new, capsys)
    assert status == 1
    assert [line.split(": ", 1)[1] for line in lines] == [
        "breaking: [step] return 0 'output' retyped from Tensor to Tensor?",
        "breaking: [step] output 'output' may now be None (given only when 'give')",
    ]
    status, lines, _ = _check(tmp_path, new, old, capsys)
    assert "note: [step] output 'output' is always given" in [
        line.split(": ", 1)[1] for line in lines
    ]


def test_a_new_bool_variant_and_a_saved_output_it_sizes_are_not_breaking(tmp_path, capsys):
    # chunk_gla's save_states: an argument added with its variant, and the saved output it
    # sizes through a dim that tests it. Neither is API: no call passed the argument, and a
    # non-public output reaches no caller.
    from specs import CHUNK

    old = CHUNK.replace(
        "Tensor? cu_seqlens=None) -> Tensor output",
        "Tensor? cu_seqlens=None) -> (Tensor output, Tensor kept)",
    ).replace(
        "Tensor? cu_seqlens=None) -> (Tensor output, Tensor final_state)",
        "Tensor? cu_seqlens=None) -> (Tensor output, Tensor kept, Tensor final_state)",
    )
    old = replace("Tensor? grad_final_state)", "Tensor? grad_final_state, Tensor kept)", old)
    old = replace(
        "      output: {shape: [B, T, H, V], dtype: q}\n",
        "      output: {shape: [B, T, H, V], dtype: q}\n"
        "      kept: {shape: [B, H], dtype: float32, public: false}\n",
        old,
    )
    new = old.replace(
        "Tensor? cu_seqlens=None) ->", "Tensor? cu_seqlens=None, *, bool keep=False) ->"
    )
    new = replace(
        "grad_final_state, Tensor kept)", "grad_final_state, Tensor kept, *, bool keep)", new
    )
    new = replace(
        "    dims:\n",
        '    variants:\n      keep: [false, true]\n    dims:\n      NK: "B if keep else 0"\n',
        new,
    )
    new = replace("kept: {shape: [B, H]", "kept: {shape: [NK, H]", new)
    status, lines, _ = _check(tmp_path, old, new, capsys)
    assert status == 0, lines
    assert not any(": breaking:" in line for line in lines), lines
    where = _where(new, "keep: [false, true]", tmp_path / "ops.yaml")
    assert f"{where}: info: [chunk] 'keep' takes False, True (a variant)" in lines
    # Restricted to one value where callers passed it before, it is breaking.
    before = new.replace("    variants:\n      keep: [false, true]\n", "")
    narrow = new.replace("      keep: [false, true]\n", "      keep: [false]\n")
    status, lines, _ = _check(tmp_path, before, narrow, capsys)
    assert status == 1
    assert any(
        line.endswith("breaking: [chunk] 'keep' is now restricted to False") for line in lines
    )
