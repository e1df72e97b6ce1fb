"""A compilation never writes a model onnx.checker or onnxruntime would reject: a pass that
leaves a node whose inputs no longer give its outputs fails as that pass (E13028, its file
and line, the graph rolled back), an operator ONNX does not define at the model's opset
stops the compilation before any pass (GE1305, stage InferShape), and so does a model with
a cycle (GE1003, as `ge run` says it). Nothing is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import GraphValidationError, PassRunError, ShapeInferenceError
from ge.testing import isolated_plugin_state
from model_paths import shared_model
from sample_models import cyclic_model
from versions import needs_onnx

MOBILENET = shared_model("mobilenet_like")

SKIP_FLATTEN = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="SkipFlatten", stage=PassStage.AFTER_INFER_SHAPE)
class SkipFlatten(FusionBasePass):
    def run(self, graph, context):
        for flatten in list(graph.nodes_of_type("Flatten")):
            src, index = flatten.get_in_data_nodes_and_port_indexes(0)
            graph.replace_all_uses(flatten, 0, src, index)
            graph.remove_node(flatten)
        return True
'''

FLIP_TRANS_B = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="FlipTransB", stage=PassStage.AFTER_INFER_SHAPE)
class FlipTransB(FusionBasePass):
    def run(self, graph, context):
        for gemm in graph.nodes_of_type("Gemm"):
            gemm.set_attr("transB", 0 if gemm.has_attr("transB") and gemm.get_attr("transB")
                          else 1)
        return True
'''

# A consistent change: the Flatten becomes a Reshape to the shape it gave.
FLATTEN_TO_RESHAPE = '''\
import numpy as np

from ge.graph import Tensor
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="FlattenToReshape", stage=PassStage.AFTER_INFER_SHAPE)
class FlattenToReshape(FusionBasePass):
    def run(self, graph, context):
        for flatten in list(graph.nodes_of_type("Flatten")):
            dims = list(flatten.get_output_desc(0).get_shape())
            shape = graph.add_node("Const", attrs={"value": Tensor(np.array(dims))})
            shape.update_output_desc(0, shape.get_attr("value").get_tensor_desc())
            reshape = graph.add_node("Reshape", num_inputs=2)
            src, index = flatten.get_in_data_nodes_and_port_indexes(0)
            graph.add_data_edge(src, index, reshape, 0)
            graph.add_data_edge(shape, 0, reshape, 1)
            reshape.update_output_desc(0, flatten.get_output_desc(0))
            graph.replace_all_uses(flatten, 0, reshape, 0)
            graph.remove_node(flatten)
        return True
'''

# Relu made to compute in float16 (a Cast before it, both inferred again), its consumer left
# reading float16 beside float32 weights: the consumer was not touched, its input's type was.
HALF_RELU = '''\
from ge.graph import DataType
from ge.ops import infer_node
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="HalfRelu", stage=PassStage.AFTER_INFER_SHAPE)
class HalfRelu(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        src, index = relu.get_in_data_nodes_and_port_indexes(0)
        cast = graph.add_node("Cast", num_inputs=1, attrs={"to": DataType.DT_FLOAT16})
        graph.remove_edge(src, index, relu, 0)
        graph.add_data_edge(src, index, cast, 0)
        graph.add_data_edge(cast, 0, relu, 0)
        infer_node(cast)
        infer_node(relu)
        return True
'''

# Gelu exists from opset 20; the model imports 17.
MAKE_GELU = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="ReluToGelu", stage=PassStage.AFTER_INFER_SHAPE)
class ReluToGelu(FusionBasePass):
    def run(self, graph, context):
        for relu in list(graph.nodes_of_type("Relu")):
            gelu = graph.add_node("Gelu", num_inputs=1)
            src, index = relu.get_in_data_nodes_and_port_indexes(0)
            graph.add_data_edge(src, index, gelu, 0)
            gelu.update_output_desc(0, relu.get_output_desc(0))
            graph.replace_all_uses(relu, 0, gelu, 0)
            graph.remove_node(relu)
        return True
'''


@pytest.fixture(autouse=True)
def _isolated():
    with isolated_plugin_state():
        yield


def _plugin(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / "passes" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    return path


def _compile_cli(model: Path, out: Path, *extra: str) -> tuple[int, str]:
    from click.testing import CliRunner

    from ge.cli import cli

    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out), *extra])
    return result.exit_code, result.stderr


#: onnx's words for the Gemm reading the 4-D value (onnx 1.22 on; before).
RANK_REFUSED = re.compile("Input 0 expected to have rank 2 but has rank 4"
                          "|First input does not have rank 2")


@pytest.mark.parametrize(("name", "source", "line", "reason"), [
    ("skip_flatten", SKIP_FLATTEN, 9, RANK_REFUSED),
    pytest.param("flip_trans_b", FLIP_TRANS_B, 8,
                 re.compile("Dimension mismatch in unification between 10 and 32"),
                 marks=needs_onnx("1.22", "does not check that Gemm's inner dimensions agree")),
], ids=["rank", "attribute"])
def test_a_pass_breaking_a_nodes_shapes_fails_as_that_pass(
        name: str, source: str, line: int, reason: re.Pattern[str], tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, name, source)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(MOBILENET, out, "--pass-path", str(plugin))
    assert code == 1 and stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith("ge: [E13028] Failed to run custom fusion pass ")
    assert "the pass left the graph invalid: shape: Gemm node '/fc/Gemm': shape inference" in stderr
    assert reason.search(stderr)
    assert "infer_node" not in stderr  # inferring it again cannot help: onnx rejects it
    assert f"stage AfterInferShape, at {plugin}:{line})" in stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["passes"]

    # The API: the same error; the graph is given back as the pass found it.
    graph = ge.graph.load(MOBILENET)
    with pytest.raises(PassRunError) as caught:
        ge.compile(graph, pass_paths=[plugin], builtin_passes=False)
    assert caught.value.code == "E13028" and caught.value.stage == "AfterInferShape"
    assert reason.search(str(caught.value))
    (gemm,) = graph.nodes_of_type("Gemm")
    assert graph.nodes_of_type("Flatten") and gemm.get_attr("transB") == 1
    assert gemm.get_in_data_nodes_and_port_indexes(0)[0].type == "Flatten"


def test_a_value_whose_type_a_pass_changed_is_checked_where_it_is_read(tmp_path: Path
                                                                       ) -> None:
    plugin = _plugin(tmp_path, "half_relu", HALF_RELU)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(MOBILENET, out, "--pass-path", str(plugin))
    assert code == 1 and stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith("ge: [E13028] Failed to run custom fusion pass HalfRelu.")
    assert "the pass left the graph invalid: type: " in stderr
    assert "is tensor(float16)" in stderr and "(pass HalfRelu, stage AfterInferShape" in stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["passes"]

    graph = ge.graph.load(MOBILENET)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as caught:
        ge.compile(graph, pass_paths=[plugin], builtin_passes=False)
    assert caught.value.code == "E13028" and caught.value.pass_name == "HalfRelu"
    assert caught.value.nodes == ("/blocks/blocks.2/se/fc2/Conv",)  # the retyped value's reader
    assert graph.to_onnx().SerializeToString() == before and not graph.nodes_of_type("Cast")


def test_a_consistent_change_of_shapes_passes_the_check(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, "to_reshape", FLATTEN_TO_RESHAPE)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(MOBILENET, out, "--pass-path", str(plugin), "--verify")
    assert code == 0, stderr
    compiled = onnx.load(out)
    onnx.checker.check_model(compiled, full_check=True)
    assert "Flatten" not in {n.op_type for n in compiled.graph.node}
    ort.InferenceSession(out.read_bytes(), providers=["CPUExecutionProvider"])


def test_a_pass_making_an_operator_the_opset_lacks_fails_as_that_pass(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, "gelu", MAKE_GELU)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(MOBILENET, out, "--pass-path", str(plugin))
    assert code == 1 and "Traceback" not in stderr
    assert stderr.startswith("ge: [E13028] Failed to run custom fusion pass ReluToGelu.")
    assert "unknown-op: Gelu node" in stderr
    assert "ai.onnx Gelu exists from opset 20, the model imports opset 17" in stderr
    assert f"at {plugin}:11)" in stderr  # the add_node of the Gelu
    assert not out.exists()


def _model_with(op_type: str, opset: int, domain: str = "") -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"),
         helper.make_node(op_type, ["a"], ["b"], name="mystery", domain=domain),
         helper.make_node("Neg", ["b"], ["y"], name="neg")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    imports = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=imports)


@pytest.mark.parametrize(("op_type", "opset", "message"), [
    ("FooBar", 17, "FooBar node 'mystery': ONNX has no operator FooBar in domain 'ai.onnx' "
                   f"(onnx {onnx.__version__}); onnx.checker and runtimes reject the model "
                   "(a custom operator needs a domain of its own)"),
    ("Gelu", 17, "Gelu node 'mystery': Gelu is an operator of opset 20 and later, and the "
                 "model imports opset 17; onnx.checker and runtimes reject the model, and ge "
                 "writes no model it rejects: declare opset 20 of ai.onnx in the model, whose "
                 "other operators are the same at 20 (with onnx: set the version of its "
                 "opset_import of domain '' to 20), or export it again at opset 20 or later; "
                 "--opset cannot convert it: onnx's converter adapts only the operators of the "
                 "model's opset"),
    # the first version, not the newest (HardSwish-22; trial E was told 28 for Einsum-12);
    # Relu and Neg differ between 11 and 14 (bfloat16...): declaring 14 would change them
    ("HardSwish", 11, "HardSwish node 'mystery': HardSwish is an operator of opset 14 and "
                      "later, and the model imports opset 11; onnx.checker and runtimes "
                      "reject the model, and ge writes no model it rejects: export the model "
                      "again at opset 14 or later (declaring opset 14 would change its Relu and "
                      "Neg, which differ between opsets 11 and 14); --opset cannot convert it: "
                      "onnx's converter adapts only the operators of the model's opset"),
], ids=["unknown", "too-new", "too-new-with-later-versions"])
def test_an_operator_onnx_lacks_stops_the_compilation_at_infer_shape(
        op_type: str, opset: int, message: str, tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    onnx.save(_model_with(op_type, opset), source)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(source, out)
    assert code == 1 and stderr.count("\n") == 1
    assert stderr == f"ge: [GE1305] {source}: graph 'g': {message} (stage InferShape)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(source)
    assert caught.value.code == "GE1305" and caught.value.stage == "InferShape"
    assert caught.value.path == str(source)
    assert list(caught.value.nodes) == ["mystery"]


def _layer_norm_at_16(*extra_domains: str) -> onnx.ModelProto:
    """A model importing opset 16 that uses LayerNormalization, an operator of opset 17
    (onnxruntime runs it: it defines a LayerNormalization of its own at every opset)."""
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln", axis=-1),
         helper.make_node("Relu", ["y"], ["z"], name="relu")], "ln",
        [helper.make_tensor_value_info("x", f, [2, 8])],
        [helper.make_tensor_value_info("z", f, [2, 8])],
        [onnx.numpy_helper.from_array(np.ones(8, np.float32), "s"),
         onnx.numpy_helper.from_array(np.zeros(8, np.float32), "b")])
    imports = [helper.make_opsetid("", 16), *(helper.make_opsetid(d, 1) for d in extra_domains)]
    model = helper.make_model(graph, opset_imports=imports, producer_name="my_exporter")
    model.ir_version = 8
    return model


@pytest.mark.parametrize("session_saved", [False, True])
def test_an_operator_of_a_later_opset_is_not_blamed_on_onnxruntime(
        tmp_path: Path, session_saved: bool) -> None:
    """Trial JJ: a LayerNormalization in a model importing opset 16 was said to be written
    by onnxruntime's optimiser; it is an operator of opset 17, which the model does not
    import, and the message says what makes the model valid (onnxruntime's optimiser is
    named only when the model was saved from a session)."""
    source = tmp_path / "model.onnx"
    onnx.save(_layer_norm_at_16(*(["com.microsoft.nchwc"] if session_saved else [])), source)
    ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])  # (it runs)
    saved = ("; the model was saved from an onnxruntime session (it imports "
             "com.microsoft.nchwc), whose optimiser writes LayerNormalization at any opset"
             if session_saved else "")
    message = (
        "graph 'ln': LayerNormalization node 'ln': LayerNormalization is an operator of opset "
        "17 and later, and the model imports opset 16; onnxruntime runs it as an operator of "
        f"its own{saved}, but onnx.checker rejects the model, and ge writes "
        "no model it rejects: declare opset 17 of ai.onnx in the model, whose other operators "
        "are the same at 17 (with onnx: set the version of its opset_import of domain '' to "
        "17), or export it again at opset 17 or later; --opset cannot convert it: onnx's "
        "converter adapts only the operators of the model's opset")
    out = tmp_path / "out.onnx"
    for flags in ((), ("--verify",)):
        code, stderr = _compile_cli(source, out, *flags)
        assert code == 1
        assert stderr == f"ge: [GE1305] {source}: {message} (stage InferShape)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(source)
    assert caught.value.code == "GE1305" and list(caught.value.nodes) == ["ln"]


@pytest.mark.parametrize("opset", [17, 20])
def test_opset_conversion_of_an_operator_of_a_later_opset_is_one_clear_error(
        tmp_path: Path, opset: int) -> None:
    """`--opset 17` on that model: onnx's converter stopped with a C++ assertion ("No
    Adapter From Version $16 for LayerNormalization"); ge says why, and what works."""
    from ge.errors import CompileInputError

    source = tmp_path / "model.onnx"
    onnx.save(_layer_norm_at_16(), source)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(source, out, "--opset", str(opset), "--verify")
    assert code == 1
    then = f", then convert it to {opset}" if opset > 17 else ""
    assert stderr == (
        f"ge: [GE1203] {source}: opset {opset}: graph 'ln' imports opset 16 but uses "
        "LayerNormalization, an operator of opset 17 and later (1 node(s), 'ln'), which onnx's "
        "version converter cannot convert: it adapts only the operators of the model's "
        "opset; declare opset 17 of ai.onnx in the model, whose other operators are the same "
        "at 17 (with onnx: set the version of its opset_import of domain '' to 17), or export "
        f"it again at opset 17 or later{then}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    with pytest.raises(CompileInputError) as caught:
        ge.compile(source, opset=opset)
    assert caught.value.code == "GE1203" and list(caught.value.nodes) == ["ln"]
    # what the message says works: the model declaring opset 17 compiles, at 17 or 20
    fixed = onnx.load(source)
    fixed.opset_import[0].version = 17
    onnx.save(fixed, source)
    code, stderr = _compile_cli(source, out, "--opset", str(opset), "--verify")
    assert code == 0, stderr


SWAP_MATMUL = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="SwapMatMul", stage=PassStage.BEFORE_INFER_SHAPE)
class SwapMatMul(FusionBasePass):
    def run(self, graph, context):
        mm = graph.nodes_of_type("MatMul")[0]
        a, ai = mm.get_in_data_nodes_and_port_indexes(0)
        b, bi = mm.get_in_data_nodes_and_port_indexes(1)
        graph.remove_edge(a, ai, mm, 0)
        graph.remove_edge(b, bi, mm, 1)
        graph.add_data_edge(b, bi, mm, 0)
        graph.add_data_edge(a, ai, mm, 1)
        return True
'''


def test_shape_inference_refusing_a_node_names_the_pass_that_changed_it(tmp_path: Path
                                                                        ) -> None:
    plugin = _plugin(tmp_path, "swap", SWAP_MATMUL)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(shared_model("distilbert_tiny"), out, "--pass-path",
                                str(plugin))
    assert code == 1 and stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith("ge: [GE1305] shape inference of graph 'main_graph' failed: ")
    assert stderr.endswith(
        "; node '/model/transformer/layer.0/attention/q_lin/MatMul' was last changed by pass "
        "SwapMatMul "
        f"(BeforeInferShape) (pass SwapMatMul, stage InferShape, at {plugin}:5)\n")
    assert not out.exists()


def test_the_json_error_names_the_pass_its_message_blames(tmp_path: Path) -> None:
    """--json: the pass the message says last changed the node is the error's pass_name
    (it was null); the stage is the step that failed, the location the pass's."""
    from click.testing import CliRunner

    from ge.cli import cli

    plugin = _plugin(tmp_path, "swap", SWAP_MATMUL)
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(cli, ["compile", str(shared_model("distilbert_tiny")), "-o",
                                      str(out), "--pass-path", str(plugin), "--json"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)
    assert "was last changed by pass SwapMatMul (BeforeInferShape)" in error["message"]
    assert (error["code"], error["pass_name"], error["stage"], error["location"]) == (
        "GE1305", "SwapMatMul", "InferShape", f"{plugin}:5")
    assert not out.exists()


def test_an_opset_onnx_does_not_know_stops_the_compilation_at_infer_shape(
        tmp_path: Path) -> None:
    newest = onnx.defs.onnx_opset_version()
    source = tmp_path / "model.onnx"
    onnx.save(_model_with("Relu", newest + 2), source)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(source, out)
    assert code == 1 and stderr == (
        f"ge: [GE1305] {source}: graph 'g' imports opset {newest + 2} of the standard domain "
        f"(ai.onnx); onnx {onnx.__version__} knows opsets up to {newest}, and runtimes "
        "refuse the model (stage InferShape)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_a_declared_type_inference_contradicts_is_named_by_type(tmp_path: Path) -> None:
    """onnx says "(1) vs (7)"; the error says which types those are and where they come
    from."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    source = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    code, stderr = _compile_cli(source, tmp_path / "out.onnx")
    assert code == 1
    assert ("Inferred elem type differs from existing elem type: (1) vs (7): the node "
            "computes float32, the model declares int64 for that value (a graph output's or "
            "a value_info's type); its inputs: float32[2] (stage InferShape)\n") in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_an_operator_onnxruntime_lacks_in_its_domain_is_named(tmp_path: Path) -> None:
    """com.microsoft operators are typed by onnxruntime (tests/ops/test_runtime_ops.py);
    one it does not define either is GE1305 saying so, and nothing is written."""
    source = tmp_path / "model.onnx"
    model = _model_with("Gelux", 17, domain="com.microsoft")
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, source)
    code, stderr = _compile_cli(source, tmp_path / "out.onnx")
    assert code == 1 and stderr == (
        f"ge: [GE1305] {source}: node 'mystery': custom operator com.microsoft::Gelux is not "
        "registered "
        f"(onnxruntime {onnxruntime.__version__} defines no operator Gelux in "
        "'com.microsoft' either); a plugin registers it with ge.ops.register_op (its shape "
        "inference, and a kernel or a decomposition to run it) (stage InferShape)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_validate_names_an_operator_onnx_lacks() -> None:
    graph = ge.graph.load(_model_with("Gelu", 17))
    problems = graph.find_problems()
    assert [(p.kind, p.nodes) for p in problems] == [("unknown-op", ("mystery",))]
    with pytest.raises(GraphValidationError):
        graph.validate()
    graph = ge.graph.load(_model_with("Gelu", 20))  # there it exists
    assert graph.find_problems() == []


def test_a_model_function_in_the_default_domain_is_not_unknown() -> None:
    """A node calling a function the model defines is that function, not an unknown op."""
    body = helper.make_function("", "Twice", ["a"], ["b"],
                                [helper.make_node("Add", ["a", "a"], ["b"])],
                                [helper.make_opsetid("", 17)])
    model = _model_with("Twice", 17)
    model.functions.append(body)
    assert ge.graph.load(model).find_problems() == []


def test_the_custom_domain_message_is_unchanged(tmp_path: Path) -> None:
    model = _model_with("FooBar", 17, domain="com.acme")
    model.opset_import.append(helper.make_opsetid("com.acme", 1))
    with pytest.raises(ShapeInferenceError,
                       match=r"custom operator com\.acme::FooBar is not registered"):
        ge.compile(model)


@pytest.mark.parametrize(("outputs", "untyped"), [(["b", "b2"], "1 ('b2')"),
                                                (["b"], "0 ('b')")])
def test_an_undefined_operator_with_an_untyped_output_names_it(
        tmp_path: Path, outputs: list[str], untyped: str) -> None:
    """Trial Y: ge compiles around an operator nothing defines when the model types its
    outputs; one unused output left untyped made it "not registered", naming neither the
    output nor the fix (declaring its type). Trial Z: a one-output operator got no hint at
    all. Nothing is written; declaring the type compiles."""
    f = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Bar", ["x"], outputs, domain="com.foo", name="bar"),
         helper.make_node("Relu", ["b"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", f, [2, 3])],
        [helper.make_tensor_value_info("y", f, [2, 3])],
        value_info=[helper.make_tensor_value_info(o, f, [2, 3]) for o in outputs[:-1]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.foo", 1)])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    code, stderr = _compile_cli(source, out)
    assert code == 1 and not out.exists()
    assert stderr.splitlines()[-1] == (
        f"ge: [GE1305] {source}: node 'bar': custom operator com.foo::Bar is not registered: "
        f"the model gives no type to its output {untyped}, which ge needs to compile around "
        "an operator nothing defines; declare it in the model's value_info, or a plugin "
        "registers it with ge.ops.register_op (its shape inference, and a kernel or a "
        "decomposition to run it) (stage InferShape)")
    model.graph.value_info.append(helper.make_tensor_value_info(outputs[-1], f, [2, 3]))
    onnx.save(model, source)
    code, _ = _compile_cli(source, out)
    assert code == 0 and out.exists()


def test_with_the_check_off_the_save_still_refuses_what_onnx_rejects(tmp_path: Path) -> None:
    """`--check none` lets the broken pass through; saving runs onnx's full checker on what
    it would write and writes nothing (GE1003)."""
    plugin = _plugin(tmp_path, "skip_flatten", SKIP_FLATTEN)
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(MOBILENET, out, "--pass-path", str(plugin), "--check", "none")
    assert code == 1 and stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith("ge: [GE1003] graph is invalid (1 problem(s)): graph main_graph: "
                             f"onnx-checker: onnx.checker rejects the model, nothing was "
                             f"written to {out}: ")
    assert RANK_REFUSED.search(stderr)
    # the node onnx names is one the pass rewired: the error names the pass, as with --verify
    assert "was last changed by pass SkipFlatten (AfterInferShape)" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["passes"]

    result = ge.compile(MOBILENET, pass_paths=[plugin], check="none", builtin_passes=False)
    with pytest.raises(GraphValidationError) as caught:
        result.save(out)
    assert caught.value.code == "GE1003"
    assert [p.kind for p in caught.value.problems] == ["onnx-checker"]
    assert caught.value.pass_name == "SkipFlatten" and caught.value.nodes
    assert caught.value.location is not None and caught.value.location.file == str(plugin)
    assert not out.exists()
    result.graph.save(out)  # Graph.save checks only when asked (full_check=True)
    assert out.exists()


def test_the_full_check_also_runs_when_the_weights_go_to_a_data_file(tmp_path: Path) -> None:
    """It was skipped with external data (the checker looks for the data file, not written
    yet): it now checks the model with its weights as typed inputs. Nothing is written."""
    plugin = _plugin(tmp_path, "skip_flatten", SKIP_FLATTEN)
    result = ge.compile(MOBILENET, pass_paths=[plugin], check="none", builtin_passes=False)
    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    with pytest.raises(GraphValidationError) as caught:
        result.save(out, external_data=True)
    assert RANK_REFUSED.search(str(caught.value))
    assert list(out.parent.iterdir()) == []
    good = ge.compile(MOBILENET)
    data = good.save(out, external_data=True)
    assert data is not None and data.exists()
    onnx.checker.check_model(str(out), full_check=True)


@pytest.mark.parametrize(("op_type", "opset"), [
    ("Relu", onnx.defs.onnx_opset_version() + 1),  # an opset onnx does not know
    ("FooBar", 17),  # no such operator in the standard domain
    ("Gelu", 17),  # an operator of a later opset
], ids=["opset", "unknown-op", "too-new-op"])
def test_verification_does_not_change_the_diagnosis_of_what_onnx_does_not_know(
        op_type: str, opset: int, tmp_path: Path) -> None:
    """The original is run for the verification before the passes; onnxruntime refused such
    a model with its own C++ message (GE1601), where compiling without --verify gives ge's
    (GE1305). ge's check comes first: both paths give the same error, and write nothing."""
    source = tmp_path / "model.onnx"
    onnx.save(_model_with(op_type, opset), source)
    out = tmp_path / "out.onnx"
    plain = _compile_cli(source, out)
    verified = _compile_cli(source, out, "--verify")
    each_pass = _compile_cli(source, out, "--verify=each-pass")
    assert plain[0] == 1 and plain[1].startswith("ge: [GE1305] ")
    assert verified == plain and each_pass == plain
    assert "ONNXRuntimeError" not in verified[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]

    errors = []
    for verify in (False, True):
        with pytest.raises(ShapeInferenceError) as caught:
            ge.compile(source, verify=verify)
        errors.append((caught.value.code, caught.value.stage, caught.value.message,
                       caught.value.nodes))
    assert errors[0] == errors[1] and errors[0][:2] == ("GE1305", "InferShape")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


# -- a model with a cycle ----------------------------------------------------------------------
RAISING = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="Raising", stage=PassStage.BEFORE_INFER_SHAPE)
class Raising(FusionBasePass):
    def run(self, graph, context):
        raise RuntimeError("no pass runs on a model with a cycle")
'''


def _cycle_message(graph: str) -> str:
    """What `ge run` says of the model (tests/cli/test_cli_run_inspect.py); a body named by
    the node holding it."""
    place = f"{graph}, then_branch of If node 'if'" if graph == "then" else graph
    return (f"graph is invalid (1 problem(s)):\n  - graph {place}: cycle: graph {graph!r} has "
            "a cycle through nodes: add, relu")


@pytest.mark.parametrize("in_body", [False, True], ids=["root", "body"])
@pytest.mark.parametrize("extra", [(), ("--verify",), ("--opset", "18"), ("--inline-functions",),
                                   ("--html", "page.html")],
                         ids=["plain", "verify", "opset", "inline", "html"])
def test_ge_compile_says_a_model_with_a_cycle_is_invalid(
        tmp_path: Path, in_body: bool, extra: tuple[str, ...]) -> None:
    """The input model is invalid, said as `ge run` says it (GE1003 naming the nodes of the
    cycle, in the root graph or a body) before anything converts, runs or infers it, where
    shape inference failed (GE1305 around a GE1001), or verification's or the opset
    conversion's export (a bare GE1001); nothing is written, and no pass runs."""
    source = tmp_path / "cycle.onnx"
    onnx.save(cyclic_model(in_body), source)
    graph = "then" if in_body else "g"
    plugin = _plugin(tmp_path, "raising", RAISING)
    extra = tuple(str(tmp_path / a) if a.endswith(".html") else a for a in extra)
    code, stderr = _compile_cli(source, tmp_path / "out.onnx", "--pass-path", str(plugin),
                                *extra)
    assert (code, stderr) == (1, f"ge: [GE1003] {source}: {_cycle_message(graph)}\n".replace(
        ":\n  - ", ": "))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cycle.onnx", "passes"]


def test_ge_compiles_json_error_for_a_cycle_is_ge_runs(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`--json`: the error `ge run --json` gives, the model's path as given included."""
    from click.testing import CliRunner

    from ge.cli import cli

    monkeypatch.chdir(tmp_path)
    onnx.save(cyclic_model(), "cycle.onnx")
    runner = CliRunner()
    compiled = runner.invoke(cli, ["compile", "cycle.onnx", "-o", "out.onnx", "--json"])
    ran = runner.invoke(cli, ["run", "cycle.onnx", "--json"])
    error = json.loads(compiled.stdout)
    assert compiled.exit_code == 1 and error == json.loads(ran.stdout)
    assert (error["code"], error["type"], error["message"], error["nodes"], error["path"],
            error["stage"]) == ("GE1003", "GraphValidationError",
                                f"cycle.onnx: {_cycle_message('g')}", ["add", "relu"],
                                "cycle.onnx", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cycle.onnx"]


@pytest.mark.parametrize("in_body", [False, True], ids=["root", "body"])
def test_ge_compile_api_says_a_model_with_a_cycle_is_invalid(tmp_path: Path,
                                                             in_body: bool) -> None:
    """ge.compile of a path, a ModelProto or a Graph (given back unchanged), with or without
    verification, and compile_graph: the same GraphValidationError, the problem a `cycle`
    one naming its graph and nodes, before any pass; a path is the error's path."""
    import ge.graph
    from ge.compiler import compile_graph

    proto = cyclic_model(in_body)
    source = tmp_path / "cycle.onnx"
    onnx.save(proto, source)
    plugin = _plugin(tmp_path, "raising", RAISING)
    graph = ge.graph.load(proto)
    nodes = [(n.name, n.type) for n in graph.get_all_nodes()]
    name = "then" if in_body else "g"
    calls = [lambda: ge.compile(source, pass_paths=[plugin]),
             lambda: ge.compile(proto, pass_paths=[plugin], verify=True),
             lambda: ge.compile(graph, pass_paths=[plugin], opset=18),
             lambda: compile_graph(graph, pass_paths=[plugin])]
    for call in calls:
        with pytest.raises(GraphValidationError) as caught:
            call()
        err = caught.value
        named = call is calls[0]  # (a path: the error names it; a proto, a Graph: none)
        assert (err.code, err.message, err.nodes, err.stage) == (
            "GE1003", f"{source}: {_cycle_message(name)}" if named else _cycle_message(name),
            ("add", "relu"), None)
        assert [(p.kind, p.graph, p.nodes) for p in err.problems] == [
            ("cycle", name, ("add", "relu"))]
        assert err.path == (str(source) if named else None)
    assert [(n.name, n.type) for n in graph.get_all_nodes()] == nodes


# GE's G3 sample at AfterInferShape: the Transpose pair around two elementwise operators is
# removed, and the nodes between keep the NHWC descs they were inferred with.
DROP_TRANSPOSE_PAIR = '''\
import ge.ops
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="DropTransposePair", stage=PassStage.AFTER_INFER_SHAPE)
class DropTransposePair(FusionBasePass):
    def run(self, graph, context):
        for t in list(graph.nodes_of_type("Transpose")):
            src, index = t.get_in_data_nodes_and_port_indexes(0)
            graph.replace_all_uses(t, 0, src, index)
            graph.remove_node(t)
        if REINFER_NODES:
            for node in graph.topological_order():
                if node.type in ("Relu", "Sigmoid"):
                    ge.ops.infer_node(node)
        return True
'''


def _transpose_pair(path: Path, *, sigmoid_after: bool = False) -> Path:
    """x [B, 4, 8, 8] -> Transpose to NHWC -> Relu -> Sigmoid -> Transpose back -> y; with
    `sigmoid_after`, the Sigmoid after the second Transpose."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 4, 8, 8])
    make = helper.make_node
    nodes = [make("Transpose", ["x"], ["t1"], name="t_nhwc", perm=[0, 2, 3, 1]),
             make("Relu", ["t1"], ["r"], name="relu")]
    if sigmoid_after:
        nodes += [make("Transpose", ["r"], ["t2"], name="t_nchw", perm=[0, 3, 1, 2]),
                  make("Sigmoid", ["t2"], ["y"], name="sig")]
    else:
        nodes += [make("Sigmoid", ["r"], ["s"], name="sig"),
                  make("Transpose", ["s"], ["y"], name="t_nchw", perm=[0, 3, 1, 2])]
    onnx.save(helper.make_model(helper.make_graph(nodes, "tr", [x], [y]),
                                opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_stale_desc_left_by_a_pass_says_to_infer_the_node_again(tmp_path: Path) -> None:
    """The E13028 of a pass that rewired a node without inferring it again names the stale
    node and says what to do: ge.ops.infer_node on it, then on its readers (the Sigmoid,
    stale once the Relu is inferred). Doing that, the same pass compiles and verifies."""
    model = _transpose_pair(tmp_path / "tr.onnx")
    original = model.read_bytes()
    plugin = _plugin(tmp_path, "drop", DROP_TRANSPOSE_PAIR.replace("REINFER_NODES", "False"))
    out = tmp_path / "out.onnx"
    code, stderr = _compile_cli(model, out, "--pass-path", str(plugin))
    assert code == 1 and stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr == (
        "ge: [E13028] Failed to run custom fusion pass DropTransposePair. Return code: "
        "FAILED. Reason: the pass left the graph invalid: shape: output 0 of Relu node 'relu' "
        "is TensorDesc(float32[B,8,8,4]) in the graph, but its inputs and attributes now "
        "give TensorDesc(float32[B,4,8,8]) (a node keeps its output descs until inferred "
        "again: after changing a node's inputs or attributes, call ge.ops.infer_node(node) "
        "on it and then on the nodes that read it, in graph order) (graph tr). (pass "
        f"DropTransposePair, stage AfterInferShape, at {plugin}:10)\n")
    assert not out.exists() and model.read_bytes() == original

    plugin.write_text(DROP_TRANSPOSE_PAIR.replace("REINFER_NODES", "True"))
    code, stderr = _compile_cli(model, out, "--pass-path", str(plugin), "--verify")
    assert code == 0, stderr
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Relu", "Sigmoid"]


def test_two_stale_nodes_are_named_and_the_advice_given_once(tmp_path: Path) -> None:
    """The Sigmoid after the pair reads the Relu, which keeps its NHWC desc: both are stale,
    each is named, and what to do is said once."""
    model = _transpose_pair(tmp_path / "tr.onnx", sigmoid_after=True)
    plugin = _plugin(tmp_path, "drop", DROP_TRANSPOSE_PAIR.replace("REINFER_NODES", "False"))
    graph = ge.graph.load(model)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as caught:
        ge.compile(graph, pass_paths=[plugin], builtin_passes=False)
    assert caught.value.message == (
        "Failed to run custom fusion pass DropTransposePair. Return code: FAILED. Reason: the "
        "pass left the graph invalid: shape: output 0 of Relu node 'relu' is "
        "TensorDesc(float32[B,8,8,4]) in the graph, but its inputs and attributes now give "
        "TensorDesc(float32[B,4,8,8]) (graph tr); shape: output 0 of Sigmoid node 'sig' is "
        "TensorDesc(float32[B,4,8,8]) in the graph, but its inputs and attributes now give "
        "TensorDesc(float32[B,8,8,4]) (a node keeps its output descs until inferred again: "
        "after changing a node's inputs or attributes, call ge.ops.infer_node(node) on it "
        "and then on the nodes that read it, in graph order) (graph tr).")
    assert caught.value.nodes == ("relu", "sig")
    assert graph.to_onnx().SerializeToString() == before
    plugin.write_text(DROP_TRANSPOSE_PAIR.replace("REINFER_NODES", "True"))
    ge.compile(graph, pass_paths=[plugin], builtin_passes=False, verify=True)
    assert [n.type for n in graph.get_direct_nodes() if n.type not in ("Data", "NetOutput")
            ] == ["Relu", "Sigmoid"]


def _tile_of_folded_repeats(parts: int = 2) -> onnx.ModelProto:
    """Tile's repeats are `Reshape([2], Concat([1], [1]))`, 2-D: onnx.checker passes the
    model (the rank shows only once the Concat is known), onnxruntime refuses it when it
    runs the Tile (the Mamba TorchScript export: trial PP). With one part, valid."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["one"] * parts, ["shp"], axis=0, name="cat"),
         helper.make_node("Reshape", ["rep1", "shp"], ["rep"]),
         helper.make_node("Tile", ["x", "rep"], ["y"], name="tile")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M"])],
        [onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
         onnx.numpy_helper.from_array(np.array([2], np.int64), "rep1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.builtin_passes
def test_a_node_rejecting_what_folding_computed_is_the_models_problem(tmp_path: Path) -> None:
    """ConstantFolding computes the repeats exactly; the Tile rejecting them rejects what the
    model computes. It was E13028, "a bug in ge" (trial PP): GE1305 saying the input model
    is invalid, naming the node and the constant; nothing written; --disable ConstantFolding
    compiles it as it is."""
    model = _tile_of_folded_repeats()
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(model)
    err = caught.value
    assert (err.code, err.stage, list(err.nodes)) == ("GE1305", "OriginGraphOptimize", ["tile"])
    assert err.message.startswith(
        "Tile node 'tile' rejects its input(s) 'rep' (int64[1,1]), which the model "
        "computes from constants alone (ConstantFolding computed them): shape inference "
        "(opset 13 schema) failed for inputs")
    assert "'Repeats' input must be 1D" in err.message
    assert err.message.endswith(
        "The input model is invalid as given (onnxruntime refuses it when it runs that node); "
        "fix it in the model or in the exporter that wrote it (--disable ConstantFolding "
        "compiles it as invalid as it is)")
    assert "bug in ge" not in err.message
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    with pytest.raises(ShapeInferenceError) as from_file:
        ge.compile(source)
    assert from_file.value.message.startswith(f"{source}: Tile node 'tile' rejects")
    assert from_file.value.path == str(source)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    ge.compile(source, disable=["ConstantFolding"]).save(out)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail):  # as the original
        ort.InferenceSession(str(source)).run(None, {"x": np.ones(3, np.float32)})


BREAKER = """
import numpy as np
from ge.ops import infer_node
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="Breaker", stage=PassStage.AFTER_INFER_SHAPE)
class Breaker(FusionBasePass):
    def run(self, graph, context):
        if not graph.has_node("cat") or graph.find_node_by_name("cat").get_inputs_size() != 1:
            return None
        cat = graph.find_node_by_name("cat")
        graph.set_inputs_size(cat, 2)
        graph.add_data_edge(graph.add_const(np.array([1], np.int64)), 0, cat, 1)
        for node in graph.get_direct_nodes():
            if node.type in ("Concat", "Reshape"):
                infer_node(node)
        return None
"""


@pytest.mark.builtin_passes
def test_what_folding_computed_from_a_plugins_change_blames_the_plugin(tmp_path: Path) -> None:
    """The model is valid; a plugin gave the Concat a second part before ConstantFolding
    ran: the plugin is named, not the input model (trial RR)."""
    plugin = tmp_path / "breaker.py"
    plugin.write_text(BREAKER)
    with isolated_plugin_state(), pytest.raises(PassRunError) as caught:
        ge.compile(_tile_of_folded_repeats(parts=1), pass_paths=[plugin])
    assert caught.value.code == "E13028" and caught.value.pass_name == "ConstantFolding"
    assert "A plugin pass before it may have left the graph so" in caught.value.message
    assert "Breaker" in caught.value.message and "invalid as given" not in caught.value.message


@pytest.mark.builtin_passes
def test_on_pass_failure_skip_skips_the_fold_a_node_rejects(tmp_path: Path) -> None:
    """Under on_pass_failure='skip' the fold's run is rolled back with a warning saying
    why, and the model is written as it was (trial RR: it stopped with GE1305)."""
    result = ge.compile(_tile_of_folded_repeats(), on_pass_failure="skip")
    said = [str(w) for w in result.warnings if "rolled back and skipped" in str(w)]
    assert said and all("[GE1305] Tile node 'tile' rejects its input(s) 'rep'" in w
                        for w in said)
    assert result.graph.count_of_type("Tile") == 1
    result.save(tmp_path / "out.onnx")


@pytest.mark.builtin_passes
def test_a_folded_value_contradicting_a_declared_output_is_no_verdict() -> None:
    """onnx accepts `Add(r, x)` with r folded to int64[1, 2]; only the output declared 1-D
    now differs (onnxruntime runs the model, with a warning): not "the input model is
    invalid" (trial RR), the check's own finding as before."""
    ints = onnx.numpy_helper.from_array
    graph = helper.make_graph(
        [helper.make_node("Compress", ["vals", "cond"], ["shp"], axis=0, name="compress"),
         helper.make_node("Reshape", ["rep1", "shp"], ["r"], name="resh"),
         helper.make_node("Add", ["r", "x"], ["y"], name="add")],
        "g", [helper.make_tensor_value_info("x", TensorProto.INT64, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["M"])],
        [ints(np.array([1, 2, 0], np.int64), "vals"),
         ints(np.array([True, True, False]), "cond"), ints(np.array([7, 8], np.int64), "rep1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(PassRunError) as caught:
        ge.compile(model)
    assert "invalid as given" not in caught.value.message
    assert "output 0 of Add node 'add' is TensorDesc(int64[M])" in caught.value.message


def test_an_unnamed_operator_of_a_later_opset_is_named_by_what_it_computes(
        tmp_path: Path) -> None:
    """A node the model gives no name is named as loading names it (ge's name for it,
    'Gelu', is in no file), by what it computes, in the compilation's words for an operator
    of a later opset (`ge.graph.places.ir_node_label`); err.nodes keeps ge's name."""
    model = _model_with("Gelu", 17)
    model.graph.node[1].name = ""
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(source)
    assert caught.value.message.startswith(
        f"{source}: graph 'g': unnamed Gelu node (computing 'b'): Gelu is an operator of "
        "opset 20 and later, and the model imports opset 17;")
    assert list(caught.value.nodes) == ["Gelu"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_many_problems_are_listed_ten_and_counted(tmp_path: Path) -> None:
    """Trial AA: one exporter mistake in every layer (a ReduceMean given its axes as an
    input at opset 13) made a GE1003 of 4,764 problems, one line of about 1 MB. The message
    lists the first 10 and counts the others by kind; `problems` (and --json) has all."""
    nodes, previous = [], "x"
    for i in range(40):
        nodes.append(helper.make_node("ReduceMean", [previous, "axes"], [f"r{i}"],
                                      name=f"rm{i}"))
        previous = f"r{i}"
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(previous, onnx.TensorProto.FLOAT, None)],
        [helper.make_tensor("axes", onnx.TensorProto.INT64, [1], [1])])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), source)
    with pytest.raises(GraphValidationError) as caught:
        ge.compile(source)
    err = caught.value
    assert len(err.problems) == 40 and err.message.count("\n  - ") == 11
    assert err.message.startswith(f"{source}: graph is invalid (40 problem(s)):\n  - graph g: "
                                  "onnx-checker: ReduceMean node 'rm0': ")
    assert "'rm9'" in err.message and "'rm10'" not in err.message
    assert err.message.endswith("\n  - and 30 more (onnx-checker: 30; the error's "
                                "`problems`, and --json, list every one)")
    code, stderr = _compile_cli(source, out)
    assert code == 1 and not out.exists() and stderr.count("\n") == 1
    assert len(stderr) < 2500
    from click.testing import CliRunner

    from ge.cli import cli

    ran = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--json"])
    listed = json.loads(ran.stdout)["problems"]
    assert [p["nodes"] for p in listed] == [[f"rm{i}"] for i in range(40)]
    assert {p["kind"] for p in listed} == {"onnx-checker"} and not out.exists()
