"""GE-style ES namespace `ge.es.math`: the same operator functions as `ge.es.onnx`, so
`from ge.es.math import MatMul` works as in GE's samples.
"""

from __future__ import annotations

from ge.es.onnx import OPERATORS

globals().update(OPERATORS)

__all__ = sorted(OPERATORS)
