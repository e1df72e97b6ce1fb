"""Hashable structural keys: equal keys mean interchangeable nodes or constant values.

Common-subexpression elimination merges nodes with equal `node_key`s; constant
deduplication merges `Const` nodes with equal `value_key`s. Keys compare exactly (floats by
their bits, tensors by dtype, shape and a digest of their bytes), never approximately.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import onnx

from ge.graph.attributes import GRAPH_KINDS, decode_attr
from ge.graph.domains import normalize_domain
from ge.graph.node import overload_of
from ge.graph.tensor import Tensor

if TYPE_CHECKING:
    from ge.graph.node import Node

__all__ = ["hashable_value", "node_key", "value_key"]

ValueKey = tuple[int, tuple[Any, ...], int, bytes]


def value_key(tensor: Tensor, data: bytes | None = None) -> ValueKey:
    """(dtype, shape, byte size, blake2b digest of the bytes) of a constant value. `data`:
    `tensor.tobytes()` when the caller has it already (e.g. read undecoded from its proto)."""
    if data is None:
        data = tensor.tobytes()
    digest = hashlib.blake2b(data, digest_size=20).digest()
    return (int(tensor.data_type), tuple(tensor.shape), len(data), digest)


def hashable_value(value: Any) -> Hashable:
    """`value` (an attribute value) as an exactly comparable, hashable key."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return ("f", value.hex())  # -0.0 and 0.0 differ, NaN equals itself
    if isinstance(value, (int, str, bytes)):
        return value
    if isinstance(value, Tensor):
        return ("t", value_key(value))
    if isinstance(value, (list, tuple)):
        return tuple(hashable_value(v) for v in value)
    if isinstance(value, onnx.SparseTensorProto | onnx.TypeProto):
        return ("p", value.SerializeToString(deterministic=True))
    raise TypeError(f"no structural key for an attribute value of type {type(value).__name__}")


def node_key(node: Node) -> Hashable | None:
    """(domain, op type, attributes, input producers, output count) of an operator node, or
    None for a node that is never interchangeable (it owns subgraphs)."""
    attrs = []
    for name in sorted(node._attrs):
        kind, value = decode_attr(node._attrs[name])
        if kind in GRAPH_KINDS:
            return None
        attrs.append((name, kind, hashable_value(value)))
    # (calls of two functions of one name, told apart by their overload, are not alike)
    return (normalize_domain(node._domain), node._type, overload_of(node), tuple(attrs),
            tuple(node._inputs), len(node._out_names))
