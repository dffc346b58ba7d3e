"""The modules copied into every generated package, tested where they live, and the literal
filters through which spec text reaches generated code."""

from __future__ import annotations

import pytest
import torch

from codegen.emit.literals import docstring, py
from codegen.runtime.runtime import constraint_error, tensor_error, value_error

HOSTILE = [
    'ends in a quote"',
    'see "limits"',
    "triple \"\"\" inside and ''' too",
    "trailing backslash \\",
    "\\N{BULLET} \\x41 \\u00e9 \\",
    "{braces} {{double}} {0!r} %s %(x)s",
    "é 中文 🙂 \u2028 \x85 tab\there",
    '"); import os; os.system("touch PWNED") #',
    "{{ 7*7 }} {% raw %}",
    '""',
    '"',
    "\\",
    "line\n\n  indented\nlast",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_py_reads_back_as_the_same_value(text):
    for value in (text, (text,), [text, 1, 2.5, None, True], float("inf"), -float("inf")):
        assert eval(py(value)) == value  # noqa: S307 - the literal is the point


def test_py_refuses_values_it_cannot_write():
    with pytest.raises(TypeError, match="no Python literal for object"):
        py(object())


@pytest.mark.parametrize("text", HOSTILE)
def test_docstring_reads_back_as_the_same_text(text):
    source = f'"""{docstring(text, indent="")}"""'
    compiled = compile(source, "<docstring>", "eval")
    assert eval(compiled) == text  # noqa: S307


def test_docstring_indents_later_lines_and_leaves_blank_lines_empty():
    assert docstring("first\n\nsecond") == "first\n\n    second"


def _t(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


def test_tensor_error_names_a_value_that_is_not_a_tensor():
    err = tensor_error("op", "x", [1, 2], "[B]", None, rank=1, dtypes=(torch.float32,))
    assert isinstance(err, TypeError) and str(err) == "op: x must be a Tensor, got list"


def test_tensor_error_lists_allowed_dtypes():
    err = tensor_error(
        "op",
        "x",
        _t(2, dtype=torch.int32),
        "[B]",
        None,
        rank=1,
        dtypes=(torch.bfloat16, torch.float16, torch.float32),
        devices=("cpu",),
    )
    assert str(err) == "op: x must have dtype bfloat16, float16 or float32, got int32"


def test_tensor_error_names_the_tensor_whose_dtype_and_device_it_must_share():
    q = _t(2)
    err = tensor_error(
        "op",
        "k",
        _t(2, dtype=torch.float64),
        "[B]",
        (2,),
        rank=1,
        dtype_of=("q", q),
        device_of=("q", q),
    )
    assert str(err) == "op: k must have the dtype of q (float32), got float64"
    err = tensor_error(
        "op", "k", _t(2).to("meta"), "[B]", (2,), rank=1, dtype_of=("q", q), device_of=("q", q)
    )
    assert str(err) == "op: k must be on the device of q (cpu), got meta"


def test_tensor_error_supported_devices():
    err = tensor_error(
        "op",
        "x",
        _t(2).to("meta"),
        "[B]",
        None,
        rank=1,
        dtypes=(torch.float32,),
        devices=("cuda", "cpu"),
    )
    assert str(err) == "op: x must be on a cuda or cpu device, got meta"


@pytest.mark.parametrize(
    "value, shape, expected, rank, variadic, message",
    [
        (_t(2, 3), "[B]", None, 1, False, "op: x must have shape [B] (1 dim), got (2, 3)"),
        (_t(2), "[B, T]", None, 2, False, "op: x must have shape [B, T] (2 dims), got (2,)"),
        (
            _t(),
            "[..., D]",
            None,
            1,
            True,
            "op: x must have shape [..., D] (1 or more dims), got ()",
        ),
        (_t(2, 5), "[B, T]", (2, 4), 2, False, "op: x must have shape [B, T] = (2, 4), got (2, 5)"),
        (
            _t(7, 2, 5),
            "[..., H]",
            (7, 2, 6),
            1,
            True,
            "op: x must have shape [..., H] = (7, 2, 6), got (7, 2, 5)",
        ),
    ],
)
def test_tensor_error_shapes(value, shape, expected, rank, variadic, message):
    err = tensor_error(
        "op",
        "x",
        value,
        shape,
        expected,
        rank=rank,
        variadic=variadic,
        dtypes=(torch.float32,),
        devices=("cpu",),
    )
    assert isinstance(err, ValueError) and str(err) == message


def test_tensor_error_without_a_cause_says_it_is_a_bug():
    err = tensor_error(
        "op", "x", _t(2), "[B]", (2,), rank=1, dtypes=(torch.float32,), devices=("cpu",)
    )
    assert isinstance(err, AssertionError) and "generator bug" in str(err)


def test_constraint_and_value_errors_keep_the_spec_wording():
    text = 'needs "B == 1" {B} \\'
    assert str(constraint_error("op", text, B=2, K=3)) == f"op: {text}; got B=2, K=3"
    err = value_error("op", "kind", ("a", 'b"'), "c")
    assert str(err) == "op: kind must be one of 'a', 'b\"', got 'c'"


def test_check_mutated_refuses_what_torch_in_place_operators_refuse():
    from codegen.runtime.runtime import check_mutated

    state = torch.zeros(2, 4, 8)
    check_mutated("op", "state", state, {"q": torch.zeros(2, 4), "n": None})
    buf = torch.zeros(200)
    check_mutated("op", "state", buf[:64].view(2, 4, 8), {"k": buf[64:72]})  # disjoint views
    with pytest.raises(
        RuntimeError, match="^op: state is updated in place and shares memory with q;"
    ):
        check_mutated("op", "state", state, {"q": state[:, :, 0]})
    with pytest.raises(
        RuntimeError, match="^op: state is updated in place but its elements overlap"
    ):
        check_mutated("op", "state", torch.zeros(1, 4, 8).expand(2, 4, 8), {})
    leaf = torch.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="^op: state is a leaf tensor that requires grad"):
        check_mutated("op", "state", leaf, {})
    with torch.no_grad():
        check_mutated("op", "state", leaf, {})  # as optimizers update parameters


@pytest.mark.parametrize(
    "text", ["nul \x00 byte", "carriage\rreturn", "crlf\r\nline", "bell\x07 del\x7f"]
)
def test_docstring_escapes_control_characters(text):
    source = f'"""{docstring(text, indent="")}"""'
    assert "\x00" not in source and "\r" not in source
    assert eval(compile(source, "<docstring>", "eval")) == text  # noqa: S307


class _OnCuda(torch.Tensor):
    # Stands for a CUDA tensor on a machine without one: on_cuda reads only ``is_cuda``.
    is_cuda = True


def test_on_cuda_reads_the_first_tensor_present():
    from codegen.runtime.runtime import on_cuda

    cpu = torch.zeros(1)
    gpu = torch.Tensor._make_subclass(_OnCuda, torch.zeros(1))
    assert gpu.is_cuda and not cpu.is_cuda
    assert on_cuda(None, gpu) and on_cuda([], [None, gpu], cpu) and on_cuda((gpu,), cpu)
    assert not on_cuda(cpu, gpu) and not on_cuda([None, cpu], gpu) and not on_cuda(None, cpu)
    # Nothing present: the CPU shim, as for a call without tensors.
    assert not on_cuda() and not on_cuda(None, [], [None])
