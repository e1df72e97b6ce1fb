"""`ge.graph.allocation`: the collector is left exactly as it was found.

`no_gc_pauses` and `no_full_collections` change process-wide state (the enabled flag, the
thresholds) and move objects between generations. After them the enabled flag, the
thresholds and the frozen count are what they were, also when the step raises, when they
nest, when several threads hold them, and when the user froze objects or disabled the
collector beforehand.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from ge.graph import allocation
from ge.graph.allocation import no_full_collections, no_gc_pauses

State = tuple[bool, tuple[int, int, int], int]
Manager = Callable[[], AbstractContextManager[None]]
MANAGERS = [pytest.param(no_gc_pauses, id="no_gc_pauses"),
            pytest.param(no_full_collections, id="no_full_collections")]


def state() -> State:
    return gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[State]:
    """Each test starts from the collector as pytest runs it and gives it back even when
    it fails (thresholds, enabled flag; what a test froze is unfrozen)."""
    before = state()
    if before[2]:
        pytest.skip("objects are frozen in this test process already")
    try:
        yield before
    finally:
        if gc.get_freeze_count():
            gc.unfreeze()
        gc.set_threshold(*before[1])
        (gc.enable if before[0] else gc.disable)()
        assert allocation._HOLD.pauses == 0 and allocation._HOLD.fulls == 0


def freeze_all() -> list[object]:
    """Freeze every tracked object as a user would (`gc.freeze()`), keeping a reference to
    each so none of them can die meanwhile: the frozen count then changes only if something
    unfreezes (or freezes) objects."""
    gc.collect()
    keep = gc.get_objects()
    gc.freeze()
    return keep


def ids(objects: list[object]) -> set[int]:
    return {id(o) for o in objects}


class Boom(Exception):
    pass


# -- the state after one step --------------------------------------------------------------
@pytest.mark.parametrize("manager", MANAGERS)
def test_state_is_restored_after_a_step(manager: Manager) -> None:
    before = state()
    with manager():
        [[i] for i in range(10_000)]
    assert state() == before


@pytest.mark.parametrize("manager", MANAGERS)
def test_state_is_restored_when_the_step_raises(manager: Manager) -> None:
    before = state()
    with pytest.raises(Boom), manager():
        raise Boom
    assert state() == before


def test_no_gc_pauses_disables_the_collector_inside_only() -> None:
    with no_gc_pauses():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_no_full_collections_holds_only_the_full_threshold_inside() -> None:
    gc.set_threshold(500, 7, 9)
    with no_full_collections():
        first, second, third = gc.get_threshold()
        assert (first, second) == (500, 7) and third >= 1 << 20
        assert gc.isenabled()
    assert gc.get_threshold() == (500, 7, 9)


@pytest.mark.parametrize("manager", MANAGERS)
def test_custom_thresholds_are_restored(manager: Manager) -> None:
    gc.set_threshold(1234, 5, 6)
    with pytest.raises(Boom), manager():
        raise Boom
    assert gc.get_threshold() == (1234, 5, 6)


@pytest.mark.parametrize("manager", MANAGERS)
def test_a_disabled_collector_stays_disabled(manager: Manager) -> None:
    gc.disable()
    before = state()
    with manager():
        assert not gc.isenabled()
    assert state() == before
    with pytest.raises(Boom), manager():
        raise Boom
    assert state() == before


# -- frozen objects ------------------------------------------------------------------------
@pytest.mark.parametrize("manager", MANAGERS)
@pytest.mark.parametrize("raises", [False, True])
def test_a_users_frozen_objects_stay_frozen(manager: Manager, raises: bool) -> None:
    mine = [[i] for i in range(100)]
    keep = freeze_all()
    frozen = gc.get_freeze_count()
    assert frozen > 0 and not ids(mine) & ids(gc.get_objects())
    try:
        with manager():
            built = [[i] for i in range(5_000)]
            if raises:
                raise Boom
    except Boom:
        pass
    assert gc.get_freeze_count() == frozen
    assert not ids(mine) & ids(gc.get_objects())  # still in the permanent generation
    assert ids(built) <= ids(gc.get_objects())  # what the step built is not frozen
    del keep


def test_without_a_freeze_what_a_pause_built_is_spliced_into_the_oldest_generation() -> None:
    with no_gc_pauses():
        built = [[i] for i in range(1_000)]
    assert gc.get_freeze_count() == 0
    assert ids(built) <= ids(gc.get_objects(generation=2))


def test_with_a_freeze_one_young_collection_promotes_what_a_pause_built() -> None:
    keep = freeze_all()
    frozen = gc.get_freeze_count()
    generations: list[int] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            generations.append(info["generation"])

    gc.callbacks.append(callback)
    try:
        with no_gc_pauses():
            built = [[i] for i in range(1_000)]
    finally:
        gc.callbacks.remove(callback)
    assert 1 in generations and 2 not in generations  # a young collection, no full one
    assert gc.get_freeze_count() == frozen
    assert ids(built) <= ids(gc.get_objects(generation=2))
    del keep


def test_with_a_freeze_and_the_collector_disabled_nothing_is_collected() -> None:
    keep = freeze_all()
    gc.disable()
    before = state()
    collections: list[str] = []
    gc.callbacks.append(lambda phase, info: collections.append(phase))
    try:
        with no_gc_pauses(), no_full_collections():
            [[i] for i in range(10_000)]
    finally:
        gc.callbacks.pop()
    assert collections == []
    assert state() == before
    del keep


# -- nesting -------------------------------------------------------------------------------
def test_nested_pauses_re_enable_at_the_outermost_exit_only() -> None:
    with no_gc_pauses():
        with no_gc_pauses():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_holds_restore_at_the_outermost_exit_only() -> None:
    gc.set_threshold(700, 10, 10)
    with no_full_collections():
        with pytest.raises(Boom), no_full_collections():
            raise Boom
        assert gc.get_threshold()[2] > 10
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("outer_first", [True, False])
def test_the_two_managers_nest_either_way(outer_first: bool) -> None:
    gc.set_threshold(800, 11, 12)
    before = state()
    outer, inner = ((no_full_collections, no_gc_pauses) if outer_first
                    else (no_gc_pauses, no_full_collections))
    with outer():
        with pytest.raises(Boom), inner():
            assert not gc.isenabled() and gc.get_threshold()[2] > 12
            raise Boom
        assert gc.isenabled() == (outer is no_full_collections)
    assert state() == before


def test_the_user_changing_the_collector_inside_a_step_is_undone() -> None:
    """The state restored is the one before the step (a compilation leaves it as found)."""
    before = state()
    with no_full_collections(), no_gc_pauses():
        gc.set_threshold(1, 1, 1)
        gc.enable()
    assert state() == before


# -- threads -------------------------------------------------------------------------------
@pytest.mark.parametrize("manager", MANAGERS)
def test_overlapping_threads_restore_when_the_last_leaves(manager: Manager) -> None:
    gc.set_threshold(900, 10, 10)
    before = state()
    inside, second_in, first_out, done = (threading.Event() for _ in range(4))
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with manager():
                inside.set()
                second_in.wait(5)
            first_out.set()
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    def second() -> None:
        try:
            inside.wait(5)
            with pytest.raises(Boom), manager():
                second_in.set()
                first_out.wait(5)
                assert state() != before  # still held: the first leaving did not restore
                raise Boom
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors, errors
    assert done.is_set()
    assert state() == before


@pytest.mark.parametrize("user_freeze", [False, True])
def test_many_threads_entering_and_leaving_leave_the_state_as_found(user_freeze: bool) -> None:
    keep = freeze_all() if user_freeze else []
    gc.set_threshold(600, 9, 8)
    before = state()
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def work(index: int) -> None:
        try:
            start.wait(5)
            for round_ in range(40):
                if (index + round_) % 2:
                    with no_full_collections(), no_gc_pauses():
                        [[i] for i in range(200)]
                else:
                    with no_gc_pauses():
                        [[i] for i in range(200)]
                        with no_full_collections():
                            pass
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert state() == before
    del keep


def test_a_transaction_holds_off_full_collections_and_restores_the_thresholds() -> None:
    from ge.graph import Graph

    graph = Graph("g")
    before = gc.get_threshold()
    with graph.transaction():
        inside = gc.get_threshold()
        graph.add_node("Relu", num_inputs=1)
    assert inside[:2] == before[:2] and inside[2] > 10**6  # young collections go on
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), graph.transaction():
        raise RuntimeError("rolled back")
    assert gc.get_threshold() == before


def test_a_removed_node_is_freed_without_waiting_for_the_next_order_query() -> None:
    """The cached node list of a graph is dropped on the change that makes it stale: a node
    removed after `topological_order()` is freed by its reference count, as it would be
    without the query (a cache holding it would keep it, and the collector busy, for as
    long as no one asks for the order again)."""
    import weakref

    from ge.graph import Graph

    graph = Graph("g")
    x = graph.add_node("Data", attrs={"index": 0})
    relu = graph.add_node("Relu", num_inputs=1)
    graph.add_data_edge(x, 0, relu, 0)
    assert [n.type for n in graph.topological_order()] == ["Data", "Relu"]  # cached now
    gone = weakref.ref(relu)
    with no_gc_pauses():  # freed without the collector's help
        graph.remove_node(relu)
        del relu
        assert gone() is None
    assert [n.type for n in graph.topological_order()] == ["Data"]


# -- splices and full collections --------------------------------------------------------------
class _Cycle:
    """An object in a reference cycle: only a (full) collection frees it once dropped."""

    def __init__(self) -> None:
        self.me = self


def _full_runs() -> int:
    return int(gc.get_stats()[2]["collections"])


@pytest.fixture
def fresh_accounting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The splice accounting of a process that has spliced nothing yet (no checks made)."""
    monkeypatch.setattr(allocation._HOLD, "spliced", 0)
    monkeypatch.setattr(allocation._HOLD, "long_lived", None)
    monkeypatch.setattr(allocation._HOLD, "full_runs", _full_runs())


def _drop_cycles_built_in_a_pause(count: int) -> None:
    """What loading and dropping a graph does: a pause builds `count` objects in cycles
    (spliced into the oldest generation at its end), then they become unreachable."""
    with no_gc_pauses():
        garbage = [_Cycle() for _ in range(count)]
    del garbage


def test_cycles_dropped_after_pauses_are_collected_in_time(fresh_accounting: None) -> None:
    """A process loading and dropping graph after graph: the splices would never count
    towards CPython's full collections (300 compilations of DistilBERT kept 531,000
    objects); the steps run the full collection that is due, so garbage stays bounded."""
    gc.collect()
    baseline = len(gc.get_objects())
    batch = allocation._FULL_FLOOR // 3
    runs = _full_runs()
    peak = 0
    for _ in range(30):
        _drop_cycles_built_in_a_pause(batch)
        peak = max(peak, len(gc.get_objects()) - baseline)
    assert _full_runs() > runs
    assert peak < 2 * allocation._FULL_FLOOR + 2 * batch  # 30 batches: 10x the floor


def test_a_lone_step_pays_for_no_full_collection(fresh_accounting: None) -> None:
    """What the first steps spliced is taken as live (the graph being compiled): the next
    step starts without a full collection, however much was spliced."""
    runs = _full_runs()
    with no_gc_pauses():
        kept = [_Cycle() for _ in range(2 * allocation._FULL_FLOOR)]
    with no_full_collections():
        pass
    with no_gc_pauses():
        pass
    assert _full_runs() == runs
    assert len(kept) == 2 * allocation._FULL_FLOOR


def test_a_disabled_collector_is_not_run_for_the_splices(fresh_accounting: None) -> None:
    gc.disable()
    runs = _full_runs()
    for _ in range(8):
        _drop_cycles_built_in_a_pause(allocation._FULL_FLOOR // 2)
    assert _full_runs() == runs
    assert not gc.isenabled()
    gc.collect()


def test_the_due_collection_runs_while_another_thread_holds_the_collector(
        fresh_accounting: None) -> None:
    """A service compiling in several threads keeps the collector held almost all the time
    (a user trial: 88% of samples). A step starting while another thread holds it still
    runs the full collection its splices made due, so the garbage stays bounded."""
    entered, release = threading.Event(), threading.Event()

    def other_compilation() -> None:
        with no_full_collections():
            entered.set()
            release.wait(timeout=60)

    other = threading.Thread(target=other_compilation)
    other.start()
    try:
        assert entered.wait(timeout=60)
        runs = _full_runs()
        for _ in range(12):
            _drop_cycles_built_in_a_pause(allocation._FULL_FLOOR // 2)
        assert _full_runs() > runs
        assert gc.get_threshold()[2] == allocation._NEVER  # still held by the other thread
    finally:
        release.set()
        other.join()


def test_a_step_inside_this_threads_own_hold_waits_for_its_end(fresh_accounting: None) -> None:
    """Held by this thread alone (a pass, and the pauses of the steps inside it): no full
    collection mid-pass, however much was spliced; the next outermost step runs it."""
    with no_gc_pauses():  # the first graph loaded (taken as live by the next step)
        kept = [_Cycle() for _ in range(100)]
    with no_full_collections():
        pass
    runs = _full_runs()
    with no_full_collections():
        for _ in range(8):
            _drop_cycles_built_in_a_pause(allocation._FULL_FLOOR // 2)
        assert _full_runs() == runs
    with no_full_collections():
        pass
    assert _full_runs() > runs and len(kept) == 100
