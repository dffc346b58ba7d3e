"""Builds an operator's test plan: samples, test dtypes, tolerances, the seed and varlen. A sample
gives dim sizes, the ``batch`` sizes of ``...``, and values of scalar arguments or literal tensor
inputs; tolerances map dtypes to ``[atol, rtol]``; ``varlen`` names the offsets input and packed dim
of a variable-length test. Whether samples fit the operator's dims and arguments is checked later,
in ``resolve/validate``.
"""

from __future__ import annotations

import math

from .build_tensors import dtype_list
from .limits import MAX_RANK, MAX_SAMPLE_VALUES, MAX_SAMPLES, count_problem
from .load import Node
from .model import DType, Sample, TestPlan, Tolerance, Varlen
from .reader import Reader, is_size, kind

TEST_KEYS = ("samples", "dtypes", "tolerance", "grad_tolerance", "seed", "varlen")
VARLEN_KEYS = ("offsets", "dim", "per_sequence")


def tests(reader: Reader, node: Node) -> TestPlan | None:
    m = reader.mapping(node, "'tests'", TEST_KEYS, required=("samples", "tolerance"))
    if m is None:
        return None
    samples: tuple[Sample, ...] | None = ()
    if (sn := m.get("samples")) is not None:
        samples = sample_list(reader, sn)
        if samples is None:
            return None
    dtypes = ()
    if (d := m.get("dtypes")) is not None:
        dtypes = dtype_list(reader, d, "test dtypes")
        if dtypes is None:
            return None
    tol = tolerance(reader, m.get("tolerance"), "tolerance") if m.get("tolerance") else None
    gtol = tol
    if m.get("grad_tolerance") is not None:
        gtol = tolerance(reader, m.get("grad_tolerance"), "grad_tolerance")
    seed = 0
    if (s := m.get("seed")) is not None:
        if not is_size(s.value):
            reader.error(s.loc, "'seed' must be a non-negative integer")
            return None
        seed = s.value
    varlen = None
    if (v := m.get("varlen")) is not None:
        varlen = _varlen(reader, v)
        if varlen is None:
            return None
    if tol is None or gtol is None or sn is None:
        return None
    return TestPlan(samples, dtypes, tol, gtol, seed, varlen, node.loc)


def sample_list(reader: Reader, node: Node, what: str = "samples") -> tuple[Sample, ...] | None:
    """A non-empty list of samples (test ``samples``, benchmark ``shapes``: the same format)."""
    if not node.is_seq or not node.value:
        reader.error(
            node.loc,
            f"'{what}' must be a non-empty list of dim sizes, e.g. - {{batch: [2, 3], D: 128}}",
        )
        return None
    if problem := count_problem(len(node.value), MAX_SAMPLES, what):
        reader.error(node.loc, f"'{what}': {problem}")
        return None
    samples = []
    for item in node.value:
        sample = _sample(reader, item)
        if sample is None:
            return None
        samples.append(sample)
    return tuple(samples)


def _sample(reader: Reader, item: Node) -> Sample | None:
    if not item.is_map:
        reader.error(item.loc, f"a sample must map dim names to sizes, got {kind(item)}")
        return None
    entries, batch = [], None
    for key, v in item.value.items():
        if v.is_seq and (problem := count_problem(len(v.value), MAX_SAMPLE_VALUES, "values")):
            reader.error(v.loc, f"sample value of '{key}': {problem}")
            return None
        if key == "batch":
            if not v.is_seq or not all(is_size(x.value) for x in v.value):
                reader.error(v.loc, "'batch' must be a list of sizes (the dims matched by '...')")
                return None
            if problem := count_problem(len(v.value), MAX_RANK, "sizes"):
                reader.error(v.loc, f"'batch': {problem} (the dims '...' stands for)")
                return None
            batch = tuple(x.value for x in v.value)
        elif v.is_seq:
            if not all(isinstance(x.value, (int, float, str)) for x in v.value):
                reader.error(v.loc, f"values of '{key}' must be numbers, booleans or strings")
                return None
            entries.append((key, tuple(x.value for x in v.value)))
        elif v.is_map or v.value is None:
            reader.error(v.loc, f"sample value of '{key}' must be a size, a scalar or a list")
            return None
        else:
            entries.append((key, v.value))
    return Sample(tuple(entries), batch, item.loc)


def _varlen(reader: Reader, node: Node) -> Varlen | None:
    vm = reader.mapping(node, "'varlen'", VARLEN_KEYS, required=("offsets", "dim"))
    if vm is None:
        return None
    offsets = reader.string(vm.get("offsets"), "varlen offsets")
    dim = reader.string(vm.get("dim"), "varlen dim")
    per = ()
    if (pn := vm.get("per_sequence")) is not None:
        if not pn.is_seq or not all(isinstance(x.value, str) for x in pn.value):
            reader.error(pn.loc, "varlen per_sequence must be a list of input or output names")
            return None
        per = tuple(x.value for x in pn.value)
    if offsets is None or dim is None:
        return None
    return Varlen(offsets, dim, per, node.loc)


def tolerance(reader: Reader, node: Node, what: str) -> tuple[tuple[DType, Tolerance], ...] | None:
    if not node.is_map:
        reader.error(node.loc, f"{what} must map dtypes to [atol, rtol]")
        return None
    out = []
    for name, item in node.value.items():
        try:
            dt = DType.parse(name)
        except ValueError as exc:
            reader.error(node.value.key_loc(name), str(exc))
            return None
        vals = [v.value for v in item.value] if item.is_seq else None
        if (
            vals is None
            or len(vals) != 2
            or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf
                for v in vals
            )
        ):
            reader.error(
                item.loc,
                f"{what} for {name} must be [atol, rtol], two finite non-negative numbers",
            )
            return None
        out.append((dt, Tolerance(float(vals[0]), float(vals[1]))))
    return tuple(out)
