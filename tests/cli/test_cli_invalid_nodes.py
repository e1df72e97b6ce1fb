"""Models onnx's checker and onnxruntime both refuse are refused by ge too, the same with
and without --verify, and by `ge.compile`; nothing is written (trial Q: each compiled
silently, one into another model: a one-input Concat with `axis="zero"` was dropped as an
identity, while --verify failed GE1601 on the original)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import refused_compile
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ge
from ge.cli import cli
from ge.errors import GeError
from sample_models import add_relu_neg_model

pytestmark = pytest.mark.builtin_passes  # (the pass that removed the Concat runs)


def _concat(attr_type: int | None = None, **attrs: object) -> onnx.ModelProto:
    m = add_relu_neg_model()
    node = h.make_node("Concat", ["a"], ["y"], name="relu", **attrs)
    if attr_type is not None:
        node.attribute[0].type = attr_type  # type: ignore[assignment]
    m.graph.node[1].CopyFrom(node)
    return m


def _empty_output() -> onnx.ModelProto:
    m = add_relu_neg_model()
    m.graph.node[2].output[0] = ""
    m.graph.output.pop()
    return m


def _loop_body_reads_nothing() -> onnx.ModelProto:
    """A Loop whose body's Constant reads a name nothing defines."""
    body = h.make_graph(
        [h.make_node("Constant", ["nobody_makes_this"], ["one"], name="one",
                     value=nh.from_array(np.array(1.0, np.float32))),
         h.make_node("Add", ["v", "one"], ["v2"], name="inc"),
         h.make_node("Identity", ["c"], ["c2"], name="keep")], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("v", T.FLOAT, [])],
        [h.make_tensor_value_info("c2", T.BOOL, []), h.make_tensor_value_info("v2", T.FLOAT, [])])
    g = h.make_graph([h.make_node("Loop", ["n", "", "v0"], ["v"], name="loop", body=body)], "g",
                     [h.make_tensor_value_info("n", T.INT64, []),
                      h.make_tensor_value_info("v0", T.FLOAT, [])],
                     [h.make_tensor_value_info("v", T.FLOAT, [])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _wrong_value_info() -> onnx.ModelProto:
    m = add_relu_neg_model()
    m.graph.value_info.append(h.make_tensor_value_info("a", T.INT64, [9, 9]))
    return m


def _sequence_input() -> onnx.ModelProto:
    m = add_relu_neg_model()
    m.graph.input[0].type.sequence_type.elem_type.tensor_type.elem_type = T.FLOAT
    return m


GIVEN = "ge: [GE1003] {path}: graph is invalid (1 problem(s)): graph g: "
CHECKER = "onnx-checker: {node}: onnx's checker refuses it, and so do runtimes: "
MISMATCH = "type field and data field mismatch in attribute axis"
CASES = {
    "attr_string_for_int": (_concat(axis="zero"), GIVEN + "attribute: attribute 'axis' of "
                            "Concat node 'relu' is STRING; Concat (opset 17) takes INT"),
    "attr_type_field_mismatch": (_concat(onnx.AttributeProto.FLOAT, axis=0),
                                 GIVEN + CHECKER.format(node="Concat node 'relu'") + MISMATCH),
    # (refused at load, before the check of the model as given: ge.graph.declared_types)
    "attr_type_undefined": (_concat(onnx.AttributeProto.UNDEFINED, axis=0), (
        "ge: [GE1101] {path}: graph 'g': Concat node 'relu': attribute 'axis' is declared "
        "with type UNDEFINED (0): an attribute's type says which field holds its value "
        "(onnx's checker and onnxruntime refuse it: \"type field and data field mismatch\")")),
    "empty_output_name": (_empty_output(), GIVEN + CHECKER.format(node="Neg node 'neg'")
                          + "Node (neg)'s output 0 is marked single but has an empty string "
                          "in the graph"),
    "loop_body_dangling": (_loop_body_reads_nothing(), (
        "ge: [GE1003] {path}: graph is invalid (1 problem(s)): graph body, body of Loop node "
        "'loop': " + CHECKER.format(node="Constant node 'one'")
        + "Node(one) with schema(::Constant:13) has input size 1 not in range [min=0, max=0]")),
    "value_info_wrong": (_wrong_value_info(), (
        "ge: [GE1305] {path}: shape inference of graph 'g' failed: (op_type:Add, node name: "
        "add): [TypeInferenceError] Inferred elem type differs from existing elem type: (1) "
        "vs (7): the node computes float32, the model declares int64 for that value (a graph "
        "output's or a value_info's type) (stage InferShape)")),
    "input_two_types": (_sequence_input(), (
        "ge: [GE1305] {path}: shape inference of graph 'g' failed: [ShapeInferenceError] "
        "(op_type:Add, node name: add): A typestr: T, has unsupported type: seq(tensor(float)); "
        "its inputs: seq(float32), float32[2, 3] (stage InferShape)")),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("verify", [False, True], ids=["plain", "verify"])
def test_a_model_the_checker_and_onnxruntime_refuse_is_refused(
        name: str, verify: bool, tmp_path: Path) -> None:
    model, expected = CASES[name]
    source, exit_code, stderr = refused_compile(model, tmp_path, verify=verify)
    assert exit_code == 1
    assert stderr == expected.format(path=source) + "\n"


@pytest.mark.parametrize("name", list(CASES))
def test_ge_compile_refuses_it_alike(name: str, tmp_path: Path) -> None:
    model, expected = CASES[name]
    code = expected.split("[")[1].split("]")[0]
    for verify in (False, True):
        with pytest.raises(GeError) as caught:
            ge.compile(model, verify=verify)
        assert caught.value.code == code
        assert caught.value.message.split(": ", 1)[1].split(" (stage")[0] in \
            expected.format(path="the model")
    assert list(tmp_path.iterdir()) == []


def test_ge_run_refuses_a_node_the_checker_refuses(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    onnx.save(CASES["attr_string_for_int"][0], source)
    result = CliRunner().invoke(cli, ["run", str(source)])
    assert result.exit_code == 1
    assert result.stderr == CASES["attr_string_for_int"][1].format(path=source) + "\n"
