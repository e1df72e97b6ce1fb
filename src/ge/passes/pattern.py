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
    """The inputs of a pattern or replacement builder.

    In a `@pattern` method they are created as they are indexed: `inputs[i]` creates every
    missing input 0..i (scalar float `Data` nodes named `input_<k>`) and `inputs[a:b]` gives
    a list; the pattern has as many inputs as it reads, so they have no length and cannot
    be iterated (there is no end), and `len(inputs)` says so.

    In an expression-style `replacement` there are exactly as many as the match has boundary
    inputs (its pattern's inputs), input *i* being what pattern input *i* matched: then
    `len(inputs)` is that number and `inputs` can be iterated and unpacked
    (`x, w, b = inputs`), and reading past the end fails the pass. Built where the match is
    (`_of`, the engine's way), the inputs are the matched tensors themselves, read-only.
    """

    __slots__ = ("_bound", "_builder", "_created", "_size")

    def __init__(self, builder: GraphBuilder) -> None:
        self._builder = builder
        self._created: list[TensorHolder] = []
        self._bound = False
        self._size: int | None = None  # fixed in a replacement: its boundary inputs

    @classmethod
    def _of(cls, builder: GraphBuilder, producers: list[tuple[Node, int]]) -> PatternInputs:
        """The inputs of a replacement built in place: input *i* is the matched producer of
        boundary input *i*, and there are no others."""
        from ge.es.tensor_holder import BoundTensorHolder

        inputs = cls(builder)
        inputs._created = [BoundTensorHolder._make(builder, node, index)
                           for node, index in producers]
        inputs._bound = True
        inputs._size = len(producers)
        return inputs

    def _ensure(self, count: int) -> None:
        if self._size is not None and count > self._size:
            from ge.errors import RewriteError

            raise RewriteError(
                f"replacement {self._builder.name!r} reads input {count - 1} but the region "
                f"it replaces has {self._size} input(s) (inputs[:{self._size}])")
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

    def __len__(self) -> int:
        if self._size is None:
            raise TypeError(
                "the inputs of a @pattern method have no length: they are created as they are "
                "indexed, and the pattern has as many as it reads; use inputs[:N] (in a "
                "replacement, len(inputs) is the number of boundary inputs)")
        return self._size

    def __bool__(self) -> bool:
        # Truthiness must not go through __len__, which refuses in a @pattern method.
        return self._size is None or self._size > 0

    def __iter__(self) -> Any:
        if self._size is None:
            raise TypeError(
                "the inputs of a @pattern method cannot be iterated: they are created as "
                "they are indexed, so there is no end; use inputs[:N]")
        return iter(self._created[:self._size])

    def created(self) -> list[TensorHolder]:
        """The inputs created so far, by index."""
        return list(self._created)

    def _presize(self, count: int) -> None:
        """Create inputs 0..count-1 up front and make them all there are: a replacement
        takes one per boundary input of its match."""
        self._ensure(count)
        self._size = count


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
        """GE's hand-over to the engine: afterwards the pattern cannot be used. Returns a
        non-zero handle, as GE's (its native pointer; here the pattern's `id`)."""
        self._alive()
        self._released = True
        return id(self)

    def __repr__(self) -> str:
        state = "released" if self._released else f"{len(self._captures)} captures"
        return f"<Pattern {self._graph.name!r} {state}>"


def create_pattern(graph: Graph) -> Pattern:
    """The `Pattern` of `graph` (same as `Pattern(graph)`)."""
    return Pattern(graph)


def __getattr__(name: str) -> Any:
    """`pattern`, the `@pattern` marker, which GE's `ge.passes.pattern` defines (ge's is in
    `ge.passes.base`, which imports this module)."""
    if name != "pattern":
        raise AttributeError(f"module 'ge.passes.pattern' has no attribute {name!r}")
    from ge.passes.base import pattern

    globals()["pattern"] = pattern
    return pattern
