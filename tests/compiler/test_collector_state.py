"""A compilation leaves Python's garbage collector exactly as it found it.

ge pauses the collector while loading, saving and inferring shapes and holds off full
collections during each pass invocation (`ge.graph.allocation`). Whatever the user had set
beforehand (collector disabled, custom thresholds, objects frozen with `gc.freeze()`),
`gc.isenabled()`, `gc.get_threshold()` and `gc.get_freeze_count()` are the same after
`ge.compile(...)` (and saving its result), also when the compilation fails in a pass.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ge
from ge.errors import CompileWarning, PassRunError
from model_paths import shared_model
from plugin_fixtures import small_graph

State = tuple[bool, tuple[int, int, int], int]

RAISING = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="RaisingAfterShapes", stage="AfterInferShape")
class RaisingAfterShapes(FusionBasePass):
    def run(self, graph, context):
        for index in range(200):
            graph.add_const(float(index), name=f"left_behind_{index}")
        raise ValueError("boom")
"""

#: What the user did to the collector before compiling.
SETUPS = ["default", "disabled", "thresholds", "frozen", "disabled+frozen+thresholds"]


def state() -> State:
    return gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()


@pytest.fixture
def user_collector(request: pytest.FixtureRequest) -> Iterator[Callable[[str], State]]:
    """`setup(name)` sets the collector up as a user might and returns the state to expect
    after the compilation; the collector is given back to pytest afterwards."""
    before = state()
    if before[2]:
        pytest.skip("objects are frozen in this test process already")
    kept: list[object] = []

    def setup(name: str) -> State:
        if "thresholds" in name:
            gc.set_threshold(321, 4, 5)
        if "frozen" in name:
            # Keep a reference to every frozen object, so none can die during the test:
            # the frozen count then changes only if something (un)freezes objects.
            gc.collect()
            kept.append(gc.get_objects())
            gc.freeze()
            assert gc.get_freeze_count() > 0
        if "disabled" in name:
            gc.disable()
        return state()

    try:
        yield setup
    finally:
        if gc.get_freeze_count():
            gc.unfreeze()
        kept.clear()
        gc.set_threshold(*before[1])
        (gc.enable if before[0] else gc.disable)()


@pytest.mark.builtin_passes
@pytest.mark.parametrize("setup", SETUPS)
def test_compiling_and_saving_a_real_model_leaves_the_collector_as_it_was(
        setup: str, user_collector: Callable[[str], State], tmp_path: Path) -> None:
    expected = user_collector(setup)
    result = ge.compile(shared_model("vit_tiny"))
    assert result.report.records  # the built-in passes ran
    assert state() == expected
    result.save(tmp_path / "vit_tiny.onnx")
    assert state() == expected


@pytest.mark.builtin_passes
@pytest.mark.parametrize("setup", ["default", "frozen", "disabled+frozen+thresholds"])
def test_a_compilation_failing_in_a_plugin_pass_leaves_the_collector_as_it_was(
        setup: str, user_collector: Callable[[str], State], tmp_path: Path) -> None:
    plugin = tmp_path / "raising_after_shapes.py"
    plugin.write_text(RAISING)
    expected = user_collector(setup)
    with pytest.raises(PassRunError, match="boom"):
        ge.compile(shared_model("vit_tiny"), pass_paths=[plugin])
    assert state() == expected


@pytest.mark.parametrize("setup", SETUPS)
def test_a_failing_plugin_pass_on_a_small_graph_leaves_the_collector_as_it_was(
        setup: str, user_collector: Callable[[str], State], tmp_path: Path) -> None:
    plugin = tmp_path / "raising_after_shapes.py"
    plugin.write_text(RAISING)
    expected = user_collector(setup)
    with pytest.raises(PassRunError, match="boom"):
        ge.compile(small_graph(), pass_paths=[plugin])
    assert state() == expected
    with pytest.warns(CompileWarning, match="rolled back and skipped"):
        ge.compile(small_graph(), pass_paths=[plugin], on_pass_failure="skip")
    assert state() == expected
