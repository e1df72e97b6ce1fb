"""`ge.ops.functions`: which model-local functions onnx cannot type, and ge's typing of
their calls (whole-model inference, strict or not, and `infer_node` on one call).
Compiling such models: tests/compiler/test_compile_function_bodies.py."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from onnx import helper, numpy_helper

from function_models import (
    CUSTOM,
    LOCAL,
    bias_gelu_model,
    function_model,
    nested_model,
    widen_model,
)
from ge.errors import ShapeInferenceError
from ge.graph import Graph, Node, load
from ge.graph.tensor_desc import TensorDesc
from ge.ops import infer_node, infer_shapes, register_op, unregister_op
from ge.ops.functions import opaque_functions
from ge.ops.registry import InferContext


@pytest.fixture
def widen() -> Iterator[None]:
    """com.example.fn::Widen in the process-wide table for the test."""
    def infer(ctx: InferContext) -> list[TensorDesc]:
        dims = list(ctx.input_descs[0].get_shape())
        return [TensorDesc([*dims[:-1], dims[-1] * 2], data_type=ctx.input_descs[0].data_type)]

    register_op("Widen", domain=CUSTOM, inputs=["x", "y"], outputs=["z"], infer=infer,
                kernel=lambda x, y: np.concatenate([x, y], axis=-1))
    try:
        yield
    finally:
        unregister_op("Widen", CUSTOM)


def _call(graph: Graph) -> Node:
    return next(n for n in graph.get_all_nodes() if n.type == "F")


def _dims(graph: Graph, op_type: str) -> list[int | str]:
    node = next(n for n in graph.get_all_nodes() if n.type == op_type)
    return list(node.get_output_desc(0).get_shape())


def test_opaque_functions() -> None:
    """A body of standard operators is onnx's to type; one using a custom or onnxruntime
    operator, or an `ai.onnx.ml` one ge types (Scaler), is not, nor is a function calling
    such a function."""
    standard = function_model([helper.make_node("Add", ["x", "y"], ["z"])], body_domain="")
    assert opaque_functions(standard.functions) == set()
    assert opaque_functions(widen_model().functions) == {(LOCAL, "F", "")}
    assert opaque_functions(bias_gelu_model().functions) == {(LOCAL, "F", "")}
    assert opaque_functions(nested_model().functions) == {(LOCAL, "F", ""), (LOCAL, "G", "")}
    scaler = function_model([helper.make_node("Scaler", ["x"], ["z"], domain="ai.onnx.ml",
                                              scale=[2.0, 2.0, 2.0])],
                            body_domain="ai.onnx.ml")
    assert opaque_functions(scaler.functions) == {(LOCAL, "F", "")}


@pytest.mark.parametrize("strict", [False, True])
def test_whole_model_inference_types_the_call(widen: None, strict: bool) -> None:
    """Non-strict, the call was "custom operator local::F is not registered"; strict,
    onnx refused the Sigmoid reading it. Both type it by Widen's inference now."""
    graph = load(widen_model())
    infer_shapes(graph, strict=strict)
    assert _dims(graph, "F") == [2, 6]
    assert _dims(graph, "Sigmoid") == [2, 6]


def test_infer_node_types_a_call() -> None:
    """`infer_node` on a call (a pass re-inferring one) types it from its body; a body of
    standard operators too, which was "not registered" before."""
    graph = load(function_model([helper.make_node("Add", ["x", "y"], ["s"]),
                                 helper.make_node("Transpose", ["s"], ["z"])],
                                body_domain="", out_shape=[3, 2]))
    descs = infer_node(_call(graph))
    assert descs is not None and list(descs[0].get_shape()) == [3, 2]


def test_unregistered_operator_in_a_body() -> None:
    """Without Widen registered: GE1305 naming the call, the function and the operator;
    the call stays untyped."""
    graph = load(widen_model())
    with pytest.raises(ShapeInferenceError) as caught:
        infer_shapes(graph)
    assert caught.value.message == (
        "node 'call' calls model-local function local.F, whose body cannot be typed: unnamed "
        "com.example.fn.Widen node (computing 'c'): custom operator com.example.fn::Widen is "
        "not registered; a plugin registers it with ge.ops.register_op (its shape inference, "
        "and a kernel or a decomposition to run it)")
    assert caught.value.nodes == ("call",)
    assert not _call(graph).has_output_desc(0)


def test_a_rejected_body_names_the_call(widen: None) -> None:
    """Widen given float and int64 inputs that its body's Add cannot take: onnx's error,
    with the call and the function named."""
    model = function_model([helper.make_node("Add", ["x", "y"], ["s"]),
                            helper.make_node("Widen", ["s", "y"], ["z"], domain=CUSTOM)],
                           out_shape=[2, 6])
    model.graph.input[1].type.tensor_type.elem_type = 7  # int64
    with pytest.raises(ShapeInferenceError) as caught:
        infer_shapes(load(model))
    assert caught.value.message.startswith(
        "node 'call' calls model-local function local.F, whose body cannot be typed: ")
    assert "Add" in caught.value.message


def test_a_call_onnx_does_not_inline(widen: None) -> None:
    """A function importing another opset of ONNX's domain than the model: onnx's inliner
    leaves the call, and GE1305 says why (typing it would ask for the call again)."""
    model = widen_model()
    for opset in model.opset_import:
        if opset.domain == "":
            opset.version = 18
    with pytest.raises(ShapeInferenceError) as caught:
        infer_shapes(load(model))
    assert caught.value.message == (
        "node 'call' calls model-local function local.F, which onnx's inliner does not "
        "inline (function local.F imports opset 17 of domain '', the model 18), so ge "
        "cannot type its body (when a conversion to a newer opset than its functions import "
        "made that so, inline them first: ge compile --inline-functions, "
        "ge.compile(inline_functions=True))")


def test_a_constant_input_reaches_the_body_with_its_value(widen: None) -> None:
    """F(x, shape) = Widen(Reshape(x, shape), Reshape(x, shape)) called with the constant
    shape [3, 2]: the body's Reshape reads it, so the call is [3, 4]."""
    body = [helper.make_node("Reshape", ["x", "y"], ["r"]),
            helper.make_node("Widen", ["r", "r"], ["z"], domain=CUSTOM)]
    model = function_model(body, out_shape=[3, 4])
    model.graph.input.pop()  # b becomes a constant
    model.graph.initializer.append(numpy_helper.from_array(np.array([3, 2], np.int64), "b"))
    graph = load(model)
    infer_shapes(graph, strict=True)
    assert _dims(graph, "F") == [3, 4]
