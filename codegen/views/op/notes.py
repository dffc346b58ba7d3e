"""Note [notes once]: a Note's text is written once per generated file, where it first applies;
each later place says ``# See Note [name]``. The sections are built in the order the module
reads, all through one ``Notes``, so "first" is first in the file."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NoteRef:
    name: str
    first: bool  # write the text here; else refer to it
    where: str = ""  # e.g. " (_runtime)": the Note itself is in another module


class Notes:
    def __init__(self) -> None:
        self._seen: set[str] = set()

    def ref(self, name: str, where: str = "") -> NoteRef:
        first = name not in self._seen
        self._seen.add(name)
        return NoteRef(name, first, where)
