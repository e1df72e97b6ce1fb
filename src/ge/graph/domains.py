"""The canonical spelling of an operator domain: ONNX's standard domain is "" or "ai.onnx".

The graph layer compares domains (the op-type index, node keys, validation) and so do the
layers above it; `ge.ops.schemas` re-exports this function, so there is one spelling.
"""

from __future__ import annotations

__all__ = ["normalize_domain"]


def normalize_domain(domain: str) -> str:
    """The canonical spelling of a domain ("ai.onnx" is the standard domain "")."""
    return "" if domain == "ai.onnx" else domain
