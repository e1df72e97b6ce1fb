"""Patterns: the graph a `PatternFusionPass` looks for, and the tensors it captures.

A `Pattern` holds a graph built with the ES builder (or by hand) whose `Data` nodes are
wildcards and whose `NetOutput` inputs are the pattern's outputs. `capture_tensor` names the
tensors the pass wants to see in its hooks (`MatchResult.get_captured_tensor`).
`PatternInputs` is the `inputs` argument of `@pattern` methods and expression-style
replacements: indexing it creates the builder's inputs on demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ge.graph import Graph, Node

if TYPE_CHECKING:
    from ge.es import GraphBuilder, TensorHolder

__all__ = ["NodeIo", "Pattern", "PatternInputs", "create_pattern"]


@dataclass(frozen=True)
class NodeIo:
    """One output anchor: `index` of `node`."""

    node: Node
    index: int = 0


class PatternInputs:
    """The lazily created inputs of a pattern or replacement builder.

    `inputs[i]` creates every missing input 0..i (scalar float `Data` nodes named
    `input_<k>`); `inputs[a:b]` gives a list; iterating is refused because it has no end.
    For an expression-style replacement the engine builds in place (`_of`), the inputs are
    the matched tensors themselves, read-only, and there are exactly as many as the match
    has boundary inputs.
    """

    __slots__ = ("_bound", "_builder", "_created")

    def __init__(self, builder: GraphBuilder) -> None:
        self._builder = builder
        self._created: list[TensorHolder] = []
        self._bound = False

    @classmethod
    def _of(cls, builder: GraphBuilder, producers: list[tuple[Node, int]]) -> PatternInputs:
        """The inputs of a replacement built in place: input *i* is the matched producer of
        boundary input *i*, and there are no others."""
        from ge.es.tensor_holder import BoundTensorHolder

        inputs = cls(builder)
        inputs._created = [BoundTensorHolder._make(builder, node, index)
                           for node, index in producers]
        inputs._bound = True
        return inputs

    def _ensure(self, count: int) -> None:
        if self._bound and count > len(self._created):
            from ge.errors import RewriteError

            raise RewriteError(
                f"replacement {self._builder.name!r} reads input {count - 1} but the region "
                f"it replaces has {len(self._created)} input(s) (inputs[:{len(self._created)}])")
        while len(self._created) < count:
            self._created.append(self._builder.create_input(len(self._created)))

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, bool):
            raise TypeError("pattern inputs are indexed by int or slice, got bool")
        if isinstance(key, int):
            if key < 0:
                raise ValueError(f"pattern input index must be >= 0, got {key}")
            self._ensure(key + 1)
            return self._created[key]
        if isinstance(key, slice):
            if key.stop is None:
                raise ValueError("a slice of pattern inputs needs an end: inputs[:N]")
            if key.step not in (None, 1):
                raise ValueError("a slice of pattern inputs cannot have a step")
            start = 0 if key.start is None else key.start
            if not (isinstance(start, int) and isinstance(key.stop, int)) or not (
                    0 <= start <= key.stop):
                raise ValueError(f"pattern input slice needs 0 <= start <= stop, got {key}")
            self._ensure(key.stop)
            return self._created[start:key.stop]
        raise TypeError(f"pattern inputs are indexed by int or slice, got {type(key).__name__}")

    def __iter__(self) -> Any:
        raise TypeError("pattern inputs cannot be iterated; use inputs[:N]")

    def created(self) -> list[TensorHolder]:
        """The inputs created so far, by index."""
        return list(self._created)

    def _presize(self, count: int) -> None:
        """Create inputs 0..count-1 up front (replacements take one per boundary input)."""
        self._ensure(count)


class Pattern:
    """A pattern graph and its captured tensors. The pattern takes the graph over: edit it
    through the pattern's builder before `create_pattern`, never after."""

    __slots__ = ("_captures", "_graph", "_released", "_source")

    def __init__(self, graph: Graph) -> None:
        if not isinstance(graph, Graph):
            raise TypeError(f"pattern graph must be a ge.graph.Graph, got {type(graph).__name__}")
        self._graph = graph
        self._captures: list[NodeIo] = []
        self._released = False
        # The `@pattern` method that built it, which an error about the pattern blames.
        self._source: object | None = None

    def _alive(self) -> Graph:
        if self._released:
            raise RuntimeError("Pattern handle has been released")
        return self._graph

    @property
    def name(self) -> str:
        """The pattern graph's name (what `MatchResult.get_pattern_graph_name` returns)."""
        return self._alive().name

    def get_graph(self) -> Graph:
        """The pattern graph (extension)."""
        return self._alive()

    def capture_tensor(self, source: Any, index: int | None = None) -> Pattern:
        """Capture output `index` of a pattern node (a TensorHolder's own output index, or 0,
        when `index` is None); captures keep call order and may repeat. Returns self."""
        graph = self._alive()
        from ge.es import TensorHolder

        if isinstance(source, TensorHolder):
            node, out = source._get_node_snapshot(), source.output_index
        elif isinstance(source, Node):
            node, out = source, 0
        elif hasattr(source, "node") and hasattr(source, "index"):
            node, out = source.node, source.index
        else:
            raise TypeError("capture_tensor takes a TensorHolder, a Node or a NodeIo, "
                            f"got {type(source).__name__}")
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"capture index must be an int, got {type(index).__name__}")
            out = index
        if not isinstance(node, Node) or node.owner_graph is not graph:
            raise ValueError(f"captured node {getattr(node, 'name', node)!r} is not a node of "
                             f"pattern graph {graph.name!r}")
        if not 0 <= out < node.get_outputs_size():
            raise ValueError(f"pattern node {node.name!r} has no output {out}")
        self._captures.append(NodeIo(node, out))
        return self

    def get_captured_tensors(self) -> list[NodeIo]:
        """The captured pattern anchors, in capture order."""
        self._alive()
        return list(self._captures)

    def is_valid(self) -> bool:
        return not self._released

    def release(self) -> int:
        """GE's hand-over to the engine: afterwards the pattern cannot be used."""
        self._alive()
        self._released = True
        return 0

    def __repr__(self) -> str:
        state = "released" if self._released else f"{len(self._captures)} captures"
        return f"<Pattern {self._graph.name!r} {state}>"


def create_pattern(graph: Graph) -> Pattern:
    """The `Pattern` of `graph` (same as `Pattern(graph)`)."""
    return Pattern(graph)
