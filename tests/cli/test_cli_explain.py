"""`ge passes explain PASS MODEL`: why a pattern pass does or does not match, as text and
JSON, and its one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import RELU_NEG
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from ge.cli import cli
from model_paths import shared_model

VIT = str(shared_model("vit_tiny"))
Q_PROJ_ADD = "/model/layers.0/attention/q_proj/Add"



def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.builtin_passes
def test_matmul_add_on_vit_says_meet_requirements_refuses_the_3d_matmuls() -> None:
    code, out, err = _run("passes", "explain", "MatMulAddFusion", VIT, "--top", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("MatMulAddFusion (pattern_fusion, BuiltinFusion, built-in) on ")
    assert ("pattern MatMulAddFusion_matmul_add_pattern (graph main_graph): anchor 'Add' "
            "(Add), 5 pattern node(s); 19 candidate(s), 0 would be rewritten") in lines
    assert "  closest partial matches (top 2 of 19):" in lines
    first = next(line for line in lines if line.startswith("    1. "))
    assert first == (
        f"    1. '{Q_PROJ_ADD}': depth 5/5: meet_requirements returned False: the pass "
        "refuses this match (the pass says: MatMul's operands are not both 2-D (a batched "
        "or vector MatMul): Gemm takes 2-D A and B); its inputs: input_0 float[1, 17, 48], "
        "input_1 float[48, 48], input_2 float[48]")
    assert "      bound: " in out and "MatMul=/model/layers.0/attention/q_proj/MatMul" in out
    assert err == ""


@pytest.mark.builtin_passes
def test_matmul_add_on_vit_as_json() -> None:
    code, out, _ = _run("passes", "explain", "MatMulAddFusion", VIT, "--json", "--top", "3")
    assert code == 0
    payload = json.loads(out)
    assert payload["pass"] == "MatMulAddFusion" and payload["kind"] == "pattern_fusion"
    assert payload["shape_inference"] == "ok" and payload["warnings"] == []
    assert payload["opsets"] == {"": 17}
    (pattern,) = payload["patterns"]
    assert pattern["anchor"] == {"node": "Add", "type": "Add", "domain": ""}
    assert (pattern["candidates"], pattern["rewrite_count"], pattern["not_rewritten"]) == (
        19, 0, 19)
    assert len(pattern["closest"]) == 3
    best = pattern["closest"][0]
    assert best["candidate"] == Q_PROJ_ADD and best["depth"] == best["size"] == 5
    assert best["matched"] and not best["rewritten"]
    assert best["reason"]["kind"] == "meet_requirements"
    assert best["reason"]["details"]["inputs"] == {
        "input_0": "float[1, 17, 48]", "input_1": "float[48, 48]", "input_2": "float[48]"}
    assert {"pattern_node": "MatMul", "pattern_type": "MatMul",
            "target": "/model/layers.0/attention/q_proj/MatMul",
            "output": None} in best["bindings"]
    # the Adds that are not a MatMul's bias get a structural reason
    code, out, _ = _run("passes", "explain", "MatMulAddFusion", VIT, "--json", "--top", "19")
    kinds = {c["reason"]["kind"] for c in json.loads(out)["patterns"][0]["closest"]}
    assert kinds == {"meet_requirements", "op_type"}


@pytest.mark.builtin_passes
def test_node_option_explains_one_node() -> None:
    matmul = "/model/layers.0/attention/q_proj/MatMul"
    code, out, _ = _run("passes", "explain", "MatMulAddFusion", VIT, "--node", matmul)
    assert code == 0
    assert f"'{matmul}' (MatMul) is not a candidate" in out
    assert f"1. '{Q_PROJ_ADD}' (binds the node as a non-anchor): depth 5/5" in out
    code, out, _ = _run("passes", "explain", "MatMulAddFusion", VIT, "--node", Q_PROJ_ADD,
                        "--json")
    (pattern,) = json.loads(out)["patterns"]
    assert pattern["node"] == Q_PROJ_ADD and pattern["note"] is None
    assert [(c["candidate"], c["role"]) for c in pattern["closest"]] == [(Q_PROJ_ADD, "anchor")]


@pytest.mark.builtin_passes
def test_a_pass_without_patterns_for_the_model_says_so() -> None:
    code, out, _ = _run("passes", "explain", "GeluFusion", VIT)
    assert code == 0
    assert "GeluFusion has no patterns for this model: patterns() returned none at opsets " \
           "ai.onnx=17 (GeluFusion fuses into Gelu, an ONNX operator from opset 20: --opset 20 " \
           "explains the model as ge compile --opset 20 converts it)" in out
    code, out, _ = _run("passes", "explain", "SwishFusion", VIT)  # off by default: says so
    assert code == 0
    assert "(SwishFusion fuses into Swish, an ONNX operator from opset 24: --opset 24 " \
           "explains the model as ge compile --opset 24 converts it; the pass is off by " \
           "default: ge compile --enable SwishFusion runs it)" in out


def test_a_plugin_pass_from_pass_path(write, tmp_path: Path) -> None:
    plugin = write("plugins/relu_neg.py", RELU_NEG)
    model = tmp_path / "m.onnx"
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="abs"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    code, out, _ = _run("passes", "explain", "ReluNeg", str(model), "--pass-path", str(plugin))
    assert code == 0
    assert ("    1. 'relu': depth 1/3: op type: pattern node 'Neg' (Neg) wants Neg, target node "
            "'abs' is Abs (input 0 of 'relu')") in out.splitlines()


NO_AXIS = """\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="NoAxis", stage=PassStage.AFTER_INFER_SHAPE)
class NoAxis(PatternFusionPass):
    @pattern
    def cat(self, inputs):
        return es.Concat(inputs[0], inputs[1])

    def replacement(self, inputs):
        return es.Concat(inputs[0], inputs[1], axis=0)
"""


def test_a_pattern_the_builder_refuses_is_told_at_its_line(write) -> None:
    """Trial AK: a pattern's Concat without its required axis was GE1304 with no file or
    line from explain, where a compilation gave the E13028 at the pattern's line."""
    plugin = write("plugins/no_axis.py", NO_AXIS)
    code, out, err = _run("passes", "explain", "NoAxis", VIT, "--pass-path", str(plugin))
    assert code == 1 and out == ""
    assert err.strip() == ("ge: [GE1304] Concat (opset 17): required attribute(s) missing: "
                           f"axis (at {plugin}:9)")


def test_listing_and_explaining_in_process_leave_no_plugin_registered(
        write, tmp_path: Path) -> None:
    """An embedder (or a test) explains one plugin file, then lists and explains another
    with the same pass name, then compiles: each command unloads what it loaded."""
    from ge.passes.registry import get_registered_passes

    first = write("one/relu_neg.py", RELU_NEG)
    second = write("two/relu_neg.py", RELU_NEG.replace("es.Relu(inputs[0])\n",
                                                       "es.Neg(inputs[0])\n"))
    model = tmp_path / "m.onnx"
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Relu", ["n"], ["y"])]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    for plugin in (first, second):
        code, out, err = _run("passes", "explain", "ReluNeg", str(model), "--pass-path",
                              str(plugin))
        assert code == 0, err
        assert f"ReluNeg (pattern_fusion, AfterInferShape, {plugin}:" in out
        code, out, err = _run("passes", "list", "--pass-path", str(plugin), "--json")
        assert code == 0, err
        (listed,) = [p for p in json.loads(out)["passes"] if p["name"] == "ReluNeg"]
        assert listed["origin"]["file"] == str(plugin)
        assert get_registered_passes() == []
    code, _, err = _run("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                        "--pass-path", str(second))
    assert code == 0, err
    assert [n.op_type for n in onnx.load(tmp_path / "out.onnx").graph.node] == ["Neg"]


def test_failed_shape_inference_is_a_warning_and_the_explanation_goes_on(
        write, tmp_path: Path) -> None:
    plugin = write("plugins/relu_neg.py", RELU_NEG)
    model = tmp_path / "bad.onnx"
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Neg", ["m"], ["n"], name="neg"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    w = numpy_helper.from_array(np.ones((4, 5), np.float32), "w")
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    code, out, err = _run("passes", "explain", "ReluNeg", str(model), "--pass-path", str(plugin))
    assert code == 0
    assert err.startswith("ge: warning: shape inference failed, explaining the untyped graph")
    assert "[GE1305]" in err
    assert "rewrite at 'relu': neg, relu" in out
    code, out, _ = _run("passes", "explain", "ReluNeg", str(model), "--pass-path", str(plugin),
                        "--json")
    payload = json.loads(out)
    assert payload["shape_inference"].startswith("[GE1305]")
    assert [w["category"] for w in payload["warnings"]] == ["CompileWarning"]


@pytest.mark.builtin_passes
def test_unknown_pass_lists_the_known_ones() -> None:
    code, out, err = _run("passes", "explain", "NoSuchPass", VIT)
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("ge: [GE1701] unknown pass 'NoSuchPass'; known passes: ")
    assert "MatMulAddFusion" in err and "LayerNormFusion" in err


@pytest.mark.builtin_passes
def test_a_fusion_base_pass_cannot_be_explained() -> None:
    code, _, err = _run("passes", "explain", "ConstantFolding", VIT)
    assert code == 1
    assert err == ("ge: [GE1701] pass 'ConstantFolding' is a FusionBasePass (fusion_base), not "
                   "a pattern or decompose pass: its run() finds what it changes itself, so it "
                   "cannot be explained; what it changed: ge diff MODEL OUT after a compile, "
                   "or ge compile MODEL -o OUT --dump DIR --dump-level ConstantFolding (its "
                   "graph after it ran), and --verify each-pass checks its numbers\n")
    code, out, _ = _run("passes", "explain", "ConstantFolding", VIT, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["code"] == "GE1701" and data["message"].startswith(
        "pass 'ConstantFolding' is a FusionBasePass (fusion_base), not a pattern or decompose")


@pytest.mark.builtin_passes
def test_unknown_node_is_one_line_and_json() -> None:
    code, _, err = _run("passes", "explain", "MatMulAddFusion", VIT, "--node", "q_proj/MatMul")
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith("ge: [GE1701] graph 'main_graph' has no node named 'q_proj/MatMul'; "
                          "did you mean '/model/layers.0/attention/q_proj/MatMul'")
    code, out, err = _run("passes", "explain", "MatMulAddFusion", VIT, "--node", "nope",
                          "--json")
    assert code == 1 and err == ""
    data = json.loads(out)
    assert data["code"] == "GE1701" and data["nodes"] == ["nope"]


def test_a_missing_model_is_one_line(write, tmp_path: Path) -> None:
    plugin = write("plugins/relu_neg.py", RELU_NEG)
    code, _, err = _run("passes", "explain", "ReluNeg", str(tmp_path / "none.onnx"),
                        "--pass-path", str(plugin))
    assert code == 1 and err.startswith("ge: [GE1102] model file not found")


LATE_RELU = RELU_NEG.replace("AFTER_INFER_SHAPE", "AFTER_ORIGIN_GRAPH_OPTIMIZE").replace(
    '"ReluNeg"', '"LateReluNeg"')


def test_a_pass_after_the_builtins_is_explained_with_a_warning_naming_the_dump(
        tmp_path: Path) -> None:
    """The pass would see the graph the built-in passes made; explain says so on stderr and
    names the dump to explain instead, and still explains MODEL."""
    plugin = tmp_path / "late.py"
    plugin.write_text(LATE_RELU)
    code, out, err = _run("passes", "explain", "LateReluNeg", VIT, "--pass-path", str(plugin))
    assert code == 0, err
    assert out.startswith("LateReluNeg (pattern_fusion, AfterOriginGraphOptimize, ")
    assert err == (
        "ge: warning: LateReluNeg runs at AfterOriginGraphOptimize, after the built-in passes "
        "changed the graph; this explains MODEL as shape inference leaves it. To explain what "
        "the pass sees: ge compile MODEL -o OUT --dump DIR, then ge passes explain LateReluNeg "
        "DIR/ge_*_OriginGraphOptimize.onnx\n")
    early = tmp_path / "early.py"
    early.write_text(RELU_NEG)
    code, _, err = _run("passes", "explain", "ReluNeg", VIT, "--pass-path", str(early))
    assert code == 0 and err == "", err
    # MODEL already is that dump: nothing to warn about.
    dump = tmp_path / "ge_0012_OriginGraphOptimize.onnx"
    shutil.copy(VIT, dump)
    code, _, err = _run("passes", "explain", "LateReluNeg", str(dump), "--pass-path",
                        str(plugin))
    assert code == 0 and err == "", err


def _channels_first_layer_norm(path: Path) -> Path:
    """ConvNeXt's LayerNorm(data_format="channels_first"): the mean and variance over axis 1
    of an NCHW value, in primitives (opset 17: ReduceMean's axes an attribute)."""
    c = 8
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("ReduceMean", ["x"], ["mean"], name="mean", axes=[1]),
             helper.make_node("Sub", ["x", "mean"], ["d"], name="sub"),
             helper.make_node("Pow", ["d", "two"], ["sq"], name="pow"),
             helper.make_node("ReduceMean", ["sq"], ["var"], name="var", axes=[1]),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
             helper.make_node("Sqrt", ["ve"], ["std"], name="sqrt"),
             helper.make_node("Div", ["d", "std"], ["n"], name="div"),
             helper.make_node("Mul", ["n", "gamma"], ["scaled"], name="mul"),
             helper.make_node("Add", ["scaled", "beta"], ["y"], name="add_beta")]
    inits = [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             numpy_helper.from_array(np.ones((c, 1, 1), np.float32), "gamma"),
             numpy_helper.from_array(np.zeros((c, 1, 1), np.float32), "beta")]
    graph = helper.make_graph(nodes, "ln_cf", [vi("x", TensorProto.FLOAT, [1, c, 4, 4])],
                              [vi("y", TensorProto.FLOAT, [1, c, 4, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.builtin_passes
def test_the_layer_norm_refusal_says_why(tmp_path: Path) -> None:
    """The trial's most common LayerNorm miss in vision models: the whole norm matched and
    explain said only "meet_requirements returned False"; the pass now says why."""
    model = _channels_first_layer_norm(tmp_path / "ln_cf.onnx")
    code, out, err = _run("passes", "explain", "LayerNormFusion", str(model), "--top", "1")
    assert code == 0, err
    first = next(line for line in out.splitlines() if line.startswith("    1. "))
    assert "meet_requirements returned False: the pass refuses this match (the pass says: " \
        "ReduceMean 'mean' reduces axes [1] of a rank-4 X: the fused operator normalises " \
        "the last axes only (a channels-first norm needs a Transpose around it))" in first


@pytest.mark.builtin_passes
def test_patterns_without_candidates_in_a_graph_share_one_line(tmp_path: Path) -> None:
    """A layer norm in an If branch: the main graph has none of the 36 patterns' anchors
    (one line says so, naming them), the branch's match comes first after it, rewritten."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
    try:
        from test_body_shapes import _if_model
    finally:
        sys.path.pop(0)
    path = tmp_path / "if_ln.onnx"
    onnx.save(_if_model(False), path)
    result = CliRunner().invoke(cli, ["passes", "explain", "LayerNormFusion", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == "matched against the model after shape inference: the pass's stage"
    # (the lead of a pass of several patterns: the only node matched partly is rewritten)
    assert lines[2] == ("1 rewrite(s) by the 36 pattern(s) (each pattern's below); no partial "
                        "match of a node none rewrites")
    lines = [lines[0], lines[1], *lines[3:]]
    idle = [line for line in lines if line.startswith("graph main: ")]
    assert len(idle) == 1 and idle == [lines[2]]
    assert idle[0].startswith("graph main: no candidate for 36 pattern(s): it has no Add or "
                              "Mul node (their anchors' op type): LayerNorm_div_pow_shared_")
    assert not any("(graph main)" in line for line in lines)
    assert lines[3].startswith("pattern LayerNorm_div_pow_shared_bias_axes_input (graph "
                               "then_g, then_branch of unnamed If node (computing 'y')): anchor")
    assert lines[3].endswith("1 would be rewritten")


# -- --option: the options the hooks read, as in ge compile -----------------------------------

OPT_IN_RELU_NEG = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

@register_fusion_pass(name="OptInReluNeg", stage=PassStage.AFTER_INFER_SHAPE)
class OptInReluNeg(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result, context):
        try:
            wanted = context.get_option_value("test.relu_neg")
        except RuntimeError:
            context.set_error_message("test.relu_neg is not set")
            return False
        context.set_error_message(f"test.relu_neg is {wanted!r}")
        return wanted == "fuse"

    def replacement(self, inputs):
        return es.Relu(inputs[0])
"""


def _relu_neg_model(path: Path) -> Path:
    nodes = [helper.make_node("Neg", ["x"], ["n"], name="neg"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_option_reaches_the_hooks_as_in_compile(write, tmp_path: Path) -> None:
    plugin = write("plugins/opt_in.py", OPT_IN_RELU_NEG)
    model = str(_relu_neg_model(tmp_path / "m.onnx"))
    base = ("passes", "explain", "OptInReluNeg", model, "--pass-path", str(plugin))
    code, out, err = _run(*base)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].endswith("(graph g, opsets ai.onnx=17)")
    assert lines[1] == "matched against the model after shape inference: the pass's stage"
    assert lines[2].endswith("1 candidate(s), 0 would be rewritten")
    refused_at = f"{plugin}:{OPT_IN_RELU_NEG.splitlines().index('            return False') + 1}"
    assert (f"meet_requirements returned False (at {refused_at}): the pass refuses this match "
            "(the pass says: test.relu_neg is not set)") in out
    code, out, err = _run(*base, "--option", "test.relu_neg=no", "--option", "other=1")
    assert code == 0, err
    assert out.splitlines()[0].endswith(
        "(graph g, opsets ai.onnx=17), options test.relu_neg=no, other=1")
    assert "(the pass says: test.relu_neg is 'no')" in out
    code, out, err = _run(*base, "--option", "test.relu_neg=fuse")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2].endswith("1 candidate(s), 1 would be rewritten")
    assert "  rewrite at 'relu': neg, relu" in lines
    code, out, err = _run(*base, "--option", "test.relu_neg=fuse", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["options"] == {"test.relu_neg": "fuse"}
    assert len(payload["patterns"][0]["rewrites"]) == 1
    assert json.loads(_run(*base, "--json")[1])["options"] == {}


@pytest.mark.parametrize("pair", ["test.relu_neg", "=fuse"])
def test_a_malformed_option_is_the_usage_error_of_compile(write, tmp_path: Path,
                                                          pair: str) -> None:
    plugin = write("plugins/opt_in.py", OPT_IN_RELU_NEG)
    model = str(_relu_neg_model(tmp_path / "m.onnx"))
    explained = CliRunner().invoke(cli, ["passes", "explain", "OptInReluNeg", model,
                                         "--pass-path", str(plugin), "--option", pair])
    compiled = CliRunner().invoke(cli, ["compile", model, "-o", str(tmp_path / "o.onnx"),
                                        "--option", pair])
    assert explained.exit_code == compiled.exit_code == 2
    error = f"Error: Invalid value for --option: {pair!r} is not KEY=VALUE"
    assert explained.stderr.splitlines()[-1] == compiled.stderr.splitlines()[-1] == error


def test_an_option_value_compile_refuses_is_GE1202(write, tmp_path: Path) -> None:
    plugin = write("plugins/opt_in.py", OPT_IN_RELU_NEG)
    model = str(_relu_neg_model(tmp_path / "m.onnx"))
    bad = "ge.constant_folding.size_limit=lots"
    code, out, err = _run("passes", "explain", "OptInReluNeg", model, "--pass-path",
                          str(plugin), "--option", bad)
    _, _, compiled = _run("compile", model, "-o", str(tmp_path / "o.onnx"), "--option", bad)
    assert code == 1 and out == ""
    assert err == compiled == ("ge: [GE1202] option ge.constant_folding.size_limit must be a "
                               "non-negative integer (bytes), got 'lots'\n")
    code, out, _ = _run("passes", "explain", "OptInReluNeg", model, "--pass-path",
                        str(plugin), "--option", bad, "--json")
    assert code == 1 and json.loads(out)["code"] == "GE1202"


DANGLING = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

@register_fusion_pass(name="Dangling", stage=PassStage.AFTER_INFER_SHAPE)
class Dangling(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    @pattern
    def dangling(self, inputs):
        es.Relu(inputs[1])  # leads to no output
        return es.Abs(inputs[0])

    def replacement(self, inputs):
        return es.Relu(inputs[0])
"""


def test_an_invalid_pattern_fails_the_command_after_the_explanation(write,
                                                                    tmp_path: Path) -> None:
    """The invalid pattern would fail the pass in a compilation: the text shows every
    pattern, then the one-line GE1501 error and exit status 1; JSON is that error."""
    plugin = write("plugins/dangling.py", DANGLING)
    model = tmp_path / "m.onnx"
    nodes = [helper.make_node("Neg", ["x"], ["a"], name="neg"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    code, out, err = _run("passes", "explain", "Dangling", str(model), "--pass-path",
                          str(plugin))
    assert code == 1
    assert "1 would be rewritten" in out  # the valid pattern is still explained
    assert "Dangling_dangling_pattern (graph g): invalid:" in out
    (line,) = err.strip().splitlines()
    assert line == ("ge: [GE1501] Dangling: pattern 'Dangling_dangling_pattern' cannot be "
                    "matched: input 'input_1' (Data) does not lead to an output")
    code, out, _ = _run("passes", "explain", "Dangling", str(model), "--pass-path",
                        str(plugin), "--json")
    assert code == 1
    data = json.loads(out)
    assert data["code"] == "GE1501" and data["message"] == line.removeprefix("ge: [GE1501] ")


def test_node_option_takes_the_name_the_model_and_errors_give(tmp_path: Path) -> None:
    """A Relu the model names `x`, like its graph input, is `x_1` in ge, while ge's errors
    name it `x` as the file does (trial L): `--node x` explained the graph input. It
    explains the Relu, as `--node x_1` does."""
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n"], name="neg"),
         helper.make_node("Relu", ["n"], ["y"], name="x")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    plugin = tmp_path / "relu_neg.py"
    plugin.write_text(RELU_NEG)
    explained = []
    for name in ("x", "x_1"):
        code, out, err = _run("passes", "explain", "ReluNeg", str(model), "--node", name,
                              "--pass-path", str(plugin), "--json")
        assert code == 0, err
        (pattern,) = json.loads(out)["patterns"]
        explained.append((pattern["node"], pattern["note"], pattern["rewrite_count"]))
    assert explained[0] == explained[1]
    assert explained[0] == ("x_1", None, 1)


TWO_FORMS = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="TwoForms", stage=PassStage.AFTER_INFER_SHAPE)
class TwoForms(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    @pattern
    def neg_neg(self, inputs):
        return es.Neg(es.Neg(inputs[0]))

    def meet_requirements(self, match_result, context):
        if match_result.get_pattern_graph_name().endswith("neg_neg_pattern"):
            context.set_error_message("a double negation is left for later")
            return False
        return True

    def replacement(self, inputs):
        return es.Abs(inputs[0])
"""


def test_a_pass_of_several_patterns_leads_with_rewrites_and_the_deepest_refusals(
        tmp_path: Path) -> None:
    """Trial S: RMSNormFusion's refusal, with the pass's reason, came after 12 forms'
    depth-1 misses; trial V: a lead naming nodes another pattern rewrites misled. The lead
    counts the rewrites, then the deepest partial matches of nodes none rewrites."""
    plugin = tmp_path / "two_forms.py"
    plugin.write_text(TWO_FORMS)
    nodes = [helper.make_node("Relu", ["x"], ["p"], name="r0"),
             helper.make_node("Neg", ["p"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="r1"),
             helper.make_node("Neg", ["b"], ["c"], name="n2"),
             helper.make_node("Neg", ["c"], ["y"], name="n3")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [2])])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    code, out, err = _run("passes", "explain", "TwoForms", str(source), "--pass-path",
                          str(plugin))
    assert code == 0, err
    lines = out.splitlines()
    lead = lines.index(next(line for line in lines if "rewrite(s) by the" in line))
    assert lines[lead].startswith("1 rewrite(s) by the 2 pattern(s) (each pattern's below); "
                                  "the deepest partial matches of nodes none rewrites")
    assert lines[lead + 1] == (
        "  1. pattern TwoForms_neg_neg_pattern at 'n3': depth 3/3: meet_requirements "
        f"returned False (at {plugin}:19): the pass refuses this match (the pass says: a "
        "double negation is left for later); its inputs: input_0 float[2]")
    block = []
    for line in lines[lead + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    assert len(block) == 3 and not any("at 'r1'" in line or "at 'n1'" in line
                                       for line in block)  # (rewritten by relu_neg)


SAYS_NO = """
import numpy as np
from ge.es import GraphBuilder
from ge.passes import DecomposePass, PassStage, register_decompose_pass


@register_decompose_pass(name="SaysNo", stage=PassStage.AFTER_INFER_SHAPE, op_types=["Neg"])
class SaysNo(DecomposePass):
    def meet_requirements(self, node):
        return {"n1": "no", "n2": np.array([True, False])}.get(node.name, True)

    def replacement(self, node):
        builder = GraphBuilder("neg")
        return builder.build_and_reset([builder.create_input(0) * -1.0])
"""


def test_explain_notes_answers_other_than_bools_as_a_compilation_warns(tmp_path: Path) -> None:
    """Trial X: explain said nothing of a "no" that accepted a node (compile, find_matches
    and ge.testing warn), and called an array bool() refuses "meet_requirements raised
    ValueError", where the compilation says TypeError: it must return a bool."""
    plugin = tmp_path / "says_no.py"
    plugin.write_text(SAYS_NO)
    nodes = [helper.make_node("Neg", ["x"], ["a"], name="n1"),
             helper.make_node("Neg", ["a"], ["y"], name="n2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [2])])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    code, out, err = _run("passes", "explain", "SaysNo", str(source), "--pass-path",
                          str(plugin))
    assert code == 0, err
    lines = out.splitlines()
    at = lines.index("  rewrite at 'n1' (Neg)")
    assert lines[at + 1] == (
        "    note: meet_requirements returned str 'no', which counts as True (GE reads the "
        "answer as bool(answer)); return True or False")
    refused = next(line for line in lines if line.startswith("    1. 'n2' (Neg): "))
    assert ("meet_requirements raised TypeError: meet_requirements must return a bool, got "
            "ndarray, which bool() refuses: The truth value of an array") in refused
    assert "check(s) made while shape, type or schema information was missing" not in err
