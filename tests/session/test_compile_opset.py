"""`ge.compile(opset=N)` and `ge compile --opset N`: the model is converted by onnx's version
converter first, so fusions into newer operators apply (T5's RMS norms at 23, DistilBERT's
GELUs at 20); verification compares with the model as given, and the report's "before"
counts it; a bad opset or a model the converter cannot take is one error, nothing
written, the caller's graph untouched."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
import ge.graph
from ge.cli import cli
from ge.compiler.report import node_counts, op_histogram
from ge.errors import CompileInputError, CompilerOptionError, GraphValidationError
from model_paths import shared_model
from sample_models import relu_model
from versions import needs_opset, onnx_at_least

T5 = shared_model("t5_encoder_tiny")
DISTILBERT = shared_model("distilbert_tiny")

pytestmark = pytest.mark.builtin_passes  # the fusions the conversion enables


def _ops(model: onnx.ModelProto) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


@needs_opset(23, "the compilation verifies")
def test_t5_converted_to_23_gets_its_rms_norms_fused_and_verified() -> None:
    at_17 = ge.compile(T5)
    result = ge.compile(T5, opset=23, verify=True)
    assert result.verification is not None and result.verification.ok
    assert result.report.rewrites_by_pass().get("RMSNormFusion") == 5
    assert result.graph.opset_imports[""] == 23
    compiled = result.to_onnx()
    onnx.checker.check_model(compiled, full_check=True)
    assert _ops(compiled).get("RMSNormalization") == 5
    assert len(compiled.graph.node) < len(at_17.to_onnx().graph.node)
    assert [o.name for o in compiled.graph.output] == [
        o.name for o in onnx.load(T5).graph.output]
    # the numbers of docs/compiler.md (opset): "before" is the file (61 constants), the
    # converted model the first step (Convert) makes has the converter's 5 more
    assert at_17.report.counts_after.nodes == 81
    assert result.report.summary().startswith("nodes 129 → 56 (-73), constants 61 → 22; ")
    convert, first_stage = result.report.steps[:2]
    assert convert.name == "Convert" and first_stage.name == "BeforeInferShape"
    assert (convert.nodes_before, convert.constants_before) == (129, 61)
    assert (convert.nodes_after, convert.constants_after) == (129, 66)
    assert (first_stage.nodes_before, first_stage.constants_before) == (129, 66)


def test_a_graph_given_is_left_as_it_was() -> None:
    graph = ge.graph.load(DISTILBERT)
    before = graph.to_onnx().SerializeToString()
    result = ge.compile(graph, opset=20, verify=True)
    assert result.graph is not graph and result.graph.opset_imports[""] == 20
    assert _ops(result.to_onnx()).get("Gelu") == 2
    assert graph.to_onnx().SerializeToString() == before
    assert result.report.counts_before == node_counts(graph)  # the graph as given
    assert result.report.ops_before == op_histogram(graph)
    same = ge.compile(graph, opset=17)  # its own opset: compiled in place, as without
    assert same.graph is graph


@pytest.mark.parametrize(("opset", "message"), [
    (16, "opset 16 is below the model's (17); ge only converts a model up"),
    (999, f"opset must be an ONNX opset from 1 to {onnx.defs.onnx_opset_version()} (onnx "
          f"{onnx.__version__}), got 999"),
    (True, "opset must be an int, got the bool True"),
    ("20", "opset must be an int, got the str '20': write 20"),
    (20.0, "opset must be an int, got the float 20.0"),
])
def test_a_bad_opset_is_a_compiler_option_error(opset: object, message: str) -> None:
    graph = ge.graph.load(DISTILBERT)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(CompilerOptionError) as caught:
        ge.compile(graph, opset=opset)  # type: ignore[arg-type]
    assert caught.value.code == "GE1202" and message in str(caught.value)
    assert graph.to_onnx().SerializeToString() == before


def test_a_model_the_converter_cannot_take_is_a_compile_input_error() -> None:
    graph = helper.make_graph(
        [helper.make_node("FooBar", ["x"], ["y"], name="mystery")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(CompileInputError) as caught:
        ge.compile(model, opset=20)
    assert caught.value.code == "GE1203"
    assert str(caught.value).startswith(
        "[GE1203] onnx's version converter cannot take graph 'g' from opset 17 to 20: ")
    if onnx_at_least("1.23"):  # before, the converter says only "_Map_base::at" or the like
        assert "FooBar" in str(caught.value)


def test_the_cli_flag(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    page = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["compile", str(DISTILBERT), "-o", str(out), "--opset",
                                      "20", "--verify", "--json", "--html", str(page)])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verification"]["ok"] is True and report["ops_after"]["Gelu"] == 2
    compiled = onnx.load(out)
    assert [(o.domain, o.version) for o in compiled.opset_import] == [("", 20)]
    assert "Gelu" in page.read_text()

    bad = tmp_path / "bad.onnx"
    result = CliRunner().invoke(cli, ["compile", str(DISTILBERT), "-o", str(bad), "--opset",
                                      "12"])
    assert result.exit_code == 1
    assert result.stderr == ("ge: [GE1202] opset 12 is below the model's (17); ge only "
                             "converts a model up\n")
    assert not bad.exists()


def test_an_untyped_model_stays_untyped_when_converted(tmp_path: Path) -> None:
    """value_info="auto" follows the model given: the version converter's output has value
    info, which a trial's `--opset 20` carried into an untyped BERT (onnxruntime then fused
    differently: 4% slower)."""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["a"]), onnx.helper.make_node("Neg", ["a"], ["b"]),
         onnx.helper.make_node("Abs", ["b"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    for opset in (None, 20):
        out = tmp_path / f"out{opset}.onnx"
        ge.compile(model, opset=opset, builtin_passes=False).save(out)
        assert len(onnx.load(out).graph.value_info) == 0, opset
    typed = ge.compile(model, opset=20, builtin_passes=False, value_info="all")
    typed.save(tmp_path / "typed.onnx")
    assert len(onnx.load(tmp_path / "typed.onnx").graph.value_info) == 2


def _output_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    return {output.name: output.type for output in model.graph.output}


def _dynamic_distilbert() -> onnx.ModelProto:
    """The vendored DistilBERT (exported with batch 1, seq 12) with its inputs and output
    declared [batch, seq(, 48)], as a dynamic export declares them; shape inference still
    proves seq 12 from the constants the export baked in."""
    model = onnx.load(DISTILBERT)
    for value in [*model.graph.input, *model.graph.output]:
        for dim, name in zip(value.type.tensor_type.shape.dim, ("batch", "seq")):
            dim.Clear()
            dim.dim_param = name
    del model.graph.value_info[:]
    return model


def test_converted_outputs_keep_their_declared_types(tmp_path: Path) -> None:
    """The converter's shape inference rewrote declared output dims: `[batch, seq, 48]`
    became `[batch, 12, 48]` and an unnamed dim `unk__0` (trial S); graph outputs keep the
    types the model declares, converted or not."""
    unnamed = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"]),
         helper.make_node("Reshape", ["x", "shape"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["M", 4])],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [2, 4])])
    small = helper.make_model(unnamed, opset_imports=[helper.make_opsetid("", 17)])
    for name, model in (("small", small), ("distilbert", _dynamic_distilbert())):
        out = tmp_path / f"{name}.onnx"
        ge.compile(model, opset=20).save(out)
        saved = onnx.load(out)
        assert saved.opset_import[0].version == 20, name
        assert _output_types(saved) == _output_types(model), name


def _calls_a_local_function() -> onnx.ModelProto:
    """y = ReduceMean(DoubleNeg(x), axes=[-1]) at opset 17 (axes an attribute), DoubleNeg a
    model-local function: the converter takes the graph to 18 and drops the function."""
    double_neg = helper.make_function(
        "my.fn", "DoubleNeg", ["X"], ["Y"],
        [helper.make_node("Neg", ["X"], ["t"]), helper.make_node("Neg", ["t"], ["Y"])],
        [helper.make_opsetid("", 17)])
    graph = helper.make_graph(
        [helper.make_node("DoubleNeg", ["x"], ["d"], domain="my.fn", name="call"),
         helper.make_node("ReduceMean", ["d"], ["y"], axes=[-1], name="mean")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])])
    return helper.make_model(graph, functions=[double_neg], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("my.fn", 1)])


def test_the_local_functions_survive_the_conversion(tmp_path: Path) -> None:
    """onnx's converter drops `ModelProto.functions`: the file `ge compile --opset` wrote
    (exit 0) called a function it no longer defined, which onnxruntime refuses to load.
    They are kept, at the opset they import, and the output computes what the input does."""
    import numpy as np
    import onnxruntime as ort

    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_calls_a_local_function(), source)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--opset", "18"])
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    assert {o.domain: o.version for o in written.opset_import}[""] == 18
    assert [(f.domain, f.name) for f in written.functions] == [("my.fn", "DoubleNeg")]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    runs = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"x": x})
            for p in (source, out)]
    np.testing.assert_allclose(runs[1][0], runs[0][0])
    verified = CliRunner().invoke(cli, ["compile", str(source), "-o", str(tmp_path / "v.onnx"),
                                        "--opset", "18", "--verify"])
    assert verified.exit_code == 0, verified.output


def test_a_function_the_converter_would_have_to_convert_is_refused_first(
        tmp_path: Path) -> None:
    """A function at opset 13 using Identity (changed at 14 and 16) in a model converted to
    18: onnx's checker refuses the function's opset, which ge found only when saving the
    compiled model (GE1003 naming neither --opset nor the function; trial M). Refused
    before anything runs, naming both and what to do; --inline-functions converts it."""
    import numpy as np
    import onnxruntime as ort

    ident = helper.make_function("loc", "Ident", ["X"], ["Y"],
                                 [helper.make_node("Identity", ["X"], ["Y"])],
                                 [helper.make_opsetid("", 13)])
    graph = helper.make_graph(
        [helper.make_node("Ident", ["x"], ["i"], domain="loc", name="call"),
         helper.make_node("Relu", ["i"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, functions=[ident], opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("loc", 1)]), source)
    with pytest.raises(CompileInputError) as info:
        ge.compile(source, opset=18)
    assert info.value.code == "GE1203"
    assert str(info.value).startswith(
        f"[GE1203] {source}: opset 18: onnx's converter converts the model's graphs, not its "
        "local "
        "functions, which keep the opset they import, and the operators of loc.Ident "
        "(Identity of opset 13 is opset 16's at 18) differ at opset 18")
    assert "--inline-functions" in str(info.value)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--opset", "18"])
    assert result.exit_code == 1 and result.stderr.startswith(f"ge: [GE1203] {source}: opset "
                                                              "18: ")
    assert not out.exists()
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--opset", "18",
                                      "--inline-functions", "--verify"])
    assert result.exit_code == 0, result.output
    x = np.array([-1.0, 2.0], np.float32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got[0], [0.0, 2.0])


def test_calls_the_inliner_leaves_are_said(tmp_path: Path) -> None:
    """onnx's inliner inlines no function whose opset imports differ from the model's: with
    --inline-functions such calls were compiled as calls without a word, and the hint then
    advised --inline-functions (trial N). A warning says why; the hint is not given. With
    --opset too, the GE1203 does not advise the flag already given."""
    wave = helper.make_function("loc", "Wave", ["X"], ["Y"], [
        helper.make_node("Sin", ["X"], ["s"]), helper.make_node("Cos", ["s"], ["Y"])],
        [helper.make_opsetid("", 12)])
    graph = helper.make_graph(
        [helper.make_node("Wave", ["x"], ["y"], domain="loc", name="call")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, functions=[wave], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("loc", 1)]), source)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out),
                                      "--inline-functions"])
    assert result.exit_code == 0, result.output
    assert ("ge: warning: inline_functions (--inline-functions) left calls of local "
            "functions in graph 'g', which are compiled as calls: onnx's inliner inlines no "
            "function whose opset imports differ from the model's (function loc.Wave imports "
            "opset 12 of domain '', the model 18)") in result.stderr
    assert "hint:" not in result.stdout
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Wave"]
    with pytest.warns(ge.errors.CompileWarning, match="left calls"), pytest.raises(
            CompileInputError) as info:
        ge.compile(source, opset=22, inline_functions=True)  # (Sin and Cos: new at 22)
    assert "onnx's inliner left their calls" in str(info.value)
    assert "inline the functions first" not in str(info.value)


def test_a_function_using_an_operator_newer_than_its_opset_is_left_to_the_checkers(
        tmp_path: Path) -> None:
    """A body using Gelu (opset 20) while importing 13: the check for functions --opset
    would have to convert asked onnx for Gelu's opset-13 schema and raised its SchemaError
    (a traceback); it leaves such an operator to the checks that judge the model: the
    check of the model as given refuses the function onnx's checker refuses (GE1003,
    naming it and the node, before any conversion or pass), with --opset too."""
    gelu = helper.make_function("loc", "G", ["X"], ["Y"], [helper.make_node("Gelu", ["X"], ["Y"])],
                                [helper.make_opsetid("", 13)])
    graph = helper.make_graph(
        [helper.make_node("G", ["x"], ["y"], domain="loc", name="call")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, functions=[gelu], opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("loc", 1)]), source)
    for opset in (None, 21):
        with pytest.raises(GraphValidationError) as caught:
            ge.compile(source, opset=opset)
        assert (caught.value.stage, caught.value.about_model) == (None, True)
        [problem] = caught.value.problems
        assert (problem.kind, problem.place) == ("function", "function 'G' (domain 'loc')")
        assert problem.message == ("unnamed Gelu node (index 0 in the node list, computing "
                                   "'Y'): onnx.checker refuses it: No Op registered for Gelu "
                                   "with domain_version of 13")


def test_the_conversion_keeps_what_the_exporter_annotated(tmp_path: Path) -> None:
    """Trial Q: `--opset` dropped every node's metadata of the dynamo export (`namespace`,
    `pkg.torch.onnx.*`) and the parameters' and inputs' specs, which a compile without it
    keeps (those of weights a fusion left, as without it): onnx's converter drops them, ge
    gives them back (matched by name)."""
    source = onnx.load(shared_model("distilbert_tiny_dynamo"))
    out = tmp_path / "out.onnx"
    ge.compile(source, opset=20).save(out)
    written = onnx.load(out)
    assert all(len(n.metadata_props) for n in written.graph.node)
    kept = {p.key for n in written.graph.node for p in n.metadata_props}
    assert {"namespace", "pkg.torch.onnx.class_hierarchy"} <= kept
    plain = tmp_path / "plain.onnx"
    ge.compile(source).save(plain)

    def specs(model: onnx.ModelProto) -> dict[str, set[str]]:
        return {v.name: {p.key for p in v.metadata_props} for v in model.graph.value_info
                if v.metadata_props}

    assert specs(onnx.load(plain)) and specs(written) == specs(onnx.load(plain))
    assert [len(v.metadata_props) for v in written.graph.input] == [
        len(v.metadata_props) for v in source.graph.input]
    onnx.checker.check_model(written, full_check=True)


def test_unnamed_nodes_and_small_weights_keep_their_annotations(tmp_path: Path) -> None:
    """Trial S: an unnamed node (found again by its outputs) and a weight small enough to
    go through the converter lost their metadata to `--opset`."""
    f = TensorProto.FLOAT
    sig = helper.make_node("Sigmoid", ["x"], ["s"])
    sig.metadata_props.add(key="ns", value="unnamed-sig")
    weight = onnx.numpy_helper.from_array(np.full((2,), 0.5, np.float32), "w")
    weight.metadata_props.add(key="wmeta", value="weight!")
    graph = helper.make_graph([sig, helper.make_node("Mul", ["s", "w"], ["y"], name="mul")],
                              "g", [helper.make_tensor_value_info("x", f, [2])],
                              [helper.make_tensor_value_info("y", f, [2])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    out = tmp_path / "out.onnx"
    ge.compile(model, opset=20, builtin_passes=False).save(out)
    written = onnx.load(out)
    (node,) = [n for n in written.graph.node if n.op_type == "Sigmoid"]
    assert {p.key: p.value for p in node.metadata_props} == {"ns": "unnamed-sig"}
    (kept,) = [t for t in written.graph.initializer if t.name == "w"]
    assert {p.key: p.value for p in kept.metadata_props} == {"wmeta": "weight!"}


def _relu_model(ir_version: int, opset: int = 17) -> onnx.ModelProto:
    model = relu_model(opset)
    model.ir_version = ir_version
    return model


@pytest.mark.skipif(onnx.defs.onnx_opset_version() < 23, reason="onnx knows no opset 23")
@pytest.mark.parametrize(("ir_version", "opset", "expected"), [
    (8, 23, 11), (8, 20, 9), (10, 20, 10), (10, 23, 11), (11, 20, 11),
])
def test_the_conversion_raises_the_ir_version_to_what_the_opset_needs(
    tmp_path: Path, ir_version: int, opset: int, expected: int
) -> None:
    """Trial JJ: `--opset 23` kept IR 8, while opset 23 needs IR 11
    (`onnx.helper.find_min_ir_version_for`); the IR version is raised to it, never
    lowered."""
    source = tmp_path / "relu.onnx"
    onnx.save(_relu_model(ir_version), source)
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--opset",
                                      str(opset), "--no-builtin"])
    assert result.exit_code == 0, result.stderr
    written = onnx.load(out)
    assert written.ir_version == expected == max(ir_version, helper.find_min_ir_version_for(
        [helper.make_opsetid("", opset)]))
    assert [(o.domain, o.version) for o in written.opset_import] == [("", opset)]
    onnx.checker.check_model(written, full_check=True)
    assert onnx.load(source).ir_version == ir_version  # (the input as it was)


def test_an_ir_3_model_raised_to_ir_4_keeps_its_weights_constants(tmp_path: Path) -> None:
    """Below IR 4 a weight is listed among the graph inputs too, and read as a constant;
    the conversion to an opset that needs IR 4 or later keeps it a constant (no longer
    listed as an input), as onnxruntime ran the model."""
    import onnxruntime as ort

    f = TensorProto.FLOAT
    weight = onnx.numpy_helper.from_array(np.arange(4, dtype=np.float32).reshape(2, 2), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", f, [2, 2]),
                               helper.make_tensor_value_info("w", f, [2, 2])],
                              [helper.make_tensor_value_info("y", f, [2, 2])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=3)
    result = ge.compile(model, opset=10, builtin_passes=False)
    written = result.to_onnx()
    assert written.ir_version == 5
    assert [v.name for v in written.graph.input] == ["x"]
    assert [t.name for t in written.graph.initializer] == ["w"]
    x = np.ones((2, 2), np.float32)
    ran = ort.InferenceSession(written.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ran, x @ onnx.numpy_helper.to_array(weight))


@pytest.mark.parametrize("flags", [{"opset": 20}, {"inline_functions": True, "opset": 18}])
def test_a_converted_model_is_not_saved_over_its_file_without_overwrite_input(
    tmp_path: Path, flags: dict
) -> None:
    """The converted copy remembers the files the model was loaded from, as the graph
    compiled in place does: saving it over them is GE1104 unless overwrite_input=True (it
    forgot them, and replaced the input without a word)."""
    from ge.errors import ModelSaveError

    source = tmp_path / "relu.onnx"
    model = _relu_model(10)
    model.functions.append(helper.make_function(
        "local", "F", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["b"])],
        [helper.make_opsetid("", 17)]))
    onnx.save(model, source)
    before = source.read_bytes()
    result = ge.compile(source, builtin_passes=False, **flags)
    assert result.graph.root_graph().model.source_files == {str(source.resolve()): "model file"}
    with pytest.raises(ModelSaveError) as caught:
        result.save(source)
    assert caught.value.code == "GE1104"
    assert "the model file this graph was loaded from" in caught.value.message
    assert source.read_bytes() == before and sorted(tmp_path.iterdir()) == [source]
    result.save(source, overwrite_input=True)
    assert onnx.load(source).opset_import[0].version == flags["opset"]
