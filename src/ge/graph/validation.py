"""`Graph.validate()`: every IR invariant checked, every problem named with its nodes.

Kinds of problem: `dangling-edge` (an edge to a removed node, to a graph that does not
enclose this one, to a missing anchor, or not mirrored on both ends), `cycle`,
`duplicate-name` (node names within a graph, value names within a scope), `arity` (anchor
counts against the operator's ONNX schema, unconnected required inputs, structural nodes of
the wrong shape), `opset-import` (a node of a domain the model does not import: no version
says which operator it is, and onnx.checker rejects the model), `attribute` (an attribute
the operator's ONNX schema does not define, of another type, or a required one missing:
onnx.checker and runtimes reject such a model),
`unknown-op` (an operator of ONNX's own domains that ONNX does not define at the model's
opset, and no function of the model), `structure` (Data indexes, NetOutput count), `body`
(a body's formal inputs and outputs the node holding it does not take: `ge.graph.formals`),
`type`
(element types the operator's schema does not allow, the formal input or output named: a
float constant as Reshape's "input 1 ('shape')", or a type variable bound to two types: a
stale output type included; of the types known, so a node not typed yet passes) and, for
the region checks after a pass, `untyped` (an output without a known dtype). The whole
validation (`validate()`) also runs onnx's checker
on the model's local functions, which ge holds as the protos it read (no IR check sees
them): `function`, a problem in one, named by the function, the body inside it if in one,
and the node, or across them (two of one identity, a call cycle), named by the functions
(`ge.graph.checker_places`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from itertools import pairwise

import onnx
from onnx import TensorProto, defs

from ge.errors import GraphError, GraphValidationError, ValidationProblem
from ge.graph import order
from ge.graph.attributes import kind_name
from ge.graph.checker_places import function_problems, function_set_problems
from ge.graph.domains import ONNX_DOMAINS, normalize_domain
from ge.graph.formals import body_signature_problems, data_index_problems
from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph
from ge.graph.node import Node, is_const
from ge.graph.places import body_owner, graph_place, ir_node_label, node_named, node_ref
from ge.graph.schema_rules import attribute_rules, op_schema
from ge.graph.tensor import Tensor
from ge.graph.types import DataType, data_type_to_onnx
from ge.graph.value_info import holds_non_tensor

__all__ = [
    "attribute_problems",
    "check_acyclic",
    "cycle_problems",
    "find_node_problems",
    "find_problems",
    "first_opset",
    "function_problems",
    "function_set_problems",
    "newer_operators",
    "redeclaring_advice",
    "refuse_model",
    "unknown_operators",
]

_Single = defs.OpSchema.FormalParameterOption.Single
_ONNX_VERSION = onnx.__version__


def find_problems(graph: Graph, *, attributes_of: Callable[[Node], bool] | None = None
                  ) -> list[ValidationProblem]:
    """All broken invariants of `graph` and of every subgraph below it; with
    `attributes_of`, the attributes of only the nodes it is true for are checked (see
    `find_node_problems`)."""
    problems: list[ValidationProblem] = []
    # Orders not known yet (a loaded graph, a body just attached) are established first, so
    # graphs, nodes and problems are listed in the established order, the same on every call.
    for g in [graph, *graph.get_all_subgraphs()]:
        if not g._order_ok:
            try:
                g.topological_order()
            except GraphError:
                pass  # reported by _check_graph
    for g in [graph, *graph.get_all_subgraphs()]:
        _check_graph(g, problems, attributes_of)
    if attributes_of is None:  # (a pass's checks: it changes no function)
        problems += function_problems(graph)
    return problems


def cycle_problems(graph: Graph) -> list[ValidationProblem]:
    """The cycles of `graph` and of every subgraph below it, as `find_problems` reports
    them (kind `cycle`), found by the topological order alone: what a command that only
    runs or writes a model checks (export needs the order anyway), where the rest of the
    validation would cost time and refuse what runtimes accept."""
    problems: list[ValidationProblem] = []
    for g in [graph, *graph.get_all_subgraphs()]:
        if g._order_ok:
            continue  # a maintained order is a topological one: no cycle, no list to copy
        try:
            g.topological_order()
        except GraphError as exc:
            _add(problems, g, "cycle", list(exc.nodes), exc.message)
    return problems


def check_acyclic(graph: Graph, path: str | None = None) -> None:
    """`GraphValidationError` (GE1003) listing the cycles of `graph` and of every subgraph
    below it (`cycle_problems`), naming their nodes, and the call cycles and repeated
    identities of its model's local functions (`function_set_problems`, which no runtime
    loads and a function inliner cannot take), and `path` (the model file, when
    there is one: `GeError.name_model_file`); nothing when there is none. An error about
    the model as given (`about_model`): `ge.compile` names the file it was given, if any.
    What a command checks of the
    model it was given before it does anything with it (`ge run`, `ge compile`,
    `ge.compile`): no input runs a graph with a cycle, and no step of a compilation can
    take it (shape inference and export need a topological order), so the model itself
    is said to be invalid, the same in every command, rather than the first step failing
    in its own words."""
    refuse_model(cycle_problems(graph) + function_set_problems(graph), path)


def refuse_model(problems: list[ValidationProblem], path: str | None = None) -> None:
    """Raise `problems` (if any) as a `GraphValidationError` about the model as given,
    naming its file `path` when there is one; nothing when there are none."""
    if problems:
        invalid = GraphValidationError(problems)
        invalid.about_model = True
        if path is not None:
            invalid.name_model_file(path)
        raise invalid


def find_node_problems(nodes: Iterable[Node], *, typed: bool = False,
                       attributes_of: Callable[[Node], bool] | None = None,
                       graphs: Iterable[Graph] = ()) -> list[ValidationProblem]:
    """The broken invariants at `nodes` (the region a pass changed): their edges, arity, and
    in their graphs and `graphs` (others the pass changed: a body it removed an unread node
    from) cycles, Data indexes and what the owner of a body takes of its inputs and outputs
    (`ge.graph.formals`); with `typed`, also outputs that have no known dtype. With
    `attributes_of`, the attributes of only the nodes it is true for are checked (those a
    pass set: a node it merely rewired holds the attributes it held, and an attribute the
    input model gave it is not the pass's doing).

    Cheaper than `find_problems` on a large graph: only the cycle check sees every node (and
    the topological order it computes is the one the next pass needs anyway).
    """
    problems: list[ValidationProblem] = []
    # each graph of the region, and its enclosing ones (asked for the nodes' own)
    region: dict[Graph, list[Graph]] = {g: [] for g in graphs}
    owners: dict[Node, None] = {}  # nodes holding bodies of the region, or bodies in it
    for node in nodes:
        g = node._graph
        if g is None:
            continue
        enclosing = region.get(g)
        if not enclosing:
            enclosing = region[g] = list(g._ancestors())
        _check_edges(g, node, enclosing, problems)
        _check_arity(g, node, problems, attributes_of is None or attributes_of(node))
        if typed and node._type not in (NET_OUTPUT, DATA):
            _check_typed(g, node, problems)
            _check_types(g, node, problems)
        if node._attrs and not node._clean and node.get_subgraphs():
            owners[node] = None
    for g in region:
        try:
            g.topological_order()
        except GraphError as exc:
            _add(problems, g, "cycle", list(exc.nodes), exc.message)
        # (a body's inputs and outputs: its Data indexes, and what its owner takes of them)
        problems += data_index_problems(g)
        owner = g._parent_node
        if owner is not None and owner._graph is not None:
            owners[owner] = None
    for owner in owners:
        problems += body_signature_problems(owner)
    return problems


def _check_typed(g: Graph, node: Node, problems: list[ValidationProblem]) -> None:
    for k, name in enumerate(node._out_names):
        desc = node.get_output_desc(k) if name else None
        if desc is not None and desc.data_type == DataType.DT_UNDEFINED and (
                not holds_non_tensor(desc)):  # (a sequence's type is known, as its source)
            _add(problems, g, "untyped", [node],
                 f"output {k} ({name!r}) of {ir_node_label(node)} has no known dtype")


@lru_cache(maxsize=4096)
def _type_rules(op_type: str, domain: str, version: int
                ) -> tuple[tuple[tuple[str, bool, str], ...], tuple[tuple[str, bool, str], ...],
                           dict[str, frozenset[str]]]:
    """(inputs, outputs, type constraints) of a schema: each formal parameter's type string,
    whether its values share one type (false for a heterogeneous variadic, as Loop's) and
    its name ("shape"); each type variable's allowed types ("tensor(float)")."""
    schema = op_schema(op_type, domain, version)
    assert schema is not None
    variadic = defs.OpSchema.FormalParameterOption.Variadic

    def formals(params: Sequence[defs.OpSchema.FormalParameter]
                ) -> tuple[tuple[str, bool, str], ...]:
        return tuple((p.type_str, p.option != variadic or p.is_homogeneous, p.name)
                     for p in params)

    constraints = {c.type_param_str: frozenset(c.allowed_type_strs)
                   for c in schema.type_constraints}
    return formals(schema.inputs), formals(schema.outputs), constraints


@lru_cache(maxsize=64)
def _tensor_type(dtype: DataType) -> str | None:
    """ONNX's type string of a tensor of `dtype` ("tensor(float)"), None when unknown."""
    if dtype == DataType.DT_UNDEFINED:
        return None
    try:
        return f"tensor({TensorProto.DataType.Name(data_type_to_onnx(dtype)).lower()})"
    except (GraphError, ValueError):
        return None


def _check_types(g: Graph, node: Node, problems: list[ValidationProblem]) -> None:
    """The element types a typed node reads and writes against its schema: each type
    variable bound to one type its constraint allows, each fixed type met. (A pass that
    puts an int64 value before a float-only operator, or leaves a node's output type
    stale, makes a model onnx.checker's full check and runtimes reject.)"""
    version = g.get_opset_version(node._domain)
    if version is None or op_schema(node._type, node._domain, version) is None:
        return
    read = tuple([None if p is None else _tensor_type(p[0]._output_dtype(p[1]))
                  for p in node._inputs])
    written = tuple([_tensor_type(node._output_dtype(k)) if name else None
                     for k, name in enumerate(node._out_names)])
    for message in _type_messages(node._type, node._domain, version, read, written):
        _add(problems, g, "type", [node], message.replace("{node}", ir_node_label(node)))


@lru_cache(maxsize=4096)
def _type_messages(op: str, domain: str, version: int, read: tuple[str | None, ...],
                   written: tuple[str | None, ...]) -> tuple[str, ...]:
    """What is wrong with an `op` node reading and writing these types ("{node}" stands for
    its label, `ir_node_label`): nothing, usually; one signature is checked once per process."""
    inputs, outputs, constraints = _type_rules(op, domain, version)
    bound: dict[str, tuple[str, str]] = {}  # type variable -> (type, where it was bound)
    for formals, types, what in ((inputs, read, "input"), (outputs, written, "output")):
        for i, found in enumerate(types):
            if found is None or not formals:
                continue
            # (the last may be variadic)
            type_str, shared, name = formals[min(i, len(formals) - 1)]
            where = f"{what} {i} ({name!r})"  # the schema's name: "input 1 ('shape')"
            allowed = constraints.get(type_str)
            if allowed is None:  # a fixed type, e.g. tensor(int64) for Reshape's shape
                if type_str.startswith("tensor(") and found != type_str:
                    return (f"{where} of {{node}} is {found}; {op} (opset "
                            f"{version}) takes {type_str}",)
                continue
            tensors = sorted(a[7:-1] for a in allowed if a.startswith("tensor("))
            if not tensors:
                continue  # sequences, optionals: not described by a desc's element type
            if found not in allowed:
                return (f"{where} of {{node}} is {found}, which {op} (opset "
                        f"{version}) does not take ({type_str}: {', '.join(tensors)})",)
            if not shared:
                continue  # a heterogeneous variadic (Loop's state): each value its own type
            first = bound.setdefault(type_str, (found, where))
            if first[0] != found:
                return (f"{where} of {{node}} is {found} but {first[1]} is "
                        f"{first[0]}; {op} wants both of type {type_str} (a node whose inputs "
                        "changed keeps its output descs until inferred again: "
                        "ge.ops.infer_node)",)
    return ()


def _add(problems: list[ValidationProblem], graph: Graph, kind: str, nodes: list[Node] | list[str],
         message: str, advice: str = "") -> None:
    names = tuple(n if isinstance(n, str) else n._name for n in nodes)
    subjects = tuple(n for n in nodes if not isinstance(n, str))
    owner = body_owner(graph, as_read=True)  # (exporters name bodies alike)
    place = graph_place(graph.name, owner) if owner is not None else ""
    problems.append(ValidationProblem(kind, names, message, graph.name, advice, subjects,
                                      place))


def _check_graph(g: Graph, problems: list[ValidationProblem],
                 attributes_of: Callable[[Node], bool] | None = None) -> None:
    enclosing = list(g._ancestors())
    # The order is established first (as any query does), so the problems come in the same
    # order whether or not the order was known yet; a cycle is reported last.
    cycle: GraphError | None = None
    try:
        g.topological_order()
    except GraphError as exc:
        cycle = exc
    # In the graph's order (the maintained node list), never in the insertion order of the
    # membership index `g._nodes`: that order is history (a node put back by a rollback is
    # re-inserted last, a clone inserts in list order), so problems listed in it would not
    # be the same for graphs that are the same.
    nodes = g._listed()
    counts = Counter(n._name for n in nodes)
    for name, count in counts.items():
        if count > 1:
            _add(problems, g, "duplicate-name", [name],
                 f"{count} nodes are named {name!r}")
    # (looked up in each enclosing graph's own index, never copied: a model of thousands of
    # bodies would copy the main graph's names once per body)
    # (each enclosing graph with its node holding the body on the way down to `g`)
    scopes = [(outer, inner._parent_node) for inner, outer in pairwise(enclosing)]
    defined: Counter[str] = Counter()
    for node in nodes:
        if node._graph is not g:
            _add(problems, g, "structure", [node], f"{ir_node_label(node)} does not point back to "
                 "its graph")
        for value in node._out_names:
            if value:
                defined[value] += 1
        _check_edges(g, node, enclosing, problems)
        _check_arity(g, node, problems, attributes_of is None or attributes_of(node))
        if node._type not in (DATA, NET_OUTPUT) and not is_const(node):
            _check_types(g, node, problems)  # (of the types known: a node untyped passes)
            if node._attrs and not node._clean:  # (a clean node holds no body)
                problems += body_signature_problems(node)
    for value, count in defined.items():
        if count > 1:
            _add(problems, g, "duplicate-name", [value],
                 f"value {value!r} is produced {count} times")
        elif any(_visible_in(value, outer, owner) for outer, owner in scopes):
            _add(problems, g, "duplicate-name", [value],
                 f"value {value!r} shadows a value of an enclosing graph")

    problems += data_index_problems(g)
    outputs = g.nodes_of_type(NET_OUTPUT)
    if len(outputs) != 1:
        named = "".join(f" {n._name!r}" for n in outputs)
        _add(problems, g, "structure", outputs,
             f"a graph needs exactly one NetOutput node, found {len(outputs)}{named}")
    if cycle is not None:
        _add(problems, g, "cycle", list(cycle.nodes), cycle.message)


def _visible_in(value: str, outer: Graph, owner: Node | None) -> bool:
    """Whether a body held by `owner` (a node of `outer`) could read `outer`'s value named
    `value`, so that a value of the body of that name shadows it: not one `owner` or a node
    depending on it makes, defined after `owner` in any order the graph is written in (a
    Scan body's output named as the Scan's own output, which onnx's checker accepts)."""
    found = outer._values.get(value)
    if found is None:
        return False
    producer = found[0]
    return owner is None or producer._graph is not outer or not order.reaches(
        outer, owner, producer)


def _named(graph: Graph) -> str:
    """A graph as a sentence names it: "graph 'g'"; a body with the node and attribute
    holding it ("graph 'body' (else_branch of If node 'if')"): exporters name bodies alike."""
    owner = body_owner(graph)
    return f"graph {graph.name!r}" + (f" ({owner})" if owner is not None else "")


def _check_edges(g: Graph, node: Node, enclosing: list[Graph],
                 problems: list[ValidationProblem]) -> None:
    for i, producer in enumerate(node._inputs):
        if producer is None:
            continue
        src, k = producer
        if src._graph is None:
            _add(problems, g, "dangling-edge", [node, src],
                 f"input {i} of {node_ref(node)} reads from {node_ref(src)}, which was removed")
        elif src._graph not in enclosing:
            _add(problems, g, "dangling-edge", [node, src],
                 f"input {i} of {node_ref(node)} reads from {node_ref(src)} of "
                 f"{_named(src._graph)}, which does not enclose {_named(g)}")
        if not 0 <= k < len(src._out_names):
            _add(problems, g, "dangling-edge", [node, src],
                 f"input {i} of {node_ref(node)} reads output {k} of {node_ref(src)}, which has "
                 f"{len(src._out_names)} outputs")
        elif (node, i) not in (src._consumers[k] or ()):
            _add(problems, g, "dangling-edge", [node, src],
                 f"edge {node_ref(src)}:{k} -> {node_ref(node)}:{i} is missing on the producer "
                 "side")
    for k, consumers in enumerate(node._consumers):
        for consumer, j in consumers or ():
            if consumer._graph is None:
                _add(problems, g, "dangling-edge", [node, consumer],
                     f"output {k} of {node_ref(node)} feeds {node_ref(consumer)}, which was "
                     "removed")
            elif consumer._graph is not g and g not in consumer._graph._ancestors():
                _add(problems, g, "dangling-edge", [node, consumer],
                     f"output {k} of {node_ref(node)} feeds {node_ref(consumer)} of "
                     f"{_named(consumer._graph)}, which {_named(g)} does not enclose")
            elif j >= len(consumer._inputs) or consumer._inputs[j] != (node, k):
                _add(problems, g, "dangling-edge", [node, consumer],
                     f"edge {node_ref(node)}:{k} -> {node_ref(consumer)}:{j} is missing on the "
                     "consumer side")
    for other in list(node._ctrl_in or ()) + list(node._ctrl_out or ()):
        if other._graph is not g:
            _add(problems, g, "dangling-edge", [node, other],
                 f"control edge between {node_ref(node)} and {node_ref(other)}, which is not a "
                 f"node of {_named(g)}")


def _check_arity(g: Graph, node: Node, problems: list[ValidationProblem],
                 attributes: bool = True) -> None:
    n_in, n_out = len(node._inputs), len(node._out_names)
    op = node._type
    if op == DATA or is_const(node):  # (a custom domain's Const is checked as an operator)
        if n_in != 0 or n_out != 1:
            _add(problems, g, "arity", [node],
                 f"{ir_node_label(node)} has {n_in} inputs and {n_out} outputs; "
                 "expected 0 and 1")
        if op == CONST and not node.has_attr("sparse_value") and (
                not node.has_attr("value") or not isinstance(node.get_attr("value"), Tensor)):
            _add(problems, g, "arity", [node], f"{ir_node_label(node)} has no Tensor 'value'")
        return
    if op == NET_OUTPUT:
        if n_out:
            _add(problems, g, "arity", [node], f"NetOutput {node._name!r} has {n_out} outputs")
        names = g._output_names
        for i, producer in enumerate(node._inputs):
            if producer is None:
                said = f" ({names[i]!r})" if i < len(names) and names[i] else ""
                _add(problems, g, "arity", [node],
                     f"graph output {i}{said} (input {i} of {node._name!r}) is not connected")
        return
    version = g.get_opset_version(node._domain)
    if version is None:
        if node._domain:
            _add(problems, g, "opset-import", [node],
                 # (the domain said once: "node 'n' uses domain 'x'", not "x.Op node 'n'")
                 f"{node_named(node)} uses domain {node._domain!r}, which the model does not "
                 "import",
                 "a pass adding a node of a new domain imports it too: ge.es operators and "
                 "replacements built with GraphBuilder do, a node added by hand needs "
                 "graph.opset_imports[domain] = version")
        return
    schema = op_schema(op, node._domain, version)
    if schema is None:
        _check_unknown(g, node, version, problems)
        return  # a custom or function operator: no schema to check against
    if not schema.min_input <= n_in <= schema.max_input:
        _add(problems, g, "arity", [node],
             f"{ir_node_label(node)} has {n_in} inputs; opset {version} allows "
             f"{schema.min_input}..{schema.max_input}")
    if not schema.min_output <= n_out <= schema.max_output:
        _add(problems, g, "arity", [node],
             f"{ir_node_label(node)} has {n_out} outputs; opset {version} allows "
             f"{schema.min_output}..{schema.max_output}")
    for j, formal in enumerate(schema.inputs):
        if j >= n_in:
            break
        if formal.option == _Single and node._inputs[j] is None:
            _add(problems, g, "arity", [node],
                 f"required input {j} ({formal.name}) of {ir_node_label(node)} is not "
                 "connected")
    if attributes:
        _check_attributes(g, node, version, problems)


#: Domains whose operators are ONNX's own: one without a schema there is no operator at all.
#: The domains ONNX itself defines operators in.
def unknown_operators(graph: Graph) -> list[ValidationProblem]:
    """The `unknown-op` problems of `graph` and its subgraphs alone (a cheap scan: the
    schema lookups are cached), for a compilation to stop before any pass runs."""
    problems: list[ValidationProblem] = []
    for g in [graph, *graph.get_all_subgraphs()]:
        for node in g.get_direct_nodes():
            if node._domain not in ONNX_DOMAINS or node._type in (DATA, CONST, NET_OUTPUT):
                continue  # (only ONNX's own domains can hold one: cheap to skip the rest)
            version = g.get_opset_version(node._domain)
            if version is not None and op_schema(node._type, node._domain, version) is None:
                _check_unknown(g, node, version, problems)
    return problems


def _check_unknown(g: Graph, node: Node, version: int,
                   problems: list[ValidationProblem]) -> None:
    """`unknown-op` for a node without a schema at `version`, when its domain is ONNX's own
    and the model defines no function of that name."""
    if node._domain in ONNX_DOMAINS and not _local_function(g, node):
        _add(problems, g, "unknown-op", [node], _unknown_op(node, version))


def _local_function(g: Graph, node: Node) -> bool:
    """Whether `node` calls a function the model defines (`ModelProto.functions`)."""
    model = g.root_graph().model
    functions = model.functions if model is not None else ()
    return any(f.name == node._type and f.domain == node._domain for f in functions)


def _unknown_op(node: Node, version: int) -> str:
    """Why ONNX has no operator for `node` at the model's opset."""
    domain = node._domain or "ai.onnx"
    since = first_opset(node._type, node._domain)
    if since is None:
        return (f"{ir_node_label(node)}: ONNX has no operator {node._type} in "
                f"domain {domain!r} (onnx {_ONNX_VERSION}); onnx.checker and runtimes reject "
                "the model (a custom operator needs a domain of its own)")
    return (f"{ir_node_label(node)}: {domain} {node._type} exists from opset "
            f"{since}, the model imports opset {version}; onnx.checker and runtimes reject "
            "the model")


def newer_operators(graph: Graph) -> list[tuple[Node, int, int]]:
    """Each node of `graph` and its bodies of an operator of ONNX's own domains that the
    model's opset lacks and a later opset has (an exporter's LayerNormalization, opset 17's,
    in a model importing 16): (node, the opset imported, the first opset with it); a
    function of the model of that name is not one."""
    found: list[tuple[Node, int, int]] = []
    for g in [graph, *graph.get_all_subgraphs()]:
        for node in g.get_direct_nodes():
            if node._domain not in ONNX_DOMAINS or node._type in (DATA, CONST, NET_OUTPUT):
                continue
            version = g.get_opset_version(node._domain)
            if version is None or op_schema(node._type, node._domain, version) is not None:
                continue
            since = first_opset(node._type, node._domain)
            if since is not None and since > version and not _local_function(g, node):
                found.append((node, version, since))
    return found


def redeclaring_advice(graph: Graph, domain: str, imported: int, since: int) -> str:
    """What makes a model importing opset `imported` of `domain` that uses an operator of
    opset `since` valid: declaring opset `since` when none of its other operators of the
    domain differs between the two (then it means what it meant), else exporting it again.
    onnx's version converter cannot do it: it adapts only the operators of the model's
    opset ("No Adapter From Version $16 for LayerNormalization")."""
    differing: dict[str, None] = {}
    for g in [graph, *graph.get_all_subgraphs()]:
        for node in g.get_direct_nodes():
            if normalize_domain(node._domain) != normalize_domain(domain):
                continue
            then = op_schema(node._type, node._domain, imported)
            now = op_schema(node._type, node._domain, since)
            if then is not None and now is not None and then.since_version != now.since_version:
                differing[node._type] = None
    name = normalize_domain(domain) or "ai.onnx"
    if differing:
        names = list(differing)
        listed = (names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
                  if len(names) <= 4 else f"{', '.join(names[:3])} and {len(names) - 3} more")
        return (f"export the model again at opset {since} or later (declaring opset {since} "
                f"would change its {listed}, which differ{'s' if len(differing) == 1 else ''} "
                f"between opsets {imported} and {since})")
    return (f"declare opset {since} of {name} in the model, whose other operators are the "
            f"same at {since} (with onnx: set the version of its opset_import of domain "
            f"{normalize_domain(domain)!r} to {since}), or export it again at opset {since} or "
            "later")


def first_opset(op_type: str, domain: str = "") -> int | None:
    """The opset an operator of ONNX's domains first appears in (its oldest schema:
    `get_schema` without a version gives the newest, Einsum's 28 where it came in 12);
    None when onnx defines no such operator."""
    return _first_versions().get((normalize_domain(domain), op_type))


@lru_cache(maxsize=1)
def _first_versions() -> dict[tuple[str, str], int]:
    """(domain, op type) -> `first_opset`, for every operator onnx defines."""
    first: dict[tuple[str, str], int] = {}
    for schema in defs.get_all_schemas_with_history():
        key = (normalize_domain(schema.domain), schema.name)
        if key not in first or schema.since_version < first[key]:
            first[key] = schema.since_version
    return first


def attribute_problems(node: Node) -> list[ValidationProblem]:
    """The `attribute` problems of `node` alone: attributes its ONNX schema does not define
    or types otherwise, required ones missing (none for a node without a schema)."""
    problems: list[ValidationProblem] = []
    g = node._graph
    if g is None or node._type in (DATA, CONST, NET_OUTPUT):
        return problems
    version = g.get_opset_version(node._domain)
    if version is not None and op_schema(node._type, node._domain, version) is not None:
        _check_attributes(g, node, version, problems)
    return problems


def _check_attributes(g: Graph, node: Node, version: int,
                      problems: list[ValidationProblem]) -> None:
    """The node's attributes against its schema: names, types, the required ones."""
    types, required = attribute_rules(node._type, node._domain, version)
    op, attrs = node._type, node._attrs
    for name, stored in attrs.items():
        expected = types.get(name)
        kind = stored.type if not isinstance(stored, tuple) else stored[0]
        if expected is None:
            _add(problems, g, "attribute", [node],
                 f"{ir_node_label(node)} has attribute {name!r}, which {op} (opset "
                 f"{version}) does not define; ONNX runtimes reject it",
                 "keep private data in node metadata: Node.set_metadata")
        elif kind != expected:
            _add(problems, g, "attribute", [node],
                 f"attribute {name!r} of {ir_node_label(node)} is {kind_name(kind)}; "
                 f"{op} (opset {version}) takes {kind_name(expected)}")
    for name in required:
        if name not in attrs:
            _add(problems, g, "attribute", [node],
                 f"required attribute {name!r} of {ir_node_label(node)} is not set")

