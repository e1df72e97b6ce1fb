"""`--inline-functions` (and onnx's inliner under it) keeps what an exporter wrote on a
call: the inlined nodes are named under the call's name (`/layer.0/mlp/Relu`, not an
anonymous `Relu__3`), carry its metadata (a dynamo export's `namespace`, source
locations) where they set none of their own, and its doc string where they have none;
nested calls nest the names. The written model still computes what the original does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import ge
from ge.ops.functions import inline_local_functions

F = TensorProto.FLOAT
IMPORTS = [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)]


def _tag(node: onnx.NodeProto, **metadata: str) -> onnx.NodeProto:
    for key, value in metadata.items():
        node.metadata_props.add(key=key, value=value)
    return node


def mlp_model() -> onnx.ModelProto:
    """Two calls of MLP(x) = Act(x) * 2, Act(x) = Relu(x) (a nested call); the calls carry
    an exporter's scope name, metadata and doc string, MLP's Mul its own `namespace`."""
    act = helper.make_function("local", "Act", ["X"], ["Y"],
                               [helper.make_node("Relu", ["X"], ["Y"])], IMPORTS)
    two = helper.make_node("Constant", [], ["two"], value_float=2.0)
    mlp = helper.make_function("local", "MLP", ["X"], ["Y"], [
        helper.make_node("Act", ["X"], ["A"], domain="local", name="act"), two,
        _tag(helper.make_node("Mul", ["A", "two"], ["Y"], name="scale"), namespace="own")],
        IMPORTS)
    calls = [_tag(helper.make_node("MLP", [x], [y], domain="local", name=f"/layer.{i}/mlp",
                                   doc_string=f"model.py:{10 + i}"),
                  namespace=f"Model/layer.{i}", **{"pkg.torch.onnx.fx_node": f"%mlp_{i}"})
             for i, (x, y) in enumerate([("x", "h"), ("h", "y")])]
    graph = helper.make_graph(calls, "g", [helper.make_tensor_value_info("x", F, [4])],
                              [helper.make_tensor_value_info("y", F, [4])])
    model = helper.make_model(graph, functions=[act, mlp], opset_imports=IMPORTS)
    onnx.checker.check_model(model, full_check=True)
    return model


def _metadata(node: onnx.NodeProto) -> dict[str, str]:
    return {p.key: p.value for p in node.metadata_props}


def test_inlined_nodes_keep_the_calls_names_metadata_and_doc_strings() -> None:
    nodes = {n.name: n for n in inline_local_functions(mlp_model()).graph.node}
    assert set(nodes) == {f"/layer.{i}/mlp/{rest}" for i in (0, 1)
                          for rest in ("act/Relu", "Constant", "scale")}
    relu, scale = nodes["/layer.1/mlp/act/Relu"], nodes["/layer.1/mlp/scale"]
    assert _metadata(relu) == {"namespace": "Model/layer.1", "pkg.torch.onnx.fx_node": "%mlp_1"}
    assert _metadata(scale) == {"namespace": "own", "pkg.torch.onnx.fx_node": "%mlp_1"}
    assert relu.doc_string == scale.doc_string == "model.py:11"


def test_an_unnamed_call_leaves_the_body_names_alone() -> None:
    model = mlp_model()
    model.graph.node[0].name = ""
    names = sorted(n.name for n in inline_local_functions(model).graph.node)
    assert "/layer.1/mlp/scale" in names and not any(n.startswith("/layer.0") for n in names)


def test_a_compilation_inlining_writes_them(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(mlp_model(), source)
    ge.compile(source, inline_functions=True, verify=True).save(out)
    written = onnx.load(out)
    assert not written.functions
    relus = [n for n in written.graph.node if n.op_type == "Relu"]
    assert [n.name for n in relus] == ["/layer.0/mlp/act/Relu", "/layer.1/mlp/act/Relu"]
    assert [_metadata(n)["namespace"] for n in relus] == ["Model/layer.0", "Model/layer.1"]
    x = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)
    run = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"x": x})
           for p in (source, out)]
    np.testing.assert_array_equal(run[0][0], run[1][0])
