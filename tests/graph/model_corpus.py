"""A corpus of small ONNX models, one per feature `ge.graph` must load and save losslessly.

Every model is built with `onnx.helper` so each test sees exactly which feature it exercises.
`CORPUS` lists them with what the round-trip tests need: whether the ONNX checker accepts the
model, whether onnxruntime can run it, and how to make its inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

__all__ = [
    "CORPUS",
    "CorpusModel",
    "assert_models_equal",
    "assert_same_outputs",
    "make_feeds",
    "model_with_external_data",
    "run_onnxruntime",
]

OPSET = 17
CUSTOM = "com.example.custom"
FUNCS = "com.example.functions"

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class CorpusModel:
    """One corpus entry: how to build it and how far the round-trip checks can go."""

    name: str
    build: Callable[[], onnx.ModelProto]
    # onnx.checker.check_model accepts it with full_check=True (False: only without shape
    # inference, which cannot type sparse tensors)
    full_check: bool = True
    runnable: bool = True  # onnxruntime can run it
    feeds: Callable[[np.random.Generator], Feeds] | None = None


def _opsets(opsets: dict[str, int] | None) -> list[onnx.OperatorSetIdProto]:
    return [oh.make_opsetid(d, v) for d, v in (opsets or {"": OPSET}).items()]


def _model(graph: onnx.GraphProto, *, opsets: dict[str, int] | None = None, ir: int = 8,
           **fields) -> onnx.ModelProto:
    return oh.make_model(graph, opset_imports=_opsets(opsets), ir_version=ir, **fields)


def _vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return oh.make_tensor_value_info(name, elem, shape)


def _floats(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- model fields ---------------------------------------------------------------------------

def opset_imports() -> onnx.ModelProto:
    """Several opset imports in a non-sorted order: standard, ai.onnx.ml and custom domains."""
    g = oh.make_graph(
        [oh.make_node("Add", ["x", "y"], ["s"]),
         oh.make_node("Binarizer", ["s"], ["b"], domain="ai.onnx.ml", threshold=0.25)],
        "opsets", [_vi("x", TP.FLOAT, [2, 3]), _vi("y", TP.FLOAT, [2, 3])],
        [_vi("b", TP.FLOAT, [2, 3])])
    return _model(g, opsets={CUSTOM: 3, "": OPSET, "ai.onnx.ml": 3, "com.microsoft": 1})


def ir_version_7() -> onnx.ModelProto:
    """An older IR version (7) with the opset of its time (12)."""
    g = oh.make_graph([oh.make_node("Softmax", ["x"], ["y"], axis=1)], "ir7",
                      [_vi("x", TP.FLOAT, [2, 5])], [_vi("y", TP.FLOAT, [2, 5])])
    return _model(g, opsets={"": 12}, ir=7)


def _props(**kv: str) -> list[onnx.StringStringEntryProto]:
    return [onnx.StringStringEntryProto(key=k, value=v) for k, v in kv.items()]


def metadata_and_docs() -> onnx.ModelProto:
    """Producer, model version, domain, doc strings and metadata_props at every level (IR 10)."""
    x = _vi("x", TP.FLOAT, [2, 3])
    x.doc_string = "input doc"
    x.metadata_props.extend(_props(unit="m"))
    y = _vi("y", TP.FLOAT, [2, 3])
    y.doc_string = "output doc ✓"
    mid = _vi("mid", TP.FLOAT, [2, 3])
    mid.doc_string = "intermediate doc"
    mid.metadata_props.extend(_props(role="hidden"))
    w = nh.from_array(_floats([2, 3]), "w")
    w.doc_string = "weight doc"
    w.metadata_props.extend(_props(origin="init"))
    neg = oh.make_node("Neg", ["x"], ["mid"], name="neg", doc_string="negate the input")
    neg.metadata_props.extend(_props(**{"pkg.source": "layer1", "namespace": "a/b"}))
    add = oh.make_node("Add", ["mid", "w"], ["y"], name="add", doc_string="")
    g = oh.make_graph([neg, add], "documented", [x], [y], [w], doc_string="graph doc",
                      value_info=[mid])
    g.metadata_props.extend(_props(graph_key="graph value"))
    m = _model(g, opsets={"": 21}, ir=10, producer_name="corpus-producer",
               producer_version="1.2.3", model_version=42, domain="org.example.models",
               doc_string="model doc: ünïcode ✓")
    m.metadata_props.extend(_props(author="tests", license="Apache-2.0", empty=""))
    return m


def graph_extras() -> onnx.ModelProto:
    """Rarely used fields the IR does not model: quantization annotations, training info."""
    g = oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "extras",
                      [_vi("x", TP.FLOAT, [4])], [_vi("y", TP.FLOAT, [4])])
    ann = g.quantization_annotation.add()
    ann.tensor_name = "y"
    ann.quant_parameter_tensor_names.extend(_props(SCALE_TENSOR="s", ZERO_POINT_TENSOR="z"))
    m = _model(g)
    info = m.training_info.add()
    info.algorithm.name = "train_step"
    info.update_binding.extend(_props(w="w_new"))
    return m


# -- initializers ---------------------------------------------------------------------------

def _typed(name: str, elem: int, dims, vals) -> onnx.TensorProto:
    """A tensor stored in its typed field (float_data, int32_data, ...) rather than raw_data."""
    return oh.make_tensor(name, elem, dims, vals, raw=False)


def _dtype_initializers() -> list[onnx.TensorProto]:
    rng = np.random.default_rng(1)
    arrays = {
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f64": rng.standard_normal((3,)),
        "f16": rng.standard_normal((2, 2)).astype(np.float16),
        "i8": np.array([-128, 0, 127], np.int8),
        "u8": np.array([0, 255, 7], np.uint8),
        "i16": np.array([-32768, 32767], np.int16),
        "u16": np.array([65535, 1], np.uint16),
        "i32": np.array([[-(2**31), 2**31 - 1]], np.int32),
        "u32": np.array([2**32 - 1], np.uint32),
        "i64": np.array([-(2**63), 2**63 - 1, 0], np.int64),
        "u64": np.array([2**64 - 1], np.uint64),
        "flag": np.array([True, False, True]),
        "c64": np.array([1 + 2j, -3.5j], np.complex64),
        "c128": np.array([0.25 - 1j], np.complex128),
        "text": np.array([b"abc", "ünï".encode(), b""], dtype=object),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }
    tensors = [nh.from_array(a, n) for n, a in arrays.items()]
    tensors += [
        oh.make_tensor("bf16", TP.BFLOAT16, [3], [1.0, -2.5, 3.140625]),
        oh.make_tensor("bf16_raw", TP.BFLOAT16, [2], np.array([0x3F80, 0xC020], np.uint16)
                       .tobytes(), raw=True),
        _typed("f32_typed", TP.FLOAT, [2], [1.5, -0.0]),
        _typed("f16_typed", TP.FLOAT16, [2], np.array([0.5, -8.0], np.float16)),
        _typed("i8_typed", TP.INT8, [2], [-5, 5]),
        _typed("bool_typed", TP.BOOL, [2], [True, False]),
        _typed("i64_typed", TP.INT64, [2], [-(2**40), 7]),
        _typed("f64_typed", TP.DOUBLE, [1], [1e300]),
        _typed("u64_typed", TP.UINT64, [1], [2**63 + 5]),
        _typed("c64_typed", TP.COMPLEX64, [1], [1 + 1j]),
        _typed("text_typed", TP.STRING, [2], [b"x", b"yz"]),
    ]
    return tensors


def _small_float_initializers() -> list[onnx.TensorProto]:
    """Element types added in IR 9/10 (float8, int4/uint4), typed and raw storage."""
    return [
        oh.make_tensor("f8e4m3", TP.FLOAT8E4M3FN, [3], [1.0, -0.5, 448.0]),
        oh.make_tensor("f8e5m2", TP.FLOAT8E5M2, [2], [2.0, -1024.0]),
        oh.make_tensor("f8e4m3uz", TP.FLOAT8E4M3FNUZ, [2], [0.25, 1.0]),
        oh.make_tensor("f8e5m2uz", TP.FLOAT8E5M2FNUZ, [2], [4.0, -0.125]),
        oh.make_tensor("i4", TP.INT4, [5], [-8, 7, 0, 1, -1]),
        oh.make_tensor("u4", TP.UINT4, [3], [15, 0, 9]),
        oh.make_tensor("i4_raw", TP.INT4, [3], bytes([0x7F, 0x08]), raw=True),
    ]


def initializer_dtypes() -> onnx.ModelProto:
    """Initializers of every classic element type, raw and typed storage, scalar and empty;
    each (but complex ones) is a graph output so onnxruntime hands the values back."""
    inits = _dtype_initializers()
    nodes, outputs = [], []
    for t in inits:
        if t.data_type in (TP.COMPLEX64, TP.COMPLEX128):
            continue  # onnxruntime has no complex outputs
        if t.data_type == TP.BFLOAT16:  # nor a numpy type for bfloat16: read through a Cast
            nodes.append(oh.make_node("Cast", [t.name], [f"{t.name}_f"], to=TP.FLOAT))
            outputs.append(_vi(f"{t.name}_f", TP.FLOAT, list(t.dims)))
        else:
            outputs.append(_vi(t.name, t.data_type, list(t.dims)))
    g = oh.make_graph(nodes, "dtypes", [], outputs, inits)
    return _model(g)


def initializer_dtypes_ir10() -> onnx.ModelProto:
    """float8 and int4/uint4 initializers (IR 10), read by Cast to float."""
    inits = _small_float_initializers()
    nodes = [oh.make_node("Cast", [t.name], [f"{t.name}_f"], to=TP.FLOAT) for t in inits]
    outputs = [_vi(f"{t.name}_f", TP.FLOAT, list(t.dims)) for t in inits]
    g = oh.make_graph(nodes, "small_floats", [], outputs, inits)
    return _model(g, opsets={"": 21}, ir=10)


def sparse_initializer() -> onnx.ModelProto:
    """A sparse initializer (values + indices) added to a dense input."""
    values = nh.from_array(np.array([1.5, -2.0, 4.0], np.float32), "sp")
    indices = nh.from_array(np.array([1, 5, 10], np.int64), "sp_indices")
    sparse = oh.make_sparse_tensor(values, indices, [3, 4])
    g = oh.make_graph([oh.make_node("Add", ["x", "sp"], ["y"])], "sparse",
                      [_vi("x", TP.FLOAT, [3, 4])], [_vi("y", TP.FLOAT, [3, 4])],
                      sparse_initializer=[sparse])
    return _model(g)


def input_with_default() -> onnx.ModelProto:
    """IR 3, where every initializer is also a graph input: inputs with default values."""
    g = oh.make_graph(
        [oh.make_node("Add", ["x", "w"], ["s"]), oh.make_node("Mul", ["s", "k"], ["y"])],
        "defaults", [_vi("x", TP.FLOAT, [2, 2]), _vi("w", TP.FLOAT, [2, 2]),
                     _vi("k", TP.FLOAT, [2, 2])],
        [_vi("y", TP.FLOAT, [2, 2])],
        [nh.from_array(_floats([2, 2], 2), "w"), nh.from_array(_floats([2, 2], 3), "k")])
    return _model(g, opsets={"": 8}, ir=3)


def input_with_default_ir8(default_last: bool = True) -> onnx.ModelProto:
    """IR 8: an overridable initializer (also a graph input) beside plain initializers."""
    inits = [nh.from_array(_floats([2, 2], 2), "w"), nh.from_array(_floats([2, 2], 4), "b")]
    inits.insert(2 if default_last else 1, nh.from_array(_floats([2, 2], 3), "k"))
    g = oh.make_graph(
        [oh.make_node("Add", ["x", "w"], ["s"]), oh.make_node("Mul", ["s", "k"], ["t"]),
         oh.make_node("Sub", ["t", "b"], ["y"])],
        "defaults8", [_vi("x", TP.FLOAT, [2, 2]), _vi("k", TP.FLOAT, [2, 2])],
        [_vi("y", TP.FLOAT, [2, 2])], inits)
    return _model(g)


# -- shapes and value_info ------------------------------------------------------------------

def _dims(name: str, elem: int, dims) -> onnx.ValueInfoProto:
    """A value info whose dims may be ints, names (dim_param) or None (unknown)."""
    vi = _vi(name, elem, None)
    shape = vi.type.tensor_type.shape
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d
    return vi


def symbolic_dims() -> onnx.ModelProto:
    """dim_param and unknown dims on inputs, outputs and value_info, unknown rank on a
    value_info (the checker wants a rank on graph inputs); a dim denotation."""
    x = _dims("x", TP.FLOAT, ["batch", None, 4])
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    y = _dims("y", TP.FLOAT, ["batch", 4])
    nodes = [
        oh.make_node("Relu", ["x"], ["r"]),
        oh.make_node("ReduceSum", ["r", "axes"], ["s"], keepdims=0),
        oh.make_node("Add", ["s", "bias"], ["y"]),
        oh.make_node("Shape", ["x"], ["shape_of_x"]),
    ]
    g = oh.make_graph(
        nodes, "symbolic", [x, _dims("bias", TP.FLOAT, [None])],
        [y, _dims("shape_of_x", TP.INT64, [3])],
        [nh.from_array(np.array([1], np.int64), "axes")],
        value_info=[_dims("r", TP.FLOAT, ["batch", None, 4]), _vi("s", TP.FLOAT, None)])
    return _model(g)


def symbolic_feeds(rng: np.random.Generator) -> Feeds:
    return {"x": rng.standard_normal((3, 5, 4)).astype(np.float32),
            "bias": rng.standard_normal((4,)).astype(np.float32)}


def value_info_kinds() -> onnx.ModelProto:
    """value_info of non-tensor types (sequence, optional), with and without a shape, and one
    naming no value of the graph (kept as it was)."""
    seq = oh.make_value_info("seq", oh.make_sequence_type_proto(
        oh.make_tensor_type_proto(TP.FLOAT, [2])))
    opt = oh.make_value_info("opt", oh.make_optional_type_proto(
        oh.make_tensor_type_proto(TP.FLOAT, [4])))
    nodes = [
        oh.make_node("SequenceConstruct", ["x", "x"], ["seq"]),
        oh.make_node("ConcatFromSequence", ["seq"], ["c"], axis=0),
        oh.make_node("Optional", ["c"], ["opt"]),
        oh.make_node("OptionalGetElement", ["opt"], ["got"]),
        oh.make_node("Abs", ["got"], ["y"]),
    ]
    g = oh.make_graph(nodes, "kinds", [_vi("x", TP.FLOAT, [2])], [_vi("y", TP.FLOAT, [4])],
                      value_info=[seq, _vi("c", TP.FLOAT, None), opt])
    g.value_info.append(_vi("unused_name", TP.INT32, [1]))
    return _model(g)


def passthrough_outputs() -> onnx.ModelProto:
    """Graph outputs that are a graph input, an initializer, and one value listed twice."""
    g = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["r"])], "passthrough", [_vi("x", TP.FLOAT, [2])],
        [_vi("x", TP.FLOAT, [2]), _vi("r", TP.FLOAT, [2]), _vi("w", TP.FLOAT, [2]),
         _vi("r", TP.FLOAT, [2])],
        [nh.from_array(np.array([1.0, -1.0], np.float32), "w")])
    return _model(g)


def value_info_io() -> onnx.ModelProto:
    """value_info entries naming a graph input and a graph output (kept as written, with a
    different shape than the input declares) after one for an intermediate."""
    g = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Neg", ["r"], ["y"])], "vi_io",
        [_vi("x", TP.FLOAT, [2, 3])], [_vi("y", TP.FLOAT, [2, 3])],
        value_info=[_vi("r", TP.FLOAT, [2, 3]), _dims("x", TP.FLOAT, ["n", 3]),
                    _vi("y", TP.FLOAT, [2, 3])])
    return _model(g)


def value_info_out_of_order() -> onnx.ModelProto:
    """value_info not in the order of the nodes that produce the values, with one naming no
    value between them (saved in the file's order, not re-sorted)."""
    g = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["a"]), oh.make_node("Neg", ["a"], ["b"]),
         oh.make_node("Abs", ["b"], ["y"])], "vi_order",
        [_vi("x", TP.FLOAT, [2])], [_vi("y", TP.FLOAT, [2])],
        value_info=[_vi("b", TP.FLOAT, [2]), _vi("elsewhere", TP.INT64, [1]),
                    _vi("a", TP.FLOAT, [2])])
    return _model(g)


# -- attributes -----------------------------------------------------------------------------

def _tiny_graph(name: str) -> onnx.GraphProto:
    return oh.make_graph([oh.make_node("Identity", ["a"], ["b"])], name,
                         [_vi("a", TP.FLOAT, [1])], [_vi("b", TP.FLOAT, [1])])


def every_attribute_type() -> onnx.ModelProto:
    """A custom-domain node with one attribute of each of the 14 attribute types (plus an
    empty list), special values (inf, -0.0, int64 limits, non-UTF-8 bytes) and an attribute
    doc string."""
    sparse = oh.make_sparse_tensor(nh.from_array(np.array([7], np.int32), "sv"),
                                   nh.from_array(np.array([2], np.int64), "si"), [4])
    sparse2 = oh.make_sparse_tensor(nh.from_array(np.array([1.0, 2.0], np.float32), "sv2"),
                                    nh.from_array(np.array([[0, 1], [1, 0]], np.int64), "si2"),
                                    [2, 2])
    tp_tensor = oh.make_tensor_type_proto(TP.FLOAT16, ["n", 3])
    tp_seq = oh.make_sequence_type_proto(oh.make_tensor_type_proto(TP.INT64, None))
    node = oh.make_node(
        "Everything", ["x"], ["y"], name="everything", domain=CUSTOM,
        f=0.1, i=-3, s=b"bytes \xff", t=nh.from_array(np.arange(4, dtype=np.int16), "t"),
        g=_tiny_graph("g_attr"),
        floats=[1.0, float("inf"), -0.0], ints=[0, -(2**63), 2**63 - 1],
        strings=[b"a", "ü".encode(), b""],
        tensors=[nh.from_array(np.array([1.0]), "t0"), oh.make_tensor("t1", TP.BFLOAT16, [1],
                                                                        [2.0])],
        graphs=[_tiny_graph("g0"), _tiny_graph("g1")],
    )
    extra = [
        oh.make_attribute("sparse", sparse),
        oh.make_attribute("sparses", [sparse, sparse2]),
        oh.make_attribute("type", tp_tensor),
        oh.make_attribute("types", [tp_tensor, tp_seq]),
        oh.make_attribute("empty_ints", [], attr_type=onnx.AttributeProto.INTS),
    ]
    extra[0].doc_string = "an attribute doc string"
    node.attribute.extend(extra)
    g = oh.make_graph([node], "attrs", [_vi("x", TP.FLOAT, [1])], [_vi("y", TP.FLOAT, [1])])
    return _model(g, opsets={"": OPSET, CUSTOM: 1})


def constants() -> onnx.ModelProto:
    """`Constant` in every form: value, value_float(s), value_int(s), value_string(s),
    sparse_value; one named, one with a doc string."""
    forms = {
        "c_value": {"value": nh.from_array(_floats([2, 2], 5), "")},
        "c_float": {"value_float": 2.5},
        "c_floats": {"value_floats": [1.0, -1.0, 0.5]},
        "c_int": {"value_int": -7},
        "c_ints": {"value_ints": [1, 2, 3]},
        "c_string": {"value_string": "hello"},
        "c_strings": {"value_strings": ["a", "bc"]},
        "c_sparse": {"sparse_value": oh.make_sparse_tensor(
            nh.from_array(np.array([5.0], np.float32), ""), nh.from_array(np.array([3],
                                                                                  np.int64), ""),
            [2, 3])},
    }
    nodes = []
    for i, (out, attrs) in enumerate(forms.items()):
        name = f"const_{i}" if i % 2 else ""
        nodes.append(oh.make_node("Constant", [], [out], name=name,
                                  doc_string="made by a test" if i == 0 else None, **attrs))
    nodes.append(oh.make_node("Add", ["x", "c_value"], ["y"]))
    outputs = [_vi("y", TP.FLOAT, [2, 2]), _vi("c_float", TP.FLOAT, []),
               _vi("c_floats", TP.FLOAT, [3]), _vi("c_int", TP.INT64, []),
               _vi("c_ints", TP.INT64, [3]), _vi("c_string", TP.STRING, []),
               _vi("c_strings", TP.STRING, [2]), _vi("c_sparse", TP.FLOAT, [2, 3])]
    g = oh.make_graph(nodes, "constants", [_vi("x", TP.FLOAT, [2, 2])], outputs)
    return _model(g)


def ir11_fields() -> onnx.ModelProto:
    """IR 11 fields: a node's overload and device configurations, the model's configuration."""
    m = every_attribute_type()
    m.ir_version = 11
    node = m.graph.node[0]
    node.overload = "variant"
    device = node.device_configurations.add()
    device.configuration_id = "two_devices"
    sharding = device.sharding_spec.add()
    sharding.tensor_name = "x"
    sharding.device.extend([0, 1])
    config = m.configuration.add()
    config.name = "two_devices"
    config.num_devices = 2
    config.device.extend(["cpu:0", "cpu:1"])
    return m


# -- control flow ---------------------------------------------------------------------------

def if_outer_scope() -> onnx.ModelProto:
    """If whose branches read outer values (an input, an initializer, a node output); a
    branch attribute with a doc string; a Constant inside a branch."""
    then_g = oh.make_graph([oh.make_node("Add", ["x", "w"], ["t_out"])], "then_branch", [],
                           [_vi("t_out", TP.FLOAT, [2, 3])])
    else_g = oh.make_graph(
        [oh.make_node("Constant", [], ["two"], value_float=2.0),
         oh.make_node("Mul", ["nx", "two"], ["e_out"])], "else_branch", [],
        [_vi("e_out", TP.FLOAT, [2, 3])])
    if_node = oh.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g,
                           else_branch=else_g)
    next(a for a in if_node.attribute if a.name == "then_branch").doc_string = "taken when cond"
    nodes = [oh.make_node("Neg", ["x"], ["nx"]), if_node]
    g = oh.make_graph(nodes, "if_model", [_vi("cond", TP.BOOL, []), _vi("x", TP.FLOAT, [2, 3])],
                      [_vi("y", TP.FLOAT, [2, 3])], [nh.from_array(_floats([2, 3], 6), "w")])
    return _model(g)


def if_feeds(rng: np.random.Generator) -> Feeds:
    return {"cond": np.array(bool(rng.integers(0, 2))),
            "x": rng.standard_normal((2, 3)).astype(np.float32)}


def loop_nested() -> onnx.ModelProto:
    """Loop with a trip count, no condition, a loop-carried value and a scan output; its body
    (with doc string, metadata and value_info) reads an outer initializer and holds an If that
    reads values two scopes up."""
    inner_then = oh.make_graph([oh.make_node("Add", ["acc_in", "w"], ["it_out"])], "inner_then",
                               [], [_vi("it_out", TP.FLOAT, [3])])
    inner_else = oh.make_graph([oh.make_node("Sub", ["acc_in", "x"], ["ie_out"])], "inner_else",
                               [], [_vi("ie_out", TP.FLOAT, [3])])
    body = oh.make_graph(
        [oh.make_node("Cast", ["i"], ["i_f"], to=TP.FLOAT, doc_string="a node doc in a body"),
         oh.make_node("Constant", [], ["two"], value_int=2),
         oh.make_node("Mod", ["i", "two"], ["parity"]),
         oh.make_node("Cast", ["parity"], ["even"], to=TP.BOOL),
         oh.make_node("If", ["even"], ["next"], then_branch=inner_then, else_branch=inner_else),
         oh.make_node("Mul", ["next", "i_f"], ["scan_out"]),
         oh.make_node("Identity", ["cond_in"], ["cond_out"])],
        "loop_body",
        [_vi("i", TP.INT64, []), _vi("cond_in", TP.BOOL, []), _vi("acc_in", TP.FLOAT, [3])],
        [_vi("cond_out", TP.BOOL, []), _vi("next", TP.FLOAT, [3]),
         _vi("scan_out", TP.FLOAT, [3])],
        doc_string="a subgraph doc", value_info=[_vi("i_f", TP.FLOAT, [])])
    body.metadata_props.extend(_props(subgraph="body"))
    loop = oh.make_node("Loop", ["n", "", "x"], ["acc", "scans"], body=body)
    g = oh.make_graph([loop], "loop_model",
                      [_vi("n", TP.INT64, []), _vi("x", TP.FLOAT, [3])],
                      [_vi("acc", TP.FLOAT, [3]), _vi("scans", TP.FLOAT, [None, 3])],
                      [nh.from_array(np.array([0.5, -1.0, 2.0], np.float32), "w")])
    return _model(g, ir=10)


def loop_feeds(rng: np.random.Generator) -> Feeds:
    return {"n": np.array(4, np.int64), "x": rng.standard_normal(3).astype(np.float32)}


def scan_outer_scope() -> onnx.ModelProto:
    """Scan (opset 9+ form) with scan input/output axes; the body reads an outer initializer."""
    body = oh.make_graph(
        [oh.make_node("Add", ["state_in", "row"], ["sum"]),
         oh.make_node("Mul", ["sum", "scale"], ["state_out"]),
         oh.make_node("Identity", ["state_out"], ["row_out"])],
        "scan_body", [_vi("state_in", TP.FLOAT, [2]), _vi("row", TP.FLOAT, [2])],
        [_vi("state_out", TP.FLOAT, [2]), _vi("row_out", TP.FLOAT, [2])])
    scan = oh.make_node("Scan", ["init", "xs"], ["final", "rows"], body=body,
                        num_scan_inputs=1, scan_input_axes=[1], scan_output_axes=[0])
    g = oh.make_graph([scan], "scan_model",
                      [_vi("init", TP.FLOAT, [2]), _vi("xs", TP.FLOAT, [2, 5])],
                      [_vi("final", TP.FLOAT, [2]), _vi("rows", TP.FLOAT, [5, 2])],
                      [nh.from_array(np.array([0.5, 2.0], np.float32), "scale")])
    return _model(g)


# -- functions ------------------------------------------------------------------------------

def local_functions() -> onnx.ModelProto:
    """Model-local functions in a custom domain: one with an attribute (referenced through
    ref_attr_name) and a default, one calling the other; both called from the graph."""
    alpha_const = oh.make_node("Constant", [], ["alpha"])
    alpha = oh.make_attribute_ref("value_float", onnx.AttributeProto.FLOAT)
    alpha.ref_attr_name = "alpha"  # (make_attribute_ref takes it only from onnx 1.22 on)
    alpha_const.attribute.append(alpha)
    scaled = oh.make_function(
        FUNCS, "ScaledTanh", ["X"], ["Y"],
        [oh.make_node("Tanh", ["X"], ["t"]), alpha_const, oh.make_node("Mul", ["t", "alpha"],
                                                                      ["Y"])],
        [oh.make_opsetid("", OPSET)], attributes=[], doc_string="alpha * tanh(X)")
    default = oh.make_attribute("alpha", 1.0)
    scaled.attribute_proto.append(default)
    twice = oh.make_function(
        FUNCS, "TwiceScaled", ["A", "B"], ["C"],
        [oh.make_node("ScaledTanh", ["A"], ["u"], domain=FUNCS, alpha=0.5),
         oh.make_node("ScaledTanh", ["B"], ["v"], domain=FUNCS),
         oh.make_node("Add", ["u", "v"], ["C"])],
        [oh.make_opsetid("", OPSET), oh.make_opsetid(FUNCS, 1)])
    nodes = [oh.make_node("ScaledTanh", ["x"], ["a"], domain=FUNCS, alpha=3.0),
             oh.make_node("TwiceScaled", ["a", "x"], ["y"], domain=FUNCS)]
    g = oh.make_graph(nodes, "functions", [_vi("x", TP.FLOAT, [2, 3])],
                      [_vi("y", TP.FLOAT, [2, 3])])
    return _model(g, opsets={"": OPSET, FUNCS: 1}, functions=[scaled, twice])


# -- optional inputs and outputs, names ----------------------------------------------------

def optional_io() -> onnx.ModelProto:
    """Clip with its middle input omitted, LSTM with its first output omitted, Dropout with
    its trailing mask output omitted."""
    rng = np.random.default_rng(7)
    hidden = 3
    w = rng.standard_normal((1, 4 * hidden, 2)).astype(np.float32)
    r = rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32)
    nodes = [
        oh.make_node("Clip", ["x", "", "hi"], ["clipped"]),
        oh.make_node("LSTM", ["seq", "W", "R"], ["", "h"], hidden_size=hidden),
        oh.make_node("Dropout", ["clipped"], ["y", ""]),
    ]
    g = oh.make_graph(nodes, "optional_io",
                      [_vi("x", TP.FLOAT, [2, 3]), _vi("seq", TP.FLOAT, [4, 1, 2])],
                      [_vi("y", TP.FLOAT, [2, 3]), _vi("h", TP.FLOAT, [1, 1, hidden])],
                      [nh.from_array(np.array(0.3, np.float32), "hi"), nh.from_array(w, "W"),
                       nh.from_array(r, "R")])
    return _model(g)


def node_names(duplicates: bool = False) -> onnx.ModelProto:
    """Empty node names, a node named like a value, a node named like the IR's NetOutput;
    with `duplicates`, two nodes named alike (valid ONNX that onnxruntime refuses)."""
    nodes = [
        oh.make_node("Relu", ["x"], ["a"], name=""),
        oh.make_node("Neg", ["a"], ["b"], name="dup"),
        oh.make_node("Abs", ["b"], ["c"], name="dup" if duplicates else "abs"),
        oh.make_node("Exp", ["c"], ["d"], name=""),
        oh.make_node("Sigmoid", ["d"], ["e"], name="x"),
        oh.make_node("Relu", ["e"], ["y"], name="NetOutput"),
    ]
    g = oh.make_graph(nodes, "names", [_vi("x", TP.FLOAT, [3])], [_vi("y", TP.FLOAT, [3])])
    return _model(g)


def duplicate_node_names() -> onnx.ModelProto:
    return node_names(duplicates=True)


CORPUS: list[CorpusModel] = [
    CorpusModel("opset_imports", opset_imports),
    CorpusModel("ir_version_7", ir_version_7),
    CorpusModel("metadata_and_docs", metadata_and_docs),
    CorpusModel("graph_extras", graph_extras),
    CorpusModel("initializer_dtypes", initializer_dtypes),
    CorpusModel("initializer_dtypes_ir10", initializer_dtypes_ir10),
    CorpusModel("sparse_initializer", sparse_initializer, full_check=False),
    CorpusModel("input_with_default", input_with_default),
    CorpusModel("input_with_default_ir8", input_with_default_ir8),
    CorpusModel("symbolic_dims", symbolic_dims, feeds=symbolic_feeds),
    CorpusModel("value_info_kinds", value_info_kinds),
    CorpusModel("every_attribute_type", every_attribute_type, runnable=False),
    CorpusModel("ir11_fields", ir11_fields, runnable=False),
    CorpusModel("constants", constants),
    CorpusModel("if_outer_scope", if_outer_scope, feeds=if_feeds),
    CorpusModel("loop_nested", loop_nested, feeds=loop_feeds),
    CorpusModel("scan_outer_scope", scan_outer_scope),
    CorpusModel("local_functions", local_functions),
    CorpusModel("optional_io", optional_io),
    CorpusModel("node_names", node_names),
    CorpusModel("duplicate_node_names", duplicate_node_names, runnable=False),
    CorpusModel("value_info_io", value_info_io),
    CorpusModel("value_info_out_of_order", value_info_out_of_order),
    CorpusModel("passthrough_outputs", passthrough_outputs),
]


# -- helpers for the tests ------------------------------------------------------------------

_NP_OF = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16,
          TP.INT64: np.int64, TP.INT32: np.int32, TP.INT8: np.int8, TP.UINT8: np.uint8,
          TP.BOOL: np.bool_}


def make_feeds(model: onnx.ModelProto, rng: np.random.Generator) -> Feeds:
    """Random inputs for every graph input without an initializer (symbolic/unknown dims → 3)."""
    defaults = {t.name for t in model.graph.initializer}
    feeds: Feeds = {}
    for vi in model.graph.input:
        if vi.name in defaults:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 3 for d in tt.shape.dim]
        dtype = _NP_OF[tt.elem_type]
        if dtype == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(bool)
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, 10, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def model_with_external_data() -> onnx.ModelProto:
    """Weights large enough to go to external data: initializers, a `Constant` attribute and
    an initializer inside a subgraph, plus one small initializer that stays inline."""
    then_g = oh.make_graph([oh.make_node("Add", ["x", "sub_w"], ["t_out"])], "then_w", [],
                           [_vi("t_out", TP.FLOAT, [8, 16])],
                           [nh.from_array(_floats([8, 16], 11), "sub_w")])
    else_g = oh.make_graph([oh.make_node("Identity", ["x"], ["e_out"])], "else_w", [],
                           [_vi("e_out", TP.FLOAT, [8, 16])])
    nodes = [
        oh.make_node("Constant", [], ["c"], value=nh.from_array(_floats([8, 16], 12), "")),
        oh.make_node("MatMul", ["x", "w1"], ["h"]),
        oh.make_node("Add", ["h", "c"], ["h2"]),
        oh.make_node("Add", ["h2", "small"], ["h3"]),
        oh.make_node("Greater", ["flag", "zero"], ["cond"]),
        oh.make_node("If", ["cond"], ["h4"], then_branch=then_g, else_branch=else_g),
        oh.make_node("Mul", ["h3", "h4"], ["y"]),
    ]
    g = oh.make_graph(
        nodes, "external", [_vi("x", TP.FLOAT, [8, 16]), _vi("flag", TP.FLOAT, [])],
        [_vi("y", TP.FLOAT, [8, 16])],
        [nh.from_array(_floats([16, 16], 13), "w1"), nh.from_array(_floats([16], 14), "small"),
         nh.from_array(np.array(0.0, np.float32), "zero")])
    return _model(g)


# -- structural comparison ------------------------------------------------------------------

def _same_scalar(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()  # -0.0 and NaN exactly
    return a == b


def _diff(a, b, path: str) -> str | None:
    """The first difference between two protobuf messages, field by field, or None."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} != {type(b).__name__}"
    for fd in a.DESCRIPTOR.fields:
        name = fd.name
        where = f"{path}.{name}" if path else name
        va, vb = getattr(a, name), getattr(b, name)
        if fd.is_repeated:
            if len(va) != len(vb):
                return f"{where}: {len(va)} items != {len(vb)} items"
            for i, (ia, ib) in enumerate(zip(va, vb)):
                if fd.message_type is not None:
                    found = _diff(ia, ib, f"{where}[{i}]")
                    if found:
                        return found
                elif not _same_scalar(ia, ib):
                    return f"{where}[{i}]: {ia!r} != {ib!r}"
        elif fd.message_type is not None:
            if a.HasField(name) != b.HasField(name):
                return f"{where}: set in one message only"
            if a.HasField(name):
                found = _diff(va, vb, where)
                if found:
                    return found
        elif not _same_scalar(va, vb):
            return f"{where}: {va!r} != {vb!r}"
    return None


def assert_models_equal(actual: onnx.ModelProto, expected: onnx.ModelProto) -> None:
    """Field-by-field equality of two models, failing with the path of the first difference."""
    found = _diff(actual, expected, "")
    assert found is None, f"models differ at {found}"


# -- onnxruntime ----------------------------------------------------------------------------

_ORT_SPARSE = ort.capi.onnxruntime_pybind11_state.SparseTensor  # what run() returns


def _dense(value: object) -> np.ndarray:
    """onnxruntime's output as a numpy array (a sparse Constant's output is a SparseTensor)."""
    if isinstance(value, _ORT_SPARSE):
        values, indices = value.values(), value.get_coo_data().indices()
        dense = np.zeros(value.dense_shape(), dtype=values.dtype)
        if indices.ndim == 1:  # linear indices
            dense.reshape(-1)[indices] = values
        else:
            dense[tuple(indices.T)] = values
        return dense
    return np.asarray(value)


def run_onnxruntime(model: onnx.ModelProto | str | os.PathLike[str], feeds: Feeds
                    ) -> list[np.ndarray]:
    """Run a model (a proto, or a path so that external data resolves) on onnxruntime's CPU."""
    options = ort.SessionOptions()
    options.log_severity_level = 3  # no warnings about unused initializers
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return [_dense(v) for v in session.run(None, feeds)]


def assert_same_outputs(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    """Identical outputs: same count, dtypes, shapes and values (NaNs in the same places)."""
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} != {e.dtype}"
        np.testing.assert_array_equal(a, e, err_msg=f"output {i}", strict=True)
