"""ES namespace of the preview operators (`ai.onnx.preview`):
one function per operator, made from `onnx.defs` like `ge.es.onnx`. Stubs: preview.pyi.
"""

from __future__ import annotations

from typing import Any

from ge.es.operators import domain_operators

DOMAIN = "ai.onnx.preview"
OPERATORS: dict[str, Any] = domain_operators(DOMAIN, __name__)
globals().update(OPERATORS)

__all__ = sorted(OPERATORS)
