"""Models with sparse constants (sparse initializers, `Constant`s of a `sparse_value`) for
the tests of compiling, converting, inspecting and saving them, and onnxruntime runs to
compare their outputs with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

F = onnx.TensorProto.FLOAT
node = helper.make_node


def sparse(name: str, dense: np.ndarray, *, coordinates: bool = False
           ) -> onnx.SparseTensorProto:
    """`dense` in sparse form: its nonzero values, with their positions in the flattened
    tensor ([NNZ]) or, with `coordinates`, one row of coordinates each ([NNZ, rank])."""
    flat = dense.reshape(-1)
    where = np.flatnonzero(flat)
    indices = (np.stack(np.unravel_index(where, dense.shape), axis=1) if coordinates
               else where).astype(np.int64)
    return helper.make_sparse_tensor(numpy_helper.from_array(flat[where], name),
                                     numpy_helper.from_array(indices, name + "_indices"),
                                     list(dense.shape))


def vi(name: str, dims: list[int] | None, elem_type: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, dims)


def sparse_model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
                 outputs: list[onnx.ValueInfoProto],
                 sparse_initializers: list[onnx.SparseTensorProto] = (),
                 initializers: list[onnx.TensorProto] = (),
                 functions: list[onnx.FunctionProto] = (), opset: int = 17,
                 check: bool = True) -> onnx.ModelProto:
    """A model of graph "g" at `opset` (and "mydomain" 1 with `functions`), checked by onnx's
    checker unless not to `check` (not its full check: its inference refuses sparse
    initializers)."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers),
                              sparse_initializer=list(sparse_initializers))
    opsets = [helper.make_opsetid("", opset)]
    if functions:
        opsets.append(helper.make_opsetid("mydomain", 1))
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    if check:
        onnx.checker.check_model(model)
    return model


def dense_with_zeros(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A float tensor of `shape` with about 60% zeros (the first and last elements not)."""
    rng = np.random.default_rng(seed)
    value = rng.standard_normal(shape).astype(np.float32)
    value[rng.random(shape) < 0.6] = 0
    flat = value.reshape(-1)
    flat[0], flat[-1] = 1.5, -2.0
    return value


def function_with_sparse_branch(indices: list[int]) -> onnx.ModelProto:
    """A model calling a model-local function whose If takes a then_branch adding a sparse
    `Constant` of `indices` (values 2 and 1.5, dims [4]) to the function's input (user
    trial UU: unsorted indices there were neither noted nor sorted)."""
    k = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.0, 1.5], np.float32), "k"),
        numpy_helper.from_array(np.array(indices, np.int64), "k_indices"), [4])
    then = helper.make_graph([node("Constant", [], ["k"], name="sparse_k", sparse_value=k),
                              node("Add", ["a", "k"], ["t"], name="add")], "then_body", [],
                             [vi("t", None)])
    other = helper.make_graph([node("Identity", ["a"], ["e"], name="same")], "else_body", [],
                              [vi("e", None)])
    f = helper.make_function(
        "mydomain", "f", ["c", "a"], ["b"],
        [node("If", ["c"], ["b"], name="cond_if", then_branch=then, else_branch=other)],
        [helper.make_opsetid("", 17)])
    graph = helper.make_graph([node("f", ["c", "x"], ["y"], domain="mydomain", name="call")],
                              "g", [vi("c", [], onnx.TensorProto.BOOL), vi("x", [4])],
                              [vi("y", [4])])
    return helper.make_model(graph, functions=[f], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("mydomain", 1)])


def run_ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """`model`'s outputs on `feeds` in onnxruntime (CPU)."""
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, feeds)
