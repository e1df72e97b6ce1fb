"""`CompileReport.last_changes`: the one record of which pass last changed each node, kept
by every compilation (verifying or not) from the changes each kept pass run made, built-in
passes included; what GE1305, GE1003 and `--verify`'s GE1601 name (their tests are in
test_invalid_models_stopped, test_input_model_problems and test_verify_compiled_unrunnable).
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import helper

import ge
import ge.graph
from ge.compiler.last_changes import Blame, PassChange
from ge.errors import CompileWarning
from ge.testing import make_model
from plugin_fixtures import node_replacing_plugin

SET_ALPHA = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="SetAlpha", stage=PassStage.BEFORE_INFER_SHAPE)
class SetAlpha(FusionBasePass):
    def run(self, graph, context):
        for name in ("leaky1", "leaky2"):
            graph.find_node_by_name(name).set_attr("alpha", 0.2)
"""

# Changes leaky2, then fails: rolled back (on_pass_failure="skip"), it changed nothing.
FAILING = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="Failing", stage=PassStage.AFTER_INFER_SHAPE)
class Failing(FusionBasePass):
    def run(self, graph, context):
        graph.find_node_by_name("leaky2").set_attr("alpha", 0.5)
        raise RuntimeError("changed my mind")
"""


def _model() -> onnx.ModelProto:
    """x -> Identity (id) -> LeakyRelu (leaky1) -> LeakyRelu (leaky2) -> y."""
    return make_model([helper.make_node("Identity", ["x"], ["i"], name="id"),
                       helper.make_node("LeakyRelu", ["i"], ["l1"], name="leaky1"),
                       helper.make_node("LeakyRelu", ["l1"], ["y"], name="leaky2")],
                      [("x", [2])], [("y", [2])])


@pytest.mark.builtin_passes
def test_the_last_pass_to_change_a_node_is_recorded_plugin_or_built_in(
        tmp_path: Path) -> None:
    """SetAlpha changed both LeakyRelus; the built-in NoOpElimination then removed the
    Identity and rewired leaky1, so it changed leaky1 last. The Identity is forgotten (no
    error names a removed node); a node no pass changed has no entry. Without verifying."""
    plugin = tmp_path / "set_alpha.py"
    plugin.write_text(SET_ALPHA)
    graph = ge.graph.load(_model())
    identity, data = graph.find_node_by_name("id"), graph.find_node_by_name("x")
    result = ge.compile(graph, pass_paths=[plugin])
    last = result.report.last_changes
    assert [(r.pass_name, r.stage) for r in result.report.records if r.changed] == [
        ("SetAlpha", "BeforeInferShape"), ("NoOpElimination", "OriginGraphOptimize")]
    leaky1 = last.last_change(graph.find_node_by_name("leaky1"))
    assert leaky1 is not None and (leaky1.pass_name, leaky1.stage) == (
        "NoOpElimination", "OriginGraphOptimize")
    assert last.last_change(graph.find_node_by_name("leaky2")) == PassChange(
        "SetAlpha", "BeforeInferShape", result.report.records[0].location)
    assert str(result.report.records[0].location) == f"{plugin}:5"
    assert last.last_change(identity) is None and identity.owner_graph is None
    assert last.last_change(data) is None
    assert len(last) == 2
    assert "last_changes" not in result.report.as_dict()


def test_blame_names_the_node_or_the_node_it_reads(tmp_path: Path) -> None:
    """What an error about nodes says: the first of them a pass changed; else a node one
    of them reads; None when no pass changed any of them (or none is named)."""
    plugin = tmp_path / "set_alpha.py"
    plugin.write_text(SET_ALPHA)
    result = ge.compile(_model(), pass_paths=[plugin])
    graph, last = result.graph, result.report.last_changes
    blamed = last.blame(graph, ["NetOutput", "leaky2"])
    assert isinstance(blamed, Blame) and blamed.node == "leaky2" and blamed.via is None
    assert blamed.sentence == "; node 'leaky2' was last changed by pass SetAlpha " \
                              "(BeforeInferShape)"
    blamed = last.blame(graph, ["NetOutput"])
    assert blamed is not None and blamed.sentence == (
        "; node 'NetOutput' reads node 'leaky2', last changed by pass SetAlpha "
        "(BeforeInferShape)")
    assert last.blame(graph, ["x"]) is None  # a graph input: nothing changed it
    assert last.blame(graph, []) is None and last.blame(graph, ["no such node"]) is None


def test_a_run_rolled_back_records_nothing(tmp_path: Path) -> None:
    """Under on_pass_failure="skip" the failing pass's changes are undone: the node is
    still the last pass's before it."""
    set_alpha, failing = tmp_path / "set_alpha.py", tmp_path / "failing.py"
    set_alpha.write_text(SET_ALPHA)
    failing.write_text(FAILING)
    with pytest.warns(CompileWarning, match="pass Failing rolled back and skipped"):
        result = ge.compile(_model(), pass_paths=[set_alpha, failing],
                            on_pass_failure="skip")
    leaky2 = result.graph.find_node_by_name("leaky2")
    assert leaky2.get_attr("alpha") == pytest.approx(0.2)
    change = result.report.last_changes.last_change(leaky2)
    assert change is not None and change.pass_name == "SetAlpha"


TRANSPOSE_BACK = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="TransposeBack", stage=PassStage.BEFORE_INFER_SHAPE)
class TransposeBack(FusionBasePass):
    def run(self, graph, context):
        graph.find_node_by_name("t").set_attr("perm", [1, 0])
"""


def test_a_shape_error_further_on_names_the_nearest_change_upstream(tmp_path: Path) -> None:
    """Trial O: a BeforeInferShape pass changed a Transpose; shape inference failed three
    nodes further on, at a MatMul no pass touched, and GE1305 named no pass. It names the
    nearest node upstream a pass changed, how far, and that pass, as a guess."""
    plugin = tmp_path / "transpose_back.py"
    plugin.write_text(TRANSPOSE_BACK)
    model = make_model([helper.make_node("Transpose", ["x"], ["a"], name="t", perm=[0, 1]),
                        helper.make_node("Relu", ["a"], ["b"], name="r"),
                        helper.make_node("Neg", ["b"], ["c"], name="n"),
                        helper.make_node("MatMul", ["c", "w"], ["y"], name="mm")],
                       [("x", [2, 3]), ("w", [3, 4])], [("y", [2, 4])])
    with pytest.raises(ge.errors.ShapeInferenceError) as info:
        ge.compile(model, pass_paths=[plugin])
    err = info.value
    assert err.code == "GE1305"
    assert err.message.endswith(
        "; node 'mm' depends on node 't', 3 nodes upstream, last changed by pass "
        "TransposeBack (BeforeInferShape), the nearest change a pass made upstream (if it "
        "fails with --disable TransposeBack, disable=['TransposeBack'], too, the model does)")
    # a guess (trial R: a model broken by itself was blamed on a harmless pass): the
    # message names the pass, the error's own pass and location stay unset
    assert err.pass_name is None and err.location is None


ID_BEFORE_TANH = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="IdBeforeTanh", stage=PassStage.BEFORE_INFER_SHAPE)
class IdBeforeTanh(FusionBasePass):
    def run(self, graph, context):
        tanh = graph.find_node_by_name("tanh")
        src, index = tanh.get_in_data_nodes_and_port_indexes(0)
        identity = graph.add_node("Identity", num_inputs=1, name="id")
        graph.add_data_edge(src, index, identity, 0)
        graph.remove_edge(src, index, tanh, 0)
        graph.add_data_edge(identity, 0, tanh, 0)
"""


@pytest.mark.parametrize("given_as", ["proto", "bytes"])
def test_a_model_broken_by_itself_is_not_blamed_on_a_harmless_pass(tmp_path: Path,
                                                                   given_as: str) -> None:
    """Trial S: a MatMul of [2, 4] by [5, 3] fails inference whatever the passes do; a pass
    that put an Identity before the Tanh the MatMul reads was named, with certainty. The
    model as given is inferred too when a GE1305 names a pass: it fails, so no pass is
    (the model given as bytes is read again as such)."""
    plugin = tmp_path / "id_before_tanh.py"
    plugin.write_text(ID_BEFORE_TANH)
    model = make_model([helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
                        helper.make_node("MatMul", ["t", "w"], ["y"], name="mm")],
                       [("x", [2, 4]), ("w", [5, 3])], [("y", [2, 3])],
                       check=False)  # (the MatMul's operands do not fit: the point)
    with pytest.raises(ge.errors.ShapeInferenceError) as caught:
        ge.compile(model if given_as == "proto" else model.SerializeToString(),
                   pass_paths=[plugin])
    err = caught.value
    assert err.message.endswith("; the model as given fails shape inference too (at node "
                                "'mm'): it is the model's doing, not a pass's")
    assert "IdBeforeTanh" not in err.message and err.pass_name is None


# Sets the alpha of the first Gemm, which the built-in MatMulAddFusion made.
SCALE_GEMM = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="ScaleGemm", stage=PassStage.AFTER_BUILTIN_FUSION_PASS)
class ScaleGemm(FusionBasePass):
    def run(self, graph, context):
        next(n for n in graph.get_direct_nodes() if n.type == "Gemm").set_attr("alpha", 2.0)
"""

# Replaces Neg by a LeakyRelu it makes ...
MAKE_LEAKY = node_replacing_plugin("MakeLeaky", "neg", "LeakyRelu", "leaky")

# ... whose alpha a later plugin sets.
SET_LEAKY = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="SetLeaky", stage=PassStage.AFTER_BUILTIN_FUSION_PASS)
class SetLeaky(FusionBasePass):
    def run(self, graph, context):
        graph.find_node_by_name("leaky").set_attr("alpha", 0.3)
"""


@pytest.mark.builtin_passes
def test_a_node_one_pass_made_and_another_changed_names_both_and_blames_by_the_rule(
        tmp_path: Path) -> None:
    """The record keeps the pass that made a node beside the one that changed it last; an
    error about it names both and is put down to the maker, unless ge made the node and a
    plugin changed it last (ge's own passes are tested against onnxruntime, the plugin is
    the code under development)."""
    scale, make, set_ = (tmp_path / name for name in ("scale.py", "make.py", "set.py"))
    scale.write_text(SCALE_GEMM)
    make.write_text(MAKE_LEAKY)
    set_.write_text(SET_LEAKY)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
                        helper.make_node("Neg", ["a"], ["y"], name="neg")],
                       [("x", [2, 3]), ("w", [3, 4]), ("b", [4])], [("y", [2, 4])])
    result = ge.compile(model, pass_paths=[scale, make, set_])
    graph, last = result.graph, result.report.last_changes
    gemm = next(n for n in graph.get_direct_nodes() if n.type == "Gemm")
    made = last.maker(gemm)
    assert made is not None and (made.pass_name, made.builtin) == ("MatMulAddFusion", True)
    blamed = last.blame(graph, [gemm.name])
    assert blamed is not None and blamed.cause.pass_name == "ScaleGemm"
    assert blamed.sentence == (
        f"; node {gemm.name!r} was made by pass MatMulAddFusion (BuiltinFusion), last "
        f"changed by pass ScaleGemm (AfterBuiltinFusionPass, at {scale}:5): the likely "
        "cause is pass ScaleGemm, the plugin pass that changed it last")
    blamed = last.blame(graph, ["leaky"])
    assert blamed is not None and blamed.sentence == (
        f"; node 'leaky' was made by pass MakeLeaky (AfterInferShape, at {make}:6), last "
        f"changed by pass SetLeaky (AfterBuiltinFusionPass, at {set_}:5): the likely cause "
        "is pass MakeLeaky, which made it")
    err = ge.errors.GeError("refused")
    blamed.add_to(err)  # (how GE1305 and GE1003 take it)
    assert (err.pass_name, str(err.location)) == ("MakeLeaky", f"{make}:6")
    # a node of the model as given was made by no pass
    assert last.maker(graph.find_node_by_name("x")) is None
