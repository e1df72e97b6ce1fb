"""Which of the values a pass changed is the first to differ from the original's, for
`verify="each-pass"`: a pass that rewrote many regions (every Linear of a model) is named,
but not the rewrite that went wrong (trial AD: a Gemm with transB set wrongly for square
weights only, one layer of three; the user cut the model up by hand to find it).

The values the pass's changed nodes give (in the graph's order) that the model the passes
started from also has, by name, are made outputs of both models, which run once more on the
verification's inputs; the first whose values differ beyond the tolerance is the answer.
Only asked when the check failed, and never worth another error: a model that cannot be so
run (a value of a body, a name the pass gave anew), or one too large to be kept whole beside
the graph (`snapshot`), leaves the message as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx

from ge.graph import Graph, Node
from ge.graph.node import is_const
from ge.graph.places import ir_node_label

__all__ = ["first_difference", "snapshot"]

#: How many values are compared at most: the first ones the pass changed, in graph order.
_MOST = 200


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
                     inputs: Mapping[str, Any], rtol: float, atol: float) -> str:
    """"; the first value it changed that differs from the original's: 'a1' of Gemm node
    '/fc1/Gemm' (max abs diff 3.1)", or "" when none can be told (see the module): `before`
    is the model the passes started from, `changed` the nodes of `graph` the pass changed."""
    from ge.session.comparison import compare_outputs
    from ge.session.runner import ModelRunner

    try:
        known = _value_names(before.graph)
        wanted = set(changed)
        candidates: list[tuple[str, Node]] = []
        for node in graph.topological_order():
            if node.name in wanted:
                candidates.extend((name, node) for name in node.get_output_names()
                                  if name in known)
        candidates = candidates[:_MOST]
        if not candidates:
            return ""
        names = [name for name, _ in candidates]
        ran = []
        for model in (before, graph.to_onnx()):
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
                worst = report.outputs[0]
                what = (f"constant {name!r}" if is_const(node)
                        else f"{name!r} of {ir_node_label(node)}")
                return (f"; the first value it changed that differs from the original's: "
                        f"{what} (max abs diff {worst.max_abs_diff:.3g})")
    except Exception:  # (a body's value, a runtime refusing the widened model: say nothing)
        return ""
    return ""


def _value_names(graph: onnx.GraphProto) -> set[str]:
    """The values the main graph of a model defines: its initializers, inputs and the
    outputs of its nodes."""
    names = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    names.update(o for node in graph.node for o in node.output if o)
    return names
