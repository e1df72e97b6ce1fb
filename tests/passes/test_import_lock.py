"""The lock plugin imports take (`ge.passes.import_lock.ImportLock`): shared imports run at
once, an exclusive one alone, one import of a key at a time, reentrant in both modes.

Threads meet on events and barriers; a join's limit only keeps a broken lock from hanging
the run. An order a broken lock could produce only when its threads run fast enough is
checked too: a correct lock never fails it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ge.passes.import_lock import ImportLock
from ge.passes.loader import LOAD_LOCK

STUCK = 30


def start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def finish(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(STUCK)
        assert not thread.is_alive(), "a thread is stuck"


def test_shared_holders_hold_it_at_once() -> None:
    lock = ImportLock()
    both_inside = threading.Barrier(2, timeout=STUCK)
    met: list[int] = []

    def share(key: str) -> None:
        with lock.importing(key, exclusive=False):
            met.append(both_inside.wait())

    finish(start(lambda: share("a")), start(lambda: share("b")))
    assert sorted(met) == [0, 1]


def hold_then(lock: ImportLock, exclusive: bool, key: str | None, events: list[str],
              entered: threading.Event, go_on: threading.Event) -> None:
    with lock.importing(key, exclusive=exclusive):
        events.append("first in")
        entered.set()
        assert go_on.wait(STUCK)
        events.append("first out")


def test_one_key_is_held_by_one_thread_at_a_time() -> None:
    lock = ImportLock()
    events: list[str] = []
    entered, go_on = threading.Event(), threading.Event()
    first = start(lambda: hold_then(lock, False, "k", events, entered, go_on))
    assert entered.wait(STUCK)

    def second() -> None:
        with lock.importing("k", exclusive=False):
            events.append("second in")

    def other_key() -> None:
        with lock.importing("other", exclusive=False):
            events.append("other key in")

    finish(start(other_key))  # another key, shared: it does not wait
    waiting = start(second)
    go_on.set()
    finish(first, waiting)
    assert events == ["first in", "other key in", "first out", "second in"]


def test_an_exclusive_holder_excludes_sharers_and_waits_for_them() -> None:
    lock = ImportLock()
    events: list[str] = []
    entered, go_on = threading.Event(), threading.Event()
    sharer = start(lambda: hold_then(lock, False, "k", events, entered, go_on))
    assert entered.wait(STUCK)

    def exclusive() -> None:
        with lock:
            events.append("exclusive in")

    def late_sharer() -> None:
        with lock.importing("j", exclusive=False):
            events.append("late sharer in")

    alone = start(exclusive)
    go_on.set()
    finish(sharer, alone, start(late_sharer))
    assert events[:3] == ["first in", "first out", "exclusive in"]
    assert events[3:] == ["late sharer in"]


def test_it_is_reentrant_in_both_modes() -> None:
    """A thread takes it again, in either mode, and a sole sharer may take it exclusive."""
    lock = ImportLock()
    assert not lock.held()
    with lock.importing("a", exclusive=False):
        with lock.importing("a", exclusive=False), lock.importing("b", exclusive=True), \
                lock, lock.importing("a", exclusive=False):
            assert lock.held()
        assert lock.held()
    assert not lock.held()
    done = threading.Event()
    finish(start(lambda: (lock.__enter__(), lock.__exit__(), done.set())))
    assert done.is_set()  # released in full: another thread takes it exclusive


def test_the_loader_lock_is_one() -> None:
    """`with LOAD_LOCK:` (what `ge.testing.load_passes` holds) is the exclusive mode."""
    assert isinstance(LOAD_LOCK, ImportLock)
    with LOAD_LOCK:
        assert LOAD_LOCK.held()
    assert not LOAD_LOCK.held()


def test_an_import_may_take_the_lock_exclusive_while_another_waits_for_its_key() -> None:
    """A plugin whose module loads a plugin folder takes the lock exclusive while it holds
    its own key; a second import of the same plugin waiting meanwhile holds no share of the
    lock (it waits for the key first), so the first is not stuck waiting for it."""
    lock = ImportLock()
    events: list[str] = []
    entered, go_on = threading.Event(), threading.Event()

    def first() -> None:
        with lock.importing("plugin", exclusive=False):
            entered.set()
            assert go_on.wait(STUCK)
            with lock.importing("folder", exclusive=True):  # the module loads a folder
                events.append("folder loaded")
        events.append("first out")

    def second() -> None:
        with lock.importing("plugin", exclusive=False):
            events.append("second in")

    importing = start(first)
    assert entered.wait(STUCK)
    waiting = start(second)
    while "plugin" not in lock._keys or not lock._state._waiters:  # type: ignore[attr-defined]
        threading.Event().wait(0.001)  # until the second waits (for the key, as it should)
    go_on.set()
    finish(importing, waiting)
    assert events == ["folder loaded", "first out", "second in"]
