"""`TensorHolder`: one output of a node a `GraphBuilder` created.

Holders keep their builder alive, support `+ - * /` (nodes Add/Sub/Mul/Div, Python scalars and
lists turned into `Const`s) and give pattern code the live node (`_get_node_snapshot`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ge.errors import BuilderStateError
from ge.graph.node import Node
from ge.graph.tensor_desc import Dim, Shape, TensorDesc
from ge.graph.types import DataType, Format

if TYPE_CHECKING:
    from ge.es.graph_builder import GraphBuilder

__all__ = ["BoundTensorHolder", "TensorHolder"]


class TensorHolder:
    """Output `output_index` of a node built by a `GraphBuilder` (not constructible)."""

    __slots__ = ("_builder", "_index", "_node")

    _builder: GraphBuilder
    _node: Node
    _index: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise BuilderStateError(
            "TensorHolder cannot be constructed directly; create tensors with a GraphBuilder "
            "(create_input, create_const_*) or an operator function"
        )

    @classmethod
    def _make(cls, builder: GraphBuilder, node: Node, index: int) -> TensorHolder:
        holder = object.__new__(cls)
        holder._builder = builder
        holder._node = node
        holder._index = index
        return holder

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The producer node's name."""
        return self._node.name

    @property
    def output_index(self) -> int:
        """Which output of the producer this holder is (1 for a Split's second output)."""
        return self._index

    def get_owner_builder(self) -> GraphBuilder:
        return self._builder

    def _get_node_snapshot(self) -> Node:
        """The live producer node (GE's internal accessor, used by the samples)."""
        return self._node

    # -- desc -------------------------------------------------------------------------------
    def get_tensor_desc(self) -> TensorDesc:
        """A copy of this tensor's desc (extension: GE's holders only set it). In a
        replacement built in place, `inputs[i]`'s is the matched tensor's real desc, so a
        replacement can decide by rank, dims or type without its match result."""
        self._builder._check_alive("get_tensor_desc")
        return self._node.get_output_desc(self._index)

    def _update(self, what: str, change: Any) -> TensorHolder:
        self._builder._check_alive(what)
        self._check_own(what)
        desc = self._node.get_output_desc(self._index)
        change(desc)
        self._node.update_output_desc(self._index, desc)
        return self

    def set_data_type(self, data_type: DataType) -> TensorHolder:
        return self._update("set_data_type", lambda d: d.set_data_type(data_type))

    def set_format(self, format: Format) -> TensorHolder:
        return self._update("set_format", lambda d: d.set_format(format))

    def set_shape(self, shape: Iterable[Dim]) -> TensorHolder:
        dims = Shape(shape)
        self._update("set_shape", lambda d: d.set_shape(dims))
        self._builder._shapeless.discard(self._node)  # (an input's shape given after all)
        return self

    def _check_own(self, what: str) -> None:
        """Holders of a builder's own nodes may be changed (see `BoundTensorHolder`)."""

    # -- arithmetic -----------------------------------------------------------------------
    def _binary(self, op_type: str, lhs: Any, rhs: Any) -> TensorHolder:
        from ge.es.operators import call_operator

        result = call_operator(op_type, "", (lhs, rhs), {}, builder=self._builder)
        assert isinstance(result, TensorHolder)
        return result

    def add(self, other: Any) -> TensorHolder:
        return self._binary("Add", self, other)

    def sub(self, other: Any) -> TensorHolder:
        return self._binary("Sub", self, other)

    def mul(self, other: Any) -> TensorHolder:
        return self._binary("Mul", self, other)

    def div(self, other: Any) -> TensorHolder:
        return self._binary("Div", self, other)

    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div

    def __radd__(self, other: Any) -> TensorHolder:
        return self._binary("Add", self, other)  # GE builds Add(x, 0) for 0 + x

    def __rsub__(self, other: Any) -> TensorHolder:
        return self._binary("Sub", other, self)

    def __rmul__(self, other: Any) -> TensorHolder:
        return self._binary("Mul", self, other)

    def __rtruediv__(self, other: Any) -> TensorHolder:
        return self._binary("Div", other, self)

    def __repr__(self) -> str:
        desc = self._node.get_output_desc(self._index)
        return f"<TensorHolder {self._node.name}:{self._index} {desc!r}>"


class BoundTensorHolder(TensorHolder):
    """An input of an expression-style replacement built in place: the matched producer
    itself, read-only (its desc and attributes belong to the graph being rewritten)."""

    __slots__ = ()

    def _check_own(self, what: str) -> None:
        raise BuilderStateError(
            f"Cannot {what} on replacement input {self._node.name!r}:{self._index}: a "
            "replacement's inputs are the matched graph's tensors and cannot be changed; "
            "change the operators the replacement builds instead"
        )
