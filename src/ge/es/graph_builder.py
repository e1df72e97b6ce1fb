"""`GraphBuilder`: builds a `ge.graph.Graph` eagerly, one operator call at a time.

Inputs are `Data` nodes (attribute `index`), constants `Const` nodes, and `build_and_reset`
adds the `NetOutput` node and hands the graph over; the builder cannot be used afterwards.
The builder's opset comes from `opset_scope` (or `opset=`), see `ge.es.opset`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import numpy as np

from ge.errors import (
    BuilderMixError,
    BuilderStateError,
    BuilderTypeError,
    BuilderValueError,
    GraphTypeError,
)
from ge.es.opset import normalize_opset_imports
from ge.es.scopes import attr_scope, builder_scope, control_dependency_scope
from ge.es.tensor_holder import TensorHolder
from ge.graph.domains import add_opset_imports
from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph
from ge.graph.node import Node
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType, Format
from ge.ops.registry import get_custom_op
from ge.ops.runtime_ops import runtime_op_spec
from ge.ops.schemas import STANDARD_DOMAINS, latest_opset, normalize_domain

__all__ = ["GraphBuilder", "InputType", "attr_scope", "control_dependency_scope"]


class InputType(Enum):
    """The node type of a graph input (only `DATA` becomes an ONNX graph input)."""

    DATA = "Data"
    REF_DATA = "RefData"
    AIPP_DATA = "AippData"
    ANY_DATA = "AnyData"


def nested_shape(value: Any, what: str = "value") -> list[int]:
    """The shape of nested Python lists (`BuilderValueError` when they are ragged)."""
    if not isinstance(value, (list, tuple)):
        return []
    if not value:
        return [0]
    shapes = [nested_shape(v, what) for v in value]
    first = shapes[0]
    if any(s != first for s in shapes[1:]):
        raise BuilderValueError(
            f"{what} is a ragged list: its items have different shapes "
            f"({', '.join(str(s) for s in shapes[:4])}...); every row must have the same length"
        )
    return [len(value), *first]


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flatten(v)]
    return [value]


def _is_float(value: Any) -> bool:
    return isinstance(value, (float, np.floating))


class GraphBuilder:
    """Builds one graph. `GraphBuilder(name=None, *, opset=None)`; None/"" name → "graph".

    `opset` (extension) is an int for the ONNX domain or a `{domain: version}` dict; by
    default the enclosing `opset_scope`'s, else onnx's newest.
    """

    def __init__(self, name: str | None = None, *,
                 opset: int | Mapping[str, int] | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise BuilderTypeError(f"name must be a str or None, got {type(name).__name__}")
        self._name = name or "graph"
        self._opsets = normalize_opset_imports(opset)
        self._graph: Graph | None = Graph(self._name)
        self._graph.model.opset_imports = dict(self._opsets)
        self._inputs: dict[int, TensorHolder] = {}
        self._outputs: dict[int, TensorHolder] = {}
        self._parent: GraphBuilder | None = None
        self._scope: Any = None  # the active `with builder:` block
        self._in_place = False  # builds into a graph it does not own (`_into`)
        # In place only: the prefix of unnamed nodes' names, and the names asked for that
        # were taken (given name -> asked name).
        self._name_scope = ""
        self._asked_names: dict[str, str] = {}
        # The inputs created without a shape whose holders were not given one since: their
        # scalar desc is GE's placeholder, not a declaration (`shapeless_sources`).
        self._shapeless: set[Node] = set()

    @classmethod
    def _into(cls, graph: Graph, name: str) -> GraphBuilder:
        """A builder whose operators go straight into `graph`, which it does not own: an
        expression-style replacement built where its match is
        (`ge.passes.expression.build_in_place`). It creates no inputs and never builds."""
        builder = cls.__new__(cls)
        builder._name = name
        builder._opsets = normalize_opset_imports(None)
        builder._graph = graph
        builder._inputs = {}
        builder._outputs = {}
        builder._parent = None
        builder._scope = None
        builder._in_place = True
        builder._name_scope = ""
        builder._asked_names = {}
        builder._shapeless = set()
        return builder

    def _built_in_place(self) -> None:
        """The replacement this `_into` builder made is complete: it builds nothing more,
        as a builder that built its graph (a tensor of it kept for a later match is refused
        as an earlier builder's, `described_beside`)."""
        self._graph = None

    def _node_name(self, name: str | None, op_type: str) -> str | None:
        """The name to give a node: as asked, except that a builder building into a graph
        it does not own makes it unique there (a replacement is built once per match, as a
        copy in would have renamed it; the name asked is kept in `_asked_names` for the
        rewrite to give once the node holding it is gone), and names an unnamed node in
        its name scope (`<scope>/<op type>`) when it has one."""
        if not self._in_place:
            return name
        if name is None:
            if not self._name_scope:
                return None
            name = self._name_scope + op_type
        assert self._graph is not None
        unique = self._graph._naming.node_name(name)
        if unique != name:
            self._asked_names[unique] = name
        return unique

    def _check_owned(self, op: str) -> None:
        if self._in_place:
            raise BuilderStateError(
                f"Cannot {op} in a replacement: its inputs are the matched tensors "
                "(inputs[i]); build the replacement from them"
            )

    def create_subgraph_builder(self, name: str | None = None) -> GraphBuilder:
        """A builder for a body of a node this builder will create (an If branch, a Loop
        body) whose operators may read this builder's tensors (extension)."""
        self._check_alive("create_subgraph_builder")
        child = GraphBuilder(name, opset=self._opsets)
        assert child._graph is not None and self._graph is not None
        child._graph.declare_parent(self._graph)
        child._parent = self
        return child

    def __enter__(self) -> GraphBuilder:
        """`with builder:` builds operators in `builder` when their inputs are all outer
        values (the usual way to write an If branch or Loop body; see docs/es.md)."""
        self._scope = builder_scope(self)
        return self._scope.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._scope.__exit__(*exc)

    def _encloses(self, other: GraphBuilder) -> bool:
        """True when `other` is this builder or one of its sub-builders (at any depth)."""
        builder: GraphBuilder | None = other
        while builder is not None:
            if builder is self:
                return True
            builder = builder._parent
        return False

    # -- state ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def opset_imports(self) -> dict[str, int]:
        """The `{domain: version}` this builder builds at."""
        return dict(self._opsets)

    def opset_version(self, domain: str = "") -> int:
        """The version used for operators of `domain` (a custom op: its registered one)."""
        domain = normalize_domain(domain)
        if domain in self._opsets:
            return self._opsets[domain]
        if domain in STANDARD_DOMAINS:
            return latest_opset(domain)
        return 2**31 - 1

    def _use_domain(self, domain: str, op_type: str) -> None:
        """List a non-ONNX domain in the graph's opset imports once an op of it is built.

        Journaled (`add_opset_imports`): a builder working in place in a pass's graph adds
        the import to the model being compiled, and a pass rolled back must take it out."""
        domain = normalize_domain(domain)
        graph = self._live_graph("use_domain")
        if domain in graph.root_graph().model.opset_imports:  # (read: no undo to record)
            return
        if domain in self._opsets:
            version = self.opset_version(domain)
        else:
            custom = get_custom_op(op_type, domain)
            spec = (custom.spec if custom is not None
                    else runtime_op_spec(op_type, domain, self.opset_version(domain)))
            version = spec.since_version if spec is not None else self.opset_version(domain)
        add_opset_imports(graph, {domain: version})

    def _check_alive(self, op: str) -> None:
        if self._graph is None and self._in_place:  # (`_built_in_place`)
            raise BuilderStateError(
                f"Cannot {op}: GraphBuilder {self._name!r} built the replacement of an earlier "
                "match already: a tensor kept from one replacement cannot be used in another; "
                "build each from its own inputs")
        if self._graph is None:
            raise BuilderStateError(
                f"Cannot {op}: GraphBuilder has already been built. Create a new GraphBuilder "
                "to build another graph."
            )

    def _live_graph(self, op: str) -> Graph:
        self._check_alive(op)
        assert self._graph is not None
        return self._graph

    @property
    def graph(self) -> Graph:
        """The graph being built (extension; `build_and_reset` hands it over)."""
        return self._live_graph("get graph")

    def described_beside(self, other: GraphBuilder) -> str:
        """This builder as a message about one of its tensors used by `other` names it: by
        name, and, when `other` has the same name (the engine names a pass's replacement
        builders alike), as an earlier one that built its graph already (a tensor kept from
        an earlier match's replacement), or as another builder of that name."""
        if self._name != other._name:
            return f"GraphBuilder {self._name!r}"
        if self._graph is None:
            return (f"an earlier GraphBuilder {self._name!r}, which built its graph already "
                    "(a replacement of an earlier match: a tensor kept from one replacement "
                    "cannot be used in another; build each from its own inputs)")
        return f"another GraphBuilder also named {self._name!r}"

    def _holder(self, value: Any, what: str) -> TensorHolder:
        """A TensorHolder of this builder for a TensorHolder or TensorLike value."""
        if isinstance(value, TensorHolder):
            owner = value._builder  # own tensors (the usual case), or outer values of a body
            if owner is not self and not owner._encloses(self):
                raise BuilderMixError(
                    f"{what} belongs to {owner.described_beside(self)}, not to "
                    f"{self._name!r}; tensors of different builders cannot be mixed"
                )
            return value
        if isinstance(value, np.generic):  # a numpy scalar keeps its dtype (np.float16 ...)
            return self.create_const(np.asarray(value))
        if isinstance(value, bool):
            return self.create_const(np.asarray(value))
        if isinstance(value, int):
            return self.create_scalar_int64(value)
        if isinstance(value, float):
            return self.create_scalar_float(value)
        if isinstance(value, (list, tuple)):
            shape = nested_shape(value, what)
            flat = _flatten(value)
            if any(_is_float(v) for v in flat):
                return self.create_const_float(flat, shape)
            return self.create_const_int64(flat, shape)
        if isinstance(value, (np.ndarray, Tensor)):
            return self.create_const(value)
        raise BuilderTypeError(
            f"{what} must be a TensorHolder, a number, a (nested) list of numbers, a numpy "
            f"array or a Tensor, got {type(value).__name__}"
        )

    # -- inputs -----------------------------------------------------------------------------
    def create_input(self, index: int, *, name: str | None = None,
                     type_str: InputType = InputType.DATA,
                     data_type: DataType = DataType.DT_FLOAT,
                     format: Format = Format.FORMAT_ND,
                     shape: Sequence[int | str] | None = None) -> TensorHolder:
        """A graph input (`Data` node with attribute `index`); None shape is a scalar."""
        graph = self._live_graph("create_input")
        self._check_owned("create_input")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise BuilderTypeError(f"index must be an int >= 0, got {index!r}")
        if index in self._inputs:
            raise BuilderValueError(f"input index {index} is already used")
        if not isinstance(type_str, InputType):
            raise BuilderTypeError(f"type_str must be an InputType, got {type_str!r}")
        # A name given is the graph input's name in ONNX too (the value the Data node gives).
        node = graph.add_node(type_str.value, name=name or f"input_{index}", num_outputs=1,
                              attrs={"index": index},
                              output_names=[name] if name is not None else None)
        node.update_output_desc(0, TensorDesc(list(shape or []), format, data_type))
        if shape is None:
            self._shapeless.add(node)
        holder = TensorHolder._make(self, node, 0)
        self._inputs[index] = holder
        return holder

    def create_inputs(self, num: int, start_index: int = 0) -> list[TensorHolder]:
        """`num` scalar DT_FLOAT inputs with indexes from `start_index`."""
        self._check_alive("create_inputs")
        if isinstance(num, bool) or not isinstance(num, int) or num <= 0:
            raise BuilderTypeError(f"num must be an int > 0, got {num!r}")
        if isinstance(start_index, bool) or not isinstance(start_index, int) or start_index < 0:
            raise BuilderTypeError(f"start_index must be an int >= 0, got {start_index!r}")
        return [self.create_input(start_index + i) for i in range(num)]

    def create_variable(self, index: int, name: str) -> TensorHolder:
        """GE's variable; ONNX has none, so it is a graph input named `name` (documented)."""
        return self.create_input(index, name=name)

    # -- constants --------------------------------------------------------------------------
    def create_const(self, value: Tensor | np.ndarray | np.generic,
                     *, name: str | None = None) -> TensorHolder:
        """A `Const` node of a Tensor or numpy value, keeping its dtype (extension);
        `BuilderValueError` for a value no Tensor holds (strings that are not UTF-8)."""
        graph = self._live_graph("create_const")
        try:
            tensor = value if isinstance(value, Tensor) else Tensor(np.asarray(value))
        except GraphTypeError as exc:
            raise BuilderValueError(f"create_const: {exc.message}") from None
        node = graph.add_const(tensor, name=self._node_name(name, CONST))
        return TensorHolder._make(self, node, 0)

    def _const(self, op: str, value: Any, shape: Sequence[int] | None, dtype: DataType,
               check: type | tuple[type, ...]) -> TensorHolder:
        self._check_alive(op)
        if shape is not None and not isinstance(shape, (list, tuple)):
            raise BuilderTypeError(f"{op}: shape must be a list of ints, got {shape!r}")
        dims = nested_shape(value, f"{op} value")
        flat = _flatten(value)
        for v in flat:
            if isinstance(v, bool) or not isinstance(v, check):
                expected = " or ".join(t.__name__ for t in (
                    check if isinstance(check, tuple) else (check,)))
                raise BuilderTypeError(f"{op}: {v!r} is not a {expected}")
        if shape is not None:
            dims = [int(d) for d in shape]
            count = int(np.prod(dims, dtype=np.int64))
            if count != len(flat):
                raise BuilderValueError(
                    f"{op}: shape {dims} holds {count} elements but {len(flat)} values were "
                    "given"
                )
        from ge.graph.types import data_type_to_numpy

        np_type = data_type_to_numpy(dtype)
        info = np.iinfo(np_type) if np.issubdtype(np_type, np.integer) else None
        if info is not None and any(not info.min <= int(v) <= info.max for v in flat):
            raise BuilderValueError(f"{op}: a value is outside the range of {dtype.name}")
        array = np.asarray(flat, dtype=np_type).reshape(dims)
        return self.create_const(Tensor(array, data_type=dtype))

    def create_const_int64(self, value: int | list[Any], shape: Sequence[int] | None = None
                           ) -> TensorHolder:
        return self._const("create_const_int64", value, shape, DataType.DT_INT64, int)

    def create_const_uint64(self, value: int | list[Any], shape: Sequence[int] | None = None
                            ) -> TensorHolder:
        return self._const("create_const_uint64", value, shape, DataType.DT_UINT64, int)

    def create_const_int32(self, value: int | list[Any], shape: Sequence[int] | None = None
                           ) -> TensorHolder:
        return self._const("create_const_int32", value, shape, DataType.DT_INT32, int)

    def create_const_uint32(self, value: int | list[Any], shape: Sequence[int] | None = None
                            ) -> TensorHolder:
        return self._const("create_const_uint32", value, shape, DataType.DT_UINT32, int)

    def create_const_float(self, value: float | list[Any], shape: Sequence[int] | None = None
                           ) -> TensorHolder:
        """A float32 constant; nested lists give their nesting as the shape."""
        return self._const("create_const_float", value, shape, DataType.DT_FLOAT, (int, float))

    def create_vector_int64(self, value: list[int]) -> TensorHolder:
        if not isinstance(value, (list, tuple)):
            raise BuilderTypeError("create_vector_int64 takes a list of ints")
        return self._const("create_vector_int64", list(value), [len(value)], DataType.DT_INT64,
                           int)

    def create_scalar_int64(self, value: int) -> TensorHolder:
        return self._const("create_scalar_int64", value, None, DataType.DT_INT64, int)

    def create_scalar_int32(self, value: int) -> TensorHolder:
        return self._const("create_scalar_int32", value, None, DataType.DT_INT32, int)

    def create_scalar_uint64(self, value: int) -> TensorHolder:
        return self._const("create_scalar_uint64", value, None, DataType.DT_UINT64, int)

    def create_scalar_uint32(self, value: int) -> TensorHolder:
        return self._const("create_scalar_uint32", value, None, DataType.DT_UINT32, int)

    def create_scalar_float(self, value: float) -> TensorHolder:
        return self._const("create_scalar_float", value, None, DataType.DT_FLOAT, (int, float))

    # -- graph outputs and attributes ---------------------------------------------------------
    def set_graph_output(self, tensor: TensorHolder, output_index: int) -> None:
        self._check_alive("set_graph_output")
        self._outputs[output_index] = self._holder(tensor, "tensor")

    def _set_graph_attr(self, op: str, attr_name: str, value: Any) -> None:
        self._live_graph(op).set_attr(attr_name, value)

    def set_graph_attr_int64(self, attr_name: str, value: int) -> None:
        self._set_graph_attr("set_graph_attr_int64", attr_name, int(value))

    def set_graph_attr_string(self, attr_name: str, value: str) -> None:
        self._set_graph_attr("set_graph_attr_string", attr_name, str(value))

    def set_graph_attr_bool(self, attr_name: str, value: bool) -> None:
        self._set_graph_attr("set_graph_attr_bool", attr_name, bool(value))

    def _tensor_attr(self, op: str, tensor: TensorHolder, attr_name: str, value: Any) -> None:
        self._check_alive(op)
        holder = self._holder(tensor, "tensor")
        holder._check_own(op)
        holder._node.set_output_attr(attr_name, holder._index, value)

    def set_tensor_attr_int64(self, tensor: TensorHolder, attr_name: str, value: int) -> None:
        self._tensor_attr("set_tensor_attr_int64", tensor, attr_name, int(value))

    def set_tensor_attr_string(self, tensor: TensorHolder, attr_name: str, value: str) -> None:
        self._tensor_attr("set_tensor_attr_string", tensor, attr_name, str(value))

    def set_tensor_attr_bool(self, tensor: TensorHolder, attr_name: str, value: bool) -> None:
        self._tensor_attr("set_tensor_attr_bool", tensor, attr_name, bool(value))

    def _node_attr(self, op: str, tensor: TensorHolder, attr_name: str, value: Any) -> None:
        self._check_alive(op)
        holder = self._holder(tensor, "tensor")
        holder._check_own(op)
        holder._node.set_attr(attr_name, value)

    def set_node_attr_int64(self, tensor: TensorHolder, attr_name: str, value: int) -> None:
        self._node_attr("set_node_attr_int64", tensor, attr_name, int(value))

    def set_node_attr_string(self, tensor: TensorHolder, attr_name: str, value: str) -> None:
        self._node_attr("set_node_attr_string", tensor, attr_name, str(value))

    def set_node_attr_bool(self, tensor: TensorHolder, attr_name: str, value: bool) -> None:
        self._node_attr("set_node_attr_bool", tensor, attr_name, bool(value))

    def add_control_dependency(self, dst_tensor: TensorHolder,
                               src_tensors: list[TensorHolder]) -> None:
        """Make `dst_tensor`'s node run after each of `src_tensors`' nodes."""
        graph = self._live_graph("add_control_dependency")
        dst = self._holder(dst_tensor, "dst_tensor")
        dst._check_own("add_control_dependency")
        if not isinstance(src_tensors, (list, tuple)):
            raise BuilderTypeError("src_tensors must be a list of TensorHolder")
        for src in src_tensors:
            graph.add_control_edge(self._holder(src, "src_tensors item")._node, dst._node)

    # -- build ------------------------------------------------------------------------------
    def build_and_reset(self, outputs: list[TensorHolder] | None = None, *,
                        names: Sequence[str | None] | None = None) -> Graph:
        """Add the `NetOutput` node fed by `outputs` (a list) and hand the graph over.
        `names` (an extension) names the ONNX graph outputs, one per output (None keeps the
        value's own name, `<node>:<i>`), as `create_input(name=)` names the inputs."""
        graph = self._live_graph("build_and_reset")
        self._check_owned("build_and_reset")
        if outputs is None:
            order = sorted(self._outputs)
            if order != list(range(len(order))):
                raise BuilderValueError(f"graph outputs must be indexed 0..n-1, got {order}")
            outputs = [self._outputs[i] for i in order]
        elif not isinstance(outputs, list):
            raise BuilderTypeError(f"outputs must be a list, got {type(outputs).__name__}")
        holders = [self._holder(o, f"outputs[{i}]") for i, o in enumerate(outputs)]
        indexes = sorted(n.get_attr("index") for n in graph.nodes_of_type(DATA))
        if indexes != list(range(len(indexes))):
            raise BuilderValueError(f"input indexes must be contiguous from 0, got {indexes}")
        if names is not None:
            self._name_outputs(graph, holders, names)
        net_output = graph.add_node(NET_OUTPUT, num_inputs=len(holders), num_outputs=0)
        for i, holder in enumerate(holders):
            graph.add_data_edge(holder._node, holder._index, net_output, i)
        self._graph = None
        return graph

    @staticmethod
    def _name_outputs(graph: Graph, holders: list[TensorHolder],
                      names: Sequence[str | None]) -> None:
        """Give the values `holders` name the graph output names `names` (checked whole
        before any is given: a refusal changes nothing)."""
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise BuilderTypeError(f"names must be a list of str (or None), got "
                                   f"{type(names).__name__}")
        if len(names) != len(holders):
            raise BuilderValueError(f"names has {len(names)} name(s) for {len(holders)} "
                                    "output(s)")
        wanted: dict[tuple[Node, int], str] = {}
        for i, (holder, name) in enumerate(zip(holders, names)):
            if name is None:
                continue
            if not isinstance(name, str) or not name:
                raise BuilderTypeError(f"names[{i}] must be a non-empty str or None, got "
                                       f"{name!r}")
            key = (holder._node, holder._index)
            current = holder._node.get_output_name(holder._index)
            if holder._node.type == DATA:
                raise BuilderValueError(
                    f"output {i} is graph input {current!r}, whose name is the input's: "
                    "name it with create_input(name=)")
            if wanted.get(key, name) != name:
                raise BuilderValueError(f"output {i} is the value of another output named "
                                        f"{wanted[key]!r}: one value has one name")
            if name != current and (name in wanted.values()
                                        or graph._naming.value_taken(name)):
                raise BuilderValueError(f"names[{i}] {name!r} is already a value of the graph")
            wanted[key] = name
        for (node, index), name in wanted.items():
            if node.get_output_name(index) != name:
                graph._rename_value(node, index, name)

    def __copy__(self) -> GraphBuilder:
        raise BuilderStateError("GraphBuilder cannot be copied")

    def __deepcopy__(self, memo: Any) -> GraphBuilder:
        raise BuilderStateError("GraphBuilder cannot be copied")

    def __repr__(self) -> str:
        state = "built" if self._graph is None else f"{len(self._graph)} nodes"
        return f"<GraphBuilder {self._name!r} {state}>"
