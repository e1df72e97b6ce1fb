"""`NoOpElimination` of a `Where` whose condition is a constant, False everywhere (it is
its third input) or True everywhere (its second), when nothing broadcasts the output
larger than that input; and the TorchScript `expand` chain this ends:
`Expand(x, Where(Equal(S, -1), ones, S))`, whose Equal `ConstantFolding` decides for a
shape vector S of dims (see test_dim_comparisons.py)."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from builtin_helpers import (
    BOOL,
    I64,
    assert_sound,
    assert_stable,
    histogram,
    init,
    load,
    model,
    run_pass,
    vi,
)
from onnx import helper

import ge
from ge.compiler.builtin import NoOpElimination as NOOP

node = helper.make_node
F = onnx.TensorProto.FLOAT


def _where(cond: onnx.TensorProto | None, a: str, b: str, *, x_dims: list[int | str],
           inits: list[onnx.TensorProto], more_inputs: list[onnx.ValueInfoProto] = (),
           out_dims: list[int | str] | None = None) -> onnx.ModelProto:
    """x -> Relu -> r; y = Where(cond, a, b) ("r" among them), out = Neg(y)."""
    initializers = [*inits] + ([cond] if cond is not None else [])
    inputs = [vi("x", shape=x_dims), *more_inputs]
    return model([node("Relu", ["x"], ["r"], name="relu"),
                  node("Where", ["cond", a, b], ["y"], name="where"),
                  node("Neg", ["y"], ["out"], name="neg")],
                 inputs, [vi("out", shape=out_dims or x_dims)], initializers)


def _cond(value: object) -> onnx.TensorProto:
    return init("cond", value, np.bool_)


@pytest.mark.parametrize(("cond", "a", "b", "inits", "x_dims"), [
    (_cond([[False] * 3] * 2), "k", "r", [init("k", np.ones((2, 3)))], [2, 3]),
    (_cond([[True] * 3] * 2), "r", "k", [init("k", np.ones((2, 3)))], [2, 3]),
    (_cond([False] * 3), "k", "r", [init("k", 5.0)], [2, 3]),  # [3] broadcast into [2, 3]
    (_cond(False), "k", "r", [init("k", [7.0, 8.0, 9.0])], [2, 3]),
    # symbols: the same output at every batch
    (_cond([[False] * 3]), "k", "r", [init("k", [1.0, 2.0, 3.0])], ["batch", 3]),
    (_cond(True), "r", "k", [init("k", [[1.0, 2.0, 3.0]])], ["batch", 3]),
], ids=["false-b", "true-a", "cond-broadcast", "scalar-false", "symbolic-false",
        "symbolic-true"])
def test_a_where_by_a_constant_condition_is_the_operand_it_takes(cond, a, b, inits,
                                                                  x_dims) -> None:
    original = _where(cond, a, b, x_dims=x_dims, inits=inits)
    graph = load(original)
    assert run_pass(NOOP, graph)
    assert "Where" not in histogram(graph)
    neg = graph.find_node_by_name("neg")
    assert neg.get_in_data_nodes_and_port_indexes(0)[0].name == "relu"
    rng = np.random.default_rng(0)
    batches = (2,) if isinstance(x_dims[0], int) else (1, 3, 0)
    assert_sound(graph, original, [
        {"x": rng.standard_normal((n, *x_dims[1:])).astype(np.float32)} for n in batches])
    assert_stable(NOOP, graph)


@pytest.mark.parametrize(("cond", "a", "b", "inits", "x_dims", "out_dims"), [
    # a condition with both values: each element comes from either
    (_cond([[False, True, False]] * 2), "k", "r", [init("k", np.ones((2, 3)))], [2, 3],
     None),
    # the condition, or the other operand, makes the output larger than the one taken
    (_cond([[False] * 3] * 2), "k", "r", [init("k", 1.0)], [3], [2, 3]),
    (_cond([False] * 3), "k", "r", [init("k", np.ones((2, 3)))], [3], [2, 3]),
    (_cond([[True] * 3] * 2), "r", "k", [init("k", 1.0)], [3], [2, 3]),
    # at some batch the other operand's rows are more than one: [4, 3] against [batch, 3]
    (_cond(False), "k", "r", [init("k", np.ones((4, 3)))], ["batch", 3], [4, 3]),
    # not a constant
    (None, "k", "r", [init("k", 1.0)], [2, 3], None),
], ids=["mixed", "cond-grows", "other-grows", "true-grows", "other-rows",
        "computed-condition"])
def test_a_where_that_changes_its_operand_stays(cond, a, b, inits, x_dims, out_dims) -> None:
    more = [vi("cond", BOOL, [2, 3])] if cond is None else []
    original = _where(cond, a, b, x_dims=x_dims, inits=inits, more_inputs=more,
                      out_dims=out_dims)
    graph = load(original)
    assert not run_pass(NOOP, graph)
    assert graph.has_node("where")


def _repeat_kv(n_rep: int, keep_dim: bool = False) -> onnx.ModelProto:
    """repeat_kv of a GQA decoder as TorchScript exports it: h[batch, 2, seq, 4] viewed as
    [batch, 2, 1, seq, 4] and expanded to `h[:, :, None].expand(b, 2, n_rep, seq, 4)`,
    written `Expand(u, Where(Equal(S, -1), ones, S))` with S = Concat(b, 2, n_rep, seq,
    4) from h's shape; then `reshape(b, 2 * n_rep, seq, 4)`. `keep_dim`: the second
    element of S is -1 instead (`expand(b, -1, ...)`: the Where then takes the ones there,
    and stays)."""
    second = "minus1" if keep_dim else "two"
    nodes = [
        node("Relu", ["h"], ["r"], name="relu"),
        node("Shape", ["r"], ["s"], name="shape"),
        node("Gather", ["s", "i0"], ["b"], name="batch"),
        node("Gather", ["s", "i2"], ["n"], name="seq"),
        node("Unsqueeze", ["b", "ax"], ["ub"], name="ub"),
        node("Unsqueeze", ["n", "ax"], ["un"], name="un"),
        node("Unsqueeze", ["r", "ax2"], ["u"], name="u"),
        node("Concat", ["ub", second, "rep", "un", "four"], ["S"], name="S", axis=0),
        node("ConstantOfShape", ["five"], ["ones"], name="ones",
             value=helper.make_tensor("one", I64, [1], [1])),
        node("Mul", ["ones", "minus"], ["minus_ones"], name="minus_ones"),
        node("Equal", ["S", "minus_ones"], ["eq"], name="eq"),
        node("Where", ["eq", "ones", "S"], ["target"], name="where"),
        node("Expand", ["u", "target"], ["e"], name="expand"),
        node("Concat", ["ub", "heads", "un", "four"], ["t"], name="t", axis=0),
        node("Reshape", ["e", "t"], ["out"], name="view"),
    ]
    inits = [init("i0", 0, np.int64), init("i2", 2, np.int64), init("ax", [0], np.int64),
             init("ax2", [2], np.int64), init("two", [2], np.int64),
             init("minus1", [-1], np.int64), init("rep", [n_rep], np.int64),
             init("four", [4], np.int64), init("five", [5], np.int64),
             init("minus", -1, np.int64), init("heads", [2 * n_rep], np.int64)]
    return model(nodes, [vi("h", F, ["batch", 2, "seq", 4])],
                 [vi("out", F, ["batch", 2 * n_rep, "seq", 4])], inits)


def _compiled(original: onnx.ModelProto) -> ge.CompileResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (generated inputs' notes)
        return ge.compile(original, verify=True)


@pytest.mark.builtin_passes
def test_the_torchscript_expand_chain_goes() -> None:
    """Equal folds (a dim is never -1), the Where is S, and the Expand reads S itself; the
    Expand stays (n_rep = 2 repeats), verified at other sizes of batch and seq too."""
    original = _repeat_kv(2)
    result = _compiled(original)
    ops = histogram(result.graph)
    assert "Equal" not in ops and "Where" not in ops and "ConstantOfShape" not in ops
    assert ops["Expand"] == 1
    expand = next(iter(result.graph.nodes_of_type("Expand")))
    target = expand.get_input_producer(1)
    assert target is not None and target[0].type == "Concat"
    assert result.verification is not None and result.verification.ok
    rng = np.random.default_rng(0)
    assert_sound(result.graph, original, [
        {"h": rng.standard_normal((b, 2, n, 4)).astype(np.float32)}
        for b, n in ((1, 1), (3, 5), (2, 7))])  # (not seq 0: the view's 0 copies a dim)


@pytest.mark.builtin_passes
def test_an_expand_that_keeps_a_dim_keeps_its_where() -> None:
    """`expand(b, -1, ...)`: the -1 is a constant on both sides, so the condition folds,
    but True there and False elsewhere: the Where picks per element, and stays."""
    original = _repeat_kv(2, keep_dim=True)
    result = _compiled(original)
    ops = histogram(result.graph)
    assert "Equal" not in ops and ops["Where"] == 1
    assert result.verification is not None and result.verification.ok
