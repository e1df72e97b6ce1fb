"""Applying a replacement to a region of a graph: the one rewrite all pass kinds share.

A `Region` is what a match, a decomposed node or a `SubgraphBoundary` describes: the nodes
to replace, the producer feeding each boundary input and the anchor behind each boundary
output. `apply_replacement` follows torch.fx's subgraph rewriter: check, copy the
replacement in (its `Data` *i* reads boundary input *i*), type the new nodes, move the
outside consumers of each boundary output to the replacement's output *j* (a pass-through
output moves them to the input it passes), move control edges, remove the old nodes. An
expression-style replacement is built in the region's graph already
(`ge.passes.expression.build_in_place`); `apply_built_in_place` does the same from "move
the consumers" on. The new nodes record the pass that made them (`ge.origin_pass`) and what
they replace (`ge.origin_nodes`) as node metadata, which is saved with the model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ge._text import first_and_more
from ge.errors import GeError, RewriteError, SourceLocation
from ge.graph import CONST, DATA, NET_OUTPUT, Graph, Node, TensorDesc
from ge.graph import order as graph_order
from ge.graph.domains import normalize_domain
from ge.graph.node import is_const
from ge.graph.places import ir_node_label, node_named, node_ref
from ge.graph.types import DataType
from ge.ops.custom_calls import function_location, inference_function_text
from ge.ops.functions import called_function
from ge.ops.inference import descs_contradict, proto_contradicts
from ge.ops.registry import get_custom_op
from ge.ops.shape_values import fill_unknown_dims, unfilled_desc
from ge.passes.source import blame_at

__all__ = [
    "ORIGIN_NODES",
    "ORIGIN_PASS",
    "Region",
    "apply_built_in_place",
    "apply_replacement",
    "closed_region",
    "forget_output_descs",
    "is_constant",
    "tag_origin",
    "would_create_cycle",
]

Producer = tuple[Node, int]
#: Node metadata keys written on every node a rewrite makes.
ORIGIN_PASS = "ge.origin_pass"
ORIGIN_NODES = "ge.origin_nodes"
_CONSTANTS = (CONST, "Constant")


def is_constant(node: Node) -> bool:
    """Whether a pattern's or a graph's node is a constant to matching and rewriting: ge's
    `Const` or an ONNX `Constant`, of the standard domain (an operator a custom domain
    names so is an operator)."""
    return node._type in _CONSTANTS and not normalize_domain(node._domain)


@dataclass
class Region:
    """The part of `graph` a replacement takes over."""

    graph: Graph
    nodes: list[Node]  # removed by the rewrite (a constant still used elsewhere stays)
    inputs: list[Producer]  # boundary input i
    outputs: list[Producer]  # boundary output j
    # Why there are fewer boundary inputs than an author may count (a decomposed node's
    # inputs sharing a producer, or absent), said when a replacement's count differs.
    input_note: str = ""
    # A decompose pass's region (`decompose_region`): its replacement creates one input per
    # boundary input with a builder, where a pattern pass's expression takes `inputs`.
    decomposed: bool = False
    members: set[Node] = field(init=False)  # the nodes, as a set

    def __post_init__(self) -> None:
        self.members = set(self.nodes)

    def outside_consumers(self) -> list[Node]:
        """Nodes outside the region that read a boundary output or follow a region node."""
        found: dict[Node, None] = {}
        for node, index in self.outputs:
            for consumer, _ in node._consumers[index] or ():
                if consumer not in self.members:
                    found[consumer] = None
        for node in self.nodes:
            for succ in node._ctrl_out or ():
                if succ not in self.members:
                    found[succ] = None
        return list(found)

    def name_scope(self) -> str:
        """The scope its operators' names share, as exporters write them (`/enc/ln/Sub` and
        `/enc/ln/Sqrt`: `/enc/ln/`), for naming what replaces them; "" when they share none."""
        names = [n._name for n in self.nodes if not is_constant(n)]
        if not names or any("/" not in name for name in names):
            return ""
        scopes = [name.split("/")[:-1] for name in names]  # "/a/b/Sub" -> ["", "a", "b"]
        shared = 0
        for parts in zip(*scopes):
            if any(part != parts[0] for part in parts):
                break
            shared += 1
        common = scopes[0][:shared]
        return "/".join(common) + "/" if any(common) else ""

    def outside_producers(self) -> list[Node]:
        found: dict[Node, None] = {p[0]: None for p in self.inputs}
        for node in self.nodes:
            for pred in node._ctrl_in or ():
                if pred not in self.members:
                    found[pred] = None
        return list(found)


def would_create_cycle(region: Region) -> bool:
    """Whether fusing the region into one node makes a cycle: some outside consumer of the
    region reaches one of its outside producers (the region is not convex)."""
    graph = region.graph
    producers = [p for p in region.outside_producers() if p._graph is graph]
    if not producers:
        return False
    consumers = region.outside_consumers()
    if graph._order_ok:  # the maintained order is a topological one: paths only go forward
        last = max(p._seq for p in producers)
        if all(c._graph is graph and c._seq > last for c in consumers):
            return False  # every consumer comes after every producer: none reaches one
    for consumer in consumers:
        for producer in producers:
            if graph.would_create_cycle(producer, consumer):
                return True
    return False


def closed_region(graph: Graph, outputs: Sequence[Producer],
                  inputs: Sequence[Sequence[tuple[Node, int]]]) -> list[Node]:
    """The nodes between boundary inputs (consumer anchors) and boundary outputs, found
    backwards from the outputs; `RewriteError` when the region is not closed (an input
    reached that is not a boundary input, or a node used outside that is not an output)."""
    stops = {anchor for anchors in inputs for anchor in anchors}
    found: dict[Node, None] = {}
    stack = [node for node, _ in outputs]
    while stack:
        node = stack.pop()
        if node in found:
            continue
        if node._graph is not graph:
            raise RewriteError(f"{ir_node_label(node)} is not a node of graph {graph.name!r}",
                               nodes=[node.name])
        if node._type in (DATA, NET_OUTPUT):
            raise RewriteError(
                f"the region reaches {ir_node_label(node)}: the boundary must "
                "name every input of the replaced nodes", nodes=[node.name])
        found[node] = None
        for i, producer in enumerate(node._inputs):
            if producer is not None and (node, i) not in stops:
                stack.append(producer[0])
    members = set(found)
    anchors = set(outputs)
    for node in found:
        for index, consumers in enumerate(node._consumers):
            if (node, index) in anchors or not consumers:
                continue
            for consumer, _ in consumers:
                if consumer not in members:
                    raise RewriteError(
                        f"output {index} of {ir_node_label(node)} is read by {node_ref(consumer)} "
                        "outside the region but is not a boundary output",
                        nodes=[node.name, consumer.name])
    return sorted(found, key=graph_order.label)


def _check_replacement(replacement: object, region: Region) -> Graph:
    if not isinstance(replacement, Graph):
        raise RewriteError(f"a replacement must be a ge.graph.Graph, got "
                           f"{type(replacement).__name__}")
    data = replacement.nodes_of_type(DATA)
    if len(data) != len(region.inputs):
        note = f": {region.input_note}" if region.input_note else ""
        raise RewriteError(
            f"replacement {replacement.name!r} has {len(data)} input(s) but the region it "
            f"replaces has {len(region.inputs)}{note}; create one Data per boundary input "
            f"({_inputs_advice(region)})")
    outputs = replacement.get_net_output()
    count = outputs.get_inputs_size() if outputs is not None else 0
    if count != len(region.outputs):
        raise RewriteError(
            f"replacement {replacement.name!r} has {count} output(s) but the region it "
            f"replaces has {len(region.outputs)}")
    return replacement


def _inputs_advice(region: Region) -> str:
    """How a replacement makes one input per boundary input of `region`, said when it has
    another count (worked out then: a decompose pass builds a region per node)."""
    count = len(region.inputs)
    if not region.decomposed:
        return f"inputs[:{count}]"
    read = first_and_more([f"{node_ref(p)}:{k}" for p, k in region.inputs], 8)
    return (f"builder.create_inputs({count}): the values {node_named(region.nodes[0])} "
            f"reads, in input order: {read}")


def apply_replacement(region: Region, replacement: object, *, pass_name: str = "",
                      cycle_checked: bool = False) -> list[Node]:
    """Replace `region` by a copy of `replacement`; returns the new nodes. Checks come
    first: a `RewriteError` (counts, cycle) leaves the graph as it was. `cycle_checked`:
    the caller has just found that the region makes no cycle (the matcher's sweep)."""
    graph = region.graph
    checked = _check_replacement(replacement, region)
    if not cycle_checked and would_create_cycle(region):
        raise RewriteError(
            f"replacing {', '.join(n.name for n in region.nodes)} would make a cycle: a "
            "consumer of the region is also one of its producers' producers",
            nodes=[n.name for n in region.nodes])
    try:
        copied = graph.copy_in(checked, region.inputs)
    except GeError as err:
        raise RewriteError(f"replacement {checked.name!r} cannot be copied in: "
                           f"{err.message}") from err
    untyped = _type_new_nodes(copied.nodes)
    _fill_unknown_outputs(region, copied.nodes, copied.outputs,
                          lambda node, index: node in untyped or not _known(
                              node.get_output_desc(index)))
    _finish_rewrite(region, copied.nodes, copied.outputs, pass_name=pass_name)
    _scope_names(region, copied.nodes)
    return copied.nodes


def _scope_names(region: Region, made: Sequence[Node]) -> None:
    """Put the copied nodes' names in the scope the replaced operators shared (a grouped
    Conv `/layer1/conv/Conv` decomposed: `/layer1/conv/Split`, `/layer1/conv/Conv_1`...),
    as an expression replacement names its operators where it is built."""
    scope = region.name_scope()
    if not scope:
        return
    graph = region.graph
    naming = graph._naming
    for node in made:
        if node._graph is graph and not node._name.startswith(scope):
            old = node._name
            graph._rename_node(node, naming.node_name(scope + old))
            # a value named after its node (`Const:0`, as the copy made it) moves with it
            for index, value in enumerate(node._out_names):
                if value.startswith(f"{old}:"):
                    wanted = f"{node._name}{value[len(old):]}"
                    if not naming.value_taken(wanted):
                        graph._rename_value(node, index, wanted)


def apply_built_in_place(region: Region, made: list[Node], outputs: Sequence[Producer], *,
                         pass_name: str = "", asked_names: Mapping[Node, str] | None = None
                         ) -> None:
    """Finish the rewrite of a replacement built directly in the region's graph (its nodes
    `made`, typed as they were built; see `ge.passes.expression.build_in_place`). An output
    count other than the region's is a `RewriteError` (the pass fails, rolled back). A new
    node asked to be named as a node of the region (`asked_names`) gets that name once the
    region is gone: a folded Conv keeps the name of the Conv it replaces."""
    if len(outputs) != len(region.outputs):
        raise RewriteError(
            f"the replacement has {len(outputs)} output(s) but the region it replaces has "
            f"{len(region.outputs)}", nodes=[n.name for n in region.nodes])
    _fill_unknown_outputs(region, made, outputs, lambda node, index: not _output_known(node, index))
    _finish_rewrite(region, made, outputs, pass_name=pass_name)
    if asked_names:
        _take_over_names(region, asked_names)


def _take_over_names(region: Region, asked_names: Mapping[Node, str]) -> None:
    """Rename each new node to the name it asked for when a removed region node had it."""
    graph = region.graph
    removed = {n._name for n in region.nodes if n._graph is None}
    for node, name in asked_names.items():
        if name in removed and name not in graph._by_name and node._graph is graph:
            graph._rename_node(node, name)


def _fill_unknown_outputs(region: Region, made: Sequence[Node], outputs: Sequence[Producer],
                          unknown: Callable[[Node, int], bool]) -> None:
    """A new node's boundary output whose type inference could not settle (`unknown`)
    takes the desc of the output it replaces (pass-throughs and constants are typed), and
    one whose dims it could not settle takes them from that output: the readers were
    typed with those, and a later pass must see them to match there."""
    new_nodes = set(made)
    for (old, old_index), (new, new_index) in zip(region.outputs, outputs, strict=True):
        if is_constant(new) or new not in new_nodes or not old.has_output_desc(old_index):
            continue
        if unknown(new, new_index):
            new.update_output_desc(new_index, old.get_output_desc(old_index))
        elif unfilled_desc(new, new_index) is not None:  # (usually every dim is known)
            _fill_unknown_dims(new, new_index, old.get_output_desc(old_index))


def _fill_unknown_dims(node: Node, index: int, replaced: TensorDesc) -> None:
    """Fill the unknown dims (or rank) of `node`'s output `index` from `replaced`, the desc
    of the value it takes the place of, when both are of one element type and rank. One
    node's inference follows shapes computed at run time only so far
    (`ge.ops.shape_values`: no symbolic expression such as `batch * seq`), where
    whole-model inference, with onnx's data propagation, named the dims of the value it
    replaces."""
    held = node._held_output_desc(index)
    before = replaced._shape
    if held is None or held._data_type != replaced._data_type or before.is_unknown_rank():
        return
    fill_unknown_dims(node, index, [None if isinstance(d, int) and d < 0 else d
                                    for d in before])


def _finish_rewrite(region: Region, made: list[Node], outputs: Sequence[Producer], *,
                   pass_name: str = "") -> None:
    """The rewrite once the replacement's nodes `made` (typed) are in the region's graph
    and `outputs[j]` produces boundary output *j*: place and tag the new nodes, move the
    outside consumers and control edges, remove the old nodes. New nodes from which no
    output can be reached (a leftover expression of the replacement's builder) are
    dropped: they would compute nothing the graph reads, as patterns may not hold them."""
    graph = region.graph
    _check_output_descs(region, outputs)
    made = _reaching_outputs(graph, made, outputs)
    if made and region.nodes:
        # Where the region is, not at the end of the graph: its consumers then already come
        # after the new nodes, and moving its uses needs no reordering search. (Where that
        # place does not suit, the end of the list, where they were added, is valid too.)
        with contextlib.suppress(GeError):
            graph.insert_after(region.nodes[-1], made)
    tag_origin(made, pass_name, region.nodes)
    members = region.members
    for (old, old_index), (new, new_index) in zip(region.outputs, outputs, strict=True):
        if (old, old_index) != (new, new_index):
            graph.replace_all_uses(old, old_index, new, new_index, exclude=members.__contains__)
    _move_control_edges(region, made)
    _remove(region)
    _take_over_value_names(region, made, outputs)


def _check_output_descs(region: Region, outputs: Sequence[Producer]) -> None:
    """A `RewriteError` when an output of the replacement is typed otherwise than the
    output it takes the place of (another element type, rank or static size): its readers
    were made for the old one, so the fault is the replacement's, said here rather than
    found later at a reader."""
    for j, ((old, old_index), (new, new_index)) in enumerate(
            zip(region.outputs, outputs, strict=True)):
        if old is new and old_index == new_index:
            continue
        after = new._held_output_desc(new_index)
        held = old._out_descs[old_index] if old._out_descs is not None else None
        if after is None or held is None or held is after:
            continue
        if not isinstance(held, TensorDesc) and not proto_contradicts(held, after):
            continue  # (a value info not decoded yet, read as it is: cheaper than decoding)
        before = old._held_output_desc(old_index)
        if before is not None and descs_contradict(before, after):
            note, location = _typed_by_function(new, new_index)
            err = RewriteError(
                f"output {j} of the replacement ({ir_node_label(new)}) is "
                f"{after!r} where the output it replaces ({ir_node_label(old)}) is "
                f"{before!r}: the nodes reading it expect the latter{note}",
                nodes=[old.name])
            if location is not None:  # the E13028 points at that function, not the hook
                blame_at(err, location)
            raise err


def _typed_by_function(node: Node, index: int) -> tuple[str, SourceLocation | None]:
    """For an output typed by a custom operator's registered inference function (not a
    call of a model-local function), the sentence saying so, with what it was given, and
    the function's `def` line; else ("", None)."""
    custom = get_custom_op(node.type, node.domain) if node._domain else None
    if custom is None or called_function(node) is not None:
        return "", None
    ins = ", ".join(repr(node.get_input_desc(i)) if node.get_input_producer(i) else "None"
                    for i in range(node.get_inputs_size()))
    return (f"; output {index} of {node.domain}::{node.type} is typed by "
            f"{inference_function_text(custom)}, which gave it for input descs ({ins}): "
            "if the replacement is the operator the match needs, that function is wrong",
            function_location(custom.infer))


def _reaching_outputs(graph: Graph, made: list[Node], outputs: Sequence[Producer]
                      ) -> list[Node]:
    """`made` without (and the graph without) its nodes no output depends on."""
    if len(made) == 1 and outputs and made[0] is outputs[0][0]:
        return made  # (the usual replacement: one operator, the output)
    if any(node.get_subgraphs() for node in made):
        return made  # a body may read a new node's value: kept (DCE knows bodies)
    new_nodes = set(made)
    live: set[Node] = set()
    stack = [node for node, _ in outputs if node in new_nodes]
    while stack:
        node = stack.pop()
        if node in live:
            continue
        live.add(node)
        stack.extend(p for p, _ in filter(None, node._inputs) if p in new_nodes)
        stack.extend(p for p in node._ctrl_in or () if p in new_nodes)
    if len(live) == len(made):
        return made
    graph.remove_nodes(n for n in made if n not in live)
    return [n for n in made if n in live]


def _take_over_value_names(region: Region, made: Sequence[Node],
                           outputs: Sequence[Producer]) -> None:
    """A new node's output that replaces a removed node's output takes its value name when
    no value in scope has it now: a fused model keeps the names its exporter gave (the
    Gemm of `Add(MatMul(a, b), c)` produces what the Add did, under the Add's name)."""
    graph = region.graph
    new_nodes = set(made)
    for (old, old_index), (new, new_index) in zip(region.outputs, outputs, strict=True):
        if old._graph is not None or new not in new_nodes or new._graph is not graph:
            continue  # the old output stays (a constant read elsewhere), or passes through
        name = old._out_names[old_index]
        if name and name != new._out_names[new_index] and not graph._naming.value_taken(name):
            graph._rename_value(new, new_index, name)


def tag_origin(made: Iterable[Node], pass_name: str, replaced: Iterable[Node]) -> None:
    """Record on each new node the pass that made it (`ge.origin_pass`, unless no pass is
    named) and the nodes it replaces (`ge.origin_nodes`): node metadata, saved with it."""
    origin = ",".join(n.name for n in replaced)
    tags = {ORIGIN_PASS: pass_name, ORIGIN_NODES: origin} if pass_name else {ORIGIN_NODES: origin}
    for node in made:
        node._owner()._set_metadata(node, tags)


def _type_new_nodes(made: Sequence[Node]) -> set[Node]:
    """Infer the copied nodes' descs (memoised inside the compiler: `ge.ops.memo`); returns
    the nodes inference could not type (an input unknown, or onnx refused: left for the
    compiler's checks to report). A node with an input of unknown type forgets the descs
    it was copied with: the replacement's builder computed them from its placeholder
    inputs (a float scalar unless told otherwise), not from what the node now reads."""
    from ge.ops import infer_node

    untyped: set[Node] = set()
    for node in made:
        if is_const(node):
            continue
        try:
            if infer_node(node) is None:
                untyped.add(node)
                forget_output_descs(node)
        except GeError:
            untyped.add(node)
    return untyped


def forget_output_descs(node: Node, *, inputs: bool = False) -> None:
    """Make every output desc of `node` unknown (journaled); with `inputs`, also drop the
    descs its inputs hold of their own, so that they are their producers' again."""
    graph = node._owner()
    for is_input, slots in ((False, node._out_descs), (True, node._in_descs if inputs else None)):
        for index, slot in enumerate(slots or ()):
            if slot is not None:
                graph._set_desc(node, is_input, index, None)


def _known(desc: TensorDesc) -> bool:
    return desc.get_data_type() != DataType.DT_UNDEFINED


def _output_known(node: Node, index: int) -> bool:
    """`_known(node.get_output_desc(index))` without copying a desc the node holds."""
    return node._output_dtype(index) != DataType.DT_UNDEFINED


def _move_control_edges(region: Region, made: Sequence[Node]) -> None:
    if not any(n._ctrl_in or n._ctrl_out for n in region.nodes):
        return  # the usual case: nothing to move
    graph = region.graph
    members = region.members
    preds = dict.fromkeys(p for n in region.nodes for p in (n._ctrl_in or ()) if p not in members)
    succs = dict.fromkeys(s for n in region.nodes for s in (n._ctrl_out or ())
                          if s not in members)
    if not made:  # nothing new to carry them: keep the ordering directly
        for pred in preds:
            for succ in succs:
                if pred is not succ:
                    graph.add_control_edge(pred, succ)
        return
    for node in made:
        for pred in preds:
            graph.add_control_edge(pred, node)
        for succ in succs:
            graph.add_control_edge(node, succ)


def _remove(region: Region) -> None:
    """Remove the region's nodes in one step; a constant still read outside it stays, and
    so does one of an enclosing graph (a body's pattern constant may bind to it)."""
    members = region.members
    graph = region.graph

    def read_outside(node: Node) -> bool:
        return any(consumer not in members
                   for consumers in node._consumers if consumers for consumer, _ in consumers)

    graph.remove_nodes([node for node in region.nodes if not is_constant(node)
                        or (node._graph is graph and not read_outside(node))])
