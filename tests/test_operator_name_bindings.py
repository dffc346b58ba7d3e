"""An operator may take the name of anything a generated test module defines or imports at module
level (``make_inputs``, ``backward_args``, ``functools``): the test module binds the operator as
``_fn``, as the generated benchmark does, so its name neither shadows nor is shadowed there."""

from __future__ import annotations

import re

import pytest
from specs import generate_project, replace, run_generated

from codegen.pipeline import parse
from codegen.spec.errors import SpecError

# The names of a generated test module an operator could take (lower_snake_case, not 'test_*',
# not 'torch' or 'pytest', which check_name refuses).
NAMES = ("make_inputs", "backward_args", "functools")

LAUNCHERS = """
def scale_fwd(x, alpha=2.0):
    return (x * alpha).contiguous()


def scale_bwd(grad_y, alpha):
    return (grad_y * alpha).contiguous()


def scale_ref(x, alpha=2.0):
    return x.float() * alpha
"""

OP = """\
  {name}:
    doc: Scales x.
    forward:
      schema: "(Tensor x, float alpha=2.0) -> Tensor y"
      launchers: {{cpu: "namekern:scale_fwd"}}
    backward:
      schema: "(Tensor grad_y, float alpha) -> Tensor grad_x"
      launchers: {{cpu: "namekern:scale_bwd"}}
    inputs:
      x: {{shape: [..., D], dtypes: [float32]}}
    outputs:
      y: {{shape: [..., D], dtype: x}}
    reference: "namekern:scale_ref"
    tests:
      samples: [{{batch: [2], D: 4}}]
      tolerance: {{float32: [1.0e-6, 1.0e-6]}}
"""

SPEC = "version: 1\nnamespace: names\npackage: namedops\nops:\n" + "".join(
    OP.format(name=name) for name in NAMES
)


def test_operators_named_like_test_module_names_pass_their_generated_suites(tmp_path):
    assert generate_project(tmp_path, "namekern", LAUNCHERS, SPEC, "-q") == 0
    tests = tmp_path / "out" / "tests"
    for name in NAMES:
        text = (tests / f"test_{name}.py").read_text()
        # The module still defines or imports what the operator is named like, once.
        assert len(re.findall(rf"^(def |import ){name}\b", text, flags=re.M)) == 1, name
        assert f'_fn = importlib.import_module("namedops").{name}\n' in text
    result = run_generated(
        tmp_path, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tests)
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    passed = set(re.findall(r"^PASSED \S*?test_(\w+)\.py::(\w+)", result.stdout, flags=re.M))
    for name in NAMES:
        # The suite called the operator (numerics, gradients), not a function of the test module.
        assert (name, "test_forward_matches_reference") in passed, (name, sorted(passed))
        assert (name, "test_gradients_match_reference") in passed, (name, sorted(passed))


def test_an_argument_may_not_take_the_operator_binding_name():
    """Note [library names]: ``_fn`` is a generated internal, refused where a spec names it."""
    schema = "Tensor x, float eps=1e-6) -> (Tensor y"
    with pytest.raises(SpecError) as info:
        parse(replace(schema, schema.replace("eps", "_fn")), "ops.yaml")
    assert [str(d) for d in info.value.diagnostics] == [
        "ops.yaml:7:33: error: [l2norm] forward schema: argument name '_fn' is the name of a "
        "generated internal; choose another name"
    ]


@pytest.mark.parametrize("name", ["_t", "_tc", "_te"])
def test_an_argument_may_not_take_a_test_helper_module_name(name):
    """The generated tests bind ``_testing``, ``_testing_cases`` and ``_testing_edges`` as
    ``_t``, ``_tc`` and ``_te``: generated internals, refused where a spec names them."""
    schema = "Tensor x, float eps=1e-6) -> (Tensor y"
    with pytest.raises(SpecError) as info:
        parse(replace(schema, schema.replace("eps", name)), "ops.yaml")
    assert [str(d) for d in info.value.diagnostics] == [
        f"ops.yaml:7:33: error: [l2norm] forward schema: argument name '{name}' is the name of a "
        "generated internal; choose another name"
    ]
