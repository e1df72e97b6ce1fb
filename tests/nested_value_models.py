"""Small models whose inputs or outputs are sequences, maps or optionals, built with
onnx.helper (each passes onnx's full checker): the kinds sklearn converters, SplitToSequence
and optional inputs give `ge.session`."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T = TensorProto
ML = "ai.onnx.ml"


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], *, opset: int = 17, ml: bool = False,
           initializers: list[onnx.TensorProto] | None = None, name: str = "g"
           ) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(ML, 3)] if ml else [])
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers or [])
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def seq_float(name: str, shape: list[Any] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_sequence_value_info(name, T.FLOAT, shape)


def sequence_identity(shape: list[Any] | None = None) -> onnx.ModelProto:
    """seq(tensor(float) [2]) x -> Identity -> y (`shape` the elements' shape)."""
    shape = [2] if shape is None else shape
    return _model([helper.make_node("Identity", ["x"], ["y"])], [seq_float("x", shape)],
                  [seq_float("y", shape)])


def sequence_concat() -> onnx.ModelProto:
    """seq(tensor(float) [n]) x -> ConcatFromSequence(axis 0) -> y float32 [?]: takes a
    ragged sequence."""
    return _model([helper.make_node("ConcatFromSequence", ["x"], ["y"], axis=0)],
                  [seq_float("x", ["n"])],
                  [helper.make_tensor_value_info("y", T.FLOAT, [None])])


def split_to_sequence() -> onnx.ModelProto:
    """x float32 [3], split int64 [2] -> SplitToSequence -> y: ragged with split [1, 2]."""
    return _model([helper.make_node("SplitToSequence", ["x", "split"], ["y"], axis=0)],
                  [helper.make_tensor_value_info("x", T.FLOAT, [3]),
                   helper.make_tensor_value_info("split", T.INT64, [2])],
                  [seq_float("y", None)])


def optional_input() -> onnx.ModelProto:
    """optional(tensor(float) [2]) x -> has (bool), y (x as it is)."""
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(T.FLOAT, [2]))
    return _model([helper.make_node("OptionalHasElement", ["x"], ["has"]),
                   helper.make_node("Identity", ["x"], ["y"])],
                  [helper.make_value_info("x", opt)],
                  [helper.make_tensor_value_info("has", T.BOOL, []),
                   helper.make_value_info("y", opt)], opset=18)


def dict_vectorizer() -> onnx.ModelProto:
    """map(string, tensor(float)) d -> DictVectorizer(a, b, c) -> * 2 -> y float32 [1, 3]."""
    value = helper.make_tensor_type_proto(T.FLOAT, None)
    return _model([helper.make_node("DictVectorizer", ["d"], ["v"], domain=ML,
                                    string_vocabulary=["a", "b", "c"]),
                   helper.make_node("Mul", ["v", "two"], ["y"])],
                  [helper.make_value_info("d", helper.make_map_type_proto(T.STRING, value))],
                  [helper.make_tensor_value_info("y", T.FLOAT, [1, 3])], ml=True,
                  initializers=[numpy_helper.from_array(np.array(2.0, np.float32), "two")])


def zipmap(scale: float = 1.0, *, reciprocal: bool = True) -> onnx.ModelProto:
    """X float32 [N, 3] -> X * Reciprocal(S) -> Softmax -> ZipMap(0, 1, 2) -> Y:
    seq(map(int64, tensor(float))), as sklearn classifiers converted with ZipMap give their
    probabilities. `scale` multiplies S (another model, to compare with); without
    `reciprocal`, X / S: what ReciprocalMulFusion makes of it, a last bit off."""
    s = numpy_helper.from_array(np.array([3.0, 7.0, 11.0], np.float32) * scale, "S")
    scaled = ([helper.make_node("Reciprocal", ["S"], ["r"]),
               helper.make_node("Mul", ["X", "r"], ["q"])] if reciprocal
              else [helper.make_node("Div", ["X", "S"], ["q"])])
    maps = helper.make_sequence_type_proto(
        helper.make_map_type_proto(T.INT64, helper.make_tensor_type_proto(T.FLOAT, None)))
    return _model([*scaled, helper.make_node("Softmax", ["q"], ["p"]),
                   helper.make_node("ZipMap", ["p"], ["Y"], domain=ML,
                                    classlabels_int64s=[0, 1, 2])],
                  [helper.make_tensor_value_info("X", T.FLOAT, ["N", 3])],
                  [helper.make_value_info("Y", maps)], ml=True, initializers=[s])


def zipmap_inputs(rows: int = 64) -> dict[str, np.ndarray]:
    return {"X": np.random.default_rng(0).standard_normal((rows, 3)).astype(np.float32)}
