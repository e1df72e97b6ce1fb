"""What a compilation knows of each graph of a model while its hierarchy is unchanged.

Every pass runs on the main graph and then on every If/Loop/Scan body, round after round,
and each invocation asks the same questions of the graph it runs on: where the graph is
(its body path, for the report), how many operators and constants it has, which op types
it holds (a pass needing none of them is skipped), and which of its outputs already read
a value contradicting their declared type. A model of thousands of small bodies asked them
hundreds of thousands of times, most answers the same: `GraphFacts` keeps them until the
hierarchy's mutation count moves (any change of any graph of it; a rollback puts the
count back together with the graph, so what was known then holds again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ge.compiler.report import constant_count, operator_count
from ge.graph import NET_OUTPUT, DataType, Node
from ge.graph.subgraphs import body_path
from ge.ops.inference import descs_contradict

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = ["GraphFacts", "contradicted_outputs", "declared_output_problem"]

_T = TypeVar("_T")


class GraphFacts:
    """The answers about each graph, kept while nothing changes (`refresh` first)."""

    def __init__(self) -> None:
        self._version = -1
        # (question, graph) -> answer; emptied whenever the hierarchy changed
        self._answers: dict[tuple[str, Graph], Any] = {}

    def refresh(self, graph: Graph) -> None:
        """Forget every answer once the hierarchy of `graph` changed: called before asking
        after a change may have been made."""
        version = graph.mutation_count
        if version != self._version:
            self._version = version
            self._answers.clear()

    def _answer(self, question: str, graph: Graph, compute: Callable[[Graph], _T]) -> _T:
        """The kept answer to `question` about `graph`, computed the first time."""
        key = (question, graph)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = compute(graph)
        return cast(_T, answer)

    def lacks(self, graph: Graph, op_types: frozenset[str]) -> bool:
        """Whether `graph` has no direct node of any of `op_types` (default domain)."""
        return self._answer("op_types", graph, _standard_op_types).isdisjoint(op_types)

    def size(self, graph: Graph) -> tuple[int, int]:
        """(`operator_count`, `constant_count`) of `graph`."""
        return self._answer("size", graph, _size)

    def path(self, graph: Graph) -> str:
        """`body_path(graph)`."""
        return self._answer("path", graph, body_path)

    def contradicted(self, graph: Graph) -> set[int]:
        """`contradicted_outputs(graph)` (do not change the set)."""
        return self._answer("contradicted", graph, contradicted_outputs)


def _standard_op_types(graph: Graph) -> frozenset[str]:
    return frozenset(t for t in graph.op_types() if graph.count_of_type(t))


def _size(graph: Graph) -> tuple[int, int]:
    return operator_count(graph), constant_count(graph)


def contradicted_outputs(graph: Graph) -> set[int]:
    """The outputs of `graph` that read a value contradicting their declared type already
    (a BeforeInferShape pass, or the export, made it so): a later pass rewiring one is not
    what made the contradiction (the invocation's check of the outputs)."""
    found: set[int] = set()
    for node in graph.nodes_of_type(NET_OUTPUT):
        found.update(i for i in range(node.get_inputs_size())
                     if declared_output_problem(node, i) is not None)
    return found


def declared_output_problem(net_output: Node, index: int) -> str | None:
    """Why output `index` of a graph no longer reads a value of its declared element type
    and static dims (`descs_contradict`, as a rewrite compares an output with the one it
    replaces), or None."""
    producer = net_output.get_input_producer(index)
    if producer is None or not net_output.has_input_desc(index):
        return None
    declared = net_output.get_input_desc(index)
    given = producer[0].get_output_desc(producer[1])
    if not descs_contradict(declared, given):
        return None
    read = (f"the pass made it read {producer[0].get_output_name(producer[1])!r} of "
            f"{producer[0].name!r}")
    if DataType.DT_UNDEFINED not in (declared.data_type, given.data_type) and (
            declared.data_type != given.data_type):
        return (f"graph output {index} is declared {declared.data_type.name} but {read}, "
                f"a {given.data_type.name}")
    return (f"graph output {index} is declared {list(declared.get_shape())} but {read}, "
            f"shaped {list(given.get_shape())}")
