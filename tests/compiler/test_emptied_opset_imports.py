"""A compilation that removes the last node of a custom domain drops that domain's opset
import (`ge.compiler.opset_imports`): a decomposition of `my.ops.AddCustom` into ONNX's Add
leaves no `my.ops` behind. What the input imported without using it is kept (saving loses
nothing the input had), and so are ONNX's domains and what a model-local function uses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import VerificationError
from ge.graph import load

Write = Callable[[str, str], Path]

DECOMPOSE = """\
import numpy as np
from ge.es import GraphBuilder
from ge.ops import register_op
from ge.passes import DecomposePass, infer_shape, register_decompose_pass

register_op("AddCustom", domain="my.ops", inputs=["x", "y"], outputs=["z"],
            infer=lambda ctx: [ctx.input_descs[0]],
            kernel=lambda x, y: np.add(x, y).astype(x.dtype))


@register_decompose_pass(name="DecomposeAddCustom", stage="AfterOriginGraphOptimize",
                         op_types=["my.ops.AddCustom"])
class DecomposeAddCustom(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("add")
        x, y = b.create_inputs(2)
        g = b.build_and_reset([x {op} y])
        infer_shape(g, node)
        return g
"""

_F = TensorProto.FLOAT


def _model(*, function: bool = False) -> onnx.ModelProto:
    """x + y by `my.ops.AddCustom`, then Relu; `unused.ops` imported, no node of it. With
    `function`, the model also defines `my.funcs.Twice`, whose body is an AddCustom (no node
    calls it)."""
    nodes = [helper.make_node("AddCustom", ["x", "y"], ["s"], domain="my.ops", name="add"),
             helper.make_node("Relu", ["s"], ["out"], name="relu")]
    functions = []
    imports = [helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1),
               helper.make_opsetid("unused.ops", 1)]
    if function:
        functions = [helper.make_function(
            "my.funcs", "Twice", ["a"], ["b"],
            [helper.make_node("AddCustom", ["a", "a"], ["b"], domain="my.ops")],
            [helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)])]
        imports.append(helper.make_opsetid("my.funcs", 1))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", _F, [2, 3]),
                                           helper.make_tensor_value_info("y", _F, [2, 3])],
                              [helper.make_tensor_value_info("out", _F, [2, 3])])
    return helper.make_model(graph, opset_imports=imports, functions=functions)


def _imports(model: onnx.ModelProto) -> dict[str, int]:
    return {op.domain: op.version for op in model.opset_import}


def test_a_domain_the_passes_emptied_is_no_longer_imported(write: Write) -> None:
    plugin = write("decompose.py", DECOMPOSE.format(op="+"))
    result = ge.compile(_model(), pass_paths=[plugin], verify=True)
    saved = result.to_onnx()
    assert [n.op_type for n in saved.graph.node] == ["Add", "Relu"]
    assert _imports(saved) == {"": 17, "unused.ops": 1}  # the input's unused one is kept
    onnx.checker.check_model(saved, full_check=True)
    x, y = np.ones((2, 3), np.float32), np.full((2, 3), -3.0, np.float32)
    (out,) = ort.InferenceSession(saved.SerializeToString()).run(None, {"x": x, "y": y})
    np.testing.assert_array_equal(out, np.maximum(x + y, 0))


def test_a_domain_a_model_local_function_uses_stays_imported(write: Write) -> None:
    plugin = write("decompose.py", DECOMPOSE.format(op="+"))
    saved = ge.compile(_model(function=True), pass_paths=[plugin]).to_onnx()
    assert [n.op_type for n in saved.graph.node] == ["Add", "Relu"]
    assert _imports(saved) == {"": 17, "my.ops": 1, "unused.ops": 1, "my.funcs": 1}
    onnx.checker.check_model(saved, full_check=True)


def test_a_compilation_that_fails_gives_the_import_back(write: Write) -> None:
    """`ge.compile` of a Graph works in place and undoes everything when it fails: the
    dropped import too (here the decomposition subtracts, which verification catches)."""
    plugin = write("decompose.py", DECOMPOSE.format(op="-"))
    graph = load(_model())
    before = dict(graph.opset_imports)
    with pytest.raises(VerificationError):
        ge.compile(graph, pass_paths=[plugin], verify=True)
    assert dict(graph.opset_imports) == before
    assert [n.type for n in graph.get_direct_nodes() if n.type == "AddCustom"] == ["AddCustom"]
