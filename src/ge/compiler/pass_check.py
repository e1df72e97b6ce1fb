"""The check after a pass changed the graph: what it left invalid (cut edges, arity, cycles,
types, outputs its inputs no longer give, its graphs' outputs), said as the E13028 reason.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from ge._text import first_and_more
from ge.compiler.graph_facts import declared_output_problem
from ge.errors import ShapeInferenceError, ValidationProblem
from ge.graph import NET_OUTPUT, DataType, Node
from ge.graph.export_names import written_name
from ge.graph.places import body_owner, graph_place, ir_node_label
from ge.graph.validation import attribute_problems, find_node_problems, find_problems
from ge.ops.inference import STALE_DESC_ADVICE, infer_node, shape_conflict

if TYPE_CHECKING:
    from ge.graph import Graph
    from ge.graph.changes import ChangeSet

__all__ = ["as_written", "describe_problems", "is_live", "problems_left"]

_MAX_LISTED_PROBLEMS = 3


def problems_left(root: Graph, target: Graph, changes: ChangeSet, *, typed: bool, full: bool,
                  contradicted: Collection[int]) -> list[ValidationProblem]:
    """What a pass run on `target` left invalid in `root`'s model, as `changes` tracked it,
    the most fundamental first: the whole model's problems (`full`) or those of the nodes
    it touched, then (`typed`: once shapes are inferred) the outputs their inputs no longer
    give, then its graphs' outputs (`_output_problems`: `contradicted` are the outputs of
    `target` that read a contradicting value before the pass); an untyped value of a node
    inference refused says why."""
    touched = _in_model(changes.live_with_readers(), root)
    changed_graphs = [g for g in changes.changed_graphs() if is_live(g, root)]
    refused = _type_new_values(touched) if typed else {}
    problems = (_full_problems(root, typed, changes) if full
                else find_node_problems(touched, typed=typed, attributes_of=changes.attributes_set,
                                        graphs=changed_graphs))
    if typed and not problems:
        problems = _shape_problems(touched, changes)
    if not problems:  # (a stale desc explains a wrong output type better)
        problems = _output_problems(root, target, touched, contradicted, changed_graphs)
    problems = [_with_refusal(p, refused) for p in problems]
    return sorted(problems, key=lambda p: _PRIORITY.get(p.kind, 9))


def is_live(sub: Graph, root: Graph) -> bool:
    """Whether `sub` is `root` or still a body of a node inside `root`'s hierarchy."""
    graph = sub
    while graph is not root:
        owner = graph.parent_node
        if owner is None or owner.owner_graph is None:
            return False
        if graph not in owner.get_subgraphs():
            return False
        graph = owner.owner_graph
    return True


def _in_model(nodes: list[Node], root: Graph) -> list[Node]:
    """The nodes that are still part of the model (not in a body a pass removed)."""
    live: dict[Graph, bool] = {}
    kept = []
    for node in nodes:
        graph = node.owner_graph
        if graph is None:
            continue
        if graph not in live:
            live[graph] = is_live(graph, root)
        if live[graph]:
            kept.append(node)
    return kept


def _type_new_values(nodes: list[Node]) -> dict[str, ShapeInferenceError]:
    """Infer the outputs a pass left untyped (a node added with `add_node`), in graph order,
    so that only values inference cannot type are reported; what inference said of each
    node it refused (by IR name), which is why its outputs stay untyped."""
    untyped = [n for n in nodes if any(
        name and n.get_output_desc(k).data_type == DataType.DT_UNDEFINED
        for k, name in enumerate(n.get_output_names()))]
    refused: dict[str, ShapeInferenceError] = {}
    if not untyped:
        return refused
    position = {}
    for node in untyped:
        graph = node.owner_graph
        if graph is not None and graph not in position:
            try:
                position[graph] = {n: i for i, n in enumerate(graph.topological_order())}
            except Exception:
                return refused  # a cycle: the check reports it
    untyped.sort(key=lambda n: position[n.owner_graph].get(n, 0))  # type: ignore[index]
    for node in untyped:
        try:
            infer_node(node)
        except ShapeInferenceError as err:
            refused[node._name] = err
    return refused


def _with_refusal(problem: ValidationProblem, refused: dict[str, ShapeInferenceError]
                  ) -> ValidationProblem:
    """An untyped output of a node inference refused, said with inference's reason (a
    Softmax of axis 7 on a rank-3 input: "has no known dtype" told nothing of the axis)."""
    if problem.kind != "untyped" or len(problem.nodes) != 1 or problem.nodes[0] not in refused:
        return problem
    return replace(problem, message=f"{problem.message}: inference refused it: "
                                    f"{refused[problem.nodes[0]].message}")


def _output_problems(root: Graph, target: Graph, touched: list[Node],
                     contradicted: Collection[int] = (), changed: Iterable[Graph] = ()
                     ) -> list[ValidationProblem]:
    """What a pass did to a graph's outputs that the node checks do not see: a graph left
    without its one NetOutput (removed, not only disconnected), and an output rewired to a
    value of another element type or static shape than the graph declares for it (a model
    the checker rejects, blamed on ge's own Identity at save time), unless the output of
    `target` (one of `contradicted`) read such a value before the pass already. The graphs
    looked at: the root, `target`, those of `touched` and the `changed` ones."""
    problems = []
    graphs = dict.fromkeys([root, target, *(n.owner_graph for n in touched), *changed])
    for graph in graphs:
        if graph is None or not is_live(graph, root):
            continue
        count = graph.count_of_type(NET_OUTPUT)
        if count != 1:
            owner = body_owner(graph)
            problems.append(ValidationProblem(
                "structure", (), f"graph {graph.name!r} has {count} NetOutput nodes after "
                "the pass, not one: it removed the node that gives the graph's outputs",
                graph.name, "rewire the NetOutput's inputs instead (graph.replace_all_uses)",
                place=graph_place(graph.name, owner) if owner is not None else ""))
    for node in touched:
        if node.type != NET_OUTPUT or node.owner_graph is None:
            continue
        for index in range(node.get_inputs_size()):
            if node.owner_graph is target and index in contradicted:
                continue
            problem = declared_output_problem(node, index)
            if problem is not None:  # (about the node read too, as the message names it)
                read = node.get_input_producer(index)
                names = (node.name,) if read is None else (node.name, read[0].name)
                upstream = [] if read is None else _changed_upstream(read[0], touched)
                if upstream:  # (the first of them located: `ChangeSites`)
                    problem += ("; the pass changed, upstream of it: "
                                + first_and_more([ir_node_label(n) for n in upstream], 3))
                subjects = (node, *upstream[:1]) if upstream else (
                    (node,) if read is None else (node, read[0]))
                problems.append(ValidationProblem("type", names, problem,
                                                  node.owner_graph.name, subjects=subjects))
    return problems


#: How many nodes above a wrongly shaped output `_changed_upstream` looks at.
_UPSTREAM_LIMIT = 10_000


def _changed_upstream(producer: Node, touched: list[Node]) -> list[Node]:
    """The nodes above an output (its `producer` included) that the pass changed, in the
    order it changed them; none when only the producer was: an output shaped wrongly
    names the node read, whose desc inference only carried down what a node above it got
    wrong (trial U: a Transpose's perm, set and re-inferred; the error named the Relu read
    and the pass's class line)."""
    changed = dict.fromkeys(n for n in touched if n.type != NET_OUTPUT)
    found, seen, stack = [], {producer}, [producer]
    while stack and len(seen) < _UPSTREAM_LIMIT:
        node = stack.pop()
        if node in changed:
            found.append(node)
        for above in node.get_in_data_nodes():
            if above not in seen:
                seen.add(above)
                stack.append(above)
    if found == [producer]:
        return []
    order = {n: i for i, n in enumerate(changed)}
    return sorted(found, key=lambda n: order[n])


def _shape_problems(nodes: list[Node], changes: ChangeSet | None = None
                    ) -> list[ValidationProblem]:
    """The touched nodes whose outputs their inputs can no longer give (`shape_conflict`):
    a model written with them is one onnx.checker and runtimes reject. With `changes`, a
    node holding an attribute its schema rejects that the pass did not set is passed over:
    onnx's inference refuses it for that attribute (the input model's, reported by the
    final validation as such), not for what the pass did."""
    problems = []
    for node in nodes:
        graph = node.owner_graph
        if graph is None:
            continue
        if (changes is not None and not changes.attributes_set(node)
                and attribute_problems(node)):
            continue
        conflict = shape_conflict(node)
        if conflict is not None:
            problems.append(ValidationProblem(
                "shape", (node.name,), conflict.message, graph.name,
                STALE_DESC_ADVICE if conflict.stale else "", subjects=(node,)))
    return problems


def _full_problems(root: Graph, typed: bool, changes: ChangeSet) -> list[ValidationProblem]:
    """The problems of the whole model after a pass (`check="full"`), attributes only where
    the pass set them (those of the input model are the final validation's to report)."""
    problems = find_problems(root, attributes_of=changes.attributes_set)
    if not typed:  # before shape inference: nothing to check shapes against
        return problems
    nodes = [n for n in root.get_all_nodes() if n.type not in ("Data", "NetOutput")]
    # (`find_problems` checked the types; only whether every output has one is left)
    problems += [p for p in find_node_problems(nodes, typed=True) if p.kind == "untyped"]
    return problems or _shape_problems(nodes, changes)


def as_written(problems: list[ValidationProblem], root: Graph, removed: Iterable[Node]
                ) -> list[ValidationProblem]:
    """`problems` naming their nodes as the user's model writes them (`written_name`), in
    their messages and node lists: the check finds problems by IR names, which differ for
    a node named like a graph input or like another node (`x_1` for the model's `x`).

    A name is given back only where that is sure: every node of the model (or removed by
    the pass) holding the IR name writes one same, non-empty name (an unnamed node keeps
    its IR name, the only one it has), and no value or graph has the IR name (a quoted
    name in a message could be one of those)."""
    graphs = [root, *root.get_all_subgraphs()]
    gone = list(removed)
    written: dict[str, str] = {}
    for name in {n for p in problems for n in p.nodes}:
        if any(name in g._values or name == g.name for g in graphs):
            continue
        holders = [g._by_name[name] for g in graphs if name in g._by_name]
        said = {written_name(n) for n in holders + [n for n in gone if n._name == name]}
        if len(said) == 1 and (wanted := said.pop()) and wanted != name:
            written[name] = wanted
    if not written:
        return problems
    shown = {repr(name): repr(wanted) for name, wanted in written.items()}  # as quoted
    quoted = re.compile("|".join(map(re.escape, sorted(shown, key=len, reverse=True))))

    def rename(text: str) -> str:
        return quoted.sub(lambda m: shown[m.group()], text)

    return [_cycle_as_written(replace(
        p, nodes=tuple(written.get(n, n) for n in p.nodes), message=rename(p.message),
        advice=rename(p.advice)), p.nodes) for p in problems]


def _cycle_as_written(problem: ValidationProblem, read: tuple[str, ...]) -> ValidationProblem:
    """A cycle's message ends with its nodes' names unquoted ("a cycle through nodes: a,
    x_1": `Graph.topological_order`): that list, as `problem.nodes` now names them."""
    listed = ", ".join(read[:20])
    if problem.kind != "cycle" or not problem.message.endswith(listed):
        return problem
    said = ", ".join(problem.nodes[:20])
    return replace(problem, message=problem.message[:len(problem.message) - len(listed)] + said)


_PRIORITY = {"cycle": 0, "dangling-edge": 1, "arity": 2, "opset-import": 2, "structure": 3,
             "body": 3, "duplicate-name": 4}


def describe_problems(problems: list[ValidationProblem]) -> str:
    """The first problems, the most fundamental first (an untyped value is often the
    consequence of a cut edge or a cycle); an advice several of them share is given once,
    with the last of them (it reads as a note on all of them)."""
    problems = sorted(problems, key=lambda p: _PRIORITY.get(p.kind, 9))
    listed = problems[:_MAX_LISTED_PROBLEMS]
    last_with = {p.advice: i for i, p in enumerate(listed)}
    shown = "; ".join(
        f"{p.kind}: {p.text if last_with[p.advice] == i else p.message}{_where(p)}"
        for i, p in enumerate(listed))
    more = len(problems) - _MAX_LISTED_PROBLEMS
    suffix = f"; and {more} more" if more > 0 else ""
    return f"the pass left the graph invalid: {shown}{suffix}"


def _where(problem: ValidationProblem) -> str:
    """" (graph g)"; for a body, the node and attribute holding it too ("graph sub_graph,
    else_branch of If node 'if'"): exporters give every body one name."""
    if problem.place:  # (a body's, said by its owner: `ge.graph.validation`)
        return f" ({problem.place})"
    owner = next((n.owner_graph for n in problem.subjects
                  if isinstance(n, Node) and n.owner_graph is not None), None)
    if owner is not None and owner.parent_node is not None:
        return f" ({graph_place(problem.graph or owner.name, body_owner(owner))})"
    return f" (graph {problem.graph})" if problem.graph else ""
