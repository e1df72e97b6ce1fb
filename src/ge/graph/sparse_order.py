"""The order of a sparse tensor's indices.

onnx's checker wants them in order, each one's position in the flattened dense tensor after
the one before ("Sparse tensor (s_indices) index value at position [1] not in sorted
order."); onnxruntime reads them in any order. So a model with unsorted ones ran, and ge
compiled it but then refused to save it (GE1003 from the checker its save runs). Loading
now writes them sorted, their values permuted alike (`sorted_sparse`: the same dense
tensor, a normalised representation), for sparse initializers and sparse `Constant`s of
the model's graphs (`ge.graph.onnx_import`) and of its local functions and their bodies
(`ge.graph.payload_checks.function_problems`: the one change loading makes to a
function). A repeated index cannot be sorted away (which of its values the dense tensor
holds is the reader's choice): the checker's refusal then says which tensor, what repeats
and why (`index_order_note`), and `ge inspect` says so beforehand (`index_order_problem`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np
import onnx

from ge.errors import GeError
from ge.graph.places import graph_place, node_label, proto_bodies
from ge.graph.tensor import Tensor
from ge.graph.types import data_type_from_onnx

__all__ = ["SPARSE_ATTRIBUTE_TAGS", "LabelledSparse", "index_order_note", "index_order_problem",
           "labelled_sparse_tensors", "sort_sparse_constant", "sorted_sparse"]


def _positions(sparse: onnx.SparseTensorProto) -> tuple[np.ndarray, np.ndarray] | None:
    """(the indices of `sparse` as stored, their positions in the flattened dense tensor),
    or None when they cannot be read here: in an external data file, undecodable, not of
    its rank, out of range, not one per value (the checker's or loading's to say)."""
    if onnx.TensorProto.EXTERNAL in (sparse.indices.data_location,
                                     sparse.values.data_location):
        return None
    try:
        indices = Tensor.from_proto(sparse.indices).numpy()
    except (GeError, ValueError, TypeError):
        return None
    if indices.dtype.kind not in "iu" or len(sparse.values.dims) != 1 or (
            indices.shape[:1] != tuple(sparse.values.dims)):
        return None
    dims = [int(d) for d in sparse.dims]
    size = int(np.prod(dims, dtype=np.int64))
    if indices.ndim == 1:
        flat = indices.astype(np.int64)
        if flat.size and (flat.min() < 0 or flat.max() >= size):
            return None
    elif indices.ndim == 2 and indices.shape[1] == len(dims):
        if indices.size and (indices.min() < 0 or np.any(indices.max(axis=0) >= dims)):
            return None
        flat = np.ravel_multi_index(tuple(indices.T.astype(np.int64)), dims) if len(
            indices) else np.zeros(0, np.int64)
    else:
        return None
    return indices, flat


def _index_text(index: np.ndarray) -> str:
    """An index as written: `4`, or coordinates `[1, 2]`."""
    return str(index.tolist())


def _out_of_order(sparse: onnx.SparseTensorProto) -> tuple[np.ndarray, np.ndarray] | None:
    """The indices of `sparse` as read and their positions in the flattened tensor, when
    those are not strictly increasing (onnx's order); None when they are, or when they
    cannot be read (`_positions`)."""
    found = _positions(sparse)
    if found is None:
        return None
    flat = found[1]
    if flat.size < 2 or bool(np.all(flat[1:] > flat[:-1])):
        return None
    return found


def index_order_problem(sparse: onnx.SparseTensorProto) -> str | None:
    """What keeps the indices of `sparse` from the order onnx's checker requires (each
    position in the flattened tensor after the one before), as the end of a sentence naming
    the tensor: "has its indices unsorted: 4 at position 0 comes before 0 at position 1",
    "has index 4 twice (at positions 0 and 2)"; None when they are in order or cannot be
    read (`_positions`)."""
    found = _out_of_order(sparse)
    if found is None:
        return None
    indices, flat = found
    ordered = np.sort(flat)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.size:
        where = [int(i) for i in np.flatnonzero(flat == repeated[0])]
        times = "twice" if len(where) == 2 else f"{len(where)} times"
        listed = ", ".join(map(str, where[:-1][:5])) + (", ..." if len(where) > 6 else "")
        return (f"has index {_index_text(indices[where[0]])} {times} (at positions {listed} "
                f"and {where[-1]})")
    i = int(np.flatnonzero(flat[1:] <= flat[:-1])[0]) + 1
    return (f"has its indices unsorted: {_index_text(indices[i - 1])} at position {i - 1} "
            f"comes before {_index_text(indices[i])} at position {i}")


def _with_data(part: onnx.TensorProto, new: onnx.TensorProto) -> None:
    """Give `part` (a sparse tensor's values or indices) the data of `new`, keeping its
    doc string and metadata."""
    doc, metadata = part.doc_string, list(part.metadata_props)
    part.CopyFrom(new)
    part.doc_string = doc
    part.metadata_props.extend(metadata)


def sorted_sparse(sparse: onnx.SparseTensorProto) -> onnx.SparseTensorProto | None:
    """`sparse` with its indices sorted and its values permuted alike: the same dense
    tensor, its indices in the order onnx's checker requires (onnxruntime reads either).
    None when they are in order already, when an index repeats (which of its values the
    dense tensor holds is the reader's choice: onnxruntime 1.32 takes the last) or when
    they cannot be read (`_positions`)."""
    found = _out_of_order(sparse)
    if found is None:
        return None
    indices, flat = found
    order = np.argsort(flat, kind="stable")
    if bool(np.any(flat[order][1:] == flat[order][:-1])):
        return None
    try:
        values = Tensor.from_proto(sparse.values).numpy().reshape(-1)
        data_type = data_type_from_onnx(sparse.values.data_type)
    except (GeError, ValueError, TypeError):
        return None
    out = onnx.SparseTensorProto()
    out.CopyFrom(sparse)
    _with_data(out.values, Tensor(values[order], data_type=data_type).to_proto(
        sparse.values.name))
    _with_data(out.indices, Tensor(np.ascontiguousarray(indices[order])).to_proto(
        sparse.indices.name))
    return out


def _is_sparse_constant(node: onnx.NodeProto, attr: onnx.AttributeProto) -> bool:
    """Whether `attr` is the `sparse_value` of the standard `Constant` operator `node`."""
    return (node.op_type == "Constant" and node.domain in ("", "ai.onnx")
            and attr.name == "sparse_value" and attr.type == onnx.AttributeProto.SPARSE_TENSOR)


def sort_sparse_constant(node: onnx.NodeProto) -> None:
    """Sort the indices of a sparse `Constant` operator's `sparse_value` in place
    (`sorted_sparse`); any other node is left alone."""
    for attr in node.attribute:
        if _is_sparse_constant(node, attr):
            ordered = sorted_sparse(attr.sparse_tensor)
            if ordered is not None:
                attr.sparse_tensor.CopyFrom(ordered)


class LabelledSparse(NamedTuple):
    """A sparse tensor of a model, what names it in a message, whether loading sorts its
    indices (a sparse initializer's, a sparse `Constant`'s, of a graph or a function) and
    whether it is in a body of the model's graphs (whose sparse tensors onnxruntime checks
    as onnx's checker does: it refuses a model with unsorted ones there, and runs one with
    them elsewhere, in a body of a function too)."""

    label: str
    sparse: onnx.SparseTensorProto
    sorted_on_load: bool
    in_body: bool = False


#: How an `AttributeProto` field holding sparse tensors (`sparse_tensor`, 22;
#: `sparse_tensors`, 23) begins in the serialized model: a model whose bytes hold neither
#: has no sparse attribute (the bytes may hold them by chance, in a tensor's data: then the
#: nodes are looked at).
SPARSE_ATTRIBUTE_TAGS = (b"\xb2\x01", b"\xba\x01")


def labelled_sparse_tensors(model: onnx.ModelProto, *, attributes: bool = True
                            ) -> Iterator[LabelledSparse]:
    """Every sparse tensor of `model`: the sparse initializers and, unless not to look at
    `attributes` (a model with none: `SPARSE_ATTRIBUTE_TAGS`), sparse attributes of its
    graphs and of its functions' nodes, and the sparse initializers and attributes of the
    bodies those hold (a body named by the node and attribute holding it, outwards)."""
    root = model.graph
    look = attributes

    def of_nodes(nodes: Iterable[onnx.NodeProto], where: str, in_body: bool = False
                 ) -> Iterator[LabelledSparse]:
        if not look:
            return
        for index, node in enumerate(nodes):
            for attr in node.attribute:
                kind = attr.type
                if kind == onnx.AttributeProto.SPARSE_TENSOR:
                    items: Iterable[onnx.SparseTensorProto] = [attr.sparse_tensor]
                elif kind == onnx.AttributeProto.SPARSE_TENSORS:
                    items = attr.sparse_tensors
                else:
                    continue
                for item in items:
                    label = node_label(node.op_type, node.name, domain=node.domain, index=index,
                                       outputs=node.output)
                    yield LabelledSparse(f"attribute {attr.name!r} of {label}{where}", item,
                                         _is_sparse_constant(node, attr), in_body)

    def of_graph(graph: onnx.GraphProto, where: str, in_body: bool
                 ) -> Iterator[LabelledSparse]:
        for sparse in graph.sparse_initializer:
            yield LabelledSparse(f"sparse initializer {sparse.values.name!r}{where}", sparse,
                                 True, in_body)
        yield from of_nodes(graph.node, where, in_body)

    for each, owner in [(root, None), *proto_bodies(root.node)]:
        body = owner is not None
        yield from of_graph(each, f" in {graph_place(repr(each.name), owner)}" if body else "",
                            body)
    for function in model.functions:
        where = f" in function {function.name!r}"
        yield from of_nodes(function.node, where)
        if look:
            for each, owner in proto_bodies(function.node):
                yield from of_graph(each, f" in {graph_place(repr(each.name), owner)}{where}",
                                    False)


#: onnx's checker refusing a sparse tensor's order: "Sparse tensor (s_indices) index value
#: at position [1] not in sorted order." ("lexicographic sorted order" for coordinates).
_CHECKER_ORDER = re.compile(r"Sparse tensor \((.*?)\) index value at position \[\d+\] not in "
                            r"(?:lexicographic )?sorted order")


def index_order_note(model: onnx.ModelProto, checker_message: str) -> str:
    """What to add to `checker_message` (onnx's checker refusing `model`) when it refuses a
    sparse tensor's index order: which tensor, what is out of order, that onnxruntime runs
    it and why ge did not sort it ("" for another message)."""
    refused = _CHECKER_ORDER.search(checker_message)
    if refused is None:
        return ""
    found = [(each, problem) for each in labelled_sparse_tensors(model)
             for problem in [index_order_problem(each.sparse)] if problem is not None]
    found.sort(key=lambda item: item[0].sparse.indices.name != refused.group(1))  # (its own)
    if not found:
        return ""
    each, problem = found[0]
    label = each.label
    why = ("which of a repeated index's values the dense tensor holds is the reader's "
           "choice (onnxruntime takes the last), so ge cannot sort them"
           if problem.startswith("has index ") else
           "ge sorts those of sparse initializers and sparse Constants (of the graphs and "
           "functions) when it loads a model, not those of another operator's attribute")
    runtime = ("onnxruntime refuses it too, in a body" if each.in_body else
               "onnxruntime runs such a model, but")
    return (f": {label} {problem}; {runtime} onnx's checker refuses indices out of "
            "increasing order, and so does ge's save, which writes only models the checker "
            f"passes; {why}")
