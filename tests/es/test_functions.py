"""One function per ONNX operator; signatures follow the builder's opset (opset_scope)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import defs

import ge.es.all
import ge.es.custom
import ge.es.math
import ge.es.nn
import ge.es.onnx
from ge.errors import OpAttributeError, OpInputError
from ge.es import GraphBuilder, attr_scope, control_dependency_scope, opset_scope
from ge.es import onnx as ops
from ge.graph import DataType
from ge.ops import evaluate_node, register_op, unregister_op
from scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_every_onnx_schema_has_a_function() -> None:
    """Every operator of every domain onnx.defs knows has a function in its namespace and in
    ge.es.all; the standard set also in the GE-style math/nn namespaces."""
    by_domain: dict[str, set[str]] = {}
    for schema in defs.get_all_schemas_with_history():
        by_domain.setdefault(schema.domain, set()).add(schema.name)
    namespaces = {"": [ge.es.onnx, ge.es.math, ge.es.nn], "ai.onnx.ml": [ge.es.ml],
                  "ai.onnx.preview": [ge.es.preview],
                  "ai.onnx.preview.training": [ge.es.training]}
    assert set(by_domain) <= set(namespaces), f"domains without a namespace: {set(by_domain)}"
    for domain, names in by_domain.items():
        for module in [*namespaces[domain], ge.es.all]:
            missing = sorted(n for n in names if not callable(getattr(module, n, None)))
            assert not missing, f"{module.__name__} lacks {missing}"
    assert ge.es.math.MatMul is ge.es.onnx.MatMul
    assert ge.es.all.Binarizer is ge.es.ml.Binarizer


def test_opset_scope_selects_signatures() -> None:
    with opset_scope({"": 13}):
        b13 = GraphBuilder("b13")
    assert b13.opset_imports == {"": 13}
    x = b13.create_input(0, shape=[4, 6])
    parts = ops.Split(x, [2, 4], axis=1)  # split is an input at 13
    assert [list(p._get_node_snapshot().get_output_desc(i).shape) for i, p in enumerate(parts)
            ] == [[4, 2], [4, 4]]
    with pytest.raises(OpInputError, match="num_outputs="):
        ops.Split(x, axis=1)  # 13 has no num_outputs attribute: the count is unknown
    assert list(ops.ReduceSum(x, [1], keepdims=0)._get_node_snapshot()
                .get_output_desc(0).shape) == [4]
    by_keyword = ops.ReduceSum(x, axes=[1])._get_node_snapshot()  # an input at 13
    assert by_keyword.get_inputs_size() == 2 and not by_keyword.has_attr("axes")
    with pytest.raises(OpAttributeError, match=r"ReduceSum \(opset 13\) got an unknown attribute"):
        ops.ReduceSum(x, axis=[1])
    assert b13.build_and_reset([parts[0]]).opset_imports == {"": 13}

    b11 = GraphBuilder("b11", opset=11)
    y = b11.create_input(0, shape=[4, 6])
    assert len(ops.Split(y, split=[3, 3], axis=1)) == 2  # an attribute at 11
    assert ops.ReduceSum(y, axes=[1])._get_node_snapshot().get_attr("axes") == [1]
    b18 = GraphBuilder("b18", opset=18)
    z = b18.create_input(0, shape=[4, 6])
    parts = ops.Split(z, axis=1, num_outputs=3)
    assert parts[0]._get_node_snapshot().get_attr("num_outputs") == 3
    assert list(parts[2]._get_node_snapshot().get_output_desc(2).shape) == [4, 2]


def test_optional_outputs_only_when_asked() -> None:
    b = GraphBuilder("opt", opset=17)
    x = b.create_input(0, shape=[2, 4])
    scale = b.create_const_float([1.0] * 4)
    single = ops.LayerNormalization(x, scale)
    assert single._get_node_snapshot().get_outputs_size() == 1
    _, mean, inv = ops.LayerNormalization(x, scale, num_outputs=3)
    assert mean.output_index == 1 and inv.output_index == 2
    assert ops.Dropout(x)._get_node_snapshot().get_outputs_size() == 1


def test_constants_scopes_and_holders() -> None:
    b = GraphBuilder(None, opset=17)
    assert b.name == "graph"
    c = b.create_const_float([[0.1, 0.1], [0.1, 0.1]])
    assert list(c._get_node_snapshot().get_output_desc(0).shape) == [2, 2]
    assert b.create_const_int64([1, 2, 3]).get_owner_builder() is b
    x = b.create_input(0)  # (no shape: `0 + x` adds an int64 to a float, quietly here)
    assert x.name == "input_0"
    zero_plus = 0 + x
    node = zero_plus._get_node_snapshot()
    assert node.type == "Add" and node.get_in_data_nodes()[0] is x._get_node_snapshot()
    one_minus = 1 - x
    assert one_minus._get_node_snapshot().get_in_data_nodes()[1] is x._get_node_snapshot()
    i64 = (x + [[1, 2], [3, 4]])._get_node_snapshot().get_in_data_nodes()[1]  # noqa: RUF005
    assert i64.get_attr("value").data_type == DataType.DT_INT64
    with control_dependency_scope([c]), attr_scope({"_stream": 1}), attr_scope({"_label": "in"}):
        r = ops.Relu(x)._get_node_snapshot()
    assert r.get_attr("_stream") == 1 and r.get_attr("_label") == "in"
    assert r.get_in_control_nodes() == [c._get_node_snapshot()]
    x.set_shape([2, 2]).set_data_type(DataType.DT_FLOAT)


def test_custom_operator_functions_and_evaluation() -> None:
    def infer(ctx):  # type: ignore[no-untyped-def]
        return [ctx.input_descs[0]]

    def decompose(a, b):  # type: ignore[no-untyped-def]
        return ops.Add(a, b)

    register_op("AddCustom", domain="test.es", inputs=["x", "y"], outputs=["z"], infer=infer,
                decomposition=decompose)
    try:
        from ge.es.custom import AddCustom

        b = GraphBuilder("custom", opset=17)
        x = b.create_const_float([1.0, 2.0])
        out = AddCustom(x, [10.0, 20.0])
        node = out._get_node_snapshot()
        assert node.domain == "test.es" and list(node.get_output_desc(0).shape) == [2]
        assert ge.es.all.AddCustom.__name__ == "AddCustom"
        (value,) = evaluate_node(node)
        np.testing.assert_allclose(value.numpy(), [11.0, 22.0])
        assert b.build_and_reset([out]).opset_imports == {"": 17, "test.es": 1}
    finally:
        unregister_op("AddCustom", "test.es")
    with pytest.raises(AttributeError, match="no custom operator AddCustom"):
        ge.es.custom.AddCustom  # noqa: B018


def test_checked_in_stubs_are_current(tmp_path: Path) -> None:
    header = (ROOT / "src/ge/es/onnx.pyi").read_text(encoding="utf-8").splitlines()[1]
    made_with = re.search(r"from onnx (\S+) ", header)
    if made_with is not None and made_with[1] != onnx.__version__:  # (what it was made from)
        pytest.skip(f"the stubs were generated from onnx {made_with[1]}; onnx "
                    f"{onnx.__version__} is installed, whose operators may differ")
    module = load_script(ROOT / "tools/gen_es_stubs.py", "gen_es_stubs")
    module.main(["gen_es_stubs", str(tmp_path)])
    for name in ("onnx.pyi", "math.pyi", "nn.pyi", "all.pyi"):
        checked_in = (ROOT / "src/ge/es" / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == checked_in, (
            f"src/ge/es/{name} is stale: run .venv/bin/python tools/gen_es_stubs.py")
