"""Nodes a pass looks for that only model-local functions hold: a call of a function
(`ModelProto.functions`) is one node to a pass, which never sees the body, so a model whose
SiLU is a function `local.SiLU` has no `Mul` for a SiLU pattern, and an explanation that
said only "no Mul node" sent the author looking for a bug in the pass.

`function_ops(graph, operators)` counts the nodes of the operators in the body of every
function the model calls (directly, from a body of If/Loop/Scan, or through another
function), the bodies of If/Loop/Scan inside a function included; overloads
(`FunctionProto.overload`) are told apart as calls name them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import onnx

from ge.graph import Graph
from ge.graph.domains import proto_nodes
from ge.ops.functions import FunctionKey, call_key, function_key, node_call_key
from ge.ops.schemas import normalize_domain
from ge.passes.candidates import Operator
from ge.passes.explain_reasons import op_label

__all__ = ["FunctionOps", "function_ops"]

#: What a function sentence ends with: the reason the nodes are not candidates.
UNSEEN = "the pass does not see function bodies"


@dataclass(frozen=True)
class FunctionOps:
    """The nodes of a pass's operators in the body of one model-local function (`counts`:
    by operator label, in the order asked), and who calls it: nodes of the model's graphs
    (`called_by`, by name) and other functions (`called_by_functions`, "domain.name")."""

    domain: str
    name: str
    overload: str
    counts: dict[str, int]
    called_by: list[str] = field(default_factory=list)
    called_by_functions: list[str] = field(default_factory=list)

    @property
    def function(self) -> str:
        """The function as messages name it: `local.SiLU`, `local.SiLU:fast` for an
        overload."""
        label = f"{self.domain}.{self.name}" if self.domain else self.name
        return f"{label}:{self.overload}" if self.overload else label

    def __str__(self) -> str:
        callers = [*(f"node {n!r}" for n in self.called_by),
                   *(f"function {f}" for f in self.called_by_functions)]
        ops = ", ".join(f"{count} {op}" for op, count in self.counts.items())
        noun = "node" if sum(self.counts.values()) == 1 else "nodes"
        return (f"function {self.function} (called by {', '.join(callers)}) has {ops} {noun}: "
                f"{UNSEEN}")

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.function, "domain": self.domain, "name": self.name,
                "overload": self.overload, "counts": dict(self.counts),
                "called_by": list(self.called_by),
                "called_by_functions": list(self.called_by_functions)}


def function_ops(graph: Graph, operators: Iterable[Operator]) -> list[FunctionOps]:
    """The functions of `graph`'s model that the model calls and whose bodies hold nodes of
    `operators` (an operator of domain None: its op type in any domain, not a call of a
    local function, as `candidates` takes it), in the model's order of functions."""
    root = graph.root_graph()
    functions = list(root.model.functions)
    if not functions:
        return []
    by_key = {function_key(f): f for f in functions}
    wanted = list(dict.fromkeys(operators))
    callers: dict[FunctionKey, list[str]] = {}
    for node in root.get_all_nodes():
        key = node_call_key(node)
        if key in by_key:
            callers.setdefault(key, []).append(node.name)
    nested: dict[FunctionKey, list[str]] = {}
    for function in functions:
        for node in proto_nodes(function.node):
            if call_key(node) in by_key:
                nested.setdefault(call_key(node), []).append(_label(function))
    called = _reachable(set(callers), by_key)
    found = []
    for function in functions:
        key = function_key(function)
        if key not in called:
            continue
        counts = _counts(function, wanted, set(by_key))
        if counts:
            found.append(FunctionOps(
                normalize_domain(function.domain), function.name, function.overload, counts,
                callers.get(key, []), list(dict.fromkeys(nested.get(key, [])))))
    return found


def _label(function: onnx.FunctionProto) -> str:
    return FunctionOps(normalize_domain(function.domain), function.name, function.overload,
                       {}).function


def _reachable(direct: set[FunctionKey], by_key: dict[FunctionKey, onnx.FunctionProto]
               ) -> set[FunctionKey]:
    """The functions called from the graphs and, through their bodies, the ones they call."""
    seen, pending = set(direct), list(direct)
    while pending:
        for node in proto_nodes(by_key[pending.pop()].node):
            key = call_key(node)
            if key in by_key and key not in seen:
                seen.add(key)
                pending.append(key)
    return seen


def _counts(function: onnx.FunctionProto, operators: list[Operator],
            local: set[FunctionKey]) -> dict[str, int]:
    """The nodes of `operators` in the function's body (If/Loop/Scan bodies included), by
    operator label, in the body's order."""
    counts: Counter[str] = Counter()
    for node in proto_nodes(function.node):
        domain = normalize_domain(node.domain)
        for op_type, wanted in operators:
            if node.op_type != op_type:
                continue
            # (of domain None: in any domain, but not a call of a local function)
            any_domain = wanted is None and (not domain or call_key(node) not in local)
            if any_domain or domain == wanted:
                counts[op_label(op_type, domain)] += 1
    return dict(counts)
