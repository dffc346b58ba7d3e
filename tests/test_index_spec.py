"""The index-input declaration (``indexes: <dim>``, ``negative: skip``): what the spec accepts,
what the generated public function and tests make of it, and the located errors for the rest."""

from __future__ import annotations

import re

import pytest

from codegen.pipeline import generate, parse
from codegen.spec.errors import SpecError

SPEC = """\
version: 1
namespace: demo
ops:
  gather:
    doc: Rows of x.
    forward:
      schema: "(Tensor x, Tensor ids, Tensor? cache=None) -> Tensor out"
      launchers:
        cpu: attnops_kernels.l2norm.triton:l2norm_fwd
    inputs:
      x: {shape: [V, D], dtypes: [float32]}
      ids: {shape: [N], dtypes: [int32, int64], indexes: V}
      cache: {shape: [M, D], dtypes: [float32]}
    outputs:
      out: {shape: [N, D], dtype: x}
    reference: attnops_kernels.l2norm.reference:l2norm_ref
    tests:
      samples:
        - {V: 4, D: 3, N: 5, M: 2}
      tolerance:
        float32: [0, 0]
"""
IDS = "      ids: {shape: [N], dtypes: [int32, int64], indexes: V}"
X = "      x: {shape: [V, D], dtypes: [float32]}"
SAMPLE = "        - {V: 4, D: 3, N: 5, M: 2}"


def _replace(old: str, new: str, text: str = SPEC) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _ids(declaration: str, text: str = SPEC) -> str:
    return _replace(IDS, f"      ids: {declaration}", text)


def _files(text: str) -> dict[str, str]:
    return generate(text, "ops.yaml", "ops.yaml")


def test_the_public_function_checks_the_entries_after_every_shape():
    module = _files(SPEC)["demo/gather.py"]
    call = '_check_indexes("gather", "ids", ids, V, "V", False)'
    assert call in module
    # After the shape checks of every input (V is read from x), before the launch.
    assert module.index("cache.shape") < module.index(call) < module.index("_gather_fwd(")
    assert "from ._runtime import check_indexes as _check_indexes" in module
    assert "Entries index ``V``: ``0 <= i < V``." in module


def test_the_eager_fast_path_checks_the_entries_first():
    text = _replace("    doc: Rows of x.\n", "    doc: Rows of x.\n    eager_fast_path: true\n")
    module = _files(text)["demo/gather.py"]
    call = '_check_indexes("gather", "ids", ids, V, "V", False)'
    assert module.index(call) < module.index("_direct_ok(")


def test_negative_skip_and_an_optional_index_input():
    text = _ids("{shape: [N], dtypes: [int32], indexes: V, negative: skip}")
    text = _replace("Tensor x, Tensor ids,", "Tensor x, Tensor? ids=None,", text)
    text = _replace("out: {shape: [N, D]", "out: {shape: [V, D]", text)
    module = _files(text)["demo/gather.py"]
    assert re.search(
        r'if ids is not None:\n\s+_check_indexes\("gather", "ids", ids, V, "V", True\)', module
    )
    assert "or negative to skip the slot." in module


def test_an_operator_without_index_inputs_reads_no_entries():
    module = _files(_ids("{shape: [N], dtypes: [int32]}"))["demo/gather.py"]
    assert "_check_indexes" not in module


def test_the_package_exports_the_switch():
    init = _files(SPEC)["demo/__init__.py"]
    assert "from ._runtime import set_index_check, set_offsets_check" in init
    assert '"set_index_check",' in init


def test_the_tests_draw_entries_in_range_and_sweep_the_other_inputs_dtypes():
    tests = _files(SPEC)["tests/test_gather.py"]
    assert "ids = _t.index(_gen, (N,), torch.int32, V, skip=False)" in tests
    # The index input allows more dtypes than x, but the swept dtypes are x's.
    assert 'DTYPES = {\n    "fp32": torch.float32,\n}' in tests
    assert '"ids": ("V", "x", 0, False, ("int32", "int64")),' in tests
    assert "def test_rejects_out_of_range_indexes(name):" in tests


@pytest.mark.parametrize(
    "declaration, sample, zero_sizes",
    [
        # Without skip no entry survives V = 0: refused; D = 0 and N = 0 are computed.
        ("{shape: [N], dtypes: [int32], indexes: V}", SAMPLE, '{"V": "refused", "D": "computed"'),
        # With skip the drawn entries are all negative when V is 0.
        (
            "{shape: [N], dtypes: [int32], indexes: V, negative: skip}",
            SAMPLE,
            '{"V": "computed", "D": "computed"',
        ),
        # Spelled-out entries: all negative (with skip) survive V = 0, any other does not.
        (
            "{shape: [N], dtypes: [int32], indexes: V, negative: skip}",
            "        - {V: 4, D: 3, M: 2, ids: [-1, -3]}",
            '{"V": "computed", "D": "computed"',
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: V, negative: skip}",
            "        - {V: 4, D: 3, M: 2, ids: [-1, 0]}",
            '{"V": "refused", "D": "computed"',
        ),
    ],
)
def test_zero_sizes_of_an_indexed_dim(declaration, sample, zero_sizes):
    text = _replace(SAMPLE, sample, _ids(declaration))
    tests = _files(text)["tests/test_gather.py"]
    assert f"ZERO_SIZES = {zero_sizes}" in tests


def test_spelled_out_entries_in_range_are_accepted():
    text = _replace(SAMPLE, "        - {V: 4, D: 3, M: 2, ids: [3, 0, 0, 2]}")
    tests = _files(text)["tests/test_gather.py"]
    assert '"ids": (3, 0, 0, 2)' in tests
    assert "ids = torch.tensor(ids, dtype=torch.int32, device=_t.DEVICE)" in tests


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    return [str(d) for d in info.value.diagnostics]


def _at(text: str, line: int, fragment: str) -> str:
    """``ops.yaml:LINE:COL`` of ``fragment`` on 1-based ``line`` of ``text``."""
    col = text.splitlines()[line - 1].index(fragment) + 1
    return f"ops.yaml:{line}:{col}"


@pytest.mark.parametrize(
    "declaration, at, message",
    [
        (
            "{shape: [N], dtypes: [float32], indexes: V}",
            "V}",
            "index input 'ids' must allow only int32 and int64 dtypes (the dtypes torch indexes "
            "with)",
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: W}",
            "W}",
            "index input 'ids' indexes dim 'W', which no other required input binds; dims: V, D",
        ),
        (
            # N is the index input's own size: nothing else bounds its entries.
            "{shape: [N], dtypes: [int32], indexes: N}",
            "N}",
            "index input 'ids' indexes dim 'N', which no other required input binds; dims: V, D",
        ),
        (
            # M is bound by an optional input only: the bound is unknown without it.
            "{shape: [N], dtypes: [int32], indexes: M}",
            "M}",
            "index input 'ids' indexes dim 'M', which no other required input binds; dims: V, D",
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: 3}",
            "3}",
            "'indexes' of input 'ids' must name the dim its entries index",
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: V, offsets: V}",
            "indexes:",
            "input 'ids' cannot hold both offsets and indexes; keep one",
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: V, differentiable: true}",
            "true",
            "index input 'ids' cannot be differentiable; drop 'differentiable: true'",
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: V, negative: wrap}",
            "wrap",
            "'negative' of input 'ids' must be one of: skip; got 'wrap' (without it, negative "
            "entries are refused)",
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: V, init: randn}",
            "randn",
            "index input 'ids' draws its test values in range; drop 'init: randn' (or write "
            "'init: index')",
        ),
        (
            "{shape: [N], dtypes: [int32], indexes: V, mutated: true}",
            "indexes:",
            "index input 'ids' cannot be mutated: its entries are checked before the launch",
        ),
    ],
)
def test_bad_index_declarations_are_located(declaration, at, message):
    text = _ids(declaration)
    assert _errors(text) == [f"{_at(text, 12, at)}: error: [gather] {message}"]


@pytest.mark.parametrize(
    "declaration, at, message",
    [
        (
            "{shape: [V, D], dtypes: [float32], negative: skip}",
            "skip",
            "'negative' of input 'x' applies only to an index input; add 'indexes: <dim>'",
        ),
        (
            "{shape: [V, D], dtypes: [float32], init: index}",
            "index}",
            "init 'index' of input 'x' needs 'indexes: <dim>' (the range to draw from)",
        ),
    ],
)
def test_index_keys_on_another_input_are_located(declaration, at, message):
    text = _replace(X, f"      x: {declaration}")
    assert _errors(text) == [f"{_at(text, 11, at)}: error: [gather] {message}"]


def test_a_list_input_cannot_hold_indexes():
    text = _ids("{shape: [N], dtypes: [int32], indexes: V, list: true}")
    text = _replace("Tensor x, Tensor ids,", "Tensor x, Tensor[] ids,", text)
    text = _replace("out: {shape: [N, D]", "out: {shape: [V, D]", text)
    assert _errors(text) == [
        f"{_at(text, 12, 'V,')}: error: [gather] list input 'ids' cannot hold indexes"
    ]


@pytest.mark.parametrize(
    "sample, message",
    [
        (
            "{V: 4, D: 3, M: 2, ids: [0, 4]}",
            "sample gives ids[1] = 4, which is out of range for V = 4 (valid: 0 <= i < 4)",
        ),
        (
            "{V: 4, D: 3, M: 2, ids: [2, -1]}",
            "sample gives ids[1] = -1, which is out of range for V = 4 (valid: 0 <= i < 4)",
        ),
        (
            "{V: 4, D: 3, M: 2, ids: [0, 1.5]}",
            "sample gives ids[1] = 1.5; index values must be integers",
        ),
        ("{V: 4, D: 3, N: 0, M: 2}", None),
    ],
)
def test_spelled_out_entries_are_checked_when_generating(sample, message):
    text = _replace(SAMPLE, f"        - {sample}")
    if message is None:  # no sample gives ids an entry: located at 'indexes'
        where, message = (
            _at(text, 12, "V}"),
            ("no test sample gives 'ids' an entry, so the out-of-range index tests would not run"),
        )
    else:
        where = _at(text, 19, "{")
    assert _errors(text) == [f"{where}: error: [gather] {message}"]


def test_negative_spelled_out_entries_are_allowed_with_skip():
    text = _ids("{shape: [N], dtypes: [int32], indexes: V, negative: skip}")
    text = _replace(SAMPLE, "        - {V: 4, D: 3, M: 2, ids: [2, -1, -9]}", text)
    parse(text, "ops.yaml")
    too_far = _replace("ids: [2, -1, -9]", "ids: [2, -1, 4]", text)
    assert _errors(too_far) == [
        f"{_at(too_far, 19, '{')}: error: [gather] sample gives ids[2] = 4, which is out of "
        "range for V = 4 (valid: 0 <= i < 4, or negative to skip)"
    ]


def test_a_required_index_input_is_spelled_out_by_every_sample_or_none():
    text = _replace(SAMPLE, SAMPLE + "\n        - {V: 4, D: 3, M: 2, ids: [1]}")
    assert _errors(text) == [
        f"{_at(text, 19, '{')}: error: [gather] sample does not spell out 'ids', which another "
        "sample does; a required input is spelled out by every sample or by none"
    ]


def test_only_a_1d_index_input_can_be_spelled_out():
    text = _ids("{shape: [N, N], dtypes: [int32], indexes: V}")
    text = _replace(SAMPLE, "        - {V: 4, D: 3, M: 2, ids: [1, 2]}", text)
    assert _errors(text) == [
        f"{_at(text, 19, '{')}: error: [gather] sample spells out index input 'ids' of shape "
        "[N, N]; only a 1-D input can be spelled out"
    ]


def test_the_switch_is_a_reserved_name():
    text = _replace("  gather:\n", "  set_index_check:\n")
    assert any("'set_index_check' is reserved by the generated code" in e for e in _errors(text))
