"""Whether a plugin's source file changed since it was imported, cheaply enough to ask on
every compilation: its size and modification time first, its bytes only when those differ
or cannot tell.

They cannot tell when the file was written in the same tick of the file system's clock as
it was read (an edit in that tick keeps the time and may keep the size), so a stamp taken
within `RACY_NS` of the file's modification is unsettled (git calls such index entries
racily clean): it compares bytes until a comparison finds them unchanged that long after
the modification.
"""

from __future__ import annotations

import hashlib
import os
import time

__all__ = ["RACY_NS", "FileStamp"]

#: How far apart the file system's clock and a read must be for the modification time to
#: tell an edit made after the read: coarser than any local file system's tick (FAT's is
#: 2 s). A network file system whose server's clock runs behind by more could hide an edit
#: made right after a read; the bytes are compared whenever size or time differ.
RACY_NS = 3_000_000_000


def _digest(path: str) -> bytes | None:
    """A digest of the bytes of `path` (a plugin's source: small), None when it is gone."""
    try:
        with open(path, "rb") as handle:
            return hashlib.blake2b(handle.read(), digest_size=16).digest()
    except OSError:
        return None


def _stat(path: str) -> tuple[int, int] | None:
    """(modification time in ns, size) of `path`, None when it is gone."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


class FileStamp:
    """A source file as it was read: its path, the digest of its bytes, and the (time,
    size) seen with them, settled when the time alone proves an unchanged file unchanged.
    Shared by the threads that ask; what it learns it keeps in one attribute, replaced
    whole."""

    __slots__ = ("_state", "digest", "path")

    def __init__(self, path: str, digest: bytes, stat: tuple[int, int], read_ns: int) -> None:
        self.path = path
        self.digest = digest
        self._state = (stat, stat[0] < read_ns - RACY_NS)  # ((mtime, size), settled)

    @classmethod
    def take(cls, path: str) -> FileStamp | None:
        """The stamp of `path` now, None when it cannot be read."""
        stat = _stat(path)
        read_ns = time.time_ns()
        digest = _digest(path)
        if stat is None or digest is None:
            return None
        return cls(path, digest, stat, read_ns)

    def changed(self) -> bool:
        """Whether the file's bytes differ from the stamped ones (or the file went)."""
        stat = _stat(self.path)
        if stat is None:
            return True
        seen, settled = self._state
        if settled and stat == seen:
            return False
        read_ns = time.time_ns()
        if _digest(self.path) != self.digest:
            return True
        self._state = (stat, stat[0] < read_ns - RACY_NS)
        return False

    def __repr__(self) -> str:
        return f"FileStamp({self.path!r}, settled={self._state[1]})"
