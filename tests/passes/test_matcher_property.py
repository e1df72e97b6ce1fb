"""Property: random graphs of elementwise operators and MatMuls, rewritten by
semantics-preserving pattern passes, stay valid and keep their onnxruntime outputs.

The passes are written as users write them, as plugin files compiled with
`ge.compiler.compile_graph(graph, pass_paths=[...])`: Add(x, 0) → x, Mul(x, 1) → x,
Sub(x, 0) → x (const-value match), MatMul + Add → Gemm (rank checks in
`meet_requirements`), Transpose∘Transpose → x (IR-attribute match), and their commutative
variants (`enable_commutative_match()`, run after shape inference). Sub and MatMul are not
commutative: a commutative pass must never match `Sub(0, x)` or swap MatMul operands.

The random models (opset 17, every value typed in value_info, except in a quarter of them
where passes before shape inference see unknown shapes) have fan-out (a value used twice,
which must block the rewrite of a pattern's intermediate), matching and non-matching
constants (shared initializers, fresh initializers, Constant nodes; scalars, vectors,
-0.0; a graph input whose default is 0.0 is not a constant), and graph outputs that are
pattern intermediates or values a rewrite turns into pass-throughs of a graph input or of a
constant. Inputs and weights hold small integers, so both versions compute exactly; the
tolerance grows only with the magnitude of the values.

Per example: the compilation succeeds, `graph.validate()` passes, the saved model passes
`onnx.checker.check_model(full_check=True)`, graph input and output names are those of
the original in order, no operator is added, and onnxruntime computes the same outputs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ge.graph
from ge.compiler import CompileReport, compile_graph

F32 = TensorProto.FLOAT
STRUCTURAL = ("Data", "Const", "NetOutput")

# -- the passes, as plugin files ------------------------------------------------------------------

_HEADER = """\
import ge.es.all as es
from ge.passes import (PatternFusionPass, PatternMatcherConfigBuilder, pattern,
                       register_fusion_pass)
"""

# {expr}: the pattern (inputs[0] and a Python number, which becomes a float32 scalar Const).
_IDENTITY_PASS = _HEADER + """
@register_fusion_pass(name="{name}", stage="{stage}")
class {name}(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_const_value_match(){extra}.build())

    @pattern
    def neutral(self, inputs):
        return {expr}

    def replacement(self, inputs):
        return inputs[0]
"""

_GEMM_PASS = _HEADER + """

def _dims(tensor):
    dims = list(tensor.node.get_output_desc(tensor.index).get_shape().get_dims())
    return None if any(d < 0 for d in dims) else dims


@register_fusion_pass(name="{name}", stage="{stage}")
class {name}(PatternFusionPass):
    def __init__(self):
        super().__init__({config})

    @pattern
    def matmul_add(self, inputs):
        return {expr}

    def meet_requirements(self, match_result):
        a, b, c = (_dims(match_result.get_captured_tensor(i)) for i in range(3))
        if a is None or b is None or c is None or len(a) != 2 or len(b) != 2 or len(c) > 2:
            return False
        # Gemm's C must broadcast to (M, N) one way (the Add's result keeps MatMul's shape).
        return all(d in (1, want) for d, want in zip(reversed(c), (b[1], a[0])))

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2])
"""

_TRANSPOSE_PASS = _HEADER + """
@register_fusion_pass(name="{name}", stage="{stage}")
class {name}(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_ir_attr_match().build())

    @pattern
    def twice(self, inputs):
        return es.Transpose(es.Transpose(inputs[0], perm=[1, 0]), perm=[1, 0])

    def replacement(self, inputs):
        return inputs[0]
"""

BEFORE, AFTER = "BeforeInferShape", "AfterInferShape"
COMMUTATIVE = ".enable_commutative_match()"

PASS_SOURCES: dict[str, str] = {
    "AddZero": _IDENTITY_PASS.format(name="AddZero", stage=BEFORE, extra="",
                                     expr="inputs[0] + 0.0"),
    "AddZeroCommutative": _IDENTITY_PASS.format(name="AddZeroCommutative", stage=AFTER,
                                                extra=COMMUTATIVE, expr="0.0 + inputs[0]"),
    "MulOne": _IDENTITY_PASS.format(name="MulOne", stage=BEFORE, extra="",
                                    expr="inputs[0] * 1.0"),
    "MulOneCommutative": _IDENTITY_PASS.format(name="MulOneCommutative", stage=AFTER,
                                               extra=COMMUTATIVE, expr="1.0 * inputs[0]"),
    "SubZero": _IDENTITY_PASS.format(name="SubZero", stage=BEFORE, extra="",
                                     expr="inputs[0] - 0.0"),
    # Sub is not commutative: this pass must not match Sub(0, x) (= -x).
    "SubZeroCommutative": _IDENTITY_PASS.format(name="SubZeroCommutative", stage=AFTER,
                                                extra=COMMUTATIVE, expr="inputs[0] - 0.0"),
    "MatMulAddToGemm": _GEMM_PASS.format(
        name="MatMulAddToGemm", stage=BEFORE, config="None",
        expr="es.MatMul(inputs[0], inputs[1]) + inputs[2]"),
    # Add may swap its inputs; MatMul must not (a [4, 4] @ [4, 4] swap would compute
    # something else).
    "MatMulAddToGemmCommutative": _GEMM_PASS.format(
        name="MatMulAddToGemmCommutative", stage=AFTER,
        config="PatternMatcherConfigBuilder().enable_commutative_match().build()",
        expr="es.MatMul(inputs[0], inputs[1]) + inputs[2]"),
    "TransposeTwice": _TRANSPOSE_PASS.format(name="TransposeTwice", stage=BEFORE),
}
PASS_NAMES = sorted(PASS_SOURCES)


@pytest.fixture(scope="module")
def plugin_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One plugin file per pass (a compilation may load any subset of them)."""
    folder = tmp_path_factory.mktemp("matcher_property_passes")
    files = {}
    for name, source in PASS_SOURCES.items():
        files[name] = folder / f"{name.lower()}.py"
        files[name].write_text(textwrap.dedent(source))
    return files


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("matcher_property_saved")


# -- building models ------------------------------------------------------------------------------

Shape = tuple[int, ...]


class ModelBuilder:
    """An ONNX graph grown value by value; every value's shape is known."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[str] = []
        self.initializers: list[onnx.TensorProto] = []
        self.shapes: dict[str, Shape] = {}
        self.computed: list[str] = []  # values made by operator nodes (outputs candidates)
        self.matrices: list[str] = []  # rank-2 values operators may read
        self._shared: dict[str, str] = {}
        self._count = 0
        self._rng = np.random.default_rng(seed)

    def _fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def add_input(self, name: str, shape: Shape = (2, 4)) -> str:
        self.inputs.append(name)
        self.shapes[name] = shape
        self.matrices.append(name)
        return name

    def initializer(self, array: np.ndarray, prefix: str = "c") -> str:
        name = self._fresh(prefix)
        self.initializers.append(numpy_helper.from_array(array, name))
        self.shapes[name] = array.shape
        return name

    def weight(self, shape: Shape) -> str:
        """A [k, n] weight initializer of -1, 0, 1 that operators may read like a value."""
        name = self.initializer(self._rng.integers(-1, 2, shape).astype(np.float32), "w")
        self.matrices.append(name)
        return name

    def bias(self, n: int) -> str:
        return self.initializer(self._rng.integers(-2, 3, [n]).astype(np.float32), "bias")

    def constant(self, array: np.ndarray, how: str = "shared") -> str:
        """A constant: a `shared` initializer (one per value), a `fresh` one, a `node`, or
        an `input` with that default (not a constant at all: the caller may feed it)."""
        if how == "input":
            name = self.initializer(array, "d")
            self.inputs.append(name)
            return name
        if how == "shared":
            key = f"{array.dtype}{array.shape}{array.tobytes().hex()}"
            if key not in self._shared:
                self._shared[key] = self.initializer(array, "k")
            return self._shared[key]
        if how == "fresh":
            return self.initializer(array, "k")
        name = self._fresh("kn")
        self.nodes.append(helper.make_node("Constant", [], [name], name=name,
                                           value=numpy_helper.from_array(array, name)))
        self.shapes[name] = array.shape
        return name

    def op(self, op_type: str, inputs: list[str], shape: Shape, **attrs: object) -> str:
        name = self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        self.shapes[name] = shape
        self.computed.append(name)
        if len(shape) == 2:
            self.matrices.append(name)
        return name

    # ops whose shape follows from their inputs
    def unary(self, op_type: str, x: str) -> str:
        return self.op(op_type, [x], self.shapes[x])

    def binary(self, op_type: str, x: str, y: str) -> str:
        return self.op(op_type, [x, y], np.broadcast_shapes(self.shapes[x], self.shapes[y]))

    def matmul(self, a: str, b: str) -> str:
        return self.op("MatMul", [a, b], (self.shapes[a][0], self.shapes[b][1]))

    def transpose(self, x: str, perm: bool = True) -> str:
        attrs = {"perm": [1, 0]} if perm else {}
        return self.op("Transpose", [x], tuple(reversed(self.shapes[x])), **attrs)

    def model(self, outputs: list[str], typed: bool = True) -> onnx.ModelProto:
        """The model; `typed=False` leaves value_info out (passes before shape inference
        then see unknown shapes)."""
        graph = helper.make_graph(
            self.nodes, "random",
            [helper.make_tensor_value_info(n, F32, self.shapes[n]) for n in self.inputs],
            [helper.make_tensor_value_info(n, F32, self.shapes[n]) for n in outputs],
            self.initializers)
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        proto.ir_version = 8
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
        onnx.checker.check_model(proto, full_check=True)
        known = {vi.name for vi in proto.graph.value_info} | set(outputs)
        assert known >= set(self.computed), "every value must be typed for BeforeInferShape"
        if not typed:
            del proto.graph.value_info[:]
        return proto


def scalar(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


# -- the strategy ---------------------------------------------------------------------------------

Draw = Callable[[st.SearchStrategy], object]


def _pick(draw: Draw, b: ModelBuilder, shape: Shape | None = None, rows: int | None = None
          ) -> str | None:
    names = [n for n in b.matrices if (shape is None or b.shapes[n] == shape)
             and (rows is None or b.shapes[n][0] == rows)]
    return draw(st.sampled_from(names)) if names else None


def _neutral_constant(draw: Draw, b: ModelBuilder, x: str, neutral: float) -> str:
    """Mostly the pattern's constant exactly (float32 scalar), sometimes one that must not
    match it: other shape ([n], [1], x's shape), -0.0 (other bytes), another value."""
    n = b.shapes[x][-1]
    value = draw(st.sampled_from([
        scalar(neutral), scalar(neutral), scalar(neutral),
        np.full([n], neutral, np.float32), np.full([1], neutral, np.float32),
        np.full(b.shapes[x], neutral, np.float32),
        scalar(-0.0) if neutral == 0.0 else scalar(-1.0), scalar(2.0)]))
    return b.constant(value, draw(st.sampled_from(["shared", "fresh", "node", "input"])))


def _matmul_operands(draw: Draw, b: ModelBuilder) -> tuple[str, str]:
    a = _pick(draw, b)
    assert a is not None
    k = b.shapes[a][1]
    right = _pick(draw, b, rows=k) if draw(st.booleans()) else None
    if right is None:
        right = b.weight((k, draw(st.sampled_from([4, 2]))))
    return a, right


def step_unary(draw: Draw, b: ModelBuilder) -> None:
    b.unary(draw(st.sampled_from(["Relu", "Neg"])), _pick(draw, b))


def step_binary(draw: Draw, b: ModelBuilder) -> None:
    x = _pick(draw, b)
    y = _pick(draw, b, shape=b.shapes[x])
    b.binary(draw(st.sampled_from(["Add", "Mul", "Sub"])), x, y)


def step_matmul(draw: Draw, b: ModelBuilder) -> None:
    b.matmul(*_matmul_operands(draw, b))


def step_transpose(draw: Draw, b: ModelBuilder) -> None:
    b.transpose(_pick(draw, b), perm=draw(st.booleans()))


def step_transpose_pair(draw: Draw, b: ModelBuilder) -> None:
    # Without `perm` (reverse by default) the IR-attribute match must not take it.
    inner = b.transpose(_pick(draw, b), perm=draw(st.sampled_from([True, True, False])))
    b.transpose(inner, perm=draw(st.sampled_from([True, True, False])))


def _neutral_step(op_type: str, neutral: float) -> Callable[[Draw, ModelBuilder], None]:
    def step(draw: Draw, b: ModelBuilder) -> None:
        x = _pick(draw, b)
        c = _neutral_constant(draw, b, x, neutral)
        b.binary(op_type, *((c, x) if draw(st.booleans()) else (x, c)))

    step.__name__ = f"step_{op_type.lower()}_{neutral:g}"
    return step


def step_matmul_add(draw: Draw, b: ModelBuilder) -> None:
    mm = b.matmul(*_matmul_operands(draw, b))
    m, n = b.shapes[mm]
    kind = draw(st.sampled_from(["vector", "vector", "row", "value", "column", "scalar"]))
    if kind == "vector":
        bias = b.bias(n)
    elif kind == "scalar":  # a scalar C; the shared 0.0 is also AddZero's
        bias = b.constant(scalar(draw(st.sampled_from([0.0, 3.0]))))
    elif kind == "row":
        bias = b.constant(np.arange(n, dtype=np.float32).reshape(1, n), "fresh")
    elif kind == "column":
        bias = b.constant(np.arange(m, dtype=np.float32).reshape(m, 1), "fresh")
    else:
        bias = _pick(draw, b, shape=(m, n)) or b.bias(n)
    b.binary("Add", *((bias, mm) if draw(st.booleans()) else (mm, bias)))


STEPS = [step_unary, step_binary, step_matmul, step_transpose, step_transpose_pair,
         _neutral_step("Add", 0.0), _neutral_step("Mul", 1.0), _neutral_step("Sub", 0.0),
         step_matmul_add]


@st.composite
def random_models(draw: Draw) -> onnx.ModelProto:
    b = ModelBuilder(seed=draw(st.integers(0, 2**16)))
    for i in range(draw(st.integers(1, 2))):
        b.add_input(f"x{i}")
    for _ in range(draw(st.integers(0, 2))):
        b.weight((4, 4))
    for _ in range(draw(st.integers(1, 12))):
        draw(st.sampled_from(STEPS))(draw, b)
    # Often the last value (a pattern's root), plus intermediates or pass-through candidates.
    last = b.computed[-1:] if draw(st.booleans()) else []
    others = draw(st.lists(st.sampled_from(b.computed), max_size=3 - len(last), unique=True))
    outputs = list(dict.fromkeys(last + others)) or b.computed[-1:]
    return b.model(outputs, typed=draw(st.sampled_from([True, True, True, False])))


pass_sets = st.one_of(st.just(tuple(PASS_NAMES)),
                      st.lists(st.sampled_from(PASS_NAMES), min_size=1, unique=True)
                      .map(lambda names: tuple(sorted(names))))


# -- the checks -----------------------------------------------------------------------------------


def _operators(graph: ge.graph.Graph) -> int:
    return sum(1 for n in graph.get_direct_nodes() if n.type not in STRUCTURAL)


def _onnx_operators(proto: onnx.ModelProto) -> int:
    return sum(1 for n in proto.graph.node if n.op_type != "Constant")


def _session(proto: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # no warning for inputs with a default (initializer)
    # What runs must be the model itself: onnxruntime 1.32's basic-level optimisations
    # break valid models (a Transpose read by one Gemm's A and another Gemm's C loses its
    # output: "Node input 'transpose7' is not a graph input, initializer, or output").
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _feeds(proto: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Integers in [-2, 2]; an input with a default gets 2 or 3 (never a neutral value)."""
    rng = np.random.default_rng(seed)
    defaults = {t.name for t in proto.graph.initializer}
    feeds = {}
    for vi in proto.graph.input:
        low, high = (2, 4) if vi.name in defaults else (-2, 3)
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.integers(low, high, shape).astype(np.float32)
    return feeds


def _magnitude(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> float:
    """The largest finite |value| the original model computes anywhere (the tolerance
    scale: below 2**24 the integer arithmetic of both versions is exact)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend(vi for vi in proto.graph.value_info if vi.name not in known)
    values = [np.abs(v[np.isfinite(v)]) for v in _session(probe).run(None, feeds)]
    return max([1.0, *(float(v.max()) for v in values if v.size)])


def compile_and_check(proto: onnx.ModelProto, files: list[Path], scratch: Path,
                      seed: int = 0) -> CompileReport:
    """Compile `proto` with the plugin `files`; check everything the property promises."""
    graph = ge.graph.load(proto)
    operators_before = _operators(graph)
    report = compile_graph(graph, pass_paths=files)
    graph.validate()
    saved = scratch / "compiled.onnx"
    graph.save(saved)
    compiled = onnx.load(saved)
    onnx.checker.check_model(compiled, full_check=True)
    onnx.checker.check_model(graph.to_onnx(), full_check=True)
    assert [o.name for o in compiled.graph.output] == [o.name for o in proto.graph.output]
    assert [i.name for i in compiled.graph.input] == [i.name for i in proto.graph.input]
    assert _operators(graph) <= operators_before
    assert _onnx_operators(compiled) <= _onnx_operators(proto)
    feeds = _feeds(proto, seed)
    scale = _magnitude(proto, feeds)
    want = _session(proto).run(None, feeds)
    got = _session(compiled).run(None, feeds)
    for name, w, g in zip([o.name for o in proto.graph.output], want, got, strict=True):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * scale, err_msg=name)
    return report


def _describe(proto: onnx.ModelProto) -> str:
    lines = [f"{n.op_type}({', '.join(n.input)}) -> {n.output[0]}"
             + (f" perm={list(n.attribute[0].ints)}" if n.op_type == "Transpose" and n.attribute
                else "") for n in proto.graph.node]
    inits = [f"{t.name}: {list(t.dims)} {numpy_helper.to_array(t).ravel()[:4]}"
             for t in proto.graph.initializer]
    return "\n".join([*inits, *lines, f"outputs: {[o.name for o in proto.graph.output]}"])


# -- the property ---------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(proto=random_models(), passes=pass_sets, seed=st.integers(0, 2**16))
def test_semantics_preserving_passes_keep_random_graphs_valid_and_equal(
        plugin_files, scratch, proto, passes, seed) -> None:
    note(_describe(proto))
    note(f"passes: {passes}")
    report = compile_and_check(proto, [plugin_files[name] for name in passes], scratch, seed)
    for record in report.records:
        if record.rewrites:
            event(f"{record.pass_name} rewrote")


def test_a_transpose_read_by_two_gemms_runs_in_onnxruntime(plugin_files, scratch) -> None:
    """The shrunk example that found onnxruntime's basic-level bug (see `_session`): a
    Transpose (no perm) feeds one MatMul+Add as A and another as the bias."""
    b = ModelBuilder(seed=0)
    x0 = b.add_input("x0")
    t = b.transpose(x0, perm=False)  # [4, 2]
    b.binary("Add", b.matmul(t, b.weight((2, 4))), b.bias(4))
    inner = b.transpose(b.weight((4, 4)))
    b.binary("Add", b.matmul(b.transpose(inner), b.weight((4, 2))), t)
    proto = b.model([inner])
    report = compile_and_check(proto, list(plugin_files.values()), scratch)
    assert "MatMulAddToGemm" in report.passes_that_changed()


# -- every pass fires (and every blocker blocks) on a fixed graph --------------------------------


def _every_pass_model() -> onnx.ModelProto:
    b = ModelBuilder(seed=1)
    x0, x1 = b.add_input("x0"), b.add_input("x1")
    w = b.weight((4, 4))
    zero, one = b.constant(scalar(0.0)), b.constant(scalar(1.0))
    a = b.binary("Add", x0, zero)  # AddZero; a graph output that becomes x0 itself
    s = b.binary("Add", zero, x1)  # AddZeroCommutative only
    c = b.binary("Mul", a, one)  # MulOne
    d = b.binary("Mul", b.constant(scalar(1.0), "node"), s)  # MulOneCommutative only
    e = b.binary("Sub", c, zero)  # SubZero
    f = b.binary("Sub", zero, d)  # nothing: Sub(0, x) is -x
    bias = b.bias(4)
    g = b.binary("Add", b.matmul(e, w), bias)  # MatMulAddToGemm
    h = b.binary("Add", bias, b.matmul(f, w))  # MatMulAddToGemmCommutative only
    m3 = b.matmul(g, w)
    i = b.binary("Add", m3, bias)  # blocked: the MatMul is also read by the Relu
    j = b.unary("Relu", m3)
    t2 = b.transpose(b.transpose(h))  # TransposeTwice
    t3 = b.transpose(i)
    t4 = b.transpose(t3)  # blocked: the inner Transpose is also read by the Neg
    k = b.unary("Neg", t3)
    t6 = b.transpose(b.transpose(j, perm=False))  # no perm attribute: no IR-attr match
    n1 = b.binary("Add", t2, b.constant(np.zeros([4], np.float32)))  # [4] zeros: no match
    n2 = b.binary("Mul", b.constant(scalar(-0.0), "fresh"), n1)  # not 1.0
    n3 = b.binary("Add", n2, b.constant(scalar(-0.0), "node"))  # -0.0: other bytes
    mm44 = b.matmul(w, b.weight((4, 4)))  # [4, 4] @ [4, 4]: MatMul must not swap
    sq = b.binary("Add", mm44, b.bias(4))  # MatMulAddToGemm
    fed = b.binary("Add", b.constant(scalar(0.0), "input"), sq)  # an input, not a Const
    return b.model([a, n3, t4, k, t6, fed])


EXPECTED_REWRITES = {
    "AddZero": 1, "AddZeroCommutative": 1, "MulOne": 1, "MulOneCommutative": 1,
    "SubZero": 1, "MatMulAddToGemm": 2, "MatMulAddToGemmCommutative": 1,
    "TransposeTwice": 1,
}


def test_every_pass_rewrites_on_a_fixed_graph(plugin_files, scratch) -> None:
    proto = _every_pass_model()
    report = compile_and_check(proto, list(plugin_files.values()), scratch)
    rewrites = {r.pass_name: r.rewrites for r in report.records}
    assert rewrites == {name: EXPECTED_REWRITES.get(name, 0) for name in PASS_NAMES}
    assert report.rewrites_by_pass() == EXPECTED_REWRITES
    assert [r.stage for r in report.records] == [BEFORE] * 5 + [AFTER] * 4
    graph = report.graph
    ops = sorted(n.type for n in graph.get_direct_nodes() if n.type not in STRUCTURAL)
    assert ops.count("Gemm") == 3 and ops.count("MatMul") == 1  # the blocked one stays
    assert ops.count("Transpose") == 4 and ops.count("Sub") == 1
    gemms = [n for n in graph.get_direct_nodes() if n.type == "Gemm"]
    assert {n.get_metadata()["ge.origin_pass"] for n in gemms} == {
        "MatMulAddToGemm", "MatMulAddToGemmCommutative"}


def test_each_pass_alone_on_the_fixed_graph(plugin_files, scratch) -> None:
    """Each pass on its own also preserves the outputs, and rewrites where expected."""
    proto = _every_pass_model()
    for name in PASS_NAMES:
        report = compile_and_check(proto, [plugin_files[name]], scratch)
        assert [r.pass_name for r in report.records] == [name]
        alone = report.records[0].rewrites
        # Alone, a commutative pass also takes what its plain twin would have taken.
        twin = name.removesuffix("Commutative")
        want = EXPECTED_REWRITES.get(name, 0)
        if twin != name:
            want += EXPECTED_REWRITES.get(twin, 0)
        assert alone == want, name
