"""GE-style ES namespace `ge.es.math`: the same operator functions as `ge.es.onnx`, so
`from ge.es.math import MatMul` works as in GE's samples.
"""

from __future__ import annotations

from typing import Any

from ge.es.onnx import OPERATORS
from ge.ops.ascend import no_es_function

globals().update(OPERATORS)

__all__ = sorted(OPERATORS)


def __getattr__(name: str) -> Any:
    """An Ascend operator's name (`ConcatV2`) says which ONNX function to call instead."""
    no_es_function(__name__, name)
