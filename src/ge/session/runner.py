"""Running one model: its interface, input checks, and onnxruntime or the reference evaluator.

A model runs in onnxruntime (CPU, graph optimisations off so that what runs is our model,
logging quiet). A model holding custom operators registered in `ge.ops` runs in onnx's
`ReferenceEvaluator` instead, each such operator computed by its numpy kernel (or its
decomposition). Inputs and outputs of float8, 4-bit and 2-bit types, which onnxruntime's
`run` neither takes nor gives, are exchanged with it as OrtValues (`ge.session.low_bit`).
A `ModelRunner` prepares a model once and runs it many times; running a
`Graph` exports it and never changes it.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import EncodeError
from onnx import AttributeProto, TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from ge.errors import (
    MissingOperatorError,
    RuntimeLoadError,
    SessionError,
    VerificationInputError,
)
from ge.graph.attributes import decode_attr
from ge.graph.domains import ONNX_DOMAINS, proto_graphs
from ge.graph.graph import Graph
from ge.graph.model_io import INLINE_MODEL_BYTES
from ge.graph.node import Node
from ge.graph.places import node_label
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType, data_type_to_onnx, elem_type_name
from ge.graph.value_info import desc_from_value_info, holds_non_tensor, is_known_type
from ge.ops.custom_calls import call_kernel
from ge.ops.evaluation import evaluate_node
from ge.ops.functions import inline_local_functions
from ge.ops.registry import CustomOp, get_custom_op
from ge.ops.runtime_kernels import RUNTIME_KERNELS
from ge.ops.runtime_ops import runtime_domains
from ge.session.low_bit import (
    as_ort_value,
    check_ort_values,
    is_low_bit,
    output_array,
    restored,
)
from ge.session.values import ValueType, fitted_value, value_text

__all__ = [
    "FILE_RUN_BYTES",
    "ExportedModel",
    "InputSpec",
    "ModelRunner",
    "checked_inputs",
    "custom_output_descs",
    "exported_to_run",
    "foreign_nodes",
    "model_inputs",
    "model_name",
    "model_outputs",
    "run_model",
    "runs_in_onnxruntime",
    "runtime_error_nodes",
]

Model = Graph | onnx.ModelProto
Dim = int | str | None  # a static size, a symbolic name, or unknown


def runs_in_onnxruntime(domain: str) -> bool:
    """Whether onnxruntime runs the operators of `domain` itself (ONNX's own domains and
    onnxruntime's, `com.microsoft` ...): a node of any other domain needs a custom operator
    registered with a kernel or a decomposition."""
    return domain in ONNX_DOMAINS or domain in runtime_domains()


# A model serialized to more bytes than this goes to onnxruntime as a file.
_INLINE_LIMIT = INLINE_MODEL_BYTES
#: A Graph whose constants hold more bytes than this runs from a model file saved with
#: external data into a temporary folder: exported to a proto and serialized, its weights
#: would be held three times more (the proto, its bytes, onnxruntime's parse of them).
FILE_RUN_BYTES = 64 * 2**20


# -- a model's interface ----------------------------------------------------------------------


@dataclass(frozen=True)
class InputSpec:
    """One graph input: name, ONNX element type (0 = unknown), dims (None = unknown rank);
    `optional` inputs have a default value (an initializer of the same name). `nested` is
    the type of an input that is not a tensor (a sequence, map, optional or sparse tensor:
    `ge.session.values`), None for a tensor; its `elem_type` is then 0 and its `dims`
    None."""

    name: str
    elem_type: int
    dims: tuple[Dim, ...] | None
    optional: bool = False
    nested: ValueType | None = None

    def describe(self) -> str:
        """E.g. `float32 [batch, 16]` (`?` for an unknown dim), `seq(tensor(float) [2])`."""
        if self.nested is not None:
            return self.nested.text()
        dtype = elem_type_name(self.elem_type) if self.elem_type else "any type"
        if self.dims is None:
            return f"{dtype} (any shape)"
        return f"{dtype} [{', '.join('?' if d is None else str(d) for d in self.dims)}]"


def _graph_inputs(graph: Graph) -> list[InputSpec]:
    # Initializers giving inputs a default (IR >= 4) are kept aside by the importer.
    defaults = getattr(graph, "_input_defaults", {})
    specs = []
    for node in graph.get_data_nodes():
        name = node.get_output_names()[0]
        desc = node.get_output_desc(0)
        shape = desc.shape
        dims = None if shape.is_unknown_rank() else _dims_of(shape)
        if holds_non_tensor(desc):  # its ONNX type is kept on the desc
            specs.append(InputSpec(name, 0, None, name in defaults,
                                   ValueType.from_proto(desc._source.type)))
            continue
        dtype = desc.data_type
        elem = 0 if dtype == DataType.DT_UNDEFINED else data_type_to_onnx(dtype)
        specs.append(InputSpec(name, elem, dims, name in defaults))
    return specs


def _proto_inputs(model: onnx.ModelProto) -> list[InputSpec]:
    defaults = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.type.WhichOneof("value") not in (None, "tensor_type"):
            specs.append(InputSpec(vi.name, 0, None, vi.name in defaults,
                                   ValueType.from_proto(vi.type)))
            continue
        tensor = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        elem, dims = 0, None
        if tensor is not None:
            elem = tensor.elem_type
            if tensor.HasField("shape"):
                dims = _proto_dims(tensor)
        specs.append(InputSpec(vi.name, elem, dims, vi.name in defaults))
    return specs


def model_inputs(model: Model) -> list[InputSpec]:
    """The inputs of a model in order (a Graph is read directly, not exported)."""
    if isinstance(model, Graph):
        return _graph_inputs(model)
    if isinstance(model, onnx.ModelProto):
        return _proto_inputs(model)
    raise TypeError(f"model must be a ge.graph.Graph or an onnx.ModelProto, "
                    f"got {type(model).__name__}")


def _dims_of(shape: Iterable[Dim]) -> tuple[Dim, ...]:
    """A desc's dims as `InputSpec` holds them: an unknown one (-1) as None."""
    return tuple(d if isinstance(d, str) else (None if d is None or d < 0 else d)
                 for d in shape)


def _proto_dims(tensor: onnx.TypeProto.Tensor) -> tuple[Dim, ...]:
    """A tensor type's declared dims: a size, a symbol, or None (neither)."""
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in tensor.shape.dim)


def model_outputs(model: Model) -> dict[str, tuple[Dim, ...]]:
    """The dims each tensor output of `model` declares, by name (a dim: a size, a symbol,
    or None), leaving out the outputs declared without a shape."""
    if isinstance(model, onnx.ModelProto):
        declared = {}
        for vi in model.graph.output:
            tensor = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
            if tensor is not None and tensor.HasField("shape"):
                declared[vi.name] = _proto_dims(tensor)
        return declared
    net_output = model.get_net_output()
    declared = {}
    for i in range(net_output.get_inputs_size() if net_output is not None else 0):
        producer = net_output.get_input_producer(i)  # type: ignore[union-attr]
        if producer is None or not net_output.has_input_desc(i):  # type: ignore[union-attr]
            continue
        desc = net_output.get_input_desc(i)  # type: ignore[union-attr]
        if not desc.shape.is_unknown_rank() and not holds_non_tensor(desc):
            declared[producer[0].get_output_name(producer[1])] = _dims_of(desc.shape)
    return declared


def model_name(model: Model) -> str:
    return model.name if isinstance(model, Graph) else model.graph.name


# -- checking inputs --------------------------------------------------------------------------


def _problem(spec: InputSpec, value: Any, symbols: dict[str, tuple[str, int]]) -> str | None:
    """What is wrong with `value` as input `spec` (a tensor), or None."""
    if not isinstance(value, np.ndarray):
        return f"input {spec.name!r}: expected {spec.describe()}, got {value_text(value)}"
    wrong = False
    if spec.elem_type:
        if spec.elem_type == TensorProto.STRING:
            wrong = value.dtype.kind not in "OSU"
        else:
            try:
                wrong = value.dtype != helper.tensor_dtype_to_np_dtype(spec.elem_type)
            except (KeyError, TypeError, ValueError):
                wrong = False  # an element type numpy cannot hold: onnxruntime will judge
    if spec.dims is not None:
        if value.ndim != len(spec.dims):
            wrong = True
        else:
            for want, got in zip(spec.dims, value.shape):
                if isinstance(want, int) and want != got:
                    wrong = True
    if wrong:
        return f"input {spec.name!r}: expected {spec.describe()}, got {value_text(value)}"
    if spec.dims is not None:
        for want, got in zip(spec.dims, value.shape):
            if isinstance(want, str):
                first = symbols.setdefault(want, (spec.name, got))
                if first[1] != got:
                    return (f"input {spec.name!r}: dim {want!r} is {got}, but input "
                            f"{first[0]!r} gave it size {first[1]}")
    return None


def _as_arrays(inputs: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(inputs, Mapping):
        raise VerificationInputError(
            f"inputs must be a mapping of input name to array, got {type(inputs).__name__}")
    return {name: v.numpy() if isinstance(v, Tensor) else
            (np.asarray(v) if isinstance(v, np.generic) else v) for name, v in inputs.items()}


def checked_inputs(inputs: Mapping[str, Any], specs: list[InputSpec],
                   graph_name: str) -> dict[str, Any]:
    """`inputs` as arrays (ge Tensors converted), or for a sequence, map or optional input
    as the Python value onnxruntime takes (`ge.session.values.fitted_value`), after
    `check_inputs`' checks."""
    arrays = _as_arrays(inputs)
    problems: list[str] = []
    symbols: dict[str, tuple[str, int]] = {}
    known = {s.name for s in specs}
    for spec in specs:
        if spec.name not in arrays:
            if not spec.optional:
                problems.append(f"input {spec.name!r}: missing (expected {spec.describe()})")
            continue
        if spec.nested is not None:
            arrays[spec.name], problem = fitted_value(arrays[spec.name], spec.nested)
            if problem:
                problems.append(f"input {spec.name!r}: {problem}")
            continue
        if spec.elem_type:  # a float8 or int4 array read back from an .npz file is void
            arrays[spec.name] = restored(arrays[spec.name], spec.elem_type)
        problem = _problem(spec, arrays[spec.name], symbols)
        if problem:
            problems.append(problem)
    names = ", ".join(s.name for s in specs) or "none"
    problems.extend(f"input {name!r}: not an input of the graph (its inputs: {names})"
                    for name in arrays if name not in known)
    if problems:
        if len(problems) == 1:
            raise VerificationInputError(f"inputs do not fit graph {graph_name!r}: {problems[0]}")
        lines = "\n".join(f"  - {p}" for p in problems)
        raise VerificationInputError(
            f"inputs do not fit graph {graph_name!r} ({len(problems)} problems):\n{lines}")
    return arrays




# -- custom operators in the reference evaluator ----------------------------------------------


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _all_nodes(sub)


def custom_ops_of(model: onnx.ModelProto) -> list[CustomOp]:
    """The registered custom operators `model` uses (subgraphs and functions included);
    `MissingOperatorError` when it uses an operator of another domain that neither
    onnxruntime, a function of the model nor a registered custom operator defines."""
    found: dict[tuple[str, str], CustomOp] = {}
    defined = {(f.domain, f.name) for f in model.functions}
    missing: set[str] = set()
    nodes = [*_all_nodes(model.graph), *(n for f in model.functions for n in f.node)]
    for node in nodes:
        key = (node.domain, node.op_type)
        if key not in found and key not in defined and not runs_in_onnxruntime(node.domain):
            custom = get_custom_op(node.op_type, node.domain)
            if custom is not None:
                found[key] = custom
            else:
                missing.add(f"{node.domain}::{node.op_type}")
    if missing:
        raise MissingOperatorError(
            f"graph {model.graph.name!r} uses {', '.join(sorted(missing))}, which no loaded "
            "plugin registers (ge.ops.register_op with a kernel or a decomposition) and no "
            "function of the model defines: load the plugin that registers it (--pass-path "
            "or ASCEND_GE_PY_PASS_PATH; in Python, pass_paths= or ge.testing.load_passes)")
    return list(found.values())


def _decomposed(custom: CustomOp, inputs: tuple[Any, ...], attrs: dict[str, Any],
                num_outputs: int) -> list[np.ndarray]:
    """A decomposition-only operator computed by `ge.ops.evaluate_node` on constant inputs."""
    graph = Graph("decomposition")
    node = graph.add_node(custom.spec.op_type, domain=custom.spec.domain,
                          num_inputs=len(inputs), num_outputs=num_outputs, attrs=attrs)
    for i, value in enumerate(inputs):
        if value is not None:
            graph.add_data_edge(graph.add_const(Tensor(np.asarray(value))), 0, node, i)
    return [t.numpy() for t in evaluate_node(node)]


def _op_run_class(custom: CustomOp, declared: Mapping[str, TensorDesc]) -> type[OpRun]:
    """An `OpRun` subclass the reference evaluator calls for the operator's nodes.

    Attributes reach the kernel as keyword arguments, decoded the way `Node.get_attr` does,
    with the schema's defaults filled in (as in constant evaluation). Its values are checked
    against the output types the model declares (`declared`, by value name): `KernelError`.
    """
    spec = custom.spec
    defaults = {k: a.default for k, a in spec.attributes.items() if a.default is not None}

    def _run(self: OpRun, *inputs: Any, **_decoded_by_onnx: Any) -> tuple[Any, ...]:
        node = self.onnx_node
        attrs = dict(defaults)
        attrs.update((a.name, decode_attr(a)[1]) for a in node.attribute)
        count = len(node.output)
        if custom.kernel is not None:
            label = node_label(node.op_type, node.name, domain=node.domain,
                               outputs=node.output)
            expected = [declared.get(name) if name else None for name in node.output]
            results = call_kernel(custom, inputs, attrs, label, expected, node_name=node.name)
            return tuple(np.asarray(r) for r in results)
        try:
            results = _decomposed(custom, inputs, attrs, count)
        except Exception as err:
            # Not a TypeError: OpRun.run would replace the message with a generic one.
            raise RuntimeError(f"custom operator {spec.domain}::{spec.op_type} (node "
                               f"{node.name!r}) failed: {_one_line(err)}") from err
        return tuple(np.asarray(r) for r in results[:count])

    return type(spec.op_type, (OpRun,), {"op_domain": spec.domain, "_run": _run})


def foreign_nodes(graph: Graph) -> Iterator[Node]:
    """The nodes of `graph` and its subgraphs of a domain onnxruntime does not run itself
    (a custom operator's, a call of a model-local function), found through the op-type
    index: a model without them costs no scan of its nodes."""
    for g in (graph, *graph.get_all_subgraphs()):
        for op_type in g.op_types():
            if g.count_of_type(op_type, None) == g.count_of_type(op_type):
                continue  # ONNX's operator only
            for node in g.nodes_of_type(op_type, None):
                if node.domain and not runs_in_onnxruntime(node.domain):
                    yield node


def custom_output_descs(graph: Graph) -> dict[str, TensorDesc]:
    """The known output descs of `graph`'s custom-domain nodes by value name (subgraphs
    included): what their kernels' values must fit when the model runs exported without
    value_info."""
    found: dict[str, TensorDesc] = {}
    for node in foreign_nodes(graph.root_graph()):
        for i, name in enumerate(node.get_output_names()):
            if name and node.has_output_desc(i):
                found[name] = node.get_output_desc(i)
    return found


def _declared_types(model: onnx.ModelProto, customs: Iterable[CustomOp]) -> dict[str, TensorDesc]:
    """The descs the model declares (value_info, graph outputs) for the outputs of the nodes
    of `customs`' operators, by value name: what their kernels' values must fit."""
    keys = {c.key for c in customs}
    wanted = {name for node in _all_nodes(model.graph) if (node.domain, node.op_type) in keys
              for name in node.output if name}
    found: dict[str, TensorDesc] = {}
    for graph in proto_graphs(model.graph):
        for vi in (*graph.value_info, *graph.output):
            if vi.name in wanted and is_known_type(vi.type):
                found[vi.name] = desc_from_value_info(vi)
    return found


# -- running ----------------------------------------------------------------------------------


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


# How onnxruntime names the node it refuses or failed to run: `Name:'reshape'` (a kernel
# failing), `node with name 'relu'` (no kernel for its types), `Node (mm) Op (MatMul)` (its
# shape inference), `In Node, ("relu", Relu, ...` (an invalid node), `of operator (Relu) in
# node (relu)` (a type error).
_RUNTIME_NODE = re.compile(
    r"Name:'([^']+)'|node with name '([^']+)'|Node \(([^)]+)\) Op \("
    r"""|In Node, \("([^"]+)"|in node \(([^)]+)\)""")


def runtime_error_nodes(message: str) -> tuple[str, ...]:
    """The node names an onnxruntime error message names, in order, once each: what a
    `SessionError` of a run lists as its `nodes`."""
    found = (next(name for name in match.groups() if name)
             for match in _RUNTIME_NODE.finditer(message))
    return tuple(dict.fromkeys(found))


def _has_bfloat16_io(proto: onnx.ModelProto) -> bool:
    """Whether a graph input or output of `proto` is a bfloat16 tensor."""
    return any(v.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
               for v in (*proto.graph.input, *proto.graph.output))


@dataclass(frozen=True)
class ExportedModel:
    """A Graph exported to run: `proto` is the whole model, or, when `path` is set, the
    model without its weights, which are in the external data of the file at `path`."""

    proto: onnx.ModelProto
    path: Path | None = None


def _export(graph: Graph, value_info: bool, lift_constants: bool
            ) -> tuple[ExportedModel, tempfile.TemporaryDirectory[str] | None]:
    """`graph` exported as `Graph.to_onnx` does: in memory when its constants are small,
    else saved with external data into a temporary folder (returned: the caller removes it),
    the weights written from the graph one tensor at a time (`Graph.save`)."""
    from ge.graph.model_io import constants_nbytes

    if graph.root_graph() is not graph or constants_nbytes(graph) <= FILE_RUN_BYTES:
        return ExportedModel(graph.to_onnx(value_info=value_info,
                                           lift_constants=lift_constants)), None
    folder = tempfile.TemporaryDirectory(prefix="ge-session-", ignore_cleanup_errors=True)
    try:
        path = Path(folder.name) / "model.onnx"
        graph.save(path, external_data=True, value_info=value_info,
                   lift_constants=lift_constants)
        interface = onnx.load(path, load_external_data=False)
    except BaseException:
        folder.cleanup()
        raise
    return ExportedModel(interface, path), folder


@contextmanager
def exported_to_run(graph: Graph, *, value_info: bool = True,
                    lift_constants: bool = False) -> Iterator[ExportedModel]:
    """`graph` exported to run (`run_model`, `ModelRunner`), as `Graph.to_onnx` exports it
    with these options: a large one into a temporary folder, removed on exit, so that
    running it holds one copy of the weights beside the graph's, onnxruntime's."""
    exported, folder = _export(graph, value_info, lift_constants)
    try:
        yield exported
    finally:
        if folder is not None:
            folder.cleanup()


class ModelRunner:
    """A model prepared to run: checked interface, and an onnxruntime session (or a
    reference evaluator when it holds custom operators or bfloat16 inputs or outputs) built
    once for many runs. A large Graph runs from a temporary file (`exported_to_run`).

    A float8, 4-bit or 2-bit input goes to onnxruntime as an OrtValue; a model with such an
    output runs with `run_with_ort_values`, which a string, sequence, map or optional input
    or output cannot go through: such a model is `RuntimeLoadError` here, before it runs.
    `output_descs` (by value name) adds to the types the model declares what a custom
    operator's kernel's values are checked against (`custom_output_descs`)."""

    def __init__(self, model: Model | ExportedModel, *,
                 output_descs: Mapping[str, TensorDesc] | None = None) -> None:
        if isinstance(model, ExportedModel):  # checked as the proto it is, as a proto is
            self.inputs, self.name = _proto_inputs(model.proto), model.proto.graph.name
        else:  # a Graph is read before export: nothing changes
            self.inputs, self.name = model_inputs(model), model_name(model)
        folder: tempfile.TemporaryDirectory[str] | None = None
        try:
            if isinstance(model, Graph):
                exported, folder = _export(model, value_info=True, lift_constants=False)
            else:
                exported = model if isinstance(model, ExportedModel) else ExportedModel(model)
        except Exception as err:  # no input would make it run (a cycle): not the inputs'
            raise RuntimeLoadError(
                f"graph {self.name!r} cannot be exported to run: {_one_line(err)}",
                nodes=getattr(err, "nodes", ())) from err
        try:
            self._prepare(exported, output_descs or {})
        finally:  # what the backend needs of the file it has read
            if folder is not None:
                folder.cleanup()

    def _prepare(self, exported: ExportedModel, output_descs: Mapping[str, TensorDesc]
                 ) -> None:
        proto = exported.proto
        self.output_names = [o.name for o in proto.graph.output]
        customs = custom_ops_of(proto)  # (an operator nothing defines: refused here)
        # onnxruntime's Python API takes and gives no bfloat16 arrays (ml_dtypes'): such a
        # model runs in the reference evaluator, as one with custom operators does.
        reference = bool(customs) or _has_bfloat16_io(proto)
        self.backend = "reference" if reference else "onnxruntime"
        # Outputs of a float8, 4-bit or 2-bit type come from onnxruntime only as OrtValues
        # (`ge.session.low_bit`): such a model runs with `run_with_ort_values`.
        self._ort_values = not reference and check_ort_values(proto)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.Lock()  # the reference evaluator is not known to be reentrant
        try:
            if reference:
                whole = proto if exported.path is None else onnx.load(exported.path)
                if customs and whole.functions:
                    # onnx's evaluator of a function body is not given the kernels of
                    # `new_ops` ("Node type 'X' ... is unknown"): the bodies run inlined
                    copy = onnx.ModelProto()
                    copy.CopyFrom(whole)  # (the defaults are filled in in place)
                    whole = inline_local_functions(copy)
                declared = {**output_descs, **_declared_types(whole, customs)}
                self._evaluator = ReferenceEvaluator(
                    whole, new_ops=[*(_op_run_class(c, declared) for c in customs),
                                    *RUNTIME_KERNELS])
            elif exported.path is not None:
                self._session = self._ort_session(str(exported.path))
            else:
                self._session = self._ort_session(proto)
        except Exception as err:
            raise RuntimeLoadError(f"{self.backend} cannot load graph {self.name!r}: "
                                   f"{_one_line(err)}",
                                   nodes=runtime_error_nodes(str(err))) from err

    def _ort_session(self, model: onnx.ModelProto | str) -> Any:
        """A session of `model`: a proto (sent as bytes below 2 GiB) or a file's path."""
        import onnxruntime as ort  # imported when first needed: `import ge.session` stays light

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        # Fatal only: a failure reaches the user as our one-line error, not also as
        # onnxruntime's own coloured log line on stderr (which --json must keep clean).
        options.log_severity_level = 4
        providers = ["CPUExecutionProvider"]
        if isinstance(model, str):
            return ort.InferenceSession(model, options, providers=providers)
        proto = model
        payload = serialized_or_none(proto)
        if payload is not None and len(payload) <= _INLINE_LIMIT:
            return ort.InferenceSession(payload, options, providers=providers)
        del payload
        # Too large for one protobuf message: write it with external data and load the file.
        self._tmp = tempfile.TemporaryDirectory(prefix="ge-session-")
        path = Path(self._tmp.name) / "model.onnx"
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)  # save_model converts the tensors it externalises
        onnx.save_model(copy, path, save_as_external_data=True, location="model.onnx.data")
        return ort.InferenceSession(str(path), options, providers=providers)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs by graph output name, in the graph's output order: arrays (float8,
        int4 ... as the ml_dtypes arrays of their types), and the Python values of
        sequences, maps and optionals (`ge.session.values`)."""
        arrays = checked_inputs(inputs, self.inputs, self.name)
        try:
            # (not np.ascontiguousarray: it makes a 0-d input 1-d); a sequence, map or
            # optional goes as the Python value it is
            feeds = {k: np.asarray(v, order="C") if isinstance(v, np.ndarray) else v
                     for k, v in arrays.items()}
            if self.backend == "reference":
                with self._lock:
                    results = self._evaluator.run(None, feeds)
            elif self._ort_values:
                values = self._session.run_with_ort_values(
                    None, {k: as_ort_value(v) for k, v in feeds.items()})
                results = [output_array(name, v)
                           for name, v in zip(self.output_names, values)]
            else:  # a float8, 4-bit or 2-bit input as an OrtValue, the rest as they are
                results = self._session.run(None, {k: as_ort_value(v) if is_low_bit(v) else v
                                                   for k, v in feeds.items()})
        except Exception as err:  # MemoryError included: one line, not a traceback
            if _out_of_memory(err):
                raise SessionError(
                    f"{self.backend} ran out of memory running graph {self.name!r} "
                    f"({_one_line(err)}): smaller inputs need less") from err
            raise SessionError(f"{self.backend} failed to run graph {self.name!r}: "
                               f"{_one_line(err)}",
                               nodes=runtime_error_nodes(str(err))) from err
        return dict(zip(self.output_names, results))


def _out_of_memory(err: Exception) -> bool:
    """Whether running failed for want of memory: numpy's MemoryError, or onnxruntime's
    allocator failing (its error is a generic `Fail` saying so)."""
    return isinstance(err, MemoryError) or "Failed to allocate memory" in str(err)


def serialized_or_none(proto: Any) -> bytes | None:
    """`proto`'s bytes, or None when protobuf refuses it (over 2 GiB: upb raises EncodeError,
    also from `ByteSize`, which serializes to count)."""
    try:
        data: bytes = proto.SerializeToString()
    except (ValueError, EncodeError):
        return None
    return data


def run_model(model: Model | ExportedModel,
              inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Run `model` once on `inputs` (checked first) and return its outputs by name, in order.

    Raises VerificationInputError for inputs that do not fit, SessionError when onnxruntime
    or the reference evaluator rejects the model. To run one model many times, keep a
    `ModelRunner`.
    """
    return ModelRunner(model).run(inputs)
