"""The node counts of a compilation's report are ONNX's (`NodeCounts`), checked against the
protos of every vendored model (`node_counting.onnx_node_counts`) and of what ge writes.

Found by a user: a 100,011-node file (`len(model.graph.node)`) showed as "131,521 nodes":
the report counted the IR's `Const` nodes made for initializers. Now nodes are the main
graph's operators, constants (initializers and `Constant` operators, which ge writes as
initializers) and the nodes of bodies counted apart.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import ge
from ge.compiler.report import NodeCounts, node_counts
from model_paths import shared_model as model_path
from node_counting import onnx_node_counts

pytestmark = pytest.mark.builtin_passes


def _tuple(counts: NodeCounts) -> tuple[int, int, int]:
    return counts.nodes, counts.subgraph_nodes, counts.constants


def test_report_counts_what_onnx_counts(shared_model: str, tmp_path: Path) -> None:
    """Before: the model file as ONNX counts it; after: the file `save` writes, whose
    `len(graph.node)` is the report's node count (it holds no `Constant` operator)."""
    source = model_path(shared_model)  # (the parameter: a vendored model's stem)
    model = onnx.load(source)
    result = ge.compile(source)
    report = result.report
    assert _tuple(report.counts_before) == onnx_node_counts(model)
    out = tmp_path / "out.onnx"
    result.save(out)
    written = onnx.load(out)
    assert _tuple(report.counts_after) == onnx_node_counts(written)
    assert report.counts_after.nodes == len(written.graph.node)
    assert report.counts_after == node_counts(result.graph)
    steps = report.steps
    assert (steps[0].nodes_before, steps[0].subgraph_nodes_before,
            steps[0].constants_before) == _tuple(report.counts_before)
    assert (steps[-1].nodes_after, steps[-1].subgraph_nodes_after,
            steps[-1].constants_after) == _tuple(report.counts_after)
    data = report.as_dict()
    assert (data["nodes_before"], data["subgraph_nodes_before"],
            data["constants_before"]) == onnx_node_counts(model)
    assert (data["nodes_after"], data["subgraph_nodes_after"],
            data["constants_after"]) == onnx_node_counts(written)
    before, after = report.counts_before, report.counts_after
    assert report.summary().startswith(f"nodes {before.nodes} → {after.nodes} "
                                       f"({after.nodes - before.nodes:+d})")
    assert f", constants {before.constants} → {after.constants}; " in report.summary()
    assert (f" and {before.subgraph_nodes} → {after.subgraph_nodes}" in report.summary()) == (
        bool(before.subgraph_nodes or after.subgraph_nodes))


def test_distilbert_numbers() -> None:
    """The example of docs/cli.md: 143 nodes in the file, 29 of them `Constant` operators,
    which are constants beside the 17 initializers; the compiled file lists 65 nodes."""
    report = ge.compile(model_path("distilbert_tiny")).report
    assert _tuple(report.counts_before) == (114, 0, 46)
    assert _tuple(report.counts_after) == (65, 0, 27)


def test_bodies_are_counted_apart() -> None:
    """control_flow: 9 nodes in its graph.node (3 of them Constant operators) and 13 in its
    If/Loop bodies (3 Constant): the summary says both."""
    report = ge.compile(model_path("control_flow")).report
    assert _tuple(report.counts_before) == (6, 10, 8)
    assert report.summary().startswith(
        f"nodes 6 → {report.counts_after.nodes} ({report.counts_after.nodes - 6:+d}) and 10 → "
        f"{report.counts_after.subgraph_nodes} ")
