"""The norm and GELU fusions when the fused result is a graph output whose dims the file
declares under other symbols than its input's (TorchScript names a model's last output
`Mul<output>_dim_0` where the input is `batch`): the same shape as far as sizes are known,
so it fuses; a size on one side only (a constant broadcast the value to it) still refuses."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from builtin_helpers import assert_sound, count_rewrites, histogram, init, load, model, vi
from onnx import helper

from ge.compiler.builtin._support import same_known_dims
from ge.compiler.builtin.fusion_gelu import GeluFusion
from ge.compiler.builtin.fusion_norm import LayerNormFusion, RMSNormFusion
from versions import needs_opset

pytestmark = [pytest.mark.builtin_passes, pytest.mark.usefixtures("matching")]

node = helper.make_node
D = 16
X = vi("X", shape=["batch", "seq", D])
DECLARED = ["Mul_Y_dim_0", "Mul_Y_dim_1", D]  # as TorchScript declares the last output


def _feeds(x_shape: Sequence[int] = (2, 3, D)) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"X": rng.standard_normal(x_shape).astype(np.float32)}]


def _rms(out_dims: Sequence[int | str]) -> onnx.ModelProto:
    nodes = [node("Pow", ["X", "two"], ["p"]), node("ReduceMean", ["p", "axes"], ["m"]),
             node("Add", ["m", "eps"], ["a"]), node("Sqrt", ["a"], ["s"]),
             node("Div", ["X", "s"], ["n"]), node("Mul", ["w", "n"], ["Y"])]
    inits = [init("two", 2.0), init("axes", [-1], np.int64), init("eps", 1e-6),
             init("w", np.linspace(0.5, 1.5, D))]
    return model(nodes, [X], [vi("Y", shape=out_dims)], inits, opset=23)


def _layer_norm(out_dims: Sequence[int | str]) -> onnx.ModelProto:
    nodes = [node("ReduceMean", ["X", "axes"], ["m"]), node("Sub", ["X", "m"], ["d"]),
             node("Pow", ["d", "two"], ["p"]), node("ReduceMean", ["p", "axes"], ["v"]),
             node("Add", ["v", "eps"], ["ve"]), node("Sqrt", ["ve"], ["s"]),
             node("Div", ["d", "s"], ["n"]), node("Mul", ["n", "g"], ["ng"]),
             node("Add", ["ng", "b"], ["Y"])]
    inits = [init("axes", [-1], np.int64), init("two", 2.0), init("eps", 1e-5),
             init("g", np.linspace(0.5, 1.5, D)), init("b", np.linspace(-1, 1, D))]
    return model(nodes, [X], [vi("Y", shape=out_dims)], inits, opset=18)


def _gelu(out_dims: Sequence[int | str], half: np.ndarray | float = 0.5,
          x: onnx.ValueInfoProto = X) -> onnx.ModelProto:
    nodes = [node("Div", ["X", "sqrt2"], ["d"]), node("Erf", ["d"], ["e"]),
             node("Add", ["e", "one"], ["t"]), node("Mul", ["X", "t"], ["xt"]),
             node("Mul", ["xt", "half"], ["Y"])]
    inits = [init("sqrt2", 1.4142135), init("one", 1.0), init("half", half)]
    return model(nodes, [x], [vi("Y", shape=out_dims)], inits, opset=20)


@pytest.mark.parametrize(("build", "fusion", "fused"), [
    pytest.param(_rms, RMSNormFusion, "RMSNormalization", marks=needs_opset(23)),
    (_layer_norm, LayerNormFusion, "LayerNormalization"),
    (_gelu, GeluFusion, "Gelu"),
], ids=["rms", "layer-norm", "gelu"])
def test_a_graph_output_declared_under_other_symbols_fuses(build, fusion, fused) -> None:
    source = build(DECLARED)
    graph = load(source)
    assert count_rewrites(fusion, graph) == 1
    operators = {op: n for op, n in histogram(graph).items() if op not in ("Const", "Data",
                                                                           "NetOutput")}
    assert operators == {fused: 1}  # all of it (a layer norm's bias Add too)
    assert_sound(graph, source, _feeds(), exact=False)


def test_a_size_known_on_one_side_only_still_refuses() -> None:
    """X [batch, 16] times a constant 0.5 of shape [2, 1]: the result is [2, 16] whatever
    batch is (1 broadcasts to 2), which one Gelu of X cannot give."""
    x = vi("X", shape=["batch", D])
    source = _gelu([2, D], half=np.full((2, 1), 0.5), x=x)
    graph = load(source)
    assert count_rewrites(GeluFusion, graph) == 0
    assert "Gelu" not in histogram(graph)


def test_same_known_dims() -> None:
    assert same_known_dims(["batch", "seq", 16], ["Mul_Y_dim_0", "Mul_Y_dim_1", 16])
    assert same_known_dims([2, "s"], [2, "t"])
    assert not same_known_dims(["batch", 16], [2, 16])  # a size on one side only
    assert not same_known_dims([2, 16], [3, 16])
    assert not same_known_dims(["b", 16], ["b", 16, 1])  # another rank
