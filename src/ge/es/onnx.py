"""The canonical ES namespace: one function per standard ONNX operator (`from ge.es.onnx
import MatMul`). The functions are made from `onnx.defs` when this module is imported; each
resolves its schema at its builder's opset when called. Stubs: onnx.pyi (tools/gen_es_stubs.py).
"""

from __future__ import annotations

from typing import Any

from ge.es.operators import domain_operators
from ge.ops.ascend import es_getattr

OPERATORS: dict[str, Any] = domain_operators("", __name__)
globals().update(OPERATORS)

__all__ = sorted(OPERATORS)

__getattr__ = es_getattr(__name__)  # (an Ascend name says which ONNX function to call)
