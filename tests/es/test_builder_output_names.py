"""`build_and_reset(outputs, names=...)` names the ONNX graph outputs (trial YY: a graph built
with the builder had outputs `logits:0` and `Add_79:0`, with no way to name them), as
`create_input(name=)` names the inputs; a name that cannot be given changes nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from ge.errors import BuilderTypeError, BuilderValueError
from ge.es import GraphBuilder, TensorHolder
from ge.es.onnx import Add, MatMul, Relu
from ge.graph import DataType


def _built(names: list[str | None] | None) -> tuple[GraphBuilder, list[TensorHolder]]:
    builder = GraphBuilder("named", opset=17)
    x = builder.create_input(0, name="x", data_type=DataType.DT_FLOAT, shape=[2, 3])
    h = MatMul(x, builder.create_const(np.ones((3, 4), np.float32)), name="mm")
    r = Relu(h)
    return builder, [Add(r, h), r, x]


def test_the_outputs_get_the_names_given(tmp_path: Path) -> None:
    builder, (y, r, _) = _built(None)
    graph = builder.build_and_reset([y, r, r], names=["logits", None, None])
    path = tmp_path / "named.onnx"
    graph.save(path)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output][:2] == ["logits", "Relu:0"]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits = session.run(["logits"], {"x": np.ones((2, 3), np.float32)})[0]
    assert np.array_equal(logits, np.full((2, 4), 6.0, np.float32))


@pytest.mark.parametrize(("names", "error", "message"), [
    (["logits"], BuilderValueError, "names has 1 name(s) for 2 output(s)"),
    ("logits", BuilderTypeError, "names must be a list of str (or None), got str"),
    (["", None], BuilderTypeError, "names[0] must be a non-empty str or None, got ''"),
    (["x", None], BuilderValueError, "names[0] 'x' is already a value of the graph"),
    (["same", "same"], BuilderValueError, "names[1] 'same' is already a value of the graph"),
])
def test_a_name_that_cannot_be_given_changes_nothing(
        names: object, error: type[Exception], message: str) -> None:
    builder, (y, r, _) = _built(None)
    with pytest.raises(error) as caught:
        builder.build_and_reset([y, r], names=names)  # type: ignore[arg-type]
    assert caught.value.message == message
    graph = builder.build_and_reset([y, r])  # the builder as it was: nothing renamed
    assert [n.get_output_names() for n in graph.get_direct_nodes() if n.type != "Const"] == [
        ["x"], ["mm:0"], ["Relu:0"], ["Add:0"], []]


def test_a_graph_input_or_one_value_under_two_names_is_refused() -> None:
    builder, (y, _, x) = _built(None)
    with pytest.raises(BuilderValueError) as caught:
        builder.build_and_reset([y, x], names=[None, "out"])
    assert caught.value.message == ("output 1 is graph input 'x', whose name is the input's: "
                                    "name it with create_input(name=)")
    builder, (y, _, _) = _built(None)
    with pytest.raises(BuilderValueError) as caught:
        builder.build_and_reset([y, y], names=["a", "b"])
    assert caught.value.message == ("output 1 is the value of another output named 'a': one "
                                    "value has one name")
