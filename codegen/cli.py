"""Command line: ``python -m codegen regenerate [--check] [--spec PATH] [--out DIR]``."""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .emit import digest
from .emit.format import GeneratorBug
from .emit.format_cache import FormatCache
from .emit.writer import MANIFEST, Report, write
from .spec.errors import SpecError

try:
    import fcntl
except ImportError:  # not POSIX: runs into one folder are not serialized
    fcntl = None

EXIT_OK, EXIT_DRIFT, EXIT_SPEC, EXIT_INTERNAL, EXIT_ENVIRONMENT = 0, 1, 2, 3, 4

# Import name -> distribution of what the generator imports; with the codegen extra's packages
# (pyproject.toml) and torch, whose schema parser reads the spec.
DEPENDENCIES = {"torch": "torch", "yaml": "PyYAML", "jinja2": "Jinja2", "ruff": "ruff"}

SUMMARY = """\
Generate a PyTorch custom-operator layer (torch.library registration, fakes, autograd.Function,
NamedTuple public API and pytest files) from a declarative spec (ops.yaml).

example:
  python -m codegen regenerate --spec path/ops.yaml --out path/generated
"""

DETAILS = f"""\
exit status:
  0  generated files are up to date (or were written)
  1  --check found generated files that differ from the spec (a unified diff is printed)
  2  the spec is invalid: every problem is printed as FILE:LINE:COL: error: [op] message,
     and nothing is written
  3  the generator failed: a bug in the generator (one line on stderr names the operator it
     was rendering), or the output directory could not be written
  4  the generator cannot run in this Python: a package it needs (torch, PyYAML, Jinja2,
     ruff) is not installed; one line on stderr names what is missing

Files are removed only when the output directory's manifest ({MANIFEST}) lists them
and the spec no longer produces them. Runs that write into the same output directory at the
same time take turns, so it always holds one whole run's output.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m codegen",
        description=SUMMARY + "\n" + DETAILS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    regen = sub.add_parser(
        "regenerate",
        help="write the generated layer from the spec",
        description="Write the generated layer from the spec (default: ./ops.yaml into the folder\n"
        "'generated' beside it).\n\n" + DETAILS,
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
        "--stamp",
        type=Path,
        default=None,
        metavar="FILE",
        help="after a successful run, write FILE and FILE.d, a Makefile rule naming every file "
        "the output depends on (for CMake's DEPFILE, Make, Ninja)",
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
    status = check_environment()
    if status != EXIT_OK:
        return status
    with _collector_paused():
        try:
            return _regenerate(args)
        except ModuleNotFoundError as exc:
            if not _foreign(exc):
                raise
            return _environment([exc.name or str(exc)])


def check_environment() -> int:
    """``EXIT_OK`` where this Python has what the generator imports; else the message of Note
    [missing dependencies], and ``EXIT_ENVIRONMENT`` (CMakeLists.txt asks at configure time)."""
    missing = [dist for name, dist in DEPENDENCIES.items() if not _installed(name)]
    return _environment(missing) if missing else EXIT_OK


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken package, or a module without a spec
        return False


def _foreign(exc: ModuleNotFoundError) -> bool:
    """Whether a missing module is another distribution's, not a module of the generator."""
    return bool(exc.name) and exc.name.partition(".")[0] != __package__


def _environment(missing: list[str]) -> int:
    """Note [missing dependencies]: a package the generator needs that this Python lacks is a
    problem of the environment, not of the spec or the generator: it is named, with the Python
    that lacks it, and the run exits 4 before reading anything."""
    names = ", ".join(missing)
    print(
        f"error: the generator cannot run: {sys.executable} cannot import {names}; install "
        "torch and the generator's dependencies into it (in this project: "
        "pip install -e '.[codegen]')",
        file=sys.stderr,
    )
    return EXIT_ENVIRONMENT


def _regenerate(args: argparse.Namespace) -> int:
    spec_path: Path = args.spec
    out: Path = args.out if args.out is not None else spec_path.parent / "generated"
    try:
        data = spec_path.read_bytes()
    except OSError as exc:
        print(f"{spec_path}: error: cannot read the spec: {exc.strerror}", file=sys.stderr)
        return EXIT_SPEC
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        print(
            f"{spec_path}:{line}:{col}: error: the spec is not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x}); save it as UTF-8",
            file=sys.stderr,
        )
        return EXIT_SPEC
    with output_lock(out, args.check):
        return _generate(args, text, data, spec_path, out)


def _generate(args: argparse.Namespace, text: str, data: bytes, spec_path: Path, out: Path) -> int:
    inputs = digest.inputs(data, spec_path.name)
    listed = digest.up_to_date(out, inputs, spec_path.parent)
    if listed is not None:  # Note [no-op digest]: nothing would change
        status = _report(args, out, Report(unchanged=[*listed, MANIFEST]))
        return _stamped(args, status, spec_path, digest.recorded_modules(out))
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
    except ModuleNotFoundError as exc:
        if _foreign(exc):
            return _environment([exc.name])
        return _bug(exc, getattr(exc, "op", None))
    except Exception as exc:  # noqa: BLE001 - any other exception is a bug, reported in one line
        return _bug(exc, getattr(exc, "op", None))
    try:
        report = write(files, out, check=args.check)
        if not args.check:
            digest.record(out, inputs, sources, files)
            cache.record(files)
    except OSError as exc:
        where = exc.filename or out
        print(f"{where}: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INTERNAL
    return _stamped(args, _report(args, out, report), spec_path, sources)


def _stamped(args: argparse.Namespace, status: int, spec_path: Path, modules) -> int:
    """``--stamp``: after a run that succeeded, the stamp and the rule naming what it read
    (Note [depfile] in emit/depfile.py)."""
    if args.stamp is None or status != EXIT_OK:
        return status
    from .emit.depfile import write_stamp

    try:
        write_stamp(args.stamp, spec_path, modules)
    except OSError as exc:
        where = exc.filename or args.stamp
        print(f"{where}: error: cannot write the stamp: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INTERNAL
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
