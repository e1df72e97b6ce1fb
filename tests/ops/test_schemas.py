"""Schemas come from onnx.defs at the asked opset; custom operators register once."""

from __future__ import annotations

import sys

import pytest
from onnx import AttributeProto, defs

from ge.errors import OpNotFoundError, OpRegisterError, SourceLocation
from ge.graph import TensorDesc
from ge.ops import (
    ParamOption,
    get_custom_op,
    get_op_spec,
    register_op,
    standard_op_types,
    unregister_op,
)


def test_every_onnx_operator_has_a_spec_at_its_latest_opset() -> None:
    latest = {s.name: s for s in defs.get_all_schemas() if s.domain == "" and not s.deprecated}
    assert set(standard_op_types("")) >= set(latest)
    for name, schema in latest.items():
        spec = get_op_spec(name, schema.since_version)
        assert spec.since_version == schema.since_version
        assert [p.name for p in spec.inputs] == [p.name for p in schema.inputs]
        assert set(spec.attributes) == set(schema.attributes)


def test_spec_follows_the_opset() -> None:
    split11, split13, split18 = (get_op_spec("Split", v) for v in (11, 13, 18))
    assert "split" in split11.attributes and len(split11.inputs) == 1
    assert [p.name for p in split13.inputs] == ["input", "split"]
    assert split13.inputs[1].option is ParamOption.OPTIONAL
    assert "num_outputs" not in split13.attributes and "num_outputs" in split18.attributes
    assert split13.outputs[0].option is ParamOption.VARIADIC
    gemm = get_op_spec("Gemm", 13)
    assert gemm.attributes["alpha"].kind == AttributeProto.FLOAT
    assert gemm.attributes["alpha"].default == pytest.approx(1.0)


def test_unknown_or_too_new_operator() -> None:
    with pytest.raises(OpNotFoundError) as err:
        get_op_spec("Gelu", 17)
    assert err.value.code == "GE1302"
    assert "Gelu" in str(err.value) and "first appears at opset 20" in str(err.value)
    with pytest.raises(OpNotFoundError, match="not defined in the ONNX domain"):
        get_op_spec("NoSuchOp", 17)


def _infer(ctx):  # type: ignore[no-untyped-def]
    return [ctx.input_descs[0]]


def test_custom_op_registered_twice_is_an_error() -> None:
    first = sys._getframe().f_lineno + 1
    register_op("Twice", domain="test.schemas", inputs=["x"], outputs=["y"], infer=_infer,
                kernel=lambda x: x)
    try:
        spec = get_op_spec("Twice", 1, "test.schemas")
        assert spec.custom and [p.name for p in spec.inputs] == ["x"]
        registered = get_custom_op("Twice", "test.schemas")
        assert registered is not None and registered.location == SourceLocation(__file__, first)
        with pytest.raises(OpRegisterError) as err:
            second = sys._getframe().f_lineno + 1
            register_op("Twice", domain="test.schemas", inputs=["x"], outputs=["y"],
                        infer=_infer, kernel=lambda x: x)
        assert isinstance(err.value, ValueError)
        assert err.value.code == "GE1301"
        assert err.value.message == (
            f"custom operator test.schemas::Twice is already registered by {__file__}:{first}; "
            f"{__file__}:{second} registers it again (give one of them another op type or "
            "domain, or unregister_op the first)")
        assert err.value.location == SourceLocation(__file__, second)
        assert get_custom_op("Twice", "test.schemas") is registered
    finally:
        unregister_op("Twice", "test.schemas")
    with pytest.raises(OpNotFoundError):
        get_op_spec("Twice", 1, "test.schemas")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"domain": ""}, "non-empty domain"),
        ({"domain": "ai.onnx.ml"}, "in domain 'ai.onnx.ml', a standard ONNX domain"),
        ({"domain": "ai.onnx"}, "in domain 'ai.onnx', a standard ONNX domain"),  # (not '')
        ({"kernel": None}, "kernel or a decomposition"),
        ({"inputs": ["xs*", "y"]}, "only the last input may be variadic"),
        ({"attributes": {"a": "nonsense"}}, "unknown attribute kind"),
    ],
)
def test_custom_op_definition_errors(kwargs: dict, message: str) -> None:
    args = {"domain": "test.bad", "inputs": ["x"], "outputs": ["y"], "infer": _infer,
            "kernel": lambda x: x, **kwargs}
    with pytest.raises(OpRegisterError, match=message):
        register_op("Bad", **args)


def test_infer_context_descs_are_tensor_descs() -> None:
    assert isinstance(_infer(type("C", (), {"input_descs": [TensorDesc([1])]})())[0], TensorDesc)
