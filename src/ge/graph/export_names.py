"""The names a `Graph` is written to ONNX under: graph outputs, values and nodes.

A graph read from ONNX keeps its output names whatever produces the outputs now
(`OutputNames`, with the `Identity` nodes ONNX then needs); onnxruntime refuses two nodes of
one name, so `unique_node_names` gives the clashing ones their IR names before a write.
Planning names is its own concept beside writing protos (`ge.graph.onnx_export`), which asks
it for every name it writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from ge.graph.allocation import no_gc_pauses
from ge.graph.graph import DATA, NET_OUTPUT, Graph
from ge.graph.node import Node, is_const

__all__ = ["NodeNamesMadeUnique", "OutputNames", "Producer", "Renames", "added_identities",
           "as_initializer", "constant_origin", "liftable", "unique_node_names", "value_name",
           "written_name"]


Producer = tuple[Node, int]
# Exported names of values whose ONNX name is not their IR name.
Renames = dict[Producer, str]
# Who holds an exported value name: (graph, producer), or (graph, None) for an `Identity`
# written by the export.
_Holder = tuple[Graph, "Producer | None"]


class OutputNames:
    """The output names of every graph of one export, and the value renames they need.

    A graph read from ONNX keeps the names it was read with (`Graph._output_names`), so a
    pass giving an output a new producer does not change the model's interface: the producer
    is exported under the output's name, or an `Identity` in the graph produces it where
    ONNX needs one (one value feeding two names, a graph input, an outer value: a subgraph
    output must be produced inside it); a stale value still holding the name is renamed.
    Graphs built in memory keep their producers' names, with an `Identity` only where ONNX
    needs a distinct or local output. A value listed as several outputs under one name keeps
    it in each (one producer). A sparse constant (a sparse initializer, a `Constant` of
    `sparse_value`) is never an output itself: onnxruntime cannot give one back ("do not
    support dims higher than 2"), so an `Identity` produces it. Made-up names are unique
    in the model and deterministic.

    Graphs are planned as they are written, enclosing graphs first, so a subgraph never
    renames a value of an enclosing graph (part of it is written already).
    """

    def __init__(self, root: Graph) -> None:
        self.root = root
        self.renames: Renames = {}
        self._holders: dict[str, list[_Holder]] | None = None
        self._reserved: set[str] = set()  # every graph's wanted output names
        self._node_names: set[str] = set()

    def name(self, producer: Producer) -> str:
        """The exported name of a value."""
        renamed = self.renames.get(producer)
        return renamed if renamed is not None else producer[0]._out_names[producer[1]]

    def plan(self, graph: Graph, net_output: Node) -> tuple[list[str], list[onnx.NodeProto]]:
        """The exported output names of `graph` and the `Identity` nodes producing some.

        Called before any node of `graph` is written; renames land in `self.renames`.
        """
        producers: list[Producer] = net_output._inputs  # type: ignore[assignment]  # checked
        wanted = graph._output_names
        names = [""] * len(producers)
        fixed: set[Producer] = set()  # producers exported under an output name of `graph`
        pending: list[int] = []
        for i, producer in enumerate(producers):
            want = wanted[i] if i < len(wanted) else ""
            if want and producer[0]._graph is graph and self.name(producer) == want:
                names[i] = want  # the common case: the output is what it was read as
                fixed.add(producer)
            else:
                pending.append(i)
        if not pending:
            return names, []
        identities: list[onnx.NodeProto] = []
        assigned = {n for n in names if n}
        # One value listed as several outputs under one name (valid ONNX: `[y, y]`) is
        # produced once: a repeat takes the name its first listing got, whatever that
        # needed (a rename, an Identity), instead of a second producer of the name.
        planned: dict[tuple[str, Producer], str] = {}
        for i in pending:
            producer = producers[i]
            want = wanted[i] if i < len(wanted) else ""
            if want:
                repeat = planned.get((want, producer))
                if repeat is not None:
                    names[i] = repeat
                    continue
            current = self.name(producer)
            local = producer[0]._graph is graph
            sparse = "sparse_value" in producer[0]._attrs  # (never an output: class doc)
            renamable = (local and producer[0]._type != DATA and producer not in fixed
                         and not sparse)
            if want and renamable and self._take(want, graph, producer, fixed):
                self._rename(producer, want)
                current = want
            if local and current not in assigned and (renamable or not want) and not sparse:
                name = current  # the producer's value is the output
                fixed.add(producer)
            else:
                free = want and self._take(want, graph, None, fixed)
                name = want if free else self._fresh(want or current)
                identities.append(self._identity(current, name))
            names[i] = name
            assigned.add(name)
            if want:
                planned[(want, producer)] = name
        return names, identities

    # -- the model-wide tables, for the rare graph whose outputs changed --------------------
    def _tables(self) -> dict[str, list[_Holder]]:
        """Who holds each value name in the whole model (its node names and wanted output
        names too), made on first need: an untouched model never needs it."""
        if self._holders is None:
            holders: dict[str, list[_Holder]] = {}
            pending = [self.root]
            while pending:
                graph = pending.pop()
                self._reserved.update(graph._output_names)
                for node in graph._listed():  # the graph's order, not index history
                    self._node_names.add(node._export_name or node._name)
                    for i, value in enumerate(node._out_names):
                        if value:
                            holders.setdefault(self.name((node, i)), []).append((graph, (node, i)))
                    pending.extend(node.get_subgraphs())
            self._holders = holders
        return self._holders

    def _fresh(self, base: str) -> str:
        """A value name used nowhere in the model, reserved from now on."""
        holders = self._tables()
        k = 1
        while f"{base}_{k}" in holders or f"{base}_{k}" in self._reserved:
            k += 1
        name = f"{base}_{k}"
        holders[name] = []
        return name

    def _rename(self, producer: Producer, name: str) -> None:
        """Export `producer`'s value as `name` (its consumers everywhere read that name)."""
        holders = self._tables()
        old = self.name(producer)
        entry = next(h for h in holders[old] if h[1] == producer)
        holders[old].remove(entry)
        holders.setdefault(name, []).append(entry)
        if name == producer[0]._out_names[producer[1]]:
            self.renames.pop(producer, None)
        else:
            self.renames[producer] = name

    def _take(self, name: str, graph: Graph, producer: Producer | None,
              fixed: set[Producer]) -> bool:
        """Make `name` free for `producer` (None: an `Identity` of `graph`) to export under.

        Other values holding it where it would clash (this graph, the graphs around it and
        inside it) are renamed to fresh names; False, changing nothing, when one of them
        cannot be: a graph input, an output already named, a value of an enclosing graph.
        """
        holders = self._tables()
        around = list(graph._ancestors())
        clashing = [h for h in holders.get(name, ()) if h[1] != producer and (
            h[0] in around or graph in list(h[0]._ancestors()))]
        for held_in, held in clashing:
            if (held is None or held[0]._type == DATA or held in fixed
                    or (held_in is not graph and held_in in around)):
                return False
        for _, held in clashing:
            self._rename(held, self._fresh(name))  # type: ignore[arg-type]  # checked above
        if producer is None:
            holders.setdefault(name, []).append((graph, None))
        return True

    def _identity(self, source: str, name: str) -> onnx.NodeProto:
        """`name = Identity(source)`, under a node name unique in the model."""
        self._tables()
        node_name = f"{name}_identity"
        k = 0
        while node_name in self._node_names:
            k += 1
            node_name = f"{name}_identity_{k}"
        self._node_names.add(node_name)
        return onnx.helper.make_node("Identity", [source], [name], name=node_name)


def value_name(producer: tuple[Node, int] | None, renames: Renames) -> str:
    if producer is None:
        return ""
    if renames:
        renamed = renames.get(producer)
        if renamed is not None:
            return renamed
    return producer[0]._out_names[producer[1]]


def constant_origin(node: Node) -> bool:
    return node._proto is not None


def liftable(node: Node) -> bool:
    """A `Constant` operator that can become an initializer: one with a dense `value`
    (not `sparse_value` or the `value_float(s)`/`value_int(s)`/`value_string(s)` forms)."""
    return "value" in node._attrs


def as_initializer(node: Node, lift: bool, old_ir: bool) -> bool:
    """Whether a `Const` node is written as an initializer (not as a `Constant` operator):
    one made in the IR, or a liftable `Constant` when constants are lifted; none in a model
    of ir_version < 4 (`old_ir`), where an initializer must also be a graph input (except
    those read so, which `write_graph` writes back as they were)."""
    return not old_ir and (not constant_origin(node) or (lift and liftable(node)))


@dataclass(frozen=True)
class NodeNamesMadeUnique:
    """Nodes of graph `graph` that export wrote as `name` (in ONNX, a node's name) and the
    names it writes for them now (`unique_node_names`), in the graph's order."""

    graph: str
    name: str
    names: tuple[str, ...]


def _written_as_node(node: Node, lift: bool, old_ir: bool) -> bool:
    """Whether export writes `node` as an ONNX node (named): not a graph input or output,
    nor a `Const` written as an initializer (`lift` as `graph_to_model(lift_constants=)`)."""
    if node._type in (DATA, NET_OUTPUT):
        return False
    return not is_const(node) or not as_initializer(node, lift, old_ir)


def unique_node_names(graph: Graph, *, lift_constants: bool = False
                      ) -> list[NodeNamesMadeUnique]:
    """Make export write a different name for every named node of each graph of the model
    (the root graph and every subgraph): ONNX allows two nodes of a graph the same name,
    onnxruntime refuses to load such a model ("two nodes with same node name").

    Loading keeps each node's name as read for export (lossless) beside its unique IR
    name; here a node whose written name another node of its graph writes too gets its IR
    name written instead (a journaled rename, undone with a transaction), except one of
    them: the node whose IR name it is, else the first in the graph's order. A name a
    renamed node now takes can be the name another node was read with ("a", "a", "a_1":
    the second becomes "a_1"), which then gets its IR name too. Nodes without a name keep
    none (onnxruntime accepts any number of those). `lift_constants` as in `to_onnx`:
    `Constant` operators written as initializers have no name to clash.

    Returns what changed, per graph and name read: empty when the names were unique."""
    lift = lift_constants and graph.root_graph().model.ir_version >= 4
    old_ir = graph.root_graph().model.ir_version < 4
    changed: list[NodeNamesMadeUnique] = []
    for g in [graph, *graph.get_all_subgraphs()]:
        listed = g._listed()
        if not any(n._export_name and n._export_name != n._name for n in listed):
            continue  # every node writes its IR name, unique (the usual case: no scan)
        nodes = [n for n in listed if _written_as_node(n, lift, old_ir)]
        before = {id(n): written_name(n) for n in nodes}
        while True:
            holders: dict[str, list[Node]] = {}
            for node in nodes:
                name = written_name(node)
                if name:
                    holders.setdefault(name, []).append(node)
            clashes = [same for same in holders.values() if len(same) > 1]
            if not clashes:
                break
            for same in clashes:
                keeper = next((n for n in same if written_name(n) == n._name), same[0])
                for node in same:
                    if node is not keeper and written_name(node) != node._name:
                        g._rename_node(node, node._name)  # writes its IR name from now on
        read: dict[str, list[Node]] = {}
        for node in nodes:
            read.setdefault(before[id(node)], []).append(node)
        changed.extend(
            NodeNamesMadeUnique(g._name, name, tuple(written_name(n) for n in same))
            for name, same in read.items()
            if any(written_name(n) != name for n in same))
    return changed


def added_identities(root: Graph) -> dict[Graph, int]:
    """How many `Identity` nodes writing `root`'s model adds to each of its graphs (where an
    output is a graph input, an outer value or a value listed under two names, ONNX needs
    a node of the graph producing it), planned as `write_graph` plans them, nothing
    written: the counts of the model ge writes include them. A graph whose outputs could
    not be written (one not connected) adds none here; writing it fails."""
    added: dict[Graph, int] = {}
    with no_gc_pauses():  # the tables name every value of a model whose outputs changed
        names = OutputNames(root)
        # (bodies depth first in their owners' order: the order write_graph plans them in)
        for graph in [root, *(g for g in root.get_all_subgraphs() if not g.is_orphan())]:
            net_outputs = graph.nodes_of_type(NET_OUTPUT)
            if len(net_outputs) == 1 and None not in net_outputs[0]._inputs:
                _, identities = names.plan(graph, net_outputs[0])
                if identities:
                    added[graph] = len(identities)
        del names  # (freed before the splice, not handed to the oldest generation)
    return added


def written_name(node: Node) -> str:
    """The name export writes for `node`: the name it was read with, else its IR name."""
    return node._export_name if node._export_name is not None else node._name
