"""`SliceSplitFusion` (built-in, origin-graph optimisation): Slices cutting one value into
consecutive pieces along one axis become one Split, nothing elsewhere. Run as the engine
runs it, the result saved, checked by onnx's full checker and run in onnxruntime against
the original (exact: a Split computes the very elements the Slices did)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from builtin_helpers import I64, F, assert_fused, histogram, init, load, model, run_pass, vi
from onnx import helper

import ge
from ge.compiler.builtin import SliceSplitFusion

pytestmark = pytest.mark.builtin_passes  # these tests are about a built-in pass

node = helper.make_node
INT_MAX = np.iinfo(np.int64).max

#: One Slice: (start, end) on the cut axis, or (start, end, step).
Bounds = tuple[int, ...]


def pieces(bounds: Sequence[Bounds], *, axis: int | None = 1, shape: Sequence[int] = (2, 6),
           opset: int = 17, outputs_of: Sequence[int] | None = None,
           extra: Sequence[onnx.NodeProto] = (), more_inputs: Sequence[onnx.ValueInfoProto] = (),
           more_outputs: Sequence[onnx.ValueInfoProto] = (),
           more_inits: Sequence[onnx.TensorProto] = ()) -> onnx.ModelProto:
    """x of `shape` cut by one Slice per bounds along `axis` (None: no axes input, axis 0);
    each piece is negated into output y<i> (or only those of `outputs_of`)."""
    nodes, inits, outputs = [], [], []
    cut = 0 if axis is None else axis % len(shape)
    for i, b in enumerate(bounds):
        inits += [init(f"s{i}", [b[0]], np.int64), init(f"e{i}", [b[1]], np.int64)]
        args = ["x", f"s{i}", f"e{i}"]
        if axis is not None or len(b) == 3:
            inits.append(init(f"a{i}", [0 if axis is None else axis], np.int64))
            args.append(f"a{i}")
        if len(b) == 3:
            inits.append(init(f"st{i}", [b[2]], np.int64))
            args.append(f"st{i}")
        nodes.append(node("Slice", args, [f"p{i}"], name=f"slice{i}"))
        if outputs_of is None or i in outputs_of:
            nodes.append(node("Neg", [f"p{i}"], [f"y{i}"], name=f"neg{i}"))
            outputs.append(vi(f"y{i}", F, piece_shape(shape, cut, b)))
    return model([*nodes, *extra], [vi("x", F, list(shape)), *more_inputs],
                 [*outputs, *more_outputs], [*inits, *more_inits], opset=opset)


def piece_shape(shape: Sequence[int | str], axis: int, b: Bounds) -> list[int | str]:
    """The shape of `x[b]` along `axis` (a symbolic length stays symbolic: "p")."""
    length = shape[axis]
    size = len(range(length)[slice(*b)]) if isinstance(length, int) else "p"
    return [size if a == axis else d for a, d in enumerate(shape)]


def split_sizes(saved: onnx.ModelProto) -> tuple[list[int], int]:
    (split,) = [n for n in saved.graph.node if n.op_type == "Split"]
    sizes = next(t for t in saved.graph.initializer if t.name == split.input[1])
    axis = next(a.i for a in split.attribute if a.name == "axis")
    return onnx.numpy_helper.to_array(sizes).tolist(), axis


def assert_splits(source: onnx.ModelProto, tmp_path: Path, sizes: list[int], axis: int,
                  slices_left: int = 0) -> onnx.ModelProto:
    graph = load(source)
    assert run_pass(SliceSplitFusion, graph)
    hist = histogram(graph)
    assert hist.get("Split") == 1 and hist.get("Slice", 0) == slices_left
    saved = assert_fused(graph, source, tmp_path, tol=0)
    assert split_sizes(saved) == (sizes, axis)
    return saved


def assert_untouched(source: onnx.ModelProto, tmp_path: Path) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(SliceSplitFusion, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path, tol=0)


# -- where it fires -------------------------------------------------------------------------


def test_rotate_half_halves_become_one_split(tmp_path: Path) -> None:
    saved = assert_splits(pieces([(0, 3), (3, INT_MAX)]), tmp_path, [3, 3], 1)
    (split,) = [n for n in saved.graph.node if n.op_type == "Split"]
    assert list(split.output) == ["p0", "p1"]  # the Slices' value names
    meta = {p.key: p.value for p in split.metadata_props}
    assert meta["ge.origin_pass"] == "SliceSplitFusion"
    assert meta["ge.origin_nodes"] == "slice0,slice1"


@pytest.mark.parametrize("bounds", [
    [(0, 2), (2, 4), (4, 6)],  # a fused QKV cut in three
    [(4, 6), (0, 2), (2, 4)],  # listed in any order
    [(-6, -4), (-4, 4), (4, 100)],  # negative and past-the-end bounds, clamped
    [(0, 1), (1, INT_MAX, 1)],  # an explicit step of one
], ids=["three", "any-order", "clamped", "steps-input"])
def test_consecutive_pieces_in_their_written_forms(bounds: list[Bounds], tmp_path: Path) -> None:
    sizes = sorted((len(range(6)[b[0]:b[1]]), range(6)[b[0]:b[1]].start) for b in bounds)
    sizes.sort(key=lambda s: s[1])
    assert_splits(pieces(bounds), tmp_path, [s[0] for s in sizes], 1)


def test_a_negative_axis_and_no_axes_input(tmp_path: Path) -> None:
    assert_splits(pieces([(0, 1), (1, 6)], axis=-1), tmp_path, [1, 5], 1)
    assert_splits(pieces([(0, 1), (1, 2)], axis=None), tmp_path, [1, 1], 0)


def test_a_third_slice_across_the_others_stays(tmp_path: Path) -> None:
    assert_splits(pieces([(0, 3), (3, 6), (2, 4)]), tmp_path, [3, 3], 1, slices_left=1)


def test_a_piece_that_is_a_graph_output_keeps_its_name(tmp_path: Path) -> None:
    source = pieces([(0, 3), (3, 6)], outputs_of=[1], more_outputs=[vi("p0", F, [2, 3])])
    saved = assert_splits(source, tmp_path, [3, 3], 1)
    assert [o.name for o in saved.graph.output] == ["y1", "p0"]


# -- where it must not fire -----------------------------------------------------------------


@pytest.mark.parametrize("bounds", [
    [(0, 2), (3, 6)],  # a gap
    [(0, 3), (2, 6)],  # an overlap
    [(0, 3)],  # one piece
    [(0, 3, 1), (3, 6, 2)],  # a step of two
    [(0, 6), (0, 6)],  # each whole: no cut (NoOpElimination's)
], ids=["gap", "overlap", "one", "step", "whole"])
def test_not_without_a_covering_of_consecutive_pieces(bounds: list[Bounds],
                                                     tmp_path: Path) -> None:
    assert_untouched(pieces(bounds), tmp_path)


def test_not_on_two_axes_at_once(tmp_path: Path) -> None:
    source = model(
        [node("Slice", ["x", "s", "e", "a"], ["p0"]), node("Slice", ["x", "s1", "e1", "a1"],
                                                          ["p1"])],
        [vi("x", F, [2, 6])], [vi("p0", F, [1, 3]), vi("p1", F, [1, 3])],
        [init("s", [0, 0], np.int64), init("e", [1, 3], np.int64), init("a", [0, 1], np.int64),
         init("s1", [1, 3], np.int64), init("e1", [2, 6], np.int64),
         init("a1", [0, 1], np.int64)])
    assert_untouched(source, tmp_path)


def test_not_with_bounds_computed_at_run_time(tmp_path: Path) -> None:
    source = model(
        [node("Slice", ["x", "zero", "half", "axis"], ["p0"]),
         node("Slice", ["x", "half", "end", "axis"], ["p1"])],
        [vi("x", F, [2, 6]), vi("half", I64, [1])], [vi("p0", F, [2, "a"]), vi("p1", F, [2, "b"])],
        [init("zero", [0], np.int64), init("end", [6], np.int64), init("axis", [1], np.int64)])
    graph = load(source)
    assert not run_pass(SliceSplitFusion, graph)


def test_other_dims_may_be_symbolic(tmp_path: Path) -> None:
    """rotate_half of a dynamic-shape Llama: `[batch, heads, seq, 64]` cut on its last axis
    (only the cut axis' length matters; every dim was required, so no dynamic export
    fused; onnxruntime does)."""
    source = pieces([(0, 32), (32, INT_MAX)], axis=-1, shape=("batch", 2, "seq", 64))
    saved = assert_splits(source, tmp_path, [32, 32], 3)
    assert [n.op_type for n in saved.graph.node].count("Slice") == 0


@pytest.mark.builtin_passes
def test_a_piece_s_dims_are_known_once_its_bounds_fold(tmp_path: Path) -> None:
    """rotate_half as a TorchScript export writes it: the half computed from the shape,
    `x.shape[-1] // 2`. Folding the bounds refines the Slices' descs (`ConstantFolding`),
    and the Split takes those: a `Shape` of a piece read further down then folds too (no
    refinement of its own needed, unlike `ReshapeTargetFolding`'s rewritten Reshapes)."""
    source = model(
        [node("Shape", ["x"], ["xs"], name="shape"),
         node("Gather", ["xs", "i3"], ["d"], name="last", axis=0),
         node("Div", ["d", "two"], ["half"], name="half"),
         node("Unsqueeze", ["half", "ax"], ["uh"], name="uh"),
         node("Slice", ["x", "zero", "uh", "axm1"], ["lo"], name="slice_lo"),
         node("Slice", ["x", "uh", "big", "axm1"], ["hi"], name="slice_hi"),
         node("Shape", ["hi"], ["hs"], name="shape_hi"),
         node("Gather", ["hs", "i3"], ["hd"], name="hi_length", axis=0),
         node("Cast", ["hd"], ["hf"], name="cast", to=onnx.TensorProto.FLOAT),
         node("Neg", ["hi"], ["nhi"], name="neg"),
         node("Concat", ["nhi", "lo"], ["rot"], name="rotate", axis=-1),
         node("Mul", ["rot", "hf"], ["y"], name="scale")],
        [vi("x", F, ["batch", 2, "seq", 8])], [vi("y", F, ["batch", 2, "seq", 8])],
        [init("i3", 3, np.int64), init("two", 2, np.int64), init("ax", [0], np.int64),
         init("zero", [0], np.int64), init("axm1", [-1], np.int64),
         init("big", [2**62], np.int64)])
    result = ge.compile(source, verify=True)
    assert histogram(result.graph) == {"Data": 1, "Const": 2, "Split": 1, "Neg": 1,
                                       "Concat": 1, "Mul": 1, "NetOutput": 1}
    split = result.graph.nodes_of_type("Split")[0]
    assert [split.get_output_desc(i).get_shape().get_dims()[3] for i in range(2)] == [4, 4]


def test_not_when_the_length_is_not_known() -> None:
    source = pieces([(0, 3), (3, INT_MAX)], shape=(2, "n"))
    assert not run_pass(SliceSplitFusion, load(source))


def test_not_below_opset_13(tmp_path: Path) -> None:
    assert_untouched(pieces([(0, 3), (3, 6)], opset=12), tmp_path)


def test_not_when_a_body_reads_a_piece(tmp_path: Path) -> None:
    then = helper.make_graph([node("Neg", ["p0"], ["t"])], "then", [], [vi("t", F, [2, 3])])
    other = helper.make_graph([node("Neg", ["p1"], ["e"])], "else", [], [vi("e", F, [2, 3])])
    source = pieces([(0, 3), (3, 6)], outputs_of=[],
                    extra=[node("If", ["c"], ["z"], then_branch=then, else_branch=other)],
                    more_inputs=[vi("c", onnx.TensorProto.BOOL, [])],
                    more_outputs=[vi("z", F, [2, 3])])
    graph = load(source)
    assert not run_pass(SliceSplitFusion, graph)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    assert_fused(graph, source, tmp_path,
                 [{"x": x, "c": np.array(flag)} for flag in (True, False)], tol=0)


def test_inside_a_body_and_of_a_slice_of_a_slice(tmp_path: Path) -> None:
    """Pieces of a piece: the outer cut is made in one run, the inner in the next."""
    inner = [node("Slice", ["p0", "z", "one", "ax"], ["q0"]),
             node("Slice", ["p0", "one", "big", "ax"], ["q1"]),
             node("Concat", ["q1", "q0"], ["r"], axis=1)]
    source = pieces([(0, 3), (3, 6)], outputs_of=[1], extra=inner,
                    more_outputs=[vi("r", F, [2, 3])],
                    more_inits=[init("z", [0], np.int64), init("one", [1], np.int64),
                                init("big", [INT_MAX], np.int64), init("ax", [1], np.int64)])
    graph = load(source)
    assert run_pass(SliceSplitFusion, graph)
    assert run_pass(SliceSplitFusion, graph)
    assert histogram(graph).get("Split") == 2 and "Slice" not in histogram(graph)
    assert_fused(graph, source, tmp_path, tol=0)


def body_cutting(value: str) -> onnx.ModelProto:
    """An If whose then-branch cuts `value` (the outer x, or its own Neg of x) in two."""
    body = helper.make_graph(
        [node("Neg", ["x"], ["nx"]), node("Slice", [value, "s0", "e0", "a0"], ["b0"]),
         node("Slice", [value, "s1", "e1", "a0"], ["b1"]), node("Sub", ["b0", "b1"], ["t"])],
        "then", [], [vi("t", F, [2, 3])],
        [init("s1", [3], np.int64), init("e1", [6], np.int64)])
    other = helper.make_graph([node("Neg", ["x"], ["e"]), node("Slice", ["e", "s0", "e0", "a0"],
                                                              ["f"])], "else", [],
                              [vi("f", F, [2, 3])])
    return model([node("If", ["c"], ["y"], then_branch=body, else_branch=other)],
                 [vi("c", onnx.TensorProto.BOOL, []), vi("x", F, [2, 6])], [vi("y", F, [2, 3])],
                 [init("s0", [0], np.int64), init("e0", [3], np.int64),
                  init("a0", [1], np.int64)])


def test_inside_a_body(tmp_path: Path) -> None:
    source = body_cutting("nx")
    graph = load(source)
    assert run_pass(SliceSplitFusion, graph)
    assert histogram(graph, everywhere=True).get("Split") == 1
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    assert_fused(graph, source, tmp_path,
                 [{"x": x, "c": np.array(flag)} for flag in (True, False)], tol=0)


def test_not_when_a_body_cuts_an_outer_value() -> None:
    """A body's outer-scope reads stay as they are."""
    assert not run_pass(SliceSplitFusion, load(body_cutting("x")))
