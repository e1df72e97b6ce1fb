"""GE-style ES namespace `ge.es.all`: every operator function of every ONNX domain (the
standard set of `ge.es.onnx`, plus `ge.es.ml`, `ge.es.preview`, `ge.es.training`, whose
names do not collide) and registered custom operators, so `from ge.es.all import MatMul`
works as in GE's samples.
"""

from __future__ import annotations

from typing import Any

from ge.es import ml, onnx, preview, training

OPERATORS: dict[str, Any] = {}
for _namespace in (onnx, ml, preview, training):
    OPERATORS.update(_namespace.OPERATORS)
globals().update(OPERATORS)

__all__ = sorted(OPERATORS)


def __getattr__(name: str) -> Any:
    """Registered custom operators resolve here too (GE's fallback import is `ge.es.all`);
    an Ascend operator's name that none is registered under says which ONNX function to
    call instead."""
    from ge.es import custom

    return custom.resolve(name, __name__)
