"""ONNX load/save round trips: every corpus model survives load → to_onnx → save → load.

Each corpus model (tests/graph/model_corpus.py) covers one thing ONNX models carry: opset
imports, IR version, producer, metadata and doc strings, initializers of every type, external
data, symbolic dims, value_info, every attribute type, subgraphs, custom domains, model-local
functions. Every one of them comes back byte-identical from `to_onnx()` and from a saved
file; the cases that cannot be byte-identical (their own tests below say why) are: initializer
and value_info lists in an order the IR does not keep, and models whose tensors moved to or
from external data files. Edited graphs must still pass the checker and compute what the edit
says.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from model_corpus import (
    CORPUS,
    FUNCS,
    CorpusModel,
    assert_models_equal,
    assert_same_outputs,
    constants,
    every_attribute_type,
    if_outer_scope,
    initializer_dtypes,
    initializer_dtypes_ir10,
    input_with_default_ir8,
    ir_version_7,
    local_functions,
    loop_nested,
    make_feeds,
    metadata_and_docs,
    model_with_external_data,
    node_names,
    optional_io,
    run_onnxruntime,
    scan_outer_scope,
    symbolic_dims,
)
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

import ge.graph
from ge.graph import CONST, DATA, NET_OUTPUT, UNKNOWN_DIM, Graph, Tensor
from ge.graph.external_data import graph_tensors, iter_tensors
from ge.graph.types import data_type_to_onnx
from versions import needs_runtime, runtime_at_least

RUNNABLE = [c for c in CORPUS if c.runnable]


def _feeds(entry: CorpusModel, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return entry.feeds(rng) if entry.feeds else make_feeds(model, rng)


def _assert_identical(actual: onnx.ModelProto, expected: onnx.ModelProto) -> None:
    assert_models_equal(actual, expected)
    assert actual.SerializeToString() == expected.SerializeToString()


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(params=CORPUS, ids=lambda c: c.name)
def entry(request: pytest.FixtureRequest) -> CorpusModel:
    return request.param


# -- the corpus, untouched ------------------------------------------------------------------

def test_corpus_model_is_valid_onnx(entry: CorpusModel) -> None:
    """Every corpus model passes the ONNX checker (full check unless it cannot type it)."""
    onnx.checker.check_model(entry.build(), full_check=entry.full_check)


def _dense_constant(proto: onnx.NodeProto) -> bool:
    return (proto.op_type == "Constant" and proto.domain in ("", "ai.onnx")
            and proto.attribute[0].name != "sparse_value")


def _assert_ge_shaped(graph: Graph, gp: onnx.GraphProto) -> None:
    """Inputs are Data nodes, initializers and Constants are Const nodes, outputs feed the
    NetOutput, every other ONNX node is one IR node; the same for every subgraph."""
    data = graph.get_data_nodes()
    # ir_version < 4: an input an initializer gives a value is that constant (onnxruntime's
    # reading); from 4 it is an input with a default
    constant_inputs = ({t.name for t in gp.initializer}
                       if graph is graph.root_graph() and graph.model.ir_version < 4 else set())
    fed = [vi.name for vi in gp.input if vi.name not in constant_inputs]
    assert [n.get_output_name(0) for n in data] == fed
    assert [n.get_attr("index") for n in data] == list(range(len(fed)))

    inputs = set(fed)
    expected_consts = [t.name for t in gp.initializer if t.name not in inputs]
    expected_consts += [s.values.name for s in gp.sparse_initializer]
    expected_consts += [p.output[0] for p in gp.node if _dense_constant(p)]
    consts = graph.nodes_of_type(CONST)
    assert sorted(n.get_output_name(0) for n in consts) == sorted(expected_consts)
    for node in consts:
        assert node.has_attr("value") or node.has_attr("sparse_value")

    net_output = graph.get_net_output()
    assert net_output is not None and len(graph.nodes_of_type(NET_OUTPUT)) == 1
    producers = [net_output.get_in_data_nodes_and_port_indexes(i)
                 for i in range(net_output.get_inputs_size())]
    assert [n.get_output_name(i) for n, i in producers] == [vi.name for vi in gp.output]

    ops = [n for n in graph.get_direct_nodes() if n.type not in (DATA, CONST, NET_OUTPUT)]
    protos = [p for p in gp.node if not _dense_constant(p)]
    assert [n.get_output_names() for n in ops] == [list(p.output) for p in protos]
    for node, proto in zip(ops, protos):
        assert (node.type, node.domain) == (proto.op_type, proto.domain)
        attributes = list(proto.attribute)
        if proto.op_type == "If":  # GE's order: then_branch first, whatever the file's order
            attributes.sort(key=lambda a: a.name != "then_branch")
        subgraph_protos = [g for a in attributes for g in ([a.g] if a.type == a.GRAPH
                                                           else a.graphs)]
        subgraphs = node.get_subgraphs()
        assert [g.name for g in subgraphs] == [g.name for g in subgraph_protos]
        for sub, sub_proto in zip(subgraphs, subgraph_protos):
            assert sub.parent_node is node and sub.parent_graph is graph
            _assert_ge_shaped(sub, sub_proto)


def test_ir_is_ge_shaped(entry: CorpusModel) -> None:
    """Loading gives GE's structure: Data, Const and NetOutput nodes around the operators."""
    model = entry.build()
    graph = ge.graph.load(model)
    graph.validate()
    _assert_ge_shaped(graph, model.graph)


def test_to_onnx_is_byte_identical(entry: CorpusModel) -> None:
    """load → to_onnx gives back the very model, field by field and byte for byte."""
    model = entry.build()
    _assert_identical(ge.graph.load(model).to_onnx(), model)


def test_save_and_reload_is_byte_identical(entry: CorpusModel, tmp_path: Path) -> None:
    """save writes the model's own bytes (inline, one file); loading the file gives it back."""
    model = entry.build()
    path = tmp_path / "model.onnx"
    ge.graph.load(model).save(path)
    assert _files(tmp_path) == ["model.onnx"]
    assert path.read_bytes() == model.SerializeToString()
    _assert_identical(ge.graph.load(path).to_onnx(), model)
    _assert_identical(ge.graph.load(path.read_bytes()).to_onnx(), model)


def _touch_every_node(graph: Graph) -> int:
    """Reconnect one input of every operator (public API), so export rebuilds its proto."""
    touched = 0
    for g in [graph, *graph.get_all_subgraphs()]:
        for node in g.get_direct_nodes():
            connected = [i for i in range(node.get_inputs_size())
                         if node.get_input_producer(i) is not None]
            if node.type in (DATA, CONST, NET_OUTPUT) or not connected:
                continue
            src, index = node.get_input_producer(connected[0])
            g.remove_edge(src, index, node, connected[0])
            g.add_data_edge(src, index, node, connected[0])
            touched += 1
    return touched


def test_rebuilt_nodes_export_the_same(entry: CorpusModel) -> None:
    """A node written from the IR rather than from its source proto (as after any edit) loses
    nothing either: names, domains, attributes of every kind, doc strings, metadata."""
    model = entry.build()
    graph = ge.graph.load(model)
    assert _touch_every_node(graph) > 0
    _assert_identical(graph.to_onnx(), model)


def test_reading_every_desc_exports_the_same(entry: CorpusModel) -> None:
    """A desc read from a loaded value is decoded once and kept; the kept desc still exports
    the proto it came from (types, dim_params, denotations, doc strings)."""
    model = entry.build()
    graph = ge.graph.load(model)
    for g in [graph, *graph.get_all_subgraphs()]:
        for node in g.get_direct_nodes():
            for i in range(node.get_outputs_size()):
                if node.has_output_desc(i):
                    first = node.get_output_desc(i)
                    assert node.get_output_desc(i) is not first  # each read is a copy
            for i in range(node.get_inputs_size()):
                node.get_input_desc(i)
    _assert_identical(graph.to_onnx(), model)


#: The onnxruntime that runs a corpus model (its oldest supported one runs the others), and
#: what an older one lacks; `_EXTERNAL`: the same, saved with every tensor in the data file.
_RUNTIME = {"initializer_dtypes_ir10": ("1.23", "has no Cast to or from 4-bit types")}
_EXTERNAL = {**_RUNTIME, **dict.fromkeys(("sparse_initializer", "constants"), (
    "1.27", "reads no sparse tensor whose parts are in the data file"))}


def _runnable(entries: list[CorpusModel], needs: dict[str, tuple[str, str]]) -> list[Any]:
    return [pytest.param(c, marks=needs_runtime(*needs[c.name])) if c.name in needs else c
            for c in entries]


@pytest.mark.parametrize("entry", _runnable(RUNNABLE, _RUNTIME), ids=lambda c: c.name)
def test_runs_identically_in_onnxruntime(entry: CorpusModel, tmp_path: Path) -> None:
    """The saved model computes exactly what the original computes."""
    model = entry.build()
    path = tmp_path / "model.onnx"
    ge.graph.load(model).save(path)
    feeds = _feeds(entry, model)
    assert_same_outputs(run_onnxruntime(path, feeds), run_onnxruntime(model, feeds))


# -- what the IR sees of each feature -------------------------------------------------------

@pytest.mark.parametrize("build", [initializer_dtypes, initializer_dtypes_ir10])
def test_initializer_values_and_types(build: Callable[[], onnx.ModelProto]) -> None:
    """Each initializer's Const holds its exact values and element type, whatever its storage."""
    model = build()
    graph = ge.graph.load(model)
    assert model.graph.initializer
    for tensor in model.graph.initializer:
        value = graph.find_node_by_name(tensor.name).get_attr("value")
        assert isinstance(value, Tensor)
        assert data_type_to_onnx(value.data_type) == tensor.data_type
        assert value.shape == list(tensor.dims)
        expected = nh.to_array(tensor)
        actual = value.numpy()
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        if expected.dtype == object:
            assert actual.tolist() == expected.tolist()
        else:
            assert actual.tobytes() == expected.tobytes()  # bit-exact, -0.0 and NaN included


def test_constant_forms_become_const_nodes() -> None:
    """Every dense Constant form becomes a Const whose value is what onnxruntime computes for
    it; a sparse Constant stays an operator (its value has no dense Tensor)."""
    model = constants()
    graph = ge.graph.load(model)
    outputs = dict(zip([o.name for o in model.graph.output],
                       run_onnxruntime(model, make_feeds(model, np.random.default_rng(0)))))
    for proto in model.graph.node:
        if proto.op_type != "Constant":
            continue
        producer, _ = graph.find_value(proto.output[0])
        if proto.attribute[0].name == "sparse_value":
            assert producer.type == "Constant"
            continue
        assert producer.type == CONST
        expected = outputs.get(proto.output[0])
        if expected is None:  # c_value feeds the Add; read it from the proto
            expected = nh.to_array(proto.attribute[0].t)
        actual = nh.to_array(producer.get_attr("value").to_proto())
        np.testing.assert_array_equal(actual, expected, strict=True)


def test_symbolic_and_unknown_dims_reach_the_descs() -> None:
    """dim_param names, unknown dims and unknown ranks show up in the IR's TensorDescs."""
    graph = ge.graph.load(symbolic_dims())
    x = graph.find_node_by_name("x").get_output_desc(0)
    assert list(x.get_shape()) == ["batch", UNKNOWN_DIM, 4]
    relu, _ = graph.find_value("r")
    assert list(relu.get_output_desc(0).get_shape()) == ["batch", UNKNOWN_DIM, 4]
    reduce, _ = graph.find_value("s")
    assert reduce.get_output_desc(0).get_shape().is_unknown_rank()
    net_output = graph.get_net_output()
    assert list(net_output.get_input_desc(0).get_shape()) == ["batch", 4]


def test_outer_scope_reads_are_edges_to_enclosing_graphs() -> None:
    """A subgraph reading an outer value is wired to the producer in the enclosing graph,
    two scopes up included."""
    graph = ge.graph.load(if_outer_scope())
    branch = graph.find_node_by_name("branch")
    then_g, else_g = branch.get_attr("then_branch"), branch.get_attr("else_branch")
    add = then_g.nodes_of_type("Add")[0]
    assert add.get_in_data_nodes() == [graph.find_node_by_name("x"),
                                       graph.find_node_by_name("w")]
    mul = else_g.nodes_of_type("Mul")[0]
    assert mul.get_in_data_nodes()[0] is graph.nodes_of_type("Neg")[0]

    graph = ge.graph.load(loop_nested())
    (body,) = graph.nodes_of_type("Loop")[0].get_subgraphs()
    inner_if = body.nodes_of_type("If")[0]
    inner_then, inner_else = inner_if.get_attr("then_branch"), inner_if.get_attr("else_branch")
    acc_in = body.find_node_by_name("acc_in")
    assert inner_then.nodes_of_type("Add")[0].get_in_data_nodes() == [
        acc_in, graph.find_node_by_name("w")]
    assert inner_else.nodes_of_type("Sub")[0].get_in_data_nodes() == [
        acc_in, graph.find_node_by_name("x")]

    graph = ge.graph.load(scan_outer_scope())
    (body,) = graph.nodes_of_type("Scan")[0].get_subgraphs()
    assert body.nodes_of_type("Mul")[0].get_in_data_nodes()[1] is graph.find_node_by_name("scale")


def _as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def test_every_attribute_type_is_read() -> None:
    """All 14 attribute types load with their kind and value; graph attributes are subgraphs."""
    model = every_attribute_type()
    node = ge.graph.load(model).find_node_by_name("everything")
    proto = model.graph.node[0]
    assert node.domain == "com.example.custom"
    assert {a.type for a in proto.attribute} == set(range(1, 15))  # FLOAT .. TYPE_PROTOS
    assert node.get_attr_names() == [a.name for a in proto.attribute]
    for attr in proto.attribute:
        assert node.get_attr_kind(attr.name) == attr.type
        value = node.get_attr(attr.name)
        if attr.type == attr.GRAPH:
            assert isinstance(value, Graph) and value.name == attr.g.name
        elif attr.type == attr.GRAPHS:
            assert [g.name for g in value] == [g.name for g in attr.graphs]
        elif attr.type == attr.TENSOR:
            np.testing.assert_array_equal(value.numpy(), nh.to_array(attr.t))
        elif attr.type == attr.TENSORS:
            for tensor, expected in zip(value, attr.tensors, strict=True):
                assert tensor.to_proto(expected.name) == expected
        elif attr.type == attr.STRING:  # str when it is UTF-8, bytes otherwise
            assert _as_bytes(value) == attr.s
        elif attr.type == attr.STRINGS:
            assert [_as_bytes(v) for v in value] == list(attr.strings)
        else:
            assert value == oh.get_attribute_value(attr)


def test_editing_one_attribute_keeps_the_others() -> None:
    """Setting one attribute rewrites the node; the 13 other attributes (doc strings
    included) and the node's identity are written back unchanged."""
    model = every_attribute_type()
    graph = ge.graph.load(model)
    graph.find_node_by_name("everything").set_attr("i", 5)
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    expected = onnx.ModelProto()
    expected.CopyFrom(model)
    next(a for a in expected.graph.node[0].attribute if a.name == "i").i = 5
    _assert_identical(exported, expected)


def test_optional_inputs_and_outputs_stay_omitted() -> None:
    """An omitted middle input is an unconnected anchor; omitted outputs keep empty names."""
    graph = ge.graph.load(optional_io())
    clip = graph.nodes_of_type("Clip")[0]
    assert clip.get_inputs_size() == 3
    assert clip.get_input_producer(1) is None
    assert clip.get_input_producer(2)[0] is graph.find_node_by_name("hi")
    assert graph.nodes_of_type("LSTM")[0].get_output_names() == ["", "h"]
    assert graph.nodes_of_type("Dropout")[0].get_output_names() == ["y", ""]


@pytest.mark.parametrize("duplicates", [False, True])
def test_empty_and_duplicate_node_names(duplicates: bool) -> None:
    """Nodes without a name or with a taken one get unique IR names, and export writes the
    names they had."""
    model = node_names(duplicates)
    graph = ge.graph.load(model)
    names = [n.name for n in graph.get_direct_nodes()]
    assert len(set(names)) == len(names) and "" not in names
    assert graph.find_node_by_name("dup").type == "Neg"
    exported = graph.to_onnx()
    assert [n.name for n in exported.graph.node] == [n.name for n in model.graph.node]


def test_input_default_value_is_kept_and_overridable() -> None:
    """An input with an initializer stays a Data node (no Const); onnxruntime uses the default
    or the fed value alike for original and round trip."""
    model = input_with_default_ir8()
    graph = ge.graph.load(model)
    assert graph.find_node_by_name("k").type == DATA
    assert [n.get_output_name(0) for n in graph.nodes_of_type(CONST)] == ["w", "b"]
    saved = graph.to_onnx()
    rng = np.random.default_rng(0)
    for feeds in ({"x": rng.standard_normal((2, 2), np.float32)},
                  {"x": rng.standard_normal((2, 2), np.float32),
                   "k": rng.standard_normal((2, 2), np.float32)}):
        assert_same_outputs(run_onnxruntime(saved, feeds), run_onnxruntime(model, feeds))


def test_interleaved_input_default_keeps_its_place_among_initializers() -> None:
    """An input's default listed between plain initializers comes back where it was (the IR
    keeps defaults apart from Const nodes, and it was written after them: trial Y found the
    untouched model no longer byte-identical); a constant made after loading comes last."""
    model = input_with_default_ir8(default_last=False)
    assert [t.name for t in model.graph.initializer] == ["w", "k", "b"]
    graph = ge.graph.load(model)
    _assert_identical(graph.to_onnx(), model)
    graph.add_const(np.zeros(2, np.float32), name="later")
    assert [t.name for t in graph.to_onnx().graph.initializer] == ["w", "k", "b", "later"]


def test_value_info_is_written_in_the_files_order() -> None:
    """value_info listed out of node order comes back as the file had it (it was re-sorted
    into node order: an untouched model was not written byte for byte); a value made after
    loading comes after them."""
    g = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Neg", ["r"], ["s"]),
         oh.make_node("Abs", ["s"], ["y"])], "order",
        [oh.make_tensor_value_info("x", TP.FLOAT, [2])],
        [oh.make_tensor_value_info("y", TP.FLOAT, [2])],
        value_info=[oh.make_tensor_value_info(n, TP.FLOAT, [2]) for n in ("y", "s", "gone", "r")])
    model = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    graph = ge.graph.load(model)
    exported = graph.to_onnx()
    assert [vi.name for vi in exported.graph.value_info] == ["y", "s", "gone", "r"]
    assert exported.SerializeToString() == model.SerializeToString()
    feeds = {"x": np.random.default_rng(0).standard_normal(2, np.float32)}
    assert_same_outputs(run_onnxruntime(exported, feeds), run_onnxruntime(model, feeds))
    relu = next(n for n in graph.get_direct_nodes() if n.type == "Relu")
    late = graph.add_node("Identity", num_inputs=1, output_names=["late"])
    graph.add_data_edge(relu, 0, late, 0)
    late.update_output_desc(0, relu.get_output_desc(0))
    names = [vi.name for vi in graph.to_onnx().graph.value_info]
    assert names == ["y", "s", "gone", "r", "late"]


def test_model_fields_are_in_model_info() -> None:
    """Opsets, IR version, producer, metadata and functions are readable from the root graph."""
    model = metadata_and_docs()
    graph = ge.graph.load(model)
    info = graph.model
    assert info.ir_version == 10 and graph.opset_imports == {"": 21}
    assert (info.producer_name, info.producer_version) == ("corpus-producer", "1.2.3")
    assert (info.domain, info.model_version) == ("org.example.models", 42)
    assert info.metadata_props == {"author": "tests", "license": "Apache-2.0", "empty": ""}
    functions = ge.graph.load(local_functions())
    assert [f.name for f in functions.model.functions] == ["ScaledTanh", "TwiceScaled"]
    assert functions.get_opset_version(FUNCS) == 1


# -- external data --------------------------------------------------------------------------

def _write_external(folder: Path, layout: str) -> Path:
    model = model_with_external_data()
    path = folder / "model.onnx"
    if layout == "subfolder":
        (folder / "data").mkdir()
    onnx.save_model(model, path, save_as_external_data=True,
                    all_tensors_to_one_file=layout != "per-tensor",
                    location="data/weights.bin" if layout == "subfolder" else "weights.bin",
                    size_threshold=256, convert_attribute=True)
    return path


def _external_tensors(model: onnx.ModelProto) -> list[str]:
    return [t.name for t in iter_tensors(model) if t.data_location == TP.EXTERNAL]


def test_graph_tensors_walks_every_tensor_with_its_kind() -> None:
    """`graph_tensors` (the one walk behind `iter_tensors` and the opset converter's
    stand-ins) yields initializers, sparse parts and tensor attributes, bodies included."""
    def dense(name: str) -> TP:
        return oh.make_tensor(name, TP.FLOAT, [1], [1.0])

    def sparse(name: str) -> onnx.SparseTensorProto:
        return oh.make_sparse_tensor(dense(f"{name}_v"),
                                     oh.make_tensor(f"{name}_i", TP.INT64, [1], [0]), [2])

    body = oh.make_graph([oh.make_node("Constant", [], ["bc"], sparse_value=sparse("bs"))],
                         "body", [], [oh.make_tensor_value_info("bc", TP.FLOAT, [2])],
                         initializer=[dense("bw")])
    graph = oh.make_graph(
        [oh.make_node("Constant", [], ["c"], value=dense("c")),
         oh.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=body),
         oh.make_node("Custom", [], ["z"], domain="custom", ts=[dense("t0"), dense("t1")])],
        "g", [oh.make_tensor_value_info("cond", TP.BOOL, [])],
        [oh.make_tensor_value_info("y", TP.FLOAT, [2])],
        initializer=[dense("w")], sparse_initializer=[sparse("s")])
    assert [(t.name, kind) for t, kind in graph_tensors(graph)] == [
        ("w", "initializer"), ("s_v", "sparse"), ("s_i", "sparse"), ("c", "attribute"),
        *[("bw", "initializer"), ("bs_v", "sparse"), ("bs_i", "sparse")] * 2,
        ("t0", "attribute"), ("t1", "attribute")]
    model = oh.make_model(graph)
    assert [t.name for t in iter_tensors(model)] == [t.name for t, _ in graph_tensors(graph)]


@pytest.mark.parametrize("layout", ["one-file", "per-tensor", "subfolder"])
def test_external_data_is_read_on_load(tmp_path: Path, layout: str) -> None:
    """Tensors in external files (initializers, a Constant's value, a subgraph's initializer)
    load; the model equals what onnx.load reads and runs identically."""
    path = _write_external(tmp_path, layout)
    on_disk = onnx.load(path, load_external_data=False)
    assert sorted(_external_tensors(on_disk)) == ["", "sub_w", "w1"]  # "" is the Constant's
    before = _files(tmp_path)

    exported = ge.graph.load(path).to_onnx()
    assert _external_tensors(exported) == []
    _assert_identical(exported, onnx.load(path))
    assert _files(tmp_path) == before
    # a proto with external references loads too when given its folder
    _assert_identical(ge.graph.load(on_disk, base_dir=tmp_path).to_onnx(), exported)

    feeds = {"x": np.random.default_rng(0).standard_normal((8, 16), np.float32),
             "flag": np.array(1.0, np.float32)}
    assert_same_outputs(run_onnxruntime(exported, feeds), run_onnxruntime(path, feeds))


def _canonical_tensors(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose tensors all hold their values in raw_data (storage differs, values not)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for tensor in iter_tensors(out):
        assert tensor.data_location != TP.EXTERNAL
        if tensor.data_type == TP.STRING:
            continue
        canonical = nh.from_array(nh.to_array(tensor), tensor.name)
        for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            tensor.ClearField(field)
        tensor.ClearField("data_location")
        tensor.raw_data = canonical.raw_data
    return out


def test_save_with_external_data(tmp_path: Path) -> None:
    """external_data=True moves large tensors (initializers, Constant values, subgraph
    initializers) into `<model>.data`; small ones stay inline; it reloads and runs the same."""
    model = model_with_external_data()
    path = tmp_path / "model.onnx"
    ge.graph.load(model).save(path, external_data=True, size_threshold=256)
    assert _files(tmp_path) == ["model.onnx", "model.onnx.data"]

    on_disk = onnx.load(path, load_external_data=False)
    assert sorted(_external_tensors(on_disk)) == ["", "sub_w", "w1"]
    for tensor in iter_tensors(on_disk):
        entries = {e.key: e.value for e in tensor.external_data}
        if entries:
            assert entries["location"] == "model.onnx.data"
            assert int(entries["offset"]) % 16 == 0  # (none of 1 MiB: page-aligned)
    assert path.stat().st_size < 2048 <= (tmp_path / "model.onnx.data").stat().st_size

    assert_models_equal(_canonical_tensors(onnx.load(path)), _canonical_tensors(model))
    assert_models_equal(_canonical_tensors(ge.graph.load(path).to_onnx()),
                        _canonical_tensors(model))
    onnx.checker.check_model(str(path), full_check=True)
    feeds = {"x": np.random.default_rng(0).standard_normal((8, 16), np.float32),
             "flag": np.array(1.0, np.float32)}
    assert_same_outputs(run_onnxruntime(path, feeds), run_onnxruntime(model, feeds))


def test_external_data_pages_only_the_tensors_worth_mapping(tmp_path: Path) -> None:
    """Tensors of 1 MiB and more start at a multiple of 4096 in the data file (onnxruntime
    maps those), smaller ones are packed at multiples of 16: a model of 200 tensors of
    1.5 KiB and two of 1 MiB takes their bytes and at most 16 more each, not a page each
    (ge once padded every tensor to 4096: four times a small model's weights). onnxruntime
    runs it, and a second save writes the same bytes."""
    rng = np.random.default_rng(0)
    small = [rng.standard_normal(384).astype(np.float32) for _ in range(200)]  # 1536 bytes
    large = [rng.standard_normal(1 << 18).astype(np.float32) for _ in range(2)]  # 1 MiB
    nodes, inits, value = [], [], "x"
    for i, array in enumerate(small):
        inits.append(nh.from_array(array, f"s{i}"))
        nodes.append(oh.make_node("Add", [value, f"s{i}"], [f"a{i}"]))
        value = f"a{i}"
    for i, array in enumerate(large):
        inits.append(nh.from_array(array.reshape(512, 512), f"l{i}"))
        nodes.append(oh.make_node("Slice", [f"l{i}", "zero", "n384", "zero1"], [f"c{i}"]))
        nodes.append(oh.make_node("Add", [value, f"c{i}"], [f"b{i}"]))
        value = f"b{i}"
    inits += [nh.from_array(np.array([0, 0], np.int64), "zero"),
              nh.from_array(np.array([1, 384], np.int64), "n384"),
              nh.from_array(np.array([0, 1], np.int64), "zero1")]
    nodes.append(oh.make_node("Identity", [value], ["y"]))
    model = oh.make_model(oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info("x", TP.FLOAT, [1, 384])],
        [oh.make_tensor_value_info("y", TP.FLOAT, [1, 384])], inits),
        opset_imports=[oh.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    ge.graph.load(model).save(path, external_data=True)

    offsets = {t.name: int({e.key: e.value for e in t.external_data}["offset"])
               for t in onnx.load(path, load_external_data=False).graph.initializer
               if t.external_data}
    assert sorted(offsets) == sorted([f"s{i}" for i in range(200)] + ["l0", "l1"])
    assert all(offsets[f"l{i}"] % 4096 == 0 for i in range(2))
    assert all(offset % 16 == 0 for offset in offsets.values())
    weights = sum(a.nbytes for a in small + large)
    size = (tmp_path / "model.onnx.data").stat().st_size
    assert weights <= size <= weights + 2 * 4096  # (1536 is a multiple of 16)
    feeds = {"x": rng.standard_normal((1, 384)).astype(np.float32)}
    assert_same_outputs(run_onnxruntime(path, feeds), run_onnxruntime(model, feeds))

    again = tmp_path / "again"
    again.mkdir()
    ge.graph.load(path).save(again / "model.onnx", external_data=True)
    for name in ("model.onnx", "model.onnx.data"):
        assert (again / name).read_bytes() == (tmp_path / name).read_bytes()


def test_save_external_data_under_another_name(tmp_path: Path) -> None:
    """external_data_name names the data file written beside the model."""
    path = tmp_path / "model.onnx"
    ge.graph.load(model_with_external_data()).save(path, external_data=True,
                                                   external_data_name="weights.bin")
    assert _files(tmp_path) == ["model.onnx", "weights.bin"]
    assert {e.value for t in iter_tensors(onnx.load(path, load_external_data=False))
            for e in t.external_data if e.key == "location"} == {"weights.bin"}


@pytest.mark.parametrize("entry", [c for c in CORPUS if c.name in (
    "initializer_dtypes", "initializer_dtypes_ir10", "sparse_initializer", "constants",
    "every_attribute_type", "loop_nested")], ids=lambda c: c.name)
def test_every_tensor_kind_survives_external_data(entry: CorpusModel, tmp_path: Path) -> None:
    """With size_threshold=0 every tensor (typed or raw storage, sub-byte types, attribute
    tensors) goes to the data file and reloads with the same values; a sparse tensor's parts
    stay in the model, as onnx's own writer leaves them (onnx's checker and `onnx.load` do
    not read them from a data file)."""
    model = entry.build()
    path = tmp_path / "model.onnx"
    ge.graph.load(model).save(path, external_data=True, size_threshold=0)
    on_disk = onnx.load(path, load_external_data=False)
    if entry.name == "sparse_initializer":
        assert not _external_tensors(on_disk)
        onnx.checker.check_model(str(path))
    else:
        assert _external_tensors(on_disk), "nothing went to the data file"
    assert_models_equal(_canonical_tensors(ge.graph.load(path).to_onnx()),
                        _canonical_tensors(model))
    if entry.runnable:
        needs = _EXTERNAL.get(entry.name)
        if needs is not None and not runtime_at_least(needs[0]):  # (the rest has passed)
            pytest.skip(f"not run: onnxruntime {onnxruntime.__version__} {needs[1]} "
                        f"({needs[0]} on does)")
        feeds = _feeds(entry, model)
        assert_same_outputs(run_onnxruntime(path, feeds), run_onnxruntime(model, feeds))


def test_external_model_saves_inline_by_default(tmp_path: Path) -> None:
    """A small model loaded from external data saves as one self-contained file by default."""
    path = _write_external(tmp_path, "one-file")
    out = tmp_path / "out" / "inline.onnx"
    out.parent.mkdir()
    ge.graph.load(path).save(out)
    assert _files(out.parent) == ["inline.onnx"]
    _assert_identical(onnx.load(out), onnx.load(path))


# -- edits ----------------------------------------------------------------------------------

def _export_checked(graph: Graph, tmp_path: Path) -> onnx.ModelProto:
    """Export an edited graph: it validates, passes the full checker, and saves/reloads the
    same; returns the model."""
    graph.validate()
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    path = tmp_path / "edited.onnx"
    graph.save(path)
    _assert_identical(ge.graph.load(path).to_onnx(), exported)
    return exported


def test_edit_set_attribute(tmp_path: Path) -> None:
    """Setting Softmax's axis changes what the saved model computes, and nothing else (at
    opset 12, axis 0 means a softmax over all elements)."""
    model = ir_version_7()
    graph = ge.graph.load(model)
    graph.nodes_of_type("Softmax")[0].set_attr("axis", 0)
    exported = _export_checked(graph, tmp_path)
    assert (exported.ir_version, list(exported.opset_import)) == (7, list(model.opset_import))
    x = np.random.default_rng(0).standard_normal((2, 5), np.float32)
    (y,) = run_onnxruntime(exported, {"x": x})
    e = np.exp(x - x.max())
    np.testing.assert_allclose(y, e / e.sum(), rtol=1e-6)


def test_edit_insert_node(tmp_path: Path) -> None:
    """A Relu inserted before the output (add_node, add_data_edge) runs; the model's
    metadata, doc strings and the other nodes are kept."""
    model = metadata_and_docs()
    graph = ge.graph.load(model)
    add, out = graph.find_node_by_name("add"), graph.get_net_output()
    relu = graph.add_node("Relu", num_inputs=1)
    graph.remove_edge(add, 0, out, 0)
    graph.add_data_edge(add, 0, relu, 0)
    graph.add_data_edge(relu, 0, out, 0)
    exported = _export_checked(graph, tmp_path)

    assert exported.metadata_props == model.metadata_props
    assert (exported.doc_string, exported.producer_name) == (model.doc_string,
                                                             model.producer_name)
    assert exported.graph.doc_string == model.graph.doc_string
    assert exported.graph.metadata_props == model.graph.metadata_props
    assert exported.graph.node[0] == model.graph.node[0]
    # The output keeps "y": the Add's value, now the Relu's input, is renamed.
    assert [list(n.output) for n in exported.graph.node] == [["mid"], ["y_1"], ["y"]]
    assert exported.graph.value_info[:] == model.graph.value_info[:]
    assert exported.graph.output[0].doc_string == model.graph.output[0].doc_string
    x = np.random.default_rng(0).standard_normal((2, 3), np.float32)
    w = nh.to_array(model.graph.initializer[0])
    (y,) = run_onnxruntime(exported, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(-x + w, 0))


def test_edit_remove_node_and_reconnect(tmp_path: Path) -> None:
    """Removing a node from a chain and wiring around it drops exactly that node."""
    model = node_names()
    graph = ge.graph.load(model)
    graph.remove_node(graph.find_node_by_name("abs"))
    graph.add_data_edge(graph.find_node_by_name("dup"), 0, graph.nodes_of_type("Exp")[0], 0)
    exported = _export_checked(graph, tmp_path)
    assert [n.name for n in exported.graph.node] == ["", "dup", "", "x", "NetOutput"]
    x = np.random.default_rng(0).standard_normal(3, np.float32)
    (y,) = run_onnxruntime(exported, {"x": x})
    expected = np.maximum(1 / (1 + np.exp(-np.exp(-np.maximum(x, 0)))), 0)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_edit_subgraphs(tmp_path: Path) -> None:
    """Edits inside If branches: a new Const value, and a node reading an outer-scope value."""
    model = if_outer_scope()
    graph = ge.graph.load(model)
    branch = graph.find_node_by_name("branch")
    then_g, else_g = branch.get_attr("then_branch"), branch.get_attr("else_branch")
    else_g.nodes_of_type(CONST)[0].set_attr("value", Tensor(np.array(3.0, np.float32)))
    add, out = then_g.nodes_of_type("Add")[0], then_g.get_net_output()
    mul = then_g.add_node("Mul", num_inputs=2)
    then_g.remove_edge(add, 0, out, 0)
    then_g.add_data_edge(add, 0, mul, 0)
    then_g.add_data_edge(graph.nodes_of_type("Neg")[0], 0, mul, 1)  # the root's "nx"
    then_g.add_data_edge(mul, 0, out, 0)
    exported = _export_checked(graph, tmp_path)

    x = np.random.default_rng(0).standard_normal((2, 3), np.float32)
    w = nh.to_array(model.graph.initializer[0])
    (taken,) = run_onnxruntime(exported, {"cond": np.array(True), "x": x})
    np.testing.assert_array_equal(taken, (x + w) * -x)
    (other,) = run_onnxruntime(exported, {"cond": np.array(False), "x": x})
    np.testing.assert_array_equal(other, -x * np.float32(3.0))


def test_edit_function_call_attribute(tmp_path: Path) -> None:
    """Changing the attribute passed to a model-local function changes its result."""
    graph = ge.graph.load(local_functions())
    call = graph.nodes_of_type("ScaledTanh", FUNCS)[0]
    call.set_attr("alpha", 2.0)
    exported = _export_checked(graph, tmp_path)
    x = np.random.default_rng(0).standard_normal((2, 3), np.float32)
    (y,) = run_onnxruntime(exported, {"x": x})
    a = 2.0 * np.tanh(x)
    np.testing.assert_allclose(y, 0.5 * np.tanh(a) + np.tanh(x), rtol=1e-6)


def test_edit_constants(tmp_path: Path) -> None:
    """A replaced initializer value and a new Const (add_const) are written as initializers;
    the input's default stays an overridable input."""
    model = input_with_default_ir8()
    graph = ge.graph.load(model)
    rng = np.random.default_rng(0)
    new_b = rng.standard_normal((2, 2), np.float32)
    graph.find_node_by_name("b").set_attr("value", Tensor(new_b))
    offset = graph.add_const(np.full((2, 2), 0.25, np.float32), name="offset")
    sub, out = graph.nodes_of_type("Sub")[0], graph.get_net_output()
    add = graph.add_node("Add", num_inputs=2)
    graph.remove_edge(sub, 0, out, 0)
    graph.add_data_edge(sub, 0, add, 0)
    graph.add_data_edge(offset, 0, add, 1)
    graph.add_data_edge(add, 0, out, 0)
    exported = _export_checked(graph, tmp_path)
    assert sorted(t.name for t in exported.graph.initializer) == sorted(
        ["b", "k", "w", offset.get_output_name(0)])

    inits = {t.name: nh.to_array(t) for t in model.graph.initializer}
    w, k = inits["w"], inits["k"]
    x = rng.standard_normal((2, 2), np.float32)
    (y,) = run_onnxruntime(exported, {"x": x})
    np.testing.assert_allclose(y, (x + w) * k - new_b + np.float32(0.25), rtol=1e-6)


def test_edit_then_save_with_external_data(tmp_path: Path) -> None:
    """An edited weight goes to the data file with the others and the model computes with it."""
    model = model_with_external_data()
    graph = ge.graph.load(model)
    w1 = np.random.default_rng(5).standard_normal((16, 16), np.float32)
    graph.find_node_by_name("w1").set_attr("value", Tensor(w1))
    path = tmp_path / "model.onnx"
    graph.save(path, external_data=True, size_threshold=256)
    assert "w1" in _external_tensors(onnx.load(path, load_external_data=False))
    onnx.checker.check_model(str(path), full_check=True)

    inits = {t.name: nh.to_array(t) for t in iter_tensors(model) if t.name}
    c = nh.to_array(model.graph.node[0].attribute[0].t)
    x = np.random.default_rng(0).standard_normal((8, 16), np.float32)
    for flag in (1.0, -1.0):
        (y,) = run_onnxruntime(path, {"x": x, "flag": np.array(flag, np.float32)})
        branch = x + inits["sub_w"] if flag > 0 else x
        np.testing.assert_allclose(y, (x @ w1 + c + inits["small"]) * branch, rtol=1e-5,
                                   atol=1e-5)


# -- over protobuf's 2 GB limit -------------------------------------------------------------

ROWS, COLS = 262_400, 1024  # two float32 tables of 1.07 GB: 2.15 GB > 2**31 bytes


@pytest.mark.slow
def test_save_over_2gb(tmp_path: Path) -> None:
    """A model whose initializers exceed 2**31 bytes saves with the default external_data
    (external automatically), reloads with the same tensors and runs in onnxruntime."""
    g = oh.make_graph(
        [oh.make_node("Gather", ["table_a", "idx"], ["ga"]),
         oh.make_node("Gather", ["table_b", "idx"], ["gb"]),
         oh.make_node("Add", ["ga", "gb"], ["y"])], "big",
        [oh.make_tensor_value_info("idx", TP.INT64, [3])],
        [oh.make_tensor_value_info("y", TP.FLOAT, [3, COLS])],
        [nh.from_array(np.zeros((1, COLS), np.float32), "table_a"),
         nh.from_array(np.zeros((1, COLS), np.float32), "table_b")])
    graph = ge.graph.load(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)],
                                        ir_version=8))
    rows = np.arange(ROWS, dtype=np.float32)[:, None]
    cols = np.arange(COLS, dtype=np.float32)[None, :]
    table_a = np.empty((ROWS, COLS), np.float32)
    table_a[:] = rows
    table_b = np.empty((ROWS, COLS), np.float32)
    table_b[:] = cols
    assert table_a.nbytes + table_b.nbytes > 2**31
    graph.find_node_by_name("table_a").set_attr("value", Tensor(table_a))
    graph.find_node_by_name("table_b").set_attr("value", Tensor(table_b))
    del table_a, table_b

    path = tmp_path / "big.onnx"
    data = tmp_path / "big.onnx.data"
    try:
        graph.save(path)
        del graph
        assert _files(tmp_path) == ["big.onnx", "big.onnx.data"]
        assert path.stat().st_size < 4096 and data.stat().st_size > 2**31

        reloaded = ge.graph.load(path)
        picks = np.array([0, 1000, ROWS - 1])
        for name, expected in (("table_a", rows[picks] + 0 * cols), ("table_b", 0 * rows[picks]
                                                                      + cols)):
            value = reloaded.find_node_by_name(name).get_attr("value")
            assert value.shape == [ROWS, COLS]
            np.testing.assert_array_equal(value.numpy()[picks], expected)
        del reloaded, value

        idx = np.array([0, 7, ROWS - 1], np.int64)
        (y,) = run_onnxruntime(path, {"idx": idx})
        np.testing.assert_array_equal(y, rows[idx] + cols)
    finally:
        for file in (path, data):
            if file.exists():
                os.unlink(file)
