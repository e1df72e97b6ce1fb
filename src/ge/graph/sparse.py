"""Sparse constants (a graph's sparse initializers, a `Constant`'s `sparse_value`) as the
dense tensors they stand for, which is how onnxruntime reads them.

ONNX lists sparse initializers as the graph's initializers "stored in sparse format", and
onnxruntime makes each a dense tensor when it loads the model: the nodes reading one get
that tensor. onnx's own inference types one a `sparse_tensor`, which no standard operator
takes, so its strict inference and full checker refuse every model whose operators read
one (an `Add` of a graph input and a sparse initializer), models onnxruntime runs. ge keeps
them sparse in the IR (saved as they were read), gives their `Const` nodes the desc of the
dense tensor (`sparse_desc`), and hands onnx's inference and checker the dense tensors
(`dense_initializers`; `ge.graph.model_io.check_model_full`). onnx's version converter does
not know sparse tensors at all ("Input s is undefined!" for a sparse initializer, "Sparse
tensors not supported." for a sparse `Constant`): `sparse_stand_ins` and `put_sparse_back`
give it dense stand-ins and take the sparse tensors back (`ge.session.onnx_tools`).
The order of their indices is `ge.graph.sparse_order`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from ge.errors import GeError, GraphError
from ge.graph.domains import proto_graphs
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import Shape, TensorDesc, _trusted
from ge.graph.types import Format, data_type_from_onnx

__all__ = ["dense_initializers", "dense_of_sparse", "has_sparse_initializers",
           "put_sparse_back", "sparse_desc", "sparse_stand_ins"]


def sparse_desc(sparse: onnx.SparseTensorProto) -> TensorDesc:
    """The desc of the dense tensor `sparse` stands for: its values' element type, its dims
    (`GraphTypeError` for an element type ONNX does not have)."""
    shape = Shape.__new__(Shape)  # (dims are ints already)
    list.extend(shape, sparse.dims)
    return _trusted(shape, Format.FORMAT_ND, data_type_from_onnx(sparse.values.data_type))


def dense_of_sparse(sparse: onnx.SparseTensorProto) -> Tensor:
    """The dense tensor `sparse` stands for: zeros (empty strings) but at its indices, [NNZ]
    positions in the flattened tensor or [NNZ, rank] coordinates. `GraphError` when its
    values or indices cannot be decoded or do not fit its dims."""
    name = sparse.values.name
    values = Tensor.from_proto(sparse.values).numpy().reshape(-1)
    indices = Tensor.from_proto(sparse.indices).numpy().astype(np.int64)
    dims = [int(d) for d in sparse.dims]
    size = int(np.prod(dims, dtype=np.int64))
    dense = (np.full(size, b"", dtype=object) if values.dtype.kind == "O"
             else np.zeros(size, dtype=values.dtype))
    try:
        if indices.ndim == 2:  # coordinates, one row per value
            if indices.shape[1] != len(dims):
                raise ValueError(f"indices of {indices.shape[1]} coordinates for rank {len(dims)}")
            flat = np.ravel_multi_index(tuple(indices.T), dims)
        else:
            flat = indices.reshape(-1)
            if flat.size and (flat.min() < 0 or flat.max() >= size):
                raise ValueError(f"an index is out of the range 0..{size - 1}")
        dense[flat] = values
    except (ValueError, IndexError) as exc:
        raise GraphError(f"sparse tensor {name!r} cannot be made dense: {exc}") from exc
    return Tensor(dense.reshape(dims), data_type=data_type_from_onnx(sparse.values.data_type))


def dense_initializers(gp: onnx.GraphProto, limit: int) -> list[onnx.TensorProto]:
    """Put in place of each sparse initializer of `gp` and of its bodies the dense
    initializer it stands for, for onnx's inference: with its values when it has at most
    `limit` elements (so that data propagation reads a shape given sparse), else without
    data (its type and dims), as also when its values do not fit its dims (whatever reads
    the values says so, not inference). Returns those written without data, in the order
    met (the root graph's first), for the caller to make typed graph inputs of where onnx
    needs one (`initializers_as_inputs`)."""
    data_less = []
    for each in proto_graphs(gp):
        if not len(each.sparse_initializer):
            continue
        for sparse in each.sparse_initializer:
            name = sparse.values.name
            stand_in = onnx.TensorProto(name=name, data_type=sparse.values.data_type,
                                        dims=sparse.dims)
            dense = None
            if Tensor.from_proto(stand_in).size <= limit:
                try:
                    dense = dense_of_sparse(sparse).to_proto(name)
                except GeError:
                    pass
            if dense is None:
                data_less.append(stand_in)
            each.initializer.append(dense if dense is not None else stand_in)
        del each.sparse_initializer[:]
    return data_less


def has_sparse_initializers(gp: onnx.GraphProto) -> bool:
    """Whether `gp` or one of its bodies has a sparse initializer."""
    return any(len(each.sparse_initializer) for each in proto_graphs(gp))


def _sparse_constant(node: onnx.NodeProto) -> onnx.AttributeProto | None:
    """The `sparse_value` attribute of a standard `Constant` operator, None for any other
    node."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return None
    for attr in node.attribute:
        if attr.name == "sparse_value" and attr.type == onnx.AttributeProto.SPARSE_TENSOR:
            return attr
    return None


#: Gives the dense stand-in of a sparse tensor (a private copy of it, whether it was an
#: initializer: True, or a `Constant`'s value: False), or back the sparse tensor a dense
#: tensor stands in for (None for any other).
StandIn = Callable[[onnx.SparseTensorProto, bool], onnx.TensorProto]
Original = Callable[[onnx.TensorProto, bool], "onnx.SparseTensorProto | None"]


def sparse_stand_ins(gp: onnx.GraphProto, stand_in: StandIn) -> None:
    """Replace, in `gp` and its bodies, each sparse initializer by the dense initializer
    `stand_in` gives for it, and the `sparse_value` of each sparse `Constant` operator by a
    `value` of the tensor it gives: for a tool of onnx's that knows no sparse tensor (its
    version converter). `put_sparse_back` undoes it."""
    for each in proto_graphs(gp):
        if len(each.sparse_initializer):
            for sparse in each.sparse_initializer:
                original = onnx.SparseTensorProto()
                original.CopyFrom(sparse)
                each.initializer.append(stand_in(original, True))
            del each.sparse_initializer[:]
        for node in each.node:
            attr = _sparse_constant(node)
            if attr is None:
                continue
            original = onnx.SparseTensorProto()
            original.CopyFrom(attr.sparse_tensor)
            attr.ClearField("sparse_tensor")
            attr.name, attr.type = "value", onnx.AttributeProto.TENSOR
            attr.t.CopyFrom(stand_in(original, False))


def put_sparse_back(gp: onnx.GraphProto, original: Original) -> int:
    """Put back, in `gp` and its bodies, the sparse tensor `original` gives for a dense
    initializer (appended to the graph's sparse initializers, in the order they come) or
    for a `Constant`'s `value` (its `sparse_value` again); how many were put back."""
    count = 0
    for each in proto_graphs(gp):
        found = [(position, original(tensor, True))
                 for position, tensor in enumerate(each.initializer)]
        back = [(position, sparse) for position, sparse in found if sparse is not None]
        for position, _ in reversed(back):
            del each.initializer[position]
        each.sparse_initializer.extend(sparse for _, sparse in back)
        count += len(back)
        for node in each.node:
            if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
                continue
            for attr in node.attribute:
                if attr.name != "value" or attr.type != onnx.AttributeProto.TENSOR:
                    continue
                sparse = original(attr.t, False)
                if sparse is not None:
                    attr.ClearField("t")
                    attr.name, attr.type = "sparse_value", onnx.AttributeProto.SPARSE_TENSOR
                    attr.sparse_tensor.CopyFrom(sparse)
                    count += 1
    return count

