"""`ReshapeTargetFolding`: a Reshape's computed target becomes a constant (0 for the input's
own dim, one -1 for a dim left computed). Trial Z: after SymbolicShapeSharing merged the
Q/K/V shape arithmetic, onnxruntime could no longer prove K's and V's targets and left them
computed, a small BERT 2-4% slower than its original; ge now writes the 0s itself."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from builtin_helpers import assert_sound, histogram, init, load, model, ort_run, run_pass, vi
from onnx import helper

import ge
from ge.compiler.builtin import CommonSubexpressionElimination as CSE
from ge.compiler.builtin import ConstantFolding
from ge.compiler.builtin import ReshapeTargetFolding as FOLD
from ge.compiler.builtin import SymbolicShapeSharing as SHARING

node = helper.make_node
INITS = [init("i0", 0, np.int64), init("i1", 1, np.int64), init("ax", [0], np.int64),
         init("heads", [2, 4], np.int64)]


def _heads(source_of_k: str, *, x_dims=("batch", "sequence"), y_dims=("batch", "sequence"),
           allowzero: int | None = None) -> onnx.ModelProto:
    """q = Relu(x), k = Neg(y), both viewed as [b, s, 2, 4] by a target computed from the
    shape of `source_of_k` for k (of q's own for q), then added back as [b, s, 8]."""
    attrs = {} if allowzero is None else {"allowzero": allowzero}
    nodes = [node("Relu", ["x"], ["q"], name="q"), node("Neg", ["y"], ["k"], name="k")]
    for name, source in (("q", "q"), ("k", source_of_k)):
        nodes += [
            node("Shape", [source], [f"s_{name}"], name=f"shape_{name}"),
            node("Gather", [f"s_{name}", "i0"], [f"b_{name}"], name=f"batch_{name}"),
            node("Gather", [f"s_{name}", "i1"], [f"n_{name}"], name=f"seq_{name}"),
            node("Unsqueeze", [f"b_{name}", "ax"], [f"ub_{name}"], name=f"ub_{name}"),
            node("Unsqueeze", [f"n_{name}", "ax"], [f"un_{name}"], name=f"un_{name}"),
            node("Concat", [f"ub_{name}", f"un_{name}", "heads"], [f"t_{name}"],
                 name=f"target_{name}", axis=0),
            node("Reshape", [name, f"t_{name}"], [f"v_{name}"], name=f"view_{name}", **attrs),
            node("Softmax", [f"v_{name}"], [f"w_{name}"], name=f"softmax_{name}"),
        ]
    nodes.append(node("Add", ["w_q", "w_k"], ["out"], name="add"))
    return model(nodes, [vi("x", shape=[*x_dims, 8]), vi("y", shape=[*y_dims, 8])],
                 [vi("out", shape=[*x_dims, 2, 4])], INITS,
                 check=allowzero is None)


def _feeds(batch: int, sequence: int, other: int | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 10 + sequence)
    return {"x": rng.standard_normal((batch, sequence, 8)).astype(np.float32),
            "y": rng.standard_normal((batch, other or sequence, 8)).astype(np.float32)}


def _targets(graph: ge.graph.Graph) -> dict[str, list[int] | None]:
    found = {}
    for reshape in graph.nodes_of_type("Reshape"):
        producer = reshape.get_input_producer(1)
        assert producer is not None
        value = producer[0].get_attr("value") if producer[0].type == "Const" else None
        found[reshape.name] = None if value is None else value.numpy().tolist()
    return found


def test_a_target_of_the_input_s_own_dims_is_a_constant_with_zeros() -> None:
    original = _heads("k")
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view_q": [0, 0, 2, 4], "view_k": [0, 0, 2, 4]}
    for batch, sequence in ((1, 1), (2, 5), (3, 2)):
        assert_sound(graph, original, [_feeds(batch, sequence)])


def test_a_target_shared_after_symbolic_sharing_folds_by_the_symbols() -> None:
    """k's target computed from q's shape (what SymbolicShapeSharing and CSE make of the
    two): q and k have the same symbols, so q's dims are k's."""
    original = _heads("k")
    graph = load(original)
    assert run_pass(SHARING, graph) and run_pass(CSE, graph)
    assert len(graph.nodes_of_type("Concat")) == 1  # one target for both
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view_q": [0, 0, 2, 4], "view_k": [0, 0, 2, 4]}
    assert_sound(graph, original, [_feeds(2, 5), _feeds(1, 3)])


def test_another_symbol_stays_computed_beside_a_zero() -> None:
    """k's target read from q's shape while k's sequence is another symbol: its batch is
    k's own by symbol (a 0), its sequence unproven; -1 beside a 0 could not be inferred
    when that 0 copies a dim of size 0, so the target stays computed."""
    original = _heads("q", y_dims=("batch", "other"))
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view_q": [0, 0, 2, 4], "view_k": None}
    assert_sound(graph, original, [_feeds(2, 3)])


def test_one_unproven_element_beside_static_sizes_becomes_minus_one() -> None:
    """x[n, 8] viewed as [Shape(y)[0], 2, 4] with y[m, 8]: the model runs only where m is
    n, and there -1 is that value."""
    original = model(
        [node("Shape", ["y"], ["s"], name="shape_y"),
         node("Gather", ["s", "i0"], ["m"], name="m"),
         node("Unsqueeze", ["m", "ax"], ["um"], name="um"),
         node("Concat", ["um", "heads"], ["t"], name="target", axis=0),
         node("Reshape", ["x", "t"], ["v"], name="view"),
         node("Add", ["v", "v"], ["out"], name="add")],
        [vi("x", shape=["n", 8]), vi("y", shape=["m", 8])], [vi("out", shape=["n", 2, 4])],
        INITS)
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view": [-1, 2, 4]}
    y = np.ones((3, 8), np.float32)
    assert_sound(graph, original, [{"x": np.arange(24, dtype=np.float32).reshape(3, 8),
                                    "y": y}])


def test_two_unproven_elements_keep_the_target() -> None:
    original = _heads("q", y_dims=("other_batch", "other"))
    graph = load(original)
    assert run_pass(FOLD, graph)  # q's own
    assert _targets(graph) == {"view_q": [0, 0, 2, 4], "view_k": None}
    assert_sound(graph, original, [_feeds(2, 3)])


def _allowzero(y_dims: list[int | str], ids: list[int], rest: list[int], *,
               x_dims: tuple[int | str, ...] = ("batch", "sequence", 8),
               allowzero: int = 1) -> onnx.ModelProto:
    """y = Reshape[allowzero](Relu(x), Concat(Shape(x)[i] for i in `ids`, `rest`)): how
    the dynamo exporter writes every `view`."""
    nodes = [node("Relu", ["x"], ["r"], name="relu"),
             node("Shape", ["r"], ["s"], name="shape")]
    pieces = []
    for i in ids:
        nodes += [node("Gather", ["s", f"i{i}"], [f"d{i}"], name=f"dim{i}"),
                  node("Unsqueeze", [f"d{i}", "ax"], [f"u{i}"], name=f"u{i}")]
        pieces.append(f"u{i}")
    nodes += [node("Concat", [*pieces, "rest"], ["t"], name="target", axis=0),
              node("Reshape", ["r", "t"], ["y"], name="view", allowzero=allowzero)]
    return model(nodes, [vi("x", shape=list(x_dims))], [vi("y", shape=y_dims)],
                 [*(init(f"i{i}", i, np.int64) for i in ids), init("ax", [0], np.int64),
                  init("rest", rest, np.int64)])


def _x(*shape: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)}


#: Sizes of [batch, sequence, 8] with empty ones: where allowzero matters.
EMPTY_AND_NOT = [_x(0, 3, 8), _x(2, 0, 8), _x(0, 0, 8), _x(2, 3, 8), _x(1, 1, 8)]


def _where_it_runs(original: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]
                   ) -> list[dict[str, np.ndarray]]:
    """The feeds the installed onnxruntime runs `original` on: before 1.20 it refused a -1
    beside a 0-sized dim under allowzero=1 too (an empty batch), which the folded model
    runs; the sizes it runs are compared, at least the non-empty ones."""
    runs = []
    for feed in feeds:
        try:
            ort_run(original, feed)
        except Exception:
            assert 0 in next(iter(feed.values())).shape  # (only an empty one may fail)
            continue
        runs.append(feed)
    return runs


def test_allowzero_copies_of_the_input_s_own_dims_become_zeros_without_allowzero() -> None:
    """The dynamo exporter's `view`: allowzero=1 and a target of the input's own dims
    (or their symbols). A 0 under allowzero=0 copies the very dim, 0 included, so the
    target is [0, 0, 2, 4] and allowzero goes: the same output at every size, empty
    batch or sequence too."""
    original = _heads("k", allowzero=1)
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view_q": [0, 0, 2, 4], "view_k": [0, 0, 2, 4]}
    assert all(r.get_attr("allowzero") == 0 for r in graph.nodes_of_type("Reshape"))
    assert_sound(graph, original, [_feeds(0, 3), _feeds(2, 0), _feeds(0, 0), _feeds(2, 5)])


def test_an_allowzero_minus_one_becomes_the_size_it_stands_for() -> None:
    """`view(b, s, -1, 4)` under allowzero=1: -1 beside a copied 0 is refused under
    allowzero=0 (onnxruntime cannot infer it from a size of 0; under allowzero=1 it
    infers it from the non-zero dims), so it becomes 2, what it is at every size."""
    original = _allowzero(["batch", "sequence", 2, 4], [0, 1], [-1, 4])
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view": [0, 0, 2, 4]}
    assert graph.nodes_of_type("Reshape")[0].get_attr("allowzero") == 0
    assert_sound(graph, original, _where_it_runs(original, EMPTY_AND_NOT))


def test_an_allowzero_merge_back_keeps_its_size_for_the_minus_one() -> None:
    """`view(b, s, -1)` of [b, s, 2, 4] (the heads merged back): -1 is 8."""
    original = _allowzero(["batch", "sequence", 8], [0, 1], [-1],
                          x_dims=("batch", "sequence", 2, 4))
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view": [0, 0, 8]}
    assert_sound(graph, original, _where_it_runs(
        original, [_x(0, 3, 2, 4), _x(2, 0, 2, 4), _x(3, 5, 2, 4)]))


def test_an_allowzero_minus_one_of_symbolic_sizes_stays_computed() -> None:
    """x [batch, sequence, n] viewed as [b, s, -1, 4]: the -1 is n / 4, no one size, and
    allowzero=0 would refuse it beside a copied 0 where allowzero=1 infers it. Without
    allowzero the same target folds to [0, 0, -1, 4] (which is what it was)."""
    x_dims = ("batch", "sequence", "n")
    graph = load(_allowzero(["batch", "sequence", "m", 4], [0, 1], [-1, 4], x_dims=x_dims))
    assert not run_pass(FOLD, graph)
    original = _allowzero(["batch", "sequence", "m", 4], [0, 1], [-1, 4], x_dims=x_dims,
                          allowzero=0)
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view": [0, 0, -1, 4]}
    assert_sound(graph, original, [_x(2, 3, 8)])


def test_an_allowzero_zero_size_beside_a_copy_is_left_alone() -> None:
    """x [batch, 8, 0] viewed as [b, 0, 2, 4]: the literal 0 is a size under allowzero=1
    and would copy the 8 under allowzero=0, so nothing changes."""
    original = _allowzero(["batch", 0, 2, 4], [0], [0, 2, 4], x_dims=("batch", 8, 0))
    graph = load(original)
    assert not run_pass(FOLD, graph)
    assert_sound(graph, original, [_x(2, 8, 0), _x(0, 8, 0)])


def test_allowzero_keeps_static_dims_as_sizes() -> None:
    """A static dim of the input (here 3) needs no copy: under allowzero=1 it stays the
    size it is, and allowzero stays."""
    original = _allowzero([3, 2, 2, 2], [0, 1], [2, 2], x_dims=(3, 2, 4))
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert _targets(graph) == {"view": [3, 2, 2, 2]}
    assert graph.nodes_of_type("Reshape")[0].get_attr("allowzero") == 1
    assert_sound(graph, original, [_x(3, 2, 4)])


def test_a_value_downstream_of_an_einsum_is_not_trusted_by_symbol() -> None:
    """onnx infers Einsum("...ij,...jk") of [n, 4, 4] and [m, 4, 4] as [n, 4, 4] although
    the runtime broadcasts n and m: a target read from another value's `n` must not become
    a 0 on the Einsum's output (its own dims still may)."""
    original = model(
        [node("Einsum", ["a", "b"], ["e"], name="einsum", equation="...ij,...jk->...ik"),
         node("Shape", ["a"], ["s"], name="shape_a"),
         node("Gather", ["s", "i0"], ["n"], name="n"),
         node("Unsqueeze", ["n", "ax"], ["un"], name="un"),
         node("Concat", ["un", "minus"], ["t"], name="target", axis=0),
         node("Reshape", ["e", "t"], ["out"], name="view")],
        [vi("a", shape=["n", 4, 4]), vi("b", shape=["m", 4, 4])], [vi("out", shape=["r", "c"])],
        [init("i0", 0, np.int64), init("ax", [0], np.int64), init("minus", [-1], np.int64)],
        check=False)
    graph = load(original)
    assert not run_pass(FOLD, graph)
    feeds = {"a": np.ones((1, 4, 4), np.float32), "b": np.ones((3, 4, 4), np.float32)}
    assert_sound(graph, original, [feeds])


@pytest.mark.builtin_passes
def test_a_compiled_bert_layer_keeps_no_shape_arithmetic() -> None:
    """In a compilation (sharing, CSE, this pass, dead code), the targets' arithmetic goes."""
    original = _heads("k")
    result = ge.compile(original, verify=True, dims={"batch": 2, "sequence": 3})
    assert {n.type for n in result.graph.get_direct_nodes()} >= {"Reshape"}
    assert not result.graph.nodes_of_type("Concat")
    assert not result.graph.nodes_of_type("Shape")


# -- what the folded target decides downstream ------------------------------------------------


def _heads_read_back(*, einsum: bool = False) -> onnx.ModelProto:
    """y = Reshape(x, Concat(Shape(x)[0], Shape(x)[1], [-1], [32])) of x [B, S, 64], and the
    number of heads read back from y's shape (`Gather(Shape(y), 2)`, as repeat_kv of a
    TorchScript Llama export reads it) scaling y. With `einsum`, x is an Einsum's output
    whose inferred dims onnx may get wrong, and y's batch is read back instead."""
    nodes = [node("Einsum", ["a", "b"], ["x"], name="einsum", equation="...ij,...jk->...ik")
             ] if einsum else []
    nodes += [
        node("Shape", ["x"], ["xs"], name="shape_x"),
        node("Gather", ["xs", "i0"], ["b0"], name="batch", axis=0),
        node("Gather", ["xs", "i1"], ["s1"], name="seq", axis=0),
        node("Unsqueeze", ["b0", "ax"], ["ub"], name="ub"),
        node("Unsqueeze", ["s1", "ax"], ["us"], name="us"),
        node("Concat", ["ub", "us", "minus", "d32"], ["t"], name="target", axis=0),
        node("Reshape", ["x", "t"], ["y"], name="view"),
        node("Shape", ["y"], ["ys"], name="shape_y"),
        node("Gather", ["ys", "read"], ["heads"], name="heads", axis=0),
        node("Cast", ["heads"], ["hf"], name="cast", to=onnx.TensorProto.FLOAT),
        node("Mul", ["y", "hf"], ["out"], name="scale")]
    inputs = ([vi("a", shape=[1, "S", 64]), vi("b", shape=["B", 64, 64])] if einsum
              else [vi("x", shape=["B", "S", 64])])
    return model(nodes, inputs, [vi("out", shape=["B", "S", None, 32])],
                 [init("i0", 0, np.int64), init("i1", 1, np.int64),
                  init("ax", [0], np.int64), init("minus", [-1], np.int64),
                  init("read", 0 if einsum else 2, np.int64),
                  init("d32", [32], np.int64)], check=not einsum)


def test_the_reshaped_value_gets_the_dims_the_constant_target_decides() -> None:
    """Inference ran while the target was computed: y was [B, S, unk, 32]. With the
    constant [0, 0, -1, 32] its third dim is 2, and a Shape of it then folds (trial JJ:
    the number of heads of repeat_kv stayed computed, 11 -> 5 nodes instead of 2)."""
    original = _heads_read_back()
    graph = load(original)
    view = graph.find_node_by_name("view")
    assert list(view.get_output_desc(0).get_shape())[2] != 2
    assert run_pass(FOLD, graph)
    assert list(view.get_output_desc(0).get_shape()) == ["B", "S", 2, 32]
    assert run_pass(ConstantFolding, graph)
    assert not graph.has_node("heads")  # folded: 2
    assert_sound(graph, original, [{"x": np.ones((2, 3, 64), np.float32)},
                                   {"x": np.ones((1, 5, 64), np.float32)}])


@pytest.mark.builtin_passes
def test_a_compiled_read_back_of_the_heads_is_a_constant() -> None:
    result = ge.compile(_heads_read_back(), verify=True)
    assert histogram(result.graph) == {"Data": 1, "Const": 2, "Reshape": 1, "Mul": 1,
                                       "NetOutput": 1}


@pytest.mark.builtin_passes
def test_dims_refined_from_an_einsum_s_inferred_shape_are_not_folded() -> None:
    """x = Einsum of [1, S, 64] and [B, 64, 64] is inferred [1, S, 64] where the runtime
    broadcasts it to [B, S, 64]: y's refined dims say 1 for its batch, but nothing
    computed from the Einsum is folded by its dims, so the compiled model reads B."""
    original = _heads_read_back(einsum=True)
    graph = load(original)
    assert run_pass(FOLD, graph)
    assert graph.find_node_by_name("view").get_output_desc(0).get_shape().get_dims()[0] == 1
    assert not run_pass(ConstantFolding, graph)
    assert graph.has_node("heads")
    feeds = {"a": np.ones((1, 3, 64), np.float32),
             "b": np.random.default_rng(0).standard_normal((4, 64, 64)).astype(np.float32)}
    assert_sound(graph, original, [feeds], exact=False)
    result = ge.compile(original, verify=True, inputs=feeds)
    assert result.verification is not None and result.verification.ok
    assert result.graph.has_node("heads")
