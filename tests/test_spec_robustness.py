"""Any wrongly typed value anywhere in the shipped spec is a located error, never a traceback."""

from __future__ import annotations

import contextlib
import copy
import io
import os
import random
import re
import time
from pathlib import Path

import pytest
import yaml
from specs import BASE, replace

from codegen.cli import main
from codegen.pipeline import generate
from codegen.spec.errors import SpecError

SPEC = Path(__file__).resolve().parent.parent / "ops.yaml"
# One of each kind: null, a (negative) number, a string, a list, a mapping.
WRONG = (None, -1, "x y", ["a"], {"k": 1})
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _replaced(tree, path, value):
    tree = copy.deepcopy(tree)
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return tree


def _mutants(shard: int):
    """The spec with one value replaced by one of WRONG, in len(WRONG) shards: each shard puts
    one wrong value at every path, each value in turn (the default run takes shard 0, --full
    every shard)."""
    tree = yaml.safe_load(SPEC.read_text())
    for n, path in enumerate(p for p in _paths(tree) if p):
        for k, value in enumerate(WRONG):
            if (n + k) % len(WRONG) == shard:
                yield path, yaml.dump(_replaced(tree, path, value), Dumper=_Dumper, sort_keys=False)


SHARDS = [
    pytest.param(k, id=f"shard{k}", marks=[pytest.mark.slow] if k else [])
    for k in range(len(WRONG))
]


@pytest.mark.parametrize("shard", SHARDS)
def test_every_wrong_value_is_a_spec_error_or_accepted(shard):
    crashes = []
    count = 0
    for path, text in _mutants(shard):
        count += 1
        try:
            generate(text, "ops.yaml", "ops.yaml")
        except SpecError as exc:
            for d in exc.diagnostics:
                assert str(d).startswith("ops.yaml:"), str(d)
        except Exception as exc:  # noqa: BLE001 - the point is to find any other exception
            crashes.append(f"{'/'.join(map(str, path))}: {type(exc).__name__}: {exc}")
    assert count > 1500 // len(WRONG)
    assert not crashes, "\n".join(crashes[:20])


@pytest.mark.parametrize("text", ["[", "ops: [", "a: b: c", "\t- x", "version: 1\nops: 3"])
def test_malformed_documents_are_spec_errors(text):
    with pytest.raises(SpecError):
        generate(text, "ops.yaml", "ops.yaml")


# --- YAML features the spec refuses, and text it cannot be ------------------------------------


def _laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


ALIAS = "YAML anchors and aliases are not supported"
YAML_CASES = {
    "billion laughs": (_laughs(), "ops.yaml:1:4: error: " + ALIAS),
    "recursive alias": ("a: &a [*a]\n", "ops.yaml:1:4: error: " + ALIAS),
    "alias of a mapping": (
        replace("    doc: Normalize x.", "    doc: &d Normalize x.\n    dims: *d"),
        "ops.yaml:5:10: error: " + ALIAS,
    ),
    "merge key": (
        replace("    doc: Normalize x.", "    <<: {doc: Normalize x.}"),
        "ops.yaml:5:5: error: YAML merge keys ('<<') are not supported",
    ),
    "custom scalar tag": (
        replace("doc: Normalize x.", "doc: !foo Normalize x."),
        "ops.yaml:5:10: error: invalid YAML value: could not determine a constructor for the tag '!foo'",
    ),
    "custom mapping tag": (
        replace("x: {shape", "x: !shape {shape"),
        "ops.yaml:15:10: error: unsupported YAML tag '!shape'",
    ),
    "python tag": (
        replace("doc: Normalize x.", "doc: !!python/name:os.system ''"),
        "ops.yaml:5:10: error: invalid YAML value",
    ),
    "timestamp tag on text": (
        replace("doc: Normalize x.", "doc: !!timestamp Normalize x."),
        "ops.yaml:5:10: error: invalid YAML value 'Normalize x.'",
    ),
    "bool tag on text": (
        replace("doc: Normalize x.", "doc: !!bool Normalize x."),
        "ops.yaml:5:10: error: invalid YAML value 'Normalize x.' for tag 'tag:yaml.org,2002:bool'",
    ),
    "int tag on an empty string": (
        replace("doc: Normalize x.", "doc: !!int ''"),
        "ops.yaml:5:10: error: invalid YAML value '' for tag 'tag:yaml.org,2002:int'",
    ),
    "schema torch's parser fails on": (
        replace("eps=1e-6", "eps=1e999"),
        "error: [l2norm] forward schema: invalid schema: torch's parser failed",
    ),
    "date": (
        replace("doc: Normalize x.", "doc: 2024-01-01"),
        "ops.yaml:5:10: error: unsupported YAML value '2024-01-01' (date); quote it",
    ),
    "binary": (
        replace("doc: Normalize x.", "doc: !!binary aGVsbG8="),
        "ops.yaml:5:10: error: unsupported YAML value",
    ),
    "tab indentation": (
        replace("    doc:", "\tdoc:"),
        "ops.yaml:5:1: error: invalid YAML: found character that cannot start any token",
    ),
    "non-ASCII key": (
        replace("    doc:", "    dóc:"),
        "ops.yaml:5:5: error: [l2norm] unknown key 'dóc'",
    ),
    "non-ASCII operator": (
        replace("  l2norm:", "  l2nörm:"),
        "ops.yaml:4:3: error: [l2nörm] operator name 'l2nörm' is not a valid Python identifier",
    ),
    "non-ASCII argument": (
        replace("float eps=1e-6) -> (Tensor y", "float é=1e-6) -> (Tensor y"),
        "ops.yaml:7:33: error: [l2norm] forward schema: schemas must be ASCII text; found 'é'",
    ),
    "non-ASCII default": (
        replace('"(Tensor x, float eps=1e-6)', '\'(Tensor x, str eps="é")').replace(
            'rstd)"', "rstd)'", 1
        ),
        "ops.yaml:7:36: error: [l2norm] forward schema: schemas must be ASCII text",
    ),
    "NUL byte": ("version: 1\x00\n", "ops.yaml:1:11: error: invalid YAML: character '\\x00'"),
    "empty": ("", "ops.yaml:1:1: error: the spec is empty"),
    "only a comment": ("# nothing here\n", "ops.yaml:1:1: error: the spec is empty"),
    "deep nesting": ("a: " + "[" * 3000 + "]" * 3000 + "\n", "ops.yaml:1:"),
    "two documents": ("a: 1\n---\nb: 2\n", "ops.yaml:2:1: error: invalid YAML"),
    "literal division by zero in a shape": (
        replace("y: {shape: [..., D]", "y: {shape: [..., D // 0]"),
        "ops.yaml:17:18: error: [l2norm] shape of output 'y': division by zero in 'D // 0'",
    ),
    "folded division by zero": (
        replace("y: {shape: [..., D]", "y: {shape: [..., D // (2 - 2)]"),
        "division by zero in 'D // (2 - 2)'",
    ),
    "division by zero in a check": (
        replace(
            "    reference:", '    constraints:\n      - {check: "D // 0 == 1"}\n    reference:'
        ),
        "ops.yaml:20:17: error: [l2norm] division by zero in 'D // 0'",
    ),
    "division by a zero size in a check": (
        replace(
            "    reference:",
            '    constraints:\n      - {check: "D // (D - 8) == 1"}\n    reference:',
        ),
        "error: [l2norm] sample breaks constraint 'D // (D - 8) == 1'",
    ),
    "division by zero in a derived dim": (
        replace("    reference:", '    dims:\n      E: "D // 0"\n    reference:'),
        "ops.yaml:20:10: error: [l2norm] dim 'E': division by zero in 'D // 0'",
    ),
    "division by a zero size in a derived dim": (
        replace("    reference:", '    dims:\n      E: "D // (D - 8)"\n    reference:').replace(
            "rstd: {shape: [...]", "rstd: {shape: [..., E]"
        ),
        "ops.yaml:24:11: error: [l2norm] sample cannot be sized: derived dim 'E': division by zero in 'D // (D - 8)'",
    ),
}


def _cli(tmp_path, text: str | bytes, *extra: str) -> tuple[int, str]:
    spec = tmp_path / "ops.yaml"
    if isinstance(text, str):
        text = text.encode("utf-8")
    spec.write_bytes(text)
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)  # so that locations read ops.yaml:LINE:COL
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = main(["regenerate", "--check", "--out", str(tmp_path / "out"), *extra])
            except SystemExit as exc:
                rc = exc.code
    finally:
        os.chdir(cwd)
    return rc, err.getvalue()


@pytest.mark.parametrize("name", list(YAML_CASES))
def test_yaml_features_and_bad_text_are_located_errors(tmp_path, name):
    text, expected = YAML_CASES[name]
    start = time.perf_counter()
    rc, err = _cli(tmp_path, text)
    assert time.perf_counter() - start < 1.0
    assert rc == 2, err
    assert expected in err, err
    assert all(line.startswith("ops.yaml:") for line in err.splitlines()[:-1]), err


@pytest.mark.parametrize(
    "value",
    ["!!bool maybe", "!!int ''", "!!float x", "2024-01-01", "!foo 1"],
)
def test_a_value_the_loader_refuses_is_reported_once(tmp_path, value):
    """The later stages read a refused value as missing; what they would say about it at the
    same place (here: the reference is required) is a consequence and is not printed."""
    old = "    reference: attnops_kernels.l2norm.reference:l2norm_ref"
    rc, err = _cli(tmp_path, replace(old, "    reference: " + value))
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[-1] == "1 error; nothing written", err
    assert lines[0].startswith("ops.yaml:19:16: error: "), err


@pytest.mark.parametrize(
    "data, where",
    [
        (b"version: 1\ndoc: \xff\xfe\n", "ops.yaml:2:6:"),
        (b"\xef\xbb\xbfversion: 1\n\x80", "ops.yaml:2:1:"),
    ],
)
def test_a_spec_that_is_not_utf8_is_a_located_error(tmp_path, data, where):
    rc, err = _cli(tmp_path, data)
    assert rc == 2 and err.startswith(where + " error: the spec is not UTF-8 text"), err


# --- fuzz: YAML structure and schema strings ----------------------------------------------------

_SCALAR_TAGS = ["!foo ", "!!str ", "!!int ", "!!float ", "!!binary ", "!!timestamp ", "!!null "]
_SCALAR_TAGS += ["!!bool ", "!!int '' #", "!!bool '' #"]
_TYPES = ["Tensor", "Tensor?", "Tensor[]", "int", "SymInt", "float", "float?", "bool", "str"]
_TYPES += ["int[2]", "ScalarType", "Scalar", "Tensor(a!)", "Tensor(a)", "Tensor(b!)", "Device"]
_DEFAULTS = ["=None", "=1", "=-1.5e-3", '="x"', "=[1, 2]", "=True", "=inf", "=é", "=", "=1e999"]


def _yaml_mutation(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    i = rng.randrange(1, len(lines))
    line = lines[i]
    indent = len(line) - len(line.lstrip())
    kind = rng.randrange(9)
    if kind == 0 and ":" in line:  # an anchor here, an alias of it further down
        lines[i] = line.replace(":", ": &a", 1) if line.rstrip().endswith(":") else line
        j = rng.randrange(i, len(lines))
        key, sep, _ = lines[j].partition(": ")
        if sep:
            lines[j] = f"{key}: *a"
    elif kind == 1:
        lines.insert(
            i,
            " " * indent + rng.choice(["<<: {doc: x}", "<<: *a", "? [a]\n" + " " * indent + ": 1"]),
        )
    elif kind == 2 and ": " in line:
        key, _, value = line.partition(": ")
        lines[i] = f"{key}: {rng.choice(_SCALAR_TAGS)}{value}"
    elif kind == 3:
        lines[i] = "\t" + line.lstrip() if rng.random() < 0.5 else line.replace(" ", "\t", 1)
    elif kind == 4:
        lines.insert(i, line)  # a duplicate key (or list item)
    elif kind == 5 and ": " in line:
        key, _, _ = line.partition(": ")
        depth = rng.choice([1, 5, 50, 200])
        lines[i] = f"{key}: " + "[" * depth + "1" + "]" * depth
    elif kind == 6:
        del lines[i]
    elif kind == 7:
        lines[i] = line.replace(line.strip()[:1], rng.choice(["é", "ß", "\u00a0", "☃"]), 1)
    else:
        lines[i] = " " * rng.choice([0, 1, 3, 5]) + line.lstrip()
    return "\n".join(lines) + "\n"


def _schema_mutation(rng: random.Random, schema: str) -> str:
    kind = rng.randrange(5)
    words = schema.split(" ")
    if kind == 0:  # a type
        idx = [k for k, w in enumerate(words) if w.strip("(") in ("Tensor", "float")]
        if idx:
            k = rng.choice(idx)
            words[k] = ("(" if words[k].startswith("(") else "") + rng.choice(_TYPES)
        return " ".join(words)
    if kind == 1:  # a default
        if "=" in schema:
            head, _, tail = schema.partition("=")
            rest = tail[min(len(tail), next((n for n, c in enumerate(tail) if c in ",)"), 0)) :]
            return head + rng.choice(_DEFAULTS) + rest
        return schema.replace(")", rng.choice(_DEFAULTS) + ")", 1)
    if kind == 2:  # the keyword-only marker
        commas = [n for n, c in enumerate(schema) if c == ","] or [1]
        n = rng.choice(commas)
        return schema[:n] + rng.choice([", *", ", *,", " *"]) + schema[n:]
    if kind == 3:  # a name dropped or changed
        k = rng.randrange(len(words))
        words[k] = rng.choice(["", "x", "self", "_x", "grad_x", "é", "*"])
        return " ".join(words)
    return schema.replace(
        "->", rng.choice(["->", "", "-> ()", "-> Tensor?", "-> (Tensor x, Tensor x)"])
    )


def _fuzz_mutants(n: int):
    rng = random.Random(1234)
    schemas = re.findall(r'schema: "([^"]*)"', BASE)
    for _ in range(n):
        text = BASE
        if rng.random() < 0.5:
            old = rng.choice(schemas)
            text = text.replace(
                f'"{old}"', yaml.safe_dump(_schema_mutation(rng, old)).split("\n")[0]
            )
        for _ in range(rng.choice([0, 1, 1, 2])):
            text = _yaml_mutation(rng, text)
        yield text


FUZZ_SHARDS = 4


@pytest.mark.parametrize(
    "shard",
    [
        pytest.param(k, id=f"shard{k}", marks=[pytest.mark.slow] if k else [])
        for k in range(FUZZ_SHARDS)
    ],
)
def test_fuzzed_specs_are_generated_or_located_errors(tmp_path, shard):
    """600 fuzzed specs in 4 shards of every 4th (the default run takes shard 0)."""
    failures = []
    outcomes = {"generated": 0, "invalid": 0}
    start = time.perf_counter()
    for k, text in enumerate(_fuzz_mutants(600)):
        if k % FUZZ_SHARDS != shard:
            continue
        try:
            rc, err = _cli(tmp_path, text)
        except Exception as exc:  # noqa: BLE001 - a traceback is the failure being looked for
            failures.append(f"#{k}: {type(exc).__name__}: {exc}\n{text}")
            continue
        if rc in (0, 1):  # --check into an empty folder reports drift
            outcomes["generated"] += 1
        elif (
            rc == 2
            and err
            and all(
                re.match(r"ops\.yaml:\d+:\d+: error: ", line)
                or re.match(r"\S+\.py:\d+:\d+: error: ", line)
                for line in err.splitlines()[:-1]
            )
        ):
            outcomes["invalid"] += 1
        else:
            failures.append(f"#{k}: exit {rc}: {err}\n{text}")
    assert not failures, "\n\n".join(failures[:5])
    assert outcomes["generated"] >= 1 and outcomes["invalid"] >= 100 // FUZZ_SHARDS, outcomes
    assert time.perf_counter() - start < 60
