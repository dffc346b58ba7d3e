"""Paying the first calls ahead of time: :func:`warmup` (docs/spec.md, "Warm-up").

A fresh process's first call of an operator compiles (Triton JIT, CuTeDSL) and loads the kernels
it launches; later calls of the same kernel configuration reuse them. ``warmup`` calls every
operator once per declared variant value, dtype and pass (forward; forward + backward where the
operator has a backward) on the test samples of the spec, each configuration of its optional
inputs and arity flag included, so that those compilations happen when the caller chooses.

The plan (``_warmup_plan.py``) is generated from the spec; this module runs it. It is copied
into the generated package as ``_warmup.py``, imports nothing of the generator, and imports the
plan only when ``warmup`` is first called (importing the package stays as cheap as it was).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

# The inputs are drawn on the CPU (seeded, the same on every device), then moved.
DEVICE = "cpu"
FWD, BWD = "fwd", "fwd+bwd"


# ---------------------------------------------------------------------------------------------
# The draws the plan's input builders call (the tests' draws, without pytest)
# ---------------------------------------------------------------------------------------------


def randn(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)


def logsigmoid(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    return torch.nn.functional.logsigmoid(randn(gen, shape, torch.float32)).to(dtype)


def mask(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    return (torch.rand(shape, generator=gen) < 0.5).to(dtype)


def index(
    gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype, bound: int, skip: bool = False
) -> Tensor:
    values = torch.randint(0, max(int(bound), 1), shape, generator=gen)
    if skip:
        negative = -torch.randint(1, 4, shape, generator=gen)
        drop = torch.rand(shape, generator=gen) < 0.25
        values = torch.where(drop | (bound == 0), negative, values)
    return values.to(dtype)


def into_domain(x: Tensor | None, domain: tuple[str, str]) -> Tensor | None:
    return None if x is None else x.clamp(float(domain[0]), float(domain[1]))


# ---------------------------------------------------------------------------------------------
# The plan and its run
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """One operator's warm-up, as the generated plan declares it."""

    op: str
    module: str  # the package's module that defines the public function
    public: str
    seed: int
    samples: dict  # id -> the sample's entries
    variants: dict  # variant argument -> its values, the schema default first
    optional: tuple[str, ...]
    flag: str | None
    dtypes: dict  # short id (bf16) -> torch dtype
    differentiable: tuple[str, ...]
    backward: bool
    devices: tuple[str, ...]  # the device types its forward has launchers for
    make_inputs: Callable[[dict, dict, torch.dtype, torch.Generator], dict]


class WarmupEntry(NamedTuple):
    """What one (operator, variant, dtype, pass) of :func:`warmup` ran."""

    op: str
    variant: str  # "kind=softplus", several joined by ",", or "default" (no variants)
    dtype: str  # the torch name: bfloat16
    pass_: str  # "fwd" or "fwd+bwd"
    calls: int  # calls made now: one per sample and configuration of optional inputs and flag
    seconds: float  # wall time of those calls (compiles and loads included); 0 when cached
    cached: bool  # done by an earlier warmup of this process: nothing ran
    # The Triton kernels these calls compiled or loaded from Triton's disk cache, one name per
    # specialization ("_l2norm_fwd_kernel"); empty under Triton's interpreter, which compiles
    # nothing, and for CuTeDSL kernels, which Triton does not see.
    kernels: tuple[str, ...] = ()


# (op, variant, dtype, pass, device) already warmed up in this process.
_DONE: dict[tuple[str, str, str, str, str], WarmupEntry] = {}


@contextlib.contextmanager
def triton_compiles() -> Iterator[list[str]]:
    """The names of the Triton kernels compiled or loaded while inside (Triton's
    ``jit_cache_hook``: called where a kernel is not yet in the process's cache); the hook set
    before is chained and restored."""
    names: list[str] = []
    knobs = None
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        try:
            from triton import knobs
        except ImportError:  # no Triton, or one without knobs: nothing to watch
            knobs = None
    if knobs is None:
        yield names
        return
    before = knobs.runtime.jit_cache_hook

    def hook(**kw):
        names.append(kw["fn"].name)
        return before(**kw) if before is not None else None

    knobs.runtime.jit_cache_hook = hook
    try:
        yield names
    finally:
        knobs.runtime.jit_cache_hook = before


def _plans(package: str) -> tuple[Plan, ...]:
    return importlib.import_module(f"{package}._warmup_plan").PLANS


def _dtype_name(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def _choose_ops(plans: tuple[Plan, ...], ops: Iterable[str] | None) -> list[Plan]:
    if ops is None:
        return list(plans)
    if isinstance(ops, str):
        ops = [ops]
    by_name = {p.op: p for p in plans}
    chosen = []
    for name in ops:
        if name not in by_name:
            raise ValueError(
                f"warmup: unknown operator {name!r}; expected one of: {', '.join(by_name)}"
            )
        chosen.append(by_name[name])
    return chosen


def _choose_dtypes(plans: list[Plan], dtypes) -> set[torch.dtype] | None:
    if dtypes is None:
        return None
    if isinstance(dtypes, (str, torch.dtype)):
        dtypes = [dtypes]
    known: dict[str, torch.dtype] = {}
    for p in plans:
        for short, d in p.dtypes.items():
            known[_dtype_name(d)] = known[short] = d
    valid = sorted({_dtype_name(d) for d in known.values()})
    out = set()
    for d in dtypes:
        key = _dtype_name(d) if isinstance(d, torch.dtype) else d
        if not isinstance(key, str) or key not in known:
            raise ValueError(
                f"warmup: dtype {d!r} is not a dtype of the operators warmed up; expected one "
                f"of: {', '.join(valid)}"
            )
        out.add(known[key])
    return out


def _choose_samples(plans: tuple[Plan, ...], samples) -> dict[str, tuple[dict, str]]:
    """Per operator named in ``samples``: its samples by id, and their repr (a cache key)."""
    if samples is None:
        return {}
    if not isinstance(samples, dict):
        raise ValueError(
            f"warmup: samples must map operator names to lists of samples, got "
            f"{type(samples).__name__}"
        )
    by_name = {p.op: p for p in plans}
    out = {}
    for name, given in samples.items():
        if name not in by_name:
            raise ValueError(
                f"warmup: samples name unknown operator {name!r}; expected one of: "
                f"{', '.join(by_name)}"
            )
        given = [given] if isinstance(given, dict) else list(given)
        needed = sorted(set().union(*(s.keys() for s in by_name[name].samples.values())))
        required = sorted(set.intersection(*(set(s) for s in by_name[name].samples.values())))
        runs = {}
        for i, sample in enumerate(given):
            if not isinstance(sample, dict):
                raise ValueError(f"warmup: a sample of {name!r} must be a dict, got {sample!r}")
            missing = [k for k in required if k not in sample]
            unknown = [k for k in sample if k not in needed]
            if missing or unknown:
                what = f"lacks {', '.join(map(repr, missing))}" if missing else ""
                what += "; " if missing and unknown else ""
                what += f"gives unknown {', '.join(map(repr, unknown))}" if unknown else ""
                raise ValueError(
                    f"warmup: sample {sample!r} of {name!r} {what}; a sample gives: "
                    f"{', '.join(needed)}"
                )
            runs[str(i)] = sample
        if not runs:
            raise ValueError(f"warmup: no sample given for {name!r}")
        out[name] = (runs, repr([sorted(s.items()) for s in given]))
    return out


def _variant_ids(variants: dict) -> list[tuple[str, dict]]:
    """Each combination of variant values, with its id ("default" where there are none)."""
    if not variants:
        return [("default", {})]
    names = list(variants)
    out = []
    for combo in itertools.product(*(variants[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        out.append((",".join(f"{n}={v}" for n, v in values.items()), values))
    return out


def _configs(plan: Plan, values: dict) -> list[dict]:
    """The variant values with each optional input given or not and the flag on or off."""
    axes = [[(n, True), (n, False)] for n in plan.optional]
    if plan.flag is not None:
        axes.append([(plan.flag, True), (plan.flag, False)])
    return [{**values, **dict(combo)} for combo in itertools.product(*axes)]


def _to(value, device: torch.device):
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return type(value)(_to(v, device) for v in value)
    return value


def _tensors(result) -> list[Tensor]:
    items = [result] if isinstance(result, Tensor) else list(result or ())
    return [t for t in items if isinstance(t, Tensor)]


def _call(plan: Plan, fn: Callable, sample: dict, config: dict, dtype, device, backward: bool):
    gen = torch.Generator().manual_seed(plan.seed)
    inputs = {k: _to(v, device) for k, v in plan.make_inputs(sample, config, dtype, gen).items()}
    extra = {plan.flag: config[plan.flag]} if plan.flag is not None else {}
    if not backward:
        with torch.no_grad():
            fn(**inputs, **extra)
        return
    leaves = []
    for name in plan.differentiable:
        value = inputs.get(name)
        if isinstance(value, Tensor) and value.is_floating_point():
            inputs[name] = value.detach().requires_grad_(True)
            leaves.append(inputs[name])
    with torch.enable_grad():
        outs = [t for t in _tensors(fn(**inputs, **extra)) if t.requires_grad]
        if outs and leaves:
            grads = [torch.ones_like(t) for t in outs]
            torch.autograd.grad(outs, leaves, grads, allow_unused=True)


# The generated package this module is copied into.
PACKAGE = __name__.rpartition(".")[0]


def warmup(
    device: str | torch.device | None = None,
    dtypes: Iterable[str | torch.dtype] | str | torch.dtype | None = None,
    ops: Iterable[str] | str | None = None,
    *,
    samples: dict[str, Iterable[dict]] | None = None,
    backward: bool = True,
    verbose: bool = False,
) -> list[WarmupEntry]:
    """Compile and load the kernels of every operator ahead of its first call.

    Calls each operator once per combination of its declared variant values, per dtype and per
    pass (forward, then forward + backward where the operator has a backward), on the spec's test
    samples with each optional input given and left out and the arity flag on and off.

    Args:
        device: where to run (default: ``"cuda"`` when available, else ``"cpu"``).
        dtypes: dtypes to warm up, as ``torch.bfloat16`` or ``"bfloat16"`` or ``"bf16"``
            (default: each operator's tested dtypes); an operator that declares none of them is
            skipped.
        ops: operator names (default: all; an operator without a launcher for ``device`` is
            then left out, and refused when named).
        samples: per operator name, the samples to run instead of the spec's test samples, in
            the spec's sample format (``{"B": 1, "T": 64, "H": 4, "K": 128, "V": 128}``;
            ``"batch": [2, 3]`` for the '...' sizes): warm up the head dims and forms your calls
            use, at a small batch and length.
        backward: also run forward + backward where the operator has one.
        verbose: print a line per entry and the total.

    Returns one :class:`WarmupEntry` per (operator, variant, dtype, pass). A second call in the
    same process with the same choices runs nothing and returns the entries with ``cached``
    set. Raises ValueError naming an unknown operator or dtype and the valid choices.

    Triton specializes a kernel on its arguments (sizes and strides divisible by 16 or equal to
    1, pointer alignment, block sizes chosen from shapes such as the head dim): a later call
    whose shapes differ in those respects from the samples still compiles on its first call.
    """
    return run(PACKAGE, device, dtypes, ops, samples=samples, backward=backward, verbose=verbose)


def run(
    package: str,
    device=None,
    dtypes=None,
    ops=None,
    *,
    samples=None,
    backward: bool = True,
    verbose: bool = False,
) -> list[WarmupEntry]:
    """:func:`warmup` of the operators of ``package``."""
    plans = _choose_ops(_plans(package), ops)
    wanted = _choose_dtypes(plans, dtypes)
    chosen = _choose_samples(_plans(package), samples)
    device = torch.device(device if device is not None else _default_device())
    if device.type == "cuda" and device.index is None:  # "cuda" and "cuda:0" are one device
        device = torch.device("cuda", torch.cuda.current_device())
    pkg = importlib.import_module(package)
    entries = []
    for plan in plans:
        if device.type not in plan.devices:
            if ops is not None:
                raise ValueError(
                    f"warmup: operator {plan.op!r} has no launcher for device {device.type!r}; "
                    f"it has: {', '.join(plan.devices)}"
                )
            if verbose:
                print(f"warmup: {plan.op}: skipped, no launcher for {device.type}", flush=True)
            continue
        fn = getattr(pkg, plan.public)
        runs, which = chosen.get(plan.op, (plan.samples, "tests"))
        passes = (FWD, BWD) if plan.backward and backward else (FWD,)
        for vid, values in _variant_ids(plan.variants):
            for dtype in plan.dtypes.values():
                if wanted is not None and dtype not in wanted:
                    continue
                for p in passes:
                    key = (plan.op, vid, _dtype_name(dtype), p, str(device), which)
                    if key in _DONE:
                        entries.append(
                            _DONE[key]._replace(calls=0, seconds=0.0, cached=True, kernels=())
                        )
                        continue
                    calls = 0
                    with triton_compiles() as kernels:
                        start = time.perf_counter()
                        for sample in runs.values():
                            for config in _configs(plan, values):
                                _call(plan, fn, sample, config, dtype, device, p == BWD)
                                calls += 1
                        if device.type == "cuda":
                            torch.cuda.synchronize(device)
                        seconds = time.perf_counter() - start
                    entry = WarmupEntry(
                        plan.op, vid, _dtype_name(dtype), p, calls, seconds, False, tuple(kernels)
                    )
                    _DONE[key] = entry
                    entries.append(entry)
                    if verbose:
                        print(_line(entry), flush=True)
    if verbose:
        total = sum(e.seconds for e in entries)
        print(f"warmup: {len(entries)} entries on {device}, {total:.2f} s", flush=True)
    return entries


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _line(e: WarmupEntry) -> str:
    what = "cached" if e.cached else f"{e.seconds:.3f} s, {e.calls} calls"
    if e.kernels:
        what += f", compiled: {', '.join(sorted(set(e.kernels)))} ({len(e.kernels)})"
    return f"warmup: {e.op} [{e.variant}] {e.dtype} {e.pass_}: {what}"
