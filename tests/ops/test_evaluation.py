"""`NodeEvaluator` gives exactly what `evaluate_node` gives: same dtypes, shapes and bytes,
across operators, dtypes, shapes, attributes, omitted inputs and outputs, inputs read
twice, constants held as raw or typed TensorProto fields or as numpy arrays; its evaluators
are reused within an instance and never shared between instances."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.errors import ConstantEvaluationError
from ge.graph import Graph, Node, Tensor, load
from ge.ops import evaluate_node
from ge.ops.evaluation import NodeEvaluator

F32, F16, F64 = np.float32, np.float16, np.float64
I8, I32, I64, U8 = np.int8, np.int32, np.int64, np.uint8

RNG = np.random.default_rng(7)


def _f(*shape: int, dtype: Any = F32) -> np.ndarray:
    return RNG.normal(size=shape).astype(dtype)


def _i(*shape: int, dtype: Any = I64, low: int = -5, high: int = 6) -> np.ndarray:
    return RNG.integers(low, high, size=shape).astype(dtype)


# (op, inputs, attributes, opset, number of outputs or output names); an input is an
# array, None (omitted) or an int k (the same value as input k).
CASES: list[tuple[str, list[Any], dict[str, Any], int, Any]] = [
    ("Transpose", [_f(4, 3)], {"perm": [1, 0]}, 17, 1),
    ("Transpose", [_f(2, 3, 4)], {}, 17, 1),
    ("Transpose", [_i(2, 3, 4, dtype=I32)], {"perm": [2, 0, 1]}, 13, 1),
    ("Cast", [_f(3, 2)], {"to": TensorProto.FLOAT16}, 17, 1),
    ("Cast", [_f(3, 2) * 100], {"to": TensorProto.INT32}, 17, 1),
    ("Cast", [_i(5)], {"to": TensorProto.FLOAT}, 17, 1),
    ("Cast", [_f(4)], {"to": TensorProto.BFLOAT16}, 17, 1),
    ("Cast", [np.array([True, False])], {"to": TensorProto.FLOAT}, 17, 1),
    ("Cast", [_f(3)], {"to": TensorProto.STRING}, 17, 1),
    ("Cast", [_f(3)], {"to": TensorProto.DOUBLE}, 6, 1),
    ("Sqrt", [np.abs(_f(2, 3))], {}, 17, 1),
    ("Sqrt", [np.array(8.0, F32)], {}, 17, 1),
    ("Exp", [_f(4, dtype=F64)], {}, 17, 1),
    ("Log", [np.array([0.0, 1.0, -1.0], F32)], {}, 17, 1),
    ("Neg", [_i(3, dtype=I8)], {}, 17, 1),
    ("Erf", [_f(6)], {}, 17, 1),
    ("Reciprocal", [_f(2, 2, dtype=F16)], {}, 17, 1),
    ("Floor", [_f(5) * 3], {}, 17, 1),
    ("Add", [_f(2, 3), _f(3)], {}, 17, 1),
    ("Add", [_i(2, 1, dtype=U8, low=0), _i(1, 4, dtype=U8, low=0)], {}, 17, 1),
    ("Sub", [_f(3, dtype=F64), _f(2, 3, dtype=F64)], {}, 17, 1),
    ("Mul", [_f(4, 4), 0], {}, 17, 1),
    ("Div", [np.array(1.0, F32), np.array(1e5, F32)], {}, 17, 1),
    ("Div", [_i(6, dtype=I32), np.array([2, -3, 4, 5, -7, 1], I32)], {}, 17, 1),
    ("Pow", [np.abs(_f(3)), np.array(2.0, F32)], {}, 17, 1),
    ("Pow", [_f(3, dtype=F16), np.array(3, I64)], {}, 15, 1),
    ("MatMul", [_f(2, 3), _f(3, 4)], {}, 17, 1),
    ("MatMul", [_f(2, 3, dtype=F64), _f(3, dtype=F64)], {}, 17, 1),
    ("MatMul", [_i(3, 2), _i(2, 2)], {}, 13, 1),
    ("Reshape", [_f(2, 6), np.array([3, -1], I64)], {}, 17, 1),
    ("Reshape", [_f(0, 3), np.array([0, 3], I64)], {"allowzero": 1}, 17, 1),
    ("Unsqueeze", [_f(3), np.array([0, 2], I64)], {}, 17, 1),
    ("Unsqueeze", [_f(3)], {"axes": [1]}, 11, 1),
    ("Squeeze", [_f(1, 3, 1), np.array([0], I64)], {}, 17, 1),
    ("Squeeze", [_f(1, 3, 1)], {}, 17, 1),
    ("Concat", [_i(2), _i(3), np.array([9], I64)], {"axis": 0}, 17, 1),
    ("Concat", [_f(2, 2), _f(2, 1)], {"axis": -1}, 17, 1),
    ("Gather", [np.array([1, 8, 16], I64), np.array(1, I64)], {}, 17, 1),
    ("Gather", [_f(3, 4), np.array([[0, 2], [1, 1]], I64)], {"axis": 1}, 17, 1),
    ("Shape", [_f(2, 3, 4)], {}, 17, 1),
    ("Shape", [_f(2, 3, 4)], {"start": 1, "end": -1}, 17, 1),
    ("Size", [_f(2, 3)], {}, 17, 1),
    ("Slice", [_f(5, 6), np.array([1], I64), np.array([4], I64)], {}, 17, 1),
    ("Slice", [_f(5, 6), np.array([0, 1], I64), np.array([5, 6], I64), None,
               np.array([2, 2], I64)], {}, 17, 1),
    ("ReduceMean", [_f(2, 3, 4)], {"axes": [-1], "keepdims": 1}, 17, 1),
    ("ReduceMean", [_f(2, 3, 4), np.array([0, 2], I64)], {"keepdims": 0}, 18, 1),
    ("ReduceSum", [_f(3, 4, dtype=F64), np.array([1], I64)], {}, 17, 1),
    ("ReduceSum", [_i(3, 4)], {"keepdims": 0}, 17, 1),
    ("Softmax", [_f(2, 5)], {"axis": -1}, 17, 1),
    ("Where", [np.array([True, False, True]), _f(3), _f(3)], {}, 17, 1),
    ("Equal", [_i(4), _i(4)], {}, 17, 1),
    ("Greater", [_f(4), np.array(0.0, F32)], {}, 17, 1),
    ("Not", [np.array([True, False])], {}, 17, 1),
    ("And", [np.array([True, False]), np.array([True, True])], {}, 17, 1),
    ("ConstantOfShape", [np.array([2, 3], I64)],
     {"value": numpy_helper.from_array(np.array([1.5], F32))}, 17, 1),
    ("ConstantOfShape", [np.array([4], I64)], {}, 17, 1),
    ("Range", [np.array(0, I64), np.array(7, I64), np.array(2, I64)], {}, 17, 1),
    ("Range", [np.array(1.0, F32), np.array(2.0, F32), np.array(0.25, F32)], {}, 17, 1),
    ("Expand", [_f(3, 1), np.array([2, 3, 4], I64)], {}, 17, 1),
    ("Tile", [_f(2, 2), np.array([2, 3], I64)], {}, 17, 1),
    ("Split", [_f(6, 2), np.array([2, 4], I64)], {"axis": 0}, 17, 2),
    ("Split", [_f(2, 6)], {"axis": 1, "num_outputs": 3}, 18, 3),
    ("TopK", [_f(3, 5), np.array([2], I64)], {"axis": -1}, 17, 2),
    ("Dropout", [_f(2, 3)], {}, 17, ["y0", ""]),
    ("Dropout", [_f(2, 3)], {}, 17, 2),
    ("Clip", [_f(6), None, np.array(0.5, F32)], {}, 17, 1),
    ("Identity", [np.array([b"a", b"bc"], dtype=object)], {}, 17, 1),
    ("EyeLike", [_f(3, 4)], {"k": 1}, 17, 1),
    ("EyeLike", [_f(2, 2)], {"dtype": TensorProto.INT32}, 17, 1),
    ("CumSum", [_f(5), np.array(0, I64)], {"reverse": 1}, 17, 1),
    ("NonZero", [np.array([[1, 0], [0, 3]], I64)], {}, 17, 1),
    ("Einsum", [_f(2, 3), _f(3, 4)], {"equation": "ij,jk->ik"}, 17, 1),
    ("LayerNormalization", [_f(2, 4), _f(4), _f(4)], {"epsilon": 1e-5}, 17, 1),
]


def _initializer(array: np.ndarray, name: str, raw: bool) -> TensorProto:
    if raw or array.dtype.kind in "OUS" or array.dtype == F16:
        return numpy_helper.from_array(array, name)
    elem = helper.np_dtype_to_tensor_dtype(array.dtype)
    return helper.make_tensor(name, elem, array.shape, array.flatten().tolist(), raw=False)


def _graph(op: str, inputs: list[Any], attrs: dict[str, Any], opset: int, outputs: Any,
           *, raw: bool = True, suffix: str = "") -> tuple[Graph, Node]:
    """A model of one node whose inputs are initializers (raw or typed fields), loaded."""
    names, initializers = [], []
    for i, value in enumerate(inputs):
        if value is None:
            names.append("")
        elif isinstance(value, int):
            names.append(names[value])
        else:
            names.append(f"c{i}{suffix}")
            initializers.append(_initializer(value, names[-1], raw))
    out_names = ([f"y{k}" for k in range(outputs)] if isinstance(outputs, int)
                 else list(outputs))
    node = helper.make_node(op, names, out_names, name="n", **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_empty_tensor_value_info(n)
                                               for n in out_names if n],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    loaded = load(model)
    return loaded, loaded.find_node_by_name("n")


def _assert_same(got: list[Tensor], want: list[Tensor]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.data_type == w.data_type
        assert g.shape == w.shape
        a, b = g.numpy(), w.numpy()
        assert a.dtype == b.dtype
        if a.dtype.kind == "O":
            assert a.tolist() == b.tolist()
        else:
            assert a.tobytes() == b.tobytes()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(0)
@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed-fields"])
@pytest.mark.parametrize(("op", "inputs", "attrs", "opset", "outputs"), CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_node_evaluator_gives_what_evaluate_node_gives(op, inputs, attrs, opset, outputs,
                                                       raw) -> None:
    _, node = _graph(op, inputs, attrs, opset, outputs, raw=raw)
    want = evaluate_node(node)
    evaluator = NodeEvaluator()
    _assert_same(evaluator.evaluate(node), want)
    _assert_same(evaluator.evaluate(node), want)  # the cached evaluator, run again
    assert len(evaluator._evaluators) == 1  # (not `evaluate_node` again)


def test_a_cached_evaluator_computes_each_nodes_own_values() -> None:
    """Nodes of one signature share an evaluator and each get their own results; a node of
    another signature (attribute, inputs read, opset) gets another evaluator."""
    evaluator = NodeEvaluator()
    graphs = [_graph("Transpose", [_f(3, 2)], {"perm": [1, 0]}, 17, 1, suffix=str(k))
              for k in range(3)]
    for _, node in graphs:
        _assert_same(evaluator.evaluate(node), evaluate_node(node))
    assert len(evaluator._evaluators) == 1
    others = [_graph("Transpose", [_f(3, 2, 2)], {"perm": [2, 0, 1]}, 17, 1),
              _graph("Transpose", [_f(3, 2)], {"perm": [1, 0]}, 13, 1),
              _graph("Mul", [_f(2), 0], {}, 17, 1),
              _graph("Mul", [_f(2), _f(2)], {}, 17, 1)]
    for _, node in others:
        _assert_same(evaluator.evaluate(node), evaluate_node(node))
    assert len(evaluator._evaluators) == 5
    assert not NodeEvaluator()._evaluators  # nothing shared between instances


def test_node_evaluator_feeds_array_backed_constants_like_initializers() -> None:
    """Constants made in memory (numpy arrays, also of types without a plain numpy form,
    and non-contiguous data) evaluate as `evaluate_node` evaluates them."""
    graph = Graph("g")
    graph.model.opset_imports = {"": 17}
    values = [Tensor(_f(3, 4)), Tensor(_f(3, 4), data_type=None),
              Tensor(np.asfortranarray(_f(3, 4))), Tensor(_i(3, 4, dtype=I32)),
              Tensor(_f(3, 4)).set_data_type(Tensor(_f(1)).data_type)]
    evaluator = NodeEvaluator()
    for value in values:
        const = graph.add_const(value)
        node = graph.add_node("ReduceSum", num_inputs=1, attrs={"keepdims": 0})
        graph.add_data_edge(const, 0, node, 0)
        _assert_same(evaluator.evaluate(node), evaluate_node(node))
    strings = graph.add_const(Tensor(np.array(["x", "yz"], dtype=object)))
    ident = graph.add_node("Identity", num_inputs=1)
    graph.add_data_edge(strings, 0, ident, 0)
    _assert_same(evaluator.evaluate(ident), evaluate_node(ident))


def test_node_evaluator_failures_are_constant_evaluation_errors() -> None:
    _, node = _graph("Reshape", [_f(2, 3), np.array([4, -1], I64)], {}, 17, 1)
    with pytest.raises(ConstantEvaluationError):
        evaluate_node(node)
    with pytest.raises(ConstantEvaluationError):
        NodeEvaluator().evaluate(node)


def test_a_node_the_model_gives_no_name_is_named_by_what_it_computes() -> None:
    """ge's name for it ('Relu') is in no file: the refusal names it as the model does;
    err.nodes keeps ge's name. Nothing of the graph changes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = load(helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)]))
    (node,) = graph.nodes_of_type("Relu")
    before = graph.to_onnx().SerializeToString()
    for evaluate in (evaluate_node, NodeEvaluator().evaluate):
        with pytest.raises(ConstantEvaluationError) as caught:
            evaluate(node)
        assert caught.value.code == ConstantEvaluationError.code
        assert caught.value.message == (
            "unnamed Relu node (computing 'y'): input 0 is not a constant")
        assert tuple(caught.value.nodes) == ("Relu",)
    assert graph.to_onnx().SerializeToString() == before


def test_string_tensor_attributes_are_not_cached() -> None:
    """A string tensor has no exact key (numpy keeps object pointers): such a node is
    evaluated without the cache, so two different values never share an evaluator."""
    evaluator = NodeEvaluator()
    for words in (["a"], ["b", "c"]):
        value = numpy_helper.from_array(np.array(words, dtype=object))
        _, node = _graph("ConstantOfShape", [np.array([1], I64)], {}, 17, 1)
        node.set_attr("value", Tensor.from_proto(value))
        assert NodeEvaluator.signature(node) is None
        try:
            want = evaluate_node(node)
        except ConstantEvaluationError:
            with pytest.raises(ConstantEvaluationError):
                evaluator.evaluate(node)
            continue
        _assert_same(evaluator.evaluate(node), want)
    assert not evaluator._evaluators


def test_constant_folding_keeps_evaluators_per_compilation(tmp_path) -> None:
    """Each compilation's ConstantFolding has its own evaluators."""
    import ge
    from ge.compiler.builtin import ConstantFolding

    made: list[NodeEvaluator] = []
    real = ConstantFolding.__init__

    def init(self) -> None:
        real(self)
        made.append(self._evaluator)

    path = tmp_path / "m.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Sqrt", ["k"], ["s"]), helper.make_node("Add", ["x", "s"], ["y"])]
    onnx.save(helper.make_model(
        helper.make_graph(nodes, "g", [x], [y],
                          [numpy_helper.from_array(np.array([4.0, 9.0], F32), "k")]),
        opset_imports=[helper.make_opsetid("", 17)]), path)
    pytest.MonkeyPatch().context()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ConstantFolding, "__init__", init)
        ge.compile(str(path))
        ge.compile(str(path))
    assert len(made) == 2 and made[0] is not made[1]
    assert len(made[0]._evaluators) == len(made[1]._evaluators) == 1


@pytest.mark.parametrize("dtype", [F32, F16, F64, I8, I32, I64, U8, np.uint16, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_fed_arrays_are_what_initializers_decode_to(dtype: Any) -> None:
    """An input is fed as `to_array(value.to_proto())` would be: values, dtype, shape and
    writeability, for raw bytes, typed fields and arrays made in memory."""
    from ge.ops.evaluation import _feed

    array = (RNG.normal(size=(3, 2)) * 10).astype(dtype)
    typed = helper.make_tensor("t", helper.np_dtype_to_tensor_dtype(array.dtype), array.shape,
                               array.flatten().tolist(), raw=False)
    tensors = [Tensor.from_proto(numpy_helper.from_array(array, "t")),
               Tensor.from_proto(typed), Tensor(array), Tensor(np.asfortranarray(array))]
    for tensor in tensors:
        want = numpy_helper.to_array(tensor.to_proto("t"))
        got = _feed(tensor)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
        assert got.flags.writeable == want.flags.writeable
