"""Builds an operator's benchmark plan (docs/spec.md, "benchmark"): shapes in the format of test
samples (``build_tests.sample_list``), dtypes, the work of one forward call as dim expressions
(``shapes.parse_entry``: the grammar and limits of shape entries), the optional inputs the calls
pass, whether forward + backward is timed too, and baselines. Which names the expressions and
shapes may use is checked later, against the resolved operator (``resolve/validate/bench.py``).
"""

from __future__ import annotations

import re

from .build_stages import launcher_ref
from .build_tensors import dtype_list
from .build_tests import sample_list
from .load import Node
from .model import Baseline, Benchmark
from .reader import Reader, kind
from .shapes import Expr, ShapeError, parse_entry

WORK_KEYS = ("bytes", "flops", "backward_bytes", "backward_flops")
BENCH_KEYS = ("shapes", "dtypes", *WORK_KEYS, "given", "backward", "baselines")
BASELINE_KEYS = ("name", "function", "adapter")
# A baseline's label heads table rows and plot bars: short, printable, no markup.
BASELINE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]{0,39}")
# The label of the operator's own rows.
OURS = "ours"


def benchmark(reader: Reader, node: Node) -> Benchmark | None:
    m = reader.mapping(node, "'benchmark'", BENCH_KEYS, required=("shapes",))
    if m is None:
        return None
    ok = True
    shapes = None
    if (sn := m.get("shapes")) is not None:
        shapes = sample_list(reader, sn, "shapes")
    dtypes = ()
    if (d := m.get("dtypes")) is not None:
        dtypes = dtype_list(reader, d, "benchmark dtypes")
        ok &= dtypes is not None
    work = {}
    for key in WORK_KEYS:
        work[key] = None
        if (n := m.get(key)) is not None:
            work[key] = _work(reader, n, key)
            ok &= work[key] is not None
    given = ()
    if (g := m.get("given")) is not None:
        given = _given(reader, g)
        ok &= given is not None
    backward = None
    if (b := m.get("backward")) is not None:
        if isinstance(b.value, bool):
            backward = b.value
        else:
            reader.error(b.loc, f"benchmark backward must be true or false, got {kind(b)}")
            ok = False
    baselines = ()
    if (bn := m.get("baselines")) is not None:
        baselines = _baselines(reader, bn)
        ok &= baselines is not None
    if not ok or shapes is None:
        return None
    return Benchmark(
        shapes=shapes,
        dtypes=dtypes,
        bytes=work["bytes"],
        flops=work["flops"],
        backward_bytes=work["backward_bytes"],
        backward_flops=work["backward_flops"],
        given=given,
        backward=backward,
        baselines=baselines,
        loc=node.loc,
        dtypes_loc=d.loc if d is not None else None,
        bytes_loc=m.get("bytes").loc if m.get("bytes") is not None else None,
        flops_loc=m.get("flops").loc if m.get("flops") is not None else None,
        backward_bytes_loc=_loc(m.get("backward_bytes")),
        backward_flops_loc=_loc(m.get("backward_flops")),
        given_loc=g.loc if g is not None else None,
        backward_loc=b.loc if b is not None else None,
    )


def _loc(node: Node | None):
    return node.loc if node is not None else None


def _work(reader: Reader, node: Node, key: str) -> Expr | None:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "...":
        reader.error(
            node.loc,
            f"benchmark {key} must be an integer expression over dims and tensor names, "
            f"got {kind(node)}",
        )
        return None
    try:
        expr = parse_entry(value)
    except ShapeError as exc:
        reader.error(node.loc, f"benchmark {key}: {exc}")
        return None
    return expr


def _given(reader: Reader, node: Node) -> tuple[str, ...] | None:
    if not node.is_seq or not all(isinstance(x.value, str) and x.value for x in node.value):
        reader.error(
            node.loc, f"benchmark given must be a list of optional input names, got {kind(node)}"
        )
        return None
    names: list[str] = []
    for item in node.value:
        if item.value in names:
            reader.error(item.loc, f"benchmark given lists '{item.value}' twice")
            return None
        names.append(item.value)
    return tuple(names)


def _baselines(reader: Reader, node: Node) -> tuple[Baseline, ...] | None:
    if not node.is_seq or not node.value:
        reader.error(
            node.loc,
            "benchmark baselines must be a non-empty list of {name, function, adapter}, "
            f"got {kind(node)}",
        )
        return None
    out: list[Baseline] = []
    ok = True
    for item in node.value:
        m = reader.mapping(item, "a baseline", BASELINE_KEYS, required=("name", "function"))
        if m is None:
            ok = False
            continue
        name = reader.string(m.get("name"), "baseline name")
        if name is not None and not BASELINE_NAME.fullmatch(name):
            reader.error(
                m.get("name").loc,
                f"baseline name '{name}' must start with a letter and hold at most 40 letters, "
                "digits, '_', '.', '+' or '-'",
            )
            name = None
        elif name is not None and (name == OURS or name in {b.name for b in out}):
            taken = "names the operator's own rows" if name == OURS else "is used twice"
            reader.error(m.get("name").loc, f"baseline name '{name}' {taken}")
            name = None
        fn_node, ad_node = m.get("function"), m.get("adapter")
        function = launcher_ref(reader, fn_node, "baseline function") if fn_node else None
        adapter = launcher_ref(reader, ad_node, "baseline adapter") if ad_node else None
        if name is None or function is None or (ad_node is not None and adapter is None):
            ok = False
            continue
        out.append(
            Baseline(
                name=name,
                function=function,
                adapter=adapter,
                loc=item.loc,
                function_loc=fn_node.loc,
                adapter_loc=ad_node.loc if ad_node is not None else None,
            )
        )
    return tuple(out) if ok else None
