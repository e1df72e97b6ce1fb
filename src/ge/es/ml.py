"""ES namespace of the classical machine-learning operators (`ai.onnx.ml`: TreeEnsemble,
LinearClassifier, Binarizer, ...): one function per operator, made from `onnx.defs` like
`ge.es.onnx`. Stubs: ml.pyi.
"""

from __future__ import annotations

from typing import Any

from ge.es.operators import domain_operators

DOMAIN = "ai.onnx.ml"
OPERATORS: dict[str, Any] = domain_operators(DOMAIN, __name__)
globals().update(OPERATORS)

__all__ = sorted(OPERATORS)
