"""Unit tests of codegen/runtime/testing.py, which the generated tests build their cases with."""

from __future__ import annotations

import re

import pytest
import torch

from codegen.runtime import testing as t


def _params(cases) -> list[tuple]:
    return [(p.id, *p.values) for p in cases]


# --- configurations ------------------------------------------------------------------------


def test_configs_without_axes_is_one_default():
    assert t.configs({}) == {"default": {}}


def test_configs_default_first_and_ids_name_departures():
    configs = t.configs({"kind": ("softplus", "lower_bound")}, ("A_log",), "with_state")
    assert list(configs) == [
        "default",
        "no_with_state",
        "no_A_log",
        "no_A_log-no_with_state",
        "lower_bound",
        "lower_bound-no_with_state",
        "lower_bound-no_A_log",
        "lower_bound-no_A_log-no_with_state",
    ]
    assert configs["default"] == {"kind": "softplus", "A_log": True, "with_state": True}
    assert configs["lower_bound-no_A_log"] == {
        "kind": "lower_bound",
        "A_log": False,
        "with_state": True,
    }


def test_configs_non_string_variant_values_carry_the_argument_name():
    assert list(t.configs({"chunk": (64, 32), "causal": (True, False)})) == [
        "default",
        "causalFalse",
        "chunk32",
        "chunk32-causalFalse",
    ]


# --- layouts -------------------------------------------------------------------------------


def _inputs(sample, dtype, config="default"):
    """A toy make_inputs: sizes from the sample; ``opt`` present per configuration."""
    n, d = SAMPLES[sample]["n"], SAMPLES[sample]["d"]
    given = CONFIGS[config]["opt"]
    return {
        "x": torch.zeros(n, d, dtype=DTYPES[dtype]),
        "row": torch.zeros(d),  # 1-D: never permutable
        "opt": torch.zeros(n, d) if given else None,
        "eps": 1e-6,
    }


SAMPLES = {"n3-d4": {"n": 3, "d": 4}, "n1-d4": {"n": 1, "d": 4}}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
CONFIGS = t.configs({}, ("opt",))


def test_permutable_needs_two_dims_of_size_above_one():
    inputs = {
        "a": torch.zeros(2, 3),
        "b": torch.zeros(1, 3),
        "c": torch.zeros(5),
        "d": None,
        "e": 0.5,
        "f": torch.zeros(2, 1, 3),
    }
    assert t.permutable(inputs) == ["a", "f"]
    assert t.permutable(inputs, names=("f", "b")) == ["f"]


def test_with_layout_permutes_only_the_named_argument():
    args = {"a": torch.randn(2, 3), "b": torch.randn(2, 3), "s": 2.0}
    assert t.with_layout(args, "compact") is args
    out = t.with_layout(args, "permuted-b")
    assert out["a"] is args["a"] and out["s"] == 2.0
    assert not out["b"].is_contiguous() and torch.equal(out["b"], args["b"])
    with pytest.raises(AssertionError, match="no argument 'c'"):
        t.with_layout(args, "permuted-c")
    with pytest.raises(AssertionError):
        t.with_layout(args, "sliced-a")


def test_with_layout_permutes_incoming_gradients_together_or_skips():
    args = {"x": torch.randn(2, 3), "grad_y": torch.randn(2, 3), "grad_z": None}
    out = t.with_layout(args, t.GRADS, ("grad_y", "grad_z"))
    assert out["x"] is args["x"] and out["grad_z"] is None
    assert not out["grad_y"].is_contiguous()
    flat = {"x": torch.randn(2, 3), "grad_y": torch.randn(6)}
    with pytest.raises(pytest.skip.Exception, match="no incoming gradient"):
        t.with_layout(flat, t.GRADS, ("grad_y",))


# --- cases ---------------------------------------------------------------------------------


def test_cases_ids_and_permutation_choice():
    got = _params(t.cases(SAMPLES, DTYPES, CONFIGS, _inputs))
    fp32_n3 = [
        ("fp32-n3-d4-compact-default", "n3-d4", "fp32", "compact", "default"),
        ("fp32-n3-d4-compact-no_opt", "n3-d4", "fp32", "compact", "no_opt"),
        ("fp32-n3-d4-permuted-x-default", "n3-d4", "fp32", "permuted-x", "default"),
        ("fp32-n3-d4-permuted-opt-default", "n3-d4", "fp32", "permuted-opt", "default"),
    ]
    assert got[:4] == fp32_n3
    assert [g[0] for g in got[4:8]] == [i.replace("fp32", "bf16", 1) for i, *_ in fp32_n3]
    # n = 1 leaves no input with two dims of size > 1: compact runs only.
    assert [g[0] for g in got[8:]] == [
        "fp32-n1-d4-compact-default",
        "fp32-n1-d4-compact-no_opt",
        "bf16-n1-d4-compact-default",
        "bf16-n1-d4-compact-no_opt",
    ]
    assert len({g[0] for g in got}) == len(got)


def test_cases_names_and_extra_layouts():
    got = _params(
        t.cases({"n3-d4": SAMPLES["n3-d4"]}, ["fp32"], CONFIGS, _inputs, ("x",), [t.GRADS])
    )
    assert [g[3] for g in got] == ["compact", "compact", "permuted-x", "permuted-grads"]


def test_one_more_sample_or_dtype_is_one_more_block_of_cases():
    base = len(t.cases(SAMPLES, DTYPES, CONFIGS, _inputs))
    more = dict(DTYPES, fp16=torch.float16)
    assert len(t.cases(SAMPLES, more, CONFIGS, _inputs)) == base * 3 // 2
    SAMPLES["n2-d2"] = {"n": 2, "d": 2}
    try:
        assert len(t.cases(SAMPLES, DTYPES, CONFIGS, _inputs)) == base + 2 * 4
    finally:
        del SAMPLES["n2-d2"]


def test_compile_cases_every_config_on_the_first_sample_then_the_second():
    got = [p.id for p in t.compile_cases(SAMPLES, CONFIGS)]
    assert got == ["n3-d4-default", "n3-d4-no_opt", "n1-d4-default"]
    assert [p.id for p in t.compile_cases({"a": {}}, {"default": {}})] == ["a-default"]


def test_varlen_samples_are_those_that_spell_out_offsets():
    samples = {"plain": {"B": 2}, "packed": {"B": 1, "cu": (0, 3, 5)}}
    assert t.varlen_samples(samples, "cu") == ["packed"]


# --- rejects -------------------------------------------------------------------------------


def test_reject_cases_use_the_first_sample_giving_the_argument():
    samples = {"plain": {"n": 2}, "packed": {"n": 1, "cu": (0, 1)}}

    def make(sample, dtype, config):
        return {"x": torch.zeros(2, 2), "cu": samples[sample].get("cu")}

    got = _params(
        t.reject_cases(
            {"x": ("dtype-float64",), "cu": ("rank-plus-one",)},
            samples,
            "fp32",
            {"default": {}},
            make,
        )
    )
    assert got == [
        ("x-dtype-float64", "plain", "x", "dtype-float64"),
        ("cu-rank-plus-one", "packed", "cu", "rank-plus-one"),
    ]
    with pytest.raises(AssertionError, match="no sample gives 'y'"):
        t.reject_cases({"y": ("value",)}, samples, "fp32", {"default": {}}, make)


@pytest.mark.parametrize(
    "how, check",
    [
        ("dtype-float64", lambda v: v.dtype == torch.float64),
        ("dtype-int32", lambda v: v.dtype == torch.int32),
        ("dtype-other", lambda v: v.dtype == torch.float64),
        ("rank-plus-one", lambda v: v.shape == (1, 2, 3)),
        ("rank-one", lambda v: v.shape == (6,)),
    ],
)
def test_broken_tensors(how, check):
    assert check(t.broken(torch.zeros(2, 3), how))


def test_broken_values_and_unknown_ways():
    assert t.broken(torch.zeros(2, dtype=torch.float64), "dtype-other").dtype == torch.float32
    assert t.broken("softplus", "value") == "not-a-variant"
    assert t.broken(64, "value") == -12345
    with pytest.raises(ValueError):
        t.broken(torch.zeros(2), "sliced")


def test_broken_scalars_take_a_value_of_another_type():
    assert t.broken(0.5, "type-bool") is True
    assert t.broken(None, "type-complex") == 1j  # replaces whatever the argument held
    assert t.broken(False, "type-none") is None
    assert t.broken((3, 4), "element-bool") == [True, 4]
    assert t.broken([3, 4], "length") == [3, 4, 3]


def test_reject_cases_break_the_type_of_absent_scalars_on_the_first_sample():
    samples = {"first": {}, "second": {"scale": 0.5}}
    got = _params(
        t.reject_cases(
            {"scale": ("type-bool",)},
            samples,
            "fp32",
            {"default": {}},
            lambda s, d, c: {"scale": samples[s].get("scale")},
        )
    )
    assert got == [("scale-type-bool", "first", "scale", "type-bool")]


def test_check_rejects_breaks_the_arity_flag_too():
    def fn(q, k, flag):
        if not isinstance(flag, bool):
            raise TypeError(f"op: flag must be bool, got {flag!r}")
        return q + k

    suite = _suite(fn, flag="flag", configs={"default": {"flag": True}})
    suite.check_rejects("s", "default", "flag", "type-int", "op")
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        _suite(
            lambda q, k, flag: q + k, flag="flag", configs={"default": {"flag": True}}
        ).check_rejects("s", "default", "flag", "type-int", "op")


def test_rejection_pattern_wants_the_argument_as_the_subject():
    pattern = t.rejection_pattern("chunk_gla", "q")
    assert re.match(pattern, "chunk_gla: q must have dtype bfloat16, float16 or float32, got x")
    assert not re.match(pattern, "chunk_gla: k must have the dtype of q (float64), got float32")
    assert not re.match(pattern, "chunk_gla: qk must be given")
    assert not re.match(t.rejection_pattern("a.b", "x"), "aab: x must be 1")


def _suite(fn, **overrides):
    kwargs = dict(
        fn=fn,
        reference=fn,
        make_inputs=lambda s, d, c: {"q": torch.ones(2, 3), "k": torch.ones(2, 3)},
        configs={"default": {}},
        flag=None,
        public_outputs=("out",),
        differentiable=("q", "k"),
        mutated=(),
        tolerance={"fp32": (0.0, 0.0)},
        grad_tolerance={"fp32": (0.0, 0.0)},
        seed=0,
    )
    return t.Suite(**{**kwargs, **overrides})


def test_check_rejects_fails_when_another_argument_takes_the_blame():
    def fn(q, k):
        if k.dtype != q.dtype:
            raise TypeError(f"op: k must have the dtype of q ({q.dtype}), got {k.dtype}")
        return q + k

    with pytest.raises(AssertionError, match="Regex pattern did not match"):
        _suite(fn).check_rejects("s", "default", "q", "dtype-float64", "op")
    _suite(fn).check_rejects("s", "default", "k", "dtype-float64", "op")


def test_check_gradients_fails_without_a_differentiable_input():
    suite = _suite(lambda q, k: q + k, differentiable=("missing",))
    suite.make_inputs = lambda s, d, c: {"q": torch.ones(2), "k": torch.ones(2), "missing": None}
    with pytest.raises(AssertionError, match="no differentiable input"):
        suite.check_gradients("s", "fp32", "compact", "default")


def test_suite_inputs_apply_the_layout():
    suite = _suite(lambda q, k: q + k)
    inputs = suite.inputs("s", "fp32", "permuted-k", "default")
    assert inputs["q"].is_contiguous() and not inputs["k"].is_contiguous()
