"""Which of the values a pass changed is the first to differ from the original's, for
`verify="each-pass"`: a pass that rewrote many regions (every Linear of a model) is named,
but not the rewrite that went wrong (trial AD: a Gemm with transB set wrongly for square
weights only, one layer of three; the user cut the model up by hand to find it).

The values the pass's changed nodes give (in the graph's order) that the model the passes
started from also has, by name, are made outputs of both models, which run once more on the
verification's inputs, `BATCH` values at a time until one differs beyond the tolerance:
that is the answer, with the node that computes it (and, when that node reads a value of a
changed node the original has no name for, that node: the one a pass gave a new output).
Only asked when the check failed, and never worth another error: a model that cannot be so
run (a value of a body, a name the pass gave anew), or one too large to be kept whole beside
the graph (`snapshot`), leaves the message as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx

from ge.graph import Graph, Node
from ge.graph.domains import defined_value_names
from ge.graph.node import is_const
from ge.graph.places import ir_node_label

__all__ = ["Difference", "Wording", "first_difference", "snapshot"]

#: How many values the first more run of the two models compares; the next ones as many
#: as `RUN_BYTES` of values the runs so far averaged (200 values a run made a 10k-node
#: model take 66 runs of both models: trial AH); how many values at most in all.
FIRST_BATCH = 200
RUN_BYTES = 64 * 2**20
MOST = 20_000


@dataclass(frozen=True)
class Difference:
    """What `first_difference` found: the message's words, and the node whose change the
    difference is put down to (its error's location follows it)."""

    text: str
    node: str | None = None


@dataclass(frozen=True)
class Wording:
    """How a `Difference` speaks of the values looked at and of the model compared with:
    a pass's changes against the original (`verify="each-pass"`), or every value of one
    model against another's (`ge.testing.assert_numerically_equal`)."""

    values: str = "it changed"
    theirs: str = "the original's"
    owner: str = "the original"


def snapshot(graph: Graph) -> onnx.ModelProto | None:
    """The model the passes start from, kept to compare a failure's values with: only one
    small enough to run from memory (`FILE_RUN_BYTES` of constants), whose copy costs
    little; a larger one's weights are not held twice for it (None: nothing is told)."""
    from ge.graph.model_io import constants_nbytes
    from ge.session import runner

    if constants_nbytes(graph) > runner.FILE_RUN_BYTES:
        return None
    return graph.to_onnx()


def first_difference(before: onnx.ModelProto, graph: Graph, changed: Sequence[str],
                     inputs: Mapping[str, Any], rtol: float, atol: float, *,
                     wording: Wording = Wording()) -> Difference:
    """"; the first value it changed that differs from the original's: 'a1' of Gemm node
    '/fc1/Gemm' (max abs diff 3.1)" and that node, or an empty `Difference` when none can be
    told (see the module): `before` is the model the passes started from, `changed` the
    nodes of `graph` the pass changed (`wording` says it otherwise)."""
    try:
        known = defined_value_names(before.graph)
        wanted = set(changed)
        candidates: list[tuple[str, Node]] = []
        for node in graph.topological_order():
            if node.name in wanted:
                candidates.extend((name, node) for name in node.get_output_names()
                                  if name in known)
        if not candidates:
            return Difference("")
        compiled = graph.to_onnx()
        start, count, seen_bytes = 0, FIRST_BATCH, 0
        while start < min(len(candidates), MOST):
            batch = candidates[start:min(start + count, MOST)]
            found, nbytes = _first_in(before, compiled, batch, inputs, rtol, atol)
            if found is not None:
                name, node, diff = found
                return _said(name, node, diff, wanted, known, wording)
            start, seen_bytes = start + len(batch), seen_bytes + nbytes
            count = max(FIRST_BATCH, int(RUN_BYTES * start / max(seen_bytes, 1)))
        if len(candidates) > MOST:
            return Difference(f"; none of the first {MOST} of the {len(candidates)} values "
                              f"{wording.values} differs from {wording.theirs}")
    except Exception:  # (a body's value, a runtime refusing the widened model: say nothing)
        return Difference("")
    return Difference("")


def _first_in(before: onnx.ModelProto, compiled: onnx.ModelProto,
              candidates: Sequence[tuple[str, Node]], inputs: Mapping[str, Any],
              rtol: float, atol: float) -> tuple[tuple[str, Node, float] | None, int]:
    """The first of `candidates` whose values differ, with the largest difference (None
    when none does), and the bytes of the candidates' values in the original's run."""
    from ge.session.comparison import compare_outputs
    from ge.session.runner import ModelRunner

    names = [name for name, _ in candidates]
    ran = []
    for model in (before, compiled):
        widened = onnx.ModelProto()
        widened.CopyFrom(model)
        listed = {o.name for o in widened.graph.output}
        widened.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names
                                    if n not in listed)
        ran.append(ModelRunner(widened).run(inputs))
    for name, node in candidates:
        report = compare_outputs({name: ran[0][name]}, {name: ran[1][name]},
                                 rtol=rtol, atol=atol)
        if not report.ok:
            return (name, node, report.outputs[0].max_abs_diff), 0
    return None, sum(getattr(ran[0][name], "nbytes", 0) for name in names)


def _said(name: str, node: Node, diff: float, changed: set[str], known: set[str],
          wording: Wording) -> Difference:
    """The words for a first difference in `name` of `node`: a changed node it reads whose
    value the original has no name for (a rewrite giving its output a new name: trial AE)
    is named as where it comes from, and blamed."""
    what = f"constant {name!r}" if is_const(node) else f"{name!r} of {ir_node_label(node)}"
    text = (f"; the first value {wording.values} that differs from {wording.theirs}: {what} "
            f"(max abs diff {diff:.3g})")
    for i in range(node.get_inputs_size()):
        producer = node.get_input_producer(i)
        if producer is None:
            continue
        source, port = producer
        value = source.get_output_name(port)
        if source.name in changed and value not in known:
            text += (f", which reads {value!r} of {ir_node_label(source)}, a value "
                     f"{wording.owner} has no name for")
            above = _unnamed_above(source, changed, known)
            if above is None:  # (trial AJ: every value renamed, the break 10,000 nodes up)
                text += (f", computed from more than {_MOST_ABOVE} nodes whose values it has "
                         "no name for either: where the models part cannot be told by name")
            elif above:
                shown = ", ".join(_label(n) for n in above[:_SHOWN_ABOVE])
                more = (f" and {len(above) - _SHOWN_ABOVE} nearer" if len(above) > _SHOWN_ABOVE
                        else "")
                text += (f", as are the values it is computed from, of {shown}{more}: the "
                         "models part at one of these nodes")  # (trial AH: 3 nodes above)
            return Difference(text, source.name)
    return Difference(text, node.name)


#: How many nodes above a value the original has no name for are named, and looked for.
_SHOWN_ABOVE = 4
_MOST_ABOVE = 50


def _label(node: Node) -> str:
    return f"constant {node.name!r}" if is_const(node) else ir_node_label(node)


def _unnamed_above(node: Node, changed: set[str], known: set[str]) -> list[Node] | None:
    """The changed nodes `node` is computed from through values the original has no name
    for, in the graph's order (the farthest up first: the models part where such a chain
    starts from equal values, unless a node further down differs), or None when there are
    more than `_MOST_ABOVE`: a rewrite of a chain of new nodes, among which the one that
    differs first cannot be told apart by name (trial AH: a wrong LeakyRelu two new Negs
    above the value named)."""
    found: list[Node] = []
    seen = {node}
    pending = [node]
    while pending:
        current = pending.pop()
        for i in range(current.get_inputs_size()):
            producer = current.get_input_producer(i)
            if producer is None or producer[0] in seen:
                continue
            source, port = producer
            if source.name in changed and source.get_output_name(port) not in known:
                if len(found) == _MOST_ABOVE:
                    return None
                seen.add(source)
                found.append(source)
                pending.append(source)
    graph = node.owner_graph
    position = {n: i for i, n in enumerate(graph.topological_order() if graph else [])}
    return sorted(found, key=lambda n: position.get(n, -1))
