"""Running one model: in onnxruntime, or in onnx's reference evaluator.

A model runs in onnxruntime (CPU, graph optimisations off so that what runs is our model,
logging quiet). A model holding custom operators registered in `ge.ops` runs in onnx's
`ReferenceEvaluator` instead, each such operator computed by its numpy kernel (or its
decomposition). Inputs and outputs of float8, 4-bit and 2-bit types, which onnxruntime's
`run` neither takes nor gives, are exchanged with it as OrtValues (`ge.session.low_bit`).
A `ModelRunner` prepares a model once and runs it many times; running a
`Graph` exports it and never changes it. The model's interface and the check of a run's
inputs are `ge.session.model_interface`'s; custom operators in the reference evaluator
`ge.session.custom_evaluation`'s.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import EncodeError

from ge._text import error_text
from ge.errors import RuntimeLoadError, SessionError
from ge.graph.graph import Graph
from ge.graph.model_io import INLINE_MODEL_BYTES
from ge.graph.tensor_desc import TensorDesc
from ge.ops.evaluation import reference_evaluator
from ge.ops.functions import inline_local_functions
from ge.session.custom_evaluation import custom_ops_of, declared_types, op_run_class
from ge.session.low_bit import as_ort_value, check_ort_values, is_low_bit, output_array
from ge.session.model_interface import (
    Model,
    checked_inputs,
    model_inputs,
    model_name,
    proto_inputs,
)

__all__ = [
    "FILE_RUN_BYTES",
    "ExportedModel",
    "ModelRunner",
    "exported_to_run",
    "run_model",
    "runtime_error_nodes",
    "serialized_or_none",
]


# A model serialized to more bytes than this goes to onnxruntime as a file.
_INLINE_LIMIT = INLINE_MODEL_BYTES
#: A Graph whose constants hold more bytes than this runs from a model file saved with
#: external data into a temporary folder: exported to a proto and serialized, its weights
#: would be held three times more (the proto, its bytes, onnxruntime's parse of them).
FILE_RUN_BYTES = 64 * 2**20


# -- running ----------------------------------------------------------------------------------


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
            self.inputs, self.name = proto_inputs(model.proto), model.proto.graph.name
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
                f"graph {self.name!r} cannot be exported to run: {error_text(err)}",
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
                declared = {**output_descs, **declared_types(whole, customs)}
                self._evaluator = reference_evaluator(
                    whole, [op_run_class(c, declared) for c in customs])
            elif exported.path is not None:
                self._session = self._ort_session(str(exported.path))
            else:
                self._session = self._ort_session(proto)
        except Exception as err:
            raise RuntimeLoadError(f"{self.backend} cannot load graph {self.name!r}: "
                                   f"{error_text(err)}",
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
                    f"({error_text(err)}): smaller inputs need less") from err
            raise SessionError(f"{self.backend} failed to run graph {self.name!r}: "
                               f"{error_text(err)}",
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
