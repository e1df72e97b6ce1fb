"""The batch-norm folding fusions (built-in): `ConvBatchNormFusion`, `ConvAddMulFusion`,
`GemmBatchNormFusion`. Each fires on a model built for it and on nothing else; the rewritten
model passes onnx's full checker, keeps its output names and computes what the original
computes in onnxruntime (rtol = atol = 1e-4). Passes run as the engine runs them (an
`Invocation`); the vendored MobileNet with BatchNormalization compiles through `ge.compile`
with the fusion added to the built-in passes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from builtin_helpers import (
    F,
    assert_fused,
    histogram,
    init,
    load,
    model,
    ort_run,
    run_pass,
    sidecar_feeds,
    vi,
)
from onnx import helper

import ge
import ge.compiler.builtin
from ge.compiler.builtin.fusion_conv_affine import ConvAddMulFusion, ConvBatchNormFusion
from ge.compiler.builtin.fusion_gemm import MatMulAddFusion
from ge.compiler.builtin.fusion_linear_affine import GemmBatchNormFusion
from model_paths import all_shared_models, shared_model

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about built-in passes
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

node = helper.make_node
MODELS = all_shared_models()
FUSIONS = (ConvBatchNormFusion, ConvAddMulFusion, MatMulAddFusion, GemmBatchNormFusion)
F16 = onnx.TensorProto.FLOAT16
RNG = np.random.default_rng(0)


def assert_untouched(pass_class: type, source: onnx.ModelProto, tmp_path: Path) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(pass_class, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def bn_inits(c: int, prefix: str = "bn") -> list[onnx.TensorProto]:
    """scale, bias, mean, var of a BatchNormalization over `c` channels (var > 0)."""
    return [init(f"{prefix}_s", rand(c)), init(f"{prefix}_b", rand(c)),
            init(f"{prefix}_m", rand(c)), init(f"{prefix}_v", RNG.uniform(0.5, 2.0, c))]


def bn(x: str, y: str, prefix: str = "bn", **attrs: Any) -> onnx.NodeProto:
    return node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b", f"{prefix}_m",
                                       f"{prefix}_v"], [y], name=prefix, **attrs)


# -- ConvBatchNormFusion --------------------------------------------------------------------


def conv_bn(*, bias: bool = False, group: int = 1, cout: int = 6, spatial: Sequence[int] = (6, 6),
            weight_input: bool = False, scale_input: bool = False,
            extra: Sequence[onnx.NodeProto] = (), outputs: Sequence[onnx.ValueInfoProto] = (),
            bn_attrs: dict[str, Any] | None = None, opset: int = 17,
            check: bool = True) -> onnx.ModelProto:
    """y = BN(Conv(x, w[, b])): x [2, 4, *spatial], w [cout, 4 / group, 3, ...], pads 1."""
    cin, k = 4, len(spatial)
    x = vi("x", F, [2, cin, *spatial])
    w_shape = (cout, cin // group, *[3] * k)
    inputs, inits = [x], bn_inits(cout)
    if weight_input:
        inputs.append(vi("w", F, list(w_shape)))
    else:
        inits.append(init("w", rand(*w_shape)))
    if scale_input:
        inits = [i for i in inits if i.name != "bn_s"]
        inputs.append(vi("bn_s", F, [cout]))
    conv_in = ["x", "w"]
    if bias:
        inits.append(init("cb", rand(cout)))
        conv_in.append("cb")
    nodes = [node("Conv", conv_in, ["c"], name="conv", group=group, pads=[1] * (2 * k),
                  kernel_shape=[3] * k), bn("c", "y", **(bn_attrs or {})), *extra]
    return model(nodes, inputs, [vi("y", F, [2, cout, *spatial]), *outputs], inits,
                 opset=opset, check=check)


@pytest.mark.parametrize(("bias", "group", "cout", "spatial"),
                         [(False, 1, 6, (6, 6)), (True, 1, 6, (6, 6)), (True, 2, 6, (6, 6)),
                          (False, 4, 4, (6, 6)), (True, 1, 6, (7,)), (False, 1, 6, (3, 4, 5))],
                         ids=["no-bias", "bias", "grouped", "depthwise", "conv1d", "conv3d"])
def test_conv_bn_folds_into_one_conv(bias: bool, group: int, cout: int,
                                     spatial: tuple[int, ...], tmp_path: Path) -> None:
    source = conv_bn(bias=bias, group=group, cout=cout, spatial=spatial)
    graph = load(source)
    assert run_pass(ConvBatchNormFusion, graph)
    hist = histogram(graph)
    assert hist.get("Conv") == 1 and "BatchNormalization" not in hist
    saved = assert_fused(graph, source, tmp_path)
    (conv,) = [n for n in saved.graph.node if n.op_type == "Conv"]
    assert len(conv.input) == 3 and list(conv.output) == ["y"]
    attrs = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
    assert attrs["group"] == group and attrs["pads"] == [1] * (2 * len(spatial))


def conv_transpose_bn(*, bias: bool, group: int, cout: int = 6, strides: int = 2
                      ) -> onnx.ModelProto:
    """y = BN(ConvTranspose(x, w[, b])): x [2, 4, 5, 5], w [4, cout / group, 3, 3] (a decoder
    or segmentation head's upsampling; the TorchScript export keeps the BN after it)."""
    cin = 4
    inits = [init("w", rand(cin, cout // group, 3, 3)), *bn_inits(cout)]
    conv_in = ["x", "w"]
    if bias:
        inits.append(init("cb", rand(cout)))
        conv_in.append("cb")
    nodes = [node("ConvTranspose", conv_in, ["c"], name="deconv", group=group,
                  strides=[strides, strides], pads=[1, 1, 1, 1], output_padding=[1, 1]),
             bn("c", "y")]
    size = (5 - 1) * strides - 2 + 3 + 1
    return model(nodes, [vi("x", F, [2, cin, 5, 5])], [vi("y", F, [2, cout, size, size])],
                 inits)


@pytest.mark.parametrize(("bias", "group", "cout"),
                         [(False, 1, 6), (True, 1, 6), (True, 2, 6), (False, 4, 4)],
                         ids=["no-bias", "bias", "grouped", "depthwise"])
def test_conv_transpose_bn_folds_into_one_conv_transpose(bias: bool, group: int, cout: int,
                                                         tmp_path: Path) -> None:
    """ConvTranspose's weight is [C_in, C_out / group, k...]: each output channel is a
    column within its group of rows (onnxscript and onnxruntime fold it; ge left the BN)."""
    source = conv_transpose_bn(bias=bias, group=group, cout=cout)
    graph = load(source)
    assert run_pass(ConvBatchNormFusion, graph)
    hist = histogram(graph)
    assert hist.get("ConvTranspose") == 1 and "BatchNormalization" not in hist
    saved = assert_fused(graph, source, tmp_path)  # onnxruntime: same outputs as the source
    (deconv,) = [n for n in saved.graph.node if n.op_type == "ConvTranspose"]
    assert len(deconv.input) == 3 and list(deconv.output) == ["y"]
    attrs = {a.name: helper.get_attribute_value(a) for a in deconv.attribute}
    assert attrs["group"] == group and attrs["strides"] == [2, 2]
    assert attrs["output_padding"] == [1, 1]


def test_conv_bn_at_opset_9_and_14(tmp_path: Path) -> None:
    for opset in (9, 14):
        source = conv_bn(opset=opset, bias=True)
        graph = load(source)
        assert run_pass(ConvBatchNormFusion, graph)
        assert "BatchNormalization" not in histogram(graph)
        assert_fused(graph, source, tmp_path)


def test_conv_bn_float16(tmp_path: Path) -> None:
    x = vi("x", F16, [1, 3, 5, 5])
    inits = [init("w", rand(4, 3, 3, 3), np.float16)] + [
        init(i.name, onnx.numpy_helper.to_array(i), np.float16) for i in bn_inits(4)]
    source = model([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), bn("c", "y")], [x],
                   [vi("y", F16, [1, 4, 5, 5])], inits)
    graph = load(source)
    assert run_pass(ConvBatchNormFusion, graph)
    assert "BatchNormalization" not in histogram(graph)
    saved = assert_fused(graph, source, tmp_path, tol=5e-2)
    weights = {i.name: i for i in saved.graph.initializer}
    assert all(w.data_type == onnx.TensorProto.FLOAT16 for w in weights.values())


def test_conv_bn_not_when_the_conv_output_is_also_a_graph_output(tmp_path: Path) -> None:
    assert_untouched(ConvBatchNormFusion, conv_bn(outputs=[vi("c", F, [2, 6, 6, 6])]),
                     tmp_path)


def test_conv_bn_not_when_the_conv_output_has_another_consumer(tmp_path: Path) -> None:
    source = conv_bn(extra=[node("Relu", ["c"], ["r"])], outputs=[vi("r", F, [2, 6, 6, 6])])
    assert_untouched(ConvBatchNormFusion, source, tmp_path)


def test_conv_bn_not_with_a_non_constant_weight_or_statistic(tmp_path: Path) -> None:
    assert_untouched(ConvBatchNormFusion, conv_bn(weight_input=True), tmp_path)
    assert_untouched(ConvBatchNormFusion, conv_bn(scale_input=True), tmp_path)


def with_running_outputs(source: onnx.ModelProto, *, saved: bool = False) -> onnx.ModelProto:
    """The model with its BatchNormalization also computing running mean and variance
    (unused), as training mode requires from opset 14 (`saved`: and the saved mean and
    variance, as opset 9 wants all four)."""
    bn_node = next(n for n in source.graph.node if n.op_type == "BatchNormalization")
    bn_node.output.extend(["running_mean", "running_var"])
    if saved:
        bn_node.output.extend(["saved_mean", "saved_var"])
    onnx.checker.check_model(source, full_check=True)
    return source


def test_conv_bn_not_in_training_mode() -> None:
    source = with_running_outputs(conv_bn(bn_attrs={"training_mode": 1}, check=False))
    graph = load(source)
    assert not run_pass(ConvBatchNormFusion, graph)
    assert histogram(graph).get("BatchNormalization") == 1


def test_conv_bn_not_with_running_statistics_outputs() -> None:
    # Opset 9: the optional outputs (running mean / var, saved mean / var) mean training,
    # whether or not anything reads them.
    source = with_running_outputs(conv_bn(opset=9, check=False), saved=True)
    graph = load(source)
    assert not run_pass(ConvBatchNormFusion, graph)
    assert histogram(graph).get("BatchNormalization") == 1


def test_conv_bn_not_when_the_variance_makes_it_undefined(tmp_path: Path) -> None:
    source = conv_bn()
    var = next(i for i in source.graph.initializer if i.name == "bn_v")
    var.CopyFrom(init("bn_v", -np.ones(6)))
    graph = load(source)
    assert not run_pass(ConvBatchNormFusion, graph)


# -- ConvAddMulFusion -----------------------------------------------------------------------


def conv_then(ops: Sequence[tuple[str, Sequence[int] | None, bool]], *, bias: bool = False,
              operand_input: bool = False, outputs: Sequence[onnx.ValueInfoProto] = (),
              extra: Sequence[onnx.NodeProto] = (),
              y_shape: Sequence[int] = (2, 4, 5, 5)) -> onnx.ModelProto:
    """Conv(x [2, 3, 5, 5], w [4, 3, 3, 3]) then each (op, constant shape, constant first)
    in turn; the last result is y. A None shape is the `[1, 4, 1, 1]` per-channel one."""
    inits = [init("w", rand(4, 3, 3, 3))]
    inputs = [vi("x", F, [2, 3, 5, 5])]
    conv_in = ["x", "w"]
    if bias:
        inits.append(init("cb", rand(4)))
        conv_in.append("cb")
    nodes = [node("Conv", conv_in, ["t0"], name="conv", pads=[1, 1, 1, 1])]
    for k, (op, shape, first) in enumerate(ops):
        name = f"k{k}"
        shape = [1, 4, 1, 1] if shape is None else list(shape)
        if operand_input:
            inputs.append(vi(name, F, shape))
        else:
            value = RNG.uniform(0.5, 2.0, shape) if op == "Mul" else rand(*shape)
            inits.append(init(name, value))
        args = [name, f"t{k}"] if first else [f"t{k}", name]
        nodes.append(node(op, args, [f"t{k + 1}"], name=f"{op.lower()}{k}"))
    nodes[-1].output[0] = "y"
    return model([*nodes, *extra], inputs, [vi("y", F, list(y_shape)), *outputs], inits)


@pytest.mark.parametrize("shape", [[4, 1, 1], [1, 4, 1, 1], [], [1], [1, 1, 1, 1]], ids=str)
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_conv_mul_or_add_by_a_channel_constant_folds(op: str, bias: bool, shape: list[int],
                                                     tmp_path: Path) -> None:
    source = conv_then([(op, shape, False)], bias=bias)
    graph = load(source)
    assert run_pass(ConvAddMulFusion, graph)
    assert histogram(graph) == {"Data": 1, "Const": histogram(graph)["Const"], "Conv": 1,
                                "NetOutput": 1}
    saved = assert_fused(graph, source, tmp_path)
    (conv,) = saved.graph.node
    # Mul keeps "no bias" without one; Add makes one.
    assert len(conv.input) == (3 if bias or op == "Add" else 2)


def test_constant_first_operands_match_too(tmp_path: Path) -> None:
    source = conv_then([("Mul", [4, 1, 1], True), ("Add", [1, 4, 1, 1], True)])
    graph = load(source)
    assert run_pass(ConvAddMulFusion, graph)
    assert histogram(graph).get("Conv") == 1 and "Mul" not in histogram(graph)
    assert_fused(graph, source, tmp_path)


def test_a_decomposed_batch_norm_folds_in_one_run(tmp_path: Path) -> None:
    source = conv_then([("Mul", None, False), ("Mul", [4, 1, 1], False), ("Add", None, False),
                        ("Add", [], True)], bias=True)
    graph = load(source)
    assert run_pass(ConvAddMulFusion, graph)
    assert {k: v for k, v in histogram(graph).items() if k != "Const"} == {
        "Data": 1, "Conv": 1, "NetOutput": 1}
    assert_fused(graph, source, tmp_path)


@pytest.mark.parametrize("shape", [[5], [1, 1, 5, 5], [4, 5, 5], [1, 4, 1, 5], [1, 1, 4, 1, 1],
                                   [2, 1, 1, 1]], ids=str)
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_not_for_a_constant_that_varies_over_other_axes(op: str, shape: list[int],
                                                        tmp_path: Path) -> None:
    # A rank-5 constant broadcasts the output up to rank 5.
    y_shape = [1, 2, 4, 5, 5] if len(shape) > 4 else [2, 4, 5, 5]
    source = conv_then([(op, shape, False)], y_shape=y_shape)
    assert_untouched(ConvAddMulFusion, source, tmp_path)


def test_not_for_a_non_constant_operand(tmp_path: Path) -> None:
    assert_untouched(ConvAddMulFusion, conv_then([("Mul", None, False)], operand_input=True),
                     tmp_path)


def test_not_when_the_conv_output_is_used_elsewhere(tmp_path: Path) -> None:
    assert_untouched(ConvAddMulFusion, conv_then([("Add", None, False)],
                                                 outputs=[vi("t0", F, [2, 4, 5, 5])]), tmp_path)
    source = conv_then([("Mul", None, False)], extra=[node("Relu", ["t0"], ["r"])],
                       outputs=[vi("r", F, [2, 4, 5, 5])])
    assert_untouched(ConvAddMulFusion, source, tmp_path)


def test_not_for_a_non_constant_weight(tmp_path: Path) -> None:
    source = conv_then([("Mul", None, False)])
    weight = source.graph.initializer[0]
    del source.graph.initializer[0]
    source.graph.input.append(vi(weight.name, F, list(weight.dims)))
    onnx.checker.check_model(source, full_check=True)
    assert_untouched(ConvAddMulFusion, source, tmp_path)


# -- GemmBatchNormFusion --------------------------------------------------------------------


def linear_bn(producer: str = "Gemm", *, c_shape: Sequence[int] | None = (5,),
              trans_a: int = 0, trans_b: int = 0, alpha: float = 1.0, beta: float = 1.0,
              x_shape: Sequence[int] = (4, 3), weight_input: bool = False,
              outputs: Sequence[onnx.ValueInfoProto] = (),
              bn_attrs: dict[str, Any] | None = None, opset: int = 17,
              check: bool = True) -> onnx.ModelProto:
    """y = BN(Gemm(x, w[, c])) or BN(MatMul(x, w)) with 5 output features."""
    k = x_shape[-1] if not trans_a else x_shape[0]
    w_shape = (5, k) if trans_b else (k, 5)
    inputs, inits = [vi("x", F, list(x_shape))], bn_inits(5)
    if weight_input:
        inputs.append(vi("w", F, list(w_shape)))
    else:
        inits.append(init("w", rand(*w_shape)))
    if producer == "MatMul":
        product = node("MatMul", ["x", "w"], ["p"])
        out_shape = [*x_shape[:-1], 5]
    else:
        args = ["x", "w"]
        if c_shape is not None:
            inits.append(init("c", rand(*c_shape)))
            args.append("c")
        product = node("Gemm", args, ["p"], transA=trans_a, transB=trans_b, alpha=alpha,
                       beta=beta)
        out_shape = [x_shape[1] if trans_a else x_shape[0], 5]
    return model([product, bn("p", "y", **(bn_attrs or {}))], inputs,
                 [vi("y", F, out_shape), *outputs], inits, opset=opset, check=check)


@pytest.mark.parametrize("kwargs", [
    {}, {"c_shape": [4, 5]}, {"c_shape": [4, 1]}, {"c_shape": []}, {"c_shape": [1, 5]},
    {"c_shape": None}, {"trans_b": 1, "alpha": 0.5, "beta": 2.0},
    {"trans_a": 1, "trans_b": 1, "x_shape": (3, 4), "c_shape": [4, 1], "beta": -1.5},
], ids=["c", "c-mn", "c-m1", "c-scalar", "c-1n", "no-c", "transB-alpha-beta", "transA"])
def test_gemm_bn_folds_into_one_gemm(kwargs: dict[str, object], tmp_path: Path) -> None:
    source = linear_bn(**kwargs)  # type: ignore[arg-type]
    graph = load(source)
    assert run_pass(GemmBatchNormFusion, graph)
    assert {k: v for k, v in histogram(graph).items() if k != "Const"} == {
        "Data": 1, "Gemm": 1, "NetOutput": 1}
    saved = assert_fused(graph, source, tmp_path)
    (gemm,) = saved.graph.node
    attrs = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
    assert attrs.get("beta", 1.0) == 1.0 and list(gemm.output) == ["y"]


def test_matmul_bn_becomes_a_gemm(tmp_path: Path) -> None:
    source = linear_bn("MatMul")
    graph = load(source)
    assert run_pass(GemmBatchNormFusion, graph)
    assert {k: v for k, v in histogram(graph).items() if k != "Const"} == {
        "Data": 1, "Gemm": 1, "NetOutput": 1}
    assert_fused(graph, source, tmp_path)


def test_gemm_bn_at_opset_9_has_no_c_less_pattern(tmp_path: Path) -> None:
    source = linear_bn(opset=9)
    graph = load(source)
    assert run_pass(GemmBatchNormFusion, graph)
    assert_fused(graph, source, tmp_path)


def test_gemm_bn_not_on_a_3d_matmul(tmp_path: Path) -> None:
    # BatchNormalization of a [2, 4, 5] MatMul normalises axis 1 (4), not the features.
    source = model([node("MatMul", ["x", "w"], ["p"]), bn("p", "y")], [vi("x", F, [2, 4, 3])],
                   [vi("y", F, [2, 4, 5])], [init("w", rand(3, 5)), *bn_inits(4)])
    assert_untouched(GemmBatchNormFusion, source, tmp_path)


def test_gemm_bn_not_in_training_mode() -> None:
    graph = load(with_running_outputs(linear_bn(bn_attrs={"training_mode": 1}, check=False)))
    assert not run_pass(GemmBatchNormFusion, graph)


def test_gemm_bn_not_with_a_non_constant_weight(tmp_path: Path) -> None:
    assert_untouched(GemmBatchNormFusion, linear_bn(weight_input=True), tmp_path)
    assert_untouched(GemmBatchNormFusion, linear_bn("MatMul", weight_input=True), tmp_path)


def test_gemm_bn_not_when_the_product_is_used_elsewhere(tmp_path: Path) -> None:
    assert_untouched(GemmBatchNormFusion, linear_bn(outputs=[vi("p", F, [4, 5])]), tmp_path)


# -- the vendored models and the whole compiler ---------------------------------------------


def bn_after_conv(source: onnx.ModelProto) -> int:
    producers = {o: n.op_type for n in source.graph.node for o in n.output}
    return sum(1 for n in source.graph.node
               if n.op_type == "BatchNormalization" and producers.get(n.input[0]) == "Conv")


def test_mobilenet_bn_loses_every_batch_norm_and_shrinks(tmp_path: Path) -> None:
    path = shared_model("mobilenet_like_bn")
    source = onnx.load(path)
    assert bn_after_conv(source) == 9
    result = ge.compile(path, verify=True, inputs=sidecar_feeds(path)[0], rtol=1e-4,
                        atol=1e-4)
    assert result.verification is not None and result.verification.ok
    assert result.report.ops_before.get("BatchNormalization") == 9
    assert "BatchNormalization" not in result.report.ops_after
    assert result.report.ops_after["Conv"] == result.report.ops_before["Conv"] == 13
    assert result.report.rewrites_by_pass().get("ConvBatchNormFusion") == 9
    out = tmp_path / "mobilenet.onnx"
    result.save(out)
    saved = onnx.load(out)
    onnx.checker.check_model(saved, full_check=True)
    assert bn_after_conv(saved) == 0
    assert out.stat().st_size < path.stat().st_size  # the BN constants are gone
    assert [o.name for o in saved.graph.output] == [o.name for o in source.graph.output]
    for feeds in sidecar_feeds(path):
        for got, want in zip(ort_run(saved, feeds), ort_run(source, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_mobilenet_bn_with_the_fusion_alone(tmp_path: Path) -> None:
    path = shared_model("mobilenet_like_bn")
    graph = load(path)
    assert run_pass(ConvBatchNormFusion, graph)
    assert "BatchNormalization" not in histogram(graph)
    assert_fused(graph, onnx.load(path), tmp_path, sidecar_feeds(path))


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_vendored_model_keeps_its_numbers(path: Path, tmp_path: Path) -> None:
    graph = load(path)
    for fusion in FUSIONS:
        run_pass(fusion, graph)
    assert_fused(graph, onnx.load(path), tmp_path, sidecar_feeds(path))


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_vendored_model_compiles_with_the_fusions(path: Path, tmp_path: Path) -> None:
    result = ge.compile(path, verify=True, inputs=sidecar_feeds(path)[0], rtol=1e-4,
                        atol=1e-4)
    assert result.verification is not None and result.verification.ok
    out = tmp_path / path.name
    result.save(out)
    saved = onnx.load(out)
    onnx.checker.check_model(saved, full_check=True)
    assert out.stat().st_size <= path.stat().st_size
    assert [o.name for o in saved.graph.output] == [o.name for o in
                                                     onnx.load(path).graph.output]


# -- sharing, bodies, attributes, overflow, a second run ------------------------------------


def test_a_weight_shared_with_another_conv_stays_for_it(tmp_path: Path) -> None:
    source = conv_bn(extra=[node("Conv", ["x", "w"], ["z"], pads=[1, 1, 1, 1])],
                     outputs=[vi("z", F, [2, 6, 6, 6])])
    graph = load(source)
    assert run_pass(ConvBatchNormFusion, graph)
    assert histogram(graph).get("Conv") == 2 and "BatchNormalization" not in histogram(graph)
    saved = assert_fused(graph, source, tmp_path)
    plain = next(n for n in saved.graph.node if list(n.output) == ["z"])
    assert list(plain.input) == ["x", "w"]


def test_conv_bn_with_auto_pad_and_strides(tmp_path: Path) -> None:
    source = model([node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2],
                         dilations=[1, 1]), bn("c", "y")],
                   [vi("x", F, [1, 4, 7, 7])], [vi("y", F, [1, 6, 4, 4])],
                   [init("w", rand(6, 4, 3, 3)), *bn_inits(6)])
    graph = load(source)
    assert run_pass(ConvBatchNormFusion, graph)
    saved = assert_fused(graph, source, tmp_path)
    (conv,) = saved.graph.node
    attrs = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
    assert attrs["auto_pad"] == b"SAME_UPPER" and attrs["strides"] == [2, 2]


def test_inside_an_if_branch_reading_outer_weights(tmp_path: Path) -> None:
    then = helper.make_graph([node("Conv", ["x", "w"], ["tc"], pads=[1, 1, 1, 1]),
                              bn("tc", "t")], "then", [], [vi("t", F, [2, 6, 5, 5])])
    other = helper.make_graph([node("Conv", ["x", "w"], ["ec"], pads=[1, 1, 1, 1]),
                               node("Add", ["ec", "k"], ["e"])], "else", [],
                              [vi("e", F, [2, 6, 5, 5])])
    source = model([node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                   [vi("cond", onnx.TensorProto.BOOL, []), vi("x", F, [2, 4, 5, 5])],
                   [vi("y", F, [2, 6, 5, 5])],
                   [init("w", rand(6, 4, 3, 3)), init("k", rand(6, 1, 1)), *bn_inits(6)])
    graph = load(source)
    assert run_pass(ConvBatchNormFusion, graph)
    assert run_pass(ConvAddMulFusion, graph)
    hist = histogram(graph, everywhere=True)
    assert "BatchNormalization" not in hist and "Add" not in hist and hist["Conv"] == 2
    x = rand(2, 4, 5, 5).astype(np.float32)
    assert_fused(graph, source, tmp_path,
                 [{"cond": np.array(flag), "x": x} for flag in (True, False)])


def test_not_when_a_folded_float16_weight_would_overflow(tmp_path: Path) -> None:
    source = model([node("Conv", ["x", "w"], ["c"]), node("Mul", ["c", "s"], ["y"])],
                   [vi("x", F16, [1, 3, 3, 3])], [vi("y", F16, [1, 2, 1, 1])],
                   [init("w", np.full((2, 3, 3, 3), 100.0), np.float16),
                    init("s", np.full((2, 1, 1), 1000.0), np.float16)])
    graph = load(source)
    assert not run_pass(ConvAddMulFusion, graph)


@pytest.mark.parametrize(("fusion", "source"), [
    (ConvBatchNormFusion, conv_bn(bias=True)),
    (ConvAddMulFusion, conv_then([("Mul", None, False), ("Add", None, False)])),
    (GemmBatchNormFusion, linear_bn()),
    (GemmBatchNormFusion, linear_bn("MatMul")),
], ids=["conv-bn", "conv-mul-add", "gemm-bn", "matmul-bn"])
def test_a_second_run_changes_nothing(fusion: type, source: onnx.ModelProto) -> None:
    graph = load(source)
    assert run_pass(fusion, graph)
    before = graph.mutation_count
    assert not run_pass(fusion, graph)
    assert graph.mutation_count == before


def test_the_folded_nodes_say_where_they_come_from() -> None:
    graph = load(conv_bn())
    assert run_pass(ConvBatchNormFusion, graph)
    (conv,) = graph.nodes_of_type("Conv")
    metadata = conv.get_metadata()
    assert metadata.get("ge.origin_pass") == "ConvBatchNormFusion"
    assert "conv" in metadata.get("ge.origin_nodes", "") and "bn" in metadata.get(
        "ge.origin_nodes", "")


def _initializer_names(graph: ge.graph.Graph) -> set[str]:
    return {init.name for init in graph.to_onnx().graph.initializer}


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_a_folded_conv_keeps_its_name_and_its_weights_say_whose_they_were(bias: bool) -> None:
    """The Conv after folding is named as the Conv it replaces (`conv`), its new weight
    after the old one (`w_folded`) and its new bias after the Conv's bias, or else the
    BatchNormalization's (`cb_folded` / `bn_b_folded`): tools keyed on node or weight names
    still find the module."""
    graph = load(conv_bn(bias=bias))
    assert run_pass(ConvBatchNormFusion, graph)
    (conv,) = graph.nodes_of_type("Conv")
    assert conv.name == "conv"
    bias_name = "cb_folded" if bias else "bn_b_folded"
    assert [conv.get_input_producer(i)[0].get_output_name(0) for i in (1, 2)] == [
        "w_folded", bias_name]
    assert {"w_folded", bias_name} <= _initializer_names(graph)


def test_a_weight_folded_twice_keeps_one_suffix() -> None:
    """Conv * s + a: the Mul fold makes `w_folded`, the Add fold then names its bias after
    the Add's constant; the weight keeps one `_folded` (a fresh number, not `_folded_folded`)."""
    c = 6
    nodes = [node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             node("Mul", ["c", "s"], ["m"], name="mul"), node("Add", ["m", "a"], ["y"], name="add")]
    source = model(nodes, [vi("x", F, [1, 4, 3, 3])], [vi("y", F, [1, c, 3, 3])],
                   [init("w", rand(c, 4, 1, 1)), init("s", rand(1, c, 1, 1)),
                    init("a", rand(1, c, 1, 1))])
    graph = load(source)
    assert run_pass(ConvAddMulFusion, graph)
    (conv,) = graph.nodes_of_type("Conv")
    assert conv.name == "conv"
    names = [conv.get_input_producer(i)[0].get_output_name(0) for i in (1, 2)]
    assert names[1] == "a_folded"
    assert names[0].startswith("w_folded") and "_folded_folded" not in names[0]


def test_a_matmul_bn_gemm_takes_the_matmuls_name() -> None:
    graph = load(linear_bn("MatMul"))
    (matmul,) = graph.nodes_of_type("MatMul")
    assert run_pass(GemmBatchNormFusion, graph)
    (gemm,) = graph.nodes_of_type("Gemm")
    assert gemm.name == matmul.name
    assert [gemm.get_input_producer(i)[0].get_output_name(0) for i in (1, 2)] == [
        "w_folded", "bn_b_folded"]
