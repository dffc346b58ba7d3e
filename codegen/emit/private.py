"""The user's own folder: where the lock files and the key that signs the caches live.

Note [private folder]: an output folder belongs to a checkout, and a checkout can hold anything
(symbolic links, FIFOs, a forged cache). What a run must trust, and what other users must not
reach, lives in a folder only this user can write:

- ``$XDG_CACHE_HOME/attnops-codegen`` (``~/.cache/attnops-codegen`` without it), and where that
  cannot be made, ``<temporary folder>/attnops-codegen-<uid>``;
- created 0700; used only when it is a real folder (not a symbolic link), owned by this user and
  writable by nobody else; anything else is refused with a message naming it (a folder of that
  name made by another user in a shared temporary folder is not taken over);
- ``key``: 32 random bytes (hex), 0600, made once, through a temporary file linked into place so
  that two first runs agree on one key. It signs the caches of every output folder
  (Note [signed caches]): a record a checkout holds counts only when this user's generator wrote
  it, whatever the checkout says.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path

NAME = "attnops-codegen"
KEY = "key"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class PrivateFolderError(Exception):
    """No folder only this user can write: the message says which were tried and why not."""


def candidates() -> list[Path]:
    """Where the private folder may be, in order of preference."""
    found = []
    base = os.environ.get("XDG_CACHE_HOME")
    if base and os.path.isabs(base):
        found.append(Path(base) / NAME)
    else:
        home = os.path.expanduser("~")
        if os.path.isabs(home):
            found.append(Path(home) / ".cache" / NAME)
    found.append(Path(tempfile.gettempdir()) / f"{NAME}-{os.getuid()}")
    return found


def _open(path: Path) -> int:
    """A descriptor of ``path``, made 0700 if missing; raises OSError or PrivateFolderError."""
    try:
        os.makedirs(path.parent, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if os.path.islink(path):
            raise PrivateFolderError(f"{path}: a symbolic link") from None
        raise exc
    st = os.fstat(fd)
    if st.st_uid != os.getuid():
        os.close(fd)
        raise PrivateFolderError(f"{path}: owned by another user (uid {st.st_uid})")
    if st.st_mode & 0o022:
        os.close(fd)
        raise PrivateFolderError(
            f"{path}: writable by others (mode {stat.S_IMODE(st.st_mode):04o}); chmod 700 it"
        )
    return fd


_opened: dict[str, int] = {}  # path -> descriptor, kept for the process's life


def folder() -> tuple[str, int]:
    """The private folder's path and an open descriptor of it."""
    problems = []
    for path in candidates():
        name = os.fspath(path)
        fd = _opened.get(name)
        if fd is not None and _still(name, fd):
            return name, fd
        if fd is not None:
            os.close(fd)
            del _opened[name]
        try:
            _opened[name] = fd = _open(path)
            return name, fd
        except PrivateFolderError as exc:
            problems.append(str(exc))
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
    raise PrivateFolderError(
        "no folder only this user can write (set XDG_CACHE_HOME to one): " + "; ".join(problems)
    )


def _still(path: str, fd: int) -> bool:
    """Whether the remembered folder is still the one at its path (a test may replace it)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
    except OSError:
        return False


def _read_key(fd: int) -> bytes | None:
    try:
        key = os.open(KEY, _READ_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(key)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PrivateFolderError("its key is not a file only this user can read")
        data = os.read(key, 129)
    finally:
        os.close(key)
    try:
        value = bytes.fromhex(data.decode("ascii").strip())
    except ValueError:
        value = b""
    if len(value) != 32:
        raise PrivateFolderError("its key is damaged; delete it (the caches are then rebuilt)")
    return value


def _make_key(fd: int) -> None:
    tmp = f".{KEY}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    out = os.open(tmp, flags, 0o600, dir_fd=fd)
    try:
        os.write(out, (secrets.token_hex(32) + "\n").encode("ascii"))
    finally:
        os.close(out)
    try:
        os.link(tmp, KEY, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    except FileExistsError:  # another run made it first: its key is the key
        pass
    finally:
        os.unlink(tmp, dir_fd=fd)


_keys: dict[str, bytes] = {}  # folder -> its key


def key() -> bytes:
    """This user's key, made on first use; raises PrivateFolderError or OSError."""
    path, fd = folder()
    if path not in _keys:
        try:
            value = _read_key(fd)
            if value is None:
                _make_key(fd)
                value = _read_key(fd)
        except PrivateFolderError as exc:
            raise PrivateFolderError(f"{path}: {exc}") from None
        if value is None:
            raise PrivateFolderError(f"{path}: its key vanished while it was made")
        _keys[path] = value
    return _keys[path]


def sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def signed(key: bytes, text: str) -> str:
    """``text`` (lines ending in newlines) with a last line signing it with ``key``."""
    return f"{text}mac {sign(key, text)}\n"


def verified(key: bytes, text: str | None) -> str | None:
    """The text ``signed`` signed, when ``text`` is such a text signed with ``key``; else None."""
    if not text or not text.endswith("\n"):
        return None
    body, sep, last = text[:-1].rpartition("\n")
    if not sep or not last.startswith("mac "):
        return None
    body += "\n"
    if not hmac.compare_digest(last[4:], sign(key, body)):
        return None
    return body
