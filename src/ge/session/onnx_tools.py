"""Two of onnx's model-to-model tools, given the model without its weights: the version
converter (`upgraded_opset`, `--opset`) and the function inliner (`inlined_functions`,
`--inline-functions`).

Both take a serialized `ModelProto`: given the whole model, every weight went through
protobuf (which refuses 2 GiB) and was copied four or five times. They get a stand-in
instead: each tensor of more than `STAND_IN_BYTES` (initializers and tensor attributes, in
the root graph and in bodies) is replaced by a reference to external data naming it, with
its name, element type and dims and no data, which the tools carry through unchanged, and so
is every sparse tensor (a sparse initializer, a `Constant`'s `sparse_value`), as the dense
tensor it stands for: the converter knows none ("Input s is undefined!"). What
reads tensor values there reads small ones, which stay inline: the shape inference the
converter runs first (a Reshape's shape, a Slice's starts) and the adapters that turn
inputs back into attributes (axes, splits; converting down, which ge does not); a small
sparse tensor goes without them (onnx's inference would not read a sparse one anyway, and
ge's own reads it after the conversion: `ge.graph.sparse.dense_initializers`). The
weights are then put back by that reference: an initializer's tensor is shared with the
graph given (no copy), a tensor attribute's is copied into the converted node, a sparse
tensor is written back sparse where its stand-in is (`ge.graph.sparse`). A reference
a tool dropped, copied or changed cannot be put back unambiguously: the whole model goes
through the tool instead when protobuf can hold it and it has no sparse tensor (which the
converter refuses), else `CompileInputError` (GE1203).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import onnx
from onnx import version_converter

from ge._text import first_and_more
from ge.compiler.arguments import described
from ge.errors import (
    CompileInputError,
    CompilerOptionError,
    CompilerOptionTypeError,
    CompileWarning,
)
from ge.graph import CONST, Graph, Tensor, load
from ge.graph.allocation import no_gc_pauses
from ge.graph.annotations import merge_annotations
from ge.graph.domains import normalize_domain, proto_nodes
from ge.graph.external_data import graph_tensors
from ge.graph.model_io import INLINE_MODEL_BYTES
from ge.graph.onnx_export import graph_to_model
from ge.graph.onnx_import import model_to_graph
from ge.graph.payloads import payload_nbytes
from ge.graph.sparse import put_sparse_back, sparse_stand_ins
from ge.graph.types import data_type_to_onnx
from ge.ops.functions import calls_left, inline_local_functions
from ge.passes.source import warn_user
from ge.session.converter_gaps import keep_meanings_after, keep_meanings_before, old_resizes

__all__ = ["STAND_IN_BYTES", "WHOLE_MODEL_LIMIT", "check_opset", "converted_graph",
           "inlined_functions", "upgraded_opset"]

#: Tensors of more payload bytes than this go to the converter as stand-ins; smaller ones
#: (shapes, axes, scalars: what shape inference and adapters read) stay inline.
STAND_IN_BYTES = 4096
#: The largest model (serialized bytes, roughly) converted whole when its stand-ins cannot
#: be put back: protobuf's 2 GiB limit, less a margin for what the estimate leaves out.
WHOLE_MODEL_LIMIT = INLINE_MODEL_BYTES

_MARKER = "ge-opset-stand-in/"  # the external data "location" of a stand-in, then its index


def check_opset(opset: object) -> None:
    """Refuse an `opset` that is not an int (`CompilerOptionTypeError`, GE1202, naming its
    type: "20" and True are not opsets) or no opset of the installed onnx
    (`CompilerOptionError`); the model's own opset is `upgraded_opset`'s to compare."""
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int):
        hint = f": write {opset}" if isinstance(opset, str) and opset.isdigit() else ""
        raise CompilerOptionTypeError(f"opset must be an int, got {described(opset)}{hint}")
    if not 1 <= opset <= newest:
        raise CompilerOptionError(f"opset must be an ONNX opset from 1 to {newest} (onnx "
                                  f"{onnx.__version__}), got {opset!r}")


def upgraded_opset(graph: Graph, opset: int, *, inlined: bool = False) -> Graph:
    """A copy of `graph` converted to standard-domain `opset` by onnx's version converter
    (fused operators need recent opsets: Gelu 20, RMSNormalization 23); `graph` itself when
    it is at `opset` already. Large tensors bypass the converter (see the module) and are
    shared with `graph`. The model's local functions, which the converter drops, are kept
    as they are, at the opsets they import (onnxruntime runs such a model).
    `inlined`: the functions left were left by the inliner (the error's advice).
    `CompilerOptionError` (GE1202) for an opset below the model's or beyond onnx's;
    `CompileInputError` (GE1203) when the converter cannot convert it."""
    check_opset(opset)
    current = graph.get_opset_version("") or 0
    if opset == current:
        return graph
    if not current:  # (an XGBoost model of onnxmltools: ai.onnx.ml alone)
        others = ", ".join(f"{domain} {version}" for domain, version
                           in sorted(graph.opset_imports.items()) if domain)
        warn_user(CompileWarning(
            f"opset {opset} left graph {graph.name!r} as it is: the model imports no ONNX "
            f"opset (only {others or 'none'}), so it has no ONNX operator to convert"))
        return graph
    if opset < current:
        raise CompilerOptionError(f"opset {opset} is below the model's ({current}); ge "
                                  "only converts a model up")

    _check_newer_operators(graph, opset)
    _check_functions_convertible(graph, opset, inlined)

    def convert(model: onnx.ModelProto) -> onnx.ModelProto:
        resized = old_resizes(model, current, opset)  # (`ge.session.converter_gaps`)
        reshaped = keep_meanings_before(model, current, opset)
        converted = version_converter.convert_version(model, opset)
        keep_meanings_after(converted, resized, reshaped, opset)
        _keep_output_types(model.graph, converted.graph)
        _keep_annotations(model.graph, converted.graph)
        if not converted.metadata_props:
            converted.metadata_props.extend(model.metadata_props)
        if not converted.functions:  # (onnx's converter converts the graphs and drops them)
            converted.functions.extend(model.functions)
        _raise_ir_version(converted)
        return converted

    return _through(graph, convert, "version converter",
                    f"take graph {graph.name!r} from opset {current} to {opset}")


def _check_newer_operators(graph: Graph, opset: int) -> None:
    """`CompileInputError` (GE1203) for a model using an operator of a later opset than it
    imports (a LayerNormalization, opset 17's, in a model importing 16): onnx's converter
    adapts only the operators of the model's opset and stops with a C++ assertion ("No
    Adapter From Version $16 for LayerNormalization": trial JJ)."""
    from ge.graph.validation import newer_operators, redeclaring_advice

    newer = [(node, version, since) for node, version, since in newer_operators(graph)
             if not normalize_domain(node.domain)]
    if not newer:
        return
    _, version, since = max(newer, key=lambda found: found[2])
    by_type: dict[str, tuple[int, list[str]]] = {}
    for node, _, first in newer:
        by_type.setdefault(node.type, (first, []))[1].append(node.name)
    listed = " and ".join(
        f"{op}, an operator of opset {first} and later ({len(names)} node(s), "
        f"{names[0]!r}{' ...' if len(names) > 1 else ''})"
        for op, (first, names) in by_type.items())
    raise CompileInputError(
        f"opset {opset}: graph {graph.name!r} imports opset {version} but uses {listed}, "
        "which onnx's version converter cannot convert: it adapts only the operators of the "
        f"model's opset; {redeclaring_advice(graph, '', version, since)}"
        + (f", then convert it to {opset}" if opset > since else ""),
        nodes=[node.name for node, _, _ in newer])


def _raise_ir_version(model: onnx.ModelProto) -> None:
    """Raise the converted model's `ir_version` to the least its opsets need: onnx's converter
    keeps the model's (8), while opset 23 needs IR 11 (`onnx.helper.find_min_ir_version_for`,
    what onnx's own `make_model` writes); never lowered."""
    needed = onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    if model.ir_version >= needed:
        return
    if model.ir_version < 4 <= needed:
        # Below IR 4 every initializer is also a graph input, and ge reads it as a constant
        # (as onnxruntime does); from IR 4 such an input would be one the caller may feed:
        # it stays a constant, no longer listed as an input.
        weights = {tensor.name for tensor in model.graph.initializer}
        kept = [value for value in model.graph.input if value.name not in weights]
        del model.graph.input[:]
        model.graph.input.extend(kept)
    model.ir_version = needed


def _check_functions_convertible(graph: Graph, opset: int, inlined: bool) -> None:
    """`CompileInputError` (GE1203) when a local function of the model would have to be
    converted to `opset` too: onnx's converter converts graphs and drops the functions,
    which ge keeps at the opset they import, and onnx's checker refuses a function one of
    whose operators differs between that opset and the model's (trial M: it was found
    only when the compiled model was saved)."""
    changed = []
    for function in graph.root_graph().model.functions:
        imported = {normalize_domain(o.domain): o.version for o in function.opset_import}
        own = imported.get("")
        if own is None or own == opset:
            continue
        for node in proto_nodes(function.node):
            if normalize_domain(node.domain) or not onnx.defs.has(node.op_type):
                continue
            try:
                then = onnx.defs.get_schema(node.op_type, own).since_version
                now = onnx.defs.get_schema(node.op_type, opset).since_version
            except onnx.defs.SchemaError:  # not an operator of its opset: not ours to judge
                continue
            if then != now:
                changed.append(f"{function.domain}.{function.name} ({node.op_type} of opset "
                               f"{own} is opset {now}'s at {opset})")
                break
    if changed:
        raise CompileInputError(
            f"opset {opset}: onnx's converter converts the model's graphs, not its local "
            f"functions, which keep the opset they import, and the operators of "
            f"{first_and_more(changed)} differ at opset {opset}, so onnx's checker would "
            "refuse the model; " + (
                "onnx's inliner left their calls (a warning said why): leave --opset out, "
                "or convert the model with the functions' opsets made the model's first"
                if inlined else "inline the functions first (--inline-functions, "
                "inline_functions=True), which converts their bodies with the graph"))


def _without_shapes(value_type: onnx.TypeProto) -> onnx.TypeProto:
    """A copy of `value_type` with no shape anywhere in it: its element types alone."""
    bare = onnx.TypeProto()
    bare.CopyFrom(value_type)
    inner: onnx.TypeProto | None = bare
    while inner is not None:
        kind = inner.WhichOneof("value")
        if kind in ("tensor_type", "sparse_tensor_type"):
            getattr(inner, kind).ClearField("shape")
            inner = None
        elif kind in ("sequence_type", "optional_type"):
            inner = getattr(inner, kind).elem_type
        elif kind == "map_type":
            inner = inner.map_type.value_type
        else:
            inner = None
    return bare


def _keep_output_types(source: onnx.GraphProto, converted: onnx.GraphProto) -> None:
    """Give each output of the converted root graph the type the source declared, when it
    has the same name and element types. The converter runs shape inference, which
    rewrites the declared output shapes: an unnamed dim became `unk__0`, a symbolic one
    the size inference proved from the example the model was exported with (`[batch, seq,
    48]` became `[batch, 12, 48]`). ge keeps the graph outputs' declared types (what
    callers bind to), `--opset` included; a type the conversion changed is left as it is."""
    declared = {output.name: output.type for output in source.output}
    for output in converted.output:
        given = declared.get(output.name)
        if given is not None and given != output.type and (
                _without_shapes(given) == _without_shapes(output.type)):
            output.type.CopyFrom(given)


def _keep_annotations(source: onnx.GraphProto, converted: onnx.GraphProto) -> None:
    """Give back what the converter drops: the `metadata_props` and doc strings of nodes
    (a dynamo export's `namespace`, `pkg.torch.onnx.*` on every node; an unnamed node
    found by its outputs), of the graph's values (inputs, outputs, `value_info`) and of the
    initializers that went through it, matched by name, bodies by their owner's name and
    attribute; the graph's own. Entries the converted ones set stay theirs."""
    nodes = {_node_key(n): n for n in source.node}
    for node in converted.node:
        before = nodes.get(_node_key(node))
        if before is None:
            continue
        merge_annotations(before, node)
        bodies = {a.name: a for a in before.attribute}
        for attr in node.attribute:
            old = bodies.get(attr.name)
            if old is None:
                continue
            if attr.type == onnx.AttributeProto.GRAPH:
                _keep_annotations(old.g, attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for then, now in zip(old.graphs, attr.graphs, strict=False):
                    _keep_annotations(then, now)
    values = {v.name: v for v in [*source.input, *source.output, *source.value_info]}
    listed = [*converted.input, *converted.output, *converted.value_info]
    for value in listed:
        before_value = values.get(value.name)
        if before_value is not None:
            merge_annotations(before_value, value)
    # a weight's declaration (a dynamo export's parameter spec), which inference does not
    # list again: its type is the initializer's, which no conversion changes
    weights = {t.name for t in converted.initializer}
    seen = {v.name for v in listed}
    converted.value_info.extend(v for v in source.value_info if v.metadata_props
                                and v.name in weights and v.name not in seen)
    tensors = {t.name: t for t in source.initializer}
    for tensor in converted.initializer:  # (those small enough to go through the converter)
        before_tensor = tensors.get(tensor.name)
        if before_tensor is not None:
            merge_annotations(before_tensor, tensor)
    merge_annotations(source, converted)


def _node_key(node: onnx.NodeProto) -> object:
    """How a node is found again after the conversion: its name, else (unnamed) its
    outputs, which the converter keeps."""
    return node.name or tuple(node.output)


def inlined_functions(graph: Graph) -> Graph:
    """A copy of `graph` with every call of a model-local function replaced by the
    function's body (onnx's inliner, as onnxruntime does when it loads a model), so the
    passes see what the functions compute; `graph` itself when it defines none. Large
    tensors bypass the inliner (see the module). `CompileInputError` (GE1203) when the
    inliner cannot inline them."""
    if not graph.root_graph().model.functions:
        return graph

    def inline(model: onnx.ModelProto) -> onnx.ModelProto:
        inlined = inline_local_functions(model)  # (a weightless copy: changed in place)
        left = calls_left(inlined)
        if left:  # (trial N: left without a word, and the hint then advised the flag given)
            warn_user(CompileWarning(
                f"inline_functions (--inline-functions) left calls of local functions in "
                f"graph {graph.name!r}, which are compiled as calls: onnx's inliner inlines no "
                f"function whose opset imports differ from the model's ({left})"))
        return inlined

    return _through(graph, inline, "function inliner",
                    f"inline the local functions of graph {graph.name!r}")


def converted_graph(graph: Graph, *, opset: int | None = None,
                    inline_functions: bool = False) -> Graph:
    """`graph` as `ge.compile` hands it to the passes when asked to convert it first (`ge
    compile --inline-functions`, `--opset N`): its local functions inlined, then taken to
    `opset`; `graph` itself when neither is asked. One code path for every command that
    does it (`ge passes explain` too), so that they see the same model."""
    converted = inlined_functions(graph) if inline_functions else graph
    if opset is None:
        return converted
    try:
        upgraded = upgraded_opset(converted, opset, inlined=inline_functions)
    except BaseException:
        if converted is not graph:
            converted.close()  # (the inlined copy is this function's own, failed or not)
        raise
    if converted is not graph and upgraded is not converted:
        converted.close()  # (the inlined copy, read by the conversion only: `Graph.close`)
    return upgraded


def _through(graph: Graph, tool: Callable[[onnx.ModelProto], onnx.ModelProto], name: str,
             what: str) -> Graph:
    """`graph` after onnx's `tool` (its `name`, and `what` it does, for the messages), the
    tool given the model without its weights, which are put back after it. The result
    remembers the files `graph` was loaded from (`model.source_files`), as `graph` does:
    saving it over them needs `overwrite_input` too, and keeps the data file it had."""
    result = _tool_output(graph, tool, name, what)
    result.root_graph().model.source_files = dict(graph.root_graph().model.source_files)
    return result


def _tool_output(graph: Graph, tool: Callable[[onnx.ModelProto], onnx.ModelProto], name: str,
                 what: str) -> Graph:
    stand_ins = _StandIns()
    model = stand_ins.weightless(graph)
    size = model.ByteSize() + stand_ins.stood_in_bytes  # the whole model's, roughly
    converted = _run(tool, model, name, what)
    del model  # the tool's copy is the one used from now on
    try:
        return stand_ins.put_back(converted)
    except _NotPutBack as problem:
        if stand_ins.sparse:  # (the whole model would fail: "Input s is undefined!")
            raise CompileInputError(
                f"onnx's {name} could {what} without its weights, but {problem}, so ge "
                f"cannot put them back; the whole model cannot go through it with them: "
                f"its sparse tensors ({_sparse_names(stand_ins)}) are what onnx's {name} "
                "does not know") from None
        if size > WHOLE_MODEL_LIMIT:
            raise CompileInputError(
                f"onnx's {name} could {what} without its weights, but {problem}, so ge "
                f"cannot put them back; the whole model ({size / 2**30:.1f} GiB) is over "
                "protobuf's 2 GiB limit and cannot go through it with them") from None
        warn_user(CompileWarning(
            f"onnx's {name} could {what} without its weights, but {problem}; giving it the "
            f"whole model ({size / 2**20:.0f} MiB) with its weights instead, which holds "
            "them twice while it runs"))
    return load(_run(tool, graph.to_onnx(), name, what))


def _sparse_names(stand_ins: _StandIns) -> str:
    return first_and_more([repr(sparse.values.name)
                           for sparse, _ in stand_ins.sparse.values()], 2)


def _run(tool: Callable[[onnx.ModelProto], onnx.ModelProto], model: onnx.ModelProto,
         name: str, what: str) -> onnx.ModelProto:
    try:
        # a wrapper per node and value read, for the annotations given back: without the
        # pause, the collections these allocations set off traverse the whole graph (trial
        # AA: the conversion of 200k nodes took 5.3x that of 50k)
        with no_gc_pauses():
            return tool(model)
    except Exception as exc:  # the tools' errors are RuntimeErrors with their message
        raise CompileInputError(f"onnx's {name} cannot {what}: {str(exc).strip()}") from exc


def _stand_in(name: str, data_type: int, dims: list[int], index: int) -> onnx.TensorProto:
    """A tensor without data that refers to external data `_MARKER<index>`."""
    proto = onnx.TensorProto()
    proto.name = name
    proto.data_type = data_type
    proto.dims.extend(dims)
    proto.data_location = onnx.TensorProto.EXTERNAL
    entry = proto.external_data.add()
    entry.key, entry.value = "location", f"{_MARKER}{index}"
    return proto


def _index(tensor: onnx.TensorProto) -> int | None:
    """The index of a stand-in, None for any other tensor."""
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return None
    for entry in tensor.external_data:
        if entry.key == "location" and entry.value.startswith(_MARKER):
            number = entry.value[len(_MARKER):]
            return int(number) if number.isdigit() else None
    return None


def _dense_tensors(gp: onnx.GraphProto) -> Iterator[tuple[onnx.TensorProto, bool]]:
    """Every dense tensor of a graph and its bodies, and whether it is an initializer (sparse
    tensors are never stood in)."""
    for tensor, kind in graph_tensors(gp):
        if kind != "sparse":
            yield tensor, kind == "initializer"


class _NotPutBack(Exception):
    """The converter did not give every stand-in back once and unchanged (the message says
    what it did)."""


@dataclass
class _StandIns:
    """The large tensors a model went to the converter without, to put back after it."""

    # By stand-in index: (name, element type, dims) the converter must give back.
    expected: list[tuple[str, int, tuple[int, ...]]] = field(default_factory=list)
    # By stand-in index: a constant's tensor, shared into the converted graph...
    constants: dict[int, Tensor] = field(default_factory=dict)
    # ... or a copy of another tensor (an attribute's), copied into the converted model.
    copies: dict[int, onnx.TensorProto] = field(default_factory=dict)
    # ... or a sparse tensor, and whether it was an initializer (else a `Constant`'s value).
    sparse: dict[int, tuple[onnx.SparseTensorProto, bool]] = field(default_factory=dict)
    # Constant metadata the converter drops, by stand-in index.
    metadata: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    stood_in_bytes: int = 0

    def weightless(self, graph: Graph) -> onnx.ModelProto:
        """`graph` exported as `to_onnx()` does, with stand-ins for its large tensors: the
        constants' tensors are not copied; a large tensor attribute (a `Constant`
        operator's) is copied aside, to be put back."""

        def sink(tensor: Tensor, name: str) -> onnx.TensorProto | None:
            data_type = data_type_to_onnx(tensor.data_type)
            dims = tensor.shape
            nbytes = payload_nbytes(data_type, dims)
            if nbytes is None or nbytes <= STAND_IN_BYTES:
                return None
            return self._add(tensor, name, data_type, dims, nbytes)

        with no_gc_pauses():
            model = graph_to_model(graph, tensor_sink=sink)
            for tensor, _ in _dense_tensors(model.graph):
                index = _index(tensor)
                if index is not None:  # a constant's: keep the metadata written beside it
                    if len(tensor.metadata_props):
                        self.metadata[index] = [(p.key, p.value) for p in tensor.metadata_props]
                    continue
                if tensor.data_location == onnx.TensorProto.EXTERNAL:
                    continue  # data not in memory: it goes through as it is
                nbytes = payload_nbytes(tensor.data_type, list(tensor.dims))
                if nbytes is None or nbytes <= STAND_IN_BYTES:
                    continue
                original = onnx.TensorProto()
                original.CopyFrom(tensor)
                tensor.CopyFrom(self._add(original, tensor.name, tensor.data_type,
                                          list(tensor.dims), nbytes))
            sparse_stand_ins(model.graph, self._add_sparse)
        return model

    def _add_sparse(self, sparse: onnx.SparseTensorProto, initializer: bool
                    ) -> onnx.TensorProto:
        """The stand-in of a sparse tensor: the dense tensor of its values' element type
        and its dims, without data, whatever its size."""
        index = len(self.expected)
        self.sparse[index] = (sparse, initializer)
        name, data_type, dims = sparse.values.name, sparse.values.data_type, list(sparse.dims)
        self.expected.append((name, data_type, tuple(dims)))
        self.stood_in_bytes += sparse.ByteSize()
        return _stand_in(name, data_type, dims, index)

    def _add(self, original: Tensor | onnx.TensorProto, name: str, data_type: int,
             dims: list[int], nbytes: int) -> onnx.TensorProto:
        index = len(self.expected)
        if isinstance(original, Tensor):
            self.constants[index] = original
        else:
            self.copies[index] = original
        self.expected.append((name, data_type, tuple(dims)))
        self.stood_in_bytes += nbytes
        return _stand_in(name, data_type, dims, index)

    def put_back(self, converted: onnx.ModelProto) -> Graph:
        """The converted graph with the original tensors in place of the stand-ins;
        `_NotPutBack` when a stand-in was dropped, copied or changed."""
        found: dict[int, onnx.TensorProto] = {}
        for tensor, initializer in _dense_tensors(converted.graph):
            index = _index(tensor)
            if index is None:
                continue
            if index >= len(self.expected):
                raise _NotPutBack(f"it gave back an unknown stand-in ({tensor.name!r})")
            name = self.expected[index][0]
            if index in found:
                raise _NotPutBack(f"it copied the stand-in of tensor {name!r}")
            if (tensor.name, tensor.data_type, tuple(tensor.dims)) != self.expected[index]:
                raise _NotPutBack(f"it changed the stand-in of tensor {name!r}")
            if index in self.constants and not initializer:
                raise _NotPutBack(f"it moved initializer {name!r} into an attribute")
            if index in self.sparse and self.sparse[index][1] != initializer:
                raise _NotPutBack(f"it moved the stand-in of sparse tensor {name!r}")
            found[index] = tensor
        missing = [self.expected[i][0] for i in range(len(self.expected)) if i not in found]
        if missing:
            raise _NotPutBack("it dropped the stand-in of tensor "
                              + first_and_more([repr(name) for name in missing], 1))
        with no_gc_pauses():
            if self.sparse:
                put_sparse_back(converted.graph, self._sparse_of)
            for index, tensor in found.items():
                if index in self.copies:  # each copy goes as soon as it is in place
                    tensor.CopyFrom(self.copies.pop(index))
            # (its tensors are the loaded model's, checked then, or the converter's own)
            result = model_to_graph(converted, check_payloads=False)
        shared = self._share_constants(result) if self.constants else 0
        if shared != len(self.constants):
            raise _NotPutBack(f"{len(self.constants) - shared} stand-in initializer(s) did "
                              "not come back as constants")
        return result

    def _sparse_of(self, tensor: onnx.TensorProto, initializer: bool
                   ) -> onnx.SparseTensorProto | None:
        """The sparse tensor `tensor` (an initializer, or a `Constant`'s value) stands in
        for; None for any other tensor."""
        index = _index(tensor)
        found = self.sparse.get(index) if index is not None else None
        return found[0] if found is not None and found[1] == initializer else None

    def _share_constants(self, graph: Graph) -> int:
        """Give each stand-in constant of the converted graph its original tensor (shared,
        not copied) and metadata; how many there were."""
        shared = 0
        for body in [graph, *graph.get_all_subgraphs()]:
            for node in body.nodes_of_type(CONST):
                if not node.has_attr("value"):
                    continue
                index = _index_of_constant(node.get_attr("value"))
                if index is None or index not in self.constants:
                    continue
                node.set_attr("value", self.constants[index])
                for key, value in self.metadata.get(index, ()):
                    node.set_metadata(key, value)
                shared += 1
        return shared


def _index_of_constant(tensor: Tensor) -> int | None:
    source = tensor._source_proto()  # the stand-in read from the converted model
    return _index(source) if source is not None else None
