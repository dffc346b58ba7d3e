"""Checks of hostile inputs and edge cases shared by the generated operator tests (not imported
by the package itself).

Hostile inputs, each refused with a message naming the argument before anything is launched:
broken arguments, malformed sequence offsets, out-of-range index entries, aliased or
gradient-requiring inputs updated in place. Edge cases, each computing what the reference
computes: every tensor on another device, zero sizes, a declared side effect reached once per
call, the eager fast path against the dispatcher, the registered operator seen by dispatch modes
and the profiler, and inputs holding the values at the edges of their declared domains.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable

import pytest
import torch
from torch import Tensor

# The comparisons and ``Suite``. Runtime modules are copied into a generated package under
# ``_``-prefixed names (``<package>/_testing.py``), so the sibling is found under this module's
# own prefix and package: ``codegen.runtime.testing`` here, ``<package>._testing`` there.
_package, _, _own = __name__.rpartition(".")
_t = importlib.import_module(f"{_package}.{'_' if _own.startswith('_') else ''}testing")


# Hostile inputs. Each is refused by the public function before anything is launched; the
# offsets and index cases run in a child process so that a launcher reached by mistake (and the
# memory it would corrupt) fails the test instead of ending the test run.

# Arguments broken one at a time, each in every way the test module's REJECTS table names.


def broken(value, how: str):
    """``value`` made invalid in the way ``how`` names (see ``check_rejects``).

    A list of tensors is broken in its first element.
    """
    if how == "negative":  # an int argument that gives a list output's count
        return -1
    wrong = _scalar_broken(value, how)
    if wrong is not _NOT_SCALAR:
        return wrong
    if isinstance(value, list) and how != "type":
        return [broken(value[0], how), *value[1:]]
    if how.startswith("dtype-"):
        name = how[len("dtype-") :]
        if name == "other":
            return value.to(torch.float64 if value.dtype != torch.float64 else torch.float32)
        return value.to(getattr(torch, name))
    if how == "rank-plus-one":
        return value.unsqueeze(0)
    if how == "rank-one":
        return value.reshape(-1)
    if how == "type":
        return object()
    if how == "value":
        return "not-a-variant" if isinstance(value, str) else -12345
    raise ValueError(how)


# A value of each kind, as the ``type-<kind>`` and ``element-<kind>`` ways of breaking a scalar
# argument name it (Note [scalar types] in _runtime says what each schema type refuses).
WRONG_VALUES = {"bool": True, "int": 1, "float": 1.5, "complex": 1j, "str": "x", "none": None}
_NOT_SCALAR = object()


def _scalar_broken(value, how: str):
    """``type-<kind>``: a value of that kind instead; ``element-<kind>``: the first element of a
    list so replaced; ``length``: a fixed-size list one element longer. Else ``_NOT_SCALAR``."""
    kind = how.partition("-")[2]
    if how.startswith("type-"):
        return WRONG_VALUES[kind]
    if how.startswith("element-"):
        items = list(value)
        return [WRONG_VALUES[kind], *items[1:]]
    if how == "length":
        return [*value, value[0]]
    return _NOT_SCALAR


def rejection_pattern(op: str, name: str) -> str:
    """A message about argument ``name`` of ``op``: ``"<op>: <name> must ..."`` (or, for a
    list, about one of its elements: ``"<op>: <name>[0] must ..."``)."""
    return rf"^{re.escape(op)}: {re.escape(name)}(\[\d+\])? "


def check_rejects(
    suite: _t.Suite, sample: str, config: str, name: str, how: str, op_name: str
) -> None:
    """The public function refuses the bad argument, as the subject of its message.

    The message must read ``"<op>: <name> ..."``: naming the argument anywhere would let
    another argument's check (``"k must have the dtype of q"``) stand in for a missing one.
    """
    inputs = suite.make_inputs(sample, next(iter(suite.tolerance)), config)
    if suite.flag:  # the arity flag is broken like any argument
        inputs[suite.flag] = suite.configs[config][suite.flag]
    replaced = how == "type" or how.startswith("type-")
    assert replaced or inputs[name] is not None, f"{sample} gives {name} no value to break"
    inputs[name] = broken(inputs[name], how)
    with pytest.raises((TypeError, ValueError), match=rejection_pattern(op_name, name)):
        suite.fn(**inputs)


# Malformed sequence offsets, each refused with a message naming the offsets input.

MALFORMED_OFFSETS = ("past-end", "short", "negative", "first-not-zero", "decreasing", "one", "none")


def malformed_offsets(offsets: Tensor, how: str) -> Tensor:
    """Valid sequence offsets made invalid in the way ``how`` names."""
    values = offsets.tolist()
    if how == "past-end":
        values[-1] += 5
    elif how == "short":
        values[-1] -= 1
    elif how == "negative":
        values[1] = -3
    elif how == "first-not-zero":
        values[0] = 1
    elif how == "decreasing":
        values[1] = values[-1] + 1
    elif how == "one":
        values = values[:1]
    elif how == "none":
        values = []
    else:
        raise ValueError(how)
    return torch.tensor(values, dtype=offsets.dtype, device=offsets.device)


def offsets_outcomes(fn: Callable, inputs: dict, name: str, flags: dict) -> list[str]:
    """``<how> refused|ACCEPTED <message>`` for every malformed form of ``inputs[name]``."""
    lines = []
    for how in MALFORMED_OFFSETS:
        bad = {**inputs, name: malformed_offsets(inputs[name], how)}
        try:
            fn(**bad, **flags)
        except ValueError as exc:
            lines.append(f"{how} refused {exc}")
        else:
            lines.append(f"{how} ACCEPTED")
    return lines


def run_isolated(test_file: str, function: str, *args) -> list[str]:
    """Call ``function(*args)`` of the test module in a child process; its printed lines."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('isolated_tests', {test_file!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        f"for line in module.{function}(*{args!r}):\n"
        "    print(line)\n"
    )
    env = dict(os.environ)
    if _t.DEVICE == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, (
        f"the child process ended with status {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout.splitlines()


def check_offsets_refused(lines: list[str], op: str, name: str) -> None:
    assert len(lines) == len(MALFORMED_OFFSETS), lines
    for line in lines:
        how, outcome, *message = line.split(" ", 2)
        assert outcome == "refused", f"{op}: {name} {how} was accepted"
        assert message and message[0].startswith(f"{op}: {name}"), line


# Out-of-range entries of an index input, one at a time in the middle of valid ones: each must
# be refused with a message naming the entry (Note [index inputs] in _runtime). Each applies to
# the dtypes whose range holds it, "negative" only where negative entries are not skipped.
INT32_MAX = 2**31 - 1
BAD_INDEXES = ("past-end", "at-end", "negative", "int32-max", "huge", "huge-negative")


def bad_index_value(how: str, bound: int) -> int:
    return {
        "past-end": bound + 3,
        "at-end": bound,
        "negative": -1,
        "int32-max": INT32_MAX,
        "huge": 2**40,
        "huge-negative": -(2**40),
    }[how]


def bad_index_forms(skip: bool, dtypes: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(how, dtype)`` of every out-of-range entry tried for an index input."""
    out = []
    for how in BAD_INDEXES:
        if skip and how in ("negative", "huge-negative"):
            continue
        for dtype in dtypes:
            if how.startswith("huge") and dtype != "int64":
                continue
            out.append((how, dtype))
    return out


def sample_with_entries(samples: dict, dtype: str, make_inputs: Callable, name: str) -> str:
    """The first sample whose inputs give index input ``name`` at least one entry."""
    for sample in samples:
        value = make_inputs(sample, dtype).get(name)
        if value is not None and value.numel():
            return sample
    raise AssertionError(f"no sample gives {name!r} an entry")


def index_outcomes(fn: Callable, inputs: dict, name: str, row: tuple, flags: dict) -> list[str]:
    """``<how> <dtype> refused|ACCEPTED <expected start>\t<message>`` for each out-of-range entry
    of ``inputs[name]`` (``row``: the test module's INDEXES entry)."""
    dim, binder, position, skip, dtypes = row
    valid = inputs[name]
    bound = int(inputs[binder].shape[position])
    at = valid.numel() // 2
    where = []
    rest = at
    for size in reversed(valid.shape):
        where.append(rest % size)
        rest //= size
    subscript = f"[{', '.join(map(str, reversed(where)))}]" if valid.ndim else ""
    lines = []
    names = dtypes or (str(valid.dtype).removeprefix("torch."),)
    for how, dtype in bad_index_forms(skip, names):
        value = bad_index_value(how, bound)
        bad = valid.to(getattr(torch, dtype)).contiguous().clone()
        bad.view(-1)[at] = value
        expected = f"{name}{subscript} = {value} is out of range for {dim} = {bound} "
        try:
            fn(**{**inputs, name: bad}, **flags)
        except ValueError as exc:
            lines.append(f"{how} {dtype} refused {expected}\t{exc}")
        else:
            lines.append(f"{how} {dtype} ACCEPTED {expected}\t")
    return lines


def check_indexes_refused(lines: list[str], op: str, name: str, row: tuple) -> None:
    """Every out-of-range form was refused, by a message about that very entry."""
    _, _, _, skip, dtypes = row
    got = [tuple(line.split(" ", 2)[:2]) for line in lines]
    assert got, f"{op}: no out-of-range entry of {name} was tried"
    assert got == bad_index_forms(skip, dtypes or (got[0][1],)), lines
    for line in lines:
        how, dtype, rest = line.split(" ", 2)
        outcome, _, rest = rest.partition(" ")
        expected, _, message = rest.partition("\t")
        assert outcome == "refused", f"{op}: {name} holding an entry {how} ({dtype}) was accepted"
        assert message.startswith(f"{op}: {expected}"), (
            f"{op}: {name} {how} ({dtype}): the message does not name the entry as "
            f"'{op}: {expected}...': {message}"
        )


def aliased_mutations(inputs: dict, name: str, others: Iterable[str]) -> list[tuple[str, dict]]:
    """Ways to pass the mutated input ``name`` that torch's in-place operators refuse."""
    if isinstance(inputs[name], list):  # a Tensor(a!)[]: break its first element
        first = {**inputs, name: inputs[name][0]}
        return [
            (how, {**bad, name: [bad[name], *inputs[name][1:]]})
            for how, bad in aliased_mutations(first, name, others)
        ]
    value = inputs[name]
    cases = []
    if value.ndim >= 1 and value.shape[0] > 1:
        expanded = value[:1].expand_as(value)
        cases.append(("expanded", {**inputs, name: expanded}))
    for other in others:
        theirs = inputs[other]
        if not isinstance(theirs, Tensor) or theirs.numel() == 0 or theirs.numel() > value.numel():
            continue
        view = value.detach().reshape(-1)[: theirs.numel()].view(theirs.shape)
        if view.dtype == theirs.dtype:
            cases.append((f"shares-{other}", {**inputs, other: view}))
    leaf = value.detach().clone().requires_grad_() if value.is_floating_point() else None
    if leaf is not None:
        cases.append(("leaf-requires-grad", {**inputs, name: leaf}))
    return cases


def check_mutation_refused(call: Callable, op: str, name: str, cases: list) -> None:
    """Each ``(how, inputs)`` of ``aliased_mutations`` is refused with a message about ``name``."""
    assert cases, f"no unsafe way to pass {name} was built"
    for how, bad in cases:
        try:
            call(bad)
        except RuntimeError as exc:
            message = str(exc)
            other = how.removeprefix("shares-") if how.startswith("shares-") else None
            if other is not None and re.match(rejection_pattern(op, other), message):
                # Two inputs updated in place that share memory: either check may refuse first,
                # naming the other.
                assert re.search(rf"\b{re.escape(name)}\b", message), f"{how}: {exc}"
                continue
            assert re.match(rejection_pattern(op, name), message), f"{how}: {exc}"
        else:
            raise AssertionError(f"{op} accepted {name} passed {how}")


# Edge cases: each computes what the reference (or the same call another way) computes.


def check_device(fn: Callable, inputs: dict, flags: dict, device: str) -> None:
    """The public function called with every tensor on ``device`` (meta: shapes only)."""
    expected = _t.expand_lists(_t.as_tuple(fn(**_t.clone_inputs(inputs), **flags)))
    moved = {k: _t.map_tensors(v, lambda t: t.to(device)) for k, v in inputs.items()}
    got = _t.expand_lists(_t.as_tuple(fn(**moved, **flags)))
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert (g is None) == (e is None), f"output {i}"
        if g is None:
            continue
        assert g.device.type == device, f"output {i} is on {g.device}, not {device}"
        if device == "meta":
            assert g.shape == e.shape and g.dtype == e.dtype, f"output {i}: {g.shape} vs {e.shape}"
        else:
            _t.assert_close(g.cpu(), e.cpu(), 0.0, 0.0, f"output {i} on {device}")


def check_zero_size(suite: _t.Suite, samples: dict, sample: str, dim: str, gradients: bool) -> None:
    """``sample`` with ``dim`` (or the leading dims of '...') made 0 matches the reference."""
    sizes = dict(samples[sample])
    sizes[dim] = (0, *sizes[dim][1:]) if dim == "batch" else 0
    key = f"{sample}-{dim}0"
    samples[key] = sizes
    try:
        dtype = next(iter(suite.tolerance))
        suite.check_forward(key, dtype, "compact", "default")
        if gradients and suite.differentiable:
            _check_zero_size_gradients(suite, key, dtype)
    finally:
        del samples[key]


def _check_zero_size_gradients(suite: _t.Suite, sample: str, dtype: str) -> None:
    """Gradients through empty outputs. A reference written for non-empty inputs may build an
    output that no input reaches; inputs it does not reach have zero gradients."""
    inputs = suite.make_inputs(sample, dtype, "default")
    gen = torch.Generator().manual_seed(suite.seed + 4)
    _, weights, grads = suite.loss_and_grads(suite.fn, inputs, "default", gen)
    reference = _t.float32_copies(inputs)
    leaves = {k: reference[k].detach().requires_grad_() for k in grads}
    out = suite.reference_outputs({**reference, **leaves}, "default")
    present = [o for o in _t.expand_lists(out) if o is not None]
    loss = sum((o.float() * w).sum() for o, w in zip(present, weights, strict=True))
    if isinstance(loss, Tensor) and loss.requires_grad:
        found = torch.autograd.grad(
            loss, list(leaves.values()), allow_unused=True, materialize_grads=True
        )
    else:
        found = [torch.zeros_like(v) for v in leaves.values()]
    atol, rtol = suite.grad_tolerance[dtype]
    for (name, got), want in zip(grads.items(), found, strict=True):
        x = inputs[name]
        _t.check_layout(suite.op, f"gradient of {name}", got, x.shape, x.dtype)
        _t.assert_close(got, want, atol, rtol, f"grad of {name}")


def check_side_effects(suite: _t.Suite, compiled, launchers: dict, sample: str, dtype: str) -> None:
    """Note [side effects]: an operator declared ``side_effects: true`` reaches its forward
    launcher once per call, eager and fullgraph-compiled alike (torch.compile drops a call
    of an operator that returns nothing unless it is registered as having side effects).
    ``launchers`` maps a device to the forward's launcher references there."""
    refs = launchers.get(_t.DEVICE, ())
    assert refs, f"{suite.op}: no forward launcher for {_t.DEVICE}"
    calls: list[str] = []
    saved = []
    for ref in refs:
        module_name, _, name = ref.partition(":")
        module = importlib.import_module(module_name)
        original = getattr(module, name)

        def spy(*args, _original=original, _ref=ref, **kwargs):
            calls.append(_ref)
            return _original(*args, **kwargs)

        saved.append((module, name, original))
        setattr(module, name, spy)
    # The generated shims look launchers up through a cache: start from an empty one.
    runtime = importlib.import_module(suite.fn.__module__.rpartition(".")[0] + "._runtime")
    runtime.launcher.cache_clear()
    try:
        for label, fn in (("an eager", suite.fn), ("a compiled", compiled)):
            for _ in range(2):
                before = len(calls)
                suite.call(fn, suite.make_inputs(sample, dtype, "default"), "default")
                assert len(calls) == before + 1, (
                    f"{suite.op}: {label} call reached the launcher {len(calls) - before} "
                    "times, expected once"
                )
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
        runtime.launcher.cache_clear()


def check_eager_fast_path(
    suite: _t.Suite, module: str, bindings: tuple, sample, dtype, layout, config, gradients: bool
) -> None:
    """The eager fast path gives what the dispatcher gives, bit for bit, without calling it.

    The module's operator bindings are swapped for stubs that fail, so a fast path that still
    went through the dispatcher (forward or backward) fails here.
    """
    runtime = importlib.import_module(module.rpartition(".")[0] + "._runtime")
    mod = importlib.import_module(module)
    inputs = suite.inputs(sample, dtype, layout, config)
    gen_seed = suite.seed + 2

    def run(args: dict):
        gen = torch.Generator().manual_seed(gen_seed)
        if gradients and any(args[k] is not None for k in suite.differentiable):
            out, _, grads = suite.loss_and_grads(suite.fn, args, config, gen)
        else:
            with torch.no_grad():
                out, grads = suite.call(suite.fn, args, config), {}
        # What the call wrote in place is compared as well as what it returned.
        return out, grads, tuple(args[k] for k in suite.mutated)

    runtime.set_eager_fast_path(False)
    try:
        expected = run(_t.clone_inputs(inputs))
    finally:
        runtime.set_eager_fast_path(True)

    def untouched(*args, **kwargs):
        raise AssertionError(f"{suite.op}: the eager fast path called the dispatcher")

    saved = {name: getattr(mod, name) for name in bindings}
    for name in bindings:
        setattr(mod, name, untouched)
    try:
        got = run(_t.clone_inputs(inputs))
    finally:
        for name, value in saved.items():
            setattr(mod, name, value)
    assert got[0] or got[2], f"{suite.op}: the call returned and updated nothing to compare"
    assert len(got[0]) == len(expected[0]), f"{suite.op}: {len(got[0])} outputs"
    for i, (a, b) in enumerate(zip(got[0], expected[0], strict=True)):
        if isinstance(a, list) or isinstance(b, list):  # a list output: as many tensors
            assert isinstance(a, list) and isinstance(b, list) and len(a) == len(b), (
                f"{suite.op}: output {i} holds {_t.tensors_held(a)}, the dispatcher's {_t.tensors_held(b)}"
            )
    pairs = (
        ("output", _t.expand_lists(got[0]), _t.expand_lists(expected[0])),
        ("gradient", got[1], expected[1]),
        ("input updated in place", _t.expand_lists(got[2]), _t.expand_lists(expected[2])),
    )
    for what, g, e in pairs:
        if isinstance(g, dict):
            assert g.keys() == e.keys(), what
            g, e = tuple(g.values()), tuple(e.values())
        for i, (a, b) in enumerate(zip(g, e, strict=True)):
            assert (a is None) == (b is None), f"{what} {i}"
            if a is not None:
                assert torch.equal(a, b), f"{suite.op}: {what} {i} differs from the dispatcher's"


def check_dispatcher_visible(suite: _t.Suite, qualnames: tuple, sample, dtype) -> None:
    """Under a dispatch mode and under the profiler the call goes through the registered
    operator, so tracers, FLOP counters and profiles see it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name())
            return func(*args, **(kwargs or {}))

    inputs = suite.make_inputs(sample, dtype)
    with torch.no_grad():
        with Record():
            suite.call(suite.fn, inputs, "default")
        assert set(qualnames) & set(seen), f"none of {qualnames} dispatched: {seen}"
        # CPU activities name the operator; CUDA activities (CUPTI) are not needed for that.
        cpu = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=cpu, acc_events=True) as prof:
            suite.call(suite.fn, inputs, "default")
    names = {e.name for e in prof.events()}
    assert set(qualnames) & names, f"none of {qualnames} profiled: {sorted(names)[:50]}"


# Value domains (docs/spec.md, "Value domains"): inputs holding the values at the edges of their
# declared range (``domain_cases`` of the case tables lists them), and what of the results is
# compared with the reference's.


def with_edge(x: Tensor, value: float) -> Tensor:
    """A copy of ``x`` holding ``value`` along its longest dim (the first of equal ones) at index
    0, at a third of its length and over its last third, the last index included: a first
    element, a single one inside, and a run to the end (in a sequence: the first token, one
    token, and the tokens across the boundaries of chunks and packed sequences there)."""
    out = x.detach().clone()
    if out.numel() == 0:
        return out
    if out.dim() == 0:
        return out.fill_(value)
    dim = max(range(out.dim()), key=lambda d: (out.shape[d], -d))
    n = out.shape[dim]
    picked = sorted({0, n // 3, *range(min(n - 1, n - n // 3), n)})
    return out.index_fill_(dim, torch.tensor(picked, device=out.device), value)


def assert_close_at_edge(
    actual: Tensor, expected: Tensor, atol: float, rtol: float, what: str, infinities: bool
) -> None:
    """Where the reference's entry is finite, ``actual``'s must be finite and close to it; with
    ``infinities`` (results), where it is infinite, the same infinity. The reference's NaNs
    (``0 * inf`` of the math, as in a gradient at an infinite input) and, for gradients, its
    infinities are not compared."""
    a, e = actual.detach().float(), expected.detach().float()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    finite = torch.isfinite(e)
    for bad, where in (
        (finite & ~torch.isfinite(a), "not finite where the reference's are"),
        (torch.isinf(e) & (a != e) if infinities else None, "not the reference's infinity"),
    ):
        if bad is not None and bad.any():
            i = tuple(int(j) for j in bad.nonzero()[0])
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {e.numel()} entries are {where} (first at {i}: "
                f"{a[i].item()}, the reference {e[i].item()})"
            )
    torch.testing.assert_close(
        a[finite], e[finite], atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}"
    )


def check_domain_edge(
    suite: _t.Suite,
    sample: str,
    dtype: str,
    name: str,
    value: float,
    gradients: bool,
    config: str = "default",
) -> None:
    """The public function with input ``name`` holding ``value`` (``with_edge``) against the
    reference, on ``config``: its results and mutated inputs and, where the operator has
    gradients, the gradients of a random projection of its results."""
    inputs = suite.make_inputs(sample, dtype, config)
    inputs[name] = with_edge(inputs[name], value)
    what = f"{suite.op} with {name} = {value:g}" + (f" ({config})" if config != "default" else "")
    expected_inputs = _t.float32_copies(inputs)
    grads, expected_grads = {}, {}
    if gradients:
        gen = torch.Generator().manual_seed(suite.seed + 2)
        out, weights, grads = suite.loss_and_grads(suite.fn, inputs, config, gen)
        expected, _, expected_grads = suite.loss_and_grads(
            suite.reference_public, expected_inputs, config, gen, weights
        )
    else:
        out = suite.call(suite.fn, inputs, config)
        expected = suite.reference_outputs(expected_inputs, config)
    suite.check_results(out, expected, inputs)
    atol, rtol = suite.tolerance[dtype]
    for out_name, got, want in zip(suite.public_outputs, out, expected, strict=True):
        if got is not None:
            assert_close_at_edge(got, want, atol, rtol, f"{what}: output {out_name}", True)
    for m in suite.mutated:
        if inputs[m] is not None:
            got, want = inputs[m], expected_inputs[m]
            assert_close_at_edge(got, want, atol, rtol, f"{what}: {m} after the call", True)
    atol, rtol = suite.grad_tolerance[dtype]
    for k, got in grads.items():
        assert_close_at_edge(got, expected_grads[k], atol, rtol, f"{what}: grad of {k}", False)
