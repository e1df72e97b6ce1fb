"""Built-in pattern passes build their patterns once per compiler lifetime and opset
(`ge.compiler.built_patterns`): a later compilation gets an instance of its own with the
patterns built, the result is the same, nothing of an earlier compilation's graph is kept
alive by them, and `ge.finalize()` drops them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.compiler
from ge.compiler.builtin.fusion_gelu import GeluFusion
from ge.testing import assert_numerically_equal

pytestmark = pytest.mark.builtin_passes


def gelu_model(opset: int = 20) -> onnx.ModelProto:
    """0.5 * x * (1 + erf(x / sqrt(2))), written out, then a Relu."""
    nodes = [helper.make_node("Div", ["x", "c"], ["xs"], name="scale"),
             helper.make_node("Erf", ["xs"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["t"], name="add_one"),
             helper.make_node("Mul", ["x", "half"], ["hx"], name="half_x"),
             helper.make_node("Mul", ["hx", "t"], ["g"], name="gelu"),
             helper.make_node("Relu", ["g"], ["y"], name="relu")]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n)
             for n, v in (("c", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [2, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times GeluFusion built its patterns, one entry (the opset) per build."""
    calls: list[int] = []
    original = GeluFusion.patterns

    def counting(self: GeluFusion) -> list:
        from ge.es import current_opset_imports

        calls.append(current_opset_imports().get("", 0))
        return original(self)

    monkeypatch.setattr(GeluFusion, "patterns", counting)
    yield calls


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def test_a_later_compilation_reuses_the_patterns_and_fuses_the_same(
        builds: list[int]) -> None:
    model = gelu_model()
    first = ge.compile(model).to_onnx()
    second = ge.compile(model).to_onnx()
    assert builds == [20]
    assert _ops(first) == _ops(second) == ["Gelu", "Relu"]
    assert first.SerializeToString() == second.SerializeToString()
    assert_numerically_equal(model, second)


def test_another_opset_builds_its_own_and_finalize_drops_them(builds: list[int]) -> None:
    ge.compile(gelu_model(20))
    ge.compile(gelu_model(21))
    ge.compile(gelu_model(20))
    assert builds == [20, 21]
    ge.compiler.finalize()
    ge.compile(gelu_model(20))
    assert builds == [20, 21, 20]


def test_each_compilation_matches_with_an_instance_of_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What `meet_requirements` notes for `replacement` lives on the instance: the kept one
    (built, never matched with) is copied for each compilation, never handed out."""
    seen: list[GeluFusion] = []
    noted: list[object] = []  # what each call left on its instance for the replacement
    original = GeluFusion.meet_requirements

    def noting(self: GeluFusion, *args: object) -> bool:
        seen.append(self)
        answer = original(self, *args)  # type: ignore[arg-type]
        noted.append(self._decided[0])
        return answer

    monkeypatch.setattr(GeluFusion, "meet_requirements", noting)
    for _ in range(3):
        assert _ops(ge.compile(gelu_model()).to_onnx()) == ["Gelu", "Relu"]
    instances = list(dict.fromkeys(seen))  # (one instance per compilation, in order)
    assert len(instances) == 3
    assert instances[1]._roles is instances[2]._roles  # the roles learned building them
    assert len(noted) == 3 and None not in noted  # each noted its own match on itself


def test_concurrent_compilations_each_fuse_with_their_own_instance() -> None:
    models = [gelu_model() for _ in range(4)]
    results: list[list[str]] = [[] for _ in models]
    errors: list[BaseException] = []

    def compile_one(i: int) -> None:
        try:
            for _ in range(5):
                results[i] = _ops(ge.compile(models[i]).to_onnx())
        except BaseException as exc:  # (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=compile_one, args=(i,)) for i in range(len(models))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert results == [["Gelu", "Relu"]] * len(models)
