"""Unit tests of codegen/runtime/testing.py, testing_cases.py and testing_edges.py, which the
generated tests build their cases and checks with."""

from __future__ import annotations

import re

import pytest
import torch
from torch import Tensor

from codegen.runtime import testing as t
from codegen.runtime import testing_cases as tc
from codegen.runtime import testing_edges as te


def _params(cases) -> list[tuple]:
    return [(p.id, *p.values) for p in cases]


# --- configurations ------------------------------------------------------------------------


def test_configs_without_axes_is_one_default():
    assert tc.configs({}) == {"default": {}}


def test_configs_default_first_and_ids_name_departures():
    configs = tc.configs({"kind": ("softplus", "lower_bound")}, ("A_log",), "with_state")
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
    assert list(tc.configs({"chunk": (64, 32), "causal": (True, False)})) == [
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
CONFIGS = tc.configs({}, ("opt",))


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


def _gaps(view: Tensor) -> Tensor:
    """The elements between those of a ``strided`` view (each one just after an element but
    the last along the strided dim)."""
    d = max(i for i in range(view.ndim) if view.shape[i] > 1)
    inner = view.narrow(d, 0, view.shape[d] - 1)
    offset = view.storage_offset() + view.stride(d) // 2
    return torch.as_strided(view, inner.shape, view.stride(), offset)


@pytest.mark.parametrize("shape, dim", [((7,), 0), ((2, 3), 1), ((3, 4, 1), 1), ((1, 5), 1)])
def test_strided_keeps_the_values_with_a_stride_of_two(shape, dim):
    x = torch.randn(shape)
    out = t.strided(x)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    assert out.stride(dim) == 2 * x.stride(dim) and not out.is_contiguous()
    # Not dense: a copy that keeps dense strides comes back contiguous.
    assert out.clone().is_contiguous()
    assert torch.isnan(_gaps(out)).all()


def test_strided_gaps_of_bool_and_integer_tensors_are_wrong_but_in_range():
    mask = torch.tensor([True, False, False, True])
    assert torch.equal(_gaps(t.strided(mask)), ~mask[:-1])
    index = torch.tensor([0, 3, 1], dtype=torch.int32)
    out = t.strided(index)
    assert torch.equal(out, index) and torch.equal(_gaps(out), index[:-1])


def test_can_stride_needs_a_dim_of_size_above_one():
    assert t.can_stride(torch.zeros(3)) and t.can_stride(torch.zeros(1, 2))
    assert not t.can_stride(torch.zeros(1, 1)) and not t.can_stride(torch.zeros(()))
    assert not t.can_stride(None) and not t.can_stride(0.5)
    assert t.can_stride([torch.zeros(1), torch.zeros(2), None]) and not t.can_stride([None])
    with pytest.raises(AssertionError, match="no dim of size > 1"):
        t.strided(torch.zeros(1, 1))


def test_clone_layout_keeps_strides_and_gaps():
    x = t.strided(torch.randn(3, 4))
    copy = t.clone_layout(x)
    assert copy.stride() == x.stride() and torch.equal(copy, x)
    assert copy.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert torch.isnan(_gaps(copy)).all()
    permuted = t.dense_permuted(torch.randn(3, 4))
    assert t.clone_layout(permuted).stride() == permuted.stride()
    assert t.clone_layout(torch.zeros(0, 3)).shape == (0, 3)
    inputs = t.clone_inputs({"x": x, "xs": [x, None], "s": 2.0})
    assert inputs["x"].stride() == x.stride() and inputs["xs"][0].stride() == x.stride()


def test_with_layout_strides_the_named_argument_and_list_elements():
    args = {"w": torch.randn(5), "xs": [torch.randn(2, 3), None], "one": torch.randn(1)}
    out = t.with_layout(args, "strided-w")
    assert out["xs"] is args["xs"] and torch.equal(out["w"], args["w"])
    assert out["w"].stride() == (2,)
    out = t.with_layout(args, "strided-xs")
    assert out["xs"][0].stride() == (6, 2) and out["xs"][1] is None
    with pytest.raises(pytest.skip.Exception, match="cannot take the layout strided-one"):
        t.with_layout(args, "strided-one")
    with pytest.raises(pytest.skip.Exception, match="cannot take the layout permuted-w"):
        t.with_layout(args, "permuted-w")


def test_with_layout_strides_incoming_gradients_together_or_skips():
    args = {"x": torch.randn(2, 3), "grad_y": torch.randn(6), "grad_z": None}
    out = t.with_layout(args, t.STRIDED_GRADS, ("grad_y", "grad_z"))
    assert out["x"] is args["x"] and out["grad_z"] is None
    assert out["grad_y"].stride() == (2,)
    ones = {"grad_y": torch.randn(1, 1)}
    with pytest.raises(pytest.skip.Exception, match="no incoming gradient"):
        t.with_layout(ones, t.STRIDED_GRADS, ("grad_y",))


# --- cases ---------------------------------------------------------------------------------


def test_cases_ids_and_permutation_choice():
    got = _params(tc.cases(SAMPLES, DTYPES, CONFIGS, _inputs))
    fp32_n3 = [
        ("fp32-n3-d4-compact-default", "n3-d4", "fp32", "compact", "default"),
        ("fp32-n3-d4-compact-no_opt", "n3-d4", "fp32", "compact", "no_opt"),
        ("fp32-n3-d4-permuted-x-default", "n3-d4", "fp32", "permuted-x", "default"),
        ("fp32-n3-d4-permuted-opt-default", "n3-d4", "fp32", "permuted-opt", "default"),
    ]
    assert got[:4] == fp32_n3
    # The first dtype of the first sample also strides every input, the 1-D one included.
    assert got[4:7] == [
        ("fp32-n3-d4-strided-x-default", "n3-d4", "fp32", "strided-x", "default"),
        ("fp32-n3-d4-strided-row-default", "n3-d4", "fp32", "strided-row", "default"),
        ("fp32-n3-d4-strided-opt-default", "n3-d4", "fp32", "strided-opt", "default"),
    ]
    assert [g[0] for g in got[7:11]] == [i.replace("fp32", "bf16", 1) for i, *_ in fp32_n3]
    # n = 1 leaves no input with two dims of size > 1, and every input was strided already:
    # compact runs only.
    assert [g[0] for g in got[11:]] == [
        "fp32-n1-d4-compact-default",
        "fp32-n1-d4-compact-no_opt",
        "bf16-n1-d4-compact-default",
        "bf16-n1-d4-compact-no_opt",
    ]
    assert len({g[0] for g in got}) == len(got)


def test_cases_stride_an_input_on_the_first_sample_that_gives_it():
    samples = {"plain": {}, "packed": {}}

    def make(sample, dtype, config):
        cu = torch.tensor([0, 2, 5]) if sample == "packed" else None
        return {"x": torch.zeros(5), "cu": cu}

    got = [p.id for p in tc.cases(samples, ["fp32", "bf16"], {"default": {}}, make)]
    assert [i for i in got if "strided" in i] == [
        "fp32-plain-strided-x-default",
        "fp32-packed-strided-cu-default",
    ]


def test_cases_names_and_extra_layouts():
    got = _params(
        tc.cases({"n3-d4": SAMPLES["n3-d4"]}, ["fp32"], CONFIGS, _inputs, ("x",), [t.GRADS])
    )
    assert [g[3] for g in got] == [
        "compact",
        "compact",
        "permuted-x",
        "permuted-grads",
        "strided-x",
    ]


def test_default_cases_keep_compact_and_each_permuted_layout_by_default():
    cases = tc.cases(SAMPLES, DTYPES, CONFIGS, _inputs) + tc.first_cases(
        SAMPLES, DTYPES, CONFIGS, tc.saved_layouts(["h"])
    )
    got = tc.default_cases(cases)
    # Nothing is dropped: --full runs every case, in the same order.
    assert _params(got) == _params(cases)
    slow = [p.id for p in got if any(m.name == "slow" for m in p.marks)]
    default = [p.id for p in got if p.id not in slow]
    assert default == [
        "fp32-n3-d4-compact-default",
        "fp32-n3-d4-compact-no_opt",
        "fp32-n3-d4-permuted-x-default",
        "fp32-n3-d4-permuted-opt-default",
        "bf16-n3-d4-compact-default",
        "fp32-n1-d4-compact-default",
        "fp32-n1-d4-compact-no_opt",
        "fp32-n3-d4-permuted-h-default",
    ]
    assert all("strided" in i or i.startswith("bf16") for i in slow), slow
    assert tc.default_cases([]) == []


def test_one_more_sample_or_dtype_is_one_more_block_of_cases():
    def unstrided(cases):
        return [p for p in cases if not p.values[2].startswith(t.STRIDED)]

    base = len(unstrided(tc.cases(SAMPLES, DTYPES, CONFIGS, _inputs)))
    strided = len(tc.cases(SAMPLES, DTYPES, CONFIGS, _inputs)) - base
    more = dict(DTYPES, fp16=torch.float16)
    assert len(tc.cases(SAMPLES, more, CONFIGS, _inputs)) == base * 3 // 2 + strided
    SAMPLES["n2-d2"] = {"n": 2, "d": 2}
    try:
        assert len(tc.cases(SAMPLES, DTYPES, CONFIGS, _inputs)) == base + 2 * 4 + strided
    finally:
        del SAMPLES["n2-d2"]


def test_first_cases_and_saved_layouts():
    got = _params(tc.first_cases(SAMPLES, DTYPES, CONFIGS, tc.saved_layouts(("h", "rstd"))))
    assert got == [
        ("fp32-n3-d4-permuted-h-default", "n3-d4", "fp32", "permuted-h", "default"),
        ("fp32-n3-d4-strided-h-default", "n3-d4", "fp32", "strided-h", "default"),
        ("fp32-n3-d4-permuted-rstd-default", "n3-d4", "fp32", "permuted-rstd", "default"),
        ("fp32-n3-d4-strided-rstd-default", "n3-d4", "fp32", "strided-rstd", "default"),
    ]


def test_saved_cases_run_on_each_variant_value_and_skip_an_empty_saved_output():
    variants = {"save_states": (False, True), "kind": ("a", "b", "c")}
    configs = tc.configs(variants, ("opt",))
    got = [p.id for p in tc.saved_cases(SAMPLES, DTYPES, configs, ("h",), variants)]
    assert got == [
        f"fp32-n3-d4-{lay}-h-{c}"
        for c in ("default", "save_statesTrue", "b", "c")
        for lay in ("permuted", "strided")
    ]
    assert all(c in configs for c in ("save_statesTrue", "b", "c"))
    assert tc.saved_cases(SAMPLES, DTYPES, configs, (), variants) == []
    # A saved output the call left empty (chunk_gla's h without save_states) has no layout to
    # vary: the case is skipped, not run on a tensor that is not what its id says.
    args = {"h": torch.empty(0, 3, 4)}
    assert not t.can_permute(args["h"]) and not t.can_stride(args["h"])
    for layout in ("permuted-h", "strided-h"):
        with pytest.raises(pytest.skip.Exception, match="cannot take the layout"):
            t.with_layout(args, layout)


def test_compile_cases_every_config_on_the_first_sample_then_the_second():
    got = [p.id for p in tc.compile_cases(SAMPLES, CONFIGS)]
    assert got == ["n3-d4-default", "n3-d4-no_opt", "n1-d4-default"]
    assert [p.id for p in tc.compile_cases({"a": {}}, {"default": {}})] == ["a-default"]


def test_varlen_samples_are_those_that_spell_out_offsets():
    samples = {"plain": {"B": 2}, "packed": {"B": 1, "cu": (0, 3, 5)}}
    assert tc.varlen_samples(samples, "cu") == ["packed"]


# --- rejects -------------------------------------------------------------------------------


def test_reject_cases_use_the_first_sample_giving_the_argument():
    samples = {"plain": {"n": 2}, "packed": {"n": 1, "cu": (0, 1)}}

    def make(sample, dtype, config):
        return {"x": torch.zeros(2, 2), "cu": samples[sample].get("cu")}

    got = _params(
        tc.reject_cases(
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
        tc.reject_cases({"y": ("value",)}, samples, "fp32", {"default": {}}, make)


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
    assert check(te.broken(torch.zeros(2, 3), how))


def test_broken_values_and_unknown_ways():
    assert te.broken(torch.zeros(2, dtype=torch.float64), "dtype-other").dtype == torch.float32
    assert te.broken("softplus", "value") == "not-a-variant"
    assert te.broken(64, "value") == -12345
    with pytest.raises(ValueError):
        te.broken(torch.zeros(2), "sliced")


def test_broken_scalars_take_a_value_of_another_type():
    assert te.broken(0.5, "type-bool") is True
    assert te.broken(None, "type-complex") == 1j  # replaces whatever the argument held
    assert te.broken(False, "type-none") is None
    assert te.broken((3, 4), "element-bool") == [True, 4]
    assert te.broken([3, 4], "length") == [3, 4, 3]


def test_reject_cases_break_the_type_of_absent_scalars_on_the_first_sample():
    samples = {"first": {}, "second": {"scale": 0.5}}
    got = _params(
        tc.reject_cases(
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
    te.check_rejects(suite, "s", "default", "flag", "type-int", "op")
    lenient = _suite(lambda q, k, flag: q + k, flag="flag", configs={"default": {"flag": True}})
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        te.check_rejects(lenient, "s", "default", "flag", "type-int", "op")


def test_rejection_pattern_wants_the_argument_as_the_subject():
    pattern = te.rejection_pattern("chunk_gla", "q")
    assert re.match(pattern, "chunk_gla: q must have dtype bfloat16, float16 or float32, got x")
    assert not re.match(pattern, "chunk_gla: k must have the dtype of q (float64), got float32")
    assert not re.match(pattern, "chunk_gla: qk must be given")
    assert not re.match(te.rejection_pattern("a.b", "x"), "aab: x must be 1")


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
        te.check_rejects(_suite(fn), "s", "default", "q", "dtype-float64", "op")
    te.check_rejects(_suite(fn), "s", "default", "k", "dtype-float64", "op")


def test_check_gradients_fails_without_a_differentiable_input():
    suite = _suite(lambda q, k: q + k, differentiable=("missing",))
    suite.make_inputs = lambda s, d, c: {"q": torch.ones(2), "k": torch.ones(2), "missing": None}
    with pytest.raises(AssertionError, match="no differentiable input"):
        suite.check_gradients("s", "fp32", "compact", "default")


def test_suite_inputs_apply_the_layout():
    suite = _suite(lambda q, k: q + k)
    inputs = suite.inputs("s", "fp32", "permuted-k", "default")
    assert inputs["q"].is_contiguous() and not inputs["k"].is_contiguous()
    strided = suite.inputs("s", "fp32", "strided-q", "default")
    assert strided["q"].stride() == (6, 2) and strided["k"].is_contiguous()
    for layout in t.GRAD_LAYOUTS:  # the incoming gradients' layouts leave the inputs compact
        laid = suite.inputs("s", "fp32", layout, "default")
        assert all(v.is_contiguous() for v in laid.values())


class _Recorded(torch.autograd.Function):
    """Twice q, recording the strides of the gradient its backward receives."""

    seen: list = []

    @staticmethod
    def forward(ctx, q):
        return q * 2

    @staticmethod
    def backward(ctx, grad):
        _Recorded.seen.append(grad.stride())
        return (grad * 2).contiguous()


@pytest.mark.parametrize(
    "layout, strides",
    [("compact", (3, 1)), (t.GRADS, (1, 2)), (t.STRIDED_GRADS, (6, 2))],
)
def test_gradient_layouts_reach_the_backward(layout, strides):
    suite = _suite(lambda q, k: _Recorded.apply(q) + k.detach(), differentiable=("q",))
    _Recorded.seen.clear()
    suite.check_gradients("s", "fp32", layout, "default")
    # The public function's backward gets the layout; the reference (the same function here)
    # gets the compact gradient.
    assert _Recorded.seen == [strides, (3, 1)]


def test_gradient_layouts_skip_when_no_output_can_take_them():
    suite = _suite(lambda q, k: (q * k).sum(), differentiable=("q",))
    with pytest.raises(pytest.skip.Exception, match="no output that needs a gradient"):
        suite.check_gradients("s", "fp32", t.STRIDED_GRADS, "default")


@pytest.fixture
def compact_reader():
    """``twice(x, w) -> x * 2 + w``, whose kernel reads ``w`` with compact strides unless told."""
    lib = torch.library.Library("layoutcheck", "DEF")
    lib.define("twice(Tensor x, Tensor w, bool honour) -> Tensor")

    def impl(x, w, honour):
        if not honour:
            w = torch.as_strided(w, w.shape, t.contiguous_strides(w.shape), w.storage_offset())
        return x * 2 + w

    lib.impl("twice", impl, "CPU")
    yield torch.ops.layoutcheck.twice.default
    lib._destroy()


def test_check_layout_results_catches_a_kernel_reading_an_argument_as_compact(compact_reader):
    for honour in (True, False):
        args = {"x": torch.randn(3, 4), "w": torch.randn(4), "honour": honour}
        laid = t.with_layout(args, "strided-w")
        if honour:
            t.check_layout_results(compact_reader, args, laid, 0.0, 0.0)
        else:
            with pytest.raises(AssertionError, match="layoutcheck::twice: output 0 with w relaid"):
                t.check_layout_results(compact_reader, args, laid, 0.0, 0.0)


def test_cuda_graph_check_skips_without_the_caching_allocator(monkeypatch):
    monkeypatch.setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    with pytest.raises(pytest.skip.Exception, match="caching allocator"):
        _suite(lambda q, k: q + k).check_cuda_graph("s", "default", "fp32", False)
