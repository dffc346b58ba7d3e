"""The case tables of the generated operator tests (not imported by the package itself).

A generated test module holds its operator's tables (samples, dtypes, tolerances, the axes of
its configurations, how to break each argument, the value domains of its inputs) and builds its
pytest cases from them here, at import time, so that one more sample or dtype in the spec is
one more table row: the configurations, the numeric cases and their layouts, those opcheck and
the eager fast path run by default, the rejected arguments, the compiled runs, the packed
samples and the edge values of each value domain.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Callable, Iterable

import pytest

# The layouts and the inputs' helpers. Runtime modules are copied into a generated package under
# ``_``-prefixed names (``<package>/_testing.py``), so the sibling is found under this module's
# own prefix and package: ``codegen.runtime.testing`` here, ``<package>._testing`` there.
_package, _, _own = __name__.rpartition(".")
_t = importlib.import_module(f"{_package}.{'_' if _own.startswith('_') else ''}testing")


def configs(variants: dict, optional: Iterable[str] = (), flag: str | None = None) -> dict:
    """Every configuration: each variant value x each optional input given or None x the flag.

    The first value of each axis is the default (variants list the schema default first;
    optional inputs are given, the flag is on); the first configuration, ``"default"``, takes
    every default, and the id of any other names where it departs from it: the variant value,
    ``no_<input>``, ``no_<flag>``.
    """
    axes: list[list[tuple[str | None, str, object]]] = []
    for name, values in variants.items():
        axes.append(
            [(None if i == 0 else _value_id(name, v), name, v) for i, v in enumerate(values)]
        )
    for name in optional:
        axes.append([(None, name, True), (f"no_{name}", name, False)])
    if flag is not None:
        axes.append([(None, flag, True), (f"no_{flag}", flag, False)])
    out = {}
    for combo in itertools.product(*axes):
        cid = "-".join(part for part, _, _ in combo if part) or "default"
        out[cid] = {name: value for _, name, value in combo}
    return out


def _value_id(name: str, value) -> str:
    return value if isinstance(value, str) else f"{name}{value}"


def case_id(*parts: str) -> str:
    return "-".join(parts)


def cases(
    samples: dict,
    dtypes: Iterable[str],
    configs: dict,
    make_inputs: Callable,
    names: Iterable[str] | None = None,
    extra_layouts: Iterable[str] = (),
) -> list:
    """``pytest.param(sample, dtype, layout, config)`` for every run of the numeric tests.

    Per sample and dtype: every configuration on compact inputs, then, on the default
    configuration, one dense permuted layout per input of ``names`` (default: every input) that
    ``make_inputs(sample, dtype, config)`` builds with two dims of size > 1, then
    ``extra_layouts``. On the first dtype only, also one strided layout per input of ``names``
    with a dim of size > 1 (1-D inputs and list elements included), on the first sample that
    gives it a value: strides are a property of the kernel's indexing, which one sample shows.
    Ids read ``<dtype>-<sample>-<layout>-<config>``.
    """
    dtypes = list(dtypes)
    default = next(iter(configs))
    out = []
    strided_already: set[str] = set()
    for sample in samples:
        inputs = make_inputs(sample, dtypes[0], default)
        layouts = [_t.PERMUTED + n for n in _t.permutable(inputs, names)] + list(extra_layouts)
        to_stride = [n for n in _t.stridable(inputs, names) if n not in strided_already]
        strided_already.update(to_stride)
        for j, dtype in enumerate(dtypes):
            runs = [(_t.COMPACT, c) for c in configs] + [(lay, default) for lay in layouts]
            if j == 0:
                runs += [(_t.STRIDED + n, default) for n in to_stride]
            out += [
                pytest.param(sample, dtype, lay, c, id=case_id(dtype, sample, lay, c))
                for lay, c in runs
            ]
    return out


def first_cases(
    samples: dict, dtypes: Iterable[str], configs: dict, layouts: Iterable[str], config=None
):
    """``pytest.param(sample, dtype, layout, config)`` of each of ``layouts`` on the first
    sample and dtype and the default configuration, or ``config`` (layouts of what only exists
    after the forward: incoming gradients, saved outputs)."""
    sample, dtype = next(iter(samples)), next(iter(dtypes))
    config = next(iter(configs)) if config is None else config
    return [
        pytest.param(sample, dtype, lay, config, id=case_id(dtype, sample, lay, config))
        for lay in layouts
    ]


def default_cases(cases: list) -> list:
    """``cases`` with those a consistency check need not run by default marked ``slow``.

    Kept by default, on the first dtype: every sample and configuration on compact inputs and
    each dense permuted layout once (on the first sample that has it); on every other dtype the
    first compact case. Strided layouts and the rest of the dtypes are marked, and ``--full``
    runs them. Used for opcheck and for the eager fast path against the dispatcher: the numeric
    tests against the reference run every case, and what these two compare (the registration,
    the path a call takes) changes with a layout only through the strides the fake and the
    kernel are handed.
    """
    if not cases:
        return cases
    first_dtype = cases[0].values[1]
    kept: set = set()
    out = []
    for case in cases:
        _, dtype, layout, _ = case.values
        if dtype == first_dtype:
            key = None if layout == _t.COMPACT else layout
            keep = layout == _t.COMPACT or (layout.startswith(_t.PERMUTED) and key not in kept)
        else:
            key = (dtype,)
            keep = layout == _t.COMPACT and key not in kept
        if keep:
            if key is not None:
                kept.add(key)
            out.append(case)
        else:
            out.append(
                pytest.param(*case.values, id=case.id, marks=[*case.marks, pytest.mark.slow])
            )
    return out


def saved_layouts(saved: Iterable[str]) -> list[str]:
    """A dense permuted and a strided layout of each saved output a backward takes."""
    return [prefix + name for name in saved for prefix in (_t.PERMUTED, _t.STRIDED)]


def saved_cases(
    samples: dict, dtypes: Iterable[str], configs: dict, saved: Iterable[str], variants: dict
) -> list:
    """:func:`first_cases` of each saved output's layouts on the default configuration and on
    each one departing from it by a single variant value: a variant may change what the forward
    saves (``chunk_gla`` keeps its chunk states only with ``save_states=True``; where a saved
    output is empty, ``with_layout`` skips the case)."""
    layouts = saved_layouts(saved)
    if not layouts:
        return []
    ids = [None] + [_value_id(n, v) for n, values in variants.items() for v in values[1:]]
    return [case for c in ids for case in first_cases(samples, dtypes, configs, layouts, c)]


def present_in(samples: dict, dtype: str, config: str, make_inputs: Callable, name: str) -> str:
    """The first sample whose inputs give ``name`` a value (an optional input may be literal)."""
    for sample in samples:
        if make_inputs(sample, dtype, config).get(name) is not None:
            return sample
    raise AssertionError(f"no sample gives {name!r} a value")


def reject_cases(rejects: dict, samples: dict, dtype: str, configs: dict, make_inputs) -> list:
    """``pytest.param(sample, name, how)`` for each way ``rejects`` breaks each argument."""
    default = next(iter(configs))

    def sample_for(name: str, how: str) -> str:
        # A value of the wrong type replaces whatever the argument held, None included.
        if how == "type" or how.startswith("type-"):
            return next(iter(samples))
        return present_in(samples, dtype, default, make_inputs, name)

    return [
        pytest.param(sample_for(name, how), name, how, id=f"{name}-{how}")
        for name, hows in rejects.items()
        for how in hows
    ]


def compile_cases(samples: dict, configs: dict) -> list:
    """Every configuration on the first sample; the second sample reuses the dynamic graph."""
    names = list(samples)
    runs = [(names[0], c) for c in configs]
    if len(names) > 1:
        runs.append((names[1], next(iter(configs))))
    return [pytest.param(s, c, id=case_id(s, c)) for s, c in runs]


def varlen_samples(samples: dict, offsets: str) -> list[str]:
    """The samples that pack sequences (they spell out ``offsets``)."""
    return [name for name, s in samples.items() if s.get(offsets) is not None]


# Value domains (docs/spec.md, "Value domains"): the values at the edges of an input's declared
# range (``_testing_edges`` puts them into the inputs and compares the results).

# Finite stand-ins for an infinite bound, as far out as log-decays and logits are written.
HUGE = (1e4, 1e10)


def domain_values(domain: tuple[str, str], bounds_only: bool = False) -> list[float]:
    """The edge values of ``domain`` (its bounds as ``repr`` strings): each bound, -1e10 and -1e4
    beside an infinite lower one (1e4 and 1e10 beside an infinite upper one), and 0 where it
    lies inside; with ``bounds_only`` the bounds alone."""
    lo, hi = float(domain[0]), float(domain[1])
    values = [lo]
    if not bounds_only:
        values += [-h for h in reversed(HUGE)] if lo == -math.inf else []
        values.append(0.0)
        values += list(HUGE) if hi == math.inf else []
    values.append(hi)
    out: list[float] = []
    for v in values:
        if lo <= v <= hi and v not in out:
            out.append(v)
    return out


def domain_cases(
    samples: dict, domains: dict, offsets: str | None = None, configs=None, variants=()
) -> list:
    """``pytest.param(sample, config, name, value)``: every edge value of each input's domain on
    the first sample and the default configuration; its bounds on each configuration that
    departs from the default only in ``variants`` (a variant is another computation), and on
    each sample that spells out the offsets input ``offsets`` (values inside and across packed
    sequences)."""
    configs = configs or {"default": {}}
    default = next(iter(configs.values()))
    kept = [
        c
        for c, values in configs.items()
        if all(v == default[k] for k, v in values.items() if k not in variants)
    ]
    first = next(iter(samples))
    out = []
    for sample, sizes in samples.items():
        if sample != first and (offsets is None or sizes.get(offsets) is None):
            continue
        for config in kept:
            for name, domain in domains.items():
                every = sample == first and config == kept[0]
                for v in domain_values(domain, bounds_only=not every):
                    vid = case_id(sample, config, f"{name}={v:g}")
                    out.append(pytest.param(sample, config, name, v, id=vid))
    return out
