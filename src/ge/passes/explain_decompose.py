"""What a `DecomposePass` would decompose, and why not the rest.

A decompose pass has no pattern: the engine offers every node of its op types, in the
graph's order, to its `meet_requirements` and replaces each node accepted with what its
`replacement` builds (`ge.passes.execution`). `explain_decompose(pass_or_class, graph)`
asks `meet_requirements` about the same nodes in the same order, without rewriting, and
tells for each one whether it would be rewritten or what the hook returned or raised, at
the user's line that did it, with the types and shapes of the node's inputs (what such a
hook usually reads); a refusal made while some of them are unknown carries a warning
saying why they are unknown at the pass's stage. `replacement` is not called (as
`ge.passes.explain` does not call a pattern pass's), so a replacement that would fail is
not seen here. The graph is left as it was (a hook that changes it is rolled back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ge.graph import Graph, Node
from ge.graph.places import BodyOwner, body_owner
from ge.passes.candidates import Operator, candidates, named_operators
from ge.passes.context import PassContext
from ge.passes.explain import CandidateExplanation, changes_undone, explained_graphs
from ge.passes.explain_functions import FunctionOps, function_ops
from ge.passes.explain_hooks import (
    ask,
    describe_desc,
    missing_descs_warning,
    odd_answer_note,
    refusal,
    runs_before_inference,
    value_symbols,
)
from ge.passes.explain_reasons import node_label, op_label
from ge.passes.stage import PassStage

__all__ = ["DecomposeExplanation", "explain_decompose"]


@dataclass
class DecomposeExplanation:
    """What a decompose pass does on one graph: every node of its op types (the
    candidates, in the graph's order), each rewritten (`reason` None) or refused by
    `meet_requirements` (`reason`); and a note (no candidate, the node asked about is of
    another op type); for a body, the node owning it (`owner`); for the root graph, the
    model-local functions whose bodies hold nodes of its op types (`functions`)."""

    graph: str
    op_types: list[str]
    candidates: list[CandidateExplanation] = field(default_factory=list)
    note: str | None = None
    node: str | None = None  # the target node asked about (`explain_decompose(..., node=)`)
    owner: BodyOwner | None = None
    functions: list[FunctionOps] = field(default_factory=list)

    @property
    def rewrites(self) -> list[CandidateExplanation]:
        """The nodes the engine would decompose, in the graph's order."""
        return [c for c in self.candidates if c.rewritten]

    @property
    def refused(self) -> list[CandidateExplanation]:
        """The nodes `meet_requirements` refused (or raised on), in the graph's order."""
        return [c for c in self.candidates if not c.rewritten]

    @property
    def warnings(self) -> list[str]:
        return [w for c in self.candidates for w in c.warnings]

    def as_dict(self, top: int | None = None) -> dict[str, Any]:
        rewrites, refused = self.rewrites, self.refused
        return {
            "graph": self.graph, "op_types": list(self.op_types), "node": self.node,
            "candidates": len(self.candidates),
            "rewrites": [_candidate_dict(c) for c in (rewrites if top is None
                                                       else rewrites[:top])],
            "rewrite_count": len(rewrites),
            "refused": [_candidate_dict(c) for c in (refused if top is None else refused[:top])],
            "not_rewritten": len(refused), "note": self.note,
            "owner": None if self.owner is None else self.owner.as_dict(),
            "functions": [f.as_dict() for f in self.functions],
        }


def _candidate_dict(cand: CandidateExplanation) -> dict[str, Any]:
    """A candidate node as JSON: the keys of a pattern candidate that mean something for a
    single node (no depth, no bindings)."""
    return {"graph": cand.graph, "candidate": cand.candidate, "type": cand.candidate_type,
            "rewritten": cand.rewritten,
            "reason": None if cand.reason is None else cand.reason.as_dict(),
            "warnings": list(cand.warnings)}


def explain_decompose(pass_or_class: Any, graph: Graph, node: str | Node | None = None, *,
                      context: PassContext | None = None, subgraphs: bool = True,
                      op_types: list[str] | None = None,
                      stage: PassStage | str | None = None) -> list[DecomposeExplanation]:
    """Explain what a `DecomposePass` decomposes in `graph` (and, with `subgraphs`, in its
    live subgraphs, where the engine runs it too): one `DecomposeExplanation` per graph.

    `op_types` are the op types the engine offers (default: those the pass class was
    registered with). With `node` (a name or a node), only that node is explained, in its
    graph; `GraphError` when no such node exists. The graph is explained as given: a pass
    after `BeforeInferShape` expects it typed (`ge.passes.explain_stage.prepare_graph`).
    `stage` is the pass's stage, which words the warnings (default: its registration's).
    """
    from ge.passes.base import DecomposePass, PatternFusionPass

    instance = pass_or_class() if isinstance(pass_or_class, type) else pass_or_class
    if not isinstance(instance, DecomposePass):
        hint = (" (explain a PatternFusionPass with ge.passes.explain.explain)"
                if isinstance(instance, PatternFusionPass) else "")
        raise TypeError("explain_decompose takes a DecomposePass subclass or instance, got "
                        f"{type(instance).__name__}{hint}")
    if not isinstance(graph, Graph):
        raise TypeError(f"explain_decompose takes a ge.graph.Graph, got {type(graph).__name__}")
    types = list(op_types if op_types is not None else (type(instance).op_types or ()))
    if not types:
        raise TypeError(f"{type(instance).__name__} has no op types: register it with "
                        "@register_decompose_pass(..., op_types=[...]) or give op_types=")
    focus, graphs = explained_graphs(graph, node, subgraphs)
    context = context or PassContext(type(instance).__name__)
    before_inference = runs_before_inference(type(instance), stage)
    found: list[DecomposeExplanation] = []
    with changes_undone(graph):
        for target in graphs:
            found.append(_explain_graph(instance, target, types, context, before_inference,
                                        focus))
    return found


def _explain_graph(instance: Any, graph: Graph, op_types: list[str], context: PassContext,
                   before_inference: bool, focus: Node | None) -> DecomposeExplanation:
    explanation = DecomposeExplanation(graph.name, op_types, owner=body_owner(graph))
    operators = named_operators(op_types)
    if focus is None and graph is graph.root_graph():
        explanation.functions = function_ops(graph, operators)
    offered = candidates(graph, operators)
    wanted = " or ".join(op_label(t) for t in op_types)
    if focus is not None:
        explanation.node = focus.name
        if focus not in offered:
            explanation.note = (f"{node_label(focus)} is not "
                                f"a candidate: the pass decomposes {wanted} nodes")
        offered = [focus] if focus in offered else []
    elif not offered:
        explanation.note = (f"no candidate: graph {graph.name!r} has no {wanted} node (the "
                            "pass's op types)" + _other_domains(graph, operators))
    for node in offered:
        explanation.candidates.append(_candidate(instance, graph, node, context,
                                                 before_inference))
    return explanation


def _other_domains(graph: Graph, operators: list[Operator]) -> str:
    """Where the graph has an operator of one of the names in another domain than the
    one named (`com.microsoft`'s Gelu for `Gelu`, ONNX's): how op_types names it."""
    others = sorted({op_label(n.type, n.domain) for op_type, domain in operators
                     if domain is not None for n in graph.nodes_of_type(op_type, None)})
    if not others:
        return ""
    names = ", ".join(repr(o) for o in others)
    return (f"; it has {names} node(s), an operator of that name in another domain, which "
            f"op_types names as {names}")


def _candidate(instance: Any, graph: Graph, node: Node, context: PassContext,
               before_inference: bool) -> CandidateExplanation:
    """One node as the engine's decompose loop sees it: `meet_requirements(node, context)`."""
    explained = CandidateExplanation(graph.name, node.name, node.type, 1, 1, [], None,
                                     matched_nodes=[node.name])
    context.set_error_message("")
    answer = ask(instance.meet_requirements, (node, context), type(instance), graph)
    odd = odd_answer_note(answer)
    if odd is not None:
        explained.notes.append(odd)
    if answer.accepted:
        return explained
    warning = missing_descs_warning([node], answer, before_inference=before_inference)
    if warning is not None:
        explained.warnings.append(warning)
    inputs = _inputs(node)
    explained.reason = refusal(answer, "node", inputs, context.get_error_message(),
                               symbols=value_symbols(_producers(node).values()),
                               anchor=node.name)
    return explained


def _producers(node: Node) -> dict[int, tuple[Node, int]]:
    """The producer of each connected input of `node`, by input position."""
    found = {}
    for i in range(node.get_inputs_size()):
        producer = node.get_input_producer(i)
        if producer is not None:
            found[i] = producer
    return found


def _inputs(node: Node) -> dict[str, str]:
    """Each connected input of `node` (`input_<position>`) with its type and shape."""
    return {f"input_{i}": describe_desc(source.get_output_desc(index))
            for i, (source, index) in _producers(node).items()}
