"""Formatted files a regenerate takes from the output folder instead of formatting them again.

Note [format cache]: what ``ruff format`` writes is a function of the ruff that runs, its
arguments and the text it formats. After writing, a regenerate records in
``<out>/.codegen-cache/format``, for every Python file it wrote, the SHA-256 of the text the
templates rendered and of the text ruff made of it, under a key naming that ruff (what its
``--version`` prints) and the arguments (``format.RUFF_FORMAT``), and signs the record with this
user's key (Note [signed caches] in emit/digest.py). The next regenerate into the folder takes
a rendered file's formatted text from the folder, without ruff, only when all of these hold:

- the record's signature verifies: this user's generator wrote it, after ruff made each
  formatted text it names from the rendered text it names;
- the record's key is the key of the ruff this run would start, with the same arguments;
- the record names the file with the SHA-256 of the text this run rendered for it;
- the file in the folder, read as the writer reads it, has the recorded formatted SHA-256.

Then the file's text is what ruff would write for this input, byte for byte. Anything else (no
record, a forged or damaged one, another ruff or other arguments, an edited template, spec or
generator, a hand-edited or deleted file) formats the file with ruff, as without the record.
Without the signature, anyone who can edit the checkout could append to a generated file and
record its new SHA-256 as the formatted text, and the file would stand; with it, a record costs
time, never bytes. The record is a cache, like the no-op digest's: it lives in the same
self-ignoring folder, outside the manifest; it is written only after the files it describes were
written, and never read or written by ``--check``, which formats every file.
"""

from __future__ import annotations

import hashlib
import subprocess

from .digest import CACHE
from .format import RUFF_FORMAT, ruff_command
from .private import signed, verified
from .writer import Tree, UnsafeOutput, file_mode

RECORD = f"{CACHE}/format"
VERSION = "codegen-format-cache 2"
_HEADER = (
    "# formatted files of the last regenerate (Note [format cache] in codegen/emit/format_cache.py)"
)
_KEY = "key "


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ruff_key() -> str | None:
    """What identifies this run's formatting: the ruff that runs and its arguments; None when
    ruff cannot say which it is (then nothing is reused or recorded)."""
    try:
        done = subprocess.run(
            [*ruff_command(), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    version = " ".join(done.stdout.split())
    if done.returncode != 0 or not version:
        return None
    return f"{VERSION}; {version}; {' '.join(RUFF_FORMAT)}"


class FormatCache:
    """The record of the last regenerate into ``tree``, and what this one renders.

    ``formatted`` answers, for each rendered Python file, with its formatted text when the record
    proves it (Note [format cache]) and remembers the rendered text's SHA-256; ``record`` writes
    the record of this run once its files are written. ``reused`` counts the files taken.
    """

    def __init__(self, tree: Tree, key: bytes) -> None:
        self.tree = tree
        self.secret = key
        self.rendered: dict[str, str] = {}  # this run's Python files -> SHA-256 of the rendering
        self.reused = 0
        self._key: str | None = None
        self._keyed = False
        self._entries: dict[str, tuple[str, str]] | None = None

    def key(self) -> str | None:
        if not self._keyed:
            self._key, self._keyed = ruff_key(), True
        return self._key

    def _recorded(self) -> dict[str, tuple[str, str]]:
        """The record's entries (path -> rendered and formatted SHA-256), if it is this ruff's."""
        if self._entries is None:
            self._entries = {}
            try:
                text = verified(self.secret, self.tree.read(RECORD))
            except (OSError, UnsafeOutput):  # unreadable: as if there were none
                return self._entries
            lines = (text or "").splitlines()
            if len(lines) > 2 and lines[1].startswith(_KEY) and lines[1][4:] == self.key():
                for line in lines[2:]:
                    rendered, _, rest = line.partition(" ")
                    formatted, _, rel = rest.partition(" ")
                    if len(rendered) == len(formatted) == 64 and rel:
                        self._entries[rel] = (rendered, formatted)
        return self._entries

    def formatted(self, rel: str, text: str) -> str | None:
        """``text``, rendered for ``rel``, as ruff formats it, when the record proves what that
        is; None when ruff must format it."""
        rendered = self.rendered[rel] = _sha256(text)
        entry = self._recorded().get(rel)
        if entry is None or entry[0] != rendered:
            return None
        try:
            current = self.tree.read(rel)
        except (OSError, UnsafeOutput):  # the writer will say what is wrong with it
            return None
        if current is None or _sha256(current) != entry[1]:
            return None
        self.reused += 1
        return current

    def record(self, files: dict[str, str]) -> None:
        """Record this run's formatted files, ``files`` as written in the tree."""
        key = self.key()
        if key is None:
            return
        lines = [_HEADER, _KEY + key]
        for rel in sorted(self.rendered):
            lines.append(f"{self.rendered[rel]} {_sha256(files[rel])} {rel}")
        text = signed(self.secret, "\n".join(lines) + "\n")
        if self.tree.read(RECORD) != text:
            self.tree.write(RECORD, text, file_mode())
