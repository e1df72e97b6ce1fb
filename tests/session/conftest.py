"""Fixtures of the session tests."""

from __future__ import annotations

import onnx
import pytest
from onnx import version_converter


@pytest.fixture
def converter_calls(monkeypatch: pytest.MonkeyPatch) -> list[onnx.ModelProto]:
    """The models onnx's version converter is given during the test, in order (it still
    converts them): what ge hands it instead of the model (stand-ins for weights)."""
    given: list[onnx.ModelProto] = []
    convert = version_converter.convert_version

    def recording(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
        given.append(model)
        return convert(model, opset)

    monkeypatch.setattr(version_converter, "convert_version", recording)
    return given
