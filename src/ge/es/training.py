"""ES namespace of the training operators (`ai.onnx.preview.training`: Adagrad, Adam,
Gradient, Momentum): one function per operator, made from `onnx.defs` like `ge.es.onnx`.
Stubs: training.pyi.
"""

from __future__ import annotations

from typing import Any

from ge.es.operators import domain_operators

DOMAIN = "ai.onnx.preview.training"
OPERATORS: dict[str, Any] = domain_operators(DOMAIN, __name__)
globals().update(OPERATORS)

__all__ = sorted(OPERATORS)
