"""A graph output declared with sizes its inputs contradict (`[1, 5, 4]` for a value the
`[batch, seq, 4]` inputs make `[batch, seq, 4]`: an export given dynamic axes for its
inputs only) is inferred from the inputs: onnx took the declared sizes over its own, and
a `Size` of the output read inside the graph was folded to 20 at every size (trial S).
The compiler warns, and writes the declared type back as it was. A declared size contradicted
by another size (`[1, 3]` for `[3, 1]`) is GE1305 at InferShape: onnx's checker rejects it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import CompileWarning
from ge.testing import make_model

pytestmark = pytest.mark.builtin_passes  # ConstantFolding would fold the Size

F = TensorProto.FLOAT


def _traced_output(declared: list[int | str]) -> onnx.ModelProto:
    """x [B, S, 4] -> Relu -> hid (a graph output declared `declared`) -> mean = sum / Size."""
    nodes = [helper.make_node("Relu", ["x"], ["hid"], name="relu"),
             helper.make_node("ReduceSum", ["hid"], ["tot"], name="sum", keepdims=0),
             helper.make_node("Size", ["hid"], ["count"], name="size"),
             helper.make_node("Cast", ["count"], ["countf"], name="cast", to=F),
             helper.make_node("Div", ["tot", "countf"], ["mean"], name="mean")]
    return make_model(nodes, [("x", ["B", "S", 4])], [("hid", declared), ("mean", [])],
                      name="traced")


def _mean(model: onnx.ModelProto, batch: int, seq: int) -> float:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # (the declared [1, 5, 4] is contradicted: a warning)
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    x = np.ones((batch, seq, 4), np.float32)
    return float(session.run(["mean"], {"x": x})[0])


def test_an_output_declared_with_traced_sizes_is_inferred_from_the_inputs(
        tmp_path: Path) -> None:
    source = _traced_output([1, 5, 4])
    with pytest.warns(CompileWarning, match=r"graph output 'hid' is declared \[1, 5, 4\] but "
                                            r"its inputs give \[B, S, 4\]: the passes take "
                                            r"\[B, S, 4\]"):
        result = ge.compile(source, verify=True, dims={"B": 1, "S": 5})
    out = tmp_path / "out.onnx"
    result.save(out)
    saved = onnx.load(out)
    assert "Size" in {n.op_type for n in saved.graph.node}  # not folded to 20
    assert saved.graph.output[0].type == source.graph.output[0].type  # written back
    for batch, seq in ((1, 5), (3, 7), (2, 1)):
        assert _mean(saved, batch, seq) == _mean(source, batch, seq) == 1.0


@pytest.mark.parametrize("declared", [["B", "S", 4], ["batch", "seq", 4], ["B", None, 4]])
def test_outputs_declared_consistently_say_nothing(declared: list[int | str]) -> None:
    """Other symbols (TorchScript names outputs' dims its own way) and unknown dims are no
    contradiction; an unknown dim inference names stays named."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        result = ge.compile(_traced_output(declared))
    relu = result.graph.find_node_by_name("relu")
    assert list(relu.get_output_desc(0).get_shape()) == ["B", "S", 4]


DROP_ADD = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="DropAdd", stage=PassStage.BEFORE_INFER_SHAPE)
class DropAdd(FusionBasePass):
    def run(self, graph, context):
        add = graph.find_node_by_name("add")
        x, index = add.get_in_data_nodes_and_port_indexes(0)
        graph.replace_all_uses(add, 0, x, index)
        graph.remove_node(add)
"""


def test_a_contradiction_a_pass_made_names_the_pass(tmp_path: Path) -> None:
    """Trial O: GE's AddZero sample drops an Add that broadcasts, before inference; the
    output then contradicts its declared [1, 3] and the warning told the user to export
    with dynamic axes. It names the pass upstream instead. A declared size contradicted by
    another size is refused at InferShape (trial S: it was a warning, and the model was
    refused only when saved, since onnx's checker rejects it)."""
    nodes = [helper.make_node("Add", ["x", "zeros"], ["t"], name="add"),
             helper.make_node("Flatten", ["t"], ["y"], name="flat", axis=1)]
    model = make_model(nodes, [("x", [3])], [("y", [1, 3])],
                       [onnx.numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "zeros")])
    plugin = tmp_path / "drop_add.py"
    plugin.write_text(DROP_ADD)
    with pytest.raises(ge.errors.ShapeInferenceError) as caught:
        ge.compile(model, pass_paths=[plugin])
    err = caught.value
    assert err.code == "GE1305" and err.stage == "InferShape"
    assert str(err.args[0]) == (
        "graph output 'y' is declared [1, 3] but its inputs give [3, 1] (dim 0: 1 declared, "
        "3 computed by Flatten node 'flat'): onnx's checker rejects a model whose output "
        "contradicts its declared size, so ge cannot write it; before inference, node 'flat' "
        "was last changed by pass DropAdd (BeforeInferShape): that pass may have changed "
        "the output's shape")
    assert list(tmp_path.iterdir()) == [plugin]


ADD_TO_IDENTITY = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="AddToIdentity", stage=PassStage.BEFORE_INFER_SHAPE)
class AddToIdentity(FusionBasePass):
    def run(self, graph, context):
        add = graph.find_node_by_name("add")
        src, i = add.get_in_data_nodes_and_port_indexes(0)
        identity = graph.add_node("Identity", num_inputs=1, name="ident")
        graph.add_data_edge(src, i, identity, 0)
        graph.replace_all_uses(add, 0, identity, 0)
        graph.remove_node(add)
"""


def test_a_built_in_pass_is_not_blamed_for_a_contradiction_it_found(tmp_path: Path) -> None:
    """Trial R: a plugin turned a broadcasting Add into an Identity before inference, so
    the output [B, 1] contradicts its declared [B, 4]; NoOpElimination then removed the
    Identity and failed as "a bug in ge" for rewiring an output to a value of another
    shape, which it had before. The compilation stops at InferShape, before any built-in
    pass, naming the plugin and the output as the model writes it ('y')."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "b"], ["y"], name="add")]
    model = make_model(nodes, [("x", ["B", 1])], [("y", ["B", 4])],
                       [onnx.numpy_helper.from_array(np.ones((1, 4), np.float32), "b")])
    plugin = tmp_path / "add_to_identity.py"
    plugin.write_text(ADD_TO_IDENTITY)
    with pytest.raises(ge.errors.ShapeInferenceError) as caught:
        ge.compile(model, pass_paths=[plugin])
    message = str(caught.value.args[0])
    assert message.startswith(
        "graph output 'y' is declared [B, 4] but its inputs give [B, 1] (dim 1: 4 declared, "
        "1 computed by Identity node 'ident')")
    assert "node 'ident' was last changed by pass AddToIdentity (BeforeInferShape)" in message
    assert "NoOpElimination" not in message and caught.value.stage == "InferShape"


def contradicting_block() -> onnx.ModelProto:
    """x [batch, seq, 8] -> MatMul by w [8, 4] -> Identity -> logits, declared
    [batch, seq, 16] (trial S's Llama block declared 128 for 64)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="lm_head"),
             helper.make_node("Identity", ["h"], ["logits"], name="out_logits")]
    graph = helper.make_graph(  # (not ge.testing.make_model: onnx's full check refuses it)
        nodes, "block", [helper.make_tensor_value_info("x", F, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("logits", F, ["batch", "seq", 16])],
        [onnx.numpy_helper.from_array(np.ones((8, 4), np.float32), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_input_model_whose_output_contradicts_its_declared_size_is_refused_at_once(
        ) -> None:
    """Trial S: a Llama block declaring its logits [batch, seq, 128] where its lm_head gives
    [batch, seq, 64] was warned about ("the declared type is written back as it is"), ran
    the whole pipeline, and failed when saved (GE1003, naming lm_head's MatMul after the
    output's Identity was removed): ge.compile succeeded and only result.save failed. It is
    GE1305 at InferShape now (the command line: tests/cli/test_cli_compile_models.py)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)  # (no warning first)
        with pytest.raises(ge.errors.ShapeInferenceError, match=(
                r"^\[GE1305\] graph output 'logits' is declared \[batch, seq, 16\] but its "
                r"inputs give \[batch, seq, 4\] \(dim 2: 16 declared, 4 computed by Identity "
                r"node 'out_logits'\): .* correct the output's declared type in the model "
                r"\(stage InferShape\)$")):
            ge.compile(contradicting_block())
