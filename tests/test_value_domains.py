"""Value domains (``domain: [lower, upper]`` of an input, docs/spec.md "Value domains"): what the
spec accepts and refuses, what the generated tests make of it, the helpers those tests call, and
chunk_gla at the edges of its log-decay domain, called directly (a whole chunk of resets, packed
sequences) and with a non-finite scale."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from specs import CHUNK, replace

from codegen.pipeline import generate, parse
from codegen.runtime import testing as T
from codegen.runtime import testing_cases as TC
from codegen.runtime import testing_edges as TE
from codegen.spec.errors import SpecError

G = "      g: {shape: [B, T, H], dtypes: [float32]}"
INF = math.inf


def _g(extra: str, text: str = CHUNK) -> str:
    return replace(G, G[:-1] + ", " + extra + "}", text)


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    return [str(d) for d in info.value.diagnostics]


def _at(text: str, fragment: str) -> str:
    """``ops.yaml:LINE:COL`` of the only line holding ``fragment``."""
    (line,) = [i for i, s in enumerate(text.splitlines(), 1) if fragment in s]
    return f"ops.yaml:{line}:{text.splitlines()[line - 1].index(fragment) + 1}"


@pytest.mark.parametrize(
    "written, bounds",
    [
        ("[-.inf, 0]", (-INF, 0.0)),
        ('["-inf", "0"]', (-INF, 0.0)),
        ('["-Inf", "+inf"]', (-INF, INF)),
        ("[-.inf, .inf]", (-INF, INF)),
        ("[-1e4, 1.0e-3]", (-1e4, 1e-3)),  # YAML 1.1 reads -1e4 as a string
        ("[-5, 5]", (-5.0, 5.0)),
        ("[0, 0]", (0.0, 0.0)),
        ("[-1.0e+60, 0]", (-1e60, 0.0)),  # integers past 64 bits are refused (docs/spec.md, Limits)
    ],
)
def test_accepted_spellings(written, bounds):
    (op,) = parse(_g(f"domain: {written}"), "ops.yaml").ops
    assert op.input("g").domain == bounds
    assert op.input("q").domain is None


@pytest.mark.parametrize(
    "written, at, message",
    [
        (
            "domain: -.inf",
            "-.inf",
            "'domain' of input 'g' must be a list of two bounds [lower, upper], such as "
            "[-.inf, 0]; got float -inf",
        ),
        (
            "domain: [-.inf, 0, 1]",
            "[-.inf, 0, 1]",
            "'domain' of input 'g' must be a list of two bounds [lower, upper], such as "
            "[-.inf, 0]; got a list of 3",
        ),
        (
            "domain: [minus, 0]",
            "minus",
            "lower bound of the domain of input 'g' must be a number or an infinity (-.inf, "
            '.inf, "-inf", "inf"); got str \'minus\'',
        ),
        (
            "domain: [-.inf, true]",
            "true",
            "upper bound of the domain of input 'g' must be a number or an infinity (-.inf, "
            '.inf, "-inf", "inf"); got bool True',
        ),
        (
            "domain: [.nan, 0]",
            ".nan",
            "lower bound of the domain of input 'g' cannot be NaN",
        ),
        (
            'domain: ["nan", 0]',
            '"nan"',
            "lower bound of the domain of input 'g' must be a number or an infinity (-.inf, "
            '.inf, "-inf", "inf"); got str \'nan\'',
        ),
        (
            "domain: [1, -1]",
            "[1, -1]",
            "the domain of input 'g' is empty: its lower bound 1 is above its upper bound -1",
        ),
    ],
)
def test_bad_domains_are_located(written, at, message):
    text = _g(written)
    assert _errors(text) == [f"{_at(text, at)}: error: [chunk] {message}"]


def test_a_domain_needs_a_floating_input():
    cu = "      cu_seqlens: {shape: [S], dtypes: [int32], differentiable: false}"
    text = replace(cu, cu[:-1] + ", domain: [0, 9]}", CHUNK)
    assert _errors(text) == [
        f"{_at(text, 'domain:')}: error: [chunk] 'domain' of input 'cu_seqlens' applies only to "
        "floating inputs; its dtypes are int32"
    ]
    # An input that takes another's dtype is floating when that one is.
    k = "      k: {shape: [B, T, H, K], dtype: q}"
    (op,) = parse(replace(k, k[:-1] + ", domain: [-1, 1]}", CHUNK), "ops.yaml").ops
    assert op.input("k").domain == (-1.0, 1.0)


def _tests_module(text: str) -> str:
    return generate(text, "ops.yaml", "ops.yaml")["tests/test_chunk.py"]


def test_generated_tests_hold_the_domains_and_their_test():
    tests = _tests_module(_g("init: logsigmoid, domain: [-.inf, 0]"))
    assert 'DOMAINS = {"g": ("-inf", "0.0")}' in tests
    assert "_tc.domain_cases(SAMPLES, DOMAINS, None, CONFIGS, VARIANTS)" in tests
    assert "def test_domain_edges_match_reference(sample, config, name, value):" in tests
    # logsigmoid draws inside [-inf, 0]: nothing is clamped.
    assert "into_domain" not in tests
    assert "DOMAINS" not in _tests_module(CHUNK)


def test_drawn_values_are_clamped_into_a_narrower_domain():
    tests = _tests_module(_g("domain: [-1, 0.5]"))
    assert '    g = _t.into_domain(g, ("-1.0", "0.5"))\n' in tests
    assert tests.index("g = _t.randn(") < tests.index("g = _t.into_domain(")
    x = T.into_domain(torch.tensor([-3.0, 0.25, 2.0]), ("-1.0", "0.5"))
    assert x.tolist() == [-1.0, 0.25, 0.5]
    assert T.into_domain(None, ("-1.0", "0.5")) is None


@pytest.mark.parametrize(
    "domain, values, bounds",
    [
        (("-inf", "0.0"), [-INF, -1e10, -1e4, 0.0], [-INF, 0.0]),
        (("-inf", "inf"), [-INF, -1e10, -1e4, 0.0, 1e4, 1e10, INF], [-INF, INF]),
        (("-5.0", "0.0"), [-5.0, 0.0], [-5.0, 0.0]),
        (("-1.0", "2.0"), [-1.0, 0.0, 2.0], [-1.0, 2.0]),
        (("1.0", "inf"), [1.0, 1e4, 1e10, INF], [1.0, INF]),
        (("-inf", "-1e+20"), [-INF, -1e20], [-INF, -1e20]),
    ],
)
def test_edge_values(domain, values, bounds):
    assert TC.domain_values(domain) == values
    assert TC.domain_values(domain, bounds_only=True) == bounds


def test_domain_cases_add_the_bounds_on_packed_samples():
    samples = {"a": {"T": 5}, "b": {"T": 9, "cu_seqlens": (0, 4, 9)}, "c": {"T": 7}}
    ids = [p.id for p in TC.domain_cases(samples, {"g": ("-inf", "0.0")}, "cu_seqlens")]
    assert ids == [
        "a-default-g=-inf",
        "a-default-g=-1e+10",
        "a-default-g=-10000",
        "a-default-g=0",
        "b-default-g=-inf",
        "b-default-g=0",
    ]
    assert len(TC.domain_cases(samples, {"g": ("-inf", "0.0")}, None)) == 4


def test_domain_cases_try_the_bounds_of_each_variant():
    configs = TC.configs({"kind": ("a", "b")}, ["h0"], "flag")
    cases = TC.domain_cases({"s": {}}, {"g": ("-5.0", "0.0")}, None, configs, ("kind",))
    assert [p.id for p in cases] == ["s-default-g=-5", "s-default-g=0", "s-b-g=-5", "s-b-g=0"]
    cases = TC.domain_cases({"s": {}}, {"g": ("-inf", "0.0")}, None, configs, ("kind",))
    assert [p.id for p in cases][3:] == ["s-default-g=0", "s-b-g=-inf", "s-b-g=0"]
    assert {p.values[1] for p in cases} == {"default", "b"}


@pytest.mark.parametrize(
    "shape, dim, picked",
    [
        ((2, 70, 1), 1, [0, 23, *range(47, 70)]),
        ((1, 80, 2), 1, [0, 26, *range(54, 80)]),
        ((3,), 0, [0, 1, 2]),
        ((2, 2), 0, [0, 1]),  # the first of equal dims
        ((4, 1), 0, [0, 1, 3]),
    ],
)
def test_edge_positions(shape, dim, picked):
    x = torch.zeros(shape)
    got = TE.with_edge(x, -INF)
    assert x.eq(0).all(), "the input is not modified"
    hit = got.isinf().movedim(dim, 0).reshape(shape[dim], -1)
    assert hit.all(1).nonzero().flatten().tolist() == picked
    assert not hit[[i for i in range(shape[dim]) if i not in picked]].any()


def test_comparison_at_the_edges():
    ref = torch.tensor([1.0, -INF, INF, math.nan])
    TE.assert_close_at_edge(torch.tensor([1.0, -INF, INF, 7.0]), ref, 0, 0, "y", True)
    with pytest.raises(AssertionError, match=r"y: 1 of 4 entries are not finite where the "):
        TE.assert_close_at_edge(torch.tensor([math.nan, -INF, INF, 0.0]), ref, 0, 0, "y", True)
    with pytest.raises(AssertionError, match=r"not the reference's infinity \(first at \(2,\)"):
        TE.assert_close_at_edge(torch.tensor([1.0, -INF, -INF, 0.0]), ref, 0, 0, "y", True)
    with pytest.raises(AssertionError, match="y: Tensor-likes are not (close|equal)"):
        TE.assert_close_at_edge(torch.tensor([1.5, -INF, INF, 0.0]), ref, 0, 0, "y", True)
    # Gradients: the reference's infinities are not compared.
    TE.assert_close_at_edge(torch.tensor([1.0, 0.0, math.nan, 0.0]), ref, 0, 0, "dy", False)


# chunk_gla at the edges of g's domain, called directly: shapes the generated tests do not have.

DEVICE = T.DEVICE


def _chunk_gla_case(T_, cu, places, value, seed=0):
    from attnops_kernels.chunk_gla import reference as R
    from attnops_kernels.chunk_gla import triton as C

    gen = torch.Generator().manual_seed(seed)
    B, H, K, V = 1, 2, 16, 16
    N = len(cu) - 1 if cu is not None else B

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(DEVICE)

    q, k, v = rnd(B, T_, H, K), rnd(B, T_, H, K), rnd(B, T_, H, V)
    g = F.logsigmoid(rnd(B, T_, H))
    g[:, places] = value
    h0, do, dht = rnd(N, H, K, V), rnd(B, T_, H, V), rnd(N, H, K, V)
    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int32, device=DEVICE)
    o, h, ht = C.chunk_gla_fwd(q, k, v, g, None, h0, cu_t, True)
    grads = C.chunk_gla_bwd(q, k, v, g, None, h0, cu_t, do, dht, h)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, h0)]
    ro, rht = R.chunk_gla_ref(*leaves[:4], None, leaves[4], True, cu_t)
    want = torch.autograd.grad((ro * do).sum() + (rht * dht).sum(), leaves)
    for name, got, ref in [("o", o, ro), ("final_state", ht, rht)]:
        TE.assert_close_at_edge(got, ref, 1e-4, 1e-4, name, True)
    for name, got, ref in zip(["dq", "dk", "dv", "dg", "dh0"], grads, want, strict=True):
        TE.assert_close_at_edge(got, ref, 2e-4, 1e-4, name, False)


def test_chunk_gla_a_whole_chunk_of_resets():
    # Tokens 64..127 (the whole second chunk) and the last token; one more chunk follows.
    _chunk_gla_case(130, None, [*range(64, 128), 129], -INF)


def test_chunk_gla_resets_in_packed_sequences():
    # The first token of each sequence, one inside, and a run across a sequence boundary and
    # the end of a chunk.
    _chunk_gla_case(130, [0, 7, 70, 130], [0, 7, 30, *range(60, 75), 129], -INF, seed=1)


@pytest.mark.parametrize("scale", [INF, -INF, math.nan])
def test_chunk_gla_refuses_a_non_finite_scale(scale):
    from attnops_kernels.chunk_gla import triton as C

    q = torch.randn(1, 4, 1, 16, device=DEVICE)
    g = torch.zeros(1, 4, 1, device=DEVICE)
    import attnops

    for call in (
        lambda: C.chunk_gla_fwd(q, q, q, g, scale, None, None, False),
        lambda: C.chunk_gla_bwd(q, q, q, g, scale, None, None, q, None),
        lambda: attnops.chunk_gla(q, q, q, g, scale=scale),
        lambda: attnops.chunk_gla(q.requires_grad_(), q, q, g, scale=scale),
    ):
        with pytest.raises(ValueError, match=r"^chunk_gla: scale must be finite, got"):
            call()


class _Twice(torch.autograd.Function):
    """y = 2 exp(x); with ``nan_grad`` its backward gives NaN at x = -inf (0 * x), as a kernel
    that multiplies by its input there would."""

    @staticmethod
    def forward(ctx, x, nan_grad):
        ctx.save_for_backward(x)
        ctx.nan_grad = nan_grad
        return 2 * torch.exp(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        extra = 0 * x if ctx.nan_grad else 0
        return grad * 2 * torch.exp(x) * (1 + extra), None


def _suite(fn):
    def make_inputs(sample, dtype, config="default"):
        return {"x": torch.linspace(-1, 0, 12).reshape(3, 4)}

    return T.Suite(
        fn=fn,
        reference=lambda x: 2 * torch.exp(x),
        make_inputs=make_inputs,
        configs={"default": {}},
        flag=None,
        public_outputs=("y",),
        differentiable=("x",),
        mutated=(),
        tolerance={"fp32": (1e-6, 1e-6)},
        grad_tolerance={"fp32": (1e-6, 1e-6)},
        seed=0,
        op="twice",
    )


@pytest.mark.parametrize("value", TC.domain_values(("-inf", "0.0")))
def test_check_domain_edge_passes_a_kernel_that_holds_at_the_edges(value):
    TE.check_domain_edge(_suite(lambda x: _Twice.apply(x, False)), "s", "fp32", "x", value, True)


def test_check_domain_edge_fails_a_kernel_that_breaks_at_the_edges():
    forward_nan = _suite(lambda x: 2 * torch.exp(x) + 0 * x)
    with pytest.raises(AssertionError, match=r"twice with x = -inf: output y: 9 of 12 entries"):
        TE.check_domain_edge(forward_nan, "s", "fp32", "x", -INF, True)
    backward_nan = _suite(lambda x: _Twice.apply(x, True))
    TE.check_domain_edge(backward_nan, "s", "fp32", "x", -1e10, True)
    with pytest.raises(AssertionError, match=r"twice with x = -inf: grad of x: 9 of 12 entries"):
        TE.check_domain_edge(backward_nan, "s", "fp32", "x", -INF, True)
