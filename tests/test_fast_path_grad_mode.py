"""The eager fast path of an operator without a backward runs its launcher with grad mode off
and restores the caller's mode afterwards, also when the launcher raises; where no input dtype
can require grad it leaves grad mode alone (Note [grad mode on the fast path] in the generated
``_runtime``)."""

from __future__ import annotations

import importlib

import pytest
import torch

import attnops
from codegen.pipeline import analyse
from codegen.views.op.module import op_view

# CPU tensors reach Triton only under the interpreter, which conftest turns on without a GPU.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _step_inputs():
    B, H, K, V = 1, 2, 4, 8
    q, k = (torch.randn(B, H, K, device=DEVICE, requires_grad=True) for _ in range(2))
    g = torch.nn.functional.logsigmoid(torch.randn(B, H, device=DEVICE)).requires_grad_()
    v = torch.randn(B, H, V, device=DEVICE, requires_grad=True)
    return torch.zeros(B, H, K, V, device=DEVICE), q, k, v, g


CASES = {
    "block_mask_worklist": lambda: attnops.block_mask_worklist(
        torch.ones(1, 1, 2, 2, dtype=torch.bool, device=DEVICE)
    ),
    "recurrent_gla_step": lambda: attnops.recurrent_gla_step(*_step_inputs(), scale=0.5),
}
# What the launcher sees under grad mode True, then False: a bool mask cannot require grad, so
# block_mask_worklist leaves the mode as it is.
SEEN = {"block_mask_worklist": [True, False], "recurrent_gla_step": [False, False]}


@pytest.mark.parametrize("op", list(CASES))
@pytest.mark.parametrize("fails", [False, True])
def test_launcher_runs_without_grad_and_the_mode_comes_back(monkeypatch, op, fails):
    call = CASES[op]
    # The generated module resolves its launcher through ``_launcher(ref)``.
    module = importlib.import_module(f"attnops.{op}")
    resolve = module._launcher
    seen = []

    def spy_for(ref):
        launcher = resolve(ref)

        def spy(*args, **kwargs):
            seen.append(torch.is_grad_enabled())
            if fails:
                raise RuntimeError("launcher failed")
            return launcher(*args, **kwargs)

        return spy

    monkeypatch.setattr(module, "_launcher", spy_for)
    for mode in (True, False):
        with torch.set_grad_enabled(mode):
            if fails:
                with pytest.raises(RuntimeError, match="launcher failed"):
                    call()
            else:
                for out in call():
                    assert not out.requires_grad
            assert torch.is_grad_enabled() is mode
    assert seen == SEEN[op]


def _grad_free(dtypes: str, extra: str = "") -> bool:
    text = open("ops.yaml").read()
    old = "      mask: {shape: [B, H, QB, KB], dtypes: [bool], init: mask}\n"
    assert text.count(old) == 1
    text = text.replace(
        old, f"      mask: {{shape: [B, H, QB, KB], dtypes: {dtypes}, init: mask}}\n"
    )
    if extra:
        old = '      schema: "(Tensor mask) -> Tensor coords"'
        assert text.count(old) == 1
        text = text.replace(old, '      schema: "(Tensor mask, Tensor other) -> Tensor coords"')
        text = text.replace(
            "      mask: {shape: [B, H, QB, KB], dtypes",
            extra + "      mask: {shape: [B, H, QB, KB], dtypes",
        )
    old = "        bool: [0.0, 0.0]\n"
    assert text.count(old) == 1
    tolerances = ("bool", "int32", "int64", "uint8", "float32", "float16", "bfloat16")
    text = text.replace(old, "".join(f"        {d}: [0.0, 0.0]\n" for d in tolerances))
    _, ops = analyse(text, "ops.yaml", check_imports=False)
    view = op_view(next(r for r in ops if r.op.name == "block_mask_worklist"))
    return view.public.direct.kind == "grad_free"


@pytest.mark.parametrize(
    ("dtypes", "extra", "free"),
    [
        ("[bool]", "", True),
        ("[bool, int32, int64, uint8]", "", True),
        ("[bool, float32]", "", False),
        ("[bfloat16]", "", False),
        # An input typed like another follows that one's dtypes.
        ("[int32]", "      other: {shape: [B], dtype: mask}\n", True),
        ("[int32]", "      other: {shape: [B], dtypes: [float16]}\n", False),
    ],
)
def test_grad_mode_is_left_alone_only_where_no_input_can_require_grad(dtypes, extra, free):
    assert _grad_free(dtypes, extra) is free
