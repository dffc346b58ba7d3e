"""Spec text reaches generated code as literal text, never as code.

Every free-text field of a spec that the generator prints is filled with hostile text (quotes,
backslashes, escape sequences written literally, braces, percent signs, triple quotes, newlines,
tabs, non-ASCII, Python and Jinja syntax): an op's ``doc``, a constraint's ``message``, a value
of a ``str`` variant, a ``str`` schema default (with a variant, with a variant under
``triton_op``, and without a variant) and a string sample value. Each (field, text) pair is one
operator; all of them go into one spec, generated once. The generated code must compile, pass
``ruff check`` and ``ruff format --check``, import, and give the text back exactly when called
(tests/hostile_check.py does that in a subprocess). Nothing from the spec may run: the texts
that are Python code would create a marker file.

Texts that the spec format cannot carry must be refused with exit 2 and a located
``ops.yaml:LINE:COL: error: [op] ...``. Control characters in a doc may be carried or refused,
but never written as broken or different text.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tokenize
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from codegen.cli import main

# The loader the generator uses (libyaml when PyYAML has it).
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

TESTS = Path(__file__).resolve().parent
LAUNCHERS = "hostile_launchers"
LAUNCHER_SOURCE = '''\
"""Launchers and reference of the hostile-string specs: plain torch, CPU."""

CALLS = []


def fwd(x, *rest):
    CALLS.append(("fwd", rest[0] if rest else None))
    return x.clone()


def ref(x, *rest):
    return x.clone()
'''
MARKER = "@MARKER@"  # replaced by the path of a file that must never be created
VIOLATING_SIZE = 1000  # constraints are "D != 1000"; samples use D == 4

FIXED = [
    ("double_quotes", 'say "hi" to "limits"'),
    ("see_limits", 'see "limits"'),
    ("single_quote", "it's"),
    ("trailing_double_quote", 'ends with a quote"'),
    ("trailing_single_quote", "ends with a quote'"),
    ("leading_double_quote", '"starts with a quote'),
    ("only_double_quote", '"'),
    ("four_double_quotes", '""""'),
    ("trailing_backslash", "ends with a backslash\\"),
    ("only_backslashes", "\\\\"),
    ("backslash_double_quote", 'back\\"slash'),
    ("backslash_single_quote", "back\\'slash"),
    ("backslash_n_literally", "not a newline: \\n, not a tab: \\t"),
    ("named_escape", "\\N{BULLET} bullet"),
    ("hex_escape", "\\x41 is not A"),
    ("unicode_escape", "\\u00e9 and \\U0001F600 are not decoded"),
    ("octal_escape", "\\0 and \\101"),
    ("braces", "{} and {x} and {{ and }} and {0!r:>{1}}"),
    ("percent", "%s %d %(name)s %% %"),
    ("triple_double", 'a """ b'),
    ("triple_single", "a ''' b"),
    ("trailing_triple_double", 'ends """'),
    ("mixed_triples", "'''\"\"\"'''"),
    ("newline", "first line\nsecond line"),
    ("tab", "tab\there\tand\tthere"),
    ("quote_at_line_end", 'quote at line end"\nnext line'),
    ("backslash_at_line_end", "backslash at line end\\\nnext line"),
    (
        "paragraphs",
        'Summary with "quotes".\n\n  Indented body: \\ and \'\'\' and """.\n\n\tTabbed.\nLast"',
    ),
    ("non_ascii", "café — 中文 — 😀 — é — Ω"),
    ("combining_and_rtl", "e\u0301 \u202eRTL\u202c zero\u200bwidth"),
    ("hash", "# not a comment"),
    ("rst", "``x`` and `y` and :func:`z`"),
    ("python_double", '"); import os; os.system("touch @MARKER@'),
    ("python_single", "'); import os; os.system('touch @MARKER@"),
    ("python_triple", '"""\nimport pathlib; pathlib.Path("@MARKER@").touch()\n"""'),
    ("python_triple_single", "'''; __import__('pathlib').Path('@MARKER@').touch(); '''"),
    ("python_fstring", "{__import__('pathlib').Path('@MARKER@').touch()}"),
    ("python_statement", "x\n__import__('pathlib').Path('@MARKER@').touch()\n"),
    ("jinja_expression", "{{ 7*7 }}"),
    ("jinja_blocks", "{% raw %}x{% endraw %} {# c #} {% if 1 %}y{% endif %}"),
    ("jinja_endraw", "{% endraw %}{{ 7*7 }}"),
    ("yaml_like", "key: value # - [a, b] & *anchor !tag"),
    ("surrounding_spaces", "  spaces around  "),
    ("long_line", "word " * 60 + '"'),
]
# Characters a Python docstring cannot hold as they are: the generator must either write them
# escaped (so the docstring reads back the same) or refuse the doc.
CONTROL = [
    ("nul", "nul \x00 byte"),
    ("carriage_return", "carriage\rreturn"),
    ("crlf", "crlf\r\nline"),
    ("form_feed", "form\x0cfeed"),
    ("escape", "escape \x1b[31m red"),
    ("delete", "delete \x7f"),
    ("next_line", "next\x85line"),
    ("line_separator", "line\u2028separator"),
    ("byte_order_mark", "bom \ufeff"),
]
ATOMS = [
    '"',
    "'",
    '"""',
    "'''",
    "\\",
    "\\\\",
    '\\"',
    "\\N{BULLET}",
    "\\x41",
    "\\u00e9",
    "{}",
    "{x}",
    "{{",
    "}}",
    "%s",
    "#",
    "\n",
    "\t",
    " ",
    "é",
    "中文",
    "😀",
    "{{ 7*7 }}",
    "{% raw %}",
    "`",
    "$x",
    "@MARKER@",
    "); import os; #",
    "word",
]


def _random_texts(seed: int = 20240601, n: int = 12) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        text = "".join(rng.choice(ATOMS) for _ in range(rng.randint(2, 7)))
        if text.strip():
            out.append((f"random_{len(out):02d}", text))
    return out


TEXTS = FIXED + CONTROL + _random_texts()
FIELDS = ("doc", "message", "variant", "default", "triton_default", "plain_default", "sample")


def _odd(ch: str) -> bool:
    """Control characters and surrogates (tab and newline are ordinary text)."""
    return ch not in "\t\n" and unicodedata.category(ch) in ("Cc", "Cs")


def torch_quoted(text: str) -> str | None:
    """``text`` as a string literal of torch's schema language; None if it cannot be written."""
    if any(_odd(ch) for ch in text):
        return None
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


def yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar (every line break and control escaped)."""
    out = []
    for ch in text:
        o = ord(ch)
        if ch in '\\"':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F or (
            o >= 0xA0 and not _odd(ch) and ch not in "\u2028\u2029\ufeff\ufffe\uffff"
        ):
            out.append(ch)
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return '"' + "".join(out) + '"'


def yaml_block(text: str, indent: str) -> str | None:
    """``text`` as a literal block scalar (how docs are written), if that reads back the same."""
    if "\n" not in text or any(_odd(ch) or ch in "\u2028\u2029\ufeff" for ch in text):
        return None
    body = "\n".join(f"{indent}{line}" if line else "" for line in text.split("\n"))
    block = f"|-\n{body}"
    try:
        if yaml.load(f"k: {block}\n", Loader=_Loader) == {"k": text}:
            return block
    except yaml.YAMLError:
        pass
    return None


@dataclass
class Case:
    id: str
    field: str
    name: str
    raw: str  # the text with the marker placeholder
    expect: str  # "literal", "either" (literal or refused) or "refused"
    text: str = ""
    op: str = ""
    lines: tuple[int, int] = (0, 0)  # first and last line of the op in the spec
    outcome: str = "pending"
    problems: list[str] = field(default_factory=list)


def _expectation(field_: str, text: str) -> str | None:
    """What the generator must do with ``text`` in ``field_``; None: the spec cannot say it."""
    odd = any(_odd(ch) for ch in text)
    if field_ == "doc":
        if not text.strip():
            return "refused"
        return "either" if odd else "literal"
    if field_ == "message":
        return "refused" if not text.strip() else "literal"
    if field_ in ("default", "plain_default", "triton_default"):
        if torch_quoted(text) is None:
            return None
        if not text.isascii():
            # torch's schema parser reads bytes: it garbles (or fails on) non-ASCII defaults.
            return "refused"
        if field_ == "triton_default" and any(ch in text for ch in '"\\\n\t'):
            # triton_op has torch infer the schema from the shim's signature, and
            # torch.library.infer_schema writes str defaults unescaped.
            return "either"
        return "literal"
    return "literal"


def all_cases() -> list[Case]:
    cases = [
        Case(f"{f}-{name}", f, name, text, expect)
        for f in FIELDS
        for name, text in TEXTS
        if (expect := _expectation(f, text)) is not None
    ]
    cases.append(Case("doc-whitespace_only", "doc", "whitespace_only", " \t\n  ", "refused"))
    cases.append(Case("message-empty", "message", "empty", "", "refused"))
    return cases


CASES = all_cases()

HEADER = """\
version: 1
namespace: {namespace}
package: {package}
ops:
"""


def op_yaml(case: Case) -> str:
    """One operator carrying ``case.text`` in ``case.field``."""
    text, f = case.text, case.field
    doc = yaml_quoted(f"Carries a hostile {f}.")
    schema = "(Tensor x) -> Tensor y"
    extra, sample = [], "{D: 4}"
    if f == "doc":
        doc = yaml_block(text, "      ") or yaml_quoted(text)
    elif f == "message":
        extra += [
            "    constraints:",
            f'      - {{check: "D != {VIOLATING_SIZE}", message: {yaml_quoted(text)}}}',
        ]
    elif f == "variant":
        schema = '(Tensor x, str kind="plain") -> Tensor y'
        extra += ["    variants:", f"      kind: [plain, {yaml_quoted(text)}]"]
    elif f in ("default", "triton_default"):
        schema = f"(Tensor x, str kind={torch_quoted(text)}) -> Tensor y"
        extra += ["    variants:", f"      kind: [{yaml_quoted(text)}, plain]"]
        if f == "triton_default":
            extra.append("    integration: triton_op")
    elif f == "plain_default":
        schema = f"(Tensor x, str tag={torch_quoted(text)}) -> Tensor y"
    elif f == "sample":
        schema = "(Tensor x, str mode) -> Tensor y"
        sample = f"{{D: 4, mode: {yaml_quoted(text)}}}"
    lines = [
        f"  {case.op}:",
        f"    doc: {doc}",
        "    forward:",
        f"      schema: {yaml_quoted(schema)}",
        f"      launchers: {{cpu: {LAUNCHERS}:fwd}}",
        *extra,
        "    inputs:",
        "      x: {shape: [D], dtypes: [float32]}",
        "    outputs:",
        "      y: {shape: [D], dtype: x}",
        f"    reference: {LAUNCHERS}:ref",
        "    tests:",
        f"      samples: [{sample}]",
        "      tolerance: {float32: [0.0, 0.0]}",
    ]
    return "\n".join(lines) + "\n"


class Generator:
    """Writes specs of some cases under ``root`` and runs the generator on them in-process."""

    def __init__(self, root: Path, namespace: str) -> None:
        self.root, self.namespace, self.runs = root, namespace, 0
        self.last_ok: tuple[tuple[str, ...], Path] | None = (
            None  # (ops, output) of the last success
        )

    def spec(self, cases: list[Case]) -> str:
        text = HEADER.format(namespace=self.namespace, package=self.namespace)
        line = text.count("\n") + 1
        for case in cases:
            block = op_yaml(case)
            case.lines = (line, line + block.count("\n") - 1)
            line += block.count("\n")
            text += block
        return text

    def run(self, cases: list[Case]) -> tuple[object, str, Path]:
        """(exit status or the exception raised, stderr, output dir)."""
        self.runs += 1
        work = self.root / f"run{self.runs}"
        work.mkdir()
        spec = self.spec(cases)
        (work / "ops.yaml").write_text(spec, encoding="utf-8")
        assert yaml.load(spec, Loader=_Loader)["ops"].keys() == {
            c.op for c in cases
        }  # the test's own YAML
        err = io.StringIO()
        old = os.getcwd()
        os.chdir(work)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                status: object = main(["regenerate", "--spec", "ops.yaml", "--out", "out", "-q"])
        except Exception as exc:  # noqa: BLE001  (a generator crash is reported per case)
            status = exc
        finally:
            os.chdir(old)
        if status == 0:
            self.last_ok = (tuple(c.op for c in cases), work / "out")
        return status, err.getvalue(), work / "out"


DIAGNOSTIC = re.compile(r"^ops\.yaml:(\d+):(\d+): error: \[(\w+)\] (.*)$")


def _refusals(stderr: str, cases: list[Case]) -> tuple[dict[str, list[str]], list[str]]:
    """Located errors per op, and the lines of stderr that locate no case."""
    by_op = {c.op: c for c in cases}
    found: dict[str, list[str]] = {}
    stray = []
    lines = stderr.strip().splitlines()
    for line in lines[:-1] if lines and "nothing written" in lines[-1] else lines:
        m = DIAGNOSTIC.match(line)
        case = by_op.get(m.group(3)) if m else None
        if case is None or not case.lines[0] <= int(m.group(1)) <= case.lines[1]:
            stray.append(line)
        else:
            found.setdefault(case.op, []).append(line)
    return found, stray


def _ops_named(text: str, cases: list[Case]) -> list[Case]:
    names = set(re.findall(r"\b(?:test_)?(h\d{3}_[a-z_]+?)\.py\b", text))
    return [c for c in cases if c.op in names]


def settle(gen: Generator, cases: list[Case]) -> list[Case]:
    """The cases that generate together; the others get their outcome (refused or crashed)."""
    while cases:
        status, stderr, _ = gen.run(cases)
        if status == 0:
            return cases
        if status == 2:
            found, stray = _refusals(stderr, cases)
            if found and not stray:
                for c in cases:
                    if c.op in found:
                        c.outcome, c.problems = "refused", found[c.op]
                cases = [c for c in cases if c.op not in found]
                continue
        detail = repr(status) if isinstance(status, Exception) else f"exit {status}: {stderr}"
        named = _ops_named(detail, cases)
        if len(cases) == 1 or len(named) == 1:
            bad = cases[0] if len(cases) == 1 else named[0]
            bad.outcome = "crashed"
            bad.problems = [f"the generator failed: {detail.strip()[:1500]}"]
            cases = [c for c in cases if c is not bad]
            continue
        half = len(cases) // 2
        return settle(gen, cases[:half]) + settle(gen, cases[half:])
    return cases


def _ruff(args: list[str], out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--isolated", "--line-length", "100", "."],
        cwd=out,
        capture_output=True,
        text=True,
    )


def _code_tokens_mention(path: Path, word: str) -> list[str]:
    """Tokens outside string literals and comments that contain ``word``."""
    with open(path, "rb") as f:
        tokens = list(tokenize.tokenize(f.readline))
    skip = (tokenize.STRING, tokenize.COMMENT, tokenize.ENCODING)
    return [t.string for t in tokens if t.type not in skip and word in t.string]


@dataclass
class Run:
    cases: dict[str, Case]
    problems: list[str]  # not tied to one case
    marker: Path


def run_cases(root: Path) -> Run:
    """Generate every case under ``root``, check the output, and collect the problems."""
    marker = root / "PWNED"
    (root / "lib").mkdir()
    (root / "lib" / f"{LAUNCHERS}.py").write_text(LAUNCHER_SOURCE, encoding="utf-8")
    cases = [Case(c.id, c.field, c.name, c.raw, c.expect) for c in CASES]
    for i, c in enumerate(cases):
        c.text, c.op = c.raw.replace(MARKER, str(marker)), f"h{i:03d}_{c.field}"
    problems: list[str] = []
    sys.path.insert(0, str(root / "lib"))
    importlib.invalidate_caches()
    try:
        # Cases that may be refused first, so that a refusal does not stop the others.
        odd = Generator(root / "odd", "hostile_odd")
        plain = Generator(root / "main", "hostile_main")
        (root / "odd").mkdir()
        (root / "main").mkdir()
        groups = [
            (odd, settle(odd, [c for c in cases if c.expect != "literal"])),
            (plain, settle(plain, [c for c in cases if c.expect == "literal"])),
        ]
        outs = []
        for gen, kept in groups:
            if not kept:
                continue
            if gen.last_ok is not None and gen.last_ok[0] == tuple(c.op for c in kept):
                status, out = 0, gen.last_ok[1]
            else:
                status, _, out = gen.run(kept)
            if status != 0:
                problems.append(f"{gen.namespace}: the cases that generated alone fail together")
                continue
            outs.append((gen, kept, out))
    finally:
        sys.path.remove(str(root / "lib"))
    manifest_cases = []
    for gen, kept, out in outs:
        by_op = {c.op: c for c in kept}
        for c in kept:
            c.outcome = "generated"
        for path in sorted(out.rglob("*.py")):
            stem = path.stem.removeprefix("test_")
            owner = by_op.get(stem)
            sink = owner.problems if owner else problems
            rel = path.relative_to(out).as_posix()
            try:
                compile(path.read_bytes(), rel, "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                sink.append(f"{rel} does not compile: {exc}")
                continue
            mentions = _code_tokens_mention(path, marker.name)
            if mentions:
                sink.append(f"{rel}: spec text outside string literals: {mentions}")
        for args in (["check", "--output-format", "concise"], ["format", "--check"]):
            result = _ruff(args, out)
            if result.returncode == 0:
                continue
            report = (result.stdout + result.stderr).strip().splitlines()
            for line in report:
                named = _ops_named(line, kept)
                for c in named:
                    c.problems.append(f"ruff {args[0]}: {line}")
                if not named and re.search(r"\.py\b", line):
                    problems.append(f"{gen.namespace}: ruff {args[0]}: {line}")
        for c in kept:
            manifest_cases.append(
                {
                    "id": c.id,
                    "field": c.field,
                    "text": c.text,
                    "op": c.op,
                    "package": gen.namespace,
                    "namespace": gen.namespace,
                    "out": str(out),
                    "violating_size": VIOLATING_SIZE,
                    "shims": [f"_{c.op}_fwd_impl"]
                    + ([f"_{c.op}_fwd_fake"] if c.field != "triton_default" else []),
                }
            )
    manifest = {
        "launchers": LAUNCHERS,
        "packages": {gen.namespace: str(out) for gen, _, out in outs},
        "cases": manifest_cases,
    }
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    env = dict(os.environ)
    path = [str(root / "lib")] + [str(out) for _, _, out in outs]
    env["PYTHONPATH"] = os.pathsep.join(path + [env.get("PYTHONPATH", "")])
    env.setdefault("TRITON_INTERPRET", "1")
    result = subprocess.run(
        [sys.executable, str(TESTS / "hostile_check.py"), "manifest.json", "result.json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    by_id = {c.id: c for c in cases}
    if result.returncode != 0:
        problems.append(f"the checker failed: {result.stderr[-3000:]}")
    else:
        checked = json.loads((root / "result.json").read_text(encoding="utf-8"))
        for cid, found in checked["cases"].items():
            by_id[cid].problems += found
        for found in checked["packages"].values():
            problems += found
    if marker.exists():
        problems.append(f"spec text ran: {marker} was created")
    return Run(by_id, problems, marker)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Run:
    return run_cases(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_hostile_text_arrives_literally(hostile, case_id):
    case = hostile.cases[case_id]
    shown = f"{case.field} = {case.text!r}"
    if case.expect == "refused" or (case.expect == "either" and case.outcome == "refused"):
        assert case.outcome == "refused", (
            f"{shown} must be refused with a located error, got: {case.outcome} {case.problems}"
        )
        for line in case.problems:
            assert DIAGNOSTIC.match(line), line
        return
    if case.outcome != "generated" or case.problems:
        pytest.fail(f"{shown}: {case.outcome}:\n" + "\n".join(case.problems), pytrace=False)


def test_hostile_texts_leave_the_packages_importable_and_run_nothing(hostile):
    assert not hostile.problems, "\n".join(hostile.problems)
    assert not hostile.marker.exists()


def test_the_spec_writer_of_this_test_round_trips():
    for case in CASES:
        assert yaml.load(f"k: {yaml_quoted(case.raw)}\n", Loader=_Loader) == {"k": case.raw}
        block = yaml_block(case.raw, "  ")
        if block is not None:
            assert yaml.load(f"k: {block}\n", Loader=_Loader) == {"k": case.raw}
