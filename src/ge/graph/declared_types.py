"""Whether the type a model declares for a value (a graph input, output or value_info) is
one ONNX defines: an element type the installed onnx knows, no dim below -1, a dim name
that is text.

A type that is not fails far from its cause: a table of `ge inspect` or the generation of
inputs (`--verify`, `ge run`) on element type 99, onnx's shape inference on dim -5
("Incompatible dimensions", naming no dim), numpy on generated inputs ("negative
dimensions are not allowed"). Loading refuses it instead (`ModelLoadError`, GE1101, naming
the value, the dim and its value), and `ge inspect` says the same
(`ge.graph.payload_checks.check_model_payloads`).

A dim below -1 is refused. -1 is not: exporters write it for an unknown dim, onnx's
checker passes it, and onnxruntime and ge's IR read it as unknown (ge's own tests declared
outputs so); onnx's shape inference, which compiling runs, takes it for a size, so an input
declared so is refused there (GE1305, "Incompatible dimensions"); an unknown dim is
declared by a name (`dim_param`) or by no value, which every tool reads alike.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from ge.errors import ModelLoadError

__all__ = ["ATTRIBUTE_KINDS", "KNOWN_ELEM_TYPES", "attribute_kind_error", "check_declared_types",
           "type_problem", "unknown_elem_type"]

#: The element types the installed onnx defines (UNDEFINED, 0, included: an input of no
#: element type is one of any type, which is not this module's to refuse).
KNOWN_ELEM_TYPES = frozenset(onnx.TensorProto.DataType.values())

_TENSOR_KINDS = ("tensor_type", "sparse_tensor_type")

#: The types an attribute may declare: those the installed onnx defines but UNDEFINED (an
#: attribute's type says which field holds its value).
ATTRIBUTE_KINDS = frozenset(onnx.AttributeProto.AttributeType.values()) - {
    onnx.AttributeProto.UNDEFINED}


def unknown_elem_type(elem_type: int) -> str:
    """The words for an element type the installed onnx does not define."""
    return f"element type {elem_type}, which ONNX (onnx {onnx.__version__}) does not define"


def type_problem(tp: onnx.TypeProto) -> str | None:
    """What is wrong with the type `tp`, said after "is declared with" ("element type 99,
    which ONNX does not define ...", "dim 0 of -5 (shape [-5, 3]): ..."); None when it is
    sound. Sequences, optionals and maps are looked into ("sequence elements of ...")."""
    which = tp.WhichOneof("value")
    if which in _TENSOR_KINDS:
        tensor = getattr(tp, which)
        if tensor.elem_type not in KNOWN_ELEM_TYPES:
            return unknown_elem_type(tensor.elem_type)
        if not tensor.HasField("shape"):
            return None
        dims = tensor.shape.dim
        for index, dim in enumerate(dims):
            kind = dim.WhichOneof("value")
            if kind == "dim_value" and dim.dim_value < -1:
                return (f"dim {index} of {dim.dim_value} (shape {_shape_text(dims)}): a dim "
                        "cannot be negative; declare an unknown dim by a name (dim_param) or "
                        "by no value")
            if kind == "dim_param" and type(dim.dim_param) is not str:
                return (f"dim {index} named by bytes that are not UTF-8 text "
                        f"({dim.dim_param!r}); the model file is corrupt")
        return None
    if which == "sequence_type":
        return _inner("sequence elements of", tp.sequence_type.elem_type)
    if which == "optional_type":
        return _inner("an optional of", tp.optional_type.elem_type)
    if which == "map_type":
        key = tp.map_type.key_type
        if key not in KNOWN_ELEM_TYPES:
            return "map keys of " + unknown_elem_type(key)
        return _inner("map values of", tp.map_type.value_type)
    return None


def _inner(what: str, tp: onnx.TypeProto) -> str | None:
    problem = type_problem(tp)
    return None if problem is None else f"{what} {problem}"


def _shape_text(dims: Iterable[onnx.TensorShapeProto.Dimension]) -> str:
    return "[" + ", ".join(
        str(d.dim_value) if d.HasField("dim_value") else repr(d.dim_param) if d.dim_param
        else "?" for d in dims) + "]"


def check_declared_types(graph: onnx.GraphProto, where: str) -> None:
    """Refuse (`ModelLoadError`, GE1101) the first input or output of `graph` (named
    `where`: "graph 'g'") whose declared type is not sound (`type_problem`), and a
    value_info of an element type ONNX does not define (onnxruntime refuses the model for
    it; what a value_info says of dims, inference replaces, and checking every dim of every
    value_info would cost loading time)."""
    for kind, values in (("input", graph.input), ("output", graph.output)):
        for vi in values:
            problem = type_problem(vi.type)
            if problem is not None:
                _refuse(where, kind, vi, problem)
    for vi in graph.value_info:
        if vi.type.tensor_type.elem_type not in KNOWN_ELEM_TYPES:
            _refuse(where, "value_info", vi, unknown_elem_type(vi.type.tensor_type.elem_type))


def _refuse(where: str, kind: str, vi: onnx.ValueInfoProto, problem: str) -> None:
    raise ModelLoadError(f"{where}: {kind} {vi.name!r} is declared with {problem}")


def attribute_kind_error(what: str, attr: onnx.AttributeProto) -> ModelLoadError:
    """The `ModelLoadError` (GE1101) for an attribute whose type is not one of
    `ATTRIBUTE_KINDS`; `what` names its node and where it is ("graph 'g': Concat node
    'cat': attribute")."""
    kind = attr.type
    said = ("UNDEFINED (0)" if kind == onnx.AttributeProto.UNDEFINED else
            f"{kind}, which ONNX (onnx {onnx.__version__}) does not define")
    return ModelLoadError(
        f"{what} {attr.name!r} is declared with type {said}: an attribute's type says which "
        "field holds its value (onnx's checker and onnxruntime refuse it: \"type field and "
        "data field mismatch\")")
