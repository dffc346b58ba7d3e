"""Command line: ``python -m codegen regenerate [--check] [--spec PATH] [--out DIR]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .emit.writer import write
from .pipeline import generate
from .spec.errors import SpecError

EXIT_OK, EXIT_DRIFT, EXIT_SPEC = 0, 1, 2

DESCRIPTION = """\
Generate a PyTorch custom-operator layer (torch.library registration, fakes, autograd.Function,
NamedTuple public API and pytest files) from a declarative spec (ops.yaml).

exit status:
  0  generated files are up to date (or were written)
  1  --check found generated files that differ from the spec (a unified diff is printed)
  2  the spec is invalid: every problem is printed as FILE:LINE:COL: error: [op] message,
     and nothing is written
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    spec_path: Path = args.spec
    out: Path = args.out if args.out is not None else spec_path.parent / "generated"
    try:
        text = spec_path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"{spec_path}: error: cannot read the spec: {exc.strerror}", file=sys.stderr)
        return EXIT_SPEC
    try:
        files = generate(text, str(spec_path), spec_path.name)
    except SpecError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        n = len(exc.diagnostics)
        print(f"{n} error{'s' if n != 1 else ''}; nothing written", file=sys.stderr)
        return EXIT_SPEC
    report = write(files, out, check=args.check)
    if args.check:
        if report.drift:
            sys.stdout.writelines(report.diff)
            print(
                f"{out}: {len(report.written)} file(s) differ, {len(report.stale)} stale; "
                "run: python -m codegen regenerate",
                file=sys.stderr,
            )
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
    return EXIT_OK
