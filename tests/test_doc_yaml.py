"""Every ```yaml block of README.md and docs/spec.md is a spec, or part of one, the generator accepts.

A block is one of three kinds, told apart by its keys:

- a whole spec (it has ``version``): parsed as it is, each ``{...}`` placeholder operator
  replaced by the shipped ``l2norm``;
- an operator (one key whose value has ``forward``): wrapped into a minimal spec and parsed;
- part of an operator (operator keys such as ``inputs`` or ``variants``): merged into a
  known-good operator (each shipped one in turn, and one with index inputs) and accepted when
  one of them parses with it.

Launchers and references are looked up (``check_imports``) wherever they are this repository's.
"""

from __future__ import annotations

import copy
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from codegen.pipeline import parse
from codegen.spec.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/spec.md")
SHIPPED = yaml.safe_load((ROOT / "ops.yaml").read_text())
HEADER = "version: 1\nnamespace: attnops\nops:\n"
PLACEHOLDER = {"...": None}

# An operator with index inputs (none is shipped), for the blocks that add some. Its launchers
# are not in this repository: it is parsed without looking them up.
INDEXED = yaml.safe_load(
    """\
cache_gather:
  doc: The rows of key_cache that slot_mapping picks.
  forward:
    schema: "(Tensor key_cache, Tensor slot_mapping) -> Tensor out"
    launchers: {cpu: "demo:cache_gather_fwd"}
  inputs:
    key_cache: {shape: [S, H, D], dtypes: [bfloat16]}
    slot_mapping: {shape: [N], dtypes: [int64]}
  outputs:
    out: {shape: [N, H, D], dtype: key_cache}
  reference: "demo:cache_gather_ref"
  tests:
    samples: [{S: 16, H: 2, D: 8, N: 5}]
    tolerance: {bfloat16: [0, 0]}
"""
)


def yaml_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the opening fence, body) of each ```yaml fenced block."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```yaml":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            out.append((i + 1, "\n".join(lines[start:j]) + "\n"))
            i = j
        i += 1
    return out


BLOCKS = [
    pytest.param(body, id=f"{name}:{line}")
    for name in DOCS
    for line, body in yaml_blocks((ROOT / name).read_text())
]


def _parse(spec: str, check_imports: bool = True) -> list[str]:
    """The errors of ``spec`` (empty: accepted)."""
    try:
        parse(spec, "ops.yaml", check_imports=check_imports)
    except SpecError as exc:
        return [str(d) for d in exc.diagnostics]
    return []


def _merged(op: dict, part: dict) -> dict:
    op = copy.deepcopy(op)
    for key, value in part.items():
        if key in ("inputs", "outputs", "dims") and isinstance(value, dict):
            op[key] = {**op.get(key, {}), **value}
        else:
            op[key] = value
    return op


def check_block(body: str) -> list[str]:
    """Why the generator refuses ``body`` (empty: it accepts it)."""
    body = textwrap.dedent(body)
    tree = yaml.safe_load(body)
    if not isinstance(tree, dict) or not tree:
        return [f"not a mapping: {body!r}"]
    if "version" in tree:
        ops = {
            name: SHIPPED["ops"]["l2norm"] if op == PLACEHOLDER else op
            for name, op in (tree.get("ops") or {}).items()
        }
        if ops == (tree.get("ops") or {}):
            return _parse(body)
        return _parse(yaml.safe_dump({**tree, "ops": ops}, sort_keys=False))
    if len(tree) == 1 and isinstance(next(iter(tree.values())), dict):
        (op,) = tree.values()
        if "forward" in op:
            return _parse(HEADER + textwrap.indent(body, "  "))
    problems = []
    bases = [(name, op, True) for name, op in SHIPPED["ops"].items()]
    bases += [(name, op, False) for name, op in INDEXED.items()]
    for name, op, check_imports in bases:
        spec = {"version": 1, "namespace": "attnops", "ops": {name: _merged(op, tree)}}
        errors = _parse(yaml.safe_dump(spec, sort_keys=False), check_imports)
        if not errors:
            return []
        problems += [f"in {name}: {e}" for e in errors]
    return problems


def test_the_documents_have_yaml_blocks():
    # The ids of BLOCKS: a document that lost its blocks (or a fence the scan misses) shows here.
    found = {name: len(yaml_blocks((ROOT / name).read_text())) for name in DOCS}
    assert found["README.md"] >= 3 and found["docs/spec.md"] >= 6, found


@pytest.mark.parametrize("body", BLOCKS)
def test_a_documented_yaml_block_is_accepted(body):
    problems = check_block(body)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "body, expected",
    [
        # README's operator before it declared a tolerance for each of its dtypes.
        (
            "l2norm:\n"
            "  forward:\n"
            '    schema: "(Tensor x) -> Tensor y"\n'
            "    launchers: {cpu: attnops_kernels.l2norm.triton:l2norm_fwd}\n"
            "  inputs: {x: {shape: [..., D], dtypes: [bfloat16, float32]}}\n"
            "  outputs: {y: {shape: [..., D], dtype: x}}\n"
            "  reference: attnops_kernels.l2norm.reference:l2norm_ref\n"
            "  tests: {samples: [{batch: [2], D: 8}], tolerance: {float32: [0, 0]}}\n",
            "no tolerance for dtype 'bfloat16'",
        ),
        (
            "inputs:\n  A_log: {shape: [H], dtypes: [float32], absent_gradient: empti}\n",
            "absent_gradient",
        ),
        ("variants:\n  kinds: [softplus]\n", "kinds"),
        ("version: 1\nnamespace: attnops\nops:\n  l2norm: {...}\n  bad: {}\n", "bad"),
    ],
)
def test_a_broken_block_is_refused(body, expected):
    problems = check_block(body)
    assert problems and any(re.search(re.escape(expected), p) for p in problems), problems
