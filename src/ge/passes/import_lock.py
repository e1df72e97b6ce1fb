"""The lock plugin imports take: shared by imports that leave `sys.path` and `sys.meta_path`
alone, exclusive for those that change them, and one import of a plugin at a time.

A plugin file given by itself and an installed entry point import as any module does, so
several of them may import at once in several threads. The plugins of a folder import
with the folder first on `sys.path` (GE's rule) and the helpers other folders took hidden
(`ge.passes.helper_modules`), which any import meanwhile would see: they import alone.
Two threads never import the same plugin at once: the second waits for the first and
takes its result. A thread waiting for the lock exclusive keeps new sharers out, so it
is not starved. Reentrant in either mode within a thread (a thread holding it shared
that asks for it exclusive waits for the other sharers only).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["LOAD_LOCK", "ImportLock"]


class ImportLock:
    """Shared/exclusive, reentrant, with one holder per key (a plugin) at a time; a plain
    `with lock:` takes it exclusive."""

    def __init__(self) -> None:
        self._state = threading.Condition(threading.Lock())
        self._owner: int | None = None  # the thread holding it exclusive
        self._depth = 0
        self._sharers: dict[int, int] = {}  # thread -> depth
        self._waiting_exclusive = 0
        self._keys: dict[str, tuple[int, int]] = {}  # key -> (thread, depth)

    def held(self) -> bool:
        """Whether this thread holds the lock, in either mode."""
        me = threading.get_ident()
        with self._state:
            return self._owner == me or me in self._sharers

    @contextmanager
    def importing(self, key: str | None, *, exclusive: bool) -> Iterator[None]:
        """Hold `key`, then the lock (`exclusive` or shared), for the block. The key comes
        first: a thread waiting for another's import of the same plugin then holds no share
        of the lock, so that import may still take the lock exclusive (a plugin whose module
        loads a plugin folder) instead of waiting for the waiter to let go."""
        if key is not None:
            self._take(key)
        try:
            self._acquire(exclusive)
            try:
                yield
            finally:
                self._release(exclusive)
        finally:
            if key is not None:
                self._give(key)

    def __enter__(self) -> ImportLock:
        self._acquire(True)
        return self

    def __exit__(self, *exc: object) -> None:
        self._release(True)

    def _acquire(self, exclusive: bool) -> None:
        me = threading.get_ident()
        with self._state:
            if self._owner == me:
                if exclusive:
                    self._depth += 1
                else:
                    self._sharers[me] = self._sharers.get(me, 0) + 1
                return
            if not exclusive:
                if me not in self._sharers:  # (a sharer again never waits: it holds it)
                    self._state.wait_for(
                        lambda: self._owner is None and not self._waiting_exclusive)
                self._sharers[me] = self._sharers.get(me, 0) + 1
                return
            self._waiting_exclusive += 1
            try:
                self._state.wait_for(lambda: self._owner is None and all(
                    thread == me for thread in self._sharers))
            finally:
                self._waiting_exclusive -= 1
            self._owner, self._depth = me, 1

    def _release(self, exclusive: bool) -> None:
        me = threading.get_ident()
        with self._state:
            if exclusive and self._owner == me and self._depth > 0:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
            else:
                depth = self._sharers[me] - 1
                if depth:
                    self._sharers[me] = depth
                else:
                    del self._sharers[me]
            self._state.notify_all()

    def _take(self, key: str) -> None:
        me = threading.get_ident()
        with self._state:
            self._state.wait_for(lambda: self._keys.get(key, (me, 0))[0] == me)
            self._keys[key] = (me, self._keys.get(key, (me, 0))[1] + 1)

    def _give(self, key: str) -> None:
        with self._state:
            thread, depth = self._keys[key]
            if depth > 1:
                self._keys[key] = (thread, depth - 1)
            else:
                del self._keys[key]
            self._state.notify_all()


#: The lock of this process's plugin imports (`ge.passes.loader`), held for as long as one
#: runs: what only reads what is loaded, or loads a plugin loaded already, never takes it.
#: `with LOAD_LOCK:` holds it exclusive: no plugin imports meanwhile.
LOAD_LOCK = ImportLock()
