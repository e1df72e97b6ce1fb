"""One function per operator, made at import time from the schemas (no generated source).

`make_operator(op_type, domain)` returns a function that, when called, looks up the schema at
its builder's opset, checks the inputs and attributes against it, turns Python scalars and
lists into `Const`s, adds the node, infers its output descs when its input descs are known,
and returns a `TensorHolder` (or a tuple of them for multi-output operators). The arguments
are checked and converted by `ge.es.call_arguments`; what those checks decide from a call's
shape alone is planned once per shape (`_CallPlan`, see "call plans").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from onnx import AttributeProto

from ge._user_code import caller_location
from ge.errors import (
    BuilderInferenceError,
    BuilderMixError,
    BuilderTypeError,
    GraphTypeError,
    OpAttributeError,
)
from ge.es.call_arguments import convert_attr, default_output_count, output_count, split_arguments
from ge.es.graph_builder import GraphBuilder
from ge.es.scopes import active_builder, building_patterns, scoped_attrs, scoped_control_deps
from ge.es.tensor_holder import TensorHolder
from ge.graph.node import Node, is_const
from ge.graph.onnx_import import CONSTANT_VALUE_ATTRIBUTES, constant_attribute_value
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc, format_desc
from ge.graph.types import DataType
from ge.ops.inference import Rejection, infer_new_node
from ge.ops.schemas import STANDARD_DOMAINS, OpSpec, get_op_spec, normalize_domain

__all__ = ["EXTRA_KEYWORDS", "call_operator", "make_operator"]

# Keywords every operator function accepts besides the operator's own attributes.
EXTRA_KEYWORDS = ("num_outputs", "name", "builder")


def _where(spec: OpSpec, opset: int) -> str:
    prefix = f"{spec.domain}::" if spec.domain else ""
    return f"{prefix}{spec.op_type} (opset {opset})"


# -- call plans --------------------------------------------------------------------------
#
# What `split_arguments`, the required-attribute check and a fixed output count decide
# depends only on the schema and the call's shape (how many positional arguments, which are
# None or lists and of which None-ness, the keyword names, whether num_outputs is given), never
# on the values. A `_CallPlan` keeps those results per shape, so a repeated call only reads
# its values. Plans live on the `OpSpec` they were derived from (in its instance dict, not a
# field): the spec is immutable and they go when it goes (a custom op registered anew has a
# new spec), so no module-level table outlives or leaks between compilations. A call shape
# that fails is never planned: it is worked out again, and raises again, every time.

_PLANS = "_ge_es_call_plans"  # the OpSpec instance attribute holding its `_SpecPlans`
_MAX_PLANS = 256  # call shapes planned per spec; further ones are worked out every call

ArgShape = tuple[Any, ...]  # per argument: 0 None, 1 a value, a list its items' None-ness


class _Slot:
    """Stands for one argument (or list item) while a plan is made: where a value comes
    from (an int or str key of the arguments, or (key, item index))."""

    __slots__ = ("path",)

    def __init__(self, path: Any) -> None:
        self.path = path


class _ListSlot(list):
    """Stands for a list argument while a plan is made: its items are `_Slot`s or None."""

    __slots__ = ("path",)

    def __init__(self, path: Any, nones: tuple[bool, ...]) -> None:
        super().__init__(None if none else _Slot((path, j)) for j, none in enumerate(nones))
        self.path = path


class _CallPlan:
    """The value-independent outcome of one call shape: `where`, the formal-input layout
    (a path per input, None for an absent one; `prefix` n when the inputs are simply the
    first n positional arguments), the attribute keywords in order, whether num_outputs is
    passed on as an attribute, and the output count when no value can change it."""

    __slots__ = ("attr_keys", "count", "domain", "inject", "layout", "prefix", "where")

    def __init__(self, where: str, domain: str, layout: tuple[Any, ...], prefix: int | None,
                 attr_keys: tuple[str, ...], inject: bool, count: int | None) -> None:
        self.where = where
        self.domain = domain
        self.layout = layout
        self.prefix = prefix
        self.attr_keys = attr_keys
        self.inject = inject
        self.count = count


class _SpecPlans:
    """The plans of one `OpSpec` by call shape, and its input names (keyword shapes)."""

    __slots__ = ("inputs", "plans")

    def __init__(self, spec: OpSpec) -> None:
        self.inputs = frozenset(p.name for p in spec.inputs)
        self.plans: dict[Any, _CallPlan] = {}


def _plans_of(spec: OpSpec) -> _SpecPlans:
    table = spec.__dict__.get(_PLANS)
    if table is None:
        table = spec.__dict__.setdefault(_PLANS, _SpecPlans(spec))
    return table


def _shape_of(value: Any) -> Any:
    if value is None:
        return 0
    if isinstance(value, (list, tuple)):
        return tuple([v is None for v in value])
    return 1


def _stand_in(path: Any, shape: Any) -> Any:
    if shape == 0:
        return None
    return _ListSlot(path, shape) if isinstance(shape, tuple) else _Slot(path)


def _make_plan(spec: OpSpec, where: str, domain: str, shape: ArgShape, kwargs: dict[str, Any],
               inputs: frozenset[str], num_outputs_given: bool) -> _CallPlan:
    """Run the checks of a call on stand-ins of its arguments (they raise as the values
    would: they read only the shape) and keep what they decide."""
    args = [_stand_in(i, s) for i, s in enumerate(shape)]
    stand_ins = {key: _stand_in(key, _shape_of(value)) if key in inputs else _Slot(key)
                 for key, value in kwargs.items()}
    inject = num_outputs_given and "num_outputs" in spec.attributes and not (
        spec.op_type == "Split" and (len(args) > 1 or "split" in kwargs))
    if inject:
        stand_ins = {**stand_ins, "num_outputs": _Slot("num_outputs")}
    values, attr_values = split_arguments(where, spec, args, stand_ins)
    missing = [a.name for a in spec.attributes.values() if a.required and a.name not in
               attr_values]
    if missing:
        raise OpAttributeError(f"{where}: required attribute(s) missing: {', '.join(missing)}")
    layout = tuple(None if v is None else v.path for v in values)
    prefix: int | None = len(layout)
    for i, path in enumerate(layout):
        if path != i and not (path is None and i < len(shape) and shape[i] == 0):
            prefix = None
            break
    count = None
    if not num_outputs_given and not spec.variadic_output:
        fixed = default_output_count(spec, {}, [])
        if fixed is not None and max(spec.min_output, 1) <= fixed <= spec.max_output:
            count = fixed  # (else `output_count` raises at its place in every call)
    return _CallPlan(where, normalize_domain(domain), layout, prefix, tuple(attr_values),
                     inject, count)


def _input_values(plan: _CallPlan, args: Sequence[Any], kwargs: dict[str, Any]
                  ) -> list[Any]:
    """The formal inputs' values of a call whose layout is not a prefix of `args`."""
    values: list[Any] = []
    for path in plan.layout:
        if path is None:
            values.append(None)
        elif isinstance(path, tuple):
            key, item = path
            values.append((args[key] if isinstance(key, int) else kwargs[key])[item])
        else:
            values.append(args[path] if isinstance(path, int) else kwargs[path])
    return values


# -- the call -------------------------------------------------------------------------------


def _other_builder(found: GraphBuilder | None, builder: GraphBuilder | None,
                   value: TensorHolder, where: str) -> GraphBuilder:
    """The builder after seeing `value`, whose builder is not `found` yet."""
    if found is None or (builder is None and found._encloses(value._builder)):
        return value._builder  # the innermost builder: bodies read outer values
    if not value._builder._encloses(found):
        raise BuilderMixError(
            f"{where}: input {value.name!r} belongs to {value._builder.described_beside(found)}"
            f", but the operator is built by {found.name!r}; tensors of different builders "
            "cannot be mixed"
        )
    return found


def _scan(args: Sequence[Any], kwargs: dict[str, Any], builder: GraphBuilder | None,
          where: str) -> tuple[GraphBuilder, ArgShape]:
    """The builder a call builds in and the shape of its positional arguments, in one pass.

    The builder is `builder=`, else the active `with builder:` one, else the innermost of
    the TensorHolders among the positional arguments (list items too) and keyword values
    (as given), which must all belong to it or to builders enclosing it.
    """
    if builder is None:
        builder = active_builder()
    found = builder
    shape: list[Any] = []
    for arg in args:
        if arg is None:
            shape.append(0)
        elif isinstance(arg, TensorHolder):
            shape.append(1)
            if arg._builder is not found:
                found = _other_builder(found, builder, arg, where)
        elif isinstance(arg, (list, tuple)):
            shape.append(tuple([v is None for v in arg]))
            for value in arg:
                if isinstance(value, TensorHolder) and value._builder is not found:
                    found = _other_builder(found, builder, value, where)
        else:
            shape.append(1)
    for value in kwargs.values():
        if isinstance(value, TensorHolder) and value._builder is not found:
            found = _other_builder(found, builder, value, where)
    if found is None:
        raise BuilderTypeError(
            f"{where} has no TensorHolder input to take its builder from; pass builder="
        )
    if not isinstance(found, GraphBuilder):
        raise BuilderTypeError(f"builder must be a GraphBuilder, got {type(found).__name__}")
    return found, tuple(shape)


def call_operator(op_type: str, domain: str, args: Sequence[Any], kwargs: dict[str, Any], *,
                  num_outputs: int | None = None, name: str | None = None,
                  builder: GraphBuilder | None = None) -> TensorHolder | tuple[TensorHolder, ...]:
    """Build one `op_type` node from ES-style arguments (see the module docstring); what
    the call's shape decides comes from its `_CallPlan`."""
    owner, shape = _scan(args, kwargs, builder, op_type)
    opset = owner.opset_version(domain)
    graph = owner._graph
    if graph is None:
        graph = owner._live_graph(op_type)  # raises: the builder has been built
    spec = get_op_spec(op_type, opset, domain)
    table = _plans_of(spec)
    inputs = table.inputs
    call_shape = (opset, domain, num_outputs is None, shape,
                  tuple([(k, _shape_of(v) if k in inputs else None) for k, v in kwargs.items()])
                  if kwargs else ())
    plan = table.plans.get(call_shape)
    if plan is None:
        where = _where(spec, opset if domain in STANDARD_DOMAINS else spec.since_version)
        plan = _make_plan(spec, where, domain, shape, kwargs, inputs, num_outputs is not None)
        if len(table.plans) < _MAX_PLANS:
            table.plans[call_shape] = plan
    where = plan.where
    holders: list[TensorHolder | None] = []
    prefix = plan.prefix
    values = args[:prefix] if prefix is not None else _input_values(plan, args, kwargs)
    for i, value in enumerate(values):
        if value is None:
            holders.append(None)
        elif isinstance(value, TensorHolder) and value._builder is owner:
            holders.append(value)
        else:
            holders.append(owner._holder(value, f"{op_type} input {i}"))
    attr_values: dict[str, Any] = {}
    if plan.attr_keys:
        given = {**kwargs, "num_outputs": num_outputs} if plan.inject else kwargs
        attr_values = {k: given[k] for k in plan.attr_keys}
    count = plan.count
    if count is None:
        count = output_count(where, spec, attr_values, holders, num_outputs)
    attrs: dict[str, Any] = {}
    scoped = scoped_attrs()
    if scoped or attr_values:
        for key, value in {**scoped, **attr_values}.items():
            attr_spec = spec.attributes.get(key)
            attrs[key] = convert_attr(where, attr_spec, value) if attr_spec else value
    if op_type == "Constant" and not plan.domain and not holders:
        constant = _loaded_constant(where, attrs)
        if constant is not None and not scoped_control_deps():
            return owner.create_const(constant, name=name)
    if plan.domain:
        owner._use_domain(domain, op_type)
    node = graph.add_node(op_type, name=owner._node_name(name, op_type),
                          domain=plan.domain, num_inputs=len(holders), num_outputs=count,
                          attrs=attrs)
    for i, holder in enumerate(holders):
        if holder is not None:  # a fresh node and its owner's (or an outer) tensors: no checks
            graph._connect(holder._node, holder._index, node, i)
    for dep in scoped_control_deps():
        graph.add_control_edge(owner._holder(dep, "control dependency")._node, node)
    if not building_patterns() or _declared(owner, holders):
        rejected = infer_new_node(node)
        if rejected is not None:
            _check_rejection(owner, spec, node, rejected)
    if count == 1 and not spec.variadic_output:
        return TensorHolder._make(owner, node, 0)
    return tuple([TensorHolder._make(owner, node, i) for i in range(count)])


def _declared(owner: GraphBuilder, holders: Sequence[TensorHolder | None]) -> bool:
    """Whether every input given has a known element type and is no input created without
    a shape (`create_input(0)`, a scalar placeholder). A pattern's operator is inferred only
    then: what a placeholder feeds was typed as a scalar's result, meaningless for the
    tensors it matches, and inferring it cost ~40% of building the built-in catalog's ~70
    patterns in every process; a pattern built on inputs given shapes keeps its descs."""
    shapeless = _shapeless_inputs(owner)
    return all(h is None or (h._node not in shapeless and h._node._output_dtype(h._index)
                             is not DataType.DT_UNDEFINED) for h in holders)


def _shapeless_inputs(owner: GraphBuilder) -> set[Node]:
    """The inputs created without a shape of `owner` and of the builders enclosing it."""
    shapeless: set[Node] = set()
    builder: GraphBuilder | None = owner
    while builder is not None:
        shapeless |= builder._shapeless
        builder = builder._parent
    return shapeless


def _loaded_constant(where: str, attrs: dict[str, Any]) -> Tensor | None:
    """The value of a `Constant` call with one value attribute, which is built as the `Const`
    node loading reads such a node as: so what reads it is inferred from its value (an
    Unsqueeze by `Constant(value_ints=[0])` has a shape) and a pattern matches constants.
    Its strings are checked as loading checks them (`OpAttributeError`): a model holding
    others is one ge and runtimes refuse."""
    if len(attrs) != 1:
        return None
    ((key, attr),) = attrs.items()
    if key not in CONSTANT_VALUE_ATTRIBUTES or not isinstance(attr, AttributeProto):
        return None
    try:
        return constant_attribute_value(attr)
    except GraphTypeError as exc:  # (value_string(s) not UTF-8: `value`'s Tensor was checked)
        raise OpAttributeError(f"{where}: attribute {key!r}: {exc.message}") from None


def _fully_known(desc: TensorDesc) -> bool:
    """Whether a desc says all there is to know for inference: an element type, a rank and
    every dim (a number or a name)."""
    if desc._data_type == DataType.DT_UNDEFINED:
        return False
    shape = desc._shape
    return not shape.is_unknown_rank() and all(isinstance(d, str) or d >= 0 for d in shape)


def _reads_shapeless_input(owner: GraphBuilder, node: Node) -> bool:
    """Whether `node` reads, directly or through the nodes feeding it, an input created
    without a shape (of `owner` or a builder enclosing it): GE's samples create inputs
    as scalar placeholders (`create_inputs(3)`) for a replacement typed from its match,
    so what such an input feeds is not known, whatever its desc says."""
    shapeless = _shapeless_inputs(owner)
    if not shapeless:
        return False
    seen = {node}
    stack = [node]
    while stack:
        for producer in stack.pop()._inputs:
            if producer is None or producer[0] in seen:
                continue
            if producer[0] in shapeless:
                return True
            seen.add(producer[0])
            stack.append(producer[0])
    return False


def _check_rejection(owner: GraphBuilder, spec: OpSpec, node: Node,
                     rejected: Rejection) -> None:
    """`BuilderInferenceError` at the user's line for a `node` that inference `rejected`
    while every input it reads has a fully known desc, declared (not an input created
    without a shape, nor computed from one); the node is taken out again. Quiet (the node
    keeps unknown descs) when an input's desc is unknown or partial, and in a pattern,
    which need not be well typed (`pattern_scope`)."""
    if building_patterns():
        return
    descs: list[TensorDesc | None] = []
    for i in range(node.get_inputs_size()):
        if node.get_input_producer(i) is None:
            descs.append(None)
            continue
        desc = node.get_input_desc(i)
        if not _fully_known(desc):
            return
        descs.append(desc)
    if _reads_shapeless_input(owner, node):
        return
    reason = rejected.reason  # (onnx's own words, when onnx refused it)
    names = [p.name for p in spec.inputs]
    ins = ", ".join(f"{names[min(i, len(names) - 1)] if names else i} "
                    f"{'absent' if d is None else format_desc(d)}" for i, d in enumerate(descs))
    prefix = f"{node.domain}::" if node.domain else ""
    by = "onnx's shape inference" if reason is not None else "its inference"
    if reason is None:
        reason = rejected.message
    hint = _constant_type_hint(node, descs, names)
    name = node.name
    graph = node._graph
    if graph is not None:
        graph.remove_node(node)
    raise BuilderInferenceError(
        f"{prefix}{node.type} node {name!r} is invalid for its inputs ({ins}): {by} says: "
        f"{reason}{hint}", location=caller_location(), nodes=[name])


def _constant_type_hint(node: Node, descs: Sequence[TensorDesc | None],
                        names: Sequence[str]) -> str:
    """What to say of a scalar constant operand whose element type is not that of another
    operand (`x * 0.5` on a float16 tensor: the commonest refusal), else ""."""
    def label(i: int) -> str:
        return str(names[min(i, len(names) - 1)]) if names else str(i)

    for i, desc in enumerate(descs):
        producer = node.get_input_producer(i)
        if (desc is None or producer is None or not is_const(producer[0])
                or desc.shape.get_dims()):
            continue
        other = next(((j, d) for j, d in enumerate(descs)
                      if j != i and d is not None and d.data_type != desc.data_type), None)
        if other is None:
            continue
        wanted = format_desc(other[1]).split("[", 1)[0]  # (e.g. "float16")
        module = "ml_dtypes" if wanted == "bfloat16" else "np"
        example = f"{module}.{wanted}({'1' if 'int' in wanted else '0.5'})"
        return (f"; {label(i)} is a scalar constant of another type than {label(other[0])} (a "
                f"Python float becomes a float32 constant, an int an int64 one): write it in "
                f"{wanted}, e.g. {example}, or es.CastLike(c, {label(other[0])})")
    return ""


def make_operator(op_type: str, domain: str = "", module: str = "ge.es.onnx"
                  ) -> Callable[..., Any]:
    """The ES function of one operator; it resolves the schema at its builder's opset."""

    def operator(*args: Any, num_outputs: int | None = None, name: str | None = None,
                 builder: GraphBuilder | None = None, **attrs: Any
                 ) -> TensorHolder | tuple[TensorHolder, ...]:
        return call_operator(op_type, domain, args, attrs, num_outputs=num_outputs,
                             name=name, builder=builder)

    operator.__name__ = operator.__qualname__ = op_type
    operator.__module__ = module
    prefix = f"{domain}::" if domain else ""
    operator.__doc__ = (
        f"Build a {prefix}{op_type} node (schema at the builder's opset); inputs positional "
        "(None for an absent optional one, a list for a variadic one), attributes as keywords, "
        "num_outputs= for a variable or optional output count."
    )
    return operator


def domain_operators(domain: str, module: str) -> dict[str, Callable[..., Any]]:
    """One ES function per operator onnx defines in `domain`, named like the operator."""
    from ge.ops.schemas import standard_op_types

    return {op: make_operator(op, domain, module) for op in standard_op_types(domain)}
