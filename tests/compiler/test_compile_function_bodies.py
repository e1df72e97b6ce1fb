"""Compiling models that call a model-local function whose body uses an operator onnx does
not know: a custom operator of the compilation's plugin (`pass_paths`: it lives in the
compilation's `CustomOpView` only) or one of onnxruntime's (`com.microsoft`).

Found by a user: such a model failed InferShape (GE1305, "custom operator local::F is not
registered", or onnx's strict inference refusing the Sigmoid reading the call) although ge
knew the operator. onnx types a call by inferring the function's body with its own
schemas, and ge took the call for an unregistered custom operator. Now ge types the call
from the inlined body with its own inference (`ge.ops.functions`), and the saved model
declares the call's output type, so that onnx's checker types the Sigmoid too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

import ge
from function_models import (
    bias_gelu_model,
    feeds,
    nested_model,
    repeat_model,
    unregistered_model,
    widen_model,
    write_plugin,
)
from ge.errors import ShapeInferenceError
from ge.graph import Graph, load
from ge.ops import get_custom_op


def _call_desc(graph: Graph) -> tuple[str, list[int | str]]:
    """The element type name and dims the compiled graph holds for the call's output."""
    call = next(n for n in graph.get_all_nodes() if n.type == "F")
    desc = call.get_output_desc(0)
    return desc.data_type.name, list(desc.get_shape())


def _declared(model: onnx.ModelProto, name: str) -> tuple[int, list[int]]:
    """(elem type, dims) of the value_info the written model declares for `name`."""
    vi = next(v for v in model.graph.value_info if v.name == name)
    tensor = vi.type.tensor_type
    return tensor.elem_type, [d.dim_value for d in tensor.shape.dim]


def _ort(model: onnx.ModelProto | Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    source = model if isinstance(model, Path) else model.SerializeToString()
    session = onnxruntime.InferenceSession(
        str(source) if isinstance(source, Path) else source,
        providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def test_runtime_operator_in_a_function_body_compiles_and_runs_the_same(
        tmp_path: Path) -> None:
    """com.microsoft::BiasGelu in F's body: the model compiles (verified), the call is
    typed float[2, 3], and onnxruntime gives the compiled model's outputs equal to the
    original's."""
    model = bias_gelu_model()
    source = tmp_path / "bias_gelu.onnx"
    onnx.save(model, source)
    result = ge.compile(source, verify=True)
    assert result.verification is not None and result.verification.ok
    assert _call_desc(result.graph) == ("DT_FLOAT", [2, 3])
    out = tmp_path / "out.onnx"
    result.save(out)
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert _declared(written, "c") == (onnx.TensorProto.FLOAT, [2, 3])
    inputs = feeds(model)
    expected, got = _ort(source, inputs), _ort(out, inputs)
    assert len(expected) == len(got) == 1
    np.testing.assert_array_equal(got[0], expected[0])


def test_custom_operator_of_the_compilations_plugin_types_the_call(tmp_path: Path) -> None:
    """Widen, registered by a plugin of `pass_paths` (so only in the compilation's view):
    its registered inference types the call [2, 6] (not an input's [2, 3]), verification
    runs it by its kernel, and the written model passes onnx's full checker."""
    plugin = write_plugin(tmp_path)
    model = widen_model()
    result = ge.compile(model, pass_paths=[plugin], verify=True)
    assert result.verification is not None and result.verification.ok
    assert _call_desc(result.graph) == ("DT_FLOAT", [2, 6])
    sigmoid = next(n for n in result.graph.get_all_nodes() if n.type == "Sigmoid")
    assert list(sigmoid.get_output_desc(0).get_shape()) == [2, 6]
    out = tmp_path / "out.onnx"
    result.save(out)
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert _declared(written, "c") == (onnx.TensorProto.FLOAT, [2, 6])
    assert [f.name for f in written.functions] == ["F"]  # the function stays as written
    assert get_custom_op("Widen", "com.example.fn") is None  # the compilation's only


def test_call_attribute_reaches_the_body(tmp_path: Path) -> None:
    """Repeat's `times` refers to F's attribute: the call's times=3 types it [2, 9]."""
    plugin = write_plugin(tmp_path)
    result = ge.compile(repeat_model(3), pass_paths=[plugin], verify=True)
    assert _call_desc(result.graph) == ("DT_FLOAT", [2, 9])
    onnx.checker.check_model(result.to_onnx(), full_check=True)


def test_a_function_calling_such_a_function_is_typed_too(tmp_path: Path) -> None:
    """F calls G, whose body uses Widen: F is typed through G ([2, 6])."""
    plugin = write_plugin(tmp_path)
    result = ge.compile(nested_model(), pass_paths=[plugin], verify=True)
    assert _call_desc(result.graph) == ("DT_FLOAT", [2, 6])
    onnx.checker.check_model(result.to_onnx(), full_check=True)


def test_without_the_plugin_the_operator_is_unregistered(tmp_path: Path) -> None:
    """The same model compiled without the plugin: GE1305 at InferShape naming the call,
    the function and the operator in the existing words; a Graph given is unchanged."""
    graph = load(widen_model())
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(graph)
    err = caught.value
    assert err.code == "GE1305" and err.stage == "InferShape"
    assert err.message.startswith(
        "node 'call' calls model-local function local.F, whose body cannot be typed: ")
    assert "custom operator com.example.fn::Widen is not registered" in err.message
    assert err.nodes == ("call",)
    assert graph.to_onnx().SerializeToString() == before


def test_an_operator_nothing_defines_in_a_body_is_the_clear_error(tmp_path: Path) -> None:
    """com.nowhere::Nope in F's body: GE1305 saying it is not registered, nothing saved."""
    source = tmp_path / "nope.onnx"
    onnx.save(unregistered_model(), source)
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(source)
    assert caught.value.code == "GE1305"
    assert "custom operator com.nowhere::Nope is not registered" in caught.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nope.onnx"]
