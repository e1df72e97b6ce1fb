"""Model-local functions told apart by their overload (IR 10), and attribute defaults that
reach a body through a reference: compiled with and without `--inline-functions`, the model
written computes what onnxruntime computes from the original (trial N: CSE merged calls of
two overloads, inlining gave every overload one overload's defaults and lost a default
passed on by reference, all silently)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
from versions import needs_runtime

F = TensorProto.FLOAT
IMPORTS = [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)]
#: onnxruntime runs the original: an older one calls every overload as the first.
OVERLOADS = needs_runtime("1.32", "runs every overload of a local function as one (1.19 "
                          "and 1.23 tried)")


def _function(name: str, nodes: list[onnx.NodeProto], *, overload: str = "",
              defaults: dict[str, float] | None = None, attributes: tuple[str, ...] = ()
              ) -> onnx.FunctionProto:
    function = helper.make_function("local", name, ["X"], ["Y"], nodes, IMPORTS,
                                    attributes=list(attributes))
    function.overload = overload
    for key, value in (defaults or {}).items():
        function.attribute_proto.append(helper.make_attribute(key, value))
    return function


def _call(name: str, x: str, y: str, *, overload: str = "", **attrs: object) -> onnx.NodeProto:
    node = helper.make_node(name, [x], [y], domain="local", name=f"call_{y}", **attrs)
    node.overload = overload
    return node


def _leaky(reference: str = "alpha") -> onnx.NodeProto:
    node = helper.make_node("LeakyRelu", ["X"], ["Y"])
    node.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name=reference,
                                              type=onnx.AttributeProto.FLOAT))
    return node


def _model(nodes: list[onnx.NodeProto], functions: list[onnx.FunctionProto],
           outputs: list[str]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [4])],
                              [helper.make_tensor_value_info(o, F, [4]) for o in outputs])
    model = helper.make_model(graph, functions=functions, opset_imports=IMPORTS)
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def two_overloads() -> onnx.ModelProto:
    """a = F@neg(x), b = F@abs(x): one op type, two functions."""
    return _model([_call("F", "x", "a", overload="neg"), _call("F", "x", "b", overload="abs")],
                  [_function("F", [helper.make_node("Neg", ["X"], ["Y"])], overload="neg"),
                   _function("F", [helper.make_node("Abs", ["X"], ["Y"])], overload="abs")],
                  ["a", "b"])


def overload_defaults() -> onnx.ModelProto:
    """LeakyRelu(alpha=@alpha) in overloads declaring alpha 0.25 and 0.5; calls give none."""
    return _model([_call("F", "x", "a", overload="a"), _call("F", "x", "b", overload="b")],
                  [_function("F", [_leaky()], overload="a", defaults={"alpha": 0.25}),
                   _function("F", [_leaky()], overload="b", defaults={"alpha": 0.5})],
                  ["a", "b"])


def default_through_a_reference() -> onnx.ModelProto:
    """G(alpha = 0.25) = LeakyRelu(alpha=@alpha); F(alpha, no default) = G(alpha=@alpha);
    y = F(x) without alpha: the reference is unresolved, G's 0.25 applies."""
    inner = helper.make_node("G", ["X"], ["Y"], domain="local")
    inner.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="alpha",
                                               type=onnx.AttributeProto.FLOAT))
    return _model([_call("F", "x", "y")],
                  [_function("G", [_leaky()], defaults={"alpha": 0.25}),
                   _function("F", [inner], attributes=("alpha",))], ["y"])


def _run(path: Path) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.array([-1.0, -2.0, 1.0, 2.0], np.float32)})


@pytest.mark.parametrize("make", [pytest.param(two_overloads, marks=OVERLOADS),
                                  pytest.param(overload_defaults, marks=OVERLOADS),
                                  default_through_a_reference])
@pytest.mark.parametrize("inline", [False, True], ids=["calls", "inlined"])
def test_the_written_model_computes_what_the_original_does(
        make: Callable[[], onnx.ModelProto], inline: bool, tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(make(), source)
    result = ge.compile(source, inline_functions=inline, verify=True)
    result.save(out)
    for got, want in zip(_run(out), _run(source), strict=True):
        np.testing.assert_allclose(got, want)


@OVERLOADS
def test_the_expected_values() -> None:
    """What onnxruntime computes from the originals (so the comparison above means it)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for make in (two_overloads, overload_defaults, default_through_a_reference):
            path = Path(tmp) / f"{make.__name__}.onnx"
            onnx.save(make(), path)
            results.append([r.tolist() for r in _run(path)])
    assert results == [[[1, 2, -1, -2], [1, 2, 1, 2]],
                       [[-0.25, -0.5, 1, 2], [-0.5, -1, 1, 2]],
                       [[-0.25, -0.5, 1, 2]]]


def test_calls_of_a_random_overload_stay_apart(tmp_path: Path) -> None:
    """F@det is a Neg, F@rand draws: the two calls of F@rand are two draws (CSE took the
    first function of the name, F@det, as the one called, and merged them)."""
    draw = helper.make_node("RandomUniformLike", ["X"], ["Y"])
    model = _model([_call("F", "x", "a", overload="rand"), _call("F", "x", "b", overload="rand"),
                    helper.make_node("Sub", ["a", "b"], ["d"], name="sub")],
                   [_function("F", [helper.make_node("Neg", ["X"], ["Y"])], overload="det"),
                    _function("F", [draw], overload="rand")], ["d"])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    ge.compile(source).save(out)
    assert np.abs(_run(out)[0]).max() > 0


def test_overloads_are_named_apart(tmp_path: Path) -> None:
    """`ge inspect` and the compile report name a call and a function with its overload, as
    ONNX's text format does (`local.F:neg`): two overloads of F were listed as `local.F`
    twice and counted as one operator."""
    from ge.cli.inspect import model_summary

    source = tmp_path / "m.onnx"
    onnx.save(two_overloads(), source)
    summary = model_summary(source)
    assert summary["functions"] == ["local.F:neg", "local.F:abs"]
    assert summary["ops"] == {"local.F:neg": 1, "local.F:abs": 1}
    result = ge.compile(source)
    report = result.report
    assert report.ops_before == report.ops_after == {"local.F:neg": 1, "local.F:abs": 1}
    from ge.session.hints import function_hints

    (hint,) = function_hints(result.graph)  # (trial R: the hint said local.F)
    assert hint.functions == ("local.F:abs", "local.F:neg") and hint.count == 2
