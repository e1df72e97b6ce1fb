"""A built-in pass that fails says so, and how to compile without it.

GE's E13028 text ("Failed to run custom fusion pass X") is about a plugin's pass; trials O
and E met it for ge's own NoOpElimination, which pointed at ge's source and said nothing of
the way around (`disable=`, `on_pass_failure="skip"`).
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.compiler.builtin import NoOpElimination
from ge.errors import PassRunError

pytestmark = pytest.mark.builtin_passes


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_failing_builtin_pass_is_called_built_in_and_says_how_to_go_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(self: NoOpElimination, graph: object, context: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(NoOpElimination, "run", broken)
    source = tmp_path / "model.onnx"
    onnx.save(_model(), source)
    with pytest.raises(PassRunError) as caught:
        ge.compile(source)
    error = caught.value
    assert error.code == "E13028" and error.pass_name == "NoOpElimination"
    assert error.message.startswith(
        "Failed to run built-in pass NoOpElimination. Return code: FAILED. "
        "Reason: RuntimeError: boom. This is a bug in ge: please report it with the model; "
        "disable='NoOpElimination' (--disable NoOpElimination) or on_pass_failure='skip' "
        "(--on-pass-failure skip) compiles without it.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # nothing written
    # the advice works
    result = ge.compile(_model(), disable=["NoOpElimination"])
    assert "Identity" in result.report.ops_after
    with pytest.warns(UserWarning):
        skipped = ge.compile(_model(), on_pass_failure="skip")
    assert "Identity" in skipped.report.ops_after
