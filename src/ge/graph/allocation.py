"""Bulk allocation: building or rewriting many IR objects without garbage-collector pauses.

Loading, saving and whole-graph inference create several objects per node, none of them
garbage, yet each allocation burst triggers collections that traverse the whole growing
graph (a 100k-node graph pays seconds for nothing). `no_gc_pauses` suspends the collector
for such a step and hands what it built to the oldest generation in one splice.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_gc_pauses"]


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
