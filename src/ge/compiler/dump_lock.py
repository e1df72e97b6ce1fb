"""The lock that makes each change a compilation makes to its dump folder whole to others.

Two compilations dumping into one folder at once (two processes, or two threads) each
check that the folder is theirs, write a dump, and list it in the folder's manifest; a run
taking the folder over reads the manifest, removes what it lists, and writes its own. Done
without a lock, those steps interleave: a run writes a dump after another took the folder
over and then lists it in a manifest that is no longer its own, dumps point into a weights
file the other run removed, a run's dump renamed into place but not listed yet makes the
other run refuse the folder (GE1701). Each of those steps is therefore done holding the
folder's lock (`locked_folder`), so another run sees the folder only as it is between them:
every dump in it listed in its run's manifest.

The lock is an advisory `flock` on the folder itself, so that nothing is added to the
folder; where the filesystem refuses that (NFS, which only locks files opened for writing)
it is on `.ge_dump.lock` in the folder, which then stays there. A lock of the kernel goes
with the process holding it, so a run killed while holding it never blocks the next one.
Threads of one process also take a lock of the process per folder: `flock` excludes them
only through separate opens of the folder, and NFS's locks (POSIX record locks underneath)
do not exclude them at all.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # (Windows: no lock between processes; the threads' lock still holds)
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE_NAME", "locked_folder"]

#: The lock file, in the dump folder, where the folder itself cannot be locked.
LOCK_FILE_NAME = ".ge_dump.lock"

_REGISTRY = threading.Lock()
#: The lock of this process for each dump folder, by (device, inode).
_THREAD_LOCKS: dict[tuple[int, int], threading.Lock] = {}


def _thread_lock(fd: int) -> threading.Lock:
    """This process's lock for the folder open as `fd`."""
    st = os.fstat(fd)
    with _REGISTRY:
        return _THREAD_LOCKS.setdefault((st.st_dev, st.st_ino), threading.Lock())


@contextlib.contextmanager
def _flocked(fd: int, directory: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on the folder open as `fd`, or on its lock file where the
    folder cannot be locked; waits for the run holding it."""
    if fcntl is None:
        yield
        return
    held = fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:  # (NFS: EBADF, a lock there needs a file open for writing)
        held = os.open(directory / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
        except BaseException:
            os.close(held)
            raise
    try:
        yield
    finally:
        if held == fd:
            fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            os.close(held)  # (which releases its lock)


@contextlib.contextmanager
def locked_folder(directory: Path) -> Iterator[None]:
    """Hold `directory`'s dump lock for the block (made first when missing, with its
    parents, as the dumper writes into it); waits while another compilation, in this
    process or another, holds it. An OSError when the folder cannot be made, opened or
    locked."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        with _thread_lock(fd), _flocked(fd, directory):
            yield
    finally:
        os.close(fd)
