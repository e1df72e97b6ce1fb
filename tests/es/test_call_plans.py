"""Call plans (`ge.es.operators._CallPlan`): a repeated call shape reuses what its first call
decided, and builds exactly what the unplanned call builds, or raises exactly what it raises.

Every case runs three ways on fresh builders: through `reference_call` (the operator call as
it was before plans, kept here as the oracle), with a plan made afresh for every call (the
miss path), and a second time with the plans its first run left (the hit path, which must
make no plan for a call shape that succeeded). The graphs (nodes, names, attributes, edges,
descs, control edges, opset imports) and the errors (class and message) must be equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from ge.errors import BuilderMixError, BuilderTypeError, OpAttributeError, OpInputError
from ge.es import GraphBuilder, TensorHolder, attr_scope, control_dependency_scope
from ge.es import operators as ops_module
from ge.es.call_arguments import convert_attr, output_count, split_arguments
from ge.es.operators import _check_rejection, _where, call_operator
from ge.es.scopes import active_builder, scoped_attrs, scoped_control_deps
from ge.graph import DataType, Graph, Tensor
from ge.ops import register_op, unregister_op
from ge.ops.inference import infer_new_node
from ge.ops.memo import InferenceMemo, inference_memo_scope
from ge.ops.schemas import STANDARD_DOMAINS, get_op_spec, normalize_domain
from ge.passes.pattern import PatternInputs

# -- the oracle: the call as it was before plans -------------------------------------------


def _reference_builder(values: Sequence[Any], builder: GraphBuilder | None, where: str
                       ) -> GraphBuilder:
    if builder is None:
        builder = active_builder()
    found = builder
    for value in values:
        if isinstance(value, TensorHolder):
            if found is None or (builder is None and found._encloses(value._builder)):
                found = value._builder
            elif not value._builder._encloses(found):
                raise BuilderMixError(
                    f"{where}: input {value.name!r} belongs to GraphBuilder "
                    f"{value._builder.name!r}, but the operator is built by "
                    f"{found.name!r}; tensors of different builders cannot be mixed"
                )
    if found is None:
        raise BuilderTypeError(
            f"{where} has no TensorHolder input to take its builder from; pass builder="
        )
    if not isinstance(found, GraphBuilder):
        raise BuilderTypeError(f"builder must be a GraphBuilder, got {type(found).__name__}")
    return found


def reference_call(op_type: str, domain: str, args: Sequence[Any], kwargs: dict[str, Any], *,
                   num_outputs: int | None = None, name: str | None = None,
                   builder: GraphBuilder | None = None) -> Any:
    flat = [x for a in args for x in (a if isinstance(a, (list, tuple)) else [a])]
    flat += list(kwargs.values())
    owner = _reference_builder(flat, builder, op_type)
    opset = owner.opset_version(domain)
    graph = owner._live_graph(op_type)
    spec = get_op_spec(op_type, opset, domain)
    where = _where(spec, opset if domain in STANDARD_DOMAINS else spec.since_version)
    if num_outputs is not None and "num_outputs" in spec.attributes and not (
        spec.op_type == "Split" and (len(args) > 1 or "split" in kwargs)
    ):
        kwargs = {**kwargs, "num_outputs": num_outputs}
    values, attr_values = split_arguments(where, spec, args, kwargs)
    missing = [a.name for a in spec.attributes.values() if a.required and a.name not in
               attr_values]
    if missing:
        raise OpAttributeError(f"{where}: required attribute(s) missing: {', '.join(missing)}")
    holders = [None if v is None else owner._holder(v, f"{op_type} input {i}")
               for i, v in enumerate(values)]
    count = output_count(where, spec, attr_values, holders, num_outputs)
    attrs: dict[str, Any] = {}
    for key, value in {**scoped_attrs(), **attr_values}.items():
        attr_spec = spec.attributes.get(key)
        attrs[key] = convert_attr(where, attr_spec, value) if attr_spec else value
    if normalize_domain(domain):
        owner._use_domain(domain, op_type)
    node = graph.add_node(op_type, name=owner._node_name(name, op_type),
                          domain=normalize_domain(domain), num_inputs=len(holders),
                          num_outputs=count, attrs=attrs)
    for i, holder in enumerate(holders):
        if holder is not None:
            graph._connect(holder._node, holder._index, node, i)
    for dep in scoped_control_deps():
        graph.add_control_edge(owner._holder(dep, "control dependency")._node, node)
    rejected = infer_new_node(node)
    if rejected is not None:
        _check_rejection(owner, spec, node, rejected)
    outs = tuple(TensorHolder._make(owner, node, i) for i in range(count))
    if spec.variadic_output or count > 1:
        return outs
    return outs[0]


# -- running a case three ways --------------------------------------------------------------

Call = Callable[..., Any]


class Ops:
    """`ops.Gemm(...)` calls `impl("Gemm", domain, args, kwargs, ...)` as `ge.es` does."""

    def __init__(self, impl: Call, domain: str = "") -> None:
        self._impl, self._domain = impl, domain

    def __getattr__(self, op_type: str) -> Call:
        def operator(*args: Any, num_outputs: int | None = None, name: str | None = None,
                     builder: GraphBuilder | None = None, **attrs: Any) -> Any:
            return self._impl(op_type, self._domain, args, attrs, num_outputs=num_outputs,
                              name=name, builder=builder)
        return operator

    def domain(self, domain: str) -> Ops:
        return Ops(self._impl, domain)


class Ctx:
    """What a case gets: its builder, three inputs, a fourth created without a shape (GE's
    scalar placeholder: what it feeds is not checked against onnx, so ill-typed calls, such
    as an int64 constant added to it, are built) and a list of further graphs to compare."""

    def __init__(self, ops: Ops, opset: int) -> None:
        self.ops = ops
        self.b = GraphBuilder("case", opset=opset)
        self.x = self.b.create_input(0, shape=[2, 4])
        self.w = self.b.create_input(1, shape=[4, 3])
        self.c = self.b.create_input(2, shape=[3])
        self.p = self.b.create_input(3)
        self.graphs: list[Graph] = []


def _value(value: Any) -> Any:
    if isinstance(value, Tensor):
        return ("tensor", value.data_type, tuple(value.shape), value.tobytes())
    if isinstance(value, Graph):
        return ("graph", describe(value))
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value


def describe(graph: Graph) -> Any:
    """Everything a call can change in a graph, in node order."""
    nodes = []
    for node in graph.get_direct_nodes():
        ins = []
        for i in range(node.get_inputs_size()):
            producer = node.get_input_producer(i)
            ins.append(None if producer is None else (producer[0].name, producer[1]))
        descs = [(node.has_output_desc(i), repr(node.get_output_desc(i)),
                  node.get_output_desc(i).get_shape().get_dims(),
                  node.get_output_desc(i).get_data_type())
                 for i in range(node.get_outputs_size())]
        nodes.append((node.name, node.type, node.domain,
                      [(k, node.get_attr_kind(k), _value(node.get_attr(k)))
                       for k in node.get_attr_names()],
                      ins, node.get_output_names(), descs,
                      [n.name for n in node.get_in_control_nodes()]))
    return nodes, dict(graph.opset_imports)


def _result(value: Any) -> Any:
    if isinstance(value, TensorHolder):
        return (type(value).__name__, value.name, value.output_index)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_result(v) for v in value])
    return value


def run(case: Callable[[Ctx], Any], impl: Call, opset: int) -> Any:
    ctx = Ctx(Ops(impl), opset)
    error = result = None
    with inference_memo_scope(InferenceMemo()):
        try:
            result = _result(case(ctx))
        except Exception as err:  # the case's error is what is compared
            error = (type(err), str(err))
    graphs = [ctx.b.graph] if ctx.b._graph is not None else []
    return error, result, [describe(g) for g in graphs + ctx.graphs]


class PlanCounter:
    """Counts the plans made while it is installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made = 0
        real = ops_module._make_plan

        def counting(*args: Any) -> Any:
            self.made += 1
            return real(*args)

        monkeypatch.setattr(ops_module, "_make_plan", counting)


def check(case: Callable[[Ctx], Any], opset: int, monkeypatch: pytest.MonkeyPatch, *,
          fails: bool = False) -> Any:
    """The case built by the oracle, with a plan per call, and again with the plans of a
    first run: equal graphs, results and errors; a successful case makes no plan then."""
    expected = run(case, reference_call, opset)
    with monkeypatch.context() as patch:  # every call plans afresh: the miss path
        patch.setattr(ops_module, "_plans_of", ops_module._SpecPlans)
        assert run(case, call_operator, opset) == expected
    run(case, call_operator, opset)  # leaves its plans on the specs
    counter = PlanCounter(monkeypatch)
    assert run(case, call_operator, opset) == expected  # the hit path
    if not fails:
        assert counter.made == 0, "a repeated call shape made a plan again"
    assert (expected[0] is not None) == fails, expected[0]
    return expected


# -- custom operator -------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def plan_custom_op() -> Iterator[None]:
    def infer(ctx: Any) -> list[Any]:
        return [ctx.input_descs[0]]

    def kernel(ctx: Any, x: Any, y: Any = None) -> list[Any]:
        return [x]

    register_op("PlanCustom", domain="test.plans", inputs=["x", "y?"], outputs=["z"],
                infer=infer, kernel=kernel, attributes={"alpha": ("float", 1.0),
                                                        "mode": "string"})
    try:
        yield
    finally:
        unregister_op("PlanCustom", "test.plans")


# -- cases that build ------------------------------------------------------------------------


def _branch(name: str, value: float) -> Graph:
    branch = GraphBuilder(name, opset=17)
    return branch.build_and_reset([branch.create_const_float([value, value])])


def _in_place(ctx: Ctx) -> Any:
    graph = ctx.b.graph
    made = []
    for _ in range(2):  # a second replacement: its explicit name is made unique
        builder = GraphBuilder._into(graph, "replacement")
        inputs = PatternInputs._of(builder, [(h._node, 0) for h in (ctx.x, ctx.w, ctx.c)])
        made.append(ctx.ops.Gemm(inputs[0], inputs[1], inputs[2], name="fused"))
        made.append(ctx.ops.Relu(made[-1]))
    return made


def _in_body(ctx: Ctx) -> Any:
    body = ctx.b.create_subgraph_builder("body")
    with body:
        inner = ctx.ops.Relu(ctx.x)  # only outer values: the active builder builds it
    explicit = ctx.ops.Neg(ctx.x, builder=body)
    both = ctx.ops.Add(inner, ctx.x)  # an inner and an outer value: the inner builder
    ctx.graphs.append(body.graph)
    return inner, explicit, both


def _scoped(ctx: Ctx) -> Any:
    o = ctx.ops
    # (private attributes, which onnx refuses on its operators: on the placeholder's values)
    with attr_scope({"_stream": 1}), control_dependency_scope([ctx.c]):
        relu = o.Relu(ctx.p)
        with attr_scope({"alpha": 0.25, "_label": "in"}):
            scaled = o.Gemm(ctx.p, ctx.w)  # a scoped schema attribute is converted
            explicit = o.Gemm(ctx.p, ctx.w, alpha=2.0)  # the call's own value wins
    return relu, scaled, explicit


BUILDS: dict[str, tuple[int, Callable[[Ctx], Any]]] = {
    "gemm": (17, lambda c: c.ops.Gemm(c.x, c.w, c.c)),
    "gemm attributes": (17, lambda c: c.ops.Gemm(c.x, c.w, c.c, alpha=0.5, transB=0,
                                                 beta=np.float32(2.0))),
    "gemm without C": (17, lambda c: [c.ops.Gemm(c.x, c.w), c.ops.Gemm(c.x, c.w, None)]),
    "keyword inputs": (17, lambda c: [c.ops.Gemm(c.x, c.w, C=c.c), c.ops.Gemm(c.x, B=c.w),
                                      c.ops.Gemm(A=c.x, B=c.w, C=None, builder=c.b)]),
    "None in the middle": (17, lambda c: c.ops.Clip(c.x, None, 1.0)),
    "variadic": (17, lambda c: [c.ops.Concat(c.x, c.x, axis=0), c.ops.Concat([c.x, c.x], axis=1),
                                c.ops.Concat((c.x, c.x, c.x), axis=0),
                                c.ops.Concat(inputs=[c.x, c.x], axis=0, builder=c.b),
                                c.ops.Max([c.x, None, c.x]), c.ops.Sum(c.x)]),
    "constants": (17, lambda c: [c.ops.Add(c.x, 1.0), c.ops.Mul(2, c.p), c.ops.Sub(True, c.p),
                                 c.ops.Add(c.p, [[1, 2, 3, 4], [5, 6, 7, 8]]),
                                 c.ops.Reshape(c.x, [4, 2]),
                                 c.ops.Reshape(c.x, np.array([8], dtype=np.int64)),
                                 c.p + 1, 1 - c.p, c.x * [1.0, 2.0, 3.0, 4.0], 2 / c.p]),
    "output counts": (17, lambda c: [c.ops.Dropout(c.x), c.ops.Dropout(c.x, num_outputs=2),
                                     c.ops.TopK(c.x, [2]), c.ops.Dropout(c.x),
                                     c.ops.LayerNormalization(c.x, [1.0] * 4, num_outputs=3),
                                     c.ops.Split(c.x, [1, 3], axis=1),
                                     c.ops.Split(c.x, num_outputs=2, axis=1)]),
    "split at 18": (18, lambda c: [c.ops.Split(c.x, num_outputs=2, axis=1),
                                   c.ops.Split(c.x, [1, 3], axis=1),
                                   c.ops.Split(c.x, split=[2, 2], axis=1, num_outputs=2)]),
    "split at 11": (11, lambda c: [c.ops.Split(c.x, split=[2, 2], axis=1),
                                   c.ops.ReduceSum(c.x, axes=[1], keepdims=0)]),
    "if": (17, lambda c: c.ops.If(c.ops.Cast(c.ops.ReduceMax(c.x, keepdims=0),
                                             to=DataType.DT_BOOL),
                                  then_branch=_branch("then", 1.0),
                                  else_branch=_branch("else", 2.0))),
    "cast": (17, lambda c: [c.ops.Cast(c.x, to=DataType.DT_INT64), c.ops.Cast(c.x, to=7)]),
    "names": (17, lambda c: [c.ops.Relu(c.x, name="r1"), c.ops.Relu(c.x, name="r2")]),
    "custom domain": (17, lambda c: [c.ops.domain("test.plans").PlanCustom(c.x, mode="l"),
                                     c.ops.domain("test.plans").PlanCustom(c.x, c.x, alpha=2,
                                                                           mode="m"),
                                     c.ops.domain("test.plans").PlanCustom(c.x, None,
                                                                           mode="n")]),
    "ai.onnx domain": (17, lambda c: c.ops.domain("ai.onnx").Relu(c.x)),
    "scopes": (17, _scoped),
    "in place": (17, _in_place),
    "active builder": (17, _in_body),
}


@pytest.mark.parametrize("case", sorted(BUILDS))
def test_a_planned_call_builds_what_the_unplanned_call_builds(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    opset, build = BUILDS[case]
    error, _, graphs = check(build, opset, monkeypatch)
    assert error is None and graphs


# -- cases that fail -------------------------------------------------------------------------


def _then(first: Callable[[Ctx], Any], second: Callable[[Ctx], Any]) -> Callable[[Ctx], Any]:
    """`first` (which succeeds and plans its call shape), then `second` of the same shape."""
    def case(ctx: Ctx) -> Any:
        first(ctx)
        return second(ctx)
    return case


def _other(ctx: Ctx) -> TensorHolder:
    return GraphBuilder("other", opset=17).create_input(0, shape=[2, 4])


def _used_up(ctx: Ctx) -> Any:
    ctx.b.build_and_reset([ctx.x])
    return ctx.ops.Relu(ctx.x)


FAILS: dict[str, tuple[int, Callable[[Ctx], Any], type[Exception]]] = {
    "too many inputs": (17, lambda c: c.ops.Relu(c.x, c.x), OpInputError),
    "missing input": (17, lambda c: c.ops.MatMul(c.x), OpInputError),
    "missing input after None": (17, lambda c: c.ops.MatMul(c.x, None), OpInputError),
    "input given twice": (17, lambda c: c.ops.Gemm(c.x, c.w, c.c, C=c.c), OpInputError),
    "too few variadic": (17, lambda c: c.ops.Concat([], axis=0, builder=c.b), OpInputError),
    "unknown attribute": (17, lambda c: c.ops.Transpose(c.x, permutation=[1, 0]),
                          OpAttributeError),
    "missing attribute": (17, lambda c: c.ops.Cast(c.x), OpAttributeError),
    "attribute type": (17, _then(lambda c: c.ops.Gemm(c.x, c.w, alpha=1.0),
                                 lambda c: c.ops.Gemm(c.x, c.w, alpha="big")),
                       OpAttributeError),
    "attribute list type": (17, _then(lambda c: c.ops.Transpose(c.x, perm=[1, 0]),
                                      lambda c: c.ops.Transpose(c.x, perm=[1.5, 0])),
                            OpAttributeError),
    "scoped attribute type": (17, _then(lambda c: c.ops.Gemm(c.x, c.w),
                                        lambda c: _scoped_bad(c)), OpAttributeError),
    "constant made before the error": (
        17, _then(lambda c: c.ops.Gemm(c.x, [[1.0] * 3] * 4, alpha=1.0),
                  lambda c: c.ops.Gemm(c.x, [[1.0] * 3] * 4, alpha=[1])), OpAttributeError),
    "bad input value": (17, _then(lambda c: c.ops.Add(c.x, c.x),
                                  lambda c: c.ops.Add(c.x, object())), BuilderTypeError),
    "ragged list": (17, _then(lambda c: c.ops.Add(c.x, [[1.0] * 4, [2.0] * 4]),
                              lambda c: c.ops.Add(c.x, [[1.0, 2.0], [3.0]])), Exception),
    "mixed builders": (17, _then(lambda c: c.ops.Add(c.x, c.x),
                                 lambda c: c.ops.Add(c.x, _other(c))), BuilderMixError),
    "mixed builders in a list": (17, _then(lambda c: c.ops.Concat([c.x, c.x], axis=0),
                                           lambda c: c.ops.Concat([c.x, _other(c)], axis=0)),
                                 BuilderMixError),
    "mixed builders in an attribute": (17, lambda c: c.ops.Relu(c.x, alpha=_other(c)),
                                       BuilderMixError),
    "no builder": (17, lambda c: c.ops.Concat(inputs=[c.x], axis=0), BuilderTypeError),
    "builder of a wrong type": (17, lambda c: c.ops.Relu(1.0, builder="b"), BuilderTypeError),
    "builder used up": (17, _used_up, Exception),
    "unknown output count": (17, lambda c: c.ops.Split(c.x, axis=1), OpInputError),
    "num_outputs not an int": (18, _then(lambda c: c.ops.Split(c.x, num_outputs=2, axis=1),
                                         lambda c: c.ops.Split(c.x, num_outputs="2", axis=1)),
                               OpAttributeError),
    "unknown output count after a counted call": (
        18, _then(lambda c: c.ops.Split(c.x, num_outputs=2, axis=1),
                  lambda c: c.ops.Split(c.x, axis=1)), OpInputError),
    "num_outputs out of range": (17, _then(lambda c: c.ops.Dropout(c.x, num_outputs=2),
                                           lambda c: c.ops.Dropout(c.x, num_outputs=5)),
                                 OpInputError),
    "no such operator at the opset": (17, lambda c: c.ops.Gelu(c.x), Exception),
    "custom op unknown attribute": (17, lambda c: c.ops.domain("test.plans").PlanCustom(
        c.x, beta=1.0), OpAttributeError),
    "custom op missing attribute": (17, lambda c: _missing_mode(c), OpAttributeError),
    "unregistered domain": (17, lambda c: c.ops.domain("test.none").Nothing(c.x), Exception),
}


def _scoped_bad(ctx: Ctx) -> Any:
    with attr_scope({"alpha": "big"}):
        return ctx.ops.Gemm(ctx.x, ctx.w)


@pytest.mark.parametrize("case", sorted(FAILS))
def test_a_planned_call_raises_what_the_unplanned_call_raises(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    opset, build, kind = FAILS[case]
    error, _, _ = check(build, opset, monkeypatch, fails=True)
    assert error is not None and issubclass(error[0], kind), error


def _missing_mode(ctx: Ctx) -> Any:
    """PlanCustom's "mode" is required; first a call of the same op with it."""
    custom = ctx.ops.domain("test.plans")
    custom.PlanCustom(ctx.x, mode="m")
    return custom.PlanCustom(ctx.x, alpha=3.0)


def test_failing_shapes_are_never_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    builder = GraphBuilder("fails", opset=17)
    x = builder.create_input(0, shape=[2, 2])
    counter = PlanCounter(monkeypatch)
    from ge.es.onnx import MatMul

    for _ in range(3):
        with pytest.raises(OpInputError, match=r"MatMul \(opset 17\) requires input 1 'B'"):
            MatMul(x)  # type: ignore[call-arg]
    assert counter.made == 3


def test_plans_belong_to_their_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """A custom operator registered again has a new schema, so its old plans are gone: a
    call shape planned against the first one is checked against the second."""
    def infer(ctx: Any) -> list[Any]:
        return [ctx.input_descs[0]]

    def kernel(ctx: Any, x: Any) -> list[Any]:
        return [x]

    op = ops_module.make_operator("Replanned", "test.replan", module="tests")
    builder = GraphBuilder("replan", opset=17)
    x = builder.create_input(0, shape=[2, 2])
    register_op("Replanned", domain="test.replan", inputs=["x"], outputs=["y"], infer=infer,
                kernel=kernel)
    try:
        assert op(x)._node.type == "Replanned"
    finally:
        unregister_op("Replanned", "test.replan")
    register_op("Replanned", domain="test.replan", inputs=["x"], outputs=["y"], infer=infer,
                kernel=kernel, attributes={"mode": "string"})
    try:
        with pytest.raises(OpAttributeError, match="required attribute"):
            op(x)
    finally:
        unregister_op("Replanned", "test.replan")


def test_plans_per_schema_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond `_MAX_PLANS` call shapes a schema keeps no more plans; calls still work."""
    monkeypatch.setattr(ops_module, "_MAX_PLANS", 2)
    builder = GraphBuilder("bounded", opset=17)
    x = builder.create_input(0, shape=[2, 4])
    spec = get_op_spec("Concat", 17)
    monkeypatch.setitem(vars(spec), ops_module._PLANS, ops_module._SpecPlans(spec))
    from ge.es.onnx import Concat

    for count in range(1, 6):
        node = Concat(*[x] * count, axis=0)._node
        assert node.get_inputs_size() == count
        assert node.get_output_desc(0).get_shape().get_dims() == [2 * count, 4]
    assert len(ops_module._plans_of(spec).plans) == 2
