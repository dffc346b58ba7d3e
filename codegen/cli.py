"""Command line: ``python -m codegen regenerate [--check] [--spec PATH] [--out DIR]`` and
``python -m codegen bc-check --base REV|FILE [--spec PATH]``."""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import os
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from .emit import digest, format_cache, private
from .emit.format import GeneratorBug
from .emit.format_cache import FormatCache
from .emit.writer import MANIFEST, Report, Tree, UnsafeOutput, current, write
from .spec.errors import SpecError

try:
    import fcntl
except ImportError:  # not POSIX: runs into one folder are not serialized
    fcntl = None

EXIT_OK, EXIT_DRIFT, EXIT_SPEC, EXIT_INTERNAL, EXIT_ENVIRONMENT = 0, 1, 2, 3, 4
LOCK_TIMEOUT = "CODEGEN_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 60.0

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
     and nothing is written; or the output directory holds what the generator does not
     touch (a symbolic link or a FIFO below it, a control character in its manifest): every
     such path is printed as OUT/PATH: error: message, and nothing is written
  3  the generator failed: a bug in the generator (one line on stderr names the operator it
     was rendering), or the output directory could not be written or locked
  4  the generator cannot run in this Python: a package it needs (torch, PyYAML, Jinja2,
     ruff) is not installed; one line on stderr names what is missing

Files are removed only when the output directory's manifest ({MANIFEST}) lists them
and the spec no longer produces them; nothing outside the output directory is read, written
or removed. Runs that write into the same output directory at the same time take turns, so it
always holds one whole run's output; a run waits at most {LOCK_TIMEOUT} seconds (default
{DEFAULT_LOCK_TIMEOUT:g}) for another, then gives up with exit status 3.
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


class LockError(Exception):
    """The output folder's lock cannot be taken: the message says why."""


def _lock_name(out: Path) -> str:
    key = hashlib.sha256(os.fsencode(os.path.realpath(out))).hexdigest()[:32]
    return f"lock-{key}"


def lock_path(out: Path) -> str:
    """The lock file of output folder ``out``: in this user's private folder (Note [private
    folder] in emit/private.py), named after the folder's resolved path."""
    return os.path.join(private.folder()[0], _lock_name(out))


def lock_timeout() -> float:
    value = os.environ.get(LOCK_TIMEOUT, "")
    if not value.strip():
        return DEFAULT_LOCK_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise LockError(f"error: {LOCK_TIMEOUT}={value!r} is not a number of seconds")
    return seconds


_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _open_lock(out: Path) -> tuple[int, str]:
    try:
        folder, folder_fd = private.folder()
    except private.PrivateFolderError as exc:
        raise LockError(f"{out}: error: cannot lock the output folder: {exc}") from None
    name = _lock_name(out)
    path = os.path.join(folder, name)
    try:
        fd = os.open(name, _LOCK_FLAGS, 0o600, dir_fd=folder_fd)
    except OSError as exc:
        try:
            what = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except OSError:
            what = None
        if what is not None and stat.S_ISLNK(what.st_mode):
            reason = "it is a symbolic link (remove it)"
        elif what is not None and stat.S_ISDIR(what.st_mode):
            reason = "it is a folder (remove it)"
        else:
            reason = exc.strerror or str(exc)
        raise LockError(f"{path}: error: cannot open the lock of {out}: {reason}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LockError(f"{path}: error: the lock of {out} is not a regular file (remove it)")
    return fd, path


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says."""
    try:
        pid = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        pid = ""
    return f"process {pid}" if pid.isdigit() else "another process"


@contextmanager
def output_lock(out: Path, check: bool = False) -> Iterator[None]:
    """Note [one writer per folder]: two runs into one folder could interleave their files (the
    digest check, the writes, the manifest, the caches), leaving a mix of two specs' output. An
    exclusive ``flock`` per folder makes them take turns, from the digest check to the last
    write; ``--check`` writes nothing and takes no lock.

    The lock file lives in this user's private folder, not in the output folder (a run that
    writes nothing leaves it byte-identical, and a checkout cannot plant a link or a FIFO in
    its place) nor under a predictable name in a shared temporary folder (where another user
    could). It is opened with ``O_NOFOLLOW`` and must be a regular file; anything else there is
    an error that names it. Its holder writes its process id into it; a run that finds the lock
    held says which process holds it and waits at most ``CODEGEN_LOCK_TIMEOUT`` seconds (60
    by default), then raises LockError. Runs of two users into one folder do not take turns
    (each has its own private folder); each file is still replaced whole. Without ``fcntl``
    (Windows) runs are not serialized."""
    if check or fcntl is None:
        yield
        return
    timeout = lock_timeout()
    fd, path = _open_lock(out)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            print(
                f"{out}: waiting for {holder}, which is writing it (lock {path}; "
                f"giving up after {timeout:g} s, {LOCK_TIMEOUT} sets it)",
                file=sys.stderr,
                flush=True,
            )
            _wait(fd, time.monotonic() + timeout, out, holder, timeout)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)


def _wait(fd: int, deadline: float, out: Path, holder: str, timeout: float) -> None:
    pause = 0.02
    while True:
        now = time.monotonic()
        if now >= deadline:
            raise LockError(
                f"{out}: error: {holder} still holds the output folder after {timeout:g} s; "
                f"run again when it has finished (or set {LOCK_TIMEOUT} to wait longer)"
            )
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, 0.5)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            continue


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    status = check_environment()
    if status != EXIT_OK:
        return status
    if args.command == "bc-check":
        return _bc_check(args)
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
    text = _decode(data, str(spec_path))
    if text is None:
        return EXIT_SPEC
    if args.check:  # trusts no cache, takes no lock: renders and compares every byte
        with Tree(out) as tree:
            return _generate(args, text, data, spec_path, tree, None)
    try:
        with output_lock(out):
            with Tree(out) as tree:
                return _generate(args, text, data, spec_path, tree, _cache_key())
    except LockError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INTERNAL


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


def _cache_key() -> bytes | None:
    """The key that signs the caches (Note [signed caches] in emit/digest.py); None, with a
    note, when there is none: then every file is generated and formatted."""
    try:
        return private.key()
    except (private.PrivateFolderError, OSError) as exc:
        print(f"note: the caches are not used: {exc}", file=sys.stderr)
        return None


def _generate(
    args: argparse.Namespace,
    text: str,
    data: bytes,
    spec_path: Path,
    tree: Tree,
    key: bytes | None,
) -> int:
    out = tree.out
    inputs: list[str] = []
    cache = None
    if key is not None:
        inputs = digest.inputs(data, spec_path.name)
        listed = digest.up_to_date(tree, key, inputs, spec_path.parent)
        if listed is not None:  # Note [no-op digest]: nothing would change
            status = _report(args, out, Report(unchanged=[*listed, MANIFEST]))
            if args.summary:
                print("summary:\n  no generated file changes")
            return _stamped(args, status, spec_path, digest.recorded_modules(tree, key))
        cache = FormatCache(tree, key)
    sources: dict[str, str] = {}
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
    caches = (
        () if cache is None else (f"{digest.CACHE}/.gitignore", digest.RECORD, format_cache.RECORD)
    )
    try:
        before = current(files, tree) if args.summary else None
        report = write(files, tree, check=args.check, also=caches)
        if cache is not None:
            digest.record(tree, key, inputs, sources, files)
            cache.record(files)
    except UnsafeOutput as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        n = len(exc.problems)
        print(
            f"{n} error{'s' if n != 1 else ''} in the output folder; nothing written",
            file=sys.stderr,
        )
        return EXIT_SPEC
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
    return _stamped(args, status, spec_path, sources)


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
