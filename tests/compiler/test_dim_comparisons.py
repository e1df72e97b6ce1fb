"""`ConstantFolding` of comparisons that the model's dims decide (`dim_bounds`).

TorchScript writes every `x.expand(a, b, ...)` of a transformer (repeat_kv of a GQA Llama
or Qwen2, masks, token types) as `Expand(x, Where(Equal(S, -1), ones, S))`, S a vector
of the model's dims and constants. A dim is never negative, so `Equal(S, -1)` is False
wherever S holds one, at every size: folded, the Where's condition is a constant. Each
fold is checked in onnxruntime at several sizes, 0 and 1 among them."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from builtin_helpers import (
    BOOL,
    I64,
    assert_sound,
    assert_stable,
    init,
    load,
    model,
    ort_run,
    run_pass,
    vi,
)
from onnx import helper

import ge
from ge.compiler.builtin import ConstantFolding as CF
from ge.compiler.builtin.dim_bounds import value_bounds

node = helper.make_node
INT32 = onnx.TensorProto.INT32
INF = float("inf")

#: x[batch, seq, 4]: its dims as exporters read them, and the pieces of S.
_DIMS = [node("Shape", ["x"], ["s"], name="shape"),
         node("Gather", ["s", "i0"], ["b"], name="batch"),
         node("Gather", ["s", "i1"], ["n"], name="seq"),
         node("Unsqueeze", ["b", "ax"], ["ub"], name="ub"),
         node("Unsqueeze", ["n", "ax"], ["un"], name="un")]
_INITS = [init("i0", 0, np.int64), init("i1", 1, np.int64), init("ax", [0], np.int64),
          init("two", [2], np.int64), init("four", [4], np.int64),
          init("minus1", [-1], np.int64)]


def _compared(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto],
              shape: tuple[int, ...]) -> onnx.ModelProto:
    """x[batch, seq, 4] -> `nodes` (the last one a comparison, named "cmp") -> y, its
    boolean result of `shape`."""
    return model([*_DIMS, *nodes], [vi("x", shape=["batch", "seq", 4])],
                 [vi(nodes[-1].output[0], BOOL, shape)], [*_INITS, *inits])


def _feeds(*sizes: tuple[int, int]) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"x": rng.standard_normal((b, n, 4)).astype(np.float32)} for b, n in sizes]


_SIZES = ((1, 1), (2, 3), (3, 0), (0, 5))


def _folded(graph: ge.graph.Graph) -> list[bool] | bool | None:
    """The constant the comparison "cmp" became (None when it is still computed)."""
    if graph.has_node("cmp"):
        return None
    (out,) = graph.nodes_of_type("NetOutput")
    producer = out.get_input_producer(0)
    assert producer is not None and producer[0].type == "Const"
    value: list[bool] | bool = producer[0].get_attr("value").numpy().tolist()
    return value


_S = node("Concat", ["ub", "two", "un", "four"], ["S"], name="S", axis=0)  # [b, 2, n, 4]


@pytest.mark.parametrize(("nodes", "inits", "expected"), [
    # TorchScript's expand: S against -1s, either operand first
    ([_S, node("Equal", ["S", "c"], ["y"], name="cmp")],
     [init("c", [-1, -1, -1, -1], np.int64)], [False] * 4),
    ([_S, node("Equal", ["c", "S"], ["y"], name="cmp")],
     [init("c", [-1, -1, -1, -1], np.int64)], [False] * 4),
    # positions where both sides are constants are computed: expand(b, -1, n)
    ([node("Concat", ["ub", "minus1", "un"], ["S"], name="S", axis=0),
      node("Equal", ["S", "c"], ["y"], name="cmp")],
     [init("c", [-1, -1, -1], np.int64)], [False, True, False]),
    ([_S, node("Equal", ["S", "c"], ["y"], name="cmp")],
     [init("c", [-1, 2, -3, 5], np.int64)], [False, True, False, False]),
    # broadcasting: a scalar, and a [2, 1] column (the result [2, 4], static)
    ([_S, node("Equal", ["S", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)],
     [False] * 4),
    ([_S, node("Equal", ["S", "c"], ["y"], name="cmp")],
     [init("c", [[-1], [-7]], np.int64)], [[False] * 4] * 2),
    # a whole Shape, a Shape's part, a Slice, Gather by a vector, a Size
    ([node("Equal", ["s", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)],
     [False] * 3),
    ([node("Shape", ["x"], ["s1"], name="shape1", start=1),
      node("Equal", ["s1", "c"], ["y"], name="cmp")], [init("c", [-1, 4], np.int64)],
     [False, True]),
    ([node("Slice", ["s", "st", "en"], ["sl"], name="slice"),
      node("Equal", ["sl", "c"], ["y"], name="cmp")],
     [init("st", [0], np.int64), init("en", [2], np.int64), init("c", -1, np.int64)],
     [False, False]),
    ([node("Gather", ["s", "idx"], ["g"], name="pick"),
      node("Equal", ["g", "c"], ["y"], name="cmp")],
     [init("idx", [2, 0], np.int64), init("c", [4, -1], np.int64)], [True, False]),
    ([node("Size", ["x"], ["z"], name="size"), node("Equal", ["z", "c"], ["y"], name="cmp")],
     [init("c", -1, np.int64)], False),
    # a scalar dim as it is, reshaped, squeezed back
    ([node("Equal", ["b", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)], False),
    ([node("Reshape", ["b", "one"], ["rb"], name="rs"),
      node("Equal", ["rb", "c"], ["y"], name="cmp")],
     [init("one", [1, 1], np.int64), init("c", -1, np.int64)], [[False]]),
    ([node("Squeeze", ["ub", "ax"], ["sb"], name="sq"),
      node("Equal", ["sb", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)], False),
    # a Cast that keeps every value: int64 to int64, and constants to a wider type
    ([_S, node("Cast", ["S"], ["S64"], name="cast", to=I64),
      node("Equal", ["S64", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)],
     [False] * 4),
    # the signs: a dim is >= 0
    ([_S, node("Less", ["S", "c"], ["y"], name="cmp")], [init("c", 0, np.int64)],
     [False] * 4),
    ([_S, node("GreaterOrEqual", ["S", "c"], ["y"], name="cmp")], [init("c", 0, np.int64)],
     [True] * 4),
    ([_S, node("Greater", ["c", "S"], ["y"], name="cmp")], [init("c", 0, np.int64)],
     [False] * 4),
    ([_S, node("LessOrEqual", ["S", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)],
     [False] * 4),
    ([_S, node("Less", ["c", "S"], ["y"], name="cmp")], [init("c", -1, np.int64)],
     [True] * 4),
], ids=["equal-minus-ones", "minus-ones-first", "expand-keep-dim", "constants-computed",
        "scalar", "column", "shape", "shape-start", "slice", "gather-vector", "size",
        "scalar-dim", "reshaped", "squeezed", "cast-same-type", "less-0",
        "ge-0",
        "0-greater", "le-minus-1", "minus-1-less"])
def test_a_comparison_the_dims_decide_folds(nodes, inits, expected) -> None:
    original = _compared(nodes, inits, np.shape(expected))
    graph = load(original)
    assert run_pass(CF, graph)
    assert _folded(graph) == expected
    assert_sound(graph, original, _feeds(*_SIZES))
    assert_stable(CF, graph)


def test_int64_dims_cast_to_uint64_are_still_dims() -> None:
    """Every dim is at most int64's largest, so a Cast of a Shape to uint64 changes none
    and `Less(U, 0)` is False (trial NN); onnxruntime before 1.20 has no uint64 Less."""
    original = _compared([_S, node("Cast", ["S"], ["U"], name="cast",
                                   to=onnx.TensorProto.UINT64),
                          node("Less", ["U", "c"], ["y"], name="cmp")],
                         [init("c", 0, np.uint64)], (4,))
    graph = load(original)
    assert run_pass(CF, graph)
    assert _folded(graph) == [False] * 4
    try:
        ort_run(original, _feeds(*_SIZES)[0])
    except Exception as err:
        pytest.skip(f"onnxruntime cannot run the original: {str(err)[:100]}")
    assert_sound(graph, original, _feeds(*_SIZES))


@pytest.mark.parametrize(("nodes", "inits", "shape"), [
    # a dim may be 0 (or 4, or anything else >= 0)
    ([_S, node("Equal", ["S", "c"], ["y"], name="cmp")], [init("c", 0, np.int64)], [4]),
    ([_S, node("Equal", ["S", "c"], ["y"], name="cmp")], [init("c", [4, 2, 4, 4], np.int64)],
     [4]),
    ([_S, node("Less", ["S", "c"], ["y"], name="cmp")], [init("c", 1, np.int64)], [4]),
    ([_S, node("Equal", ["S", "c"], ["y"], name="cmp")],
     [init("c", [[-1], [5]], np.int64)], [2, 4]),  # row 2: is b 5?
    # not followed: arithmetic (b - n may be negative), a narrowing Cast (a dim of 2^31
    # would wrap), a value that is no dim (a graph input)
    ([node("Sub", ["ub", "un"], ["d"], name="sub"),
      node("Equal", ["d", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)], [1]),
    ([_S, node("Cast", ["S"], ["S32"], name="cast", to=INT32),
      node("Equal", ["S32", "c"], ["y"], name="cmp")], [init("c", -1, np.int32)], [4]),
    ([node("Equal", ["ids", "c"], ["y"], name="cmp")], [init("c", -1, np.int64)], [3]),
], ids=["dim-0", "dim-4", "less-1", "column-undecided", "sub", "cast-int32", "not-a-dim"])
def test_a_comparison_the_dims_do_not_decide_stays(nodes, inits, shape) -> None:
    inputs = [vi("x", shape=["batch", "seq", 4]), vi("ids", I64, [3])]
    original = model([*_DIMS, *nodes], inputs, [vi("y", BOOL, shape)], [*_INITS, *inits])
    graph = load(original)
    run_pass(CF, graph)
    assert graph.has_node("cmp")
    ids = np.array([-1, 0, 5], np.int64)
    assert_sound(graph, original, [{**f, "ids": ids} for f in _feeds(*_SIZES)])


def test_dims_inferred_after_an_einsum_are_not_trusted() -> None:
    """onnx infers `...ij,...jk` of [1, 4, 4] and [m, 4, 4] as [1, 4, 4], where onnxruntime
    broadcasts to [m, 4, 4]: `Equal(Shape(e), [1, -1, -1])` read from the inferred dims
    would be [True, False, False], wrong at m = 3. Nothing is folded from such a shape."""
    original = model(
        [node("Einsum", ["x", "w"], ["e"], name="einsum", equation="...ij,...jk->...ik"),
         node("Shape", ["e"], ["s"], name="shape"),
         node("Equal", ["s", "c"], ["y"], name="cmp")],
        [vi("x", shape=[1, 4, 4]), vi("w", shape=["m", 4, 4])], [vi("y", BOOL, [3])],
        [init("c", [1, -1, -1], np.int64)])
    graph = load(original)
    run_pass(CF, graph)
    assert graph.has_node("cmp")
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((1, 4, 4)).astype(np.float32),
              "w": rng.standard_normal((m, 4, 4)).astype(np.float32)} for m in (1, 3)]
    assert_sound(graph, original, feeds[:1])
    # At m = 3 onnxruntime's own optimisations (1.19's) fold the Shape from the inferred
    # dims too; its unoptimised run computes [False, False, False], and so does ge's model.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for source in (original, graph.to_onnx()):
        session = ort.InferenceSession(source.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        assert session.run(None, feeds[1])[0].tolist() == [False, False, False]


def test_the_bounds_per_element() -> None:
    """`value_bounds` of S = [b, 2, n, 4] with x[batch, seq, 4]: the dims from 0 up, the
    constants exact; an unknown dim is still a dim (>= 0)."""
    original = _compared([_S, node("Equal", ["S", "c"], ["y"], name="cmp")],
                         [init("c", -1, np.int64)], (4,))
    graph = load(original)
    bounds = value_bounds(graph.find_node_by_name("cmp"), 0)
    assert bounds is not None
    assert bounds.shape == (4,)
    assert bounds.low == (0, 2, 0, 4) and bounds.high == (INF, 2, INF, 4)
    graph.find_node_by_name("shape").update_input_desc(
        0, ge.graph.TensorDesc([-1, -1, 4], data_type=ge.graph.DataType.DT_FLOAT))
    bounds = value_bounds(graph.find_node_by_name("cmp"), 0)
    assert bounds is not None and bounds.low == (0, 2, 0, 4)
