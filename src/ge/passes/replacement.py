"""Replacements and boundaries (spec §4.6-4.8): what a pass hands the engine to rewrite.

`create_replacement` marks a built graph as a replacement. A `SubgraphBoundary` describes a
region by hand, for FusionBasePass code: each `SubgraphInput` is one logical input (consumer
input anchors inside the region that share one producer), each `SubgraphOutput` a producer
anchor whose outside consumers move to the replacement. `SubgraphRewriter.replace` applies a
replacement to it; `infer_shape` types a replacement from the match, node or boundary it
will replace.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ge.errors import GeError
from ge.graph import DATA, NET_OUTPUT, Graph, Node, Tensor
from ge.graph.node import is_const
from ge.graph.places import node_named, node_ref
from ge.passes.context import PassContext
from ge.passes.matcher import MatchResult
from ge.passes.rewrite import Region, apply_replacement, closed_region, forget_output_descs
from ge.passes.status import FAILED, SUCCESS

__all__ = ["SubgraphBoundary", "SubgraphInput", "SubgraphOutput", "SubgraphRewriter",
           "create_replacement", "infer_shape"]

_log = logging.getLogger("ge.passes")
Producer = tuple[Node, int]


def create_replacement(graph: Graph) -> Graph:
    """`graph`, checked to be a Graph: what a legacy `replacement()` returns."""
    if not isinstance(graph, Graph):
        raise TypeError("replacement graph must be a ge.graph.Graph")
    return graph


#: What a SubgraphInput pair is (D4), for a pair that names no input to read from.
_INPUT_PAIR = ("A SubgraphInput pair is (node, input_index): a node inside the region and "
               "the index of its input that reads the boundary value, not a producer and "
               "its output index (GE's API docs call the index out_index; GE reads it as an "
               "input index, and so does ge)")


def _readers_of(node: Node, index: int) -> str:
    """For a pair that may be `(producer, out_index)`: the pairs naming the readers of that
    output ("; output 0 of 'a' is read by input 0 of 'concat': ... (node 'concat', 0)"), or a
    sentence on what to pass."""
    if 0 <= index < node.get_outputs_size():
        readers = node.get_out_data_nodes_and_port_indexes(index)
        if readers:
            named = ", ".join(f"input {i} of {node_ref(reader)}" for reader, i in readers)
            pairs = ", ".join(f"(node {reader.name!r}, {i})" for reader, i in readers)
            return (f"; output {index} of {node_ref(node)} is read by {named}: pass the pair "
                    f"of each reader inside the region, {pairs}")
    return ("; pass (consumer, i) for each node of the region whose input i reads the "
            "value: consumer.get_in_data_nodes_and_port_indexes(i) is its producer")


def _failed(reason: str) -> int:
    _log.warning("%s", reason)
    return FAILED


class SubgraphInput:
    """One logical input of a region: consumer input anchors `(node, input_index)` inside
    it, all fed by one producer output (D4)."""

    __slots__ = ("_anchors", "_refused")

    def __init__(self, node_inputs: Iterable[tuple[Node, int]] | None = None) -> None:
        """Each pair is added as `add_input` adds it; a pair it refuses raises RuntimeError
        saying why (and nothing is logged: the exception is the report)."""
        self._anchors: list[tuple[Node, int]] = []
        self._refused: str | None = None  # why add_input last refused a pair
        for item in node_inputs if node_inputs is not None else ():
            if not isinstance(item, tuple) or len(item) != 2:
                raise RuntimeError("SubgraphInput expects iterable of (node, index)")
            node, index = item
            reason = self._refusal(node, index)
            if reason is not None:
                raise RuntimeError(f"SubgraphInput cannot take ({getattr(node, 'name', node)!r}"
                                   f", {index!r}): {reason}")
            self._anchors.append((node, index))

    def add_input(self, node: Node, input_index: int) -> int:
        """Add the consumer anchor `input_index` of `node`; 0 on success, else FAILED with
        the reason logged to "ge.passes" (GE's status-returning call)."""
        reason = self._refusal(node, input_index)
        if reason is not None:
            self._refused = reason  # for the error of a boundary left without an anchor
            return _failed(f"SubgraphInput.add_input: {reason}")
        self._anchors.append((node, input_index))
        return SUCCESS

    def _refusal(self, node: object, input_index: object) -> str | None:
        """Why `(node, input_index)` cannot be an anchor of this input, or None. A pair that
        names no connected input is most likely GE's documented `(node, out_index)`, a
        producer and its output: the reason says what the pair is and which pairs would
        name that producer's readers."""
        if not isinstance(node, Node) or isinstance(input_index, bool) or not isinstance(
                input_index, int):
            return "it takes a Node and an input index"
        if not 0 <= input_index < node.get_inputs_size():
            count = node.get_inputs_size()
            has = f"it has {count} input(s)" if count else "it has none"
            return (f"{node_named(node)} has no input {input_index} ({has}). "
                    f"{_INPUT_PAIR}{_readers_of(node, input_index)}")
        producer = node.get_input_producer(input_index)
        if producer is None:
            return (f"input {input_index} of {node_named(node)} is not connected. "
                    f"{_INPUT_PAIR}{_readers_of(node, input_index)}")
        if self._anchors and self.producer() != producer:
            return (f"input {input_index} of {node_named(node)} is fed by another producer "
                    "than the anchors already in this SubgraphInput (one SubgraphInput is "
                    "one value: its pairs are the inputs that read it)")
        return None

    def anchors(self) -> list[tuple[Node, int]]:
        return list(self._anchors)

    def producer(self) -> Producer | None:
        """The producer output all anchors read (None while empty)."""
        if not self._anchors:
            return None
        node, index = self._anchors[0]
        return node.get_input_producer(index)


class SubgraphOutput:
    """One output of a region: a producer anchor `(node, out_index)`; set once."""

    __slots__ = ("_anchor",)

    def __init__(self, node: Node | None = None, out_index: int = 0) -> None:
        """With `node`: set as `set_output` sets it; one it refuses raises RuntimeError
        (and nothing is logged: the exception is the report)."""
        self._anchor: Producer | None = None
        if node is not None:
            if not _is_output(node, out_index):
                raise RuntimeError(f"SubgraphOutput cannot take output {out_index} of "
                                   f"{getattr(node, 'name', node)!r}")
            self._anchor = (node, out_index)

    def set_output(self, node: Node, out_index: int) -> int:
        """Set the producer anchor; 0 on success, else FAILED with the reason logged to
        "ge.passes" (GE's status-returning call)."""
        if self._anchor is not None:
            return _failed("SubgraphOutput is already set")
        if not _is_output(node, out_index):
            return _failed(f"SubgraphOutput.set_output: no output {out_index!r} of {node!r}")
        self._anchor = (node, out_index)
        return SUCCESS

    def anchor(self) -> Producer | None:
        return self._anchor


def _is_output(node: object, out_index: object) -> bool:
    """Whether `(node, out_index)` names an output of a node."""
    return (isinstance(node, Node) and isinstance(out_index, int)
            and not isinstance(out_index, bool) and 0 <= out_index < node.get_outputs_size())


class SubgraphBoundary:
    """The logical inputs and outputs of a region, by slot: slot *i* is replacement `Data`
    index *i* / replacement output *i*."""

    __slots__ = ("_inputs", "_outputs")

    def __init__(self) -> None:
        self._inputs: dict[int, SubgraphInput] = {}
        self._outputs: dict[int, SubgraphOutput] = {}

    def add_input(self, index: int, input: SubgraphInput) -> int:
        if not isinstance(input, SubgraphInput) or not isinstance(index, int) or index < 0:
            return _failed("SubgraphBoundary.add_input takes an index >= 0 and a SubgraphInput")
        if index in self._inputs:
            return _failed(f"SubgraphBoundary input slot {index} is already set")
        self._inputs[index] = input
        return SUCCESS

    def add_output(self, index: int, output: SubgraphOutput) -> int:
        if not isinstance(output, SubgraphOutput) or not isinstance(index, int) or index < 0:
            return _failed("SubgraphBoundary.add_output takes an index >= 0 and a "
                           "SubgraphOutput")
        if index in self._outputs:
            return _failed(f"SubgraphBoundary output slot {index} is already set")
        self._outputs[index] = output
        return SUCCESS

    def _slots(self, slots: dict[int, Any], what: str) -> list[Any]:
        if sorted(slots) != list(range(len(slots))):
            raise GeError(f"boundary {what} slots must be 0..n-1, got {sorted(slots)}")
        return [slots[i] for i in range(len(slots))]

    def producers(self) -> list[Producer]:
        """The producer of each input slot."""
        found = []
        for i, item in enumerate(self._slots(self._inputs, "input")):
            producer = item.producer()
            if producer is None:
                refused = item._refused
                why = f": SubgraphInput.add_input refused a pair: {refused}" if refused else ""
                raise GeError(f"boundary input {i} has no anchor{why}")
            found.append(producer)
        return found

    def region(self) -> Region:
        """The region between the inputs and outputs (`RewriteError` if it is not closed)."""
        outputs = []
        for j, item in enumerate(self._slots(self._outputs, "output")):
            anchor = item.anchor()
            if anchor is None:
                raise GeError(f"boundary output {j} is not set")
            outputs.append(anchor)
        if not outputs:
            raise GeError("the boundary has no output")
        graph = outputs[0][0].owner_graph
        if graph is None:
            raise GeError(f"boundary output {node_named(outputs[0][0])} is not in a graph")
        inputs = self._slots(self._inputs, "input")
        producers = self.producers()  # first: an input without an anchor says why
        nodes = closed_region(graph, outputs, [i.anchors() for i in inputs])
        members = set(nodes)
        for i, item in enumerate(inputs):
            for node, index in item.anchors():
                if node not in members:
                    raise GeError(f"boundary input {i} names input {index} of {node_ref(node)}, "
                                  "which is not in the region")
        return Region(graph, nodes, producers, outputs)


class SubgraphRewriter:
    """Replaces the region of a `SubgraphBoundary` by a replacement graph (copied in)."""

    @staticmethod
    def replace(boundary: SubgraphBoundary, replacement: Graph, *,
                context: PassContext | None = None) -> int | None:
        """Without `context`: returns 0, or FAILED with the reason logged to "ge.passes".
        With `context`: checks `can_fuse` first and reports the fusion after; a failure
        sets the context's error message and raises RuntimeError. Returns None then."""
        from ge.passes.fuse_inspector import can_fuse

        pass_name = context.get_pass_name() if isinstance(context, PassContext) else ""
        try:
            if not isinstance(boundary, SubgraphBoundary):
                raise GeError(f"boundary must be a SubgraphBoundary, got "
                              f"{type(boundary).__name__}")
            region = boundary.region()
            if context is not None:
                check = can_fuse(region.nodes)
                if not check.ok:
                    raise GeError(check.reason)
            apply_replacement(region, replacement, pass_name=pass_name)
        except GeError as err:
            if context is None:
                return _failed(f"SubgraphRewriter.replace failed: {err.message}")
            context.set_error_message(err.message)
            raise RuntimeError(f"SubgraphRewriter::Replace with context failed, "
                               f"pass_name={pass_name}, status={FAILED}: {err.message}"
                               ) from err
        if context is None:
            return SUCCESS
        # What report_fuse does, done here because the old nodes are gone already: the new
        # nodes carry the pass name (apply_replacement stamped them) and the fusion counts.
        context._fusions += 1
        return None


def _boundary_producers(source: object) -> list[Producer]:
    if isinstance(source, MatchResult):
        return list(source._live().inputs)
    if isinstance(source, Node):
        return list(dict.fromkeys(p for p in source._inputs if p is not None))
    if isinstance(source, SubgraphBoundary):
        return source.producers()
    raise TypeError("source must be MatchResult, Node, or SubgraphBoundary")


def infer_shape(replacement: Graph, source: MatchResult | Node | SubgraphBoundary) -> None:
    """Type `replacement` in place from what it replaces: boundary input *i*'s producer desc
    goes to replacement Data *i* (constant producers lend their value), then the whole
    replacement is inferred. The descs its operators had (the builder's, computed from its
    placeholder inputs) are inferred again, not merged with, and a desc set on an operator's
    input is dropped, so that it is its producer's again: GE's infer_shape re-infers the
    whole replacement that way, and its samples set placeholder input descs before calling
    it (a Conv's inputs `TensorDesc([], NCHW, DT_FLOAT)`)."""
    from ge.ops import infer_shapes

    if not isinstance(replacement, Graph):
        raise TypeError("replacement must be a ge.graph.Graph")
    producers = _boundary_producers(source)
    if len(replacement) == 0:
        raise RuntimeError("replacement graph is empty")
    source_name = source.name if isinstance(source, Node) else ""
    try:
        known: dict[str, Tensor] = {}
        for data in replacement.nodes_of_type(DATA):
            index = data.get_attr("index") if data.has_attr("index") else None
            if not isinstance(index, int) or not 0 <= index < len(producers):
                continue
            node, out = producers[index]
            data.update_output_desc(0, node.get_output_desc(out))
            if is_const(node) and node.has_attr("value"):
                value = node.get_attr("value")
                if isinstance(value, Tensor):
                    known[data.name] = value
        for node in replacement.get_all_nodes():
            if node.type not in (DATA, NET_OUTPUT) and not is_const(node):
                forget_output_descs(node, inputs=True)
        infer_shapes(replacement, known_values=known, strict=True)
    except Exception as err:
        suffix = f", source_name={source_name}" if source_name else ""
        raise RuntimeError(f"infer_shape failed, replacement_graph={replacement.name}, "
                           f"source_type={type(source).__name__}{suffix}: {err}") from err
