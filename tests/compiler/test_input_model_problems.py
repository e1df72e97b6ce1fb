"""A problem the input model already has is not reported as the compilation's: the final
validation's GE1003 says the input has it too (without the advice meant for a pass author),
and the check after a pass does not blame a pass that only rewired the node holding it.
A problem a pass made keeps its advice. Nothing is written either way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.cli import cli
from ge.errors import GraphValidationError, PassRunError
from ge.testing import isolated_plugin_state

# The built-in passes run: constant folding rewires the node with the bad attribute, dead
# code elimination removes one.
pytestmark = pytest.mark.builtin_passes

VERDICT = ("(the input model{where} has this problem too: it is not the compilation's doing; "
           "fix it in the model, or in the exporter that wrote it)")
BOGUS = ("Relu node 'relu' has attribute 'bogus', which Relu (opset 17) does not define; "
         "ONNX runtimes reject it")
ADVICE = "(keep private data in node metadata: Node.set_metadata)"

# A pass that sets an attribute Relu does not define; with `--check none` only the final
# validation sees it.
TAG_RELU = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="TagRelu", stage=PassStage.AFTER_INFER_SHAPE)
class TagRelu(FusionBasePass):
    def run(self, graph, context):
        for relu in graph.nodes_of_type("Relu"):
            relu.set_attr("tagged", 1)
        return True
'''


@pytest.fixture(autouse=True)
def _isolated():
    with isolated_plugin_state():
        yield


def _bad_attribute_model(*, folded_before: bool = False) -> onnx.ModelProto:
    """x -> Relu(bogus=3) -> y; with `folded_before`, the Relu reads x + (c1 + c2), which
    constant folding rewires (the Relu's input is retyped: the check after the pass looks
    at it)."""
    nodes = [helper.make_node("Relu", ["a" if folded_before else "x"], ["y"], name="relu",
                              bogus=3)]
    weights = []
    if folded_before:
        nodes[:0] = [helper.make_node("Add", ["c1", "c2"], ["c"], name="fold"),
                     helper.make_node("Add", ["x", "c"], ["a"], name="add")]
        weights = [numpy_helper.from_array(np.ones(2, np.float32), n) for n in ("c1", "c2")]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _compile_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["compile", *args])
    return result.exit_code, result.stdout, result.stderr


def _final_error(problem: str) -> str:
    return (f"ge: [GE1003] graph is invalid (1 problem(s)): graph g: attribute: {problem} "
            "(stage FinalValidation)\n")


def _given_error(source: Path, problem: str) -> str:
    """A model refused before anything runs (`check_model_as_given`): its file named."""
    return f"ge: [GE1003] {source}: graph is invalid (1 problem(s)): graph g: {problem}\n"


@pytest.mark.parametrize("folded_before", [False, True], ids=["untouched", "rewired"])
@pytest.mark.parametrize("check", ["region", "full"])
def test_the_input_models_own_bad_attribute_is_refused_before_any_pass(
        folded_before: bool, check: str, tmp_path: Path) -> None:
    """onnx's checker refuses the node, and onnxruntime: refused before any pass could
    rewire or remove it, in the final validation's words, without a pass author's advice."""
    source = tmp_path / "model.onnx"
    onnx.save(_bad_attribute_model(folded_before=folded_before), source)
    out = tmp_path / "out.onnx"
    code, _, stderr = _compile_cli(str(source), "-o", str(out), "--check", check)
    assert code == 1
    assert stderr == _given_error(source, f"attribute: {BOGUS}")
    assert "set_metadata" not in stderr and "E13028" not in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]

    code, stdout, _ = _compile_cli(str(source), "-o", str(out), "--check", check, "--json")
    data = json.loads(stdout)
    assert code == 1 and (data["code"], data["stage"]) == ("GE1003", None)
    assert data["nodes"] == ["relu"] and data["path"] == str(source)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_every_way_of_giving_the_model_is_refused_alike(tmp_path: Path) -> None:
    """A path, a proto, a Graph loaded from a file (given back unchanged), a Graph made in
    memory (no file to name)."""
    model = _bad_attribute_model(folded_before=True)
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    loaded = ge.graph.load(source)
    before = loaded.to_onnx().SerializeToString()
    built = ge.graph.load(model.SerializeToString())
    for given in (source, model, loaded, built):
        with pytest.raises(GraphValidationError) as caught:
            ge.compile(given, check="region")
        err = caught.value
        assert (err.code, err.stage, err.nodes) == ("GE1003", None, ("relu",))
        (problem,) = err.problems
        assert problem.message == BOGUS and problem.advice == ""
    assert loaded.to_onnx().SerializeToString() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def _in_memory_bad_attribute() -> ge.graph.Graph:
    """The bad attribute set on a loaded Graph (no file holds it, so only the final
    validation sees it): how a caller's own Graph reaches the input model's verdict."""
    good = _bad_attribute_model()
    del good.graph.node[0].attribute[:]
    graph = ge.graph.load(good)
    graph.find_node_by_name("relu").set_attr("bogus", 3)
    return graph


def test_a_problem_a_pass_made_keeps_its_advice(tmp_path: Path) -> None:
    """With the check after each pass off, the final validation finds what the pass did:
    no verdict there, the advice for the pass's author; the input's own problem beside it
    gets the verdict."""
    plugin = tmp_path / "tag_relu.py"
    plugin.write_text(TAG_RELU)
    good = _bad_attribute_model()
    del good.graph.node[0].attribute[:]
    cases = [(good, []), (_in_memory_bad_attribute(), [f"{BOGUS} {VERDICT.format(where='')}"])]
    for model, input_problems in cases:
        with pytest.raises(GraphValidationError) as caught:
            ge.compile(model, pass_paths=[plugin], check="none")
        texts = [p.text for p in caught.value.problems]
        made = ("Relu node 'relu' has attribute 'tagged', which Relu (opset 17) does not "
                f"define; ONNX runtimes reject it {ADVICE}")
        assert sorted(texts) == sorted([made, *input_problems])
        assert caught.value.stage == "FinalValidation"


def test_a_pass_setting_a_bad_attribute_on_a_bad_node_is_still_blamed(tmp_path: Path
                                                                      ) -> None:
    """The check after a pass skips only the attributes of nodes it did not set any of."""
    plugin = tmp_path / "tag_relu.py"
    plugin.write_text(TAG_RELU)
    with pytest.raises(PassRunError) as caught:
        ge.compile(_in_memory_bad_attribute(), pass_paths=[plugin])
    assert caught.value.code == "E13028" and caught.value.pass_name == "TagRelu"
    assert f"'tagged', which Relu (opset 17) does not define; ONNX runtimes reject it " \
           f"{ADVICE}" in str(caught.value)


def test_a_verdict_that_cannot_be_made_leaves_the_error_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = tmp_path / "tag_relu.py"
    plugin.write_text(TAG_RELU)
    good = _bad_attribute_model()
    del good.graph.node[0].attribute[:]
    source = tmp_path / "model.onnx"
    onnx.save(good, source)

    def unreadable(*args: object, **kwargs: object) -> None:
        raise OSError("gone")

    monkeypatch.setattr(onnx, "load", unreadable)  # the path is loaded again with onnx.load
    with pytest.raises(GraphValidationError) as caught:
        ge.compile(source, pass_paths=[plugin], check="none")
    assert caught.value.stage == "FinalValidation"
    assert "'tagged', which Relu (opset 17) does not define; ONNX runtimes reject it " \
           f"{ADVICE}" in str(caught.value)


def test_verification_does_not_change_the_diagnosis_of_an_invalid_input(
        tmp_path: Path) -> None:
    """With --verify the original would be run first, and onnxruntime refuse the bad
    attribute in its own words (GE1601): the model is refused before, as without it."""
    source = tmp_path / "model.onnx"
    onnx.save(_bad_attribute_model(), source)
    out = tmp_path / "out.onnx"
    plain = _compile_cli(str(source), "-o", str(out))
    verified = _compile_cli(str(source), "-o", str(out), "--verify")
    each_pass = _compile_cli(str(source), "-o", str(out), "--verify=each-pass")
    assert plain[0] == 1 and plain[2] == _given_error(source, f"attribute: {BOGUS}")
    assert verified == plain and each_pass == plain
    errors = []
    for verify in (False, True):
        with pytest.raises(GraphValidationError) as caught:
            ge.compile(source, verify=verify)
        errors.append((caught.value.code, caught.value.stage, caught.value.message))
    assert errors[0] == errors[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_an_invalid_node_a_pass_would_remove_is_refused_with_or_without_verify(
        tmp_path: Path) -> None:
    """The bad node is dead: the compilation would remove it and succeed (it did, exit 0,
    while --verify failed GE1601 on the original): refused either way, nothing written,
    the graph given back unchanged."""
    model = _bad_attribute_model()
    model.graph.node.append(helper.make_node("Relu", ["x"], ["dead"], name="dead", bogus=1))
    del model.graph.node[0].attribute[:]
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    out = tmp_path / "out.onnx"
    dead = "Relu node 'dead' has attribute 'bogus', which Relu (opset 17) does not define; " \
           "ONNX runtimes reject it"
    for verify in ((), ("--verify",)):
        code, _, stderr = _compile_cli(str(source), "-o", str(out), *verify)
        assert code == 1 and stderr == _given_error(source, f"attribute: {dead}")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    graph = ge.graph.load(source)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(GraphValidationError):
        ge.compile(graph, verify=True)
    assert graph.to_onnx().SerializeToString() == before


# A pass that changes the Relu (wires its input anew) without making it invalid.
REWIRE_RELU = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="RewireRelu", stage=PassStage.AFTER_INFER_SHAPE)
class RewireRelu(FusionBasePass):
    def run(self, graph, context):
        for relu in graph.nodes_of_type("Relu"):
            source, index = relu.get_in_data_nodes_and_port_indexes(0)
            graph.remove_edge(source, index, relu, 0)
            graph.add_data_edge(source, index, relu, 0)
        return True
'''


def test_the_json_error_names_the_pass_the_final_validation_blames(tmp_path: Path) -> None:
    """A problem a pass made, found by the final validation (the check after each pass
    off): the message says which pass last changed the node, and --json's pass_name and
    location say it too (pass_name was null); the stage is the step that failed."""
    plugin = tmp_path / "tag_relu.py"
    plugin.write_text(TAG_RELU)
    good = _bad_attribute_model()
    del good.graph.node[0].attribute[:]
    source, out = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(good, source)
    code, stdout, _ = _compile_cli(str(source), "-o", str(out), "--pass-path", str(plugin),
                                   "--check", "none", "--json")
    data = json.loads(stdout)
    assert code == 1 and (data["code"], data["stage"]) == ("GE1003", "FinalValidation")
    assert data["message"].endswith(
        "; node 'relu' was last changed by pass TagRelu (AfterInferShape)")
    assert (data["pass_name"], data["location"]) == ("TagRelu", f"{plugin}:5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "tag_relu.py"]


def test_a_pass_is_not_blamed_for_a_problem_the_input_had(tmp_path: Path) -> None:
    """A pass that only changed the node holding the input's own problem made none: the
    verdict says so, and no pass is named (message, pass_name, location)."""
    plugin = tmp_path / "rewire_relu.py"
    plugin.write_text(REWIRE_RELU)
    with pytest.raises(GraphValidationError) as caught:
        ge.compile(_in_memory_bad_attribute(), pass_paths=[plugin], check="none")
    err = caught.value
    assert (err.code, err.stage) == ("GE1003", "FinalValidation")
    assert err.message.endswith(VERDICT.format(where=""))
    assert "RewireRelu" not in err.message
    assert (err.pass_name, err.location) == (None, None)


def test_a_pass_that_made_a_problem_beside_the_inputs_is_still_blamed(tmp_path: Path
                                                                      ) -> None:
    """The input's problem gets the verdict, the one the pass made keeps its advice, and
    the pass stays named: in the message as without the verdict, as pass_name."""
    plugin = tmp_path / "tag_relu.py"
    plugin.write_text(TAG_RELU)
    with pytest.raises(GraphValidationError) as caught:
        ge.compile(_in_memory_bad_attribute(), pass_paths=[plugin], check="none")
    err = caught.value
    assert err.message.endswith("; node 'relu' was last changed by pass TagRelu "
                                "(AfterInferShape)")
    assert VERDICT.format(where="") in err.message
    assert (err.pass_name, str(err.location)) == ("TagRelu", f"{plugin}:5")
