"""GE-style ES namespace `ge.es.all`: the same operator functions as `ge.es.onnx`, plus
registered custom operators, so `from ge.es.all import MatMul` works as in GE's samples.
"""

from __future__ import annotations

from typing import Any

from ge.es.onnx import OPERATORS

globals().update(OPERATORS)

__all__ = sorted(OPERATORS)


def __getattr__(name: str) -> Any:
    """Registered custom operators resolve here too (GE's fallback import is `ge.es.all`)."""
    from ge.es import custom

    return getattr(custom, name)
