"""Bulk allocation: building or rewriting many IR objects without garbage-collector pauses.

Loading, saving and whole-graph inference create several objects per node, none of them
garbage, yet each allocation burst triggers collections that traverse the whole growing
graph (a 100k-node graph pays seconds for nothing). `no_gc_pauses` suspends the collector
for such a step and hands what it built to the oldest generation in one splice.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_full_collections", "no_gc_pauses"]

#: The full-collection threshold while `no_full_collections` is active: never reached.
_NEVER = 1 << 30


@contextmanager
def no_gc_pauses() -> Iterator[None]:
    """Suspend the cyclic garbage collector for one bulk step (it may nest)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # What was built here lives as long as the graph: move it to the oldest generation
        # in one step (freeze + unfreeze splices lists, it scans nothing) rather than have
        # the next young collections traverse every new node, list and dict twice.
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


class _FullCollectionHold:
    """Who holds full collections off. The collector is one per process, so its thresholds
    are: concurrent compilations share one hold, and the last to leave restores them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: tuple[int, int, int] = gc.get_threshold()


_HOLD = _FullCollectionHold()


@contextmanager
def no_full_collections() -> Iterator[None]:
    """Keep young collections but hold off full ones for one step (a pass), restoring the
    collector's thresholds after it, also on failure (and only when the last of several
    threads holding them off leaves).

    A pass rewriting a large graph keeps what it makes (new nodes, undo records), so each
    full collection traverses the whole graph again, many times per pass. Young
    collections still free what a rewrite drops (its replacement graph), so memory does
    not grow; what survives is spliced into the oldest generation at the end.
    """
    with _HOLD.lock:
        if _HOLD.depth == 0:
            _HOLD.saved = gc.get_threshold()
            gc.set_threshold(_HOLD.saved[0], _HOLD.saved[1], _NEVER)
        _HOLD.depth += 1
    try:
        yield
    finally:
        with _HOLD.lock:
            _HOLD.depth -= 1
            if _HOLD.depth == 0:
                gc.set_threshold(*_HOLD.saved)
                if gc.isenabled():
                    gc.freeze()
                    gc.unfreeze()
