"""Operator schemas of public kernel libraries, run through the generator with their own names.

``tests/data/library_schemas.tsv`` holds the schemas that vLLM, sgl-kernel, FBGEMM-GPU,
TensorRT-LLM, xformers, bitsandbytes, torchao, flash-attention and FlashInfer define, each as
written (its header says where each comes from). ``python -m tests.library_corpus`` runs every one
the way ``tests/schema_corpus.py`` runs torch's own: each becomes a small operator around a
recording launcher (its schema text kept as written, argument names included; only unnamed
returns get names ``r0, r1, ...``), and the outcome is

- **works**: the layer generates, imports, registers the written schema, has torch's defaults,
  hands the launcher exactly what the caller passed, and passes opcheck;
- **refused**: the generator exits 2 and every diagnostic of the operator points inside its
  schema string at a construct the message quotes;
- **FAIL**: anything else (a traceback, an unlocated refusal, a failed check).

Options: ``--sample`` (the CI sample, ``SAMPLE``), ``--library NAME`` (repeatable), ``--limit N`` (the first N after the filter),
``--json FILE`` (per-schema outcome and reason, to compare generator versions), ``--markdown``
(the tables of ``docs/spec.md``, *Schemas from kernel libraries*), ``--write-docs`` (replace
them there, between the markers), ``--verbose`` (every FAIL with its schema), ``--batch`` and
``--jobs`` (operators per generated spec, specs at a time). Exit status 1 when any schema FAILs.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from tests import schema_corpus
from tests.schema_corpus import Case

DATA = Path(__file__).resolve().parent / "data" / "library_schemas.tsv"
COLUMNS = ("library", "source", "name", "schema")
DOCS = schema_corpus.ROOT / "docs" / "spec.md"
BEGIN = "<!-- library-corpus: begin; python -m tests.library_corpus --jobs 2 --write-docs -->"
END = "<!-- library-corpus: end -->"

# The CI sample (tests/test_library_corpus.py): every library, and per construct class one
# schema, pinned with today's outcome. A "works" stays working; a "refused" may start working.
SAMPLE = {
    # works
    "bitsandbytes::int8_scaled_mm": "works",  # Tensor? and ScalarType? defaulting to None
    "bitsandbytes::dequantize_4bit": "works",  # int[], str, ScalarType without defaults
    "fbgemm_gpu::batch_index_select_dim0": "works",  # SymInt[], bool defaults
    "fbgemm_gpu::jagged_to_padded_dense": "works",  # Tensor[] argument, SymInt[], float default
    "fbgemm_gpu::merge_pooled_embeddings": "works",  # Tensor[], Device
    "fbgemm_gpu::combine_shuffling": "works",  # int? = None, bool? = False, two returns
    "fbgemm_gpu::f8f8bf16_rowwise_grouped_mm": "works",  # Tensor(a!) updated and a return
    "fbgemm_gpu::lengths_range": "works",  # SymInt[]? = None
    "fbgemm_gpu::tbe_input_combine": "works",  # several Tensor[], three returns
    "xformers::_sparse24_fp8_sm90_cutlass_gemm": "works",  # keyword-only arguments
    "xformers::memory_efficient_attention_forward": "works",  # float? = 0.0
    "vllm::fp8_scaled_mm_cpu": "works",  # Tensor(a0!) inputs, SymInt[]
    "vllm::machete_mm": "works",  # ScalarType?, int?, str? without defaults
    "vllm::hadacore_transform": "works",  # 'Tensor!' (an unnamed alias set)
    "sgl_kernel::gptq_marlin_gemm": "works",  # many 'Tensor!' and Tensor?
    "sgl_kernel_xpu::rotary_embedding": "works",
    "tensorrt_llm::fp4_dequantize": "works",  # str default written with double quotes
    "tensorrt_llm::renorm_moe_routing_op": "works",  # SymInt, ScalarType? = None
    "torchao::qscaled_dot_product": "works",  # float? = None
    "flash_attn::get_scheduler_metadata": "works",  # the first argument is an int
    "sgl_kernel::sgl_per_token_quant_fp8": "works",  # -> () writing nothing: side_effects
    "fbgemm_gpu::rope_qkv_decoding": "works",  # a tensor named 'batch'
    "vllm::dynamic_4bit_int_moe": "works",  # an argument named 'I'
    "bitsandbytes::int8_vectorwise_quant": "works",  # a Tensor? return given when a float is set
    "sgl_kernel::moe_fused_gate": "works",  # -> (Tensor[]): a list return of a fixed count
    "fbgemm_gpu::bf16bf16bf16_grouped": "works",  # (Tensor[] X, Tensor[] W) -> Tensor[]
    # refused today
    "vllm::silu_and_mul": "refused",  # -> () with a 'Tensor!' output argument
    "vllm::rotary_embedding": "refused",  # Tensor!? (an optional in-place input)
    "fbgemm_gpu::rope_qkv_varseq_prefill": "refused",  # Tensor(a!)?
    "tensorrt_llm::mnnvl_fusion_allreduce": "refused",  # Tensor[] return beside Tensor(a!)
    "tensorrt_llm::fused_add_rms_norm_quant": "refused",  # a Tensor? return
    "tensorrt_llm::allreduce_pg": "refused",  # a TorchScript class argument
    "flashinfer::nvshmem_alltoall": "refused",
    "sgl_kernel::convert_vertical_slash_indexes": "refused",  # an argument name written twice
    "vllm::static_scaled_fp8_quant#2": "refused",  # (int, int)?
    "fbgemm_gpu::nccl_init": "refused",  # no Tensor argument
    "fbgemm_gpu::is_uvm_tensor": "refused",  # a bool return
    # A Tensor[]? argument (declared list: true), refused for its argument named 'iter'.
    "fbgemm_gpu::remap_indices_update_utils": "refused",
}


@dataclass(frozen=True)
class Entry:
    library: str
    source: str  # owner/repo:path
    name: str  # operator name, with its overload name if any
    schema: str  # "(args) -> rets", as written
    key: str = ""  # library::name, "#2", "#3", ... for a name defined again with another schema


def load(path: Path = DATA) -> list[Entry]:
    entries = []
    seen: collections.Counter = collections.Counter()
    header = None
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if header is None:
            header = tuple(fields)
            assert header == COLUMNS, f"{path}:{lineno}: header {header}, expected {COLUMNS}"
            continue
        assert len(fields) == len(COLUMNS), f"{path}:{lineno}: {len(fields)} columns"
        key = f"{fields[0]}::{fields[2]}"
        seen[key] += 1
        entries.append(Entry(*fields, key=key if seen[key] == 1 else f"{key}#{seen[key]}"))
    return entries


def make_cases(entries: list[Entry]) -> tuple[list[tuple[Entry, Case]], list[tuple[Entry, str]]]:
    """A case per entry that torch can parse and a custom operator could have; the rest, with
    the reason they are not run."""
    pairs, skipped = [], []
    for i, e in enumerate(entries):
        try:
            parsed = torch._C.parse_schema(f"{schema_corpus.NAMESPACE}::{e.name}{e.schema}")
        except RuntimeError as exc:
            skipped.append((e, "torch cannot parse it: " + str(exc).splitlines()[0]))
            continue
        case = schema_corpus.transform(parsed, i, written=e.schema, keep_names=True)
        if case is None:
            skipped.append((e, "variadic ('...')"))
            continue
        case.source = e.key
        pairs.append((e, case))
    return pairs, skipped


def sample_entries(entries: list[Entry] | None = None) -> list[Entry]:
    by_key = {e.key: e for e in (entries if entries is not None else load())}
    missing = sorted(set(SAMPLE) - set(by_key))
    assert not missing, f"sample schemas not in {DATA.name}: {missing}"
    return [by_key[k] for k in SAMPLE]


def select(entries: list[Entry], libraries=None, limit=None) -> list[Entry]:
    if libraries:
        unknown = set(libraries) - {e.library for e in entries}
        if unknown:
            raise SystemExit(f"unknown library: {', '.join(sorted(unknown))}")
        entries = [e for e in entries if e.library in libraries]
    return entries[:limit] if limit is not None else entries


def run(pairs: list[tuple[Entry, Case]], batch: int = 40, jobs: int = 1) -> None:
    schema_corpus.run([c for _, c in pairs], batch, jobs)


# --- reports ------------------------------------------------------------------------------------


def by_library(pairs) -> list[tuple[str, int, int, int, int]]:
    counts: dict[str, collections.Counter] = {}
    for e, c in pairs:
        counts.setdefault(e.library, collections.Counter())[c.outcome] += 1
    rows = [
        (lib, sum(n.values()), n["works"], n["refused"], n["FAIL"])
        for lib, n in sorted(counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    ]
    total = collections.Counter(c.outcome for _, c in pairs)
    rows.append(("all", len(pairs), total["works"], total["refused"], total["FAIL"]))
    return rows


_GROUPS = (
    # alias sets are named freely ('Tensor!', 'Tensor(a3!)?', 'Tensor(out!)?')
    (re.compile(r"Tensor!|Tensor\(\w+!\)"), "Tensor(<set>!)"),
    (re.compile(r"\(the first is '[^']*'\)"), "(the first is '<type>')"),
    (
        re.compile(
            r"return <i> has type '[^']*'(; operators return Tensor values only \(return the value)"
        ),
        r"return <i> has type '<scalar>'\1",
    ),
    (
        re.compile(r"type '[^']*'( of argument '<name>' is not supported by the generator)"),
        r"type '<type>'\1",
    ),
)


def group(reason: str) -> str:
    """The reason as the tables group it: spellings that differ only in an alias set's name, a
    scalar type or an unsupported type read as one."""
    for pattern, repl in _GROUPS:
        reason = pattern.sub(repl, reason)
    return reason


# Why a refusal is the right answer: torch.library itself cannot compile the construct (checked
# with torch.library.define, opcheck and torch.compile(fullgraph=True) on torch 2.13), or the
# operator has no tensor to place a fake on (a host-only utility). Anything else is a gap.
_ACCEPTABLE = (
    ("no argument is a Tensor", "host-only: no tensor argument"),
    ("torch.compile cannot trace a custom operator", "torch: Dynamo stops at a non-Tensor return"),
    ("torch cannot functionalize", "torch: cannot functionalize it"),
    ("torch.compile cannot functionalize", "torch: cannot functionalize it"),
    ("torch.compile fails on an optional list", "torch: Inductor fails on it when it is None"),
    ("no argument says when it is given", "torch: a fake cannot know a data-dependent None"),
    ("duplicate argument name", "torch: opcheck refuses two arguments of one name"),
    ("__torch__.", "torch: an unregistered TorchScript class"),
    ("read-only alias annotation", "torch: a view of an input cannot be functionalized"),
)


def acceptable(reason: str) -> str:
    """Why a refusal is the right answer ('' where it is a gap of the generator)."""
    return next((why for key, why in _ACCEPTABLE if key in reason), "")


def by_reason(pairs) -> list[tuple[str, int, str]]:
    """Refusal reasons (normalized, grouped), most common first, each with its first example."""
    groups: dict[str, list[Entry]] = {}
    for e, c in pairs:
        if c.outcome == "refused":
            groups.setdefault(group(c.reason), []).append(e)
    return [
        (reason, len(es), es[0].key)
        for reason, es in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]


def fail_reason(case: Case) -> str:
    """A FAIL's first problem with what varies between schemas taken out (positions, names)."""
    first = case.reason.split("; ")[0]
    first = re.sub(r"\b\d+:\d+: ", "", first)
    names = tuple(a["name"] for a in case.args) + tuple(case.ret_names)
    return schema_corpus._normalize(first, names)[:400]


def by_fail(pairs) -> list[tuple[str, int, str]]:
    groups: dict[str, list[Entry]] = {}
    for e, c in pairs:
        if c.outcome == "FAIL":
            groups.setdefault(fail_reason(c), []).append(e)
    return [
        (reason, len(es), es[0].key)
        for reason, es in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]


def text_report(pairs, skipped, verbose: bool = False) -> str:
    lines = [f"{'library':<16} {'schemas':>7} {'works':>6} {'refused':>7} {'FAIL':>5}"]
    for lib, n, w, r, f in by_library(pairs):
        lines.append(f"{lib:<16} {n:>7} {w:>6} {r:>7} {f:>5}")
    lines.append("")
    lines.append("refused because:")
    for reason, n, example in by_reason(pairs):
        why = acceptable(reason) or "a gap of the generator"
        lines.append(f"  {n:4d}  {reason}\n        e.g. {example} [{why}]")
    fails = by_fail(pairs)
    if fails:
        lines.append("")
        lines.append("FAIL because:")
        for reason, n, example in fails:
            lines.append(f"  {n:4d}  {reason}\n        e.g. {example}")
    if verbose:
        for e, c in pairs:
            if c.outcome == "FAIL":
                lines.append(f"FAIL {e.key} ({e.source}): {c.text}\n     {c.reason}")
    for e, why in skipped:
        lines.append(f"not run: {e.key}: {why}")
    return "\n".join(lines)


def _md(text: str) -> str:
    """A code span for a table cell: '<name>' stays visible, '|' does not end the cell."""
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


def markdown_report(pairs, skipped) -> str:
    total = collections.Counter(c.outcome for _, c in pairs)
    libraries = len({e.library for e, _ in pairs})
    rightly = sum(1 for _, c in pairs if c.outcome == "refused" and acceptable(c.reason))
    share = 100 * total["works"] / max(len(pairs), 1)
    lines = [
        f"Result on torch {torch.__version__} (CPU), {len(pairs)} schemas of {libraries} "
        f"libraries: **{total['works']} work ({share:.1f}%), {total['refused']} refused, "
        f"{total['FAIL']} FAIL**; {rightly} of the refusals are constructs torch itself cannot "
        "compile or host-only utilities without a tensor argument.",
        "",
        "| library | schemas | works | refused | FAIL |",
        "|---|---:|---:|---:|---:|",
    ]
    for lib, n, w, r, f in by_library(pairs):
        name = f"**{lib}**" if lib == "all" else f"`{lib}`"
        lines.append(f"| {name} | {n} | {w} | {r} | {f} |")
    lines += [
        "",
        "| schemas | refused because | for example | the right answer? |",
        "|---:|---|---|---|",
    ]
    for reason, n, example in by_reason(pairs):
        why = acceptable(reason) or "**no**: a gap of the generator"
        lines.append(f"| {n} | {_md(reason)} | `{example}` | {why} |")
    fails = by_fail(pairs)
    if fails:
        lines += ["", "| schemas | FAIL because | for example |", "|---:|---|---|"]
        for reason, n, example in fails:
            lines.append(f"| {n} | {_md(reason)} | `{example}` |")
    if skipped:
        lines += ["", "Not run: " + "; ".join(f"`{e.key}` ({why})" for e, why in skipped) + "."]
    return "\n".join(lines)


def write_docs(table: str, path: Path = DOCS) -> None:
    """Replace the text between the markers in ``path`` with ``table``."""
    text = path.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: the markers {BEGIN!r} ... {END!r} are missing")
    path.write_text(text[: start + len(BEGIN)] + "\n" + table + "\n" + text[end:])


def json_report(pairs, skipped) -> dict:
    return {
        "torch": torch.__version__,
        "data": str(DATA.relative_to(schema_corpus.ROOT)),
        "summary": [
            dict(zip(("library", "schemas", "works", "refused", "FAIL"), row, strict=True))
            for row in by_library(pairs)
        ],
        "results": [
            dict(
                key=e.key,
                library=e.library,
                source=e.source,
                name=e.name,
                schema=e.schema,
                outcome=c.outcome,
                reason=fail_reason(c) if c.outcome == "FAIL" else c.reason,
                problem=c.reason if c.outcome == "FAIL" else "",
                details=c.details,
            )
            for e, c in pairs
        ]
        + [
            dict(
                key=e.key,
                library=e.library,
                source=e.source,
                name=e.name,
                schema=e.schema,
                outcome="not run",
                reason=why,
                problem="",
                details=[],
            )
            for e, why in skipped
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", action="store_true", help="only the CI sample (SAMPLE)")
    parser.add_argument("--library", action="append", help="only this library (repeatable)")
    parser.add_argument("--limit", type=int, help="only the first N schemas (after --library)")
    parser.add_argument("--json", type=Path, help="write per-schema outcomes and reasons here")
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    parser.add_argument("--write-docs", action="store_true", help=f"put the tables in {DOCS.name}")
    parser.add_argument("--verbose", action="store_true", help="list every FAIL with its schema")
    parser.add_argument("--batch", type=int, default=40, help="operators per generated spec")
    parser.add_argument("--jobs", type=int, default=1, help="specs generated at a time")
    args = parser.parse_args(argv)
    entries = select(sample_entries() if args.sample else load(), args.library, args.limit)
    pairs, skipped = make_cases(entries)
    start = time.monotonic()
    run(pairs, args.batch, args.jobs)
    elapsed = time.monotonic() - start
    libraries = len({e.library for e in entries})
    print(
        f"torch {torch.__version__}: {len(entries)} schemas of {libraries} libraries "
        f"({DATA.name}), {len(pairs)} run, {elapsed:.0f}s"
    )
    print(
        markdown_report(pairs, skipped)
        if args.markdown
        else text_report(pairs, skipped, args.verbose)
    )
    if args.write_docs:
        if args.sample or args.library or args.limit is not None:
            raise SystemExit("--write-docs takes the whole corpus (no --library, no --limit)")
        write_docs(markdown_report(pairs, skipped))
    if args.json:
        args.json.write_text(json.dumps(json_report(pairs, skipped), indent=1) + "\n")
    return 1 if any(c.outcome == "FAIL" for _, c in pairs) else 0


if __name__ == "__main__":
    sys.exit(main())
