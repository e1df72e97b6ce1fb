"""What looks at the whole model after a pass (per-pass verification, the HTML page's
changes, level-1 dumps) does it once per pass, not once per body the pass changed: with a run of the
whole model per body, a model of 500 If nodes took 237 s to verify each pass (2.7 s now)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.session.runner import ModelRunner

BODIES = 4

DOUBLE_RELU = '''\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="ScaleInside", stage=PassStage.AFTER_INFER_SHAPE)
class ScaleInside(PatternFusionPass):
    @pattern
    def relu_scale(self, inputs):
        return es.Relu(inputs[0]) * 2.0

    def replacement(self, inputs):
        return es.Relu(inputs[0] * 2.0)
'''


def _many_ifs(path: Path) -> None:
    """x -> If_1 -> ... -> If_n: each then-branch computes Relu(v) * 2, each else-branch -v."""
    nodes, previous = [], "x"
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    for i in range(BODIES):
        then = helper.make_graph(
            [helper.make_node("Relu", [previous], [f"r{i}"]),
             helper.make_node("Mul", [f"r{i}", "two"], [f"t{i}"])], f"then{i}", [],
            [helper.make_tensor_value_info(f"t{i}", TensorProto.FLOAT, [3])])
        other = helper.make_graph(
            [helper.make_node("Neg", [previous], [f"e{i}"])], f"else{i}", [],
            [helper.make_tensor_value_info(f"e{i}", TensorProto.FLOAT, [3])])
        nodes.append(helper.make_node("If", ["cond"], [f"v{i}"], then_branch=then,
                                      else_branch=other, name=f"if{i}"))
        previous = f"v{i}"
    graph = helper.make_graph(
        nodes, "ifs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [3])], [two])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_each_pass_verification_runs_the_model_once_per_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "ifs.onnx"
    _many_ifs(model)
    plugin = tmp_path / "scale_inside.py"
    plugin.write_text(DOUBLE_RELU)
    runs: list[int] = []
    real = ModelRunner.run

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ModelRunner, "run", counted)  # every run of every model
    inputs = {"x": np.array([-1.0, 0.5, 2.0], np.float32), "cond": np.array(True)}
    result = ge.compile(model, pass_paths=[plugin], builtin_passes=False, inputs=inputs,
                        verify="each-pass")
    changed = [r for r in result.report.records if r.changed]
    assert len(changed) == BODIES  # one pass, a run per then-branch
    assert len(runs) == 3  # the original, after ScaleInside, the compiled model


def test_the_html_recorder_walks_the_model_once_per_pass(tmp_path: Path) -> None:
    from ge.cli.graph_diff import PassChangeRecorder

    model = tmp_path / "ifs.onnx"
    _many_ifs(model)
    plugin = tmp_path / "scale_inside.py"
    plugin.write_text(DOUBLE_RELU)
    graph = ge.graph.load(model)
    recorder = PassChangeRecorder(graph)
    ge.compile(graph, pass_paths=[plugin], builtin_passes=False, observers=[recorder])
    (change,) = recorder.changes
    assert change.pass_name == "ScaleInside"
    assert change.graph == f"then0 and {BODIES - 1} more"
    assert sorted(t for _, t in change.removed) == sorted(["Mul", "Relu"] * BODIES)
    assert sorted(t for _, t in change.added) == sorted(["Const", "Mul", "Relu"] * BODIES)


def test_dumps_at_level_1_write_the_model_once_per_pass(tmp_path: Path) -> None:
    model = tmp_path / "ifs.onnx"
    _many_ifs(model)
    plugin = tmp_path / "scale_inside.py"
    plugin.write_text(DOUBLE_RELU)
    dumps = tmp_path / "dumps"
    ge.compile(model, pass_paths=[plugin], builtin_passes=False, dump=dumps, dump_level="1")
    names = sorted(p.name for p in dumps.glob("*.txt"))
    assert [n for n in names if "ScaleInside" in n] == ["ge_0003_AfterInferShape_ScaleInside.txt"]
