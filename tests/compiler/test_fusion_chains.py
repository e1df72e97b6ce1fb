"""The chain simplification passes (`ge.compiler.builtin.fusion_chains`), run directly and
through the compiler: what each collapses, what it must leave alone, that a second run
changes nothing, that output names and onnxruntime results survive, on small models and on
the vendored ones."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from builtin_helpers import (
    I64,
    F,
    assert_sound,
    assert_stable,
    histogram,
    init,
    load,
    model,
    ort_run,
    run_pass,
    vi,
)
from onnx import TensorProto, helper

import ge
import ge.compiler.builtin
import ge.ops
from ge.compiler.builtin.fusion_chains import (
    CHAIN_PASSES,
    EXACT_CASTS,
    CastChainSimplification,
    ReshapeChainSimplification,
    SqueezeUnsqueezeCancellation,
    TransposeChainSimplification,
    compose_perms,
    is_exact_cast,
)
from ge.compiler.pass_registry import PassRegistry, builtin_entries
from ge.graph import DataType, Graph, TensorDesc
from ge.passes import FusionBasePass
from model_paths import all_shared_models, shared_model

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about the built-in passes
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

node = helper.make_node
TRANSPOSE, RESHAPE, CAST, SQUEEZE = (TransposeChainSimplification, ReshapeChainSimplification,
                                     CastChainSimplification, SqueezeUnsqueezeCancellation)
T = TensorProto
Feeds = dict[str, np.ndarray]


def _model(*args: object, check: bool = True, **kwargs: object) -> onnx.ModelProto:
    """`builtin_helpers.model`, with the types onnx infers for the outputs declared without
    a shape, then checked (unless `check=False`: an unknown rank)."""
    made = model(*args, check=False, **kwargs)  # type: ignore[arg-type]
    for out in made.graph.output:
        if not out.type.tensor_type.HasField("shape"):
            out.ClearField("type")
    made = onnx.shape_inference.infer_shapes(made, strict_mode=True)
    if check:
        onnx.checker.check_model(made, full_check=True)
    return made


def _feeds(shape: Sequence[int], dtype: type = np.float32, seed: int = 0,
           name: str = "x") -> list[Feeds]:
    """Two random feeds of input `name` (integers over a wide range, floats normal)."""
    rng = np.random.default_rng(seed)
    feeds = []
    value: np.ndarray
    for _ in range(2):
        if np.dtype(dtype).kind in "iu":
            info = np.iinfo(dtype)
            value = rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), shape,
                                 dtype=np.int64).astype(dtype)
        else:
            value = rng.standard_normal(shape).astype(dtype)
        feeds.append({name: value})
    return feeds


def _rewrites(pass_class: type, original: onnx.ModelProto, feeds: list[Feeds]
              ) -> Graph:
    """Run the pass on the model: it changes the graph, the result is sound (checker,
    output names, onnxruntime equal), and a second run changes nothing."""
    graph = load(original)
    assert run_pass(pass_class, graph)
    assert_sound(graph, original, feeds)
    assert_stable(pass_class, graph)
    return graph


def _ops(graph: Graph) -> dict[str, int]:
    """The histogram without `Const` nodes (constant inputs a rewrite leaves unused are
    removed by dead-code elimination later)."""
    return {k: v for k, v in histogram(graph).items() if k != "Const"}


def _unchanged(pass_class: type, original: onnx.ModelProto) -> None:
    graph = load(original)
    before = histogram(graph)
    assert not run_pass(pass_class, graph)
    assert histogram(graph) == before


# -- registration ---------------------------------------------------------------------------


def test_the_passes_are_builtin_origin_graph_passes() -> None:
    names = {cls: cls.__ge_builtin__ for cls in CHAIN_PASSES}  # type: ignore[attr-defined]
    assert [spec.name for spec in names.values()] == [
        "CastChainSimplification", "SqueezeUnsqueezeCancellation",
        "TransposeChainSimplification", "ReshapeChainSimplification"]
    # they run after constant folding (shapes computed from constants are constants then)
    assert all(spec.step == "origin_graph_optimize" for spec in names.values())
    assert all(issubclass(cls, FusionBasePass) for cls in CHAIN_PASSES)
    registry = PassRegistry(builtin_entries(CHAIN_PASSES))
    assert [e.name for e in registry.for_step("origin_graph_optimize")] == [
        spec.name for spec in names.values()]


# -- Transpose ------------------------------------------------------------------------------


def _transposes(perms: Sequence[Sequence[int] | None], shape: Sequence[int | str] = (2, 3, 4),
                *, opset: int = 17) -> onnx.ModelProto:
    """x → Relu → Transpose(perms[0]) → ... → y (None: a Transpose without perm)."""
    nodes = [node("Relu", ["x"], ["r"], name="relu")]
    previous = "r"
    for k, perm in enumerate(perms):
        out = "y" if k == len(perms) - 1 else f"t{k}"
        attrs: dict[str, Any] = {} if perm is None else {"perm": list(perm)}
        nodes.append(node("Transpose", [previous], [out], name=f"tr{k}", **attrs))
        previous = out
    return _model(nodes, [vi("x", shape=shape)], [vi("y", shape=None)], opset=opset,
                  check=shape is not None)


def test_compose_perms() -> None:
    x = np.arange(24).reshape(2, 3, 4)
    for p1, p2 in [([1, 2, 0], [2, 0, 1]), ([0, 2, 1], [1, 0, 2]), ([2, 1, 0], [1, 2, 0])]:
        np.testing.assert_array_equal(x.transpose(p1).transpose(p2),
                                      x.transpose(compose_perms(p1, p2)))


def test_two_transposes_become_one_with_the_composed_perm() -> None:
    original = _transposes([[1, 2, 0], [0, 2, 1]])
    graph = _rewrites(TRANSPOSE, original, _feeds([2, 3, 4]))
    assert histogram(graph) == {"Data": 1, "Relu": 1, "Transpose": 1, "NetOutput": 1}
    (kept,) = graph.nodes_of_type("Transpose")
    assert kept.name == "tr1"  # the second node, now reading the Relu
    assert list(kept.get_attr("perm")) == compose_perms([1, 2, 0], [0, 2, 1]) == [1, 0, 2]
    assert kept.get_in_data_nodes_and_port_indexes(0)[0].name == "relu"
    assert kept.get_metadata()["ge.origin_pass"] == "TransposeChainSimplification"


def test_inverse_transposes_vanish_and_the_output_keeps_its_name() -> None:
    original = _transposes([[0, 2, 3, 1], [0, 3, 1, 2]], shape=(1, 2, 3, 4))
    graph = _rewrites(TRANSPOSE, original, _feeds([1, 2, 3, 4]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "NetOutput": 1}
    assert [o.name for o in graph.to_onnx().graph.output] == ["y"]


def test_a_chain_of_three_transposes_collapses_in_one_run() -> None:
    perms = [[1, 2, 0], [2, 0, 1], [1, 0, 2]]
    graph = _rewrites(TRANSPOSE, _transposes(perms), _feeds([2, 3, 4]))
    (kept,) = graph.nodes_of_type("Transpose")
    assert list(kept.get_attr("perm")) == compose_perms(compose_perms(*perms[:2]), perms[2])


def test_a_chain_of_three_transposes_that_undo_each_other_vanishes() -> None:
    perms = [[1, 2, 0], [1, 2, 0], [1, 2, 0]]  # a rotation three times
    graph = _rewrites(TRANSPOSE, _transposes(perms), _feeds([2, 3, 4]))
    assert "Transpose" not in histogram(graph)


def test_transposes_without_perm_reverse_the_axes_of_a_known_rank() -> None:
    graph = _rewrites(TRANSPOSE, _transposes([None, [0, 2, 1]]), _feeds([2, 3, 4]))
    (kept,) = graph.nodes_of_type("Transpose")
    assert list(kept.get_attr("perm")) == [2, 0, 1]
    graph = _rewrites(TRANSPOSE, _transposes([None, None]), _feeds([2, 3, 4]))
    assert "Transpose" not in histogram(graph)


def test_a_transpose_without_perm_of_an_unknown_rank_is_left_alone() -> None:
    _unchanged(TRANSPOSE, _transposes([None, [1, 0]], shape=None))  # type: ignore[arg-type]
    _unchanged(TRANSPOSE, _transposes([[1, 0], None], shape=None))  # type: ignore[arg-type]


def _shared(op: str, first: dict, second: dict, inputs: list[onnx.ValueInfoProto],
            extra: Sequence[str] = (), extra2: Sequence[str] = (),
            initializers: Sequence[onnx.TensorProto] = (), opset: int = 17,
            op2: str | None = None) -> onnx.ModelProto:
    """x → op(first) → m → op2(second) → y (op2 defaults to op), and m is also the graph
    output "m"."""
    return _model([node(op, ["x", *extra], ["m"], name="first", **first),
                  node(op2 or op, ["m", *extra2], ["y"], name="second", **second)],
                 inputs, [vi("y", shape=None), vi("m", shape=None)], initializers,
                 opset=opset)


def test_a_shared_first_transpose_is_kept_and_only_an_identity_is_bypassed() -> None:
    inputs = [vi("x", shape=[2, 3, 4])]
    _unchanged(TRANSPOSE, _shared("Transpose", {"perm": [1, 2, 0]}, {"perm": [0, 2, 1]},
                                  inputs))
    original = _shared("Transpose", {"perm": [1, 2, 0]}, {"perm": [2, 0, 1]}, inputs)
    graph = _rewrites(TRANSPOSE, original, _feeds([2, 3, 4]))
    assert [n.name for n in graph.nodes_of_type("Transpose")] == ["first"]


def test_a_transpose_pair_reading_an_outer_value_in_a_body_is_left_alone() -> None:
    def body(name: str, reads: str) -> onnx.GraphProto:
        return helper.make_graph(
            [node("Transpose", [reads], [f"{name}_a"], name=f"{name}_t1", perm=[1, 0]),
             node("Transpose", [f"{name}_a"], [f"{name}_b"], name=f"{name}_t2", perm=[1, 0])],
            name, [], [vi(f"{name}_b", shape=None)])

    inner = helper.make_graph(
        [node("Relu", ["x"], ["e_r"], name="e_relu"),
         node("Transpose", ["e_r"], ["e_a"], name="e_t1", perm=[1, 0]),
         node("Transpose", ["e_a"], ["e_b"], name="e_t2", perm=[1, 0])],
        "else_body", [], [vi("e_b", shape=None)])
    original = _model([node("If", ["c"], ["y"], name="if", then_branch=body("then_body", "x"),
                           else_branch=inner)],
                     [vi("c", T.BOOL, shape=[]), vi("x")], [vi("y", shape=None)])
    graph = load(original)
    assert run_pass(TRANSPOSE, graph)
    bodies = {g.name: histogram(g) for g in graph.get_all_subgraphs()}
    assert bodies["then_body"].get("Transpose") == 2  # reads the outer x: left alone
    assert "Transpose" not in bodies["else_body"]
    feeds = [{"c": np.array(flag), "x": np.random.default_rng(0).standard_normal(
        (2, 3)).astype(np.float32)} for flag in (True, False)]
    assert_sound(graph, original, feeds)
    assert_stable(TRANSPOSE, graph)


def _memory_transposes(perms: Sequence[Sequence[int]]) -> tuple[Graph, list[ge.graph.Node]]:
    """A graph built in memory: x → Transpose(perms[0]) → ... → graph output."""
    graph = Graph("mem")
    x = graph.add_node("Data", name="x", attrs={"index": 0})
    x.update_output_desc(0, TensorDesc([2, 3], data_type=DataType.DT_FLOAT))
    previous, nodes = x, []
    for k, perm in enumerate(perms):
        tr = graph.add_node("Transpose", name=f"tr{k}", num_inputs=1,
                            attrs={"perm": list(perm)})
        graph.add_data_edge(previous, 0, tr, 0)
        previous = tr
        nodes.append(tr)
    out = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    graph.add_data_edge(previous, 0, out, 0)
    ge.ops.infer_shapes(graph)
    return graph, nodes


def test_an_identity_is_not_bypassed_where_the_output_name_would_change() -> None:
    graph, _ = _memory_transposes([[1, 0], [1, 0]])  # outputs named after their producer
    names = [o.name for o in graph.to_onnx().graph.output]
    assert not run_pass(TRANSPOSE, graph)
    assert [o.name for o in graph.to_onnx().graph.output] == names


def test_a_first_transpose_with_control_edges_is_kept() -> None:
    graph, (first, second, third) = _memory_transposes([[1, 0], [1, 0], [1, 0]])
    guard = graph.add_node("Identity", name="guard", num_inputs=1)
    graph.add_data_edge(graph.find_node_by_name("x"), 0, guard, 0)
    graph.add_control_edge(guard, first)
    ge.ops.infer_shapes(graph)
    assert run_pass(TRANSPOSE, graph)
    # tr0·tr1 is the identity: tr1 is bypassed and tr2 reads x; tr0, ordered after guard,
    # is not removed with its control edge (dead-code elimination decides about it).
    assert [n.name for n in graph.nodes_of_type("Transpose")] == ["tr0", "tr2"]
    assert third.get_in_data_nodes_and_port_indexes(0)[0].name == "x"
    assert first.get_in_control_nodes() == [guard]
    assert not first.get_out_data_nodes_and_port_indexes(0)
    assert second.owner_graph is None
    graph.validate()
    graph, (first, _) = _memory_transposes([[1, 0], [0, 1]])  # composes to [1, 0]
    graph.add_control_edge(graph.find_node_by_name("x"), first)
    assert not run_pass(TRANSPOSE, graph)  # tr0 would have to go, with its control edge


# -- Reshape --------------------------------------------------------------------------------


def _reshapes(s1: Sequence[int], s2: Sequence[int], shape: Sequence[int] = (2, 3, 4), *,
              allowzero: int | None = None, opset: int = 17) -> onnx.ModelProto:
    attrs: dict[str, Any] = {} if allowzero is None else {"allowzero": allowzero}
    return _model([node("Relu", ["x"], ["r"], name="relu"),
                  node("Reshape", ["r", "s1"], ["m"], name="first", **attrs),
                  node("Reshape", ["m", "s2"], ["y"], name="second", **attrs)],
                 [vi("x", shape=shape)], [vi("y", shape=None)],
                 [init("s1", s1, np.int64), init("s2", s2, np.int64)], opset=opset)


@pytest.mark.parametrize(("s1", "s2"), [
    ([6, 4], [4, 6]),
    ([24], [2, -1]),
    ([-1, 2], [3, 8]),
    ([2, 0, 4], [4, 3, 2]),  # a 0 in the first shape is fine: it copies a dim of x
])
def test_two_reshapes_become_the_second(s1, s2) -> None:
    graph = _rewrites(RESHAPE, _reshapes(s1, s2), _feeds([2, 3, 4]))
    (kept,) = graph.nodes_of_type("Reshape")
    assert kept.name == "second"
    assert kept.get_in_data_nodes_and_port_indexes(0)[0].name == "relu"


@pytest.mark.parametrize("s2", [[2, 3, 4], [2, -1, 4], [-1, 3, 4]])
def test_a_reshape_back_to_the_input_shape_vanishes(s2) -> None:
    graph = _rewrites(RESHAPE, _reshapes([6, 4], s2), _feeds([2, 3, 4]))
    assert "Reshape" not in histogram(graph)


def test_a_reshape_with_0_in_the_second_shape_is_left_alone() -> None:
    _unchanged(RESHAPE, _reshapes([6, 4], [0, 2, 2]))  # 0 copies the intermediate's 6
    _unchanged(RESHAPE, _reshapes([6, 4], [0, 2, 2], allowzero=0))


@pytest.mark.parametrize(("s1", "s2", "kept"), [
    ([0, 0, 2, 2], [0, 0, 4], None),      # heads split and merged again: X itself
    ([0, 0, 2, 2], [0, 0, -1], None),
    ([0, 0, 2, 2], [0, -1], "second"),    # the 0 keeps B, as X's first dim: Reshape(X, s2)
    ([0, 0, 4, 1], [0, 0, 2, 2], "second"),
    ([-1, 0, 4], [0, 0, 4], None),        # the -1 is B: every other axis keeps its dim
    ([-1, 0, 2, 2], [0, 0, 4], None),     # the -1 is B: the others' S, 2, 2 cancel S, 4
])
def test_a_0_in_the_second_shape_that_keeps_a_dim_of_x_collapses(s1, s2, kept) -> None:
    """X [B, S, 4] (a dynamic export): a 0 of the second shape copies a dim the
    intermediate has from X at that axis, so Reshape(X, s2) does the same at every size."""
    original = _reshapes(s1, s2, shape=("B", "S", 4))
    for b, s in ((1, 1), (2, 3), (3, 5)):
        graph = _rewrites(RESHAPE, original, _feeds([b, s, 4]))
        assert [n.name for n in graph.nodes_of_type("Reshape")] == ([kept] if kept else [])


@pytest.mark.parametrize(("s1", "s2"), [
    ([0, 4, -1], [0, 0, 4]),  # the second 0 copies the intermediate's 4, not X's S
    ([-1, 4], [0, 0]),        # the first copies B * S, not X's B
])
def test_a_0_in_the_second_shape_that_may_not_keep_x_dims_is_left_alone(s1, s2) -> None:
    _unchanged(RESHAPE, _reshapes(s1, s2, shape=("B", "S", 4)))


def test_allowzero_makes_a_0_in_the_second_shape_literal() -> None:
    original = _reshapes([3, 0], [0, 3, 1], shape=(0, 3), allowzero=1)
    graph = _rewrites(RESHAPE, original, _feeds([0, 3]))
    assert [n.name for n in graph.nodes_of_type("Reshape")] == ["second"]


def test_a_reshape_to_a_computed_shape_is_left_alone() -> None:
    original = _model([node("Reshape", ["x", "s1"], ["m"], name="first"),
                      node("Reshape", ["m", "s"], ["y"], name="second")],
                     [vi("x", shape=[2, 3, 4]), vi("s", I64, shape=[2])],
                     [vi("y", shape=None)], [init("s1", [6, 4], np.int64)])
    _unchanged(RESHAPE, original)


def test_a_shared_first_reshape_is_kept_and_only_an_identity_is_bypassed() -> None:
    inputs = [vi("x", shape=[2, 3, 4])]
    shapes = [init("s1", [6, 4], np.int64), init("s2", [4, 6], np.int64),
              init("s3", [2, 3, 4], np.int64)]
    _unchanged(RESHAPE, _shared("Reshape", {}, {}, inputs, ["s1"], ["s2"], shapes))
    original = _shared("Reshape", {}, {}, inputs, ["s1"], ["s3"], shapes)
    graph = _rewrites(RESHAPE, original, _feeds([2, 3, 4]))
    assert [n.name for n in graph.nodes_of_type("Reshape")] == ["first"]


# -- Cast -----------------------------------------------------------------------------------

_NUMPY: dict[int, type] = {T.BOOL: np.bool_, T.INT8: np.int8, T.INT16: np.int16, T.INT32: np.int32,
          T.INT64: np.int64, T.UINT8: np.uint8, T.UINT16: np.uint16, T.UINT32: np.uint32,
          T.UINT64: np.uint64, T.FLOAT16: np.float16, T.FLOAT: np.float32,
          T.DOUBLE: np.float64}


def _casts(source: int, middle: int, target: int, shape: Sequence[int] = (4, 5)
           ) -> onnx.ModelProto:
    return _model([node("Cast", ["x"], ["m"], name="first", to=middle),
                  node("Cast", ["m"], ["y"], name="second", to=target)],
                 [vi("x", source, shape=shape)], [vi("y", target, shape=shape)])


@pytest.mark.parametrize(("source", "middle", "target"), [
    (T.INT32, T.INT64, T.FLOAT),
    (T.INT8, T.FLOAT16, T.INT32),
    (T.UINT16, T.FLOAT, T.INT64),
    (T.FLOAT16, T.FLOAT, T.DOUBLE),
    (T.INT32, T.DOUBLE, T.FLOAT),  # one rounding either way
    (T.FLOAT, T.FLOAT, T.FLOAT16),  # a same-type first cast
])
def test_an_exact_first_cast_is_skipped(source, middle, target) -> None:
    original = _casts(source, middle, target)
    graph = _rewrites(CAST, original, _feeds([4, 5], _NUMPY[source]))
    (kept,) = graph.nodes_of_type("Cast")
    assert kept.name == "second" and kept.get_attr("to") == target
    assert kept.get_in_data_nodes_and_port_indexes(0)[0].type == "Data"


@pytest.mark.parametrize(("source", "middle"), [
    (T.FLOAT, T.DOUBLE), (T.INT32, T.INT64), (T.FLOAT16, T.FLOAT), (T.UINT8, T.INT16),
    (T.FLOAT, T.FLOAT)])
def test_an_exact_round_trip_is_the_input_itself(source, middle) -> None:
    graph = _rewrites(CAST, _casts(source, middle, source), _feeds([4, 5], _NUMPY[source]))
    assert "Cast" not in histogram(graph)


@pytest.mark.parametrize(("source", "middle", "target"), [
    (T.FLOAT, T.FLOAT16, T.FLOAT),  # rounds to 11 bits
    (T.FLOAT, T.INT32, T.FLOAT),  # drops the fraction
    (T.FLOAT, T.INT64, T.DOUBLE),
    (T.INT64, T.DOUBLE, T.INT64),  # 53 bits of 64
    (T.INT32, T.FLOAT, T.INT32),  # 24 bits of 32
    (T.INT32, T.INT16, T.INT64),  # wraps
    (T.INT32, T.UINT32, T.INT64),  # same width, other range
    (T.UINT16, T.FLOAT16, T.FLOAT),
    (T.FLOAT, T.BOOL, T.FLOAT),
    (T.FLOAT, T.DOUBLE, T.STRING),  # decimal text differs
])
def test_a_lossy_first_cast_is_kept(source, middle, target) -> None:
    _unchanged(CAST, _casts(source, middle, target))


def test_the_exact_cast_table_holds_for_the_extreme_values_of_every_type() -> None:
    for source, wider in EXACT_CASTS.items():
        assert is_exact_cast(source, source)
        if source not in _NUMPY:
            continue  # bfloat16: no numpy type
        dtype = np.dtype(_NUMPY[source])
        if dtype.kind == "b":
            values = np.array([False, True])
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)  # type: ignore[type-var]
            values = np.array([info.min, info.min + 1, -1 if info.min else 0, 0, 1,
                               info.max - 1, info.max], dtype)
        else:
            finfo = np.finfo(dtype)
            values = np.array([finfo.min, -1.5, -finfo.tiny, -0.0, 0.0, finfo.smallest_subnormal,
                               finfo.eps, 1 / 3, finfo.max, np.inf, -np.inf], dtype)
        for target in wider:
            if target not in _NUMPY:
                continue
            widened: np.ndarray = values.astype(_NUMPY[target])
            np.testing.assert_array_equal(widened.astype(dtype), values, strict=True)
            if dtype.kind == "f":
                assert np.isnan(np.array([np.nan], dtype).astype(_NUMPY[target])).all()
    assert not is_exact_cast(T.FLOAT, T.FLOAT16)
    assert not is_exact_cast(T.INT64, T.DOUBLE)
    assert not is_exact_cast(T.STRING, T.STRING)


def test_a_shared_first_cast_is_kept_and_only_a_round_trip_is_bypassed() -> None:
    inputs = [vi("x", F, shape=[4, 5])]
    _unchanged(CAST, _shared("Cast", {"to": T.DOUBLE}, {"to": T.FLOAT16}, inputs))
    original = _shared("Cast", {"to": T.DOUBLE}, {"to": T.FLOAT}, inputs)
    graph = _rewrites(CAST, original, _feeds([4, 5]))
    assert [n.name for n in graph.nodes_of_type("Cast")] == ["first"]


def test_a_cast_of_an_unknown_type_is_left_alone() -> None:
    graph = load(_casts(T.INT32, T.INT64, T.FLOAT), infer=False)
    graph.find_node_by_name("x").update_output_desc(0, TensorDesc.unknown())
    assert not run_pass(CAST, graph)


# -- Squeeze / Unsqueeze --------------------------------------------------------------------


def _squeezes(first: str, second: str, axes1: Sequence[int] | None,
              axes2: Sequence[int] | None, shape: Sequence[int | str], *, opset: int,
              check: bool = True) -> onnx.ModelProto:
    """x → Relu → first(axes1) → second(axes2) → y; axes as attributes before opset 13, as
    constant inputs from 13 (None: no axes)."""
    nodes = [node("Relu", ["x"], ["r"], name="relu")]
    initializers = []
    for k, (op, axes, src, out) in enumerate([(first, axes1, "r", "m"),
                                                (second, axes2, "m", "y")]):
        if axes is None:
            nodes.append(node(op, [src], [out], name=f"n{k}"))
        elif opset >= 13:
            initializers.append(init(f"axes{k}", axes, np.int64))
            nodes.append(node(op, [src, f"axes{k}"], [out], name=f"n{k}"))
        else:
            nodes.append(node(op, [src], [out], name=f"n{k}", axes=list(axes)))
    return _model(nodes, [vi("x", shape=shape)], [vi("y", shape=None)], initializers,
                  opset=opset, check=check)


OPSETS = [11, 13, 17]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(("axes1", "axes2"), [([0], [0]), ([1, 3], [3, 1]), ([-1], [3]),
                                              ([0, -1], [-5, 4])])
def test_unsqueeze_then_squeeze_of_the_same_axes_vanishes(opset, axes1, axes2) -> None:
    original = _squeezes("Unsqueeze", "Squeeze", axes1, axes2, [2, 3, 4], opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([2, 3, 4]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "NetOutput": 1}


@pytest.mark.parametrize("opset", OPSETS)
def test_unsqueeze_then_squeeze_without_axes_vanishes_when_x_has_no_dim_of_1(opset) -> None:
    original = _squeezes("Unsqueeze", "Squeeze", [0, 2], None, [2, 3, 4], opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([2, 3, 4]))
    assert "Squeeze" not in _ops(graph)
    _unchanged(SQUEEZE, _squeezes("Unsqueeze", "Squeeze", [0], None, [2, 1, 4], opset=opset))
    _unchanged(SQUEEZE, _squeezes("Unsqueeze", "Squeeze", [0], None, ["n", 3], opset=opset,
                                  check=False))  # onnx cannot type y


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(("shape", "axes1", "axes2"), [
    ([2, 1, 4], [1], [1]), ([1, 3, 1], [0, -1], [2, 0]), (["n", 1, 4], [1], [-2])])
def test_squeeze_of_dims_of_1_then_unsqueeze_vanishes(opset, shape, axes1, axes2) -> None:
    original = _squeezes("Squeeze", "Unsqueeze", axes1, axes2, shape, opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([2 if d == "n" else d for d in shape]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "NetOutput": 1}


@pytest.mark.parametrize("opset", OPSETS)
def test_squeeze_without_axes_then_unsqueeze_vanishes_for_a_static_shape(opset) -> None:
    original = _squeezes("Squeeze", "Unsqueeze", None, [0, 2], [1, 3, 1], opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([1, 3, 1]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "NetOutput": 1}
    _unchanged(SQUEEZE, _squeezes("Squeeze", "Unsqueeze", None, [0], [1, "n"], opset=opset,
                                  check=False))  # onnx cannot type y


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(("first", "second", "axes1", "axes2", "shape"), [
    ("Unsqueeze", "Squeeze", [0], [1], [1, 3]),  # another dim of 1
    ("Unsqueeze", "Squeeze", [0, 1], [0], [2, 3]),  # a part
    ("Squeeze", "Unsqueeze", [0], [1], [1, 3]),  # back at another place
    ("Squeeze", "Unsqueeze", [1], [1], ["n", "m"]),  # "m" is 1 at run time, not known
])
def test_mismatched_or_unknown_squeeze_axes_are_left_alone(opset, first, second, axes1,
                                                          axes2, shape) -> None:
    _unchanged(SQUEEZE, _squeezes(first, second, axes1, axes2, shape, opset=opset))


def test_squeeze_axes_that_are_computed_are_left_alone() -> None:
    original = _model([node("Unsqueeze", ["x", "a"], ["m"], name="first"),
                      node("Squeeze", ["m", "a"], ["y"], name="second")],
                     [vi("x", shape=[2, 3]), vi("a", I64, shape=[1])], [vi("y", shape=None)],
                     check=False)  # onnx cannot type y
    _unchanged(SQUEEZE, original)


def test_a_shared_unsqueeze_is_kept_and_the_squeeze_bypassed() -> None:
    original = _shared("Unsqueeze", {}, {}, [vi("x", shape=[2, 3])], ["a"], ["a"],
                       [init("a", [1], np.int64)], op2="Squeeze")
    graph = _rewrites(SQUEEZE, original, _feeds([2, 3]))
    assert histogram(graph) == {"Data": 1, "Const": 1, "Unsqueeze": 1, "NetOutput": 1}


def _axes_of(graph: Graph, name: str = "n1") -> list[int]:
    """The axes of Squeeze/Unsqueeze `name`: its attribute, or its constant input."""
    kept = graph.find_node_by_name(name)
    if kept.has_attr("axes"):
        return [int(a) for a in kept.get_attr("axes")]
    producer = kept.get_input_producer(1)
    assert producer is not None and producer[0].type == "Const"
    return producer[0].get_attr("value").numpy().tolist()


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(("axes1", "axes2", "composed"), [
    ([0], [0], [0, 1]),  # x[None, None]
    ([1], [0], [0, 2]),  # the second's axes index the output
    ([0, 1], [3], [0, 1, 3]),  # a causal mask's x[None, None, :, None]
    ([-1], [-1], [2, 3]),  # negative: by X's rank
    ([2, 0], [-5, 4], [0, 1, 3, 4]),
])
def test_two_unsqueezes_become_one_of_the_composed_axes(opset, axes1, axes2,
                                                        composed) -> None:
    original = _squeezes("Unsqueeze", "Unsqueeze", axes1, axes2, [2, 3], opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([2, 3]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "Unsqueeze": 1, "NetOutput": 1}
    assert _axes_of(graph) == composed


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(("axes1", "axes2", "composed"), [
    ([0], [1], [0, 2]),  # the second's axes index the intermediate value
    ([0], [3], [0, 4]),
    ([2, -1], [0], [0, 2, 4]),
    ([-3], [-1], [2, 4]),
])
def test_two_squeezes_become_one_of_the_composed_axes(opset, axes1, axes2, composed) -> None:
    original = _squeezes("Squeeze", "Squeeze", axes1, axes2, [1, 3, 1, 4, 1], opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([1, 3, 1, 4, 1]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "Squeeze": 1, "NetOutput": 1}
    assert _axes_of(graph) == composed


@pytest.mark.parametrize("opset", OPSETS)
def test_a_squeeze_of_everything_after_a_squeeze_is_one_squeeze_of_everything(opset) -> None:
    """Squeeze(Squeeze(X, [0])) removes dim 0 (of size 1) and every other dim of size 1:
    Squeeze(X)."""
    original = _squeezes("Squeeze", "Squeeze", [0], None, [1, 2, 1, 3], opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([1, 2, 1, 3]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "Squeeze": 1, "NetOutput": 1}
    kept = graph.find_node_by_name("n1")
    assert not kept.has_attr("axes") and kept.get_inputs_size() == 1


@pytest.mark.parametrize("opset", OPSETS)
def test_a_squeeze_of_everything_after_a_squeeze_of_unknown_dims_is_left_alone(opset) -> None:
    """Trial LL: the first Squeeze checks that X's dims at its axes are 1 (onnxruntime
    refuses an X of [2] for Squeeze(X, [0])); Squeeze(X) alone would squeeze nothing and
    run. Merged only where those dims are known to be 1."""
    _unchanged(SQUEEZE, _squeezes("Squeeze", "Squeeze", [0], None, ["n", 2], opset=opset))


@pytest.mark.parametrize("opset", OPSETS)
def test_a_chain_of_three_unsqueezes_collapses_in_one_run(opset) -> None:
    """`arange[:, None, None, None]` of a causal mask, written as three Unsqueezes."""
    nodes = [node("Relu", ["x"], ["r"], name="relu")]
    initializers = []
    for k, (src, out) in enumerate([("r", "a"), ("a", "b"), ("b", "y")]):
        if opset >= 13:
            initializers.append(init(f"axes{k}", [k + 1], np.int64))
            nodes.append(node("Unsqueeze", [src, f"axes{k}"], [out], name=f"u{k}"))
        else:
            nodes.append(node("Unsqueeze", [src], [out], name=f"u{k}", axes=[k + 1]))
    original = _model(nodes, [vi("x", shape=["n"])], [vi("y", shape=None)], initializers,
                      opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([5]))
    assert _ops(graph) == {"Data": 1, "Relu": 1, "Unsqueeze": 1, "NetOutput": 1}
    assert _axes_of(graph, "u2") == [1, 2, 3]


def test_non_negative_axes_compose_without_the_rank() -> None:
    """X of unknown rank: axes counted from the front need none."""
    original = _squeezes("Unsqueeze", "Unsqueeze", [0], [2], [2, 3], opset=17)
    original.graph.input[0].type.tensor_type.ClearField("shape")
    original.graph.ClearField("value_info")
    graph = load(original)
    assert run_pass(SQUEEZE, graph)
    assert _ops(graph) == {"Data": 1, "Relu": 1, "Unsqueeze": 1, "NetOutput": 1}
    assert _axes_of(graph) == [0, 2]
    # (neither model has a shape for y, which the full checker wants: compared directly)
    for feeds in _feeds([2, 3]) + _feeds([4]):
        (got,), (want,) = ort_run(graph.to_onnx(), feeds), ort_run(original, feeds)
        np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize(("first", "axes1", "axes2"), [
    ("Unsqueeze", [-1], [0]),  # which axis -1 is depends on the rank
    ("Unsqueeze", [0], [-1]),
    ("Squeeze", [-1], [0]),
])
def test_negative_axes_of_an_unknown_rank_are_left_alone(first, axes1, axes2) -> None:
    original = _squeezes(first, first, axes1, axes2, [1, 3, 1], opset=17)
    original.graph.input[0].type.tensor_type.ClearField("shape")
    original.graph.ClearField("value_info")
    _unchanged(SQUEEZE, original)


def test_same_type_chains_left_alone() -> None:
    """Axes computed at run time, and empty axes."""
    _unchanged(SQUEEZE, _squeezes("Unsqueeze", "Unsqueeze", [0], [], [2, 3], opset=17,
                                  check=False))
    computed = _model([node("Unsqueeze", ["x", "a"], ["m"], name="first"),
                       node("Unsqueeze", ["m", "a"], ["y"], name="second")],
                      [vi("x", shape=[2, 3]), vi("a", I64, shape=[1])],
                      [vi("y", shape=None)], check=False)  # onnx cannot type y
    _unchanged(SQUEEZE, computed)


@pytest.mark.parametrize("opset", [11, 17])
def test_a_shared_unsqueeze_read_by_unsqueezes_only_merges_into_each(opset) -> None:
    """A causal mask's `arange(s)[None, None, :]` read by `[..., None]` and `[..., None, :]`:
    both read arange with their composed axes, and the shared Unsqueeze goes."""
    nodes = [node("Relu", ["x"], ["r"], name="relu")]
    initializers = []
    for name, src, out, axes in (("first", "r", "m", [0, 1]), ("col", "m", "y", [3]),
                                 ("row", "m", "z", [2])):
        if opset >= 13:
            initializers.append(init(f"{name}_axes", axes, np.int64))
            nodes.append(node("Unsqueeze", [src, f"{name}_axes"], [out], name=name))
        else:
            nodes.append(node("Unsqueeze", [src], [out], name=name, axes=axes))
    original = _model(nodes, [vi("x", shape=["s"])],
                      [vi("y", shape=None), vi("z", shape=None)], initializers, opset=opset)
    graph = _rewrites(SQUEEZE, original, _feeds([4]))
    assert sorted(n.name for n in graph.nodes_of_type("Unsqueeze")) == ["col", "row"]
    assert _axes_of(graph, "col") == [0, 1, 3] and _axes_of(graph, "row") == [0, 1, 2]


def test_a_shared_unsqueeze_with_another_reader_is_kept() -> None:
    """The first Unsqueeze is also a graph output: merging the second would move its work,
    nothing saved; so is a first Unsqueeze read by a Relu besides."""
    _unchanged(SQUEEZE, _shared("Unsqueeze", {}, {}, [vi("x", shape=[2, 3])], ["a"], ["a"],
                                [init("a", [1], np.int64)]))
    original = _model([node("Unsqueeze", ["x", "a"], ["m"], name="first"),
                       node("Unsqueeze", ["m", "a"], ["y"], name="second"),
                       node("Relu", ["m"], ["z"], name="relu")],
                      [vi("x", shape=[2, 3])], [vi("y", shape=None), vi("z", shape=None)],
                      [init("a", [1], np.int64)])
    _unchanged(SQUEEZE, original)


# -- all together, and on the vendored models -----------------------------------------------


def test_a_mixed_chain_collapses_with_the_passes_in_their_order() -> None:
    """Transpose → Cast(double) → Cast(float) → Transpose: once the casts are gone, the
    transposes meet and undo each other."""
    original = _model([node("Transpose", ["x"], ["a"], name="t1", perm=[1, 0]),
                      node("Cast", ["a"], ["b"], name="c1", to=T.DOUBLE),
                      node("Cast", ["b"], ["c"], name="c2", to=T.FLOAT),
                      node("Unsqueeze", ["c", "ax"], ["d"], name="u"),
                      node("Squeeze", ["d", "ax"], ["e"], name="s"),
                      node("Transpose", ["e"], ["y"], name="t2", perm=[1, 0])],
                     [vi("x")], [vi("y", shape=None)], [init("ax", [0], np.int64)])
    graph = load(original)
    assert [run_pass(cls, graph) for cls in CHAIN_PASSES] == [True, True, True, False]
    assert _ops(graph) == {"Data": 1, "NetOutput": 1}
    assert_sound(graph, original, _feeds([2, 3]))


MODELS = all_shared_models()
CHAIN_NAMES = [cls.__ge_builtin__.name for cls in CHAIN_PASSES]  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_vendored_models_keep_their_numerics_and_never_grow(path: Path, tmp_path: Path
                                                            ) -> None:
    graph = load(path)
    before = len(graph.get_all_nodes())
    for cls in CHAIN_PASSES:
        run_pass(cls, graph)
        assert len(graph.get_all_nodes()) <= before
    graph.validate()
    without = ge.compile(path, disable=CHAIN_NAMES)
    result = ge.compile(path, verify=True)
    assert result.verification is not None and result.verification.ok, \
        result.verification.summary()
    assert set(CHAIN_NAMES) <= {r.pass_name for r in result.report.records}
    assert sum(result.report.ops_after.values()) <= sum(without.report.ops_after.values())
    out = tmp_path / path.name
    result.save(out)
    onnx.checker.check_model(onnx.load(out), full_check=True)
    assert [o.name for o in onnx.load(out).graph.output] == [
        o.name for o in onnx.load(path).graph.output]


def test_vit_loses_its_double_casts() -> None:
    path = shared_model("vit_tiny")
    without = ge.compile(path, disable=CHAIN_NAMES)
    result = ge.compile(path, verify=True)
    assert "CastChainSimplification" in result.report.passes_that_changed()
    assert result.report.ops_after == without.report.ops_after  # NoOpElimination agrees
