"""Conversion between ONNX `ValueInfoProto`/`TypeProto` and `TensorDesc`.

A desc decoded from ONNX remembers its source; while the desc still says the same, export
hands back the original proto, so non-tensor types (sequences, optionals, maps), dim
denotations and doc strings survive a round trip untouched.
"""

from __future__ import annotations

import onnx

from ge.graph.tensor_desc import UNKNOWN_DIM, Shape, TensorDesc, _trusted
from ge.graph.types import DataType, Format, data_type_from_onnx, data_type_to_onnx

__all__ = ["NON_TENSOR_KINDS", "TypeDecoder", "desc_from_value_info", "holds_non_tensor",
           "is_known_type", "named_value_info", "value_info_from_desc"]

#: The kinds of ONNX type that are not a tensor: the IR types tensors only, and a value of
#: one of these has an unknown desc that keeps its ONNX type as its source.
NON_TENSOR_KINDS = frozenset({"sequence_type", "optional_type", "map_type", "sparse_tensor_type"})


def _shape_of(tensor_type: onnx.TypeProto.Tensor) -> Shape:
    if not tensor_type.HasField("shape"):
        return Shape.unknown_rank()
    shape = Shape()
    for dim in tensor_type.shape.dim:
        which = dim.WhichOneof("value")
        if which == "dim_value":
            shape.append(dim.dim_value)
        elif which == "dim_param":
            shape.append(dim.dim_param)
        else:
            shape.append(UNKNOWN_DIM)
    return shape


def desc_from_value_info(vi: onnx.ValueInfoProto) -> TensorDesc:
    """The desc of a value; non-tensor types give an unknown desc that keeps the source."""
    tp = vi.type
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        try:
            dtype = data_type_from_onnx(tt.elem_type)
        except TypeError:
            dtype = DataType.DT_UNDEFINED
        desc = _trusted(_shape_of(tt), Format.FORMAT_ND, dtype)  # dims are ints and strs
    else:
        desc = TensorDesc.unknown()
    desc._source = vi
    desc._source_key = desc._key()
    return desc


class TypeDecoder:
    """`desc_from_value_info` decoding each distinct type once.

    Most values of a large model share a handful of types (`float[batch,128,768]`), and
    reading a type's fields through protobuf costs ~5 µs per value against ~1.5 µs for its
    serialized bytes and a copy. A type's template desc has for source a detached, unnamed
    copy of its value info: a reference into a parsed model would keep the whole of it
    alive (about 440 MB beside a 200,000-node graph). At most `limit` types are kept; the
    rest are decoded each time (a model of that many distinct types gains nothing).
    """

    __slots__ = ("_by_type", "_limit")

    def __init__(self, limit: int = 4096) -> None:
        self._by_type: dict[bytes, TensorDesc] = {}
        self._limit = limit

    def template(self, tp: onnx.TypeProto) -> TensorDesc:
        """The shared desc of type `tp` (never to be changed or handed out: copy it)."""
        key = tp.SerializeToString()
        template = self._by_type.get(key)
        if template is None:
            detached = onnx.ValueInfoProto()
            detached.type.CopyFrom(tp)
            template = desc_from_value_info(detached)
            if len(self._by_type) < self._limit:
                self._by_type[key] = template
        return template

    def decode(self, vi: onnx.ValueInfoProto) -> TensorDesc:
        """`desc_from_value_info(vi)`: a desc of its own, whose source is `vi`."""
        desc = self.template(vi.type).copy()
        desc._source = vi
        return desc


def is_known_type(tp: onnx.TypeProto) -> bool:
    """Whether an inferred type says something a desc can hold: a tensor of known element
    type, or a sequence, map, optional or sparse tensor (kept as the desc's source)."""
    kind = tp.WhichOneof("value")
    return (kind == "tensor_type" and bool(tp.tensor_type.elem_type)) or kind in NON_TENSOR_KINDS


def holds_non_tensor(desc: TensorDesc) -> bool:
    """Whether `desc` is that of a value typed as a sequence, optional, map or sparse tensor
    (its type is known, though not a tensor's: no element type to ask of it)."""
    source = desc._source
    return source is not None and source.type.WhichOneof("value") in NON_TENSOR_KINDS


def named_value_info(vi: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    """`vi` itself when it already has `name`, else a copy renamed (protos are never changed)."""
    if vi.name == name:
        return vi
    renamed = onnx.ValueInfoProto()
    renamed.CopyFrom(vi)
    renamed.name = name
    return renamed


def value_info_from_desc(name: str, desc: TensorDesc) -> onnx.ValueInfoProto:
    """The ONNX value info of a desc, reusing the proto it came from while it is unchanged."""
    source = desc._source
    if source is not None and desc._source_key == desc._key():
        return named_value_info(source, name)
    vi = onnx.ValueInfoProto()
    vi.name = name
    if source is not None:
        if source.HasField("doc_string"):  # (proto2: setting "" would write an empty field)
            vi.doc_string = source.doc_string
        vi.metadata_props.extend(source.metadata_props)
    tt = vi.type.tensor_type
    tt.elem_type = data_type_to_onnx(desc.data_type)
    shape = desc._shape
    if not shape.is_unknown_rank():
        out_shape = tt.shape
        out_shape.SetInParent()  # a scalar has a shape with no dims, not an unknown rank
        for d in shape:
            dim = out_shape.dim.add()
            if isinstance(d, str):
                dim.dim_param = d
            elif d >= 0:
                dim.dim_value = d
    return vi
