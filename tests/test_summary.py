"""``regenerate --summary``: per operator, what a regenerate changes in schemas, public API and
generated tests, compared with the output folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from specs import BASE, GATE, replace

from codegen import cli
from codegen.review.summary import read_op_module, read_test_module, summarize

GENERATED = Path(__file__).resolve().parent.parent / "generated"


def _regenerate(root: Path, spec: str, *extra: str) -> int:
    (root / "ops.yaml").write_text(spec)
    return cli.main(["regenerate", "--spec", str(root / "ops.yaml"), "-q", *extra])


def _summary(out: str) -> list[str]:
    lines = out.splitlines()
    return lines[lines.index("summary:") + 1 :]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("summary")
    assert _regenerate(root, BASE) == 0
    return root


CHANGED = replace(
    "{batch: [2], D: 8}",
    "{batch: [2], D: 8}\n        - {batch: [3], D: 5}",
    replace("eps=1e-6", "eps=1e-5"),
)


def test_check_summary_lists_schema_signature_and_test_changes(project, capsys):
    capsys.readouterr()
    assert _regenerate(project, CHANGED, "--check", "--summary") == 1
    written = (project / "generated" / "tests" / "test_l2norm.py").read_text()
    n = len(re.findall(r"^def test_", written, re.M))
    assert _summary(capsys.readouterr().out) == [
        "  l2norm: changed",
        "    schema demo::l2norm_fwd",
        "      - (Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)",
        "      + (Tensor x, float eps=1e-5) -> (Tensor y, Tensor rstd)",
        "    public l2norm",
        "      - (x: Tensor, eps: float=1e-06) -> L2normOutput",
        "      + (x: Tensor, eps: float=1e-05) -> L2normOutput",
        f"    tests tests/test_l2norm.py: {n} -> {n} test functions",
        "      SAMPLES:",
        "        + 'batch3-D5'",
        "  OPS.md: changed",  # the reference page shows the new default
        "  demo/_warmup_plan.py: changed",  # the warm-up runs the new sample too
    ]
    # --check wrote nothing: the same summary again, byte for byte
    assert _regenerate(project, CHANGED, "--check", "--summary") == 1
    again = capsys.readouterr().out
    assert _regenerate(project, CHANGED, "--check", "--summary") == 1
    assert capsys.readouterr().out == again


def test_summary_after_writing_and_when_nothing_changes(tmp_path, capsys):
    assert _regenerate(tmp_path, BASE) == 0
    public = replace(
        "rstd: {shape: [...], dtype: float32, public: false}",
        "rstd: {shape: [...], dtype: float32}",
    )
    capsys.readouterr()
    assert _regenerate(tmp_path, public, "--summary") == 0
    summary = _summary(capsys.readouterr().out)
    assert summary[:4] == [
        "  l2norm: changed",
        "    result L2normOutput",
        "      - y: Tensor",
        "      + y: Tensor, rstd: Tensor",
    ]
    assert _regenerate(tmp_path, public, "--summary") == 0
    assert _summary(capsys.readouterr().out) == ["  no generated file changes"]


def test_added_and_removed_operators_and_other_files(tmp_path, capsys):
    assert _regenerate(tmp_path, GATE) == 0
    capsys.readouterr()
    only_gate = GATE[: GATE.index("  step:\n")]
    assert _regenerate(tmp_path, only_gate, "--check", "--summary") == 1
    summary = _summary(capsys.readouterr().out)
    assert "  step: removed" in summary
    assert "  demo/__init__.py: changed" in summary
    assert "    schema demo::step_fwd" in summary
    assert summary.index("  step: removed") < summary.index("  demo/__init__.py: changed")


def test_summarize_reads_each_part_of_an_operator_module():
    old = {
        "pkg/op.py": (
            'torch.library.define("ns::op_fwd", "(Tensor x) -> Tensor y")\n'
            "class OpOutput(NamedTuple):\n    y: Tensor\n"
            "def op(x: Tensor) -> OpOutput: ...\n"
            "def _private(x): ...\n"
            '__all__ = ["OpOutput", "op"]\n'
        ),
        "tests/test_op.py": (
            "SAMPLES = {'a': 1, 'b': 2}\nDTYPES = ('fp32',)\n"
            "def test_one(): ...\ndef test_two(): ...\ndef helper(): ...\n"
        ),
        "pkg/_runtime.py": "x = 1\n",
    }
    new = {
        "pkg/op.py": old["pkg/op.py"].replace("op(x: Tensor)", "op(x: Tensor, n: int = 2)"),
        "tests/test_op.py": (
            "SAMPLES = {'a': 1, 'b': 3, 'c': 4}\nDTYPES = ('fp16', 'fp32')\n"
            "def test_one(): ...\ndef test_three(): ...\n"
        ),
        "pkg/_runtime.py": "x = 1\n",
        "pkg/other.py": '__all__ = ["other"]\ndef other(): ...\n',
    }
    assert summarize(old, new) == [
        "op: changed",
        "  public op",
        "    - (x: Tensor) -> OpOutput",
        "    + (x: Tensor, n: int=2) -> OpOutput",
        "  tests tests/test_op.py: 2 -> 2 test functions",
        "    + test_three",
        "    - test_two",
        "    DTYPES:",
        "      + 'fp16'",
        "    SAMPLES:",
        "      + 'c'",
        "      ~ 'b'",
        "other: added",
        "  public other",
        "    + ()",
    ]
    assert summarize(new, new) == ["no generated file changes"]


def test_the_shipped_modules_show_every_schema_function_and_result():
    """The summary reads what the templates write: a template change that moved a schema or the
    public function out of its reach shows here."""
    modules = sorted((GENERATED / "attnops").glob("[!_]*.py"))
    assert len(modules) == 5
    for path in modules:
        found = read_op_module(path.read_text())
        assert found.schemas and all(name.startswith("attnops::") for name, _ in found.schemas)
        assert [name for name, _ in found.functions] == [path.stem], path
        assert len(found.results) == 1 and found.results[0][1], path
        tests = read_test_module((GENERATED / "tests" / f"test_{path.stem}.py").read_text())
        assert len(tests.tests) >= 5 and "SAMPLES" in [name for name, *_ in tests.tables]
    gate = read_op_module((GENERATED / "attnops" / "gate.py").read_text())
    assert gate.schemas[0][1].startswith("inferred from (g: Tensor, A_log: Tensor | None")
