"""The marker on the first line of every generated Python file: the renderer writes it, the
writer recognizes files that carry it (no imports)."""

from __future__ import annotations

# Kept out of the literal so that tools skipping generated files do not skip the generator.
MARKER = "@" + "generated"
