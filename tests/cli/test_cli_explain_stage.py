"""`ge passes explain` explains the graph the pass sees at its stage: a BeforeInferShape
pass on the model as loaded (a compilation infers shapes after it), a later one after
shape inference; the output says which, and warns about what it could not rebuild (the
built-in steps before a late stage, passes of the same stage that run first).

The trial's reproducer: a BeforeInferShape pass whose meet_requirements reads a dtype was
explained on the inferred model ("1 would be rewritten") while `ge compile` left the model
unchanged. Each test checks the explanation against the compilation itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
from cli_helpers import run_ge
from onnx import TensorProto, helper, numpy_helper

from model_paths import shared_model

EARLY_MATMUL_ADD = """
import ge.es.all as es
from ge.graph import DataType
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

@register_fusion_pass(name="EarlyMatMulAdd", stage=PassStage.BEFORE_INFER_SHAPE)
class EarlyMatMulAdd(PatternFusionPass):
    @pattern
    def matmul_add(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    def meet_requirements(self, match_result):
        add = match_result.get_captured_tensor(3).node
        return add.get_input_desc(0).get_data_type() == DataType.DT_FLOAT

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2])
"""
LATE_MATMUL_ADD = EARLY_MATMUL_ADD.replace("BEFORE_INFER_SHAPE", "AFTER_INFER_SHAPE")
#: A pass of the same stage whose name sorts first: a compilation runs it before.
A_RELU_NEG = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

@register_fusion_pass(name="AReluNeg", stage=PassStage.BEFORE_INFER_SHAPE)
class AReluNeg(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def replacement(self, inputs):
        return es.Relu(inputs[0])
"""
REFUSED_LINE = EARLY_MATMUL_ADD.splitlines().index(
    "        return add.get_input_desc(0).get_data_type() == DataType.DT_FLOAT") + 1
STATE_BEFORE = "matched against the model as loaded, before shape inference: the pass's stage"
STATE_AFTER = "matched against the model after shape inference: the pass's stage"


def _mlp(path: Path, *, value_info: bool = False) -> Path:
    """x[N, 16] -> MatMul 'mm' -> Add 'add' (bias) -> Relu 'relu' -> y; intermediate values
    typed only with `value_info`."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["h"], name="add"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    inits = [numpy_helper.from_array(np.ones((16, 8), np.float32), "w"),
             numpy_helper.from_array(np.zeros(8, np.float32), "b")]
    infos = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 8]) for n in ("m", "h")]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], inits,
        value_info=infos if value_info else [])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _compiled(model: Path, plugin: Path, tmp_path: Path, name: str) -> dict[str, object]:
    """The compilation's record of pass `name` (plugins only, as explain runs one)."""
    code, out, err = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                            "--pass-path", str(plugin), "--no-builtin", "--json")
    assert code == 0, err
    (record,) = [p for p in json.loads(out)["passes"] if p["name"] == name]
    return record


def test_a_before_infer_shape_pass_is_explained_on_the_model_as_loaded(write,
                                                                       tmp_path: Path) -> None:
    plugin = write("plugins/early.py", EARLY_MATMUL_ADD)
    model = _mlp(tmp_path / "mlp.onnx")
    code, out, err = run_ge("passes", "explain", "EarlyMatMulAdd", str(model), "--pass-path",
                            str(plugin))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (f"EarlyMatMulAdd (pattern_fusion, BeforeInferShape, {plugin}:7) on "
                        f"{model} (graph mlp, opsets ai.onnx=17)")
    assert lines[1] == STATE_BEFORE
    assert lines[2] == ("pattern EarlyMatMulAdd_matmul_add_pattern (graph mlp): anchor 'Add' "
                        "(Add), 5 pattern node(s); 1 candidate(s), 0 would be rewritten")
    assert lines[4] == (
        f"    1. 'add': depth 5/5: meet_requirements returned False (at {plugin}:"
        f"{REFUSED_LINE}): the pass refuses this match; its inputs: input_0 float[N, 16], "
        "input_1 float[16, 8], input_2 float[8]")
    warning = ("meet_requirements returned False while shape or type information is missing "
               "(output 0 of 'mm', input 0 of 'add', output 0 of 'add' unknown): the pass runs "
               "at BeforeInferShape, before shape inference, so a compilation gives it these "
               "values untyped too (only the types and shapes the model file declares are "
               "known then); a hook that reads them belongs at AfterInferShape")
    assert lines[6] == f"      warning: {warning}"
    assert err == (f"ge: warning: pattern EarlyMatMulAdd_matmul_add_pattern: 1 check(s) made "
                   f"while shape, type or schema information was missing (first: {warning})\n")
    # what a compilation does: the same refusal, nothing rewritten
    record = _compiled(model, plugin, tmp_path, "EarlyMatMulAdd")
    assert (record["outcome"], record["matches"], record["rewrites"]) == ("not_changed", 1, 0)
    code, out, _ = run_ge("passes", "explain", "EarlyMatMulAdd", str(model), "--pass-path",
                          str(plugin), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["shape_inference"] == "skipped"
    assert data["state"] == "as loaded, before shape inference: the pass's stage"
    assert data["patterns"][0]["rewrite_count"] == 0
    assert [w["message"] for w in data["warnings"]] == [err.strip().removeprefix(
        "ge: warning: ")]


def test_the_same_pass_after_inference_is_explained_inferred(write, tmp_path: Path) -> None:
    plugin = write("plugins/late.py", LATE_MATMUL_ADD)
    model = _mlp(tmp_path / "mlp.onnx")
    code, out, err = run_ge("passes", "explain", "EarlyMatMulAdd", str(model), "--pass-path",
                            str(plugin))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[1] == STATE_AFTER
    assert lines[2].endswith("1 candidate(s), 1 would be rewritten")
    assert lines[3] == "  rewrite at 'add': mm, add"
    record = _compiled(model, plugin, tmp_path, "EarlyMatMulAdd")
    assert (record["outcome"], record["rewrites"]) == ("success", 1)
    data = json.loads(run_ge("passes", "explain", "EarlyMatMulAdd", str(model),
                             "--pass-path", str(plugin), "--json")[1])
    assert (data["shape_inference"], data["state"]) == (
        "ok", "after shape inference: the pass's stage")


def test_value_info_of_the_file_types_the_values_a_before_infer_shape_pass_reads(
        write, tmp_path: Path) -> None:
    """The model as loaded carries its value_info: the pass reads those types, in the
    explanation as in the compilation."""
    plugin = write("plugins/early.py", EARLY_MATMUL_ADD)
    model = _mlp(tmp_path / "typed.onnx", value_info=True)
    code, out, err = run_ge("passes", "explain", "EarlyMatMulAdd", str(model), "--pass-path",
                            str(plugin))
    assert code == 0 and err == ""
    assert out.splitlines()[1:4] == [
        STATE_BEFORE,
        "pattern EarlyMatMulAdd_matmul_add_pattern (graph mlp): anchor 'Add' (Add), 5 pattern "
        "node(s); 1 candidate(s), 1 would be rewritten",
        "  rewrite at 'add': mm, add"]
    record = _compiled(model, plugin, tmp_path, "EarlyMatMulAdd")
    assert (record["outcome"], record["rewrites"]) == ("success", 1)


def test_a_model_inference_refuses_is_no_warning_before_inference(write,
                                                                   tmp_path: Path) -> None:
    """Shape inference is not run for a BeforeInferShape pass, so its failure is not told;
    for a later pass the state line says the model is explained untyped."""
    early = write("plugins/early_relu.py", A_RELU_NEG)
    late = write("plugins/late_relu.py", A_RELU_NEG.replace(
        "BEFORE_INFER_SHAPE", "AFTER_INFER_SHAPE").replace("AReluNeg", "LateReluNeg"))
    model = tmp_path / "bad.onnx"
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Neg", ["m"], ["n"], name="neg"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    w = numpy_helper.from_array(np.ones((4, 5), np.float32), "w")
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    code, out, err = run_ge("passes", "explain", "AReluNeg", str(model), "--pass-path",
                            str(early))
    assert code == 0 and err == ""
    assert out.splitlines()[1] == STATE_BEFORE
    code, out, err = run_ge("passes", "explain", "LateReluNeg", str(model), "--pass-path",
                            str(late))
    assert code == 0, err
    assert out.splitlines()[1] == ("matched against the model as loaded: shape inference failed "
                                   "(see the warning), the pass's stage comes after it")
    assert err.startswith("ge: warning: shape inference failed, explaining the untyped graph "
                          "(checks reading shapes or types may be wrong): [GE1305]")


def test_passes_of_the_same_stage_that_run_first_are_a_warning(write, tmp_path: Path) -> None:
    """A stage runs its passes by name: AReluNeg runs before EarlyMatMulAdd. Explaining the
    later one warns that their changes are not in MODEL, and names the dump to explain; the
    first one, a pass of another stage, or a dump after such a pass is not warned about."""
    folder = tmp_path / "plugins"
    write("plugins/a_relu_neg.py", A_RELU_NEG)
    write("plugins/early.py", EARLY_MATMUL_ADD)
    write("plugins/z_late.py", A_RELU_NEG.replace("BEFORE_INFER_SHAPE", "AFTER_INFER_SHAPE")
          .replace("AReluNeg", "ALateReluNeg"))
    model = _mlp(tmp_path / "mlp.onnx", value_info=True)
    code, out, err = run_ge("passes", "explain", "EarlyMatMulAdd", str(model), "--pass-path",
                            str(folder))
    assert code == 0
    assert out.splitlines()[1] == STATE_BEFORE
    assert err == (
        "ge: warning: EarlyMatMulAdd runs at BeforeInferShape after AReluNeg (the passes of a "
        "stage run by name); this explains MODEL without their changes. To explain what the "
        "pass sees: ge compile MODEL -o OUT --dump DIR --dump-level 1, then ge passes explain "
        "EarlyMatMulAdd on the last DIR/ge_*_BeforeInferShape_*.onnx before EarlyMatMulAdd's "
        "(if there is none, they changed nothing and MODEL is what it sees)\n")
    code, _, err = run_ge("passes", "explain", "AReluNeg", str(model), "--pass-path",
                          str(folder))
    assert code == 0 and err == ""
    dump = tmp_path / "ge_0001_BeforeInferShape_AReluNeg.onnx"
    shutil.copy(model, dump)
    code, _, err = run_ge("passes", "explain", "EarlyMatMulAdd", str(dump), "--pass-path",
                          str(folder))
    assert code == 0 and err == ""


def test_a_late_pass_says_it_is_explained_without_the_built_in_steps(write,
                                                                     tmp_path: Path) -> None:
    plugin = write("plugins/late.py", A_RELU_NEG.replace(
        "BEFORE_INFER_SHAPE", "AFTER_ORIGIN_GRAPH_OPTIMIZE"))
    vit = shared_model("vit_tiny")
    code, out, err = run_ge("passes", "explain", "AReluNeg", str(vit), "--pass-path",
                            str(plugin))
    assert code == 0
    assert out.splitlines()[1] == (
        "matched against the model after shape inference, without the changes of the "
        "built-in steps before the pass's stage (see the warning)")
    assert err.startswith("ge: warning: AReluNeg runs at AfterOriginGraphOptimize, after the "
                          "built-in passes changed the graph")
    dump = tmp_path / "ge_0012_OriginGraphOptimize.onnx"
    shutil.copy(vit, dump)
    code, out, err = run_ge("passes", "explain", "AReluNeg", str(dump), "--pass-path",
                            str(plugin))
    assert code == 0 and err == ""
    assert out.splitlines()[1] == ("matched against the model as dumped after the "
                                   "OriginGraphOptimize step, the start of the pass's stage")
