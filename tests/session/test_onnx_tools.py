"""`upgraded_opset` gives onnx's version converter the model without its large tensors and
puts them back: the result is the whole-model conversion's, the converter never sees a
weight, and a stand-in it drops, copies or changes is never silently lost (the whole model
is converted instead, or GE1203 when protobuf cannot hold it)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, version_converter

import ge.graph
import ge.session.onnx_tools as onnx_tools
from ge.errors import CompileInputError, CompileWarning
from ge.graph import Graph
from ge.session.onnx_tools import STAND_IN_BYTES, upgraded_opset
from ge.testing import assert_numerically_equal
from model_paths import all_shared_models, shared_model
from versions import needs_opset

RNG = np.random.default_rng(0)
NEWEST = onnx.defs.onnx_opset_version()


def _weights(name: str, *shape: int, raw: bool = True) -> TensorProto:
    """Random float32 weights; `raw=False` stores them in float_data (a form kept as is)."""
    values = RNG.standard_normal(shape).astype(np.float32)
    if raw:
        return numpy_helper.from_array(values, name)
    return helper.make_tensor(name, TensorProto.FLOAT, list(shape), values.ravel().tolist())


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], initializers: list[TensorProto],
           opset: int) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _float(name: str, *shape: int | str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _split_squeeze_reduce_11() -> onnx.ModelProto:
    """Split's `split`, Squeeze/Unsqueeze's and ReduceSum's `axes` become inputs at 13;
    a Reshape's shape stays an initializer that shape inference reads."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Split", ["h"], ["a", "b"], axis=1, split=[24, 40]),
        helper.make_node("Unsqueeze", ["a"], ["a3"], axes=[0]),
        helper.make_node("Squeeze", ["a3"], ["a2"], axes=[0]),
        helper.make_node("ReduceSum", ["a2"], ["s"], axes=[1], keepdims=1),
        helper.make_node("MatMul", ["b", "w2"], ["c"]),
        helper.make_node("Reshape", ["c", "shape"], ["c2"]),
        helper.make_node("Mul", ["c2", "s"], ["y"]),
    ]
    return _model(nodes, [_float("x", 2, 64)], [_float("y", 2, 64)],
                  [_weights("w", 64, 64), _weights("w2", 40, 64, raw=False),
                   numpy_helper.from_array(np.array([2, 64], np.int64), "shape")], 11)


def _clip_10() -> onnx.ModelProto:
    """Clip's min and max become inputs at 11 (new constants the converter makes)."""
    nodes = [helper.make_node("Add", ["x", "bias"], ["h"]),
             helper.make_node("Clip", ["h"], ["y"], min=-0.5, max=0.5)]
    return _model(nodes, [_float("x", 4, 2048)], [_float("y", 4, 2048)],
                  [_weights("bias", 2048)], 10)


def _rms_norm_with_constant_17() -> onnx.ModelProto:
    """An RMS-norm block whose scale is a large `Constant` operator and whose ReduceMean's
    axes become an input at 18."""
    nodes = [
        helper.make_node("Constant", [], ["gamma"], value=_weights("gamma_value", 2048)),
        helper.make_node("Mul", ["x", "x"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
        helper.make_node("Constant", [], ["eps"], value_float=1e-6),
        helper.make_node("Add", ["ms", "eps"], ["ms_eps"]),
        helper.make_node("Sqrt", ["ms_eps"], ["rms"]),
        helper.make_node("Div", ["x", "rms"], ["normed"]),
        helper.make_node("Mul", ["normed", "gamma"], ["scaled"]),
        helper.make_node("MatMul", ["scaled", "w"], ["y"]),
    ]
    return _model(nodes, [_float("x", 3, 2048)], [_float("y", 3, 16)],
                  [_weights("w", 2048, 16)], 17)


def _if_with_weights_in_bodies_17() -> onnx.ModelProto:
    """Initializers and a large `Constant` inside If bodies, and an outer weight read by a
    body."""
    then_body = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w_then"], ["t0"]),
         helper.make_node("Slice", ["outer_bias", "starts", "ends", "axes"], ["bias"]),
         helper.make_node("Add", ["t0", "bias"], ["t"])],
        "then_body", [], [_float("t", 2, 32)],
        [_weights("w_then", 64, 32)] + [numpy_helper.from_array(np.array([v], np.int64), n)
                                        for n, v in (("starts", 0), ("ends", 32), ("axes", 1))])
    else_body = helper.make_graph(
        [helper.make_node("Constant", [], ["w_else"], value=_weights("w_else_value", 64, 32)),
         helper.make_node("MatMul", ["x", "w_else"], ["e"])],
        "else_body", [], [_float("e", 2, 32)])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_body,
                              else_branch=else_body)]
    return _model(nodes, [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                          _float("x", 2, 64)], [_float("y", 2, 32)],
                  [_weights("outer_bias", 2, 1024)], 17)


def _input_default_ir3() -> onnx.ModelProto:
    """IR 3: an initializer is the default of a graph input (not a constant of the IR)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "g", [_float("x", 2, 64), _float("w", 64, 64)],
                              [_float("y", 2, 64)], [_weights("w", 64, 64)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=3)
    onnx.checker.check_model(model, full_check=True)
    return model


BUILT = {
    "split_squeeze_reduce_11": (_split_squeeze_reduce_11, (12, 13, 18)),
    "clip_10": (_clip_10, (11, 13)),
    "rms_norm_with_constant_17": (_rms_norm_with_constant_17, (18, 23)),
    "if_with_weights_in_bodies_17": (_if_with_weights_in_bodies_17, (18, 23)),
    "input_default_ir3": (_input_default_ir3, (9, 10)),
}


def _whole_model_conversion(graph: Graph, opset: int) -> Graph:
    """What `upgraded_opset` did before: the converter given the whole model (and the
    annotations it drops given back, as upgraded_opset does since trial Q, and the
    ir_version raised to what the opset needs, since trial JJ)."""
    from ge.session.onnx_tools import _keep_annotations, _raise_ir_version

    model = graph.to_onnx()
    converted = version_converter.convert_version(model, opset)
    _keep_annotations(model.graph, converted.graph)
    _raise_ir_version(converted)
    return ge.graph.load(converted)


def _assert_same_conversion(graph: Graph, opset: int) -> Graph:
    converted = upgraded_opset(graph, opset)
    whole = _whole_model_conversion(graph, opset)
    assert converted.opset_imports[""] == opset
    for options in ({}, {"value_info": False, "lift_constants": True}):  # as loaded, saved
        assert (converted.to_onnx(**options).SerializeToString()
                == whole.to_onnx(**options).SerializeToString()), options
    return converted


@pytest.mark.parametrize("path", all_shared_models(), ids=lambda p: p.stem)
def test_the_vendored_models_convert_as_the_whole_model_does(path) -> None:
    graph = ge.graph.load(path)
    current = graph.get_opset_version("")
    for opset in sorted({20, 23, NEWEST} - set(range(current + 1))):
        _assert_same_conversion(graph, opset)


#: The models converted up to opset 23 are run there in onnxruntime.
_AT_23 = needs_opset(23, "the conversions are run in onnxruntime")


@pytest.mark.parametrize("name", [pytest.param(n, marks=_AT_23) if 23 in BUILT[n][1] else n
                                  for n in sorted(BUILT)])
def test_models_exercising_adapters_convert_as_the_whole_model_does(name: str) -> None:
    make, opsets = BUILT[name]
    model = make()
    graph = ge.graph.load(model)
    for opset in opsets:
        converted = _assert_same_conversion(graph, opset)
        x = next(vi for vi in model.graph.input if vi.name == "x")
        inputs = {"x": RNG.standard_normal(
            [d.dim_value for d in x.type.tensor_type.shape.dim]).astype(np.float32)}
        for cond in ((True, False) if name.startswith("if_") else (None,)):
            if cond is not None:
                inputs["cond"] = np.array(cond)
            assert_numerically_equal(model, converted, inputs, rtol=0, atol=0)


def _large_tensors(model: onnx.ModelProto) -> list[str]:
    from ge.graph.external_data import iter_tensors

    return [t.name or "<attribute>" for t in iter_tensors(model)
            if len(t.raw_data) + 4 * len(t.float_data) > STAND_IN_BYTES]


@pytest.mark.parametrize("name", sorted(BUILT))
def test_the_converter_is_given_no_weight(name: str,
                                          converter_calls: list[onnx.ModelProto]) -> None:
    given = converter_calls
    model = BUILT[name][0]()
    assert _large_tensors(model)
    converted = upgraded_opset(ge.graph.load(model), BUILT[name][1][-1])
    assert len(given) == 1
    assert _large_tensors(given[0]) == []
    assert given[0].ByteSize() < STAND_IN_BYTES < model.ByteSize()
    assert sorted(_large_tensors(converted.to_onnx())) == sorted(_large_tensors(model))


def test_a_vendored_model_goes_to_the_converter_without_its_weights(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    convert = version_converter.convert_version

    def recording(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
        sizes.append(model.ByteSize())
        return convert(model, opset)

    monkeypatch.setattr(version_converter, "convert_version", recording)
    graph = ge.graph.load(shared_model("distilbert_tiny"))  # 281 KB, 256 KB of it weights
    whole = graph.to_onnx().ByteSize()
    upgraded_opset(graph, 20)
    assert sizes and sizes[0] < whole // 5


@_AT_23
def test_int4_and_float8_weights_are_stood_in_too(
        converter_calls: list[onnx.ModelProto]) -> None:
    """`payload_nbytes` sizes int4 (packed, an odd count here) and float8: a large one goes
    to the converter as a stand-in (it went whole), and comes back the same."""
    import ml_dtypes

    given = converter_calls
    w4 = numpy_helper.from_array(RNG.integers(-8, 8, (65, 129)).astype(ml_dtypes.int4), "w4")
    w8 = numpy_helper.from_array(
        RNG.standard_normal((129, 64)).astype(ml_dtypes.float8_e4m3fn), "w8")
    nodes = [helper.make_node("DequantizeLinear", ["w4", "s"], ["d4"]),
             helper.make_node("DequantizeLinear", ["w8", "s"], ["d8"]),
             helper.make_node("MatMul", ["x", "d4"], ["h"]),
             helper.make_node("MatMul", ["h", "d8"], ["y"])]
    model = _model(nodes, [_float("x", 2, 65)], [_float("y", 2, 64)],
                   [w4, w8, numpy_helper.from_array(np.array(0.5, np.float32), "s")], 21)
    assert len(w4.raw_data) > STAND_IN_BYTES
    converted = _assert_same_conversion(ge.graph.load(model), 23)
    assert [(t.name, t.data_location) for t in given[0].graph.initializer] == [
        ("w4", TensorProto.EXTERNAL), ("w8", TensorProto.EXTERNAL), ("s", TensorProto.DEFAULT)]
    assert_numerically_equal(model, converted, {"x": RNG.standard_normal((2, 65)).astype(
        np.float32)}, rtol=0, atol=0)


def test_a_large_initializer_keeps_its_doc_string_and_metadata() -> None:
    """The converter drops a tensor's doc string and metadata; a large one is not given to
    it, and keeps them."""
    model = _clip_10()
    bias = model.graph.initializer[0]
    bias.doc_string = "learned"
    bias.metadata_props.add(key="ge.origin_pass", value="SomeFusion")
    converted = upgraded_opset(ge.graph.load(model), 13)
    kept = next(t for t in converted.to_onnx().graph.initializer if t.name == "bias")
    assert kept.doc_string == "learned"
    assert [(p.key, p.value) for p in kept.metadata_props] == [("ge.origin_pass", "SomeFusion")]


def _stand_in_initializers(model: onnx.ModelProto) -> list[TensorProto]:
    return [t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]


def _drop(model: onnx.ModelProto) -> None:
    kept = [t for t in model.graph.initializer if t.name != "w"]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    model.graph.input.append(_float("w", 64, 64))  # still a valid model: w is an input now


def _copy(model: onnx.ModelProto) -> None:
    then_body = model.graph.node[-1].attribute[0].g
    then_body.initializer.append(_stand_in_initializers(model)[0])


def _change(model: onnx.ModelProto) -> None:
    _stand_in_initializers(model)[0].dims[0] = 1


TAMPERINGS: dict[str, tuple[Callable[[onnx.ModelProto], None], Callable[[], onnx.ModelProto],
                            str]] = {
    "dropped": (_drop, _split_squeeze_reduce_11, "it dropped the stand-in of tensor 'w'"),
    "copied": (_copy, _if_with_weights_in_bodies_17,
               "it copied the stand-in of tensor 'outer_bias'"),
    "changed": (_change, _split_squeeze_reduce_11, "it changed the stand-in of tensor 'w'"),
}


def _tampering_converter(tamper: Callable[[onnx.ModelProto], None], calls: list[int]
                         ) -> Callable[[onnx.ModelProto, int], onnx.ModelProto]:
    """onnx's converter, then `tamper` on a result made from stand-ins (as a converter that
    lost or copied a tensor would leave it)."""
    convert = version_converter.convert_version

    def converter(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
        result = convert(model, opset)
        calls.append(len(_stand_in_initializers(model)))
        if _stand_in_initializers(result):
            tamper(result)
        return result

    return converter


@pytest.mark.parametrize("what", sorted(TAMPERINGS))
def test_stand_ins_not_given_back_fall_back_to_the_whole_model(
        what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tamper, make, message = TAMPERINGS[what]
    calls: list[int] = []
    monkeypatch.setattr(version_converter, "convert_version", _tampering_converter(tamper, calls))
    graph = ge.graph.load(make())
    with pytest.warns(CompileWarning) as warned:  # (it holds the weights twice: said)
        converted = upgraded_opset(graph, 18)
    assert calls[0] > 0 and calls[1:] == [0]  # stand-ins first, then the whole model
    (warning,) = [str(w.message) for w in warned]
    assert warning.startswith("onnx's version converter could take graph 'g' from opset ")
    assert f"without its weights, but {message}; giving it the whole model (" in warning
    assert warning.endswith("MiB) with its weights instead, which holds them twice while "
                            "it runs")
    monkeypatch.undo()
    assert (converted.to_onnx().SerializeToString()
            == _whole_model_conversion(graph, 18).to_onnx().SerializeToString())


@pytest.mark.parametrize("what", sorted(TAMPERINGS))
def test_stand_ins_not_given_back_of_a_model_over_the_limit_are_ge1203(
        what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tamper, make, message = TAMPERINGS[what]
    calls: list[int] = []
    monkeypatch.setattr(version_converter, "convert_version", _tampering_converter(tamper, calls))
    monkeypatch.setattr(onnx_tools, "WHOLE_MODEL_LIMIT", 20_000)  # as if over 2 GiB
    graph = ge.graph.load(make())
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(CompileInputError) as caught:
        upgraded_opset(graph, 18)
    assert caught.value.code == "GE1203" and len(calls) == 1
    assert str(caught.value).startswith(
        "[GE1203] onnx's version converter could take graph 'g' from opset ")
    assert f"to 18 without its weights, but {message}, so ge cannot put them back; the " \
           "whole model (0.0 GiB) is over protobuf's 2 GiB limit and cannot go through it with " \
           "them" in str(caught.value)
    assert graph.to_onnx().SerializeToString() == before


def test_a_model_without_an_onnx_opset_is_left_as_it_is() -> None:
    """An XGBoost model of onnxmltools imports ai.onnx.ml alone: the converter asserted
    "invalid version" on opset 0 (GE1203); there is nothing to convert (trial E)."""
    tree = helper.make_node(
        "TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", n_targets=1,
        nodes_featureids=[0], nodes_modes=["LEAF"], nodes_nodeids=[0], nodes_treeids=[0],
        nodes_values=[0.0], nodes_falsenodeids=[0], nodes_truenodeids=[0],
        target_ids=[0], target_nodeids=[0], target_treeids=[0], target_weights=[1.5])
    model = helper.make_model(
        helper.make_graph([tree], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      [2, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])]),
        opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    graph = ge.graph.load(model)
    with pytest.warns(CompileWarning) as caught:
        assert upgraded_opset(graph, 20) is graph
    assert [str(w.message) for w in caught] == [
        "opset 20 left graph 'g' as it is: the model imports no ONNX opset (only ai.onnx.ml "
        "3), so it has no ONNX operator to convert"]
    assert graph.opset_imports == {"ai.onnx.ml": 3}


def _model_with_functions(hidden: int = 4) -> onnx.ModelProto:
    """y = Mul(norm(x), W): `norm` a model-local function computing a layer norm in
    primitives (as onnxscript writes one), x [2, hidden], W a [hidden] initializer."""
    axes = helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(
        np.array([-1], np.int64)))
    eps = helper.make_node("Constant", [], ["eps"], value=numpy_helper.from_array(
        np.array(1e-5, np.float32)))
    body = [axes, eps,
            helper.make_node("ReduceMean", ["X", "axes"], ["mean"]),
            helper.make_node("Sub", ["X", "mean"], ["d"]),
            helper.make_node("Mul", ["d", "d"], ["sq"]),
            helper.make_node("ReduceMean", ["sq", "axes"], ["var"]),
            helper.make_node("Add", ["var", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["std"]),
            helper.make_node("Div", ["d", "std"], ["Y"])]
    norm = helper.make_function("local", "norm", ["X"], ["Y"], body,
                                [helper.make_opsetid("", 18)])
    graph = helper.make_graph(
        [helper.make_node("norm", ["x"], ["n"], domain="local", name="call"),
         helper.make_node("Mul", ["n", "w"], ["y"], name="scale")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, hidden])],
        [_weights("w", hidden)])
    model = helper.make_model(graph, functions=[norm], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.builtin_passes  # (LayerNormFusion shows the passes see the body)
def test_inline_functions_lets_the_passes_see_a_function_body() -> None:
    model = _model_with_functions()
    kept = ge.compile(model)
    assert kept.report.ops_after["local.norm"] == 1  # a call: its body is not optimised
    result = ge.compile(model, inline_functions=True, verify=True)
    assert result.verification is not None and result.verification.ok
    # the numbers of docs/compiler.md (inline_functions): before is the model as given (the
    # call one node), the passes got the 8 nodes of the inlined model (the first step's)
    assert (kept.report.counts_before.nodes, kept.report.counts_after.nodes) == (2, 2)
    assert (result.report.counts_before.nodes, result.report.counts_after.nodes) == (2, 1)
    convert, first_stage = result.report.steps[:2]
    assert (convert.name, convert.nodes_before, convert.nodes_after) == ("Convert", 2, 8)
    assert first_stage.nodes_before == 8
    assert result.report.ops_before == kept.report.ops_before
    saved = result.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    assert not saved.functions
    assert [n.op_type for n in saved.graph.node] == ["LayerNormalization"]  # W its scale
    assert [o.name for o in saved.graph.output] == ["y"]


def test_inlining_gives_the_inliner_no_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    from onnx import inliner

    seen: list[int] = []
    real = inliner.inline_local_functions

    def recording(model: onnx.ModelProto, *args, **kwargs) -> onnx.ModelProto:
        seen.append(sum(len(t.raw_data) for t in model.graph.initializer))
        return real(model, *args, **kwargs)

    monkeypatch.setattr(inliner, "inline_local_functions", recording)
    graph = ge.graph.load(_model_with_functions(hidden=2048))  # 8 KiB of W
    weight = graph.nodes_of_type("Const")[0].get_attr("value").numpy()
    inlined = onnx_tools.inlined_functions(graph)
    assert seen == [0]  # W went as a stand-in
    assert not inlined.root_graph().model.functions
    const = next(n for n in inlined.nodes_of_type("Const") if n.name == "w")
    np.testing.assert_array_equal(const.get_attr("value").numpy(), weight)  # put back


def test_a_model_without_functions_is_not_inlined() -> None:
    graph = ge.graph.load(_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [], 17))
    assert onnx_tools.inlined_functions(graph) is graph


def test_inline_functions_must_be_a_bool() -> None:
    from ge.errors import CompilerOptionTypeError

    with pytest.raises(CompilerOptionTypeError) as caught:
        ge.compile(_model_with_functions(), inline_functions="yes")  # type: ignore[arg-type]
    assert caught.value.code == "GE1202"
    assert "inline_functions" in caught.value.message


def _leaky_with_default() -> onnx.ModelProto:
    """y = LeakyD(x) - LeakyD(x, alpha=0.5), LeakyD a local function whose LeakyRelu takes
    its alpha from the function's attribute, declared with the default 0.25."""
    leaky = helper.make_node("LeakyRelu", ["X"], ["Y"])
    leaky.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="alpha",
                                               type=onnx.AttributeProto.FLOAT))
    function = helper.make_function("loc", "LeakyD", ["X"], ["Y"], [leaky],
                                    [helper.make_opsetid("", 17)])
    function.attribute_proto.append(helper.make_attribute("alpha", 0.25))
    graph = helper.make_graph(
        [helper.make_node("LeakyD", ["x"], ["a"], domain="loc", name="plain"),
         helper.make_node("LeakyD", ["x"], ["b"], domain="loc", name="given", alpha=0.5),
         helper.make_node("Sub", ["a", "b"], ["y"], name="sub")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, functions=[function], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("loc", 1)])


def test_inlining_keeps_a_functions_attribute_defaults(tmp_path) -> None:
    """onnx's inliner drops the default a function declares for an attribute a call leaves
    out: the inlined LeakyRelu took ONNX's alpha 0.01 instead of the function's 0.25, and
    `ge compile --inline-functions` wrote a model computing 0.49 where the original gives
    0.25 at x = -1, exit 0 (trial M). The call gets the default first."""
    import onnxruntime as ort

    model = _leaky_with_default()
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = ge.compile(source, inline_functions=True, verify=True)
    result.save(out)
    alphas = sorted(n.attribute[0].f for n in onnx.load(out).graph.node
                    if n.op_type == "LeakyRelu")
    assert alphas == [0.25, 0.5]
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    runs = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0] for p in (source, out)]
    np.testing.assert_allclose(runs[1], runs[0])
    np.testing.assert_allclose(runs[0], [0.25, 0.0, 0.0])
