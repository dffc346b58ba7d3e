"""The kernels' ABI helper (``attnops_kernels._abi``, Note [kernel ABI]) agrees with the layout
runtime of the generated package, and reaches it under any package name."""

from __future__ import annotations

import importlib.util
import sys
import warnings

import pytest
import torch

from attnops import _layout
from attnops_kernels import _abi
from codegen.runtime import layout

BIG = 2**31  # one past INT32_MAX


def _meta(shape, stride=None):
    t = torch.empty(shape, device="meta")
    return t if stride is None else t.as_strided(shape, stride)


# Each entry: the tensors one launcher call hands to the predicate.
TABLE = {
    "compact": lambda: (torch.zeros(4, 8),),
    "permuted": lambda: (torch.zeros(2, 3, 4).permute(2, 0, 1),),
    "transposed": lambda: (torch.zeros(4, 8).t(),),
    "strided": lambda: (torch.zeros(4, 10)[:, ::2],),
    "misaligned": lambda: (torch.zeros(33)[1:].view(4, 8),),
    "none-and-empty": lambda: (None, torch.zeros(0, 5), _meta((0, BIG))),
    "stride-0-wide": lambda: (torch.zeros(2, 1).expand(2, 2**30),),
    "size-past-int32": lambda: (torch.zeros(1).expand(BIG),),
    "size-int32-max": lambda: (_meta((BIG - 1,)),),
    "stride-past-int32": lambda: (_meta((2, 4), (BIG, 1)),),
    "stride-int32-max": lambda: (_meta((1, 2), (BIG - 1, 1)),),
    "span-past-int32": lambda: (_meta((2, 2**30), (2**30, 1)),),
    "span-int32-max": lambda: (_meta((2, 2**30), (2**30 - 1, 1)),),
    "small-then-huge": lambda: (torch.zeros(4, 8), _meta((2**16, 2**15))),
}
EXPECTED_INT64 = {
    "size-past-int32",
    "stride-past-int32",
    "span-past-int32",
    "small-then-huge",
}


@pytest.mark.parametrize("case", sorted(TABLE))
def test_both_sides_agree_on_the_int64_abi(case):
    tensors = TABLE[case]()
    expected = case in EXPECTED_INT64
    assert layout.requires_int64_abi(*tensors) is expected
    assert _layout.requires_int64_abi(*tensors) is expected
    assert _abi.exceeds_int32(*tensors) is expected
    assert _abi.requires_int64_abi(*tensors) is expected
    with _layout.force_int64_abi():
        assert _abi.requires_int64_abi(*tensors)
        assert _abi.exceeds_int32(*tensors) is expected


def _span(t: torch.Tensor) -> int:
    return 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))


def test_the_table_sits_on_both_sides_of_each_bound():
    assert _span(TABLE["span-int32-max"]()[0]) == BIG - 1
    assert _span(TABLE["span-past-int32"]()[0]) == BIG
    assert _span(TABLE["size-int32-max"]()[0]) == BIG - 1


def test_reports_and_the_int64_switch_reach_the_generated_package():
    small = torch.zeros(4, 8)
    with _layout.dispatch_trace() as trace:
        _abi.note_signature("scale_fwd", "general/int32")
        _abi.note_compile("scale_fwd", "(torch.float32, 8)")
    assert trace == [
        ("scale_fwd", "signature", "general/int32"),
        ("scale_fwd", "compile", "(torch.float32, 8)"),
    ]
    with _layout.force_int64_abi():
        assert _abi.requires_int64_abi(small)
    assert not _abi.requires_int64_abi(small)


def test_any_package_name_is_reached(monkeypatch):
    """A project generating into another package gets the kernels' reports too."""
    spec = importlib.util.spec_from_file_location("otherops._layout", layout.__file__)
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    small = torch.zeros(4, 8)
    assert not _abi.requires_int64_abi(small)
    monkeypatch.setitem(sys.modules, "otherops._layout", other)
    with other.dispatch_trace() as trace, _layout.dispatch_trace() as ours:
        _abi.note_signature("scale_fwd", "compact/int64")
        with other.force_int64_abi():
            assert _abi.requires_int64_abi(small)
    assert trace == ours == [("scale_fwd", "signature", "compact/int64")]
    monkeypatch.delitem(sys.modules, "otherops._layout")
    with other.force_int64_abi(), other.dispatch_trace() as trace:
        assert not _abi.requires_int64_abi(small)  # unloaded: no longer consulted
        _abi.note_compile("scale_fwd", "key")
    assert trace == []


def test_warn_once(monkeypatch):
    monkeypatch.setattr(_abi, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _abi.warn_once("k", "first")
        _abi.warn_once("k", "again")
        _abi.warn_once("j", "other")
    assert [(w.category, str(w.message)) for w in caught] == [
        (RuntimeWarning, "first"),
        (RuntimeWarning, "other"),
    ]
