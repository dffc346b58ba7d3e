"""The only stage that touches the output folder: write what changed, remove what went stale.

Note [manifest]: the output folder holds ``.codegen-manifest``, the sorted list (one relative
POSIX path a line, after one comment line) of every file the last generation wrote there. A file
is stale, and removed, only when the manifest lists it and the current generation no longer
produces it: files of other tools are never touched, whatever their first line says. An output
folder without a manifest (written by an older generator) gets one on the next regenerate; files
there that carry the generated marker but are not produced any more are reported, not removed.
A manifest line that names no path below the folder (absolute, with ``..``, with a backslash) is
ignored; one that holds a control character (a NUL, a tab) is an error.

Every file, the manifest included, is written to a temporary file in its folder and renamed over
the old one, so concurrent regenerations into one folder never leave a torn file, and removing a
file that another run already removed is not an error. Files get the permissions the umask
allows (0644 under umask 022), as ``open`` would give them.

Note [nothing outside the output folder]: a checkout can hold anything below its output folder,
so the writer reads, writes and removes only through ``Tree``: the output folder the user named
is opened once (a symbolic link there is followed, as the user chose it), and every path below
it is walked one component at a time from that descriptor (``dir_fd``), each folder opened with
``O_DIRECTORY | O_NOFOLLOW``, each file looked at with ``lstat`` and opened with ``O_NOFOLLOW |
O_NONBLOCK``. A symbolic link below the root, or something that is not a regular file where a
file is read, written or removed (a FIFO, a socket, a device, a folder), is refused: the run
says ``<out>/<path>: error: ...`` for each and exits with status 2 (the folder's content is the
user's to fix, not a bug of the generator). Every path a run touches is examined before the
first write, so a refused folder is left as it was. Because every step starts from a descriptor
and never follows a link, a link swapped in while a run works makes that step fail instead of
leading it elsewhere.
"""

from __future__ import annotations

import difflib
import errno
import itertools
import os
import stat
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .marker import MARKER

MANIFEST = ".codegen-manifest"
MANIFEST_HEADER = (
    "# files written by python -m codegen regenerate; stale ones are removed on regenerate"
)


class UnsafeOutput(Exception):
    """The output folder holds what the writer will not touch: one located line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Report:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # recorded in the manifest, no longer produced
    unrecorded: list[str] = field(default_factory=list)  # marked, not produced, no manifest: kept
    diff: list[str] = field(default_factory=list)

    @property
    def drift(self) -> bool:
        return bool(self.written or self.stale)


def manifest_text(paths) -> str:
    return "\n".join([MANIFEST_HEADER, *sorted(paths)]) + "\n"


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
_DIR_FLAGS = _ROOT_FLAGS | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC | getattr(os, "O_BINARY", 0)
_WRITE_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC | getattr(os, "O_BINARY", 0)
)
_names = itertools.count()
_MAX_FOLDERS = 256  # descriptors of folders one Tree keeps open


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISREG(mode):
        return "a file"
    return "not a regular file"


def _decode(data: bytes) -> str:
    """``data`` as Python's text files read it (UTF-8, universal newlines); a file that is not
    UTF-8 has U+FFFD for its bad bytes and keeps its newlines as they are."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The permissions ``open`` would give a new file under the current umask."""
    return 0o666 & ~_umask()


class Tree:
    """The output folder ``out``: every read, write and removal below it (Note [nothing outside
    the output folder]). Paths are relative POSIX paths, as the manifest writes them. The folder
    is opened (and made, by the first write) on first use; ``close`` (or ``with``) releases it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._folders: dict[tuple[str, ...], int] = {}

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._folders.values():
            os.close(fd)
        self._folders.clear()

    def refused(self, rel: str, message: str) -> UnsafeOutput:
        return UnsafeOutput([f"{self.out / rel}: error: {message}"])

    def _link(self, rel: str) -> UnsafeOutput:
        return self.refused(
            rel, "a symbolic link; the generator follows none below the output folder (remove it)"
        )

    def _root(self, create: bool) -> int | None:
        fd = self._folders.get(())
        if fd is None:
            try:
                fd = os.open(self.out, _ROOT_FLAGS)
            except FileNotFoundError:
                if not create:
                    return None
                os.makedirs(self.out, exist_ok=True)
                fd = os.open(self.out, _ROOT_FLAGS)
            self._folders[()] = fd
        return fd

    @staticmethod
    def _lstat(parent: int, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _folder(self, parts: tuple[str, ...], create: bool, strict: bool) -> int | None:
        """The descriptor of the folder ``parts`` below the root, made when ``create``; None
        when it is missing, or (unless ``strict``) when something else than a folder is there."""
        fd = self._folders.get(parts)
        if fd is not None:
            return fd
        if not parts:
            return self._root(create)
        parent = self._folder(parts[:-1], create, strict)
        if parent is None:
            return None
        name, rel = parts[-1], "/".join(parts)
        for attempt in range(2):
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
                break
            except FileNotFoundError:
                if not create or attempt:
                    return None
                try:
                    os.mkdir(name, 0o777, dir_fd=parent)
                except FileExistsError:
                    pass
            except OSError:
                st = self._lstat(parent, name)
                if st is None or stat.S_ISDIR(st.st_mode):
                    raise
                if stat.S_ISLNK(st.st_mode):
                    raise self._link(rel) from None
                if not (create or strict):
                    return None
                raise self.refused(
                    rel, f"{_kind(st.st_mode)} where the generator needs a folder (remove it)"
                ) from None
        if len(self._folders) >= _MAX_FOLDERS:  # keep the root, let the others be opened again
            root = self._folders.pop(())
            self.close()
            self._folders[()] = root
        self._folders[parts] = fd
        return fd

    def _parent(self, rel: str, create: bool, strict: bool) -> tuple[int | None, str]:
        *folders, name = rel.split("/")
        return self._folder(tuple(folders), create, strict), name

    def read_bytes(self, rel: str, strict: bool = True, limit: int | None = None) -> bytes | None:
        """The bytes of the regular file ``rel`` (its first ``limit`` bytes at most); None when
        it is missing (or, unless ``strict``, when a file stands where one of its folders should
        be)."""
        parent, name = self._parent(rel, create=False, strict=strict)
        if parent is None:
            return None
        st = self._lstat(parent, name)
        if st is None:
            return None
        if not stat.S_ISREG(st.st_mode):
            if stat.S_ISLNK(st.st_mode):
                raise self._link(rel)
            raise self.refused(rel, f"{_kind(st.st_mode)} where a file is expected (remove it)")
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link swapped in since the lstat
                raise self._link(rel) from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise self.refused(rel, f"{_kind(st.st_mode)} where a file is expected")
            if limit is not None:
                return os.read(fd, limit)
            chunks = []
            while chunk := os.read(fd, max(st.st_size, 1 << 16)):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks)

    def read(self, rel: str, strict: bool = True) -> str | None:
        """The text of ``rel``, read as Python's text files read it; None when it is missing."""
        data = self.read_bytes(rel, strict)
        return None if data is None else _decode(data)

    def write(self, rel: str, content: str, mode: int) -> None:
        """Write ``content`` (UTF-8, newlines as they are) to ``rel`` through a temporary file
        created with ``mode`` in its folder, renamed over the old file."""
        parent, name = self._parent(rel, create=True, strict=True)
        assert parent is not None
        data = content.encode("utf-8")
        while True:
            tmp = f".{name}.{os.getpid()}-{next(_names)}.tmp"
            try:
                fd = os.open(tmp, _WRITE_FLAGS, mode, dir_fd=parent)
                break
            except FileExistsError:  # left by a killed run whose process id this one has
                continue
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=parent)
            except FileNotFoundError:
                pass
            raise

    def remove(self, rel: str) -> None:
        """Remove the regular file ``rel``; nothing when it is already gone."""
        parent, name = self._parent(rel, create=False, strict=False)
        if parent is None:
            return
        st = self._lstat(parent, name)
        if st is None:
            return
        if not stat.S_ISREG(st.st_mode):
            raise self.refused(rel, f"{_kind(st.st_mode)} where a file is expected (remove it)")
        try:
            os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            pass

    def python_files(self) -> list[str]:
        """Every regular ``*.py`` file below the root, links and ``__pycache__`` left out."""
        if self._root(create=False) is None:
            return []
        found = []
        todo: list[tuple[str, ...]] = [()]
        while todo:
            parts = todo.pop()
            fd = self._folder(parts, create=False, strict=False)
            if fd is None:
                continue
            with os.scandir(fd) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != "__pycache__":
                            todo.append((*parts, entry.name))
                    elif entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
                        found.append("/".join((*parts, entry.name)))
        return found


def _safe_rel(line: str) -> str | None:
    """A manifest entry, or None for one that could point outside the output folder."""
    if not line or line.startswith("#") or "\\" in line:
        return None
    path = PurePosixPath(line)
    if path.is_absolute() or ".." in path.parts or path.as_posix() != line or line == MANIFEST:
        return None
    return line


def _control(line: str) -> str | None:
    for char in line:
        if unicodedata.category(char) == "Cc":
            return f"U+{ord(char):04X}"
    return None


def parse_manifest(text: str) -> tuple[list[str], list[tuple[int, str]]]:
    """The entries of a manifest's text, and its refused lines (line number, control char)."""
    entries, refused = [], []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        char = _control(line)
        if char is not None:
            refused.append((number, char))
        elif (rel := _safe_rel(line.strip())) is not None:
            entries.append(rel)
    return entries, refused


def _as_tree(out: Path | Tree) -> tuple[Tree, bool]:
    return (out, False) if isinstance(out, Tree) else (Tree(out), True)


def _manifest(tree: Tree, problems: list[str]) -> list[str] | None:
    """The manifest's entries (None when there is none); its problems go to ``problems``."""
    try:
        text = tree.read(MANIFEST)
    except UnsafeOutput as exc:
        problems.extend(exc.problems)
        return []
    if text is None:
        return None
    entries, refused = parse_manifest(text)
    problems.extend(
        f"{tree.out / MANIFEST}:{number}: error: the line holds the control character {char}; "
        "the manifest lists the paths the generator wrote, one a line (remove the line)"
        for number, char in refused
    )
    return entries


def current(files: dict[str, str], tree: Tree) -> dict[str, str | None]:
    """What the folder holds now of every file ``files`` names or its manifest lists (None:
    absent), read through ``tree`` before ``write`` changes it (``regenerate --summary``).
    Raises UnsafeOutput as ``write`` would."""
    rels = sorted(set(files) | set(read_manifest(tree) or ()))
    return {rel: tree.read(rel, strict=False) for rel in rels}


def read_manifest(out: Path | Tree) -> list[str] | None:
    """The paths recorded in ``out``'s manifest; None when there is none. Raises UnsafeOutput
    for a manifest that is not a regular file or holds control characters."""
    tree, own = _as_tree(out)
    problems: list[str] = []
    try:
        entries = _manifest(tree, problems)
    finally:
        if own:
            tree.close()
    if problems:
        raise UnsafeOutput(problems)
    return entries


def _marked_files(tree: Tree, skip: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """Regular files below the output folder whose first line carries the generated marker
    (migration only). Paths in ``skip`` (the files just generated) are not opened, nor returned.
    """
    found = set()
    for rel in tree.python_files():
        if rel in skip:
            continue
        try:
            data = tree.read_bytes(rel, strict=False, limit=4096)
        except (UnsafeOutput, OSError):
            continue
        try:
            if data is not None and MARKER in data.split(b"\n", 1)[0].decode("utf-8"):
                found.add(rel)
        except UnicodeDecodeError:
            continue
    return found


def write(
    files: dict[str, str], out: Path | Tree, check: bool = False, also: Iterable[str] = ()
) -> Report:
    """Write ``files`` and the manifest under ``out`` (or, with ``check``, only compare and diff).

    Raises UnsafeOutput, before writing anything, when a path the run would read, write or
    remove is refused (Note [nothing outside the output folder]), ``also`` (the files the
    caller writes next) included.
    """
    tree, own = _as_tree(out)
    try:
        return _write(files, tree, check, also)
    finally:
        if own:
            tree.close()


def _write(files: dict[str, str], tree: Tree, check: bool, also: Iterable[str]) -> Report:
    problems: list[str] = []

    def examine(rel: str, strict: bool) -> str | None:
        try:
            return tree.read(rel, strict)
        except UnsafeOutput as exc:
            problems.extend(exc.problems)
            return None

    recorded = _manifest(tree, problems)
    wanted = {**files, MANIFEST: manifest_text(files)}
    old = {rel: examine(rel, strict=True) for rel in wanted}
    stale = sorted(set(recorded or ()) - set(files))
    old_stale = {rel: examine(rel, strict=False) for rel in stale}
    for rel in also:
        examine(rel, strict=True)
    if problems:
        raise UnsafeOutput(list(dict.fromkeys(problems)))

    report = Report()
    mode = file_mode()
    if not check and recorded is not None and not set(files) <= set(recorded):
        # Record new paths before writing them, so that an interrupted run leaves none unlisted.
        tree.write(MANIFEST, manifest_text(set(recorded) | set(files)), mode)
    for rel, content in wanted.items():
        if old[rel] == content:
            report.unchanged.append(rel)
            continue
        report.written.append(rel)
        if check:
            report.diff.extend(
                difflib.unified_diff(
                    (old[rel] or "").splitlines(keepends=True),
                    content.splitlines(keepends=True),
                    fromfile=f"a/{rel}",
                    tofile=f"b/{rel}",
                )
            )
        elif rel != MANIFEST:
            tree.write(rel, content, mode)
    if recorded is None:
        report.unrecorded = sorted(_marked_files(tree, set(files)))
    for rel in stale:
        text = old_stale[rel]
        if text is None:
            continue  # already gone (removed by hand, or by a concurrent run)
        report.stale.append(rel)
        if check:
            report.diff.extend(
                difflib.unified_diff(
                    text.splitlines(keepends=True), [], fromfile=f"a/{rel}", tofile="/dev/null"
                )
            )
        else:
            tree.remove(rel)
    if not check and MANIFEST in report.written:
        # Last, so that a run interrupted before this point still lists the stale files.
        tree.write(MANIFEST, wanted[MANIFEST], mode)
    return report
