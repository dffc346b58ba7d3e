"""Any wrongly typed value anywhere in the shipped spec is a located error, never a traceback."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

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


def _mutants():
    tree = yaml.safe_load(SPEC.read_text())
    for path in _paths(tree):
        if not path:
            continue
        for value in WRONG:
            yield path, yaml.dump(_replaced(tree, path, value), Dumper=_Dumper, sort_keys=False)


def test_every_wrong_value_is_a_spec_error_or_accepted():
    crashes = []
    count = 0
    for path, text in _mutants():
        count += 1
        try:
            generate(text, "ops.yaml", "ops.yaml")
        except SpecError as exc:
            for d in exc.diagnostics:
                assert str(d).startswith("ops.yaml:"), str(d)
        except Exception as exc:  # noqa: BLE001 - the point is to find any other exception
            crashes.append(f"{'/'.join(map(str, path))}: {type(exc).__name__}: {exc}")
    assert count > 1500
    assert not crashes, "\n".join(crashes[:20])


@pytest.mark.parametrize("text", ["[", "ops: [", "a: b: c", "\t- x", "version: 1\nops: 3"])
def test_malformed_documents_are_spec_errors(text):
    with pytest.raises(SpecError):
        generate(text, "ops.yaml", "ops.yaml")
