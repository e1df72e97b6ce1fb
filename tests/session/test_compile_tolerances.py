"""`ge.compile(rtol=..., atol=...)`: a tolerance is a finite number >= 0 (with inf
verification passed anything); anything else is
`CompilerOptionError` (GE1202, as `ge compile --rtol -1` is; `CompilerOptionTypeError`
naming the type for one that is not a number), refused before anything runs or is
written."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import ge
from ge.errors import CompilerOptionError, CompilerOptionTypeError
from model_paths import shared_model

MODEL = shared_model("gelu_mlp_opset20")


@pytest.mark.parametrize(("name", "value", "message"), [
    ("rtol", -1, "rtol must be a finite number >= 0, got -1"),
    ("atol", -1e-3, "atol must be a finite number >= 0, got -0.001"),
    ("rtol", math.nan, "rtol must be a finite number >= 0, got nan"),
    ("rtol", math.inf, "rtol must be a finite number >= 0, got inf"),
    ("atol", math.inf, "atol must be a finite number >= 0, got inf"),
    ("atol", -math.inf, "atol must be a finite number >= 0, got -inf"),
    ("atol", np.float32("nan"), "atol must be a finite number >= 0, got nan"),
    ("atol", True, "atol must be a number, got the bool True"),
    ("rtol", "0.1", "rtol must be a number, got the str '0.1'")])
@pytest.mark.parametrize("verify", [True, False])
def test_a_bad_tolerance_is_a_compiler_option_error(tmp_path: Path, name: str, value: object,
                                                    message: str, verify: bool) -> None:
    dump = tmp_path / "dumps"
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(MODEL, verify=verify, dump=dump, builtin_passes=False,
                   **{name: value})  # type: ignore[arg-type]
    assert info.value.code == "GE1202"
    assert info.value.message == message
    assert isinstance(info.value, CompilerOptionTypeError) == (", got the " in message)
    assert list(tmp_path.iterdir()) == []  # not even the dump folder


def test_a_graph_is_left_as_it_was(tmp_path: Path) -> None:
    graph = ge.graph.load(MODEL)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(CompilerOptionError, match="rtol must be a finite number >= 0, got -1"):
        ge.compile(graph, verify=True, rtol=-1)
    assert graph.to_onnx().SerializeToString() == before


def test_zero_and_integer_tolerances_are_accepted() -> None:
    result = ge.compile(MODEL, verify=True, rtol=0, atol=1, builtin_passes=False)
    assert result.verification is not None and result.verification.ok
    assert (result.verification.rtol, result.verification.atol) == (0.0, 1.0)


def test_a_numpy_scalar_is_a_number() -> None:
    result = ge.compile(MODEL, verify=True, rtol=np.float32(0.5), atol=np.int64(0),
                        builtin_passes=False)
    assert result.verification is not None and result.verification.ok
    assert (result.verification.rtol, result.verification.atol) == (0.5, 0.0)
