"""Generators of the fuzzer's models: model-local functions (`ModelProto.functions`).

`g_function` puts a few nodes of the other generators (drawn from `Builder.generators`) in
a `FunctionProto` of the domain `DOMAIN` and calls it, often twice or more (on the same
inputs: CSE material, or on others); `g_call` calls a function defined before again, also
in an If or Loop body and in another function's body (a function calling a function). The
forms past bugs clustered in:

- attributes passed by reference (`ref_attr_name`): LeakyRelu's and Elu's alpha, Softmax's
  axis, Transpose's perm (only permutations keeping the shape), a Constant's value_float;
  declared with a default (`attribute_proto`) or without one, each call setting or omitting
  them; a nested call passing its caller's attribute on (`alpha=@alpha`);
- outputs no one reads, or left out of the call (an empty name);
- random operators (RandomNormalLike, RandomUniformLike, Dropout in training mode): either
  masked (`x + r * 0`: deterministic, the function random all the same) or compared
  between two calls on the same inputs (`ReduceMax(|call1 - call2|) > 0`, true in the
  original: merging the calls makes it false);
- overloads (`FunctionProto.overload`, IR 10): two functions of one name, called on the
  same inputs (only under onnxruntime 1.32 or newer, which tells them apart).

A function's values have static shapes (the call sites pass values of the shapes its body
was built for), constants are Constant nodes (a function has no initializers), and every
attribute a call may set keeps the shapes."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from fuzz_builder import BOOL, FLOAT, INT64, MAX_NUMEL, Builder, Value, broadcast
from fuzz_control import fill
from fuzz_ops import MS, g_contrib
from onnx import AttributeProto, helper

DOMAIN = "fuzz.local"
FUNCTION_GENERATORS = ("Function", "Call")
MAX_FUNCTIONS = 6
#: onnxruntime tells overloads apart from 1.32 on (older ones run every overload as the first)
OVERLOADS = tuple(int(p) for p in ort.__version__.split(".")[:2]) >= (1, 32)
Spec = tuple[int, tuple[int, ...]]


@dataclass
class Param:
    """An attribute a function declares: what a call may set it to (every choice keeps
    the shapes), its default if declared with one, and whether a call may leave it out
    when it has none (the operator's own default keeps the shapes too)."""

    name: str
    kind: int  # AttributeProto.FLOAT, INT, INTS
    choices: list[Any]
    default: Any = None
    omittable: bool = True


@dataclass
class Function:
    """A local function defined so far, with what calling it needs."""

    proto: onnx.FunctionProto
    inputs: list[Value]  # its formal inputs (spec; exact: a call must pass an exact value)
    outputs: list[Value]  # its outputs, as its body computes them
    params: list[Param] = field(default_factory=list)
    random: str = ""  # "" (deterministic), "masked", or "differ": its first output random
    #: a body uses onnxruntime's operators: onnx types no call, so no node reads one
    opaque: bool = False
    #: a body has an If: a call passes distinct values (onnxruntime fails a branch reading
    #: an input that the call passes twice)
    bodies: bool = False
    calls: list[list[Value]] = field(default_factory=list)  # the arguments of calls so far
    #: called in a body or a function: it gets no overload (onnxruntime resolves a call's
    #: overload in the main graph only)
    nested: bool = False
    last_attrs: list[AttributeProto] = field(default_factory=list)  # the last call's


@dataclass
class Locals:
    """The builder's functions: those defined, and the one under construction."""

    functions: list[Function] = field(default_factory=list)
    making: list[list[Param]] = field(default_factory=list)  # params of the open function
    names: list[str] = field(default_factory=list)  # the name of the open function


def state(b: Builder) -> Locals:
    if b.local is None:
        b.local = Locals()
    return b.local


def _attr(name: str, kind: int, value: Any) -> AttributeProto:
    attr = helper.make_attribute(name, value)
    if attr.type != kind:  # an int choice of a float attribute
        attr = helper.make_attribute(name, float(value) if kind == AttributeProto.FLOAT else value)
    return attr


def _ref(name: str, param: str, kind: int) -> AttributeProto:
    attr = AttributeProto()
    attr.name, attr.ref_attr_name, attr.type = name, param, kind
    return attr


@contextmanager
def function_scope(b: Builder, formals: Sequence[Value], name: str
                   ) -> Iterator[list[onnx.NodeProto]]:
    """Build function `name`'s body: while open, generators (not onnxruntime's operators:
    onnx would not type the body) append to its nodes and draw from its formal inputs and
    what it computes; its constants are made Constant nodes at the end."""
    saved = (b.nodes, b.initializers, b.values, b.consts, b.inputs, b.scopes, b.hide,
             b.const_only, b.generators)
    nodes: list[onnx.NodeProto] = []
    b.nodes, b.initializers, b.values, b.consts = nodes, [], list(formals), []
    b.inputs, b.scopes, b.hide, b.const_only = list(formals), ["Function"], False, False
    b.generators = {**{k: g for k, g in b.generators.items() if k != "Contrib"},
                    "ParamOp": (2.0, g_param_op)}
    state(b).making.append([])
    state(b).names.append(name)
    try:
        yield nodes
        inits = b.initializers
        nodes[:0] = [helper.make_node("Constant", [], [t.name], name=b.fresh("constant_"),
                                      value=t) for t in inits]
        for node in nodes:
            _constants_in_bodies(b, node)
    finally:
        (b.nodes, b.initializers, b.values, b.consts, b.inputs, b.scopes, b.hide,
         b.const_only, b.generators) = saved
        state(b).making.pop()
        state(b).names.pop()


def _constants_in_bodies(b: Builder, node: onnx.NodeProto) -> None:
    """The initializers of `node`'s bodies made Constant nodes (a body in a function)."""
    for attr in node.attribute:
        if attr.type != AttributeProto.GRAPH:
            continue
        graph = attr.g
        consts = [helper.make_node("Constant", [], [t.name], name=b.fresh("constant_"),
                                   value=t) for t in graph.initializer]
        del graph.initializer[:]
        nodes = consts + list(graph.node)
        del graph.node[:]
        graph.node.extend(nodes)
        for inner in graph.node:
            _constants_in_bodies(b, inner)


# -- attributes by reference ----------------------------------------------------------------
def _shape_keeping_perms(shape: tuple[int, ...]) -> list[list[int]]:
    return [list(p) for p in itertools.permutations(range(len(shape)))
            if all(shape[j] == shape[i] for i, j in enumerate(p))]


def _declare(b: Builder, name: str, kind: int, choices: list[Any], omittable: bool,
             tag: str) -> Param:
    """A new attribute of the open function: with a default (one of `choices`) or none
    (then omittable only if the operator's own default keeps the shapes)."""
    default = b.choice(choices) if b.chance(0.5) or not omittable else None
    param = Param(b.fresh(name), kind, choices, default, omittable or default is not None)
    state(b).making[-1].append(param)
    b.tags[f"fn:attr-{tag}-{'default' if default is not None else 'no-default'}"] += 1
    return param


def g_param_op(b: Builder) -> bool:
    """In a function body: an operator whose attribute is the function's (a reference)."""
    x = b.pick()
    if x is None or not state(b).making:
        return False
    kind = b.choice(["LeakyRelu", "Elu", "Softmax", "Transpose", "Constant"])
    if b.scopes[-1] != "Function":
        b.tags["fn:attr-in-body"] += 1
    if kind in ("LeakyRelu", "Elu"):
        alphas = [float(a) for a in np.round(b.rng.uniform(0.05, 2.0, 3), 3)]
        p = _declare(b, "alpha", AttributeProto.FLOAT, alphas, True, kind)
        node_attr = _ref("alpha", p.name, p.kind)
        y = b.op(kind, [x], x.shape)
    elif kind == "Softmax":
        if x.rank == 0:
            return False
        p = _declare(b, "axis", AttributeProto.INT, list(range(-x.rank, x.rank)), True, kind)
        node_attr = _ref("axis", p.name, p.kind)
        y = b.op("Softmax", [x], x.shape)
    elif kind == "Transpose":
        perms = _shape_keeping_perms(x.shape)
        if x.rank < 2:
            return False
        p = _declare(b, "perm", AttributeProto.INTS, perms, x.shape == x.shape[::-1], kind)
        node_attr = _ref("perm", p.name, p.kind)
        y = b.op("Transpose", [x], x.shape)
    else:  # a Constant whose value is the attribute: no operator default, never omitted
        scales = [float(s) for s in np.round(b.rng.uniform(-2.0, 2.0, 3), 2)]
        p = _declare(b, "scale", AttributeProto.FLOAT, scales, False, kind)
        node_attr = _ref("value_float", p.name, p.kind)
        c = b.op("Constant", [], (), pool=False)
        c.const = False  # (its value depends on the call)
        b.nodes[-1].attribute.append(node_attr)
        y = b.op("Mul", [x, c], x.shape)
        y.exact = False
        return True
    b.nodes[-1].attribute.append(node_attr)
    return True


# -- calls ----------------------------------------------------------------------------------
def _arguments(b: Builder, fn: Function) -> list[Value] | None:
    """Values for `fn`'s inputs from the pool: the arguments of an earlier call still
    visible (CSE material), else values of the same type (made to fit by a broadcasting
    Add sometimes), exact where the function needs exact ones."""
    visible = {id(v) for v in b.values}
    earlier = [args for args in fn.calls if all(id(a) in visible for a in args)]
    if earlier and b.chance(0.5):
        b.tags["fn:call-same-arguments"] += 1
        return b.choice(earlier)
    args: list[Value] = []
    for formal in fn.inputs:
        same = [v for v in b.values if (v.dtype, v.shape) == (formal.dtype, formal.shape)
                and (v.exact or not formal.exact) and not v.const
                and not (fn.bodies and v in args)]
        if same and b.chance(0.85):
            args.append(b.choice(same))
            continue
        fits = [v for v in b.values if v.dtype == formal.dtype == FLOAT
                and broadcast(v.shape, formal.shape) == formal.shape]
        if not fits:
            return None
        v = b.choice(fits)
        args.append(b.op("Add", [v, b.const(b.randn(formal.shape))], formal.shape,
                         pool=False))
        args[-1].exact = v.exact
    return args


def _call_attributes(b: Builder, fn: Function) -> list[AttributeProto]:
    """The attributes of a call: each set to one of its choices or left out (when it may
    be); in a function body, sometimes the caller's own attribute passed on by reference."""
    attrs = []
    making = state(b).making
    for p in fn.params:
        if making and b.chance(0.3):  # alpha=@alpha: the caller declares one like it
            outer = _declare(b, p.name.rstrip("0123456789"), p.kind, p.choices,
                             p.omittable, "passed-on")
            attrs.append(_ref(p.name, outer.name, p.kind))
        elif p.omittable and b.chance(0.35):
            b.tags["fn:call-omits-attribute"] += 1
        else:
            attrs.append(_attr(p.name, p.kind, b.choice(p.choices)))
            b.tags["fn:call-sets-attribute"] += 1
    return attrs


def call(b: Builder, fn: Function, args: Sequence[Value] | None = None,
         attrs: Sequence[AttributeProto] | None = None, pool: bool = True) -> list[Value]:
    """A call of `fn` on `args` (found if not given); its outputs, the random one not
    pooled (nor those `pool` says not to), an output left out (an empty name) or unread
    sometimes."""
    args = list(args) if args is not None else _arguments(b, fn)
    if args is None:
        return []
    if attrs is None:
        attrs = _call_attributes(b, fn)
    results = [Value(b.fresh("v"), o.dtype, o.shape, False, o.exact) for o in fn.outputs]
    names = [r.name for r in results]
    # the last output left out of the call (not in a body: onnxruntime's inliner fails it)
    if len(names) > 1 and not state(b).making and b.chance(0.2):
        names[-1] = ""
        results = results[:-1]
        b.tags["fn:call-empty-output"] += 1
    node = helper.make_node(fn.proto.name, [a.name for a in args], names,
                            name=b.fresh(f"call_{fn.proto.name.lower()}_"), domain=DOMAIN)
    node.attribute.extend(attrs)
    if fn.proto.overload:
        node.overload = fn.proto.overload
    b.nodes.append(node)
    fn.calls.append(list(args))
    fn.last_attrs = list(attrs)
    fn.nested = fn.nested or bool(b.scopes)
    for r, o in zip(results, fn.outputs):
        b.by_name[r.name] = r
        if o.name in b.inverses:
            b.inverses.add(r.name)
    start = 1 if fn.random == "differ" else 0
    if start and results:  # (a draw: read by nothing but its comparison, else outputs differ)
        b.unread.add(results[0].name)
    if fn.opaque:  # (a graph output at the top level, unread in a body)
        if not b.scopes and results[start:]:
            b.outputs.append(results[start])
        pool = False
    if pool:
        for r in results[start:]:
            if b.chance(0.85):  # the others are outputs no one reads
                b.values.append(r)
            else:
                b.tags["fn:unread-output"] += 1
    b.tags[f"fn:call-in-{b.scopes[-1] if b.scopes else 'graph'}"] += 1
    return results


def g_call(b: Builder) -> bool:
    """A call of a function defined earlier (not the one being built)."""
    inside = state(b).names
    overloaded = {f.proto.name for f in state(b).functions if f.proto.overload}
    fns = [f for f in state(b).functions if f.random != "differ"
           and not (inside and (f.opaque or f.proto.name in inside))
           and not (b.scopes and f.proto.name in overloaded)]
    if not fns:
        return False
    return bool(call(b, b.choice(fns)))


# -- functions ------------------------------------------------------------------------------
def _random_op(b: Builder, form: str) -> tuple[Value, str] | None:
    """In a function body: a random value (from a formal's shape) that is masked (`x + r *
    0`: returned pooled) or left to differ between calls (returned, not pooled)."""
    x = b.pick(ok=lambda v: v.dtype == FLOAT and v.numel <= MAX_NUMEL // 2 and not v.const)
    if x is None:
        return None
    op = b.choice(["RandomNormalLike", "RandomUniformLike", "Dropout"])
    if b.opset >= 22:  # (onnxruntime implements the others up to opset 21)
        op = "Dropout"
    if op == "Dropout" and form == "differ" and x.numel < 24:  # masks equal: 2^-numel
        form = "masked"
    b.tags[f"fn:random-{form}-{op}"] += 1
    if op == "Dropout":  # of ones or uniform values: never NaN (its mask decides nothing)
        if b.opset >= 22 or b.chance(0.5):
            u = b.op("ConstantOfShape", [b.op("Shape", [x], (x.rank,), INT64, pool=False)],
                     x.shape, pool=False, value=helper.make_tensor("", FLOAT, [1], [1.0]))
        else:
            u = b.op("RandomUniformLike", [x], x.shape, pool=False)
        r = b.emit("Dropout", [u, b.scalar(0.5), b.const(np.array(True))],
                   [(FLOAT, x.shape)] + ([(BOOL, x.shape)] if b.chance(0.3) else []),
                   pool=False)[0]
    else:
        r = b.op(op, [x], x.shape, pool=False)
    r.exact = False
    if form == "differ":
        return r, form
    zero = b.scalar(0.0, b.bshape(x.shape))
    y = b.op("Add", [x, b.op("Mul", [r, zero], x.shape, pool=False)], x.shape)
    y.exact = x.exact
    return y, form


def _outputs(b: Builder, formals: Sequence[Value], first: Value | None) -> list[Value]:
    """1 to 3 values the body computed (the last first), distinct; an input passed through
    by an Identity sometimes."""
    made = [v for v in b.values[len(formals):] if v.dtype in (FLOAT, INT64, BOOL)
            and v.name not in b.unshaped and not v.const]
    if not made:
        x = b.choice(list(formals))
        made = [b.op("Neg" if x.dtype == FLOAT else "Identity", [x], x.shape, x.dtype)]
    outs = [first] if first is not None else []
    outs.append(made[-1])
    for _ in range(int(b.rng.integers(0, 3))):
        outs.append(b.choice(made))
    if b.chance(0.1):
        x = b.choice(list(formals))
        outs.append(b.op("Identity", [x], x.shape, x.dtype, pool=False))
        b.tags["fn:input-passed-through"] += 1
    return list({v.name: v for v in outs}.values())


def define(b: Builder, args: Sequence[Value], name: str, overload: str = "",
           random: str = "") -> Function | None:
    """A new function of `args`' types (its body a few generators, an attribute by
    reference and a random operator sometimes), registered."""
    formals = [Value(b.fresh("fx"), a.dtype, a.shape, False, a.exact) for a in args]
    with function_scope(b, formals, name) as nodes:
        fill(b, int(b.rng.integers(1, 5)))
        if b.chance(0.4):
            g_param_op(b)
            fill(b, int(b.rng.integers(0, 2)))
        if b.chance(0.35) and g_call(b):  # a function calling a function
            fill(b, int(b.rng.integers(0, 2)))
        first = None
        if random:
            made = _random_op(b, random)
            if made is None:
                return None
            first, random = made
        # onnxruntime's operator: onnx types no call of it
        elif b.chance(0.08) and g_contrib(b) and b.nodes[-1].domain == MS:
            first = b.by_name[b.nodes[-1].output[0]]
            b.values = [v for v in b.values if v is not first]
        outs = _outputs(b, formals, first)
        params = list(state(b).making[-1])
    opsets = [helper.make_opsetid("", b.opset)]
    domains = {n.domain for n in _all(nodes)} - {"", "ai.onnx"}
    opsets += [helper.make_opsetid(d, 1) for d in sorted(domains)]
    with_default = [_attr(p.name, p.kind, p.default) for p in params if p.default is not None]
    proto = helper.make_function(
        DOMAIN, name, [f.name for f in formals], [o.name for o in outs], nodes, opsets,
        attributes=[p.name for p in params if p.default is None],
        attribute_protos=with_default, overload=overload or None)
    if b.chance(0.4):
        _local_names(proto)
        b.tags["fn:local-names"] += 1
    fn = Function(proto, formals, outs, params, random)
    fn.opaque = bool(domains & {MS})
    fn.bodies = any(n.op_type in ("If", "Loop") for n in nodes)
    if fn.opaque:
        b.tags["fn:opaque"] += 1
    state(b).functions.append(fn)
    b.tags["fn:defined"] += 1
    b.tags[f"fn:outputs-{len(outs)}"] += 1
    if any(n.domain == DOMAIN for n in _all(nodes)):
        b.tags["fn:calls-a-function"] += 1
    return fn


def _local_names(proto: onnx.FunctionProto) -> None:
    """Rename every value and node of `proto` (bodies inside it too) as an exporter names a
    function's own: "x0", "v1", "add_2", ..., the names the main graph uses for other
    values and nodes (a function's names are its own). In place."""
    values: dict[str, str] = {"": ""}
    counts: dict[str, int] = {}

    def value(name: str) -> str:
        if name not in values:
            values[name] = f"{'x' if name.startswith('fx') else 'v'}{len(values) - 1}"
        return values[name]

    def rename(nodes: Sequence[onnx.NodeProto]) -> None:
        for node in nodes:
            key = node.op_type.lower()
            node.name = f"{key}_{counts.setdefault(key, 0) + 1}"
            counts[key] += 1
            inputs, outputs = [value(i) for i in node.input], [value(o) for o in node.output]
            del node.input[:], node.output[:]
            node.input.extend(inputs)
            node.output.extend(outputs)
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    for info in [*attr.g.input, *attr.g.output]:
                        info.name = value(info.name)
                    rename(attr.g.node)

    formals = [value(i) for i in proto.input]
    rename(proto.node)
    outs = [value(o) for o in proto.output]
    del proto.input[:], proto.output[:]
    proto.input.extend(formals)
    proto.output.extend(outs)


def _all(nodes: Sequence[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    for node in nodes:
        yield node
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from _all(attr.g.node)


def g_function(b: Builder) -> bool:
    """A new function called once or more: again on the same arguments, on others; random
    ones compared between two calls; an overload of it called on the same arguments."""
    if "Function" in b.scopes or len(state(b).functions) >= MAX_FUNCTIONS:
        return False
    count = 1 if b.chance(0.6) else 2
    args: list[Value] = []
    twice = b.chance(0.15)  # one value passed for two inputs sometimes
    for _ in range(count):
        v = b.pick(ok=lambda v: v.numel <= MAX_NUMEL // 2 and v.dtype in (FLOAT, INT64)
                   and (twice or v not in args))
        if v is None:
            return False
        args.append(v)
    b.tags["fn:same-value-twice"] += len(args) - len({a.name for a in args})
    r = b.rng.random()
    # (compared in a graph output: not in a body)
    random = "differ" if r < 0.12 and not b.scopes else "masked" if r < 0.25 else ""
    name = b.fresh("F")  # (not by count: an If's replayed branch defines its own)
    fn = define(b, args, name, random=random)
    if fn is None:
        return False
    random = fn.random
    b.tags[f"fn:form-{random or 'deterministic'}"] += 1
    if fn.bodies and len({a.name for a in args}) < len(args):
        args = _arguments(b, fn) or []  # (see Function.bodies)
    first = call(b, fn, args) if args else []
    if not first:
        b.tags["fn:never-called"] += 1
        return True
    if random == "differ":  # true in the original: two calls are two draws
        second = call(b, fn, args, fn.last_attrs)
        d = b.op("Sub", [first[0], second[0]], first[0].shape, pool=False)
        a = b.op("Abs", [d], d.shape, pool=False)
        m = b.op("ReduceMax", [a], (), pool=False, keepdims=0)
        b.unread.update(v.name for v in (d, a, m))  # (as random as the draws)
        b.outputs.append(b.op("Greater", [m, b.scalar(0.0)], (), BOOL, pool=False))
        return True
    for _ in range(int(b.rng.integers(0, 3))):  # called again: same arguments or others
        if b.chance(0.5):
            b.tags["fn:called-again-same"] += 1
            same_attrs = b.chance(0.6)
            call(b, fn, args, fn.last_attrs if same_attrs else None)
        elif call(b, fn):
            b.tags["fn:called-again"] += 1
    # another body under the same name, called on the same arguments
    if OVERLOADS and not b.scopes and not fn.nested and b.chance(0.15):
        other = define(b, args, name, overload="v2")
        if other is not None:
            b.tags["fn:overload"] += 1
            call(b, other, args)
            if b.chance(0.5):
                proto = fn.proto
                proto.overload = "v1"  # the first one under an overload name too
                bodies = [n for f in state(b).functions for n in f.proto.node]
                for node in _all([*b.nodes, *bodies]):
                    if node.domain == DOMAIN and node.op_type == name and not node.overload:
                        node.overload = "v1"
    return True


def protos(b: Builder) -> list[onnx.FunctionProto]:
    """The functions to put in the model (in definition order: a callee first)."""
    return [f.proto for f in state(b).functions] if b.local is not None else []


def uses_overloads(b: Builder) -> bool:
    return any(p.overload for p in protos(b))


#: name -> (weight, lowest opset, generator), drawn on the seeds that have functions.
FUNCTIONS: dict[str, tuple[float, int, Any]] = {
    "Function": (10.0, 13, g_function),
    "Call": (5.0, 13, g_call),
}
