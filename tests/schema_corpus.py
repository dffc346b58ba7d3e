"""Every schema torch registers, run through the generator: each must work or be refused precisely.

``python -m tests.schema_corpus --all`` runs one schema per distinct construct set (a few thousand
schemas collapse to several hundred); without ``--all`` it runs the fixed CI sample. Each schema
becomes a small operator around a recording launcher:

- the operator is renamed, the overload name dropped, arguments renamed ``a0, a1, ...`` and
  returns ``r0, r1, ...`` (names are not what is measured; types, annotations and defaults are).
  ``transform(..., written=TEXT, keep_names=True)`` keeps the written argument pieces instead
  and names only the unnamed returns (``tests/library_corpus.py`` runs library schemas so);
- every ``Tensor``/``Tensor?`` argument is declared ``{shape: [..., D], dtypes: [float32],
  differentiable: false}`` (``list: true`` for ``Tensor[]``/``Tensor?[]``/``Tensor[]?``,
  ``mutated: true`` for ``(a!)``); every return gets an output of the first plain tensor input's
  shape (``count: 2`` for a ``Tensor[]`` return: the recording launcher returns two tensors);
- a sample gives the sizes and a value for each scalar argument without a default.

Outcomes:

- **works**: ``regenerate`` exits 0; the script imports the package, calls each public function
  with defaults and with explicit values (keyword-only arguments by keyword), and checks the
  registered schema equals torch's parse of the written text, the Python defaults equal torch's
  parsed defaults, the launcher received exactly what the caller passed, and opcheck passes;
- **refused**: ``regenerate`` exits 2 and every diagnostic of the operator is located inside its
  schema string, at a construct the message quotes.

Anything else (a crash, an unlocated refusal, a failed check) is a failure of the generator.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "corpus"
SCHEMA_INDENT = "      schema: "

# One representative per construct class, pinned for CI (names are torch's qualified names).
SAMPLE = (
    "aten::add.Tensor",
    "aten::add.out",
    "aten::add_.Tensor",
    "aten::cat",
    "aten::_foreach_add.List",
    "aten::_foreach_add_.Scalar",
    "aten::_foreach_acos.out",
    "aten::index.Tensor",
    "aten::index_put",
    "aten::sum.dim_IntList",
    "aten::to.dtype",
    "aten::empty_like",
    "aten::zeros",
    "aten::arange",
    "aten::max_pool2d",
    "aten::conv2d",
    "aten::dropout",
    "aten::bernoulli",
    "aten::split.Tensor",
    "aten::size.int",
    "aten::is_nonzero",
    "aten::view",
    "aten::transpose.int",
    "aten::native_layer_norm",
    "aten::nll_loss",
    "aten::_local_scalar_dense",
    "aten::to.device",
    "aten::linspace",
    "aten::polar",
    "aten::clamp",
    "aten::quantize_per_tensor",
    "aten::stft",
    "aten::searchsorted.Tensor",
    "aten::as_strided",
    "aten::_fused_adam_",
    "aten::unsafe_chunk",
    "prim::device",
)


@dataclass
class Case:
    name: str  # operator name in the generated spec
    source: str  # torch's qualified name with overload
    text: str  # the schema as written into the spec
    args: list[dict]  # per argument: name, type, optional, list, kwarg_only, default
    returns: int
    outcome: str = ""  # works | refused | FAIL
    reason: str = ""
    details: list[str] = field(default_factory=list)
    dim: str = "D"  # the dim of every tensor's shape, named unlike any argument
    placeholder: str = "x"  # the input a spec without Tensor arguments still declares
    ret_names: list[str] = field(default_factory=list)
    ret_optional: list[bool] = field(default_factory=list)  # each return is 'Tensor?'
    ret_list: list[bool] = field(default_factory=list)  # each return is 'Tensor[]'


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and strings."""
    parts, depth, quote, cur, escaped = [], 0, None, [], False
    for ch in text:
        if quote:
            cur.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _close(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start``."""
    depth, quote, escaped = 0, None, False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(text)


_PIECE = re.compile(r"^(?P<type>.*?)\s+(?P<name>\w+)(?P<default>=.*)?$")


def _unique(base: str, taken: set[str]) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}{'_' * k}"
    taken.add(name)
    return name


def transform(
    schema, index: int, *, written: str | None = None, keep_names: bool = False
) -> Case | None:
    """The schema as a custom operator's schema text, arguments and returns renamed.

    ``written`` is the schema text as its author wrote it (``name(args) -> rets`` or just
    ``(args) -> rets``), ``schema`` torch's parse of it; with ``keep_names`` the arguments are
    kept as written (types, names, defaults, spacing) and only returns without a name get one.
    """
    from codegen.spec.schema import type_text

    full = str(schema) if written is None else written.strip()
    if "..." in full:
        return None  # a variadic schema is never a custom operator's
    open_ = full.index("(")
    close = _close(full, open_)
    arg_pieces = _split_top(full[open_ + 1 : close])
    rest = full[close + 1 :].strip()
    assert rest.startswith("->"), full
    ret_text = rest[2:].strip()
    pieces, args, i = [], [], 0
    parsed_args = list(schema.arguments)
    for piece in arg_pieces:
        if piece == "*":
            pieces.append("*")
            continue
        a = parsed_args[i]
        if keep_names:
            name = a.name
            pieces.append(piece)
        else:
            m = _PIECE.match(piece)
            if m is None:
                return None
            name = f"a{i}"
            pieces.append(f"{m['type']} {name}{m['default'] or ''}")
        written = type_text(a.real_type, getattr(a, "N", None))
        args.append(
            dict(
                name=name,
                type=written,
                kwarg_only=a.kwarg_only,
                has_default=a.has_default_value(),
                write=bool(a.alias_info and a.alias_info.is_write),
            )
        )
        i += 1
    if ret_text.startswith("("):
        ret_pieces = _split_top(ret_text[1:-1])
    else:
        ret_pieces = [ret_text]
    rets, ret_names = [], []
    taken = {a["name"] for a in args}
    written_names = [r.name for r in schema.returns] if keep_names else []
    for j, piece in enumerate(ret_pieces):
        if keep_names and written_names[j]:
            ret_names.append(written_names[j])
            rets.append(piece)
            continue
        m = _PIECE.match(piece)
        type_ = m["type"] if m is not None and m["default"] is None else piece
        ret_name = _unique(f"r{j}", taken) if keep_names else f"r{j}"
        ret_names.append(ret_name)
        rets.append(f"{type_} {ret_name}")
    name = f"c{index}"
    # Written arguments stay byte for byte what their author wrote (spacing included).
    args_text = full[open_ : close + 1] if keep_names else "(" + ", ".join(pieces) + ")"
    text = args_text + " -> (" + ", ".join(rets) + ")"
    case = Case(name, f"{schema.name}.{schema.overload_name}".rstrip("."), text, args, len(rets))
    case.ret_names = ret_names
    case.ret_optional = [_PIECE.match(r)["type"].strip().endswith("?") for r in rets]
    case.ret_list = [_PIECE.match(r)["type"].strip() == "Tensor[]" for r in rets]
    taken |= set(ret_names)
    case.dim = _unique("D", taken)
    case.placeholder = _unique("x", taken)
    return case


def construct_key(schema) -> tuple:
    """What a schema is made of: its argument and return type spellings with annotations."""
    from codegen.spec.schema import type_text

    def token(x, is_arg):
        t = type_text(x.real_type, getattr(x, "N", None) if is_arg else None)
        ann = x.alias_info
        if ann is not None:
            t += "(!)" if ann.is_write else "(a)"
        if is_arg:
            t += "*" if x.kwarg_only else ""
            t += "=" if x.has_default_value() else ""
        return t

    args = frozenset(token(a, True) for a in schema.arguments)
    rets = frozenset(token(r, False) for r in schema.returns)
    return (args, rets, len(schema.returns) == 0)


def all_cases() -> list[Case]:
    seen: dict[tuple, Case] = {}
    schemas = sorted(
        torch._C._jit_get_all_schemas(), key=lambda s: (s.name, s.overload_name, str(s))
    )
    for s in schemas:
        key = construct_key(s)
        if key in seen:
            continue
        case = transform(s, len(seen))
        if case is not None:
            seen[key] = case
    return list(seen.values())


# --- the spec around each case ------------------------------------------------------------------


def _is_tensor(t: str) -> bool:
    return t in ("Tensor", "Tensor?")


def _is_list(t: str) -> bool:
    return t in ("Tensor[]", "Tensor?[]", "Tensor[]?")


def _when(case: Case) -> tuple[str, int, str] | None:
    """What decides whether a 'Tensor?' return is given (its 'when'): the first bool argument,
    else the first optional tensor, else the first number (given when nonzero); the recording
    launcher returns None by the same rule."""
    for kind, types in (
        ("bool", ("bool",)),
        ("tensor", ("Tensor?",)),
        ("number", ("int", "SymInt", "float", "int?", "SymInt?", "float?")),
    ):
        for i, a in enumerate(case.args):
            if a["type"] in types:
                return a["name"], i, kind
    return None


def _first_plain(case: Case) -> str | None:
    for a in case.args:
        if a["type"] == "Tensor" and not a["has_default"]:
            return a["name"]
    return None


def _yaml_str(s: str) -> str:
    """A one-line YAML string whose characters sit at the columns of ``s`` (no escapes), when
    the text allows: single quotes, else double quotes; both only when it has both kinds."""
    if "'" in s and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    return "'" + s.replace("'", "''") + "'"


def _sample_value(t: str):
    """A YAML-able value for a scalar argument without a default (None: no literal possible)."""
    base = t.rstrip("?")
    m = re.fullmatch(r"(\w+)\[(\d*)\]", base)
    if m:
        v = _sample_value(m[1])
        return None if v is None else [v] * int(m[2] or 2)
    values = {"int": 2, "SymInt": 2, "float": 0.5, "bool": True, "str": "x", "Scalar": 2}
    return values.get(base, base)  # enums: a name, which the tests cannot pass (refused)


def spec_text(cases: list[Case]) -> tuple[str, dict[str, tuple[int, int]]]:
    """The spec, and per case the (line, column) of its schema text (1-based)."""
    lines = [
        "version: 1",
        f"namespace: {NAMESPACE}",
        f"package: {NAMESPACE}",
        "ops:",
    ]
    where = {}
    for c in cases:
        first = _first_plain(c)
        lines += [f"  {c.name}:", f"    doc: {c.source}."]
        if not c.returns and not any(a["write"] for a in c.args):
            # Returns nothing and writes no argument: what it does is outside its tensors.
            lines.append("    side_effects: true")
        lines.append("    forward:")
        where[c.name] = (len(lines) + 1, len(SCHEMA_INDENT) + 2)
        lines.append(SCHEMA_INDENT + _yaml_str(c.text))
        lines.append(f"      launchers: {{cpu: corpus_launch:launch_{c.name}}}")
        tensors = [a for a in c.args if _is_tensor(a["type"]) or _is_list(a["type"])]
        lines.append("    inputs:")
        if not tensors:  # refused at the schema; the spec still needs the key
            lines.append(f"      {c.placeholder}: {{shape: [{c.dim}], dtypes: [float32]}}")
        if tensors:
            for a in tensors:
                extra = (", list: true" if _is_list(a["type"]) else "") + (
                    ", mutated: true" if a["write"] else ""
                )
                # Without a required plain tensor nothing binds '...': optional ones get a size.
                own = f"[..., {c.dim}]" if first or _is_list(a["type"]) else "[2, 3]"
                lines.append(
                    f"      {a['name']}: {{shape: {own}, dtypes: [float32], "
                    f"differentiable: false{extra}}}"
                )
        shape = f"[..., {c.dim}]" if first else "[3]"
        if c.returns:
            # An operator returning nothing ('-> ()') declares no outputs.
            lines.append("    outputs:")
            ret_names = c.ret_names or [f"r{j}" for j in range(c.returns)]
            for j, out in enumerate(ret_names or ["r0"]):
                when = _when(c) if j < len(c.ret_optional) and c.ret_optional[j] else None
                extra = f", when: {when[0]}" if when else ""
                if j < len(c.ret_list) and c.ret_list[j]:
                    extra += f", count: {LIST_COUNT}"  # the recording launcher returns as many
                lines.append(f"      {out}: {{shape: {shape}, dtype: float32{extra}}}")
        lines.append("    reference: corpus_launch:ref")
        sample = {"batch": [2], c.dim: 3} if first or tensors else {}
        for a in c.args:
            if not a["has_default"] and not _is_tensor(a["type"]) and not _is_list(a["type"]):
                v = _sample_value(a["type"])
                if v is not None:
                    sample[a["name"]] = v
        lines.append(
            f"    tests: {{samples: [{json.dumps(sample)}], tolerance: {{float32: [0, 0]}}}}"
        )
    return "\n".join(lines) + "\n", where


# How many tensors the recording launcher returns for a 'Tensor[]' return (declared 'count').
LIST_COUNT = 2

LAUNCH = """
import torch

CALLS = {}
SHAPES = %s
LIST_COUNT = %d


def _make(name):
    def launch(*args, **kwargs):
        CALLS.setdefault(name, []).append((args, kwargs))
        values = list(args) + list(kwargs.values())  # keyword-only arguments come by keyword
        like = next((a for a in values if isinstance(a, torch.Tensor)), None)
        shape, n, whens, lists = SHAPES[name]
        outs = []
        for j in range(n):
            if j < len(whens) and whens[j] is not None:  # a 'Tensor?' return: given or None
                at, kind = whens[j]
                if (values[at] is None) if kind == "tensor" else not values[at]:
                    outs.append(None)
                    continue
            size = tuple(values[shape].shape) if shape is not None else (3,)
            device = like.device if like is not None else "cpu"
            if lists[j]:  # a 'Tensor[]' return: a list of LIST_COUNT tensors
                outs.append([torch.zeros(size, device=device) for _ in range(LIST_COUNT)])
                continue
            outs.append(torch.zeros(size, device=device))
        if n == 0:
            return None
        return outs[0] if n == 1 else tuple(outs)

    return launch


%s


def ref(*args, **kwargs):
    raise AssertionError("not called")
"""


CHECK = r"""
import inspect, json, sys, traceback
import torch
import corpus, corpus_launch
from codegen.spec.schema import _python_default, _base_type

CASES = json.loads(sys.argv[1])


def value(t, i):
    base = t.rstrip("?")
    m = __import__("re").fullmatch(r"(\w+\??)\[(\d*)\]", base)
    if m:
        n = int(m[2] or 2)
        if m[1] == "Tensor?":
            return [torch.randn(2, 3), None][:n]
        return [value(m[1], i + k) for k in range(n)]
    return {
        "Tensor": lambda: torch.randn(2, 3),
        "int": lambda: 2 + i,
        "SymInt": lambda: 2 + i,
        "float": lambda: 0.5 + i,
        "bool": lambda: bool(i % 2),
        "str": lambda: "v%d" % i,
        "Scalar": lambda: 2.5,
        "ScalarType": lambda: torch.float64,
        "Layout": lambda: torch.strided,
        "MemoryFormat": lambda: torch.channels_last if False else torch.contiguous_format,
        "Device": lambda: torch.device("cpu"),
        "Generator": lambda: torch.Generator(),
    }[base]()


def same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.data_ptr() == b.data_ptr() and a.shape == b.shape
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Generator) or isinstance(b, torch.Generator):
        return isinstance(a, torch.Generator) and isinstance(b, torch.Generator) and torch.equal(a.get_state(), b.get_state())
    return type(a) is type(b) and a == b or (isinstance(a, float) and isinstance(b, float) and a == b)


def check(c):
    name = c["name"]
    fn = getattr(corpus, name)
    written = torch._C.parse_schema(f"corpus::{name}_fwd" + c["text"])
    registered = getattr(torch.ops.corpus, name + "_fwd").default._schema
    assert str(registered) == str(written), (str(registered), str(written))
    sig = inspect.signature(fn)
    for a, p in zip(written.arguments, [sig.parameters[x["name"]] for x in c["args"]]):
        if a.has_default_value():
            want = _python_default(_base_type(c["args"][[x["name"] for x in c["args"]].index(p.name)]["type"]), a.default_value)
            got = p.default
            if isinstance(got, tuple):
                got = list(got)
            if isinstance(want, tuple):
                want = list(want)
            assert type(got) is type(want) and got == want, (p.name, got, want)
        else:
            assert p.default is inspect.Parameter.empty, p.name
        assert (p.kind is inspect.Parameter.KEYWORD_ONLY) == a.kwarg_only, p.name
    for mode in ("defaults", "explicit"):
        pos, kw, expect = [], {}, []
        for i, a in enumerate(c["args"]):
            if mode == "defaults" and a["has_default"]:
                expect.append(("default", a))
                continue
            v = value(a["type"], i)
            expect.append(("value", v))
            if a["kwarg_only"]:
                kw[a["name"]] = v
            else:
                pos.append(v)
        corpus_launch.CALLS.pop(name, None)
        with torch.no_grad():
            fn(*pos, **kw)
        (args, kwargs), = corpus_launch.CALLS[name]
        got = list(args)
        kwonly = [a["name"] for a in c["args"] if a["kwarg_only"]]
        assert sorted(kwargs) == sorted(kwonly), (sorted(kwargs), kwonly)
        got += [kwargs[n] for n in kwonly]
        assert len(got) == len(c["args"]), (got, c["args"])
        for (kind, v), g, a, w in zip(expect, got, c["args"], written.arguments):
            if kind == "default":
                v = _python_default(_base_type(a["type"]), w.default_value)
                if isinstance(v, list) and isinstance(g, tuple):
                    g = list(g)
            assert same(g, v), (mode, a["name"], g, v)
        if mode == "explicit" and not any(a["type"].startswith("Generator") for a in c["args"]):
            op = getattr(torch.ops.corpus, name + "_fwd").default
            torch.library.opcheck(op, tuple(pos), kw)


out = {}
for c in CASES:
    try:
        check(c)
        out[c["name"]] = ["works", ""]
    except Exception as exc:
        out[c["name"]] = ["FAIL", "".join(traceback.format_exception_only(exc)).strip()[:600]]
print("RESULT " + json.dumps(out))
"""


_DIAG = re.compile(r":(\d+):(\d+): error: \[(\w+)\] (.*)")


def _generate(cases: list[Case], work: Path) -> tuple[int, str, dict[str, tuple[int, int]]]:
    text, where = spec_text(cases)
    (work / "ops.yaml").write_text(text)
    shapes = {}
    for c in cases:
        first = _first_plain(c)
        index = [a["name"] for a in c.args].index(first) if first else None
        when = _when(c)
        whens = [list(when[1:]) if opt and when else None for opt in c.ret_optional]
        lists = c.ret_list or [False] * c.returns
        shapes[c.name] = (index, c.returns, whens, lists)
    defs = "\n".join(f"launch_{c.name} = _make({c.name!r})" for c in cases)
    (work / "corpus_launch.py").write_text(LAUNCH % (repr(shapes), LIST_COUNT, defs))
    env = dict(os.environ, PYTHONPATH=f"{work}:{ROOT}")
    r = subprocess.run(
        [sys.executable, "-m", "codegen", "regenerate", "--spec", str(work / "ops.yaml"), "-q"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    return r.returncode, r.stdout + r.stderr, where


def _normalize(message: str, names: tuple[str, ...] = ()) -> str:
    """The message with what varies between schemas replaced: argument and return names
    (``a0``/``r0``, or the case's own ``names``) where quoted, and positions."""
    message = re.sub(r"'[ar]\d+'", "'<name>'", message)
    if names:
        pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        # A quoted name, or a quoted construct ending in one ('Tensor(a!) out').
        message = re.sub(rf"'((?:[^']* )?)(?:{pattern})'", r"'\1<name>'", message)
    message = re.sub(r"(return|argument) \d+", r"\1 <i>", message)
    return message


def _refusal(case: Case, diags: list[tuple[int, int, str]], where) -> None:
    line, col = where[case.name]
    problems = []
    for dline, dcol, message in diags:
        offset = dcol - col
        quoted = re.findall(r"'([^']+)'", message)
        if dline != line or not 0 <= offset < len(case.text):
            problems.append(f"not located in the schema string: {dline}:{dcol}: {message}")
        elif not any(case.text.startswith(q, offset) for q in quoted):
            problems.append(
                f"column points at {case.text[offset : offset + 20]!r}, which the message "
                f"does not quote: {message}"
            )
    case.details = [m for _, _, m in diags]
    if problems:
        case.outcome, case.reason = "FAIL", "; ".join(problems)
    else:
        names = tuple(a["name"] for a in case.args) + tuple(case.ret_names)
        case.outcome, case.reason = "refused", _normalize(diags[0][2], names)


def run_batch(cases: list[Case], work: Path) -> None:
    pending = list(cases)
    while pending:
        code, output, where = _generate(pending, work)
        if code == 2:
            diags = collections.defaultdict(list)
            for m in _DIAG.finditer(output):
                diags[m[3]].append((int(m[1]), int(m[2]), m[4]))
            refused = [c for c in pending if c.name in diags]
            if not refused:
                for c in pending:
                    c.outcome, c.reason = "FAIL", "exit 2 naming no operator: " + output[-400:]
                return
            for c in refused:
                _refusal(c, diags[c.name], where)
            pending = [c for c in pending if c.name not in diags]
            continue
        if code != 0:
            if len(pending) == 1:
                pending[0].outcome = "FAIL"
                pending[0].reason = f"generator exit {code}: " + output.strip()[-600:]
                return
            half = len(pending) // 2
            run_batch(pending[:half], work)
            run_batch(pending[half:], work)
            return
        payload = json.dumps([dict(name=c.name, text=c.text, args=c.args) for c in pending])
        env = dict(os.environ, PYTHONPATH=f"{work / 'generated'}:{work}:{ROOT}")
        r = subprocess.run(
            [sys.executable, "-c", CHECK, payload], env=env, capture_output=True, text=True
        )
        result = None
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
        if result is None:
            if len(pending) == 1:
                pending[0].outcome = "FAIL"
                pending[0].reason = "import or check crashed: " + (r.stdout + r.stderr)[-600:]
                return
            half = len(pending) // 2
            run_batch(pending[:half], work)
            run_batch(pending[half:], work)
            return
        for c in pending:
            c.outcome, c.reason = result[c.name]
        return


def run(cases: list[Case], batch: int = 60, jobs: int = 1) -> list[Case]:
    """Run every case, ``batch`` operators a spec, ``jobs`` specs at a time."""

    def one(start: int) -> None:
        work = Path(tmp) / f"b{start}"
        work.mkdir()
        run_batch(cases[start : start + batch], work)

    with tempfile.TemporaryDirectory() as tmp:
        starts = range(0, len(cases), batch)
        if jobs <= 1:
            for start in starts:
                one(start)
        else:
            with ThreadPoolExecutor(jobs) as pool:
                list(pool.map(one, starts))
    return cases


def sample_cases() -> list[Case]:
    by_source = {}
    schemas = {
        f"{s.name}.{s.overload_name}".rstrip("."): s for s in torch._C._jit_get_all_schemas()
    }
    for i, source in enumerate(SAMPLE):
        case = transform(schemas[source], i)
        assert case is not None, source
        by_source[source] = case
    return list(by_source.values())


def summary(cases: list[Case]) -> str:
    counts = collections.Counter(c.outcome for c in cases)
    reasons = collections.Counter(c.reason for c in cases if c.outcome == "refused")
    lines = [
        f"{len(cases)} schemas: {counts['works']} work, {counts['refused']} refused, "
        f"{counts['FAIL']} fail"
    ]
    for reason, n in reasons.most_common():
        lines.append(f"  refused {n:4d}: {reason}")
    for c in cases:
        if c.outcome == "FAIL":
            lines.append(f"  FAIL {c.source}: {c.text}\n       {c.reason}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every distinct construct set")
    parser.add_argument("--only", help="a regular expression over torch's qualified names")
    parser.add_argument("--batch", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=1, help="specs generated at a time")
    args = parser.parse_args(argv)
    cases = all_cases() if args.all or args.only else sample_cases()
    if args.only:
        cases = [c for c in cases if re.search(args.only, c.source)]
    total = len(torch._C._jit_get_all_schemas())
    start = time.monotonic()
    run(cases, args.batch, args.jobs)
    print(f"torch {torch.__version__}: {total} registered schemas, {len(cases)} run")
    print(summary(cases))
    print(f"{time.monotonic() - start:.0f}s")
    return 1 if any(c.outcome == "FAIL" for c in cases) else 0


if __name__ == "__main__":
    sys.exit(main())
