"""Which If branches and Loop bodies the verification's inputs ran, for the coverage warning.

A run takes one path through each If and runs a Loop's body only when its trip count and
condition let it, so a pass that changed a body is only checked by the verification when
the inputs ran that body. ge can tell when the values that decide (the If's condition, the
Loop's trip count and first condition) are constants or values of the root graph: an input
of the run, or computed, and then read by one more run of the compiled model with those
values as extra outputs (made only when a pass changed such a body). A body runs only when
the body holding its node ran, so one inside a branch no run took was not run, at any depth;
a body whose node decides on a value computed inside a body, and a Scan's, is otherwise
left undecided: which of its iterations ran is not a value of the graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ge.errors import GeError
from ge.graph import DATA, Graph, Node, Tensor
from ge.graph.node import is_const
from ge.graph.subgraphs import body_attribute, body_path
from ge.session.runner import ModelRunner, exported_to_run

__all__ = ["BodyCoverage", "body_coverage"]


@dataclass(frozen=True)
class BodyCoverage:
    """Of the bodies asked about: those no run took (`not_run`) and those ge cannot tell
    about (`undecided`), by `body_path`; `described` says what each is ("body 'name'
    (then_branch of If 'node')")."""

    not_run: list[str]
    undecided: list[str]
    described: dict[str, str]


def body_coverage(graph: Graph, bodies: Sequence[str],
                  runs: Sequence[Mapping[str, Any]]) -> BodyCoverage:
    """Which of the subgraphs `bodies` (by `body_path`: exporters give every body one name)
    of the compiled `graph` the inputs `runs` (the verification's, each a feed dict) ran."""
    subgraphs = {body_path(sub): sub for sub in graph.get_all_subgraphs()}
    asked = [(name, subgraphs.get(name)) for name in bodies]
    deciders: dict[str, tuple[Node, int]] = {}  # value name -> its producer
    for _, sub in asked:
        for owner in _enclosing_owners(sub, graph):
            for producer in _deciding_inputs(owner, graph) or []:
                if producer is not None:
                    deciders[producer[0].get_output_name(producer[1])] = producer
    values = _read(graph, deciders, runs) if deciders else [{} for _ in runs]
    coverage = BodyCoverage([], [], {})
    for name, sub in asked:
        parent = sub.parent_node if sub is not None else None
        coverage.described[name] = (
            f"body {name!r}" if parent is None or sub is None
            else f"body {sub.name!r} ({body_attribute(sub)} of {parent.type} {parent.name!r})")
        ran = None if sub is None else _ran(sub, graph, values)
        if ran is None:
            coverage.undecided.append(name)
        elif not ran:
            coverage.not_run.append(name)
    return coverage


def _enclosing_owners(body: Graph | None, root: Graph) -> list[Node]:
    """The nodes holding `body` and each body enclosing it, innermost first (none for a
    graph not in `root`)."""
    owners: list[Node] = []
    while body is not None and body is not root and body.parent_node is not None:
        owners.append(body.parent_node)
        body = body.parent_graph
    return owners if body is root else []


def _deciding_inputs(owner: Node, root: Graph) -> list[tuple[Node, int] | None] | None:
    """The producers of the inputs that decide whether a body of `owner` runs (an If's
    condition; a Loop's trip count and condition; None for one absent), or None when ge
    cannot read one: only a constant's or a value of the `root` graph is one value per run
    (a body's own values change with its iterations), and a Scan has none."""
    count = {"If": 1, "Loop": 2}.get(owner.type, 0)
    producers = [owner.get_input_producer(i) if i < owner.get_inputs_size() else None
                 for i in range(count)]
    readable = all(p is None or _constant(p[0]) is not None or p[0].owner_graph is root
                   for p in producers)
    return producers if count and readable and (owner.type != "If" or producers[0]) \
        else None


def _constant(node: Node) -> Tensor | None:
    """The value of a constant node, else None."""
    value = node.get_attr("value") if is_const(node) and node.has_attr("value") else None
    return value if isinstance(value, Tensor) else None


def _ran(body: Graph, root: Graph, runs: Sequence[Mapping[str, Any] | None]) -> bool | None:
    """Whether some run took `body` (a body of `root` at any depth), None when it cannot be
    told."""
    told = [_ran_in(body, root, values) for values in runs]
    if any(ran is True for ran in told):
        return True
    return False if told and all(ran is False for ran in told) else None


def _ran_in(body: Graph, root: Graph, values: Mapping[str, Any] | None) -> bool | None:
    """Whether the run that read `values` took `body`, None when it cannot be told: a body
    runs when the graph holding its node ran and the node's deciding inputs take it, so a
    body inside a branch no run took was not run either, whatever its own node decides."""
    owner, parent = body.parent_node, body.parent_graph
    if owner is None or parent is None:
        return None
    enclosing = True if parent is root else _ran_in(parent, root, values)
    if enclosing is False:
        return False
    own = _takes(owner, body, root, values)
    if own is False:
        return False
    return None if enclosing is None or own is None else True


def _takes(owner: Node, body: Graph, root: Graph,
           values: Mapping[str, Any] | None) -> bool | None:
    """Whether `owner`, when it runs, runs `body` on the deciding `values` of one run
    (None: cannot be told, as for a Scan or a value computed inside a body)."""
    if values is None:
        return None
    producers = _deciding_inputs(owner, root)
    if producers is None:
        return None
    names = [None if p is None else p[0].get_output_name(p[1]) for p in producers]
    if any(n is not None and n not in values for n in names):
        return None
    given = [None if n is None else np.asarray(values[n]).reshape(-1) for n in names]
    if any(v is not None and v.size == 0 for v in given):
        return None  # (an empty condition: the model would not run)
    if owner.type == "If":
        assert given[0] is not None
        branch = "then_branch" if bool(given[0][0]) else "else_branch"
        return owner.get_attr(branch) is body
    trips, condition = given  # a Loop runs its body when both allow
    return (trips is None or int(trips[0]) > 0) and (condition is None or bool(condition[0]))


def _read(graph: Graph, deciders: Mapping[str, tuple[Node, int]],
          runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
    """The values of `deciders` in each run (its feeds): constants and inputs as they are,
    the rest from runs of `graph` giving them as extra outputs (exported once; a run that
    fails gives None)."""
    found: list[dict[str, Any]] = []
    computed: set[str] = set()
    for feeds in runs:
        values: dict[str, Any] = {}
        for name, (node, _) in deciders.items():
            value = _constant(node)
            if value is not None:
                values[name] = value.numpy()
            elif node.type == DATA and name in feeds:
                values[name] = feeds[name]
            else:
                computed.add(name)
        found.append(values)
    if not computed:
        return list(found)
    try:
        with exported_to_run(graph) as exported:
            outputs = exported.proto.graph.output
            declared = {o.name for o in outputs}
            outputs.extend(onnx.ValueInfoProto(name=n) for n in sorted(computed - declared))
            if exported.path is not None:  # the file the runner reads (its weights beside it)
                onnx.save(exported.proto, exported.path)
            runner = ModelRunner(exported)
            for read, feeds in zip(found, runs, strict=True):
                read.update({name: value for name, value in runner.run(feeds).items()
                             if name in computed})
    except GeError:
        return [None] * len(runs)  # a warning is never worth another error: undecided
    return list(found)
