"""Pinned diagnostics for the contracts beyond one plain operator (pairs, variants, mutation...)."""

from __future__ import annotations

import pytest
from specs import CHUNK, GATE, replace

from codegen.pipeline import generate, parse
from codegen.spec.errors import SpecError

_IS = "      initial_state: {shape: [N, H, K, V], dtypes: [float32]}"
_REF = "    reference: attnops_kernels.chunk_gla.reference:chunk_gla_ref"
# Derived dims that test a bool argument ('NS if save_states else 0'): CHUNK with a flag.
_N = '      N: "B if cu_seqlens is None else cu_seqlens.shape[0] - 1"'
_KEEP = CHUNK.replace(
    "Tensor? cu_seqlens=None) ->", "Tensor? cu_seqlens=None, *, bool keep=False) ->"
)


def _flag_dim(expr: str, text: str = _KEEP, first: bool = False) -> str:
    line = f'      NK: "{expr}"'
    return replace(_N, f"{line}\n{_N}" if first else f"{_N}\n{line}", text)


CASES = [
    (
        "pair-arguments-differ",
        replace(
            '        schema: "(Tensor q, Tensor k, Tensor v, Tensor g, float? scale=None, Tensor? initial_state=None, Tensor? cu_seqlens=None) -> (Tensor output',
            '        schema: "(Tensor q, Tensor k, Tensor v, Tensor g, float scale, Tensor? initial_state=None, Tensor? cu_seqlens=None) -> (Tensor output',
            CHUNK,
        ),
        [
            "ops.yaml:13:17: error: [chunk] arity_pair schema must take exactly the arguments of the forward schema",
        ],
    ),
    (
        "pair-flag-collides",
        replace("        flag: output_final_state", "        flag: q", CHUNK),
        [
            "ops.yaml:11:9: error: [chunk] arity_pair flag 'q' collides with an argument or output name",
        ],
    ),
    (
        "pair-flag-keyword",
        replace("        flag: output_final_state", "        flag: lambda", CHUNK),
        [
            "ops.yaml:11:15: error: [chunk] arity_pair flag 'lambda' is a Python keyword",
        ],
    ),
    (
        "pair-after-unknown",
        replace("        after: initial_state", "        after: init_state", CHUNK),
        [
            "ops.yaml:11:9: error: [chunk] arity_pair 'after' names no forward argument: 'init_state'",
        ],
    ),
    (
        "pair-grad-not-optional",
        replace(
            "Tensor grad_output, Tensor? grad_final_state)",
            "Tensor grad_output, Tensor grad_final_state)",
            CHUNK,
        ),
        [
            "ops.yaml:15:15: error: [chunk] backward schema: 'grad_final_state' must be Tensor? (None when the flag is false)",
        ],
    ),
    (
        "derived-unguarded-optional",
        replace(
            '      N: "B if cu_seqlens is None else cu_seqlens.shape[0] - 1"',
            '      N: "cu_seqlens.shape[0] - 1"',
            CHUNK,
        ),
        [
            "ops.yaml:19:7: error: [chunk] derived dim 'N' reads optional 'cu_seqlens' without testing 'cu_seqlens is None'",
        ],
    ),
    (
        "flag-dim-not-an-argument",
        _flag_dim("B if kept else 0"),
        [
            "ops.yaml:20:7: error: [chunk] derived dim 'NK' tests 'kept', which is not an argument "
            "of the forward schema; a condition is '<input> is None', '<input> is not None' or "
            "the name of a bool argument",
        ],
    ),
    (
        "flag-dim-float-argument",
        _flag_dim("B if scale else 0"),
        [
            "ops.yaml:20:7: error: [chunk] derived dim 'NK' tests 'scale', which is 'float?'; "
            "only a bool argument may be a condition",
        ],
    ),
    (
        "flag-dim-optional-bool",
        _flag_dim(
            "B if keep else 0",
            CHUNK.replace(
                "Tensor? cu_seqlens=None) ->", "Tensor? cu_seqlens=None, bool? keep=None) ->"
            ),
        ),
        [
            "ops.yaml:20:7: error: [chunk] derived dim 'NK' tests 'keep', which is 'bool?'; only "
            "a bool argument may be a condition",
        ],
    ),
    (
        "flag-dim-tensor",
        _flag_dim("B if cu_seqlens else 0"),
        [
            "ops.yaml:20:7: error: [chunk] derived dim 'NK' tests 'cu_seqlens', a tensor; test a "
            "tensor input with 'cu_seqlens is None'",
        ],
    ),
    (
        "flag-dim-bool-as-number",
        _flag_dim("B * keep"),
        [
            "ops.yaml:20:7: error: [chunk] derived dim 'NK' reads bool argument 'keep' as a "
            "number; a bool argument may only be a condition: 'a if keep else b'",
        ],
    ),
    (
        "flag-dim-negated",
        _flag_dim("B if not keep else 0"),
        [
            "ops.yaml:20:11: error: [chunk] dim 'NK': a condition must be '<input> is None', "
            "'<input> is not None' or the name of a bool argument, got 'not keep'",
        ],
    ),
    (
        "flag-dim-sizes-an-input",
        replace(
            _IS,
            "      initial_state: {shape: [NK2, H, K, V], dtypes: [float32]}",
            replace(_N, f'{_N}\n      NK: "B if keep else 0"\n      NK2: "NK + 1"', _KEEP),
        ),
        [
            "ops.yaml:27:7: error: [chunk] dim 'NK2' of input 'initial_state' reads bool argument "
            "'keep': a dim that reads a flag may size outputs only",
        ],
    ),
    (
        "flag-dim-divides-by-zero-when-set",
        _flag_dim("B // (T - 5) if keep else 0", first=True),
        [
            "ops.yaml:34:11: error: [chunk] sample cannot be sized: derived dim 'NK' (with "
            "keep=True): division by zero in 'B // (T - 5)'",
        ],
    ),
    (
        "varlen-offsets-required",
        replace(
            "      varlen: {offsets: cu_seqlens, dim: T, per_sequence: [initial_state, final_state]}",
            "      varlen: {offsets: q, dim: T, per_sequence: [initial_state, final_state]}",
            CHUNK,
        ),
        [
            "ops.yaml:37:15: error: [chunk] varlen offsets 'q' must be an optional tensor input (Tensor?)",
        ],
    ),
    (
        "varlen-unknown-names",
        replace(
            "      varlen: {offsets: cu_seqlens, dim: T, per_sequence: [initial_state, final_state]}",
            "      varlen: {offsets: cu_seqlens, dim: L, per_sequence: [initial_state, state]}",
            CHUNK,
        ),
        [
            "ops.yaml:37:15: error: [chunk] varlen dim 'L' is not a dim bound by the inputs",
            "ops.yaml:37:15: error: [chunk] varlen per_sequence names 'state', which is neither an input nor an output",
        ],
    ),
    (
        "output-dim-unbound",
        replace(
            "      output: {shape: [B, T, H, V], dtype: q}",
            "      output: {shape: [B, T, H, W], dtype: q}",
            CHUNK,
        ),
        [
            "ops.yaml:28:7: error: [chunk] dim 'W' of output 'output' is not bound by any input",
        ],
    ),
    (
        "variant-value-type",
        replace("      kind: [softplus, lower_bound]", "      kind: [softplus, 3]", GATE),
        [
            "ops.yaml:12:7: error: [gate] variant value 3 is not a str",
        ],
    ),
    (
        "variant-default-missing",
        replace(
            "      kind: [softplus, lower_bound]", "      kind: [lower_bound, upper_bound]", GATE
        ),
        [
            "ops.yaml:12:7: error: [gate] the schema default of 'kind' (\"softplus\") is not one of its variant values",
        ],
    ),
    (
        "variant-not-an-argument",
        replace("      kind: [softplus, lower_bound]", "      mode: [1, 2]", GATE),
        [
            "ops.yaml:12:7: error: [gate] variant 'mode' is not a str/int/bool/float argument of the forward schema",
        ],
    ),
    (
        "triton-op-launchers-differ",
        replace(
            "        cpu: attnops_kernels.gate.triton:gate_fwd",
            "        cpu: attnops_kernels.gate.triton:gate_fwd\n        cuda: attnops_kernels.gate.triton:gate_bwd",
            GATE,
        ),
        [
            "ops.yaml:8:7: error: [gate] integration 'triton_op' registers one launcher for every device; use the same 'module:function' for each",
        ],
    ),
    (
        "mutation-undeclared-input",
        replace(
            "      state: {shape: [B, K], dtypes: [float32], mutated: true}",
            "      state: {shape: [B, K], dtypes: [float32]}",
            GATE,
        ),
        [
            "ops.yaml:33:7: error: [step] the forward schema declares 'state' mutable (a!) but the input is not marked 'mutated: true'",
        ],
    ),
    (
        "mutation-undeclared-schema",
        replace(
            "      q: {shape: [B, K], dtypes: [float32]}",
            "      q: {shape: [B, K], dtypes: [float32], mutated: true}",
            GATE,
        ),
        [
            "ops.yaml:34:7: error: [step] input 'q' is marked 'mutated: true' but the forward schema does not declare it mutable; write 'Tensor(a!) q'",
        ],
    ),
    (
        "dynamic-not-true",
        replace("      nnz: {dynamic: true}", "      nnz: {dynamic: yes please}", GATE),
        [
            "ops.yaml:31:22: error: [step] 'dynamic' of dim 'nnz' must be true",
            "ops.yaml:36:7: error: [step] dim 'nnz' of output 'output' is not bound by any input",
        ],
    ),
    (
        "dynamic-unused",
        replace(
            "      output: {shape: [B, nnz], dtype: q}",
            "      output: {shape: [B, K], dtype: q}",
            GATE,
        ),
        [
            "ops.yaml:31:7: error: [step] dynamic dim 'nnz' sizes no output",
        ],
    ),
    (
        "dynamic-sizes-input",
        replace(
            "      state: {shape: [B, K], dtypes: [float32], mutated: true}",
            "      state: {shape: [B, nnz], dtypes: [float32], mutated: true}",
            GATE,
        ),
        [
            "ops.yaml:33:7: error: [step] dim 'nnz' is dynamic (data-dependent) and cannot size an input",
        ],
    ),
    (
        "dynamic-needs-opaque",
        replace("    doc: Step.", "    doc: Step.\n    integration: triton_op", GATE),
        [
            "ops.yaml:32:7: error: [step] data-dependent output sizes need the opaque integration (the fake allocates them)",
        ],
    ),
    (
        "unknown-init",
        replace(
            "      A_log: {shape: [H], dtypes: [float32]}",
            "      A_log: {shape: [H], dtypes: [float32], init: zeros}",
            GATE,
        ),
        [
            "ops.yaml:15:52: error: [gate] unknown init 'zeros' of input 'A_log'; expected one of: randn, logsigmoid, mask, index",
        ],
    ),
    (
        "absent-gradient-unknown",
        replace(_IS, _IS[:-1] + ", absent_gradient: nothing}", CHUNK),
        [
            "ops.yaml:25:80: error: [chunk] 'absent_gradient' of input 'initial_state' must be one of: zeros, empty; got 'nothing'",
        ],
    ),
    (
        "absent-gradient-not-a-string",
        replace(_IS, _IS[:-1] + ", absent_gradient: [empty]}", CHUNK),
        [
            "ops.yaml:25:80: error: [chunk] 'absent_gradient' of input 'initial_state' must be one of: zeros, empty; got a list",
        ],
    ),
    (
        "absent-gradient-required-input",
        replace(
            "      q: {shape: [B, T, H, K], dtypes: [float32]}",
            "      q: {shape: [B, T, H, K], dtypes: [float32], absent_gradient: empty}",
            CHUNK,
        ),
        [
            "ops.yaml:21:68: error: [chunk] 'absent_gradient' of input 'q' applies only to optional inputs (Tensor?); 'q' is always given",
        ],
    ),
    (
        "absent-gradient-without-gradient",
        replace(
            "differentiable: false}",
            "differentiable: false, absent_gradient: empty}",
            CHUNK,
        ),
        [
            "ops.yaml:26:89: error: [chunk] 'absent_gradient' of input 'cu_seqlens' needs a gradient; the backward schema returns no 'grad_cu_seqlens'",
        ],
    ),
    (
        "absent-gradient-without-backward",
        replace(
            "      A_log: {shape: [H], dtypes: [float32]}",
            "      A_log: {shape: [H], dtypes: [float32], absent_gradient: zeros}",
            GATE,
        ),
        [
            "ops.yaml:15:63: error: [gate] 'absent_gradient' of input 'A_log' needs a backward; the operator has none",
        ],
    ),
    (
        "reference-returns-unknown",
        replace(_REF, "    reference_returns: [output, final_state, rstd]\n" + _REF, CHUNK),
        [
            "ops.yaml:30:24: error: [chunk] reference_returns: 'rstd' is not an output; outputs: output, final_state",
        ],
    ),
    (
        "reference-returns-missing-public",
        replace(_REF, "    reference_returns: [final_state]\n" + _REF, CHUNK),
        [
            "ops.yaml:30:24: error: [chunk] reference_returns must list every public output (the tests compare each); missing: output",
        ],
    ),
    (
        "reference-returns-twice",
        replace(_REF, "    reference_returns: [output, output]\n" + _REF, CHUNK),
        [
            "ops.yaml:30:33: error: [chunk] 'reference_returns' lists 'output' twice",
        ],
    ),
    (
        "reference-returns-not-a-list",
        replace(_REF, "    reference_returns: output\n" + _REF, CHUNK),
        [
            "ops.yaml:30:24: error: [chunk] 'reference_returns' must be a non-empty list of output names, got str 'output'",
        ],
    ),
]


@pytest.mark.parametrize("base", [CHUNK, GATE], ids=["chunk", "gate"])
def test_base_specs_are_valid(base):
    parse(base, "ops.yaml")


@pytest.mark.parametrize("text, expected", [pytest.param(t, e, id=i) for i, t, e in CASES])
def test_diagnostics(text, expected):
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    assert [str(d) for d in info.value.diagnostics] == expected


BWD_ARGS = "Tensor q, Tensor k, Tensor v, Tensor g, float? scale, Tensor? initial_state, Tensor? cu_seqlens"


def test_declared_absent_gradient_and_reference_returns_are_accepted():
    text = replace(_IS, _IS[:-1] + ", absent_gradient: empty}", CHUNK)
    text = replace(_REF, "    reference_returns: [final_state, output]\n" + _REF, text)
    module = generate(text, "ops.yaml", "ops.yaml")
    assert (
        "    if initial_state is None:\n"
        "        grad_initial_state = q.new_empty((0,), dtype=torch.float32)\n"
        "    else:\n"
        "        grad_initial_state = q.new_empty((N, H, K, V), dtype=torch.float32)\n"
    ) in module["demo/chunk.py"]
    assert 'REFERENCE_RETURNS = ("final_state", "output")' in module["tests/test_chunk.py"]


def test_a_flag_dim_sizes_outputs_by_the_call_s_flag():
    out = "      output: {shape: [B, T, H, V], dtype: q}"
    text = replace(
        out, out + "\n      kept: {shape: [NK, H], dtype: float32}", _flag_dim("B if keep else 0")
    )
    text = text.replace(
        "-> (Tensor output, Tensor final_state)",
        "-> (Tensor output, Tensor kept, Tensor final_state)",
    )
    text = text.replace("-> Tensor output", "-> (Tensor output, Tensor kept)")
    module = generate(text, "ops.yaml", "ops.yaml")["demo/chunk.py"]
    fake = (
        "    NK = B if keep else 0\n"
        "    output = q.new_empty((B, T, H, V))\n"
        "    kept = q.new_empty((NK, H), dtype=torch.float32)\n"
    )
    assert module.count(fake) == 2  # the fakes of both operators of the arity pair


@pytest.mark.parametrize("values, checked", [("[false, true]", False), ("[false]", True)])
def test_a_bool_variant_listing_both_values_restricts_nothing(values, checked):
    # Both values: the tests run each, the public function checks the type alone; one value: it
    # refuses the other with a ValueError naming the argument.
    text = replace("    dims:\n", f"    variants:\n      keep: {values}\n    dims:\n", _KEEP)
    module = generate(text, "ops.yaml", "ops.yaml")
    public = module["demo/chunk.py"]
    assert 'raise _scalar_error("chunk", "keep", "bool", keep)' in public
    assert ("if keep not in _CHUNK_KEEP_VALUES:" in public) is checked
    assert ('"value")' in module["tests/test_chunk.py"].split("REJECTS = {")[1]) is checked
    assert '_c["keep"]' in module["tests/test_chunk.py"]  # the tests sweep it either way


def test_backward_must_take_optional_inputs_it_differentiates():
    text = replace(BWD_ARGS, BWD_ARGS.replace("Tensor? initial_state, ", ""), CHUNK)
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    assert [str(d) for d in info.value.diagnostics] == [
        "ops.yaml:15:15: error: [chunk] backward schema: returns 'grad_initial_state' of optional "
        "input 'initial_state' but does not take 'initial_state', so the autograd.Function cannot "
        "tell whether it was given"
    ]


def test_backward_fake_sizes_gradients_from_any_input_sharing_the_dims():
    text = replace(BWD_ARGS, BWD_ARGS.replace("Tensor q, ", ""), CHUNK)
    module = generate(text, "ops.yaml", "ops.yaml")["demo/chunk.py"]
    assert "    B = k.shape[0]\n" in module
    assert "    grad_q = k.new_empty((B, T, H, K), dtype=torch.float32)\n" in module


def test_backward_fake_needs_the_tensors_that_size_a_gradient():
    text = replace(
        BWD_ARGS, "Tensor g, float? scale, Tensor? initial_state, Tensor? cu_seqlens", CHUNK
    )
    text = text.replace(
        "(Tensor grad_q, Tensor grad_k, Tensor grad_v, Tensor grad_g, Tensor grad_initial_state)",
        "(Tensor grad_g, Tensor grad_initial_state)",
    ).replace(
        "      q: {shape: [B, T, H, K], dtypes: [float32]}",
        "      q: {shape: [B, T, H, K], dtypes: [float32], differentiable: false}",
    )
    for name in "kv":
        text = text.replace(
            f"      {name}: {{shape: [B, T, H, {name.upper()}], dtype: q}}",
            f"      {name}: {{shape: [B, T, H, {name.upper()}], dtype: q, differentiable: false}}",
        )
    with pytest.raises(SpecError) as info:
        parse(text, "ops.yaml")
    # V and the other dims come from grad_output, [B, T, H, V]; nothing the backward takes has K.
    assert [str(d) for d in info.value.diagnostics] == [
        "ops.yaml:15:15: error: [chunk] backward schema: the fake of 'grad_initial_state' cannot "
        "size dim 'K' of [N, H, K, V]: no tensor the backward takes has it; add 'q' (or another "
        "tensor with dim 'K') to the backward arguments",
    ]


CONSTRAINTS = """    constraints:
      - {check: "B == 1", when: cu_seqlens, message: "packed sequences need B == 1"}
"""


def _with_constraint(line: str) -> str:
    return CHUNK.replace(
        "    inputs:\n",
        CONSTRAINTS.replace(
            '{check: "B == 1", when: cu_seqlens, message: "packed sequences need B == 1"}', line
        )
        + "    inputs:\n",
        1,
    )


def test_constraints_are_checked_by_the_public_function():
    module = generate(
        _with_constraint(
            '{check: "B == 1", when: cu_seqlens, message: "packed sequences need B == 1"}'
        ),
        "ops.yaml",
        "ops.yaml",
    )["demo/chunk.py"]
    assert "    if cu_seqlens is not None and B != 1:\n" in module
    assert 'raise _constraint_error("chunk", "packed sequences need B == 1", B=B)' in module


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            '{check: "B = 1"}',
            "ops.yaml:21:17: error: [chunk] cannot parse check 'B = 1'",
        ),
        (
            '{check: "B + 1"}',
            "ops.yaml:21:17: error: [chunk] a check must compare two dim expressions with one of "
            "== != < <= > >=, got 'B + 1'",
        ),
        (
            '{check: "W == 1"}',
            "ops.yaml:21:9: error: [chunk] constraint 'W == 1' reads 'W', which no input binds",
        ),
        (
            '{check: "B == 1", when: q}',
            [
                "ops.yaml:21:9: error: [chunk] constraint 'when' must name an optional tensor input, "
                "got 'q'",
                "ops.yaml:35:11: error: [chunk] sample breaks constraint 'B == 1'",
            ],
        ),
        (
            '{check: "T < 7", when: cu_seqlens}',
            "ops.yaml:36:11: error: [chunk] sample breaks constraint 'T < 7'",
        ),
    ],
)
def test_constraint_diagnostics(line, expected):
    with pytest.raises(SpecError) as info:
        parse(_with_constraint(line), "ops.yaml")
    expected = expected if isinstance(expected, list) else [expected]
    assert [str(d) for d in info.value.diagnostics] == expected
