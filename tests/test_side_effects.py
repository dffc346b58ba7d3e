"""Operators whose launcher acts outside its tensor arguments ('side_effects: true'), and the
names and 'when' conditions kernel libraries write: pinned diagnostics and generated code.

The probe operators ``record_rows`` and ``outliers`` (tests/probes/ops.yaml) run their whole
generated suites in tests/test_probe_suites.py; these tests pin what the spec refuses."""

from __future__ import annotations

import pytest
from specs import BASE, replace

from codegen.pipeline import parse
from codegen.spec.errors import SpecError

# A '-> ()' operator without a backward or outputs, around the l2norm launcher's file.
NOTE = (
    replace(
        '      schema: "(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)"',
        '      schema: "(Tensor x, float eps=1e-6) -> ()"',
    )
    .replace(
        "    backward:\n"
        '      schema: "(Tensor grad_y, Tensor x, Tensor rstd) -> Tensor grad_x"\n'
        "      launchers:\n"
        "        cpu: attnops_kernels.l2norm.triton:l2norm_bwd\n",
        "",
    )
    .replace(
        "    outputs:\n"
        "      y: {shape: [..., D], dtype: x}\n"
        "      rstd: {shape: [...], dtype: float32, public: false}\n",
        "",
    )
)


def _without_backward(text: str) -> str:
    return text.replace(
        "    backward:\n"
        '      schema: "(Tensor grad_y, Tensor x, Tensor rstd) -> Tensor grad_x"\n'
        "      launchers:\n"
        "        cpu: attnops_kernels.l2norm.triton:l2norm_bwd\n",
        "",
    )


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    return [str(d) for d in info.value.diagnostics]


def test_a_call_without_any_effect_is_refused_at_the_returns():
    assert _errors(NOTE) == [
        "ops.yaml:7:46: error: [l2norm] forward schema: the schema returns nothing ('()') and "
        "updates no argument in place, so a call would have no effect; mark what the kernel "
        "writes 'Tensor(a!)', return the results, or, when the kernel acts outside its tensor "
        "arguments (a communicator, a host buffer, a cache it registers), declare "
        "'side_effects: true'"
    ]


def test_declared_side_effects_are_accepted_and_registered():
    from codegen.pipeline import generate

    text = replace(
        "    doc: Normalize x.\n", "    doc: Normalize x.\n    side_effects: true\n", NOTE
    )
    files = generate(text, "ops.yaml", "ops.yaml")
    module = files["demo/l2norm.py"]
    assert "torch.fx.node.has_side_effect(_l2norm_fwd)\n" in module
    assert "torch.fx.node.has_side_effect(torch.ops.demo.l2norm_fwd)\n" in module
    tests = files["tests/test_l2norm.py"]
    assert "def test_side_effects_survive_compile(" in tests
    # Nothing to compare with the reference: no numerics test that would assert nothing.
    assert "def test_forward_matches_reference(" not in tests
    # Without the declaration nothing is registered.
    plain = generate(BASE, "ops.yaml", "ops.yaml")["demo/l2norm.py"]
    assert "has_side_effect" not in plain


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "    side_effects: yes please\n",
            "ops.yaml:6:19: error: [l2norm] side_effects must be true or false, got str 'yes please'",
        ),
        (
            "    side_effects: true\n    integration: eager\n",
            "ops.yaml:6:19: error: [l2norm] side_effects needs the opaque integration, not "
            "'eager': torch.compile traces this integration's launcher, so what it does outside "
            "its tensors would run once while tracing instead of at every call",
        ),
    ],
    ids=["not-a-bool", "eager"],
)
def test_side_effects_diagnostics(line, expected):
    text = replace("    doc: Normalize x.\n", "    doc: Normalize x.\n" + line, NOTE)
    assert expected in _errors(text)


def test_a_scalar_argument_named_batch_needs_a_default():
    text = replace("(Tensor x, float eps=1e-6) -> (Tensor y", "(Tensor x, int batch) -> (Tensor y")
    assert (
        "ops.yaml:7:31: error: [l2norm] forward schema: a scalar argument named 'batch' needs a "
        "default: test samples use the key 'batch' for the sizes of '...', so they cannot give "
        "its value"
    ) in _errors(text)


def test_a_tensor_named_batch_renames_the_local_of_the_leading_dims():
    from codegen.pipeline import generate

    text = replace(
        "(Tensor x, float eps=1e-6) -> (Tensor y", "(Tensor x, Tensor? batch=None) -> (Tensor y"
    )
    text = replace(
        "      x: {shape: [..., D], dtypes: [float32]}\n",
        "      x: {shape: [..., D], dtypes: [float32]}\n      batch: {shape: [D], dtype: x}\n",
        text,
    )
    text = replace(
        "(Tensor grad_y, Tensor x, Tensor rstd) -> Tensor grad_x",
        "(Tensor grad_y, Tensor x, Tensor? batch, Tensor rstd) -> (Tensor grad_x, Tensor grad_batch)",
        text,
    )
    files = generate(text, "ops.yaml", "ops.yaml")
    module = files["demo/l2norm.py"]
    assert "_batch = x.shape[:-1]" in module and "\n    batch = " not in module
    assert '_batch = _s["batch"]' in files["tests/test_l2norm.py"]


def test_when_may_name_a_number():
    text = replace(
        "(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)",
        "(Tensor x, float eps=1e-6) -> (Tensor y, Tensor? rstd)",
    )
    text = replace(
        "rstd: {shape: [...], dtype: float32, public: false}",
        "rstd: {shape: [...], dtype: float32, when: eps}",
        text,
    )
    text = _without_backward(text)
    parse(text, "ops.yaml")
    bad = replace("(Tensor x, float eps=1e-6)", "(Tensor x, str eps='a')", text)
    assert any(
        "'when' of output 'rstd' must name a bool, int or float argument" in e for e in _errors(bad)
    )


def test_a_tensor_return_no_argument_decides_is_refused_at_the_return():
    text = replace(
        "(Tensor x, float eps=1e-6) -> (Tensor y, Tensor rstd)",
        "(Tensor x) -> (Tensor y, Tensor? rstd)",
    )
    text = _without_backward(text)
    text = replace(
        "rstd: {shape: [...], dtype: float32, public: false}",
        "rstd: {shape: [...], dtype: float32}",
        text,
    )
    assert _errors(text) == [
        "ops.yaml:7:41: error: [l2norm] forward schema: return 'rstd' is 'Tensor?' but no "
        "argument says when it is given (a bool, int or float argument, or a Tensor? input): a "
        "fake must return None exactly when the kernel does, so a presence that depends on the "
        "data cannot be compiled; return an empty tensor instead, or add the flag"
    ]
