"""The malformed-offsets section: each malformed form of a sample's sequence offsets (past the
end, short, negative, not starting at 0, decreasing, ...; ``_te.MALFORMED_OFFSETS``) is refused,
the calls made in a child process (a device-side assert would end the test process)."""

from __future__ import annotations


def offsets_input(op) -> str | None:
    """The input declared as sequence offsets, if any."""
    return next((d.name for d in op.inputs if d.offsets), None)
