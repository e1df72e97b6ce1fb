"""What changed between two graphs: a snapshot of each (nodes by name, with their op type,
inputs, shapes, attributes and origin), their difference, and the changes of every pass run
of a compilation (`PassChangeRecorder`, a pipeline observer). `ge compile --html` and
`ge diff` show them (`ge.cli.html_page`).

Nodes are identified between the two graphs by name (ge keeps the names of the nodes passes
do not touch); nodes of subgraphs by `BODY::NAME` (`node_key`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ge._text import first_and_more
from ge.compiler.report import NodeCounts, PassRunRecord, op_label
from ge.compiler.scheduler import PipelineObserver
from ge.graph import Graph
from ge.graph.graph import CONST
from ge.graph.node import Node
from ge.graph.subgraphs import body_path

__all__ = ["IO_TYPES", "GraphDiff", "GraphSnapshot", "NodeRecord", "PassChange",
           "PassChangeRecorder", "diff_snapshots", "node_key", "renamed_constants",
           "snapshot"]

#: Op types of the graph inputs and outputs (drawn and counted apart from operators).
IO_TYPES = ("Data", "NetOutput")


def node_key(node: Node, root_name: str) -> str:
    """A node's identity across graphs: its name, `BODY::NAME` in a subgraph, BODY where
    it is (`if1.then_branch`: exporters give every body one name, and an unnamed node
    of two bodies one IR name; `ge.graph.subgraphs.body_path`)."""
    owner = node.owner_graph
    path = body_path(owner) if owner is not None else ""
    return f"{path}::{node.name}" if path else node.name


def _dtype(desc: Any) -> str:
    name = getattr(getattr(desc, "data_type", None), "name", "")
    if not name or name in ("DT_UNDEFINED", "DT_MAX"):
        return "?"
    return name.removeprefix("DT_").lower()


def _shape(desc: Any) -> str:
    shape = getattr(desc, "shape", None)
    if shape is None or shape.is_unknown_rank():
        return "?"
    dims = ["?" if isinstance(d, int) and d < 0 else str(d) for d in shape]
    return "[" + ", ".join(dims) + "]"


def _declared_outputs(graph: Graph) -> dict[tuple[Node, int], Any]:
    """The desc each graph output (of `graph` and its bodies) declares, by its producer's
    output: what a value's type is where its producer's desc says nothing."""
    from ge.ops.model_inference import declared_outputs

    declared: dict[tuple[Node, int], Any] = {}
    for g in [graph, *graph.get_all_subgraphs()]:
        for _, node, index, desc in declared_outputs(g):
            declared.setdefault((node, index), desc)
    return declared


def _known(desc: Any, declared: dict[tuple[Node, int], Any], value: tuple[Node, int]) -> Any:
    """`desc`, or the type a graph output declares for `value` when `desc` knows nothing."""
    if desc.data_type.name in ("DT_UNDEFINED", "DT_MAX") or desc.shape.is_unknown_rank():
        return declared.get(value, desc)
    return desc


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _attr_text(value: Any) -> tuple[str, Any]:
    """(what the tooltip shows, what change detection compares) of an attribute value."""
    from ge.graph.tensor import Tensor

    if isinstance(value, Tensor):
        dims = "×".join(str(d) for d in value.shape) or "scalar"
        digest = hashlib.blake2b(value.tobytes(), digest_size=16).hexdigest()
        text = f"tensor {value.data_type.name.removeprefix('DT_').lower()} {dims}"
        if value.size <= 8:
            try:
                text += " " + _short(str(value.numpy().tolist()), 60)
            except (TypeError, ValueError):
                pass
        return text, ("tensor", int(value.data_type), tuple(value.shape), digest)
    if isinstance(value, Graph):
        return f"graph {value.name}", ("graph", value.name)
    if isinstance(value, float) or (isinstance(value, list) and value
                                    and all(isinstance(v, float) for v in value)):
        # ONNX float attributes are float32: `1e-05`, not 9.999999747378752e-06 (trial AE)
        shown = (str(np.float32(value)) if isinstance(value, float)
                 else "[" + ", ".join(str(np.float32(v)) for v in value) + "]")
        return _short(shown), repr(value)
    return _short(repr(value)), repr(value)


@dataclass
class NodeRecord:
    """What the page knows of one node."""

    key: str
    name: str
    type: str
    graph: str
    inputs: list[tuple[str | None, int, str, str, str]]  # producer key, port, value, shape, dtype
    outputs: list[tuple[str, str, str]]  # value, shape, dtype
    attrs: dict[str, str]
    signature: Any  # compared between graphs (op type, inputs, attributes)
    origin_pass: str | None = None
    origin_nodes: list[str] = field(default_factory=list)

    def as_json(self) -> list[Any]:
        return [self.name, self.type, self.graph, self.inputs, self.outputs, self.attrs,
                self.origin_pass, self.origin_nodes]

    def brief_json(self) -> list[Any]:
        """`as_json` without inputs, outputs and attributes (a node the page does not draw
        of a large graph: found by name and type)."""
        return [self.name, self.type, self.graph, [], [], {}, self.origin_pass,
                self.origin_nodes]


@dataclass
class GraphSnapshot:
    """Every node of a graph (subgraphs included) in graph order, with its subgraphs."""

    name: str
    nodes: dict[str, NodeRecord]
    subgraphs: list[tuple[str, str]]  # (subgraph name, key of the node owning it)

    def operators(self) -> Counter[str]:
        """The op histogram (as the compile report counts: no Data or NetOutput)."""
        return Counter(r.type for r in self.nodes.values() if r.type not in IO_TYPES)

    def node_counts(self) -> NodeCounts:
        """Nodes, subgraph nodes and constants as the compile report counts them
        (`ge.compiler.report.NodeCounts`: ONNX's count, constants apart)."""
        nodes = bodies = constants = 0
        for record in self.nodes.values():
            if record.type in IO_TYPES:
                continue
            if record.type == CONST:
                constants += 1
            elif record.graph == self.name:
                nodes += 1
            else:
                bodies += 1
        return NodeCounts(nodes, bodies, constants)


def snapshot(graph: Graph) -> GraphSnapshot:
    """A graph as the page needs it (read only)."""
    root = graph.name
    nodes: dict[str, NodeRecord] = {}
    subgraphs: list[tuple[str, str]] = []
    declared = _declared_outputs(graph)
    for node in graph.get_all_nodes():
        key = node_key(node, root)
        inputs: list[tuple[str | None, int, str, str, str]] = []
        producers: list[tuple[str, int] | None] = []
        for i in range(node.get_inputs_size()):
            found = node.get_input_producer(i)
            if found is None:
                inputs.append((None, -1, "", "", ""))
                producers.append(None)
                continue
            src, port = found
            desc = _known(node.get_input_desc(i), declared, found)
            src_key = node_key(src, root)
            inputs.append((src_key, port, src.get_output_name(port), _shape(desc),
                           _dtype(desc)))
            producers.append((src_key, port))
        outputs = []
        for o, value in enumerate(node.get_output_names()):
            desc = _known(node.get_output_desc(o), declared, (node, o))
            outputs.append((value, _shape(desc), _dtype(desc)))
        attrs: dict[str, str] = {}
        compared: list[tuple[str, Any]] = []
        for name in node.get_attr_names():
            text, digest = _attr_text(node.get_attr(name))
            attrs[name] = text
            compared.append((name, digest))
        for sub in node.get_subgraphs():
            subgraphs.append((sub.name, key))
        meta = node.get_metadata()
        owner = node.owner_graph
        graph_name = owner.name if owner is not None else root
        path = body_path(owner) if owner is not None else ""
        origin = [n for n in meta.get("ge.origin_nodes", "").split(",") if n]
        if path:
            origin = [f"{path}::{n}" for n in origin]
        label = op_label(node)
        nodes[key] = NodeRecord(key, node.name, label, graph_name, inputs, outputs, attrs,
                                (label, tuple(producers), tuple(sorted(compared))),
                                meta.get("ge.origin_pass"), origin)
    return GraphSnapshot(root, nodes, subgraphs)


@dataclass
class PassChange:
    """One pass run that changed the graph: the nodes it removed, added and rewired."""

    pass_name: str
    stage: str
    graph: str
    round: int
    removed: list[tuple[str, str]]  # (key, op type)
    added: list[tuple[str, str]]
    rewired: list[str]
    matched: list[str]  # what its new nodes replace (ge.origin_nodes), else what it removed

    def as_json(self) -> dict[str, Any]:
        return {"pass": self.pass_name, "stage": self.stage, "graph": self.graph,
                "round": self.round, "removed": [k for k, _ in self.removed],
                "added": [k for k, _ in self.added], "rewired": self.rewired,
                "matched": self.matched}


def _names(graph: Graph) -> dict[str, tuple[str, tuple[str, ...]]]:
    """key -> (op type, producer keys): cheap enough to take after every changing pass."""
    root = graph.name
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for node in graph.get_all_nodes():
        producers = tuple(f"{node_key(p[0], root)}:{p[1]}" if p is not None else ""
                          for p in (node.get_input_producer(i)
                                    for i in range(node.get_inputs_size())))
        out[node_key(node, root)] = (op_label(node), producers)
    return out


class PassChangeRecorder(PipelineObserver):
    """Records, for every pass run that changed the graph, the nodes it removed and added
    (node names before and after it), reading the graph only."""

    def __init__(self, graph: Graph) -> None:
        self._last = _names(graph)
        self.changes: list[PassChange] = []
        self.before: GraphSnapshot | None = None  # the graph the pipeline started from
        self.graph: Graph | None = None  # the graph the pipeline compiles (once it started)
        self.failed_at: GraphSnapshot | None = None  # as a failure left it (`--html` then)

    def step_started(self, index: int, label: str, graph: Graph) -> None:
        if self.before is None:  # the model compiled (a converted copy with --opset)
            self.before = snapshot(graph)
            self._last = _names(graph)
            self.graph = graph

    def compilation_failed(self, error: BaseException, graph: Graph) -> None:
        if isinstance(error, Exception):  # (not for Ctrl-C: no page is written then)
            self.failed_at = snapshot(graph)

    def pass_done(self, records: Sequence[PassRunRecord], graph: Graph) -> None:
        """The pass's changes to the whole model, once it ran on every graph (walking the
        model after each body's run made a model of many If nodes quadratic)."""
        changed = [r for r in records if r.changed and not r.rolled_back]
        if not changed:
            return
        record = changed[0]
        where = first_and_more([r.graph_name for r in changed], 1)
        current = _names(graph)
        last = self._last
        removed = [(k, t) for k, (t, _) in last.items() if k not in current]
        added = [(k, t) for k, (t, _) in current.items() if k not in last]
        rewired = [k for k, (t, ins) in current.items()
                   if k in last and last[k] != (t, ins)]
        matched: dict[str, None] = {}
        bodies: dict[str, Graph] | None = None
        for key, _ in added:
            path, sep, sub = key.rpartition("::")
            if sep and bodies is None:
                bodies = {body_path(body): body for body in graph.get_all_subgraphs()}
            owner = graph if not sep else (bodies or {}).get(path)
            node_name = sub if sep else key
            if owner is None or not owner.has_node(node_name):
                continue
            for origin in owner.find_node_by_name(node_name).get_metadata().get(
                    "ge.origin_nodes", "").split(","):
                if origin:
                    matched[f"{path}::{origin}" if sep else origin] = None
        if added and not matched:
            matched = dict.fromkeys(k for k, _ in removed)
        self.changes.append(PassChange(record.pass_name, record.stage, where,
                                       record.round, removed, added, rewired, list(matched)))
        self._last = current


@dataclass
class GraphDiff:
    """What differs between two snapshots, nodes matched by key (name)."""

    removed: list[str]
    added: list[str]
    changed: dict[str, list[str]]  # key -> what changed: op, inputs, attributes
    matched: set[str]
    ops_before: Counter[str]
    ops_after: Counter[str]
    #: constants under another name only, before key -> after key (`renamed_constants`)
    renamed: dict[str, str] = field(default_factory=dict)
    #: key -> (attribute, as in A, as in B) of each attribute that differs, as the page
    #: shows it ("" where one side has none): a changed constant's value (trial AD: `ge
    #: diff` said "c1 Const: attributes", not 0.5 → 1.5)
    attributes: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    def ops_delta(self) -> dict[str, int]:
        names = sorted(set(self.ops_before) | set(self.ops_after),
                       key=lambda op: (-abs(self.ops_after[op] - self.ops_before[op]), op))
        return {op: self.ops_after[op] - self.ops_before[op] for op in names
                if self.ops_after[op] != self.ops_before[op]}


def diff_snapshots(before: GraphSnapshot, after: GraphSnapshot,
                   passes: Sequence[PassChange] = ()) -> GraphDiff:
    """Removed, added and changed nodes; matched: what new nodes' `ge.origin_nodes` name
    and what the recorded pass runs rewrote."""
    removed = [k for k in before.nodes if k not in after.nodes]
    added = [k for k in after.nodes if k not in before.nodes]
    renamed = renamed_constants(before, after, removed, added)
    if renamed:
        removed = [k for k in removed if k not in renamed]
        taken = set(renamed.values())
        added = [k for k in added if k not in taken]
    was = {new: old for old, new in renamed.items()}
    changed: dict[str, list[str]] = {}
    attributes: dict[str, list[tuple[str, str, str]]] = {}
    for key, a in after.nodes.items():
        b = before.nodes.get(key) or before.nodes.get(was.get(key, ""))
        if b is None:
            continue
        signature = b.signature if not renamed else (
            b.signature[0], tuple(None if p is None else (renamed.get(p[0], p[0]), p[1])
                                  for p in b.signature[1]), b.signature[2])
        if signature == a.signature:
            continue
        what = []
        for label, x, y in zip(("op", "inputs", "attributes"), signature, a.signature,
                               strict=True):
            if x != y:
                what.append(label)
        changed[key] = what
        if signature[2] != a.signature[2]:
            was_digests, now_digests = dict(signature[2]), dict(a.signature[2])
            attributes[key] = [(name, b.attrs.get(name, ""), a.attrs.get(name, ""))
                               for name in sorted(set(was_digests) | set(now_digests))
                               if was_digests.get(name) != now_digests.get(name)]
    matched: set[str] = set()
    for key in added:
        matched.update(after.nodes[key].origin_nodes)
    for change in passes:
        matched.update(change.matched)
    return GraphDiff(removed, added, changed, matched, before.operators(), after.operators(),
                     renamed, attributes)


def renamed_constants(before: GraphSnapshot, after: GraphSnapshot, removed: Sequence[str],
                      added: Sequence[str]) -> dict[str, str]:
    """The constants of `removed` that are constants of `added` under another name, in the
    same graph with the same value: a model's `Constant` operator `/Constant` is the
    initializer `/Constant_output_0` once ge has compiled it (named by the value it gives).
    Paired by that value's name, so that `ge diff` lists neither them nor their readers
    (trial XX: every constant of a compiled model was listed removed and added)."""
    by_value: dict[tuple[str, str], str] = {}
    for key in added:
        record = after.nodes[key]
        if record.type == CONST and record.outputs:
            by_value.setdefault((record.graph, record.outputs[0][0]), key)
    pairs: dict[str, str] = {}
    for key in removed:
        record = before.nodes[key]
        if record.type != CONST or not record.outputs:
            continue
        found = by_value.get((record.graph, record.outputs[0][0]))
        if found is not None and found not in pairs.values() and (
                after.nodes[found].signature[2] == record.signature[2]):
            pairs[key] = found
    return pairs


# -- drawing ----------------------------------------------------------------------------------
