"""GE-style ES namespace `ge.es.math`: the same operator functions as `ge.es.onnx`, so
`from ge.es.math import MatMul` works as in GE's samples.
"""

from __future__ import annotations

from ge.es.onnx import OPERATORS
from ge.ops.ascend import es_getattr

globals().update(OPERATORS)

__all__ = sorted(OPERATORS)

__getattr__ = es_getattr(__name__)  # (an Ascend name says which ONNX function to call)
