"""The error reporter the checks of one operator share: it files each problem under the op."""

from __future__ import annotations

from ...spec.errors import Errors, Location


class Report:
    def __init__(self, errors: Errors, op: str) -> None:
        self.errors = errors
        self.op = op

    def error(self, loc: Location, message: str) -> None:
        self.errors.add(loc, message, self.op)
