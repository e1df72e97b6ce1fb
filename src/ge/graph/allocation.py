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

A splice bypasses CPython's accounting: a full collection runs when the objects promoted
to the oldest generation since the last one exceed a quarter of those that survived it,
and spliced objects are never counted. Without more, a process compiling model after model
would never collect the cycles of the graphs it dropped (300 compilations of the vendored
DistilBERT: 531,000 objects, 285 MB, for 44,000 live). So the splices are counted here, and
the step that starts once they reach `max(_FULL_FLOOR, the oldest generation's estimated
size)` first runs the full collection that is due. What the first step spliced is taken
as live (the first graph loaded), so a lone compilation pays for none, and one is
due at most every time the heap has doubled: each object is traversed about once per
doubling, as with CPython's own rule.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_full_collections", "no_gc_pauses"]

#: The full-collection threshold while `no_full_collections` is active: never reached.
_NEVER = 1 << 30
#: Objects spliced since the last full collection below which none is made, rather than a
#: full traversal of a small heap after every compilation. A splice moves every young
#: object of the process, another thread's garbage too (a service's, which may hold large
#: buffers in few objects): 200,000 let such a service reach 430 MB where 50,000 keeps it
#: under 200 MB (docs/performance.md).
_FULL_FLOOR = 50_000


class _CollectorHold:
    """Who holds the collector, and the state to give back when the last holder leaves.

    `lock` guards the counters, the saved values and the splice; it is reentrant so that
    a finalizer run inside it (which may itself load or save a graph) cannot deadlock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pauses = 0  # active `no_gc_pauses`, every thread
        self.was_enabled = True  # gc.isenabled() when the first of them entered
        self.fulls = 0  # active `no_full_collections`, every thread
        self.holders: dict[int, int] = {}  # thread ident -> its active holds (both kinds)
        self.thresholds: tuple[int, int, int] = gc.get_threshold()  # when the first entered
        # objects spliced into the oldest generation since its last collection, and the
        # estimated size of that generation after it (None until a check finds something
        # spliced: that is taken as live, see the module docstring)
        self.spliced = 0
        self.long_lived: int | None = None
        self.full_runs = _full_collections()


def _full_collections() -> int:
    """How many full collections the process has made (any cause)."""
    return int(gc.get_stats()[2]["collections"])


_HOLD = _CollectorHold()


def _collect_if_due() -> None:
    """Run the full collection the splices made due (see the module docstring), unless the
    collector is disabled or a full collection already ran since the count began. Called
    on entering an outermost step, without `_HOLD.lock` held (finalizers may take it)."""
    me = threading.get_ident()
    with _HOLD.lock:
        held = _HOLD.pauses or _HOLD.fulls
        # Held by this thread alone (a step inside its pass): its own splices wait for its
        # next outermost step. Held by another thread too: a compilation in one thread
        # must not starve the process of full collections while others keep it held
        # (a service compiling in several threads would never run one).
        if held and not any(t != me for t in _HOLD.holders):
            return
        if not (_HOLD.was_enabled if _HOLD.pauses else gc.isenabled()):
            return
        runs = _full_collections()
        if runs != _HOLD.full_runs:  # CPython (or the user) collected: the count restarts
            _HOLD.full_runs, _HOLD.spliced = runs, 0
            return
        if _HOLD.long_lived is None:  # the first graph loaded: live, not garbage
            if _HOLD.spliced:
                _HOLD.long_lived, _HOLD.spliced = _HOLD.spliced, 0
            return
        if _HOLD.spliced < max(_FULL_FLOOR, _HOLD.long_lived):
            return
        spliced, _HOLD.spliced = _HOLD.spliced, 0
        long_lived = _HOLD.long_lived
    found = gc.collect()
    with _HOLD.lock:
        _HOLD.long_lived = max(0, long_lived + spliced - found)
        _HOLD.full_runs = _full_collections()


def _enter(holders: dict[int, int]) -> None:
    me = threading.get_ident()
    holders[me] = holders.get(me, 0) + 1


def _leave(holders: dict[int, int]) -> None:
    me = threading.get_ident()
    left = holders[me] - 1
    if left:
        holders[me] = left
    else:
        del holders[me]


def _splice_young() -> bool:
    """Move what the young generations hold to the oldest, where it would end up anyway,
    by `gc.freeze(); gc.unfreeze()` (it splices lists: O(1), it scans nothing); only when
    nothing is frozen, since `unfreeze` would thaw a user's frozen objects too. Whether it
    spliced. Called with `_HOLD.lock` held, so ge's threads never interleave the pair."""
    if gc.get_freeze_count():
        return False
    # (with the collector paused, the young count is what the step allocated, net)
    _HOLD.spliced += gc.get_count()[0]
    gc.freeze()
    gc.unfreeze()
    return True


@contextmanager
def no_gc_pauses() -> Iterator[None]:
    """Suspend the cyclic garbage collector for one bulk step (it may nest, and several
    threads may hold it: the collector is re-enabled, if it was enabled when the first
    holder entered, when the last one leaves, also on failure)."""
    _collect_if_due()
    with _HOLD.lock:
        if _HOLD.pauses == 0:
            _HOLD.was_enabled = gc.isenabled()
            gc.disable()
        _HOLD.pauses += 1
        _enter(_HOLD.holders)
    try:
        yield
    finally:
        collect = False
        with _HOLD.lock:
            _HOLD.pauses -= 1
            _leave(_HOLD.holders)
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
    if splice:  # (a pass, not one of the many short transactions)
        _collect_if_due()
    with _HOLD.lock:
        if _HOLD.fulls == 0:
            _HOLD.thresholds = gc.get_threshold()
            gc.set_threshold(_HOLD.thresholds[0], _HOLD.thresholds[1], _NEVER)
        _HOLD.fulls += 1
        _enter(_HOLD.holders)
    try:
        yield
    finally:
        with _HOLD.lock:
            _HOLD.fulls -= 1
            _leave(_HOLD.holders)
            if _HOLD.fulls == 0:
                gc.set_threshold(*_HOLD.thresholds)
                if splice and gc.isenabled():
                    _splice_young()

