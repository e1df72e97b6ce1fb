"""Regressions found by differential fuzzing of `ge.compile` (minimized models).

Each case is a valid model that compiled into a crash, a model onnx.checker rejects, or one
that lost an output name. Every compiled model here is saved, passes the full checker,
keeps the source's output names in order, and computes what the source computes in
onnxruntime (graph optimizations off, so onnxruntime does not repair anything itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ge
import ge.graph
from ge.graph import Graph

F = TensorProto.FLOAT
I64 = TensorProto.INT64
OPSET = [helper.make_opsetid("", 17)]
Feeds = dict[str, np.ndarray]


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=OPSET, ir_version=8)
    onnx.checker.check_model(model, full_check=True)  # the source is valid
    return model


def _f32(name: str, values: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


def _run(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _run_reference(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    return list(ReferenceEvaluator(model).run(None, feeds))


def _graphs(gp: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield gp
    for node in gp.node:
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
                yield from _graphs(sub)


def _changed(result: ge.CompileResult) -> set[tuple[str, str]]:
    """(pass, graph) of every pass run that changed something."""
    return {(r.pass_name, r.graph_name) for r in result.report.records if r.changed}


def _compile_soundly(source: onnx.ModelProto, feeds: Iterable[Feeds], tmp_path: Path,
                     run: Callable[[onnx.ModelProto, Feeds], list[np.ndarray]] = _run,
                     **options: object) -> tuple[onnx.ModelProto, ge.CompileResult]:
    """Compile `source`, save it, and check the saved model: full checker, output names in
    order, the numbers of the source (in onnxruntime unless `run` says otherwise);
    compiling again writes the same bytes."""
    result = ge.compile(source, **options)  # type: ignore[arg-type]
    path = tmp_path / "compiled.onnx"
    result.save(path)
    saved = onnx.load(path)
    onnx.checker.check_model(saved, full_check=True)
    assert [o.name for o in saved.graph.output] == [o.name for o in source.graph.output]
    for feed in feeds:
        for want, got in zip(run(source, feed), run(saved, feed), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    again = tmp_path / "again.onnx"
    ge.compile(source, **options).save(again)  # type: ignore[arg-type]
    assert again.read_bytes() == path.read_bytes()
    return saved, result


# -- A: names made by passes in nested graphs must not shadow each other --------------------


def _fusions_in_root_and_body() -> onnx.ModelProto:
    """Conv(+bias)+BatchNormalization in an If then-branch, Conv(+bias)+Add-by-constant in
    the root: both fusions fire, each making new values ("Conv:0", "Const:0", ...)."""
    def vi(name: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, F, [1, 1, 2, 2])

    then = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["cv1"]),
         helper.make_node("BatchNormalization", ["cv1", "s", "b", "m", "v"], ["yb"])],
        "then", [], [vi("yb")],
        initializer=[_f32("w1", [[[[2.0]]]]), _f32("b1", [1.0]), _f32("s", [1.0]),
                     _f32("b", [0.0]), _f32("m", [0.0]), _f32("v", [1.0])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["ye"])], "else", [],
                              [vi("ye")])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["yi"], then_branch=then, else_branch=other),
         helper.make_node("Conv", ["x", "w0", "b0"], ["cv0"]),
         helper.make_node("Add", ["cv0", "a0"], ["y0"])],
        "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), vi("x")],
        [vi("yi"), vi("y0")],
        initializer=[_f32("w0", [[[[3.0]]]]), _f32("b0", [1.0]), _f32("a0", [1.0])])
    return _model(graph)


def test_fusions_in_a_root_and_a_body_make_no_shadowing_names(tmp_path: Path) -> None:
    source = _fusions_in_root_and_body()
    x = np.random.default_rng(0).standard_normal((1, 1, 2, 2)).astype(np.float32)
    feeds = [{"cond": np.array(flag), "x": x} for flag in (True, False)]
    saved, result = _compile_soundly(source, feeds, tmp_path)
    assert {("ConvBatchNormFusion", "then"), ("ConvAddMulFusion", "g")} <= _changed(result)
    root = {v for n in saved.graph.node for v in n.output} | {
        t.name for t in saved.graph.initializer} | {i.name for i in saved.graph.input}
    (if_node,) = [n for n in saved.graph.node if n.op_type == "If"]
    for attr in if_node.attribute:
        body = {v for n in attr.g.node for v in n.output} | {t.name for t in attr.g.initializer}
        assert not body & root, attr.name


def _root_with_body_value(value: str) -> tuple[Graph, Graph]:
    """A root whose If then-branch holds a value named `value`."""
    x = helper.make_tensor_value_info("x", F, [2])
    then = helper.make_graph([helper.make_node("Neg", ["x"], [value])], "then", [],
                             [helper.make_tensor_value_info(value, F, [2])])
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), x],
        [helper.make_tensor_value_info("y", F, [2])])
    root = ge.graph.load(_model(graph))
    (if_node,) = root.nodes_of_type("If")
    return root, if_node.get_attr("then_branch")


def test_a_new_root_value_avoids_the_names_of_its_bodies() -> None:
    """A value made in the root must not take a name a body holds (the body would shadow
    it); a body's own new values already avoid the root's."""
    root, then = _root_with_body_value("Sqrt:0")
    made = root.add_node("Sqrt", num_inputs=1)
    assert made.name == "Sqrt"  # node names are per graph
    assert made.get_output_name(0) == "Sqrt:0_1"
    with pytest.raises(RuntimeError, match="already used"):
        root.add_node("Sqrt", name="s2", output_names=["Sqrt:0"])
    inner = then.add_node("Sqrt", num_inputs=1, name="inner")
    assert inner.get_output_name(0) == "inner:0"
    assert not [p for p in root.find_problems() if p.kind == "duplicate-name"]


def test_a_removed_body_frees_its_names_and_a_rollback_restores_them() -> None:
    root, _ = _root_with_body_value("Sqrt:0")
    (if_node,) = root.nodes_of_type("If")
    with pytest.raises(KeyError), root.transaction():
        root.remove_node(if_node)
        assert root.add_node("Sqrt", num_inputs=1).get_output_name(0) == "Sqrt:0"
        raise KeyError("roll back")
    assert root.nodes_of_type("If") == [if_node]
    assert root.add_node("Sqrt", num_inputs=1).get_output_name(0) == "Sqrt:0_1"


def test_names_held_inside_follow_every_change_of_the_bodies() -> None:
    """The names held inside a graph are kept between questions (a main graph of 4,000
    bodies walked them all for every constant a fold made): each way a body's names change
    is seen at the next question, the rollback of one too."""
    root, then = _root_with_body_value("Sqrt:0")
    assert root.add_node("Sqrt", num_inputs=1).get_output_name(0) == "Sqrt:0_1"  # (kept)
    (neg,) = then.nodes_of_type("Neg")
    with pytest.raises(KeyError), root.transaction():
        then.remove_node(neg)  # a change inside the body
        assert root.add_node("Neg", name="n1", output_names=["Sqrt:0"])
        raise KeyError("roll back")
    with pytest.raises(RuntimeError, match="already used"):
        root.add_node("Neg", name="n2", output_names=["Sqrt:0"])  # back after the rollback
    (if_node,) = root.nodes_of_type("If")
    if_node.remove_attr("then_branch")  # the body is discarded
    assert root.add_node("Neg", name="n3", output_names=["Sqrt:0"])
    root.remove_node(root.find_node_by_name("n3"))
    if_node.set_attr("then_branch", then)  # and comes back
    with pytest.raises(RuntimeError, match="already used"):
        root.add_node("Neg", name="n4", output_names=["Sqrt:0"])
    root.remove_node(if_node)  # its node leaves with both bodies
    assert root.add_node("Neg", name="n5", output_names=["Sqrt:0"])


# -- B, C: one value listed twice as a graph output -----------------------------------------


def _twice_listed(op_type: str) -> onnx.ModelProto:
    """y = op(x), and the graph outputs are [y, y]."""
    y = helper.make_tensor_value_info("y", F, [2])
    return _model(helper.make_graph(
        [helper.make_node(op_type, ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", F, [2])], [y, y]))


@pytest.mark.parametrize("op_type", ["Identity", "Dropout"])
def test_a_bypassed_value_listed_twice_is_produced_once(op_type: str, tmp_path: Path) -> None:
    """The producer is bypassed (the outputs read the graph input): one Identity writes y."""
    source = _twice_listed(op_type)
    feeds = [{"x": np.array([-1.5, 2.0], np.float32)}]
    saved, result = _compile_soundly(source, feeds, tmp_path)
    assert ("NoOpElimination", "g") in _changed(result)
    assert [(n.op_type, list(n.input), list(n.output)) for n in saved.graph.node] == [
        ("Identity", ["x"], ["y"])]


def _fused_twice_listed() -> onnx.ModelProto:
    """y = Add(MatMul(a, w), b), listed twice as a graph output."""
    y = helper.make_tensor_value_info("y", F, [2, 4])
    return _model(helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", F, [2, 3])], [y, y],
        initializer=[_f32("w", np.arange(12).reshape(3, 4) / 7),
                     _f32("b", [1.0, -2.0, 0.5, 3.0])]))


def test_a_fused_value_listed_twice_keeps_its_name_in_both_places(tmp_path: Path) -> None:
    source = _fused_twice_listed()
    a = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    saved, result = _compile_soundly(source, [{"a": a}], tmp_path)
    assert ("MatMulAddFusion", "g") in _changed(result)
    assert [(n.op_type, list(n.output)) for n in saved.graph.node] == [("Gemm", ["y"])]


def test_a_body_output_listed_twice_is_produced_once(tmp_path: Path) -> None:
    """An If branch outputs [t, t] with t = Identity(outer x): bypassed, t is an outer
    value, written through one Identity in the branch.

    Numbers from onnx's reference evaluator: onnxruntime (1.x, optimizations off) returns
    uninitialized memory for the first of two If outputs a branch lists twice, for the
    source model as for the compiled one."""
    t = helper.make_tensor_value_info("t", F, [2])
    e = helper.make_tensor_value_info("e", F, [2])
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [t, t])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [e, e])
    y = [helper.make_tensor_value_info(n, F, [2]) for n in ("y1", "y2")]
    source = _model(helper.make_graph(
        [helper.make_node("If", ["c"], ["y1", "y2"], then_branch=then, else_branch=other)],
        "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
              helper.make_tensor_value_info("x", F, [2])], y))
    x = np.array([-1.0, 3.0], np.float32)
    feeds = [{"c": np.array(flag), "x": x} for flag in (True, False)]
    saved, _ = _compile_soundly(source, feeds, tmp_path, run=_run_reference)
    (branch,) = [a.g for a in saved.graph.node[0].attribute if a.name == "then_branch"]
    assert [o.name for o in branch.output] == ["t", "t"]
    assert [(n.op_type, list(n.input), list(n.output)) for n in branch.node] == [
        ("Identity", ["x"], ["t"])]


# -- D: a body output folded into a constant ------------------------------------------------


def _branch_output_of_an_outer_constant() -> onnx.ModelProto:
    """If's then-branch outputs Identity(one), `one` an outer Constant; both branch outputs
    are declared without a type (valid: inference types them from their nodes)."""
    one = helper.make_node("Constant", [], ["one"],
                           value=numpy_helper.from_array(np.array([1], np.int64), "v"))
    untyped = onnx.TypeProto()
    then = helper.make_graph([helper.make_node("Identity", ["one"], ["t"])], "then", [],
                             [helper.make_value_info("t", untyped)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_value_info("e", untyped)])
    return _model(helper.make_graph(
        [one, helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
         helper.make_node("Add", ["y", "one"], ["z"])], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", I64, [1])],
        [helper.make_tensor_value_info("z", I64, [1])]))


@pytest.mark.parametrize("disable", [(), ("ConstantFolding",)])
def test_a_body_output_folded_to_a_constant_is_typed(disable: tuple[str, ...],
                                                     tmp_path: Path) -> None:
    """Folded, the then-branch output is a constant of the branch, written as its
    initializer: ONNX infers no type for that, so the output declares the constant's.
    Without folding the Identity goes and the output, an outer value, is written through
    an Identity in the branch."""
    source = _branch_output_of_an_outer_constant()
    feeds = [{"c": np.array(flag), "x": np.array([5], np.int64)} for flag in (True, False)]
    saved, result = _compile_soundly(source, feeds, tmp_path, disable=list(disable))
    (then,) = [a.g for a in saved.graph.node[-2].attribute if a.name == "then_branch"]
    assert [o.name for o in then.output] == ["t"]
    if disable:
        assert ("NoOpElimination", "then") in _changed(result)
        assert [(n.op_type, list(n.input), list(n.output)) for n in then.node] == [
            ("Identity", ["one"], ["t"])]
    else:
        assert ("ConstantFolding", "then") in _changed(result)
        assert [i.name for i in then.initializer] == ["t"]
        assert then.output[0].type == helper.make_tensor_type_proto(I64, [1])


def test_every_compiled_graph_has_unique_value_names_per_scope(tmp_path: Path) -> None:
    """The cases above together: no value is produced twice along any nesting chain."""
    for source in (_fusions_in_root_and_body(), _branch_output_of_an_outer_constant()):
        saved = ge.compile(source).to_onnx()
        for gp in _graphs(saved.graph):
            produced = [v for n in gp.node for v in n.output if v]
            produced += [t.name for t in gp.initializer]
            assert len(produced) == len(set(produced)), gp.name


# -- E: sibling bodies may define the same value names ------------------------------------------


def _constant(name: str, value: object) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(value, np.int64)))


def test_sibling_bodies_with_one_name_do_not_read_each_others_values(tmp_path: Path) -> None:
    """Both branches define "k" (legal); onnx's data propagation keys values by name across
    the model, so the else branch's Reshape got the then branch's k: shape [6, 8] for [3, 4]
    (and a folded Shape). Inference runs without data propagation then."""
    then = helper.make_graph([_constant("k", 2), helper.make_node("Add", ["k", "k"], ["kk"]),
                              helper.make_node("Shape", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", I64, [1])])
    other = helper.make_graph([_constant("k", 1), _constant("base", [3, 4]),
                               helper.make_node("Mul", ["base", "k"], ["s"]),
                               helper.make_node("Reshape", ["x", "s"], ["r"]),
                               helper.make_node("Shape", ["r"], ["t2"])], "else", [],
                              [helper.make_tensor_value_info("t2", I64, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", F, ["n"])],
        [helper.make_tensor_value_info("y", I64, ["d"])])
    feeds = [{"c": np.array(flag), "x": np.arange(12, dtype=np.float32)}
             for flag in (False, True)]
    _compile_soundly(_model(graph), feeds, tmp_path)


def test_sibling_bodies_casting_into_one_name_compile(tmp_path: Path) -> None:
    """The same name in both branches made onnx's inference fail ("Data for input 0 already
    exists"): the compilation stopped with GE1305 on a valid model."""
    def branch(name: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node("Cast", ["x"], ["t"], to=TensorProto.DOUBLE)],
                                 name, [], [helper.make_tensor_value_info("t", TensorProto.DOUBLE,
                                                                          [4])])

    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch("then"),
                          else_branch=branch("else"))], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", F, [4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])])
    feeds = [{"c": np.array(flag), "x": np.arange(4, dtype=np.float32)} for flag in (True, False)]
    _compile_soundly(_model(graph), feeds, tmp_path)
