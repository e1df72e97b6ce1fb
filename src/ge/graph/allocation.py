"""Bulk allocation: building or rewriting many IR objects without garbage-collector pauses.

Loading, saving and whole-graph inference create several objects per node, none of them
garbage, yet each allocation burst triggers collections that traverse the whole growing
graph (a 100k-node graph pays seconds for nothing). `no_gc_pauses` suspends the collector
for such a step and hands what it built to the oldest generation in one splice;
`no_full_collections` keeps the young collections of a pass but holds off the full ones.

Both leave the collector as they found it: its enabled flag and thresholds are restored
when the last holder leaves (nested holds and holds of several threads share one saved
state, since the collector is one per process), also when the step raises; objects a user
froze (`gc.freeze()`) stay frozen, and `gc.get_freeze_count()` is what it was. See
docs/performance.md for what this costs and saves.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_full_collections", "no_gc_pauses"]

#: The full-collection threshold while `no_full_collections` is active: never reached.
_NEVER = 1 << 30


class _CollectorHold:
    """Who holds the collector, and the state to give back when the last holder leaves.

    `lock` guards the counters, the saved values and the splice; it is reentrant so that
    a finalizer run inside it (which may itself load or save a graph) cannot deadlock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pauses = 0  # active `no_gc_pauses`, every thread
        self.was_enabled = True  # gc.isenabled() when the first of them entered
        self.fulls = 0  # active `no_full_collections`, every thread
        self.thresholds: tuple[int, int, int] = gc.get_threshold()  # when the first entered


_HOLD = _CollectorHold()


def _splice_young() -> bool:
    """Move what the young generations hold to the oldest, where it would end up anyway,
    by `gc.freeze(); gc.unfreeze()` (it splices lists: O(1), it scans nothing); only when
    nothing is frozen, since `unfreeze` would thaw a user's frozen objects too. Whether it
    spliced. Called with `_HOLD.lock` held, so ge's threads never interleave the pair."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    gc.unfreeze()
    return True


@contextmanager
def no_gc_pauses() -> Iterator[None]:
    """Suspend the cyclic garbage collector for one bulk step (it may nest, and several
    threads may hold it: the collector is re-enabled, if it was enabled when the first
    holder entered, when the last one leaves, also on failure)."""
    with _HOLD.lock:
        if _HOLD.pauses == 0:
            _HOLD.was_enabled = gc.isenabled()
            gc.disable()
        _HOLD.pauses += 1
    try:
        yield
    finally:
        collect = False
        with _HOLD.lock:
            _HOLD.pauses -= 1
            if _HOLD.pauses == 0:
                # What was built here lives as long as the graph: move it to the oldest
                # generation in one step rather than have the next young collections
                # traverse every new node, list and dict twice. With a user's objects
                # frozen, one young collection does it instead (it traverses them once).
                collect = not _splice_young() and _HOLD.was_enabled
                if _HOLD.was_enabled:
                    gc.enable()
        if collect:  # outside the lock: finalizers it runs may take it in other threads
            gc.collect(1)


@contextmanager
def no_full_collections(*, splice: bool = True) -> Iterator[None]:
    """Keep young collections but hold off full ones for one step (a pass), restoring the
    collector's thresholds after it, also on failure (and only when the last of several
    nested or concurrent holders leaves). `splice=False` (a transaction: many short spans
    in a row) leaves what survived in the young generations, where the next young
    collections see it as usual.

    A pass rewriting a large graph keeps what it makes (new nodes, undo records), so each
    full collection traverses the whole graph again, many times per pass. Young
    collections still free what a rewrite drops (its replacement graph), so memory does
    not grow; what survives is moved to the oldest generation at the end (by a splice, or
    with a user's objects frozen by the young collections that follow).
    """
    with _HOLD.lock:
        if _HOLD.fulls == 0:
            _HOLD.thresholds = gc.get_threshold()
            gc.set_threshold(_HOLD.thresholds[0], _HOLD.thresholds[1], _NEVER)
        _HOLD.fulls += 1
    try:
        yield
    finally:
        with _HOLD.lock:
            _HOLD.fulls -= 1
            if _HOLD.fulls == 0:
                gc.set_threshold(*_HOLD.thresholds)
                if splice and gc.isenabled():
                    _splice_young()

