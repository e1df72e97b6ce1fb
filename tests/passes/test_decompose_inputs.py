"""A DecomposePass replacement has one input per distinct producer of the node's inputs
(GE's rule, spec §6.5). A replacement written per input position fails on a node whose
inputs share a producer or are absent; its GE1502 names the positions and where each one
goes. The mapping documented in docs/passes.md works for every form of the node."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from matcher_helpers import assert_same_outputs, const, load, model, op_counts
from onnx import helper

from ge.compiler import compile_graph
from ge.errors import PassRunError
from versions import needs_runtime

Write = Callable[[str, str], Path]
ROOT = Path(__file__).resolve().parents[2]

PER_POSITION = """\
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, register_decompose_pass


@register_decompose_pass(name="D", stage="AfterInferShape", op_types=["{op_type}"])
class D(DecomposePass):
    def replacement(self, node):
        builder = GraphBuilder("per_position")
        ins = builder.create_inputs({count})
        return builder.build_and_reset([es.Identity(ins[0])])
"""


def _fails(write: Write, op_type: str, count: int, proto) -> PassRunError:
    path = write("plugin.py", PER_POSITION.format(op_type=op_type, count=count))
    graph = load(proto)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as info:
        compile_graph(graph, pass_paths=[path])
    err = info.value
    assert err.code == "E13028" and err.pass_name == "D" and err.stage == "AfterInferShape"
    assert err.location is not None and err.location.line == 8  # the replacement's def
    assert graph.to_onnx().SerializeToString() == before  # rolled back
    return err


def _reason(err: PassRunError) -> str:
    return err.message.split(" Reason: ", 1)[1]


def _layer_norm(inputs: list[str], opset: int = 17):
    return model([helper.make_node("LayerNormalization", inputs, ["y"], name="ln")],
                 [("x", [2, 4])], [("y", [2, 4])],
                 [const("s", [0.5, -1.0, 2.0, 1.5]), const("b", [0.1, 0.2, 0.3, 0.4])],
                 opset=opset)


def test_inputs_sharing_a_producer_are_named_with_their_boundary_input(write: Write) -> None:
    err = _fails(write, "LayerNormalization", 3, _layer_norm(["x", "s", "s"]))
    assert _reason(err) == (
        "RewriteError: [GE1502] replacement 'per_position' has 3 input(s) but the region it "
        "replaces has 2: inputs 1 and 2 of LayerNormalization node 'ln' read the same value 's', "
        "so they are one boundary input (node input -> replacement input: 0 -> 0, 1 -> 1, "
        "2 -> 1); create one Data per boundary input (builder.create_inputs(2): the values "
        "node 'ln' reads, in input order: 'x':0, 's':0).")


def test_three_positions_of_one_value(write: Write) -> None:
    proto = model([helper.make_node("Sum", ["x", "x", "x"], ["y"], name="sum")],
                  [("x", [2, 4])], [("y", [2, 4])])
    err = _fails(write, "Sum", 3, proto)
    assert _reason(err) == (
        "RewriteError: [GE1502] replacement 'per_position' has 3 input(s) but the region it "
        "replaces has 1: inputs 0, 1 and 2 of Sum node 'sum' read the same value 'x', so they "
        "are one boundary input (node input -> replacement input: 0 -> 0, 1 -> 0, 2 -> 0); "
        "create one Data per boundary input (builder.create_inputs(1): the values node 'sum' "
        "reads, in input order: 'x':0).")


def test_an_absent_input_is_named_and_the_later_ones_move_down(write: Write) -> None:
    proto = model([helper.make_node("Clip", ["x", "", "hi"], ["y"], name="clip")],
                  [("x", [2, 4])], [("y", [2, 4])], [const("hi", 1.0)])
    err = _fails(write, "Clip", 3, proto)
    assert _reason(err) == (
        "RewriteError: [GE1502] replacement 'per_position' has 3 input(s) but the region it "
        "replaces has 2: input 1 of Clip node 'clip' is absent, so it has no boundary input "
        "(node input -> replacement input: 0 -> 0, 1 -> none, 2 -> 1); create one Data per "
        "boundary input (builder.create_inputs(2): the values node 'clip' reads, in input order: "
        "'x':0, 'hi':0).")


def test_a_node_the_model_gives_no_name_is_named_by_what_it_computes(write: Write) -> None:
    """ge's name for it ('Clip') is in no file: the reason names it as the model does."""
    proto = model([helper.make_node("Clip", ["x", "", "hi"], ["y"])],
                  [("x", [2, 4])], [("y", [2, 4])], [const("hi", 1.0)])
    err = _fails(write, "Clip", 3, proto)
    assert _reason(err) == (
        "RewriteError: [GE1502] replacement 'per_position' has 3 input(s) but the region it "
        "replaces has 2: input 1 of unnamed Clip node (computing 'y') is absent, so it has no "
        "boundary input (node input -> replacement input: 0 -> 0, 1 -> none, 2 -> 1); create "
        "one Data per boundary input (builder.create_inputs(2): the values unnamed Clip node "
        "(computing 'y') reads, in input order: 'x':0, 'hi':0).")
    assert tuple(err.nodes) == ("Clip",)  # (ge's names, for dumps)


def test_shared_and_absent_inputs_together(write: Write) -> None:
    proto = model([helper.make_node("Clip", ["x", "", "x"], ["y"], name="clip")],
                  [("x", [])], [("y", [])])
    err = _fails(write, "Clip", 3, proto)
    assert ("has 3 input(s) but the region it replaces has 1: inputs 0 and 2 of Clip node "
            "'clip' read the same value 'x', so they are one boundary input; input 1 of Clip "
            "node 'clip' is absent, so it has no boundary input (node input -> replacement input: "
            "0 -> 0, 1 -> none, 2 -> 0)") in err.message


def test_a_node_whose_inputs_map_one_to_one_gets_no_mapping(write: Write) -> None:
    err = _fails(write, "LayerNormalization", 2, _layer_norm(["x", "s", "b"]))
    assert _reason(err) == (
        "RewriteError: [GE1502] replacement 'per_position' has 2 input(s) but the region it "
        "replaces has 3; create one Data per boundary input (builder.create_inputs(3): the "
        "values node 'ln' reads, in input order: 'x':0, 's':0, 'b':0).")


def _documented(name: str) -> str:
    text = (ROOT / "docs" / "passes.md").read_text()
    (body,) = re.findall(rf"```python\n# my_passes/{re.escape(name)}\n(.*?)```", text, re.S)
    return body


@pytest.mark.parametrize("inputs", [["x", "s", "s"], ["x", "s", "b"], ["x", "s"], pytest.param(
    ["x", "x", "s"], marks=needs_runtime("1.24", "refuses a LayerNormalization whose scale "
                                                 "has X's shape, not the normalised one"))])
@pytest.mark.parametrize("opset", [17, 18])  # ReduceMean's axes: an attribute, then an input
def test_the_documented_mapping_decomposes_every_form(write: Write, inputs: list[str],
                                                      opset: int) -> None:
    path = write("decompose_layer_norm.py", _documented("decompose_layer_norm.py"))
    proto = _layer_norm(inputs, opset)
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert [r.rewrites for r in report.records if r.pass_name == "DecomposeLayerNorm"] == [1]
    assert "LayerNormalization" not in op_counts(graph)
    assert_same_outputs(proto, graph)
