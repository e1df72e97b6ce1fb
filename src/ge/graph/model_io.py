"""Loading and saving models: files, external data, and the errors users see.

`load` never reads outside the model's folder and says precisely what is wrong with a file;
`save` writes into temporary files beside the destination and renames them into place only
when everything was written, so a failed save leaves nothing behind and an existing file
intact; it refuses to write over the files a graph was loaded from unless asked to.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError, EncodeError

from ge._text import error_text
from ge.errors import (
    GraphTypeError,
    GraphValidationError,
    ModelLoadError,
    ModelNotFoundError,
    ModelSaveError,
    ValidationProblem,
    model_file_named,
)
from ge.graph import model_file
from ge.graph.allocation import no_gc_pauses
from ge.graph.annotations import strip_annotations
from ge.graph.checker_places import CheckerFailure, model_failure
from ge.graph.external_data import (
    ExternalDataWriter,
    SharedExternalData,
    iter_tensors,
    packed_bytes,
    read_external_data,
    write_external_data,
)
from ge.graph.graph import CONST, Graph
from ge.graph.model_file import EXTERNAL_KEY, ModelPieces, read_model_pieces
from ge.graph.onnx_export import TensorSink, graph_to_model, initializers_as_inputs
from ge.graph.onnx_import import model_to_graph
from ge.graph.payload_checks import payload_nbytes
from ge.graph.payloads import PayloadStore, SplicedModel
from ge.graph.save_target import (
    check_save_target,
    check_target_path,
    check_target_spelling,
    kept_data_name,
    new_file_mode,
    rename_into_place,
    write_destination,
)
from ge.graph.sparse import dense_initializers, has_sparse_initializers
from ge.graph.sparse_order import index_order_note
from ge.graph.tensor import Tensor
from ge.graph.types import DataType, data_type_to_onnx

__all__ = ["INLINE_MODEL_BYTES", "PROTOBUF_MAX_BYTES", "check_model_full", "check_model_path",
           "constants_nbytes",
           "load", "parse_model", "read_model_file", "save_model", "weightless"]

#: Protobuf's limit for one serialized message, so for a model without external data: a
#: larger one neither serializes nor parses. Every size limit of ge's models derives from it.
PROTOBUF_MAX_BYTES = 2**31 - 1
#: The largest model ge keeps in one message: the limit less 64 MiB, a margin for what a
#: size estimate leaves out (a model's constants without its nodes and names). Over it, a
#: save chooses external data, a run gives onnxruntime a file, --opset cannot convert whole.
INLINE_MODEL_BYTES = PROTOBUF_MAX_BYTES - 64 * 2**20
#: Constants of more bytes than this refuse a save without external data, up front.
PROTOBUF_LIMIT = PROTOBUF_MAX_BYTES
#: The largest file `save` writes inline: what protobuf's serializer refuses above, checked
#: on the file since the model proto it serializes holds placeholders (ge.graph.payloads).
SERIALIZED_LIMIT = PROTOBUF_MAX_BYTES


def parse_model(data: bytes, where: str) -> onnx.ModelProto:
    """The ONNX model serialized in `data` (read from `where`, which messages name), or
    `ModelLoadError` (GE1101) in the words every command uses: a file that does not parse
    (truncated, not ONNX), or a message that parses but is no model (no graph or opsets)."""
    return _parse(data, where)


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as exc:
        raise ModelLoadError(
            f"{where} is not a readable ONNX model (the file is truncated or not ONNX): {exc}",
            path=where,
        ) from None
    _check_is_model(model, where)
    return model


def _check_is_model(model: onnx.ModelProto, where: str) -> None:
    """Refuse a protobuf message that parsed but is no ONNX model (another message, empty)."""
    if not model.HasField("graph") or (model.ir_version >= 3 and not model.opset_import):
        missing = "graph" if not model.HasField("graph") else "opset_import"
        raise ModelLoadError(
            f"{where} is not an ONNX model: it has no {missing} (the file is truncated or "
            "not ONNX)",
            path=where,
        )


def check_model_path(path: Path) -> None:
    """Refuse a model path that names no file to read: `ModelNotFoundError` (GE1102) when
    nothing is there, `ModelLoadError` (GE1101) for a folder or another kind of file, or a
    path the system refuses ("File name too long"); asked by every command reading a model
    (`load`, `ge inspect`), before anything is read."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno in _MISSING_ERRNOS:
            raise ModelNotFoundError(f"model file not found: {path}", path=str(path)) from None
        raise ModelLoadError(f"cannot read {path}: {exc.strerror or exc}",
                             path=str(path)) from None
    if not stat.S_ISREG(mode):
        raise ModelLoadError(f"{path} is not a file", path=str(path))


#: The errors of a path that names nothing (as `Path.exists` answers False on them).
_MISSING_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EBADF})


def read_model_file(path: Path, where: str, words: Iterable[bytes] = ()) -> ModelPieces:
    """The model in the file at `path` (`where` names it in errors), whether it may hold
    external data references, the raw_data lengths learnt reading it, and which of `words`
    its bytes hold (`ModelPieces`): a large file read a piece at a time
    (`read_model_pieces`), never whole into memory; a small one, or one that is not
    well-formed (so that the error says what is wrong), whole. ModelLoadError (GE1101)."""
    try:
        large = path.stat().st_size >= model_file.PIECEWISE_FROM_BYTES
        pieces = read_model_pieces(path, words) if large else None
        data = path.read_bytes() if pieces is None else b""
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path}: {exc.strerror or exc}", path=where) from None
    if pieces is None:
        return ModelPieces(_parse(data, where), EXTERNAL_KEY in data, {},
                           frozenset(word for word in words if word in data))
    _check_is_model(pieces.model, where)
    return pieces


def load(
    source: str | os.PathLike[str] | onnx.ModelProto | bytes,
    *,
    base_dir: str | os.PathLike[str] | None = None,
) -> Graph:
    """Load an ONNX model (a path, a `ModelProto` or serialized bytes) into a `Graph`.

    External data is read from the model's folder (`base_dir` for protos and bytes) and
    refused when it resolves outside it. A tensor whose stored data disagrees with its dims
    and element type is refused (`ge.graph.payload_checks`). The proto passed in is not
    modified. Every error about what a file holds names the file (`ModelLoadError.path`).
    """
    # Every external reference names its file under the key "location"; serialized bytes
    # without that word have none, and the walk over every tensor can be skipped.
    may_have_external_data = True
    measured: dict[int, tuple[onnx.TensorProto, int]] = {}  # raw_data lengths known
    named: str | None = None  # the file the errors name
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        where = "the model"
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        model = _parse(data, "the model given as bytes")
        may_have_external_data = EXTERNAL_KEY in data
        where = "the model given as bytes"
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        where = str(path)
        check_model_path(path)
        # Not `path.read_bytes()`: its bytes and the parsed model would be two copies of
        # the weights at once.
        model, may_have_external_data, measured, _ = read_model_file(path, where)
        named = where
        if base_dir is None:
            base_dir = path.parent
    else:
        raise GraphTypeError(
            "load() takes a path, an onnx.ModelProto or bytes, got " + type(source).__name__
        )
    if not model.HasField("graph"):
        raise ModelLoadError(f"{where} has no graph", path=where)
    with no_gc_pauses(), model_file_named(named):
        read: list[str] = []
        if may_have_external_data:
            read = read_external_data(model, base_dir, measured)
        graph = model_to_graph(model, measured=measured)
    sources = dict.fromkeys(read, "external data file")
    if isinstance(source, (str, os.PathLike)):
        sources[os.path.realpath(source)] = "model file"
    graph.model.source_files = sources
    return graph


def _approx_nbytes(tensor: Tensor) -> int:
    """Payload size of a constant without copying it: elements times their size for the
    fixed-size types (upb's `ByteSize` serializes the message: seconds for a large model),
    the proto's size for strings and types of no numpy dtype."""
    source = tensor._source_proto()
    if source is None:
        return tensor.numpy().nbytes
    size = payload_nbytes(source.data_type, tensor._shape)  # (its dims: read when loaded)
    return source.ByteSize() if size is None else size


def constants_nbytes(graph: Graph) -> int:
    """Bytes held by the constants of `graph` and its subgraphs, counted without copying
    them (what decides on external data when saving, and on running from a file,
    `ge.session.runner`)."""
    total = 0
    for g in [graph, *graph.get_all_subgraphs()]:
        for node in g.nodes_of_type(CONST):
            if node.has_attr("value"):
                total += _approx_nbytes(node._stored_tensor("value"))
    return total


def _external_sink(writer: ExternalDataWriter) -> TensorSink:
    """Write each large constant straight into the data file; small ones stay inline."""

    def sink(tensor: Tensor, name: str) -> onnx.TensorProto | None:
        if tensor.data_type == DataType.DT_STRING:
            return None
        if _approx_nbytes(tensor) < writer.size_threshold:
            return None
        meta = onnx.TensorProto()
        meta.name = name
        meta.data_type = data_type_to_onnx(tensor.data_type)
        meta.dims.extend(tensor.shape)
        source = tensor._source_proto()
        if source is not None:
            if source.HasField("doc_string"):  # not an empty one where it had none
                meta.doc_string = source.doc_string
            meta.metadata_props.extend(source.metadata_props)
        if source is not None:  # (raw_data copies out of the proto: asked only if needed)
            writer.place_from(meta, source, lambda: source.raw_data
                              if source.HasField("raw_data") else packed_bytes(tensor.numpy()))
        else:
            array = tensor.numpy()
            writer.place_from(meta, array, lambda: packed_bytes(array))
        return meta

    return sink


#: Initializers of more elements than this are checked as typed graph inputs: the checker
#: and shape inference need their types and shapes, not their values (they read small ones:
#: a Reshape's shape), and a copy of every weight would double the peak memory of a save.
_CHECKED_VALUE_ELEMENTS = 1024


def weightless(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """`model` itself (after it was serialized: it is changed) with its root graph's large
    or external initializers turned into typed graph inputs, for the checker; None when a
    tensor elsewhere (a body, an attribute) still points into an external data file, which
    the checker would look for beside the working folder."""
    initializers_as_inputs(model.graph, {
        t.name for t in model.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
        or math.prod(t.dims[:]) > _CHECKED_VALUE_ELEMENTS})
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in iter_tensors(model)):
        return None
    return model


def _check_with_onnx(model: onnx.ModelProto, graph: Graph, target: Path,
                     payloads: PayloadStore) -> None:
    """Refuse to write a model onnx's full checker (strict shape inference included)
    rejects: runtimes reject it too. `model` is changed (`weightless`), and the payloads
    of the placeholders it keeps are put back (inference reads constants' values). The
    refusal gives onnx's text whole, and names where the checker's problem is (a body, a
    function, the node: `ge.graph.checker_places`), which its own text does not say."""
    checked = weightless(model)
    if checked is None:
        return
    payloads.restore(checked)
    try:
        check_model_full(checked)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        text = error_text(exc)
        # (found only for the checker's refusals: inference's name their nodes already; the
        # model is as checked then, check_model_full changes it only after the checker)
        failure: CheckerFailure | None = None
        if isinstance(exc, onnx.checker.ValidationError):
            try:
                failure = model_failure(checked)
            except Exception:  # (a place is never worth another error than onnx's)
                failure = None
        if failure is not None:
            text = f"{failure.node}: {failure.message}" if failure.node else failure.message
        note = index_order_note(checked, text)  # (a sparse tensor's indices out of order)
        if note:
            text = text.rstrip(".") + note
        named = _CHECKER_NODE.search(text)  # "(op_type:Gemm, node name: /fc1/Gemm)"
        nodes = ((failure.name,) if failure is not None and failure.name else
                 (named.group(1),) if named else ())
        raise GraphValidationError([ValidationProblem(
            "onnx-checker", nodes, f"onnx.checker rejects the model, nothing was written to "
            f"{target}: {text}", failure.graph if failure is not None and failure.graph
            else graph.name, place=failure.place if failure is not None else "")]) from exc


def check_model_full(model: onnx.ModelProto) -> None:
    """`onnx.checker.check_model(model, full_check=True)`, but for a model with sparse
    initializers: the checker checks them as written (indices in range and sorted), and the
    strict inference `full_check` adds gets the dense tensors they stand for
    (`ge.graph.sparse`), as onnxruntime reads them; onnx's own types them `sparse_tensor`,
    which no standard operator takes. `model` is changed when it has any. Raises what the
    checker and inference raise."""
    if not has_sparse_initializers(model.graph):
        onnx.checker.check_model(model, full_check=True)
        return
    onnx.checker.check_model(model)
    data_less = dense_initializers(model.graph, _CHECKED_VALUE_ELEMENTS)
    initializers_as_inputs(model.graph, {t.name for t in data_less})  # (the root's)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


#: The node onnx's checker and strict inference name in their messages, as the file writes it.
_CHECKER_NODE = re.compile(r"\(op_type:[^,()]*, node name: ([^()]+)\)")


def _serialized(model: onnx.ModelProto, payloads: PayloadStore, target: Path) -> SplicedModel:
    """The file of `model`, its placeholders filled from `payloads`; refused over protobuf's
    2 GiB limit for one message (which readers enforce)."""
    too_large = ModelSaveError(
        f"cannot save to {target}: the model is larger than protobuf's 2 GB limit; save "
        "with external_data=True", path=str(target))
    try:
        data = model.SerializeToString()
    except (ValueError, EncodeError) as exc:  # the model proto alone is over the limit
        raise too_large from exc
    spliced = payloads.layout(data)
    if spliced.size > SERIALIZED_LIMIT:
        raise too_large
    return spliced


def save_model(
    graph: Graph,
    path: str | os.PathLike[str],
    *,
    external_data: bool | None = None,
    external_data_name: str | None = None,
    size_threshold: int = 1024,
    overwrite_input: bool = False,
    value_info: bool = True,
    lift_constants: bool = False,
    full_check: bool = False,
    before_commit: Callable[[Path | None], None] | None = None,
    shared_data: SharedExternalData | None = None,
    strip_metadata: bool = False,
) -> Path | None:
    """Write `graph` to `path`; see `Graph.save`. Returns the data file written beside the
    model (None: every tensor is inside it). With `shared_data` (a data file in the same
    folder, as the graph dumps of a compilation share one) the large tensors go there, each
    payload once, and that file is not replaced: only the model is written atomically."""
    check_target_spelling(path)
    for flag, value in (("external_data", external_data), ("overwrite_input", overwrite_input),
                        ("value_info", value_info), ("strip_metadata", strip_metadata)):
        if value is not None and not isinstance(value, bool):  # ("false" is true: trial Z)
            raise GraphTypeError(f"{flag} must be True or False"
                                 + (" or None" if flag == "external_data" else "")
                                 + f", got {type(value).__name__} {value!r}"
                                 + ("; the data file is named by external_data_name"
                                    if flag == "external_data" and isinstance(value, str)
                                    else ""))
    target = Path(path)
    check_target_path(target)
    # Every file written derives from the file `target` names, resolved once here: a
    # symbolic link's target (the link stays), beside which its data file goes, named
    # after it (`data_file_of`).
    destination, in_place = write_destination(target)
    folder = destination.parent if str(destination.parent) else Path(".")
    if (overwrite_input and shared_data is None and external_data is not False
            and external_data_name is None):
        kept = kept_data_name(graph, destination)
        if kept is not None and kept != destination.name:
            external_data, external_data_name = True, kept
    if shared_data is not None:
        if shared_data.path.parent.resolve() != folder.resolve():
            raise ModelSaveError(f"cannot save to {target}: its shared data file "
                                 f"{shared_data.path} is in another folder", path=str(target))
        external_data = False  # (not a data file of its own)
    elif not external_data:  # None (decide) or False (refuse what cannot fit)
        constant_bytes = constants_nbytes(graph)
        if external_data is None:
            external_data = constant_bytes > INLINE_MODEL_BYTES
        elif constant_bytes > PROTOBUF_LIMIT:
            raise ModelSaveError(  # refused before minutes of export and gigabytes of copies
                f"cannot save to {target} without external data: its constants alone are "
                f"{constant_bytes / 2**30:.1f} GiB, over protobuf's 2 GiB limit for one "
                "file; save with external data (--external-data)", path=str(target))
    data_name = external_data_name or f"{destination.name}.data"
    if external_data and (os.sep in data_name or data_name in ("", ".", "..")):
        raise ModelSaveError(
            f"external data name {data_name!r} must be a plain file name (it is written beside "
            "the model)", path=str(target))
    if external_data and data_name == destination.name:
        raise ModelSaveError(
            f"external data name {data_name!r} is the model file's own name; choose another",
            path=str(target))
    check_save_target(graph, target, external_data=external_data,
                      external_data_name=data_name, overwrite_input=overwrite_input)

    if in_place and external_data:
        raise ModelSaveError(
            f"cannot save to {target}: it is not a regular file, and external data is written "
            "into a file beside the model; save to a file", path=str(target))
    data_target = folder / data_name  # beside the file written (a link's: beside its file)
    temporaries: list[Path] = []
    wrote_data = False
    # Large tensors left inline are written from the graph's bytes, not copied into the
    # model proto and its serialization (see ge.graph.payloads).
    payloads = PayloadStore()
    try:
        if shared_data is not None:
            with shared_data.writing(), no_gc_pauses():
                model = graph_to_model(graph, tensor_sink=_external_sink(shared_data),
                                       value_info=value_info, lift_constants=lift_constants,
                                       payloads=payloads)
                write_external_data(model, shared_data, payloads)
        elif external_data:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{data_name}.", suffix=".tmp")
            tmp_data = Path(tmp)
            temporaries.append(tmp_data)
            with os.fdopen(fd, "wb") as out, no_gc_pauses():
                writer = ExternalDataWriter(out, data_name, size_threshold)
                # graph errors surface here, before anything is renamed into place
                model = graph_to_model(graph, tensor_sink=_external_sink(writer),
                                       value_info=value_info, lift_constants=lift_constants,
                                       payloads=payloads)
                # tensors of attributes and subgraphs
                write_external_data(model, writer, payloads)
                wrote_data = out.tell() > 0  # nothing over the threshold: no empty file
        else:
            with no_gc_pauses():  # graph errors surface before anything is written
                model = graph_to_model(graph, value_info=value_info,
                                       lift_constants=lift_constants, payloads=payloads)
        if strip_metadata:
            strip_annotations(model)
        spliced = _serialized(model, payloads, target)
        if full_check:
            _check_with_onnx(model, graph, target, payloads)  # the model goes: serialized
        del model
        if in_place:  # a device or pipe: written through, nothing to rename
            if before_commit is not None:
                before_commit(None)
            with open(destination, "wb") as out:
                payloads.write(out, spliced)
            return None
        model_folder = destination.parent if str(destination.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(dir=model_folder, prefix=f".{destination.name}.",
                                   suffix=".tmp")
        tmp_model = Path(tmp)
        temporaries.append(tmp_model)
        with os.fdopen(fd, "wb") as out:
            payloads.write(out, spliced)
        os.chmod(tmp_model, new_file_mode(destination))  # mkstemp: 0600 whatever the umask
        if wrote_data:
            os.chmod(tmp_data, new_file_mode(data_target))
        if before_commit is not None:  # written and checked: only the renames are left
            before_commit(data_target if wrote_data else None)
        rename_into_place(tmp_model, destination, tmp_data if wrote_data else None,
                           data_target)
        # Renamed files are the user's now; an unused data file is dropped below.
        temporaries[:] = [] if wrote_data or not external_data else [tmp_data]
        if shared_data is not None:
            return shared_data.path
        return data_target if wrote_data else None
    except OSError as exc:
        raise ModelSaveError(
            f"cannot save to {target}: {exc.strerror or exc}", path=str(target)
        ) from None
    finally:
        for tmp_path in temporaries:
            try:
                tmp_path.unlink()
            except OSError:
                pass
