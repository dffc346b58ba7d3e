"""Source locations and the error list every stage reports into."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Location:
    """A position in the spec file, 1-based, as printed in diagnostics."""

    path: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    loc: Location
    op: str | None
    message: str

    def __str__(self) -> str:
        where = f"[{self.op}] " if self.op else ""
        return f"{self.loc}: error: {where}{self.message}"


class SpecError(Exception):
    """Raised once a stage has collected at least one diagnostic."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.loc.line, d.loc.col, d.message))
        super().__init__("\n".join(str(d) for d in self.diagnostics))


@dataclass(slots=True)
class Errors:
    """Collects every problem of a stage so the user sees all of them at once."""

    items: list[Diagnostic] = field(default_factory=list)

    def add(self, loc: Location, message: str, op: str | None = None) -> None:
        self.items.append(Diagnostic(loc, op, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise SpecError(self.items)


def did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def one_of(options) -> str:
    return ", ".join(str(o) for o in options)
