"""Small graphs built through the public graph API, and a structural fingerprint of a graph.

Every builder returns a graph that validates clean and exports to ONNX, so tests can start
from a known-good state and break exactly one thing.
"""

from __future__ import annotations

from typing import Any

from ge.errors import GraphError
from ge.graph import DataType, Graph, Node, TensorDesc
from ge.graph.attributes import decode_attr
from ge.graph.tensor import Tensor
from ge.graph.value_info import desc_from_value_info, value_info_from_desc

__all__ = [
    "F32",
    "add_data",
    "add_op",
    "add_output",
    "attach_branch",
    "chain",
    "diamond",
    "fingerprint",
    "if_graph",
]

F32 = TensorDesc([2, 3], data_type=DataType.DT_FLOAT)

Src = Node | tuple[Node, int]


def _src(src: Src) -> tuple[Node, int]:
    return src if isinstance(src, tuple) else (src, 0)


def add_data(graph: Graph, index: int, name: str | None = None,
             desc: TensorDesc | None = F32) -> Node:
    """A graph input: a `Data` node with attribute `index` (and an output desc)."""
    node = graph.add_node("Data", name=name or f"x{index}", attrs={"index": index})
    if desc is not None:
        node.update_output_desc(0, desc)
    return node


def add_op(graph: Graph, op_type: str, *inputs: Src, name: str | None = None,
           num_outputs: int = 1, **attrs: Any) -> Node:
    """An operator node whose inputs are connected, in order, to `inputs`."""
    node = graph.add_node(op_type, name=name, num_inputs=len(inputs), num_outputs=num_outputs,
                          attrs=attrs)
    for i, src in enumerate(inputs):
        producer, index = _src(src)
        graph.add_data_edge(producer, index, node, i)
    return node


def add_output(graph: Graph, *inputs: Src, name: str = "out") -> Node:
    """The graph's `NetOutput`, fed by `inputs`."""
    node = graph.add_node("NetOutput", name=name, num_inputs=len(inputs), num_outputs=0)
    for i, src in enumerate(inputs):
        producer, index = _src(src)
        graph.add_data_edge(producer, index, node, i)
    return node


def chain(name: str = "chain", ops: tuple[str, ...] = ("Relu", "Relu", "Relu")) -> Graph:
    """x -> ops[0] -> ops[1] -> ... -> NetOutput; op nodes are named n0, n1, ..."""
    graph = Graph(name)
    prev: Node = add_data(graph, 0, "x")
    for i, op in enumerate(ops):
        prev = add_op(graph, op, prev, name=f"n{i}")
    add_output(graph, prev)
    return graph


def diamond(name: str = "diamond") -> Graph:
    """x -> (Relu a, Relu b) -> Add c -> NetOutput, plus a Const k feeding Add d after c."""
    graph = Graph(name)
    x = add_data(graph, 0, "x")
    a = add_op(graph, "Relu", x, name="a")
    b = add_op(graph, "Relu", x, name="b")
    c = add_op(graph, "Add", a, b, name="c")
    k = graph.add_const(Tensor([1.0, 2.0, 3.0]), name="k")
    d = add_op(graph, "Add", c, k, name="d")
    add_output(graph, d)
    return graph


def attach_branch(owner: Node, attr: str, op_type: str, outer: Src, name: str) -> Graph:
    """A subgraph `op_type(outer) -> NetOutput` set as `owner`'s attribute `attr`.

    The subgraph's operator reads `outer`, a value of an enclosing graph (ONNX outer scope),
    connected with `add_data_edge` once the subgraph belongs to `owner`.
    """
    sub = Graph(name)
    inner = sub.add_node(op_type, name=f"{name}_{op_type.lower()}", num_inputs=1)
    add_output(sub, inner, name=f"{name}_out")
    owner.set_attr(attr, sub)
    producer, index = _src(outer)
    sub.add_data_edge(producer, index, inner, 0)
    return sub


def if_graph(name: str = "cf") -> Graph:
    """x -> Relu h; an If (condition: Data `cond`) whose branches read h; NetOutput(If)."""
    graph = Graph(name)
    x = add_data(graph, 0, "x")
    cond = add_data(graph, 1, "cond", TensorDesc([], data_type=DataType.DT_BOOL))
    h = add_op(graph, "Relu", x, name="h")
    if_node = add_op(graph, "If", cond, name="if")
    attach_branch(if_node, "then_branch", "Relu", h, "then")
    attach_branch(if_node, "else_branch", "Neg", h, "else")
    add_output(graph, if_node)
    return graph


# -- fingerprint -------------------------------------------------------------------------------


def _ref(node: Node | None) -> str | None:
    if node is None:
        return None
    owner = node.owner_graph
    return f"{owner.name if owner is not None else '<removed>'}/{node.name}"


def _value(value: Any) -> Any:
    if isinstance(value, Tensor):
        return ("Tensor", value.data_type, tuple(value.shape), value.format, value.placement,
                value.tobytes())
    if isinstance(value, Graph):
        return ("Graph", value.name)
    if isinstance(value, TensorDesc):
        return ("TensorDesc", tuple(value.shape), value.data_type, value.format,
                tuple(value.origin_shape), value.origin_data_type, value.origin_format)
    if isinstance(value, list):
        return [_value(v) for v in value]
    if hasattr(value, "SerializeToString"):
        return (type(value).__name__, value.SerializeToString())
    return (type(value).__name__, value)


def _desc_slot(slot: Any) -> Any:
    """A desc as the API reads it and as export writes it: a slot still holding the proto it
    was loaded from and one holding that proto decoded (reading decodes it once) are equal."""
    if slot is None:
        return None
    desc = slot if isinstance(slot, TensorDesc) else desc_from_value_info(slot)
    return _value(desc), value_info_from_desc("", desc).SerializeToString()


def _anchor_attrs(table: dict[int, dict[str, Any]] | None) -> dict[int, Any]:
    # Empty per-anchor dicts are not observable through the API: leave them out.
    return {i: {k: _value(v) for k, v in attrs.items()}
            for i, attrs in sorted((table or {}).items()) if attrs}


def _node_print(node: Node) -> tuple:
    n_in = node.get_inputs_size()
    in_descs = node._in_descs if node._in_descs is not None else [None] * n_in
    return (
        node.name,
        node.type,
        node.domain,
        tuple(node.get_output_names()),
        # producer of each input anchor, in anchor order
        tuple((_ref(p[0]), p[1]) if p else None
              for p in (node.get_input_producer(i) for i in range(n_in))),
        # consumers of each output anchor, in edge order
        tuple(tuple((_ref(c), j) for c, j in node.get_out_data_nodes_and_port_indexes(k))
              for k in range(node.get_outputs_size())),
        tuple(_ref(n) for n in node.get_in_control_nodes()),
        tuple(_ref(n) for n in node.get_out_control_nodes()),
        tuple((k, decode_attr(node._attrs[k])[0], _value(node.get_attr(k)))
              for k in node.get_attr_names()),
        tuple(_desc_slot(node._out_slot(i)) for i in range(node.get_outputs_size())),
        tuple(_desc_slot(s) for s in in_descs),
        _anchor_attrs(node._in_anchor_attrs),
        _anchor_attrs(node._out_anchor_attrs),
    )


def _graph_print(graph: Graph) -> tuple:
    nodes = graph.get_direct_nodes()
    by_type = {t: tuple(n.name for n in graph.nodes_of_type(t)) for t in graph.op_types()}
    # The index must agree with a scan of the nodes.
    scanned: dict[str, list[str]] = {}
    for node in nodes:
        scanned.setdefault(node.type, []).append(node.name)
    assert by_type == {t: tuple(names) for t, names in scanned.items()}, graph.name
    assert all(graph.find_node_by_name(n.name) is n for n in nodes), graph.name
    return (
        graph.name,
        _ref(graph.parent_node),
        tuple(sorted((k, repr(_value(v))) for k, v in graph._attrs.items())),
        tuple(_node_print(n) for n in nodes),
        tuple(sorted(by_type.items())),
        _topological_names(graph),
    )


def _topological_names(graph: Graph) -> tuple[str, ...] | str:
    try:
        return tuple(n.name for n in graph.topological_order())
    except GraphError as exc:  # a cycle: its message names the nodes on it
        return exc.message


def fingerprint(graph: Graph, ids: bool = True) -> tuple:
    """Everything observable about a graph hierarchy, as a comparable value.

    Nodes in order with names, types, edges seen from both ends (producers per input,
    consumers per output, control edges both ways), attributes with their kinds, descs,
    anchor attributes, the op-type index, graph attributes, subgraphs with their parents,
    orphan subgraphs and the topological order. With `ids`, also which Python objects the
    nodes and subgraphs are (a rollback must bring back the same objects, not equal ones).
    """
    subgraphs = graph.get_all_subgraphs()
    identity = None
    if ids:
        identity = (tuple(id(n) for n in graph.get_all_nodes()),
                    tuple(id(n) for g in subgraphs for n in g.get_direct_nodes()),
                    tuple(id(g) for g in subgraphs))
    return (
        _graph_print(graph),
        tuple(_graph_print(sub) for sub in subgraphs),
        tuple(sub.name for sub in graph.root_graph()._orphans),
        identity,
    )
