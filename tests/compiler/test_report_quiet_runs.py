"""A report lists every pass run but those on a subgraph body that found and changed
nothing, which it counts (`quiet_body_invocations`): a model of 7,500 If/Loop bodies made a
160 MB report, 98% of it such runs (trial DD). The passes' summaries count every run."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

import ge

pytestmark = pytest.mark.builtin_passes


def _branches(count: int) -> onnx.ModelProto:
    """`count` Ifs in a chain, each branch a Neg (nothing for a pass to do) but the first
    If's then-branch, which holds an Identity for NoOpElimination to remove."""
    def body(name: str, identity: bool) -> onnx.GraphProto:
        nodes = [helper.make_node("Neg", ["x"], [f"{name}_n"])]
        out = f"{name}_n"
        if identity:
            nodes.append(helper.make_node("Identity", [out], [f"{name}_i"]))
            out = f"{name}_i"
        return helper.make_graph(nodes, name, [],
                                 [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2])])

    nodes = [helper.make_node("If", ["c"], [f"y{i}"], name=f"if{i}",
                              then_branch=body(f"then{i}", i == 0),
                              else_branch=body(f"else{i}", False)) for i in range(count)]
    nodes.append(helper.make_node("Sum", [f"y{i}" for i in range(count)], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [2]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL,
                                                                         [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_quiet_body_runs_are_counted_not_listed() -> None:
    result = ge.compile(_branches(5))
    data = result.report.as_dict()
    listed = data["invocations"]
    every = result.report.records
    assert data["quiet_body_invocations"] == len(every) - len(listed) > 0
    assert all(r["graph_path"] == "" or r["changed"] or r["matches"] for r in listed)
    assert any(r["graph_path"] == "if0.then_branch" and r["name"] == "NoOpElimination"
               and r["changed"] for r in listed)  # a body run that changed something stays
    assert sum(p["runs"] for p in data["passes"]) == len(every)  # summaries count them all
    json.dumps(data)  # (JSON-ready)
