"""Operators onnxruntime defines beyond ONNX (com.microsoft): ge knows their signatures from
onnxruntime's schema registry and types their outputs with onnxruntime's inference, so
models holding them (onnxruntime's quantizer and optimisers write them) compile, verify and
save; pass authors build them with `ge.es.custom.operator`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.errors import OpNotFoundError, ShapeInferenceError
from ge.es import GraphBuilder
from ge.es.custom import operator
from ge.graph.tensor_desc import TensorDesc
from ge.ops import get_op_spec, model_inference
from ge.ops.runtime_ops import runtime_domains, runtime_op_spec

MS = "com.microsoft"
RNG = np.random.default_rng(0)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto],
           initializers: Sequence[onnx.TensorProto] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(MS, 1)])


def _weights(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32) * 0.1, name)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _descs(graph: ge.graph.Graph, op_type: str) -> list[TensorDesc]:
    return [n.get_output_desc(i) for n in graph.get_all_nodes() if n.type == op_type
            for i in range(n.get_outputs_size()) if n.get_output_name(i)]


def test_signatures_come_from_onnxruntime() -> None:
    spec = runtime_op_spec("FusedMatMul", MS, 1)
    assert spec is not None and spec.custom
    assert [p.name for p in spec.inputs] == ["A", "B"]
    assert {"alpha", "transA", "transB"} <= set(spec.attributes)
    assert get_op_spec("SkipLayerNormalization", 1, MS).max_output == 4
    assert runtime_op_spec("FusedMatMull", MS, 1) is None
    assert MS in runtime_domains() and "" not in runtime_domains()


def test_outputs_are_typed_by_onnxruntime_with_symbolic_dims() -> None:
    """FusedMatMul's product and SkipLayerNormalization's first and last outputs (the two
    in between absent) keep the input's `batch`."""
    nodes = [
        helper.make_node("FusedMatMul", ["x", "w"], ["p"], domain=MS, transB=1, alpha=0.5),
        helper.make_node("SkipLayerNormalization", ["p", "x", "gamma", "beta"],
                         ["y", "", "", "sum"], domain=MS, epsilon=1e-5),
        helper.make_node("Add", ["y", "sum"], ["out"]),
    ]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 16])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 8, 16])],
                   [_weights("w", 16, 16), _weights("gamma", 16), _weights("beta", 16)])
    result = ge.compile(model, verify=True)
    assert result.verification is not None and result.verification.ok
    assert _descs(result.graph, "FusedMatMul") == [TensorDesc(["batch", 8, 16])]
    assert _descs(result.graph, "SkipLayerNormalization") == [TensorDesc(["batch", 8, 16])] * 2
    saved = result.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    assert [n.op_type for n in saved.graph.node if n.domain == MS] == [
        "FusedMatMul", "SkipLayerNormalization"]


def test_a_scalar_and_an_unknown_rank_are_told_apart() -> None:
    """onnxruntime lists both as shape []: their Shape's length settles which."""
    scalar = _model(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS),
         helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]),
         helper.make_tensor("z", TensorProto.UINT8, [], [3])])
    assert _descs(ge.compile(scalar).graph, "QuantizeLinear") == [
        TensorDesc([], data_type=ge.graph.DataType.DT_UINT8)]
    unknown = _model(
        [helper.make_node("ExpandDims", ["x", "axis"], ["e"], domain=MS),
         helper.make_node("Relu", ["e"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("axis", TensorProto.INT32, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    (desc,) = _descs(ge.compile(unknown).graph, "ExpandDims")
    assert desc.get_shape().is_unknown_rank()
    assert desc.data_type == ge.graph.DataType.DT_FLOAT


def test_a_node_onnxruntime_refuses_is_ge1305_and_nothing_is_written(tmp_path: Path) -> None:
    """FusedMatMul of int32 values, a type its schema does not allow."""
    model = _model(
        [helper.make_node("FusedMatMul", ["x", "x"], ["p"], domain=MS, name="fmm"),
         helper.make_node("Cast", ["p"], ["y"], to=TensorProto.FLOAT)],
        [helper.make_tensor_value_info("x", TensorProto.INT32, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(source)
    err = caught.value
    assert err.code == "GE1305" and err.stage == "InferShape"
    assert err.path == str(source)  # (a path given: named)
    assert err.message == (
        f"{source}: com.microsoft.FusedMatMul node 'fmm': onnxruntime "
        f"{onnxruntime.__version__} "
        "refuses it: Type Error: Type 'tensor(int32)' of input parameter "
        "(input 0) of operator (FusedMatMul) is invalid.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_a_long_chain_is_typed_node_by_node_past_the_whole_model_rounds() -> None:
    """More links than `_WHOLE_MODEL_ROUNDS`: the rest of the chain is typed node by node,
    every value keeps `batch`, and the compiled model computes what the original does."""
    links = model_inference._WHOLE_MODEL_ROUNDS * 3
    nodes, weights, previous = [], [], "x"
    for i in range(links):
        weights += [_weights(f"w{i}", 16, 16), _weights(f"b{i}", 16)]
        nodes += [helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"]),
                  helper.make_node("BiasGelu", [f"m{i}", f"b{i}"], [f"g{i}"], domain=MS),
                  helper.make_node("Relu", [f"g{i}"], [f"r{i}"])]
        previous = f"r{i}"
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                   [helper.make_tensor_value_info(previous, TensorProto.FLOAT, ["batch", 16])],
                   weights)
    result = ge.compile(model, verify=True, dims={"batch": 3})
    assert result.verification is not None and result.verification.ok
    for op_type in ("MatMul", "BiasGelu", "Relu"):
        assert _descs(result.graph, op_type) == [TensorDesc(["batch", 16])] * links


def test_a_model_onnxruntime_optimised_compiles(tmp_path: Path, shared_models: Path) -> None:
    """vit_tiny as onnxruntime's extended offline optimisation writes it (FusedMatMul, Gelu,
    SkipLayerNormalization of com.microsoft): compiled, verified, saved, reloadable."""
    optimised = tmp_path / "vit_ort.onnx"
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimised)
    onnxruntime.InferenceSession(str(shared_models / "vit_tiny.onnx"), options,
                                 providers=["CPUExecutionProvider"])
    contrib = {n.op_type for n in onnx.load(optimised).graph.node if n.domain == MS}
    assert {"FusedMatMul", "SkipLayerNormalization"} <= contrib
    result = ge.compile(optimised, verify=True)
    assert result.verification is not None and result.verification.ok
    out = tmp_path / "out.onnx"
    result.save(out)
    onnx.checker.check_model(str(out), full_check=True)
    feeds = {"pixel_values": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)}
    expected = _run(onnx.load(shared_models / "vit_tiny.onnx"), feeds)[0]
    np.testing.assert_allclose(_run(onnx.load(out), feeds)[0], expected, rtol=1e-4, atol=1e-4)


def test_a_model_quantized_to_qlinear_operators_compiles(tmp_path: Path,
                                                         shared_models: Path) -> None:
    """onnxruntime's quantizer in its QOperator format writes QLinearAdd, QLinearMul and
    QLinearGlobalAveragePool of com.microsoft beside ONNX's QLinearConv."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"input": RNG.standard_normal((1, 3, 32, 32)).astype(
                np.float32)} for _ in range(4)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    quantized = tmp_path / "mobilenet_qop.onnx"
    quantize_static(str(shared_models / "mobilenet_like.onnx"), str(quantized), Calibration(),
                    quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    contrib = {n.op_type for n in onnx.load(quantized).graph.node if n.domain == MS}
    assert contrib, "the quantizer wrote no com.microsoft operator"
    result = ge.compile(quantized, verify=True)
    assert result.verification is not None and result.verification.ok
    saved = result.to_onnx()
    assert {n.op_type for n in saved.graph.node if n.domain == MS} == contrib
    onnx.checker.check_model(saved, full_check=True)


def test_es_builds_an_operator_onnxruntime_defines() -> None:
    builder = GraphBuilder("g")
    x = builder.create_input(0, name="x", shape=["n", 8, 16])
    w = builder.create_input(1, name="w", shape=[16, 16])
    fused = operator("FusedMatMul", MS)
    graph = builder.build_and_reset([fused(x, w, alpha=0.5, transB=1)])
    assert graph.opset_imports[MS] == 1
    assert _descs(graph, "FusedMatMul") == [TensorDesc(["n", 8, 16])]
    xs = RNG.standard_normal((2, 8, 16)).astype(np.float32)
    ws = RNG.standard_normal((16, 16)).astype(np.float32)
    (got,) = _run(graph.to_onnx(), {"x": xs, "w": ws})
    np.testing.assert_allclose(got, 0.5 * xs @ ws.T, rtol=1e-5, atol=1e-5)


def test_es_refuses_an_operator_nobody_defines() -> None:
    with pytest.raises(OpNotFoundError) as caught:
        operator("FusedMatMull", MS)
    assert caught.value.code == "GE1302"
    assert caught.value.message == (
        "custom operator com.microsoft::FusedMatMull is not registered (and onnxruntime "
        "defines no such operator)")


def _docs_plugin() -> str:
    """The plugin of docs/ops.md that fuses into com.microsoft::FusedMatMul."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "ops.md").read_text()
    blocks = [b for b in text.split("```python\n")[1:]
              if b.startswith("# plugin: fuse_transposed_matmul.py")]
    assert len(blocks) == 1
    return blocks[0].split("```")[0]


def test_the_docs_plugin_fuses_into_an_onnxruntime_operator(tmp_path: Path) -> None:
    plugin = tmp_path / "fuse_transposed_matmul.py"
    plugin.write_text(_docs_plugin())
    model = _model(
        [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
         helper.make_node("MatMul", ["x", "wt"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [_weights("w", 8, 16)])
    result = ge.compile(model, pass_paths=[plugin], verify=True, builtin_passes=False)
    assert result.verification is not None and result.verification.ok
    assert result.report.rewrites_by_pass().get("FuseTransposedMatMul") == 1
    saved = result.to_onnx()
    assert [(n.domain, n.op_type) for n in saved.graph.node] == [(MS, "FusedMatMul")]
    assert {o.domain: o.version for o in saved.opset_import}[MS] == 1
    xs = RNG.standard_normal((3, 16)).astype(np.float32)
    w = numpy_helper.to_array(next(t for t in saved.graph.initializer))
    np.testing.assert_allclose(_run(saved, {"x": xs})[0], xs @ w.T, rtol=1e-5, atol=1e-5)


def test_a_model_with_onnxruntime_layout_operators_compiles_and_runs(
        tmp_path: Path, shared_models: Path) -> None:
    """At ORT_ENABLE_ALL onnxruntime writes operators of com.microsoft.nchwc (ReorderInput,
    its blocked Conv): typed, verified (onnxruntime runs them itself, no plugin asked for)
    and run by `ge run`."""
    from click.testing import CliRunner

    from ge.cli import cli

    optimised = tmp_path / "mobilenet_all.onnx"
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(optimised)
    options.log_severity_level = 3
    onnxruntime.InferenceSession(str(shared_models / "mobilenet_like_bn.onnx"), options,
                                 providers=["CPUExecutionProvider"])
    domains = {n.domain for n in onnx.load(optimised).graph.node}
    if "com.microsoft.nchwc" not in domains:
        pytest.skip("this CPU's onnxruntime writes no NCHWc operators")
    result = ge.compile(optimised, verify=True)
    assert result.verification is not None and result.verification.ok
    ran = CliRunner().invoke(cli, ["run", str(optimised), "--output", str(tmp_path / "o.npz")])
    assert ran.exit_code == 0, ran.output
    assert np.load(tmp_path / "o.npz")["output"].shape == (1, 10)


@pytest.mark.parametrize(("node", "declared", "message"), [
    (helper.make_node("FusedMatmul", ["x", "w"], ["y"], domain=MS, name="fm"), [2, 4],
     "node 'fm': custom operator com.microsoft::FusedMatmul is not registered (onnxruntime "
     f"{onnxruntime.__version__} defines no operator FusedMatmul in 'com.microsoft' either); "
     "a plugin registers it with ge.ops.register_op (its shape inference, and a kernel or a "
     "decomposition to run it)"),
    (helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain=MS, name="fm", alpah=2.0),
     [2, 4], f"com.microsoft.FusedMatMul node 'fm': onnxruntime {onnxruntime.__version__} "
     "refuses it: Unrecognized attribute: alpah for operator FusedMatMul"),
    (helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain=MS, name="fm"), [2, 5],
     "com.microsoft.FusedMatMul node 'fm': the model declares output 0 as "
     "TensorDesc(float32[2,5]), onnxruntime "
     f"{onnxruntime.__version__} infers TensorDesc(float32[2,4]) from its inputs"),
    # a node the model gives no name: named by what it computes, not by ge's name for it
    # ('FusedMatmul', in no file), as loading names it
    (helper.make_node("FusedMatmul", ["x", "w"], ["y"], domain=MS), [2, 4],
     "unnamed com.microsoft.FusedMatmul node (computing 'y'): custom operator "
     "com.microsoft::FusedMatmul is not registered (onnxruntime "
     f"{onnxruntime.__version__} defines no operator FusedMatmul in 'com.microsoft' either); "
     "a plugin registers it with ge.ops.register_op (its shape inference, and a kernel or a "
     "decomposition to run it)"),
    (helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain=MS, alpah=2.0), [2, 4],
     "unnamed com.microsoft.FusedMatMul node (computing 'y'): onnxruntime "
     f"{onnxruntime.__version__} refuses it: Unrecognized attribute: alpah for operator "
     "FusedMatMul"),
    (helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain=MS), [2, 5],
     "unnamed com.microsoft.FusedMatMul node (computing 'y'): the model declares output 0 as "
     "TensorDesc(float32[2,5]), onnxruntime "
     f"{onnxruntime.__version__} infers TensorDesc(float32[2,4]) from its inputs"),
], ids=["misspelled", "attribute", "declared-shape", "unnamed-misspelled", "unnamed-attribute",
        "unnamed-declared-shape"])
def test_a_node_whose_outputs_the_model_declares_is_checked_too(
        node: onnx.NodeProto, declared: list[int], message: str, tmp_path: Path) -> None:
    """A graph output's type is declared, so inference need not run for its producer: the
    node is still checked against onnxruntime (onnxruntime would not load the model)."""
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, declared)],
                   [_weights("w", 4, 4)])
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(source)
    assert (caught.value.code, caught.value.stage) == ("GE1305", "InferShape")
    assert caught.value.message == f"{source}: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_an_operator_onnxruntime_writes_in_the_onnx_domain_is_explained(
        tmp_path: Path, shared_models: Path) -> None:
    """onnxruntime's optimiser writes SimplifiedLayerNormalization (T5's RMS norms) in the
    ONNX domain, where ONNX has no such operator: onnx.checker rejects the model, so ge,
    which writes no model it rejects, refuses it, saying where the operator comes from."""
    optimised = tmp_path / "t5_ort.onnx"
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimised)
    onnxruntime.InferenceSession(str(shared_models / "t5_encoder_tiny.onnx"), options,
                                 providers=["CPUExecutionProvider"])
    rms = [n for n in onnx.load(optimised).graph.node
           if n.op_type == "SimplifiedLayerNormalization" and not n.domain]
    assert rms
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(optimised, verify=True)
    assert caught.value.code == "GE1305"
    assert caught.value.message == (
        f"{optimised}: graph 'main_graph': SimplifiedLayerNormalization node {rms[0].name!r}: "
        "onnxruntime "
        "defines SimplifiedLayerNormalization in domain 'ai.onnx' at opset 17, ONNX does not "
        "(onnxruntime's optimiser writes it there, so the model was most likely saved from an "
        "onnxruntime session); onnx.checker rejects the model, and ge writes no model it "
        f"rejects: compile the model as it was before it was optimised (and {len(rms) - 1} more)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t5_ort.onnx"]


def test_a_model_onnxruntime_cannot_load_is_not_blamed_on_generated_inputs(
        tmp_path: Path) -> None:
    """A float32 bias in a float16 BiasGelu: onnxruntime refuses to load the model, which no
    input could change, so neither `--verify` nor `ge run` suggests giving real inputs; a
    compilation says what its inference says, with `--verify` as without (it was the run's
    GE1601 with it, GE1305 without: trial Q)."""
    from click.testing import CliRunner

    from ge.cli import cli
    from ge.errors import ShapeInferenceError

    model = _model(
        [helper.make_node("BiasGelu", ["x", "b"], ["y"], domain=MS, name="bg")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])],
        [_weights("b", 4)])
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    said = []
    for verify in (True, False):
        with pytest.raises(ShapeInferenceError) as caught:
            ge.compile(source, verify=verify)
        said.append((caught.value.code, caught.value.message))
    assert said[0] == said[1]
    assert said[0][0] == "GE1305" and said[0][1].startswith(
        f"{source}: com.microsoft.BiasGelu node 'bg': onnxruntime ")
    assert "generated" not in said[0][1]
    ran = CliRunner().invoke(cli, ["run", str(source)])
    assert ran.exit_code == 1
    assert ran.stderr.startswith(f"ge: [GE1601] {source}: onnxruntime cannot load graph 'g': ")
    assert "generated" not in ran.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_reports_and_diffs_tell_an_onnxruntime_operator_from_onnxs(tmp_path: Path) -> None:
    """ONNX's Gelu and com.microsoft's Gelu are two operators: the compile report counts
    them apart (as `ge inspect` writes them), and `ge diff` sees a swap of one for the other."""
    from click.testing import CliRunner

    from ge.cli import cli

    def gelus(second_domain: str) -> onnx.ModelProto:
        model = _model([helper.make_node("Gelu", ["x"], ["a"], name="first"),
                        helper.make_node("Gelu", ["a"], ["y"], domain=second_domain,
                                         name="second")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
        model.opset_import[0].version = 20
        return model

    result = ge.compile(gelus(MS))
    assert result.report.ops_before == {"Gelu": 1, "com.microsoft.Gelu": 1}
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(gelus(MS), a)
    onnx.save(gelus(""), b)
    diffed = CliRunner().invoke(cli, ["diff", str(a), str(b), "--json"])
    assert diffed.exit_code == 0, diffed.output
    data = json.loads(diffed.stdout)
    assert (data["ops_a"], data["ops_b"]) == ({"Gelu": 1, "com.microsoft.Gelu": 1}, {"Gelu": 2})


def test_absent_optional_outputs_do_not_keep_inference_going(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SkipLayerNormalization's mean and inverse std dev outputs are absent ("") in what
    onnxruntime's optimisers write; they counted as untyped, so whole-model inference ran
    once per node of the chain (37 runs on GPT-2, 1.1 s of 1.3). A bounded number now."""
    links = model_inference._WHOLE_MODEL_ROUNDS * 3
    nodes, weights, previous = [], [_weights("gamma", 16), _weights("beta", 16)], "x"
    for i in range(links):
        nodes.append(helper.make_node("SkipLayerNormalization", [previous, "x", "gamma", "beta"],
                                      [f"n{i}", "", "", f"s{i}"], domain=MS, epsilon=1e-5))
        previous = f"n{i}"
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 16])],
                   [helper.make_tensor_value_info(previous, TensorProto.FLOAT, ["b", 16])],
                   weights)
    runs = []
    real = model_inference._onnx_pass
    monkeypatch.setattr(model_inference, "_onnx_pass", lambda *a: runs.append(1) or real(*a))
    result = ge.compile(model)
    assert len(runs) <= model_inference._WHOLE_MODEL_ROUNDS + 2, len(runs)
    assert _descs(result.graph, "SkipLayerNormalization")[-1] == TensorDesc(["b", 16])
    assert result.report.ops_after == {"com.microsoft.SkipLayerNormalization": links, "Const": 2}


def test_a_decoder_block_as_onnxruntime_genai_writes_it_compiles_and_verifies() -> None:
    """SkipSimplifiedLayerNormalization (its mean and inv_std_var absent), the Q/K/V
    projections and GroupQueryAttention with a KV cache and rotary embedding, as
    onnxruntime-genai's model builder writes a Llama layer: typed by onnxruntime (the
    cache's `total` length kept), verified on real inputs."""
    heads, kv_heads, head, hidden = 4, 2, 16, 64
    nodes = [
        helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "g1"],
                         ["n1", "", "", "res1"], domain=MS, epsilon=1e-6),
        helper.make_node("MatMul", ["n1", "wq"], ["q"]),
        helper.make_node("MatMul", ["n1", "wk"], ["k"]),
        helper.make_node("MatMul", ["n1", "wv"], ["v"]),
        helper.make_node("GroupQueryAttention",
                         ["q", "k", "v", "past_key", "past_value", "seqlens_k",
                          "total_sequence_length", "cos", "sin"],
                         ["attn", "present_key", "present_value"], domain=MS,
                         num_heads=heads, kv_num_heads=kv_heads, do_rotary=1),
        helper.make_node("MatMul", ["attn", "wo"], ["o"]),
        helper.make_node("SkipSimplifiedLayerNormalization", ["o", "res1", "g2"],
                         ["y", "", "", "res2"], domain=MS, epsilon=1e-6),
    ]
    cache = ["batch", kv_heads, "past", head]
    present = ["batch", kv_heads, "total", head]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden]),
         helper.make_tensor_value_info("skip", TensorProto.FLOAT, ["batch", "seq", hidden]),
         helper.make_tensor_value_info("past_key", TensorProto.FLOAT, cache),
         helper.make_tensor_value_info("past_value", TensorProto.FLOAT, cache),
         helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]),
         helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden]),
         helper.make_tensor_value_info("present_key", TensorProto.FLOAT, present),
         helper.make_tensor_value_info("present_value", TensorProto.FLOAT, present)],
        [_weights("g1", hidden), _weights("g2", hidden), _weights("wq", hidden, heads * head),
         _weights("wk", hidden, kv_heads * head), _weights("wv", hidden, kv_heads * head),
         _weights("wo", heads * head, hidden), _weights("cos", 64, head // 2),
         _weights("sin", 64, head // 2)])
    inputs = {"x": RNG.standard_normal((1, 3, hidden)).astype(np.float32),
              "skip": RNG.standard_normal((1, 3, hidden)).astype(np.float32),
              "past_key": np.zeros((1, kv_heads, 5, head), np.float32),
              "past_value": np.zeros((1, kv_heads, 5, head), np.float32),
              "seqlens_k": np.array([7], np.int32),
              "total_sequence_length": np.array(8, np.int32)}
    result = ge.compile(model, inputs=inputs)
    assert result.verification is not None and result.verification.ok
    attention = [n for n in result.graph.get_all_nodes() if n.type == "GroupQueryAttention"]
    assert [attention[0].get_output_desc(i) for i in range(3)] == [
        TensorDesc(["batch", "seq", heads * head]), TensorDesc(present), TensorDesc(present)]


#: The imports of a plugin fusing into or out of FusedMatMul, with attributes compared.
FUSED_MATMUL_PLUGIN = '''
import ge.es.all as es
from ge.es.custom import operator
from ge.passes import (
    PassStage,
    PatternFusionPass,
    PatternMatcherConfigBuilder,
    pattern,
    register_fusion_pass,
)

FusedMatMul = operator("FusedMatMul", "com.microsoft")
'''

UNFUSE_PLUGIN = FUSED_MATMUL_PLUGIN + '''

@register_fusion_pass(name="PlainFusedMatMul", stage=PassStage.AFTER_INFER_SHAPE)
class PlainFusedMatMul(PatternFusionPass):
    """A FusedMatMul that does nothing MatMul does not (alpha 1, no transposes) -> MatMul."""

    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_ir_attr_match().build())

    @pattern
    def plain(self, inputs):
        return FusedMatMul(inputs[0], inputs[1], alpha=1.0, transA=0, transB=0)

    def replacement(self, inputs):
        return es.MatMul(inputs[0], inputs[1])
'''


def test_a_pattern_of_an_onnxruntime_operator_matches_its_default_attributes(
        tmp_path: Path) -> None:
    """With IR attribute matching, attributes a node leaves unset take the defaults of
    onnxruntime's schema, so a pattern spelling them out matches it (and not a node with
    another value)."""
    plugin = tmp_path / "plain_fused_matmul.py"
    plugin.write_text(UNFUSE_PLUGIN)
    nodes = [helper.make_node("FusedMatMul", ["x", "w"], ["a"], domain=MS, name="unset"),
             helper.make_node("FusedMatMul", ["a", "w"], ["y"], domain=MS, name="scaled",
                              alpha=0.5)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                   [_weights("w", 4, 4)])
    result = ge.compile(model, pass_paths=[plugin], verify=True, builtin_passes=False)
    assert result.verification is not None and result.verification.ok
    assert result.report.rewrites_by_pass() == {"PlainFusedMatMul": 1}
    assert [(n.domain, n.op_type) for n in result.to_onnx().graph.node] == [
        ("", "MatMul"), (MS, "FusedMatMul")]


BIAS_GELU_PLUGIN = '''
import ge.es.all as es
from ge.es.custom import operator
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

BiasGelu = operator("BiasGelu", "com.microsoft")


@register_fusion_pass(name="OrtBiasGelu", stage=PassStage.AFTER_INFER_SHAPE)
class OrtBiasGelu(PatternFusionPass):
    @pattern
    def erf_gelu(self, inputs):
        h = es.MatMul(inputs[0], inputs[1]) + inputs[2]
        return h * (es.Erf(h / 1.4142135) + 1.0) * 0.5

    def replacement(self, inputs):
        x, w, b = inputs
        return BiasGelu({first}, {second})
'''


def _mlp(gelu_is_output: bool) -> onnx.ModelProto:
    """x[2, 4, 8] -> MatMul -> + bias -> erf GELU (-> MatMul down_proj)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["h"]),
             helper.make_node("Div", ["h", "c1"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["h", "e1"], ["p"]),
             helper.make_node("Mul", ["p", "half"], ["g"], name="gelu_out")]
    if not gelu_is_output:
        nodes.append(helper.make_node("MatMul", ["g", "w2"], ["y"], name="down_proj"))
    out = ("g", [2, 4, 16]) if gelu_is_output else ("y", [2, 4, 8])
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8])],
                  [helper.make_tensor_value_info(out[0], TensorProto.FLOAT, out[1])],
                  [_weights("w", 8, 16), _weights("bias", 16), _weights("w2", 16, 8),
                   numpy_helper.from_array(np.array(1.4142135, np.float32), "c1"),
                   numpy_helper.from_array(np.array(1.0, np.float32), "one"),
                   numpy_helper.from_array(np.array(0.5, np.float32), "half")])


@pytest.mark.parametrize("gelu_is_output", [False, True], ids=["inner", "graph-output"])
def test_a_replacement_typed_otherwise_than_what_it_replaces_is_refused_there(
        gelu_is_output: bool, tmp_path: Path) -> None:
    """BiasGelu(bias, x) (inputs swapped) gives [16] where the GELU gave [2, 4, 16]: the
    pass fails naming both, at the replacement, rather than at the MatMul reading it (or
    not at all, when the GELU is a graph output)."""
    plugin = tmp_path / "bias_gelu.py"
    plugin.write_text(BIAS_GELU_PLUGIN.format(first="b", second="es.MatMul(x, w)"))
    source = tmp_path / "mlp.onnx"
    onnx.save(_mlp(gelu_is_output), source)
    with pytest.raises(ge.errors.PassRunError) as caught:
        ge.compile(source, pass_paths=[plugin], builtin_passes=False)
    assert caught.value.code == "E13028" and caught.value.pass_name == "OrtBiasGelu"
    assert ("RewriteError: [GE1502] output 0 of the replacement (com.microsoft.BiasGelu node "
            "'BiasGelu') is TensorDesc(float32[16]) where the output it replaces (Mul node "
            "'gelu_out') is TensorDesc(float32[2,4,16]): the nodes reading it expect the latter"
            ) in caught.value.message
    assert str(caught.value.location).startswith(str(plugin))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bias_gelu.py", "mlp.onnx"]
    # written the right way round, it fuses and verifies
    plugin.write_text(BIAS_GELU_PLUGIN.format(first="es.MatMul(x, w)", second="b"))
    result = ge.compile(source, pass_paths=[plugin], builtin_passes=False, verify=True)
    assert result.report.rewrites_by_pass() == {"OrtBiasGelu": 1}
    assert result.verification is not None and result.verification.ok


def test_a_replacement_onnxruntime_refuses_fails_the_pass(tmp_path: Path) -> None:
    """FusedMatMul(q, k, transB=1) for q[1,3,12,16] @ Transpose(k[1,12,3,16], perm=[0,2,3,1])
    (attention's scores): transB swaps the last two axes only, so onnxruntime refuses the
    node. The check after the pass asks onnxruntime and fails the pass at the plugin."""
    plugin = tmp_path / "scores.py"
    plugin.write_text(FUSED_MATMUL_PLUGIN + '''

@register_fusion_pass(name="ScoresToFusedMatMul", stage=PassStage.AFTER_INFER_SHAPE)
class ScoresToFusedMatMul(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_ir_attr_match().build())

    @pattern
    def transposed(self, inputs):
        return es.MatMul(inputs[0], es.Transpose(inputs[1], perm=[0, 2, 3, 1]))

    def replacement(self, inputs):
        return FusedMatMul(inputs[0], inputs[1], transB=1)
''')
    model = _model([helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
                    helper.make_node("MatMul", ["q", "kt"], ["s"]),
                    helper.make_node("Relu", ["s"], ["y"])],
                   [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 3, 12, 16]),
                    helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 12, 3, 16])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 12, 12])])
    source = tmp_path / "scores.onnx"
    onnx.save(model, source)
    with pytest.raises(ge.errors.PassRunError) as caught:
        ge.compile(source, pass_paths=[plugin], builtin_passes=False)
    assert caught.value.code == "E13028"
    assert ("com.microsoft.FusedMatMul node 'FusedMatMul': onnxruntime "
            f"{onnxruntime.__version__} refuses it: [ShapeInferenceError] Incompatible "
            "dimensions") in caught.value.message
    assert str(caught.value.location).startswith(str(plugin))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.onnx", "scores.py"]


def test_the_docs_plugin_leaves_attentions_transpose_alone(tmp_path: Path) -> None:
    """With IR attribute matching, the docs' `perm=[1, 0]` does not match attention's
    `Transpose(k, perm=[0, 2, 3, 1])` (which FusedMatMul's transB cannot express)."""
    plugin = tmp_path / "fuse_transposed_matmul.py"
    plugin.write_text(_docs_plugin())
    model = _model([helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
                    helper.make_node("MatMul", ["q", "kt"], ["y"])],
                   [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 3, 12, 16]),
                    helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 12, 3, 16])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 12, 12])])
    result = ge.compile(model, pass_paths=[plugin], builtin_passes=False, verify=True)
    assert result.report.rewrites_by_pass() == {}
    assert result.verification is not None and result.verification.ok
