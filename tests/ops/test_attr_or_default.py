"""`ge.ops.get_attr_or_default(node, name)`: an attribute as set, else its operator's
default at the node's opset, in the form `get_attr` gives (trial EE, an onnxscript user,
looked for `get_int(name, default)` and wrote the defaults by hand). Neither set nor
defaulted is one GraphError naming the node and why."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.errors import GraphError
from ge.graph import load
from ge.ops import get_attr_or_default, register_op, unregister_op


def _nodes(opset: int = 20) -> dict[str, object]:
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["g"]),
         helper.make_node("LayerNormalization", ["g", "s"], ["n"], epsilon=1e-6),
         helper.make_node("Transpose", ["n"], ["t"]),
         helper.make_node("ConstantOfShape", ["shape"], ["c"]),
         helper.make_node("AddCustom", ["t", "t"], ["y"], domain="com.example")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones(3, np.float32), "s"),
         numpy_helper.from_array(np.array([2], np.int64), "shape")]),
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.example", 1)])
    graph = load(model)
    return {n.type: n for n in graph.get_direct_nodes()}


@pytest.fixture
def custom():
    register_op("AddCustom", domain="com.example", inputs=["x", "y"], outputs=["z"],
                attributes={"alpha": ("float", 1.5)}, infer=lambda ctx: [ctx.input_descs[0]],
                kernel=lambda x, y, alpha: x + alpha * y)
    yield
    unregister_op("AddCustom", "com.example")


def test_a_set_attribute_is_read_and_an_absent_one_defaults(custom) -> None:
    nodes = _nodes()
    assert get_attr_or_default(nodes["LayerNormalization"], "epsilon") == pytest.approx(1e-6)
    assert get_attr_or_default(nodes["LayerNormalization"], "axis") == -1  # the default
    assert get_attr_or_default(nodes["Gelu"], "approximate") == "none"  # a str, not bytes
    assert get_attr_or_default(nodes["AddCustom"], "alpha") == 1.5  # a registered op's


@pytest.mark.parametrize(("op", "name", "why"), [
    ("Transpose", "perm", "has no attribute 'perm', and it has no default (the operator "
                          "gives its absence a meaning of its own)"),
    ("ConstantOfShape", "value", "has no attribute 'value', and it has no default"),
    ("Gelu", "axis", "has no attribute 'axis': its operator has no such attribute "
                     "(its attributes: approximate)"),
])
def test_neither_set_nor_defaulted_is_one_graph_error(op: str, name: str, why: str) -> None:
    node = _nodes()[op]
    with pytest.raises(GraphError) as caught:
        get_attr_or_default(node, name)
    assert caught.value.code == "GE1001" and tuple(caught.value.nodes) == (node.name,)
    # (the model gives it no name: named by what it computes, not by ge's name for it)
    computed = node.get_output_name(0)
    assert f"[GE1001] unnamed {op} node (computing {computed!r}) {why}" in str(caught.value)
    assert not node.has_attr(name)  # (nothing set on the way)
