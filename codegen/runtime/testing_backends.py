"""Checks of operators whose CUDA implementation chooses among backends (docs/spec.md, "Several
backends"), shared by the generated tests. Every case of the layout-contract rulebook is built
from the declaration: compact aligned input on the fast signature, aligned outer strides, a
non-contiguous required mode, a misaligned storage offset, the forced int64 ABI, a backend turned
off, each backend against the reference, and compiled reuse across sizes.

The backend expected for a case is the first one, in declared order, whose declared contract the
case's tensors meet, judged with the same predicates the package uses (``_layout``); what these
tests prove is that the generated selection follows the declaration and that every backend
computes the same thing on every layout it accepts.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from torch import Tensor


@dataclass(frozen=True)
class Backend:
    name: str
    ref: str
    # tensor -> (contiguous_dim, alignment or None, max_contiguous or None)
    layout: dict = field(default_factory=dict)
    int64: bool = True
    signatures: tuple[str, ...] = ()


def _layout_module(package: str):
    return importlib.import_module(f"{package}._layout")


def skip_unless_runnable(package: str, backend: Backend) -> None:
    """Skip, saying why, where CUDA or the backend's compiler is missing."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA backends are chosen on CUDA tensors: no CUDA device")
    if not _layout_module(package).backend_available(backend.name):
        hint = " (pip install nvidia-cutlass-dsl)" if backend.name == "cutedsl" else ""
        pytest.skip(f"backend '{backend.name}' is not installed{hint}")


def layout_cases(stages: dict) -> list:
    """``(stage, backend, case)`` for every backend but the last (which always runs)."""
    out = []
    for stage, backends in stages.items():
        for b in backends[:-1]:
            cases = ["compact", "int64", "disabled"]
            for tensor in b.layout:
                cases += [f"outer-strided-{tensor}", f"noncontiguous-{tensor}"]
                cases += [f"misaligned-{tensor}"]
            out += [pytest.param(stage, b.name, c, id=f"{stage}-{b.name}-{c}") for c in cases]
    return out


def _with_outer_padding(t: Tensor, dim: int, alignment: int) -> Tensor:
    """``t``'s values with mode ``dim`` contiguous and every other mode padded, so that outer
    strides are not compact yet keep ``alignment`` bytes."""
    moved = t.movedim(dim, -1)
    size = t.element_size()
    step = max(1, alignment // size)
    padded = moved.shape[-1] + step
    padded += (-padded) % step
    base = torch.zeros((*moved.shape[:-1], padded), dtype=t.dtype, device=t.device)
    view = base[..., : moved.shape[-1]]
    view.copy_(moved)
    return view.movedim(-1, dim)


def _with_strided_mode(t: Tensor, dim: int) -> Tensor:
    """``t``'s values with stride 2 along mode ``dim``."""
    moved = t.movedim(dim, -1)
    base = torch.zeros((*moved.shape[:-1], 2 * moved.shape[-1]), dtype=t.dtype, device=t.device)
    view = base[..., ::2]
    view.copy_(moved)
    return view.movedim(-1, dim)


def _misaligned(t: Tensor) -> Tensor:
    """``t``'s values in compact storage that starts one element past an aligned address."""
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)[1:]
    view = flat.view(t.shape)
    view.copy_(t)
    return view


def transform(args: dict, backend: Backend, case: str) -> dict:
    """The stage's arguments laid out as ``case`` asks."""
    for kind in ("outer-strided-", "noncontiguous-", "misaligned-"):
        if case.startswith(kind):
            name = case[len(kind) :]
            t = args[name]
            if t is None:
                pytest.skip(f"{name} is None in this sample")
            dim, alignment, _ = backend.layout[name]
            if kind == "outer-strided-":
                t = _with_outer_padding(t, dim, alignment or t.element_size())
            elif kind == "noncontiguous-":
                if t.shape[dim] < 2:
                    pytest.skip(f"{name} has one element along dim {dim}: no stride to break")
                t = _with_strided_mode(t, dim)
            else:
                t = _misaligned(t)
            return {**args, name: t}
    return dict(args)


def _meets(lay, backend: Backend, args: dict, int64_forced: bool) -> bool:
    for name, (dim, alignment, most) in backend.layout.items():
        t = args[name]
        if t is not None and not lay.tensor_supports_contiguous_dim(t, dim, alignment):
            return False
        if t is not None and most is not None and t.ndim and t.shape[dim % t.ndim] > most:
            return False
    tensors = [t for t in args.values() if isinstance(t, Tensor)]
    return backend.int64 or not (int64_forced or lay.requires_int64_abi(*tensors))


def expected_signature(lay, backend: Backend, args: dict, int64_forced: bool) -> str | None:
    """The signature a launcher that reports them picks (docs/spec.md): "compact" when every
    tensor with a layout contract is compact and meets the 16-byte contract, else "general";
    then the ABI."""
    if not backend.signatures:
        return None
    compact = "compact" in backend.signatures and all(
        args[name] is None
        or (args[name].is_contiguous() and lay.tensor_supports_tma(args[name], dim))
        for name, (dim, _, _) in backend.layout.items()
    )
    kind = "compact" if compact else "general"
    tensors = [t for t in args.values() if isinstance(t, Tensor)]
    abi = "int64" if int64_forced or lay.requires_int64_abi(*tensors) else "int32"
    return f"{kind}/{abi}"


@contextlib.contextmanager
def only_from(package: str, backends: tuple[Backend, ...], name: str):
    """Within the block, the backends listed before ``name`` are turned off."""
    lay = _layout_module(package)
    before = [b.name for b in backends[: [b.name for b in backends].index(name)]]
    with lay.backends_disabled(*before):
        yield lay


def _stage_call(op, args: dict) -> tuple:
    """Call a stage operator with its arguments by name (keyword-only ones by keyword)."""
    schema = op._schema.arguments
    out = op(
        *(args[a.name] for a in schema if not a.kwarg_only),
        **{a.name: args[a.name] for a in schema if a.kwarg_only},
    )
    out = tuple(out) if len(op._schema.returns) != 1 else (out,)
    # A 'Tensor[]' return counts as its elements, in order.
    return tuple(t for o in out for t in (o if isinstance(o, list) else (o,)))


def _trace(trace: list, qualname: str, what: str) -> list[str]:
    """What the trace recorded of kind ``what`` for the operator (by qualified or short name:
    launchers name themselves without the namespace)."""
    names = (qualname, qualname.partition("::")[2])
    return [name for op, kind, name in trace if op in names and kind == what]


def check_layout_case(
    package: str,
    op,
    qualname: str,
    backends: tuple[Backend, ...],
    name: str,
    case: str,
    args: dict,
    tolerance: tuple[float, float],
) -> None:
    """The stage on ``case``'s layout runs the backend its contract selects, with the signature
    the launcher promises, and computes what the last backend computes on compact inputs."""
    backend = next(b for b in backends if b.name == name)
    skip_unless_runnable(package, backend)
    lay = _layout_module(package)
    with lay.backends_disabled(*(b.name for b in backends[:-1])):
        expected = _stage_call(op, args)
    laid_out = transform(args, backend, case)
    forced = case == "int64"
    with only_from(package, backends, name):
        off = [backend.name] if case == "disabled" else []
        with lay.backends_disabled(*off), lay.force_int64_abi(forced), lay.dispatch_trace() as t:
            got = _stage_call(op, laid_out)
        chosen = next(
            b.name
            for b in backends[backends.index(backend) :]
            if b is backends[-1] or (b.name not in off and _meets(lay, b, laid_out, forced))
        )
    assert _trace(t, qualname, "backend") == [chosen], (
        f"{qualname} on layout '{case}': expected backend {chosen}, the trace says {t}"
    )
    if chosen == backend.name and (sig := expected_signature(lay, backend, laid_out, forced)):
        assert _trace(t, qualname, "signature") == [sig], (
            f"{qualname} on layout '{case}': expected signature {sig}, the trace says {t}"
        )
    atol, rtol = tolerance
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.is_contiguous(), f"{qualname} result {i} is not contiguous on layout '{case}'"
        torch.testing.assert_close(
            g.float(), e.float(), atol=atol, rtol=rtol, msg=lambda m, i=i: f"result {i}: {m}"
        )


def check_backend_numerics(
    package: str,
    suite,
    stages: dict,
    qualnames: dict,
    name: str,
    sample: str,
    dtype: str,
    gradients: bool,
) -> None:
    """With the backends before ``name`` turned off, the public function matches the reference
    (forward and gradients), and every stage that lists ``name`` ran it."""
    for backends in stages.values():
        if any(b.name == name for b in backends):
            skip_unless_runnable(package, next(b for b in backends if b.name == name))
    lay = _layout_module(package)
    off = set()
    for backends in stages.values():
        names = [b.name for b in backends]
        if name in names:
            off.update(names[: names.index(name)])
    with lay.backends_disabled(*off), lay.dispatch_trace() as t:
        suite.check_forward(sample, dtype, "compact", "default")
        if gradients:
            suite.check_gradients(sample, dtype, "compact", "default")
    for stage, backends in stages.items():
        if stage == "bwd" and not gradients:
            continue
        if name in [b.name for b in backends]:
            ran = set(_trace(t, qualnames[stage], "backend"))
            assert ran == {name}, f"{qualnames[stage]}: expected only {name} to run, got {ran}"


def check_compiled_reuse(
    package: str,
    compiled: Callable,
    make_inputs: Callable,
    samples: tuple,
    stages: dict,
    qualnames: dict,
    dtype: str,
) -> None:
    """A dynamic fullgraph compile, called at a second set of outer sizes, neither recompiles the
    graph nor compiles a kernel, and runs the first backend."""
    first = stages["fwd"][0]
    skip_unless_runnable(package, first)
    lay = _layout_module(package)
    torch._dynamo.reset()
    compiled(**make_inputs(samples[0], dtype))
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with lay.dispatch_trace() as t:
        compiled(**make_inputs(samples[1], dtype))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs, "recompiled"
    assert _trace(t, qualnames["fwd"], "backend") == [first.name], t
    assert not [e for e in t if e[1] == "compile"], f"kernels compiled at new sizes: {t}"
