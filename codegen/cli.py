"""Command line: ``python -m codegen regenerate [--check] [--spec PATH] [--out DIR]`` and
``python -m codegen bc-check --base REV|FILE [--spec PATH]``."""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from .emit import digest
from .emit.format import GeneratorBug
from .emit.format_cache import FormatCache
from .emit.writer import MANIFEST, Report, current, write
from .spec.errors import SpecError

try:
    import fcntl
except ImportError:  # not POSIX: runs into one folder are not serialized
    fcntl = None

EXIT_OK, EXIT_DRIFT, EXIT_SPEC, EXIT_INTERNAL = 0, 1, 2, 3

DESCRIPTION = f"""\
Generate a PyTorch custom-operator layer (torch.library registration, fakes, autograd.Function,
NamedTuple public API and pytest files) from a declarative spec (ops.yaml).

exit status:
  0  generated files are up to date (or were written)
  1  --check found generated files that differ from the spec (a unified diff is printed)
  2  the spec is invalid: every problem is printed as FILE:LINE:COL: error: [op] message,
     and nothing is written
  3  the generator failed: a bug in the generator (one line on stderr names the operator it
     was rendering), or the output directory could not be written

Files are removed only when the output directory's manifest ({MANIFEST}) lists them
and the spec no longer produces them. Runs that write into the same output directory at the
same time take turns, so it always holds one whole run's output.
"""


BC_DESCRIPTION = """\
Compare the spec with a base (a spec file, or a git revision: the spec at the same path in
that revision) and print every change of every operator, located in the spec:
FILE:LINE:COL: breaking|note|info: [op] message. 'breaking' changes break callers of the
registered operators or of the public function; 'note' changes are compatible; 'info' changes
are not API (backward, launchers, integration). A removed operator points into the base.

exit status:
  0  no breaking change
  1  at least one breaking change
  2  a spec is invalid (its problems are printed as for regenerate), or the base cannot be read
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m codegen",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    regen = sub.add_parser(
        "regenerate",
        help="write the generated layer from the spec",
        description="Write the generated layer from the spec. " + DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    regen.add_argument(
        "--spec", type=Path, default=Path("ops.yaml"), help="spec file (default: ./ops.yaml)"
    )
    regen.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: 'generated' next to the spec file)",
    )
    regen.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 with a unified diff when the output is stale",
    )
    regen.add_argument("-q", "--quiet", action="store_true", help="print only errors and drift")
    regen.add_argument(
        "--summary",
        action="store_true",
        help="also print, per operator, what changed in its schemas, public API and generated "
        "tests, compared with the output directory's files",
    )
    bc = sub.add_parser(
        "bc-check",
        help="classify every change of the spec since a base as breaking or compatible",
        description=BC_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bc.add_argument(
        "--base",
        required=True,
        help="the old spec: a file, or a git revision holding the spec at the same path",
    )
    bc.add_argument(
        "--spec", type=Path, default=Path("ops.yaml"), help="spec file (default: ./ops.yaml)"
    )
    return parser


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one generation.

    A generation builds hundreds of thousands of small objects that live until it ends; each of
    the collector's full passes walks all of them, which cost a third of a 1,000-operator run.
    Little of it is cyclic garbage, so the memory is not missed, and the collector is restored
    (for callers of ``main`` in the same process) before returning.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def lock_path(out: Path) -> str:
    """The lock file of output folder ``out``: in the temporary folder, never in ``out`` (a run
    that writes nothing leaves ``out`` byte-identical), named after its resolved path."""
    key = hashlib.sha256(os.fsencode(os.path.realpath(out))).hexdigest()[:32]
    return os.path.join(tempfile.gettempdir(), f"codegen-{key}.lock")


@contextmanager
def output_lock(out: Path, check: bool) -> Iterator[None]:
    """Note [one writer per folder]: two runs into one folder could interleave their files (the
    digest check, the writes, the manifest, the caches), leaving a mix of two specs' output. An
    exclusive ``flock`` per folder makes them take turns, from the digest check to the last
    write; ``--check`` writes nothing and takes no lock. Where the lock file cannot be opened
    (another user's, in a shared temporary folder) the run goes on unserialized."""
    if check or fcntl is None:
        yield
        return
    try:
        fd = os.open(lock_path(out), os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bc-check":
        return _bc_check(args)
    with _collector_paused():
        return _regenerate(args)


def _regenerate(args: argparse.Namespace) -> int:
    spec_path: Path = args.spec
    out: Path = args.out if args.out is not None else spec_path.parent / "generated"
    try:
        data = spec_path.read_bytes()
    except OSError as exc:
        print(f"{spec_path}: error: cannot read the spec: {exc.strerror}", file=sys.stderr)
        return EXIT_SPEC
    text = _decode(data, str(spec_path))
    if text is None:
        return EXIT_SPEC
    with output_lock(out, args.check):
        return _generate(args, text, data, spec_path, out)


def _decode(data: bytes, label: str) -> str | None:
    """The spec's text; None (the problem printed) when it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        print(
            f"{label}:{line}:{col}: error: the spec is not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x}); save it as UTF-8",
            file=sys.stderr,
        )
        return None


def _bc_check(args: argparse.Namespace) -> int:
    """``bc-check``: Note [what is API] in review/compat.py; Note [base spec] in review/base.py."""
    from .review.base import BaseError, read_base

    spec_path: Path = args.spec
    try:
        base = read_base(args.base, spec_path)
        data = spec_path.read_bytes()
    except BaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SPEC
    except OSError as exc:
        print(f"{spec_path}: error: cannot read the spec: {exc.strerror}", file=sys.stderr)
        return EXIT_SPEC
    from .review.compat import Model, Severity, compare

    # The base's launchers lived in its own tree: only the spec's own are looked up.
    new = _model(data, str(spec_path), True, f"{spec_path} is invalid")
    if new is None:
        return EXIT_SPEC
    if base.data is None:
        print(f"note: {base.label} does not exist: every operator is new", file=sys.stderr)
        old = Model(replace(new.spec, ops=()), ())
    else:
        old = _model(base.data, base.label, False, f"the base spec {base.label} is invalid")
        if old is None:
            return EXIT_SPEC
    changes = compare(old, new)
    for change in changes:
        print(change)
    count = {s: sum(c.severity is s for c in changes) for s in Severity}
    print(
        f"{count[Severity.BREAKING]} breaking, {count[Severity.COMPATIBLE]} compatible, "
        f"{count[Severity.INTERNAL]} internal change(s) since {args.base}",
        file=sys.stderr,
    )
    return EXIT_DRIFT if count[Severity.BREAKING] else EXIT_OK


def _model(data: bytes, label: str, check_imports: bool, invalid: str):
    """The built, resolved and validated spec; None (every problem printed) when it is invalid."""
    from .pipeline import analyse
    from .review.compat import Model

    text = _decode(data, label)
    if text is None:
        return None
    try:
        return Model(*analyse(text, label, check_imports=check_imports))
    except SpecError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        n = len(exc.diagnostics)
        print(f"{n} error{'s' if n != 1 else ''}; {invalid}", file=sys.stderr)
        return None


def _generate(args: argparse.Namespace, text: str, data: bytes, spec_path: Path, out: Path) -> int:
    inputs = digest.inputs(data, spec_path.name)
    listed = digest.up_to_date(out, inputs, spec_path.parent)
    if listed is not None:  # Note [no-op digest]: nothing would change
        status = _report(args, out, Report(unchanged=[*listed, MANIFEST]))
        if args.summary:
            print("summary:\n  no generated file changes")
        return status
    sources: dict[str, str] = {}
    cache = FormatCache(out)
    try:
        from .pipeline import generate  # here: a run that changes nothing never imports torch

        files = generate(text, str(spec_path), spec_path.name, sources=sources, cache=cache)
    except SpecError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        n = len(exc.diagnostics)
        print(f"{n} error{'s' if n != 1 else ''}; nothing written", file=sys.stderr)
        return EXIT_SPEC
    except GeneratorBug as exc:
        return _bug(exc, exc.op)
    except RecursionError as exc:
        return _bug(exc, None)
    except Exception as exc:  # noqa: BLE001 - any other exception is a bug, reported in one line
        return _bug(exc, getattr(exc, "op", None))
    try:
        before = current(files, out) if args.summary else None
        report = write(files, out, check=args.check)
        if not args.check:
            digest.record(out, inputs, sources, files)
            cache.record(files)
    except OSError as exc:
        where = exc.filename or out
        print(f"{where}: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INTERNAL
    status = _report(args, out, report)
    if before is not None:
        from .review.summary import summarize

        print("summary:")
        for line in summarize(before, files):
            print(f"  {line}")
    return status


def _report(args: argparse.Namespace, out: Path, report: Report) -> int:
    if args.check:
        if report.drift:
            sys.stdout.writelines(report.diff)
            print(
                f"{out}: {len(report.written)} file(s) differ, {len(report.stale)} stale; "
                "run: python -m codegen regenerate",
                file=sys.stderr,
            )
            _unrecorded(report, out)
            return EXIT_DRIFT
        if not args.quiet:
            print(f"{out}: {len(report.unchanged)} file(s) up to date")
        return EXIT_OK
    if not args.quiet:
        for rel in report.written:
            print(f"wrote {out / rel}")
        for rel in report.stale:
            print(f"removed stale {out / rel}")
        print(
            f"{out}: {len(report.written)} written, {len(report.unchanged)} unchanged, {len(report.stale)} removed"
        )
    _unrecorded(report, out)
    return EXIT_OK


def _unrecorded(report, out: Path) -> None:
    for rel in report.unrecorded:
        print(
            f"{out / rel}: note: marked as generated but not in a manifest and no longer "
            "produced; left in place (delete it if it is stale)",
            file=sys.stderr,
        )


def _bug(exc: BaseException, op: str | None) -> int:
    where = f" while rendering operator '{op}'" if op else ""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, GeneratorBug):
        detail = f"{type(exc).__name__}: {detail}"
    print(
        f"internal error: this is a bug in the generator, not in the spec{where}: {detail}",
        file=sys.stderr,
    )
    return EXIT_INTERNAL
