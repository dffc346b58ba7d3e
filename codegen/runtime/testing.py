"""Helpers shared by the generated operator tests (not imported by the package itself)."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest
import torch
from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def load(ref: str) -> Callable:
    """The function named by ``module:function``."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def randn(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """Seeded standard-normal values, drawn on the CPU so every device sees the same data."""
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=DEVICE, dtype=dtype)


def logsigmoid(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """Negative log-decays, as gates produce them."""
    return torch.nn.functional.logsigmoid(randn(gen, shape, torch.float32)).to(dtype)


def mask(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """A boolean mask with about half of the entries set."""
    return (torch.rand(shape, generator=gen) < 0.5).to(device=DEVICE, dtype=dtype)


def float32_copies(inputs: dict) -> dict:
    """Independent float32 copies of floating tensors (the reference computes in float32)."""
    return {
        k: v.detach().clone().float() if isinstance(v, Tensor) and v.is_floating_point() else v
        for k, v in inputs.items()
    }


def _inner_pair(t: Tensor) -> tuple[int, int] | None:
    dims = [d for d in range(t.ndim) if t.shape[d] > 1]
    return (dims[-2], dims[-1]) if len(dims) >= 2 else None


def can_permute(t) -> bool:
    return isinstance(t, Tensor) and _inner_pair(t) is not None


def dense_permuted(t: Tensor) -> Tensor:
    """The same values in a dense, non-contiguous layout (two innermost non-trivial dims swapped).

    Padded or sliced inputs do not substitute: a stride-preserving allocation from a non-dense
    tensor is already contiguous, so a fake that copies input strides would still pass.
    """
    pair = _inner_pair(t)
    assert pair is not None, f"shape {tuple(t.shape)} has no two dims of size > 1 to permute"
    a, b = pair
    out = t.transpose(a, b).contiguous().transpose(a, b)
    assert not out.is_contiguous() and out.data_ptr() != t.data_ptr()
    return out


def as_tuple(result) -> tuple[Tensor, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def assert_close(actual: Tensor, expected: Tensor, atol: float, rtol: float, what: str) -> None:
    shapes = f"{tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.shape == expected.shape, f"{what}: shape {shapes}"
    torch.testing.assert_close(
        actual.float(), expected.float(), atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}"
    )


def clone_inputs(inputs: dict) -> dict:
    return {k: v.clone() if isinstance(v, Tensor) else v for k, v in inputs.items()}


def opcheck(op, args: tuple) -> None:
    """``torch.library.opcheck``, plus a comparison of fake and real output strides.

    opcheck's ``test_faketensor`` compares strides in torch 2.13; torch 2.11 checks
    only sizes and dtypes there, so a kernel whose output layout differs from its (contiguous)
    fake would pass. The comparison below gives every supported torch the same check. Sizes that
    are data-dependent in the fake, and strides of dims of size 0 or 1, are not compared.
    """
    torch.library.opcheck(op, args)
    real = as_tuple(op(*(a.clone() if isinstance(a, Tensor) else a for a in args)))
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        fake_args = tuple(
            mode.from_tensor(a, static_shapes=True) if isinstance(a, Tensor) else a for a in args
        )
        fake = as_tuple(op(*fake_args))
    assert len(real) == len(fake), f"{op}: {len(real)} real outputs, {len(fake)} fake"
    for i, (r, f) in enumerate(zip(real, fake, strict=True)):
        dims = range(r.ndim)
        where = f"{op} output {i}: fake {tuple(f.shape)}/{f.stride()}, real {tuple(r.shape)}/{r.stride()}"
        assert r.ndim == f.ndim and r.dtype == f.dtype, where
        assert all(not isinstance(f.shape[d], int) or f.shape[d] == r.shape[d] for d in dims), where
        significant = [d for d in dims if r.shape[d] > 1]
        assert all(
            not isinstance(f.stride(d), int) or f.stride(d) == r.stride(d) for d in significant
        ), where


def broken(value, how: str):
    """``value`` made invalid in the way ``how`` names (see ``Suite.check_rejects``)."""
    if how.startswith("dtype-"):
        name = how[len("dtype-") :]
        if name == "other":
            return value.to(torch.float64 if value.dtype != torch.float64 else torch.float32)
        return value.to(getattr(torch, name))
    if how == "rank-plus-one":
        return value.unsqueeze(0)
    if how == "rank-one":
        return value.reshape(-1)
    if how == "value":
        return "not-a-variant" if isinstance(value, str) else -12345
    raise ValueError(how)


class Suite:
    """The checks every generated operator test runs, parameterized by the operator's tables.

    ``make_inputs(sample, dtype, layout, config)`` builds the public function's keyword
    arguments; ``configs`` maps a configuration id to variant values, the presence of optional
    inputs and the arity flag (named ``flag``, or None without an arity pair).
    """

    def __init__(
        self,
        *,
        fn: Callable,
        reference: Callable,
        make_inputs: Callable,
        configs: dict,
        flag: str | None,
        public_outputs: tuple[str, ...],
        differentiable: tuple[str, ...],
        mutated: tuple[str, ...],
        tolerance: dict,
        grad_tolerance: dict,
        seed: int,
    ) -> None:
        self.fn = fn
        self.reference = reference
        self.make_inputs = make_inputs
        self.configs = configs
        self.flag = flag
        self.public_outputs = public_outputs
        self.differentiable = differentiable
        self.mutated = mutated
        self.tolerance = tolerance
        self.grad_tolerance = grad_tolerance
        self.seed = seed

    def call(self, fn: Callable, inputs: dict, config: str) -> tuple:
        """Call the public function (or the reference) the way a user would."""
        flags = {self.flag: self.configs[config][self.flag]} if self.flag else {}
        return as_tuple(fn(**inputs, **flags))

    def loss_and_grads(self, fn: Callable, inputs: dict, config: str, gen, weights=None):
        """Outputs, the projection weights, and gradients of a random projection of the outputs."""
        names = [k for k in self.differentiable if inputs[k] is not None]
        leaves = {k: inputs[k].detach().requires_grad_() for k in names}
        out = self.call(fn, {**inputs, **leaves}, config)
        present = [o for o in out if o is not None]
        if weights is None:
            weights = [randn(gen, o.shape, torch.float32) for o in present]
        loss = sum((o.float() * w).sum() for o, w in zip(present, weights, strict=True))
        grads = torch.autograd.grad(loss, [leaves[k] for k in names])
        return out, weights, dict(zip(names, grads, strict=True))

    def check_forward(self, sample: str, dtype: str, layout: str, config: str) -> None:
        inputs = self.make_inputs(sample, dtype, layout, config)
        expected_inputs = float32_copies(inputs)
        out = self.call(self.fn, inputs, config)
        expected = self.call(self.reference, expected_inputs, config)
        assert len(out) == len(expected) == len(self.public_outputs)
        atol, rtol = self.tolerance[dtype]
        for name, got, want in zip(self.public_outputs, out, expected, strict=True):
            assert (got is None) == (want is None), f"{name}: {got is None=} but {want is None=}"
            if got is None:
                continue
            assert got.is_contiguous(), f"{name} is not contiguous: strides {got.stride()}"
            assert_close(got, want, atol, rtol, name)
        for name in self.mutated:
            assert_close(inputs[name], expected_inputs[name], atol, rtol, f"{name} after the call")

    def check_rejects(self, sample: str, config: str, name: str, how: str, op_name: str) -> None:
        """The public function names the bad argument before anything is launched."""
        inputs = self.make_inputs(sample, next(iter(self.tolerance)), "compact", config)
        inputs[name] = broken(inputs[name], how)
        with pytest.raises((TypeError, ValueError), match=rf"^{op_name}: .*\b{name}\b"):
            self.call(self.fn, inputs, config)

    def check_gradients(self, sample: str, dtype: str, layout: str, config: str) -> None:
        inputs = self.make_inputs(sample, dtype, layout, config)
        gen = torch.Generator().manual_seed(self.seed + 2)
        _, weights, grads = self.loss_and_grads(self.fn, inputs, config, gen)
        reference = float32_copies(inputs)
        _, _, expected = self.loss_and_grads(self.reference, reference, config, gen, weights)
        atol, rtol = self.grad_tolerance[dtype]
        assert grads.keys() == expected.keys()
        for name, got in grads.items():
            assert got.dtype == inputs[name].dtype, f"grad of {name}: dtype {got.dtype}"
            assert_close(got, expected[name], atol, rtol, f"grad of {name}")

    def check_varlen(self, sample, config, dtype, offsets, packed_dim, per_sequence) -> None:
        """A packed batch must equal running each of its sequences on its own."""
        inputs = self.make_inputs(sample, dtype, "compact", config)
        packed = self.call(self.fn, inputs, config)
        bounds = inputs[offsets].tolist()
        atol, rtol = self.tolerance[dtype]
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            single = {}
            for name, value in inputs.items():
                if name == offsets:
                    single[name] = None
                elif not isinstance(value, Tensor):
                    single[name] = value
                elif name in per_sequence:
                    single[name] = value[i : i + 1]
                elif name in packed_dim:
                    single[name] = value.narrow(packed_dim[name], lo, hi - lo)
                else:
                    single[name] = value
            alone = self.call(self.fn, single, config)
            for name, whole, part in zip(self.public_outputs, packed, alone, strict=True):
                if whole is None:
                    assert part is None, name
                    continue
                if name in per_sequence:
                    want = whole[i : i + 1]
                else:
                    want = whole.narrow(packed_dim[name], lo, hi - lo)
                assert_close(part, want, atol, rtol, f"{name} of sequence {i}")

    def check_compile(self, compiled, sample, config, dtype, gradients: bool) -> None:
        """A fullgraph-compiled call (and its backward) against eager."""
        inputs = self.make_inputs(sample, dtype, "compact", config)
        eager_inputs = clone_inputs(inputs)
        if gradients:
            gen = torch.Generator().manual_seed(self.seed + 3)
            out, weights, grads = self.loss_and_grads(compiled, inputs, config, gen)
            eager_out, _, eager_grads = self.loss_and_grads(
                self.fn, eager_inputs, config, gen, weights
            )
            assert grads.keys() == eager_grads.keys()
            for name, got in grads.items():
                assert_close(got, eager_grads[name], 1e-5, 1e-5, f"compiled grad of {name}")
        else:
            out = self.call(compiled, inputs, config)
            eager_out = self.call(self.fn, eager_inputs, config)
        for name, got, want in zip(self.public_outputs, out, eager_out, strict=True):
            assert (got is None) == (want is None), name
            if got is not None:
                assert_close(got, want, 1e-5, 1e-5, f"compiled {name}")
        for name in self.mutated:
            assert_close(inputs[name], eager_inputs[name], 1e-5, 1e-5, f"{name} after compile")

    def check_cuda_graph(self, sample: str, config: str, dtype: str, gradients: bool) -> None:
        """Capture forward (and backward), replay on new values, compare with eager."""
        static = self.make_inputs(sample, dtype, "compact", config)
        fresh = {
            k: v * 0.5 if isinstance(v, Tensor) and v.is_floating_point() else v
            for k, v in self.make_inputs(sample, dtype, "compact", config).items()
        }
        names = [k for k in self.differentiable if static[k] is not None] if gradients else []
        for k in names:
            static[k].requires_grad_()

        def step(inputs: dict):
            present = [o for o in self.call(self.fn, inputs, config) if o is not None]
            if not names:
                return present, ()
            loss = sum(o.float().sum() for o in present)
            return present, torch.autograd.grad(loss, [inputs[k] for k in names])

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_out, graph_grads = step(static)
        with torch.no_grad():
            for k, v in fresh.items():
                if isinstance(v, Tensor):
                    static[k].copy_(v)
        expected_inputs = clone_inputs(fresh)
        for k in names:
            expected_inputs[k] = expected_inputs[k].detach().requires_grad_()
        graph.replay()
        torch.cuda.synchronize()
        out, grads = step(expected_inputs)
        for got, want in zip(graph_out, out, strict=True):
            assert_close(got, want, 1e-5, 1e-5, "graph replay output")
        for got, want in zip(graph_grads, grads, strict=True):
            assert_close(got, want, 1e-5, 1e-5, "graph replay gradient")
        for name in self.mutated:
            assert_close(static[name], expected_inputs[name], 1e-5, 1e-5, f"{name} after replay")
