"""Where onnx's checker refuses a model: the function or body, and the node.

`onnx.checker.check_model` says what is wrong over several lines and names at most one
node, the outermost: a problem inside a branch is "Bad node spec for node. Name: cond_if
OpType: If" (the If, not the branch nor the node in it), one inside a model-local function
names nothing. The checks here run onnx's own checker on parts of the model, each in the
context the whole model gives it (its IR version and opsets, the function's opsets, the
values a body sees around it), and narrow down to the first node it refuses: the shortest
prefix of a node list that fails (the checker goes through a list in order), then the
bodies of that node. Run only when the checker has refused something, and on the
model-local functions (held as protos: `Graph.validate()` checks them here, and what
the ONNX rules forbid across them: `across_functions`), never on every load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import onnx
from onnx import AttributeProto, helper

from ge._text import error_text
from ge.errors import ValidationProblem
from ge.graph.model_info import FunctionKey, call_key, function_key
from ge.graph.places import BodyOwner, attribute_graphs, graph_place, node_label

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["CheckerFailure", "across_functions", "function_failures",
           "function_place", "function_problems", "function_set_problems", "model_failure"]

C = onnx.checker.C
ValidationError = onnx.checker.ValidationError

#: A domain no model imports, for the node that holds a body to be checked (`_body_fails`).
_PROBE_DOMAIN = "ge.checker_probe"
#: Model-local functions are checked from this IR version on (onnx's `check_model`).
_FUNCTIONS_CHECKED_FROM_IR = 8


class CheckerFailure(NamedTuple):
    """What onnx's checker refuses and where: `place` names the function or body ("" for
    the main graph), `node` the node as messages name it (`node_label`; "" when the
    problem is the graph's or function's own: its inputs, outputs, initializers), `name`
    its name in the model, `graph` the name of the graph it is in, and `message` onnx's
    text on one line (without its context line once the node is found); `verdict` who
    refuses it: onnx's checker, or the ONNX rules themselves for what not every onnx the
    project supports checks (`across_functions`)."""

    place: str
    node: str
    name: str
    graph: str
    message: str
    verdict: str = "onnx.checker refuses it"

    @property
    def where(self) -> str:
        """"Relu node 'r' in graph then_body, then_branch of If node 'cond_if'", "function
        'f' (domain 'custom')", "" for the main graph itself."""
        return " in ".join(part for part in (self.node, self.place) if part)


def function_place(function: onnx.FunctionProto, count: int = 1) -> str:
    """A model-local function as messages name it: "function 'f' (domain 'custom')", with
    its overload when it has one ("..., overload 'neg')": IR 10 tells two apart by it);
    `count` of them: "2 functions 'f' (domain 'custom')"."""
    overload = f", overload {function.overload!r}" if function.overload else ""
    what = "function" if count == 1 else f"{count} functions"
    return f"{what} {function.name!r} (domain {function.domain!r}{overload})"


def _context(ir_version: int, opsets: dict[str, int]) -> C.CheckerContext:
    ctx = C.CheckerContext()
    ctx.ir_version = ir_version
    ctx.opset_imports = opsets
    return ctx


def _error(check: Callable[[], object]) -> ValidationError | None:
    try:
        check()
    except ValidationError as exc:
        return exc
    return None


def _shortest_failing(count: int, fails: Callable[[int], bool]) -> int | None:
    """The least k in 0..count whose prefix of k nodes `fails`, None when even all of
    them pass (a failure is then after the nodes: a graph output). Failing is monotone in
    k: the checker goes through a node list in order and stops at the first problem."""
    if not fails(count):
        return None
    low, high = 0, count
    while low < high:
        middle = (low + high) // 2
        if fails(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _outputs(nodes: Iterable[onnx.NodeProto]) -> list[str]:
    return [o for n in nodes for o in n.output if o]


def _bodies(node: onnx.NodeProto) -> list[tuple[str, onnx.GraphProto]]:
    """The bodies a node holds, each with the attribute holding it ("branches[1]")."""
    return [found for attr in node.attribute for found in attribute_graphs(attr)]


class _Scope(NamedTuple):
    """How a body is checked: the IR version and opsets of what holds it and the names of
    the values around it (a body reads them as its own)."""

    ir_version: int
    opsets: dict[str, int]
    outer: tuple[str, ...]


def _body_fails(body: onnx.GraphProto, scope: _Scope) -> ValidationError | None:
    """onnx's checker on `body` as it checks a body: inside a graph that gives it the values
    around it (typed inputs of a main graph) and a node of a domain without schemas
    holding it, whose attributes the checker checks as a body's (outer values in scope,
    inputs and outputs untyped)."""
    taken = set(scope.outer)
    out = "ge_checker_probe_out"
    while out in taken:
        out += "_"
    holder = helper.make_node("Probe", [], [out], domain=_PROBE_DOMAIN, name="probe")
    attr = holder.attribute.add()
    attr.name, attr.type = "body", AttributeProto.GRAPH
    attr.g.CopyFrom(body)
    probe = helper.make_graph(
        [holder], "ge_checker_probe",
        [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, []) for name in taken],
        [])
    ctx = _context(scope.ir_version, {**scope.opsets, _PROBE_DOMAIN: 1})
    return _error(lambda: onnx.checker.check_graph(probe, ctx))


def _truncated(graph: onnx.GraphProto, count: int) -> onnx.GraphProto:
    """`graph` with its first `count` nodes and no outputs (which later nodes compute)."""
    copy = onnx.GraphProto()
    copy.name = graph.name
    copy.input.extend(graph.input)
    copy.initializer.extend(graph.initializer)
    copy.sparse_initializer.extend(graph.sparse_initializer)
    copy.node.extend(graph.node[:count])
    return copy


def _in_nodes(nodes: Sequence[onnx.NodeProto], fails: Callable[[int], bool],
              scope_at: Callable[[int], _Scope], place: str, graph: str,
              within: BodyOwner | None, error: ValidationError, function: str = ""
              ) -> CheckerFailure:
    """Where in a node list (of a graph or function at `place`; in `function`, named after
    a body's place) the checker's `error` lies: the first node whose prefix `fails`, and
    inside it the first body that fails on its own (`scope_at(i)`: the scope of node i's
    bodies), at any depth."""
    k = _shortest_failing(len(nodes), fails)
    if not k:  # (0: its inputs or initializers; None: its outputs)
        return CheckerFailure(place, "", "", graph, error_text(error))
    index = k - 1
    node = nodes[index]
    for attribute, body in _bodies(node):
        scope = scope_at(index)
        inner = _body_fails(body, scope)
        if inner is None:
            continue
        owner = BodyOwner(node.name, node.op_type, node.domain, attribute, graph, within,
                          None if node.name else index, tuple(node.output))
        return _in_graph(body, scope, owner, inner, function)
    label = node_label(node.op_type, node.name, domain=node.domain, index=index,
                       outputs=node.output)
    return CheckerFailure(place, label, node.name, graph, _without_context(error))


def _in_graph(body: onnx.GraphProto, scope: _Scope, owner: BodyOwner,
              error: ValidationError, function: str) -> CheckerFailure:
    """Where in `body` (held by `owner`, in `function` if in one, checked in `scope`) the
    checker's `error` lies."""
    def fails(k: int) -> bool:
        return _body_fails(_truncated(body, k), scope) is not None

    def scope_at(i: int) -> _Scope:
        own = [vi.name for vi in body.input] + [t.name for t in body.initializer] + [
            s.values.name for s in body.sparse_initializer] + _outputs(body.node[:i])
        return scope._replace(outer=tuple(dict.fromkeys((*scope.outer, *own))))

    place = graph_place(body.name, owner) + (f" in {function}" if function else "")
    return _in_nodes(body.node, fails, scope_at, place, body.name, owner, error, function)


def _without_context(error: ValidationError) -> str:
    """onnx's text without the node it names as context (the outermost one, which the
    place found says better)."""
    return error_text(error).split(" ==> Context: ", 1)[0]


def model_failure(model: onnx.ModelProto) -> CheckerFailure | None:
    """Where `onnx.checker.check_model(model)` refuses `model` (its main graph and bodies
    first, as it checks them, then its functions); None when the parts pass (a problem of
    the model as a whole: its IR version, opsets, metadata)."""
    ir_version = model.ir_version
    opsets = {o.domain: o.version for o in model.opset_import}
    graph = model.graph
    ctx = _context(ir_version, opsets)
    error = _error(lambda: onnx.checker.check_graph(graph, ctx))
    if error is not None:
        def fails(k: int) -> bool:
            return _error(lambda: onnx.checker.check_graph(_truncated(graph, k), ctx)
                          ) is not None

        def scope_at(i: int) -> _Scope:
            own = [vi.name for vi in graph.input] + [t.name for t in graph.initializer] + [
                s.values.name for s in graph.sparse_initializer] + _outputs(graph.node[:i])
            return _Scope(ir_version, opsets, tuple(dict.fromkeys(own)))

        return _in_nodes(graph.node, fails, scope_at, "", graph.name, None, error)
    return next(function_failures(model.functions, ir_version, opsets), None)


def function_failures(functions: Sequence[onnx.FunctionProto], ir_version: int,
                      opsets: dict[str, int]) -> Iterator[CheckerFailure]:
    """Each model-local function onnx's checker refuses, as `check_model` checks them in a
    model of `ir_version` importing `opsets` (from IR version 8; each function against its
    own opsets and the model's, those it adds to the model's merged in), with where; first
    what it refuses across them (`across_functions`), which it checks first."""
    if ir_version < _FUNCTIONS_CHECKED_FROM_IR or not functions:
        return
    yield from across_functions(functions, ir_version, opsets)
    merged = dict(opsets)
    for function in functions:
        for opset in function.opset_import:
            merged.setdefault(opset.domain, opset.version)
    ctx = _context(ir_version, merged)
    for function in functions:
        error = _error(partial(onnx.checker.check_function, function, ctx))
        if error is None:
            continue
        own = {o.domain: o.version for o in function.opset_import}
        yield _in_function(function, ctx, _Scope(ir_version, own, ()), error)


def _in_function(function: onnx.FunctionProto, ctx: C.CheckerContext, scope: _Scope,
                 error: ValidationError) -> CheckerFailure:
    """Where in `function` the checker's `error` lies (`_in_nodes`)."""
    def fails(k: int) -> bool:
        copy = onnx.FunctionProto()
        copy.CopyFrom(function)
        del copy.node[k:]
        return _error(lambda: onnx.checker.check_function(copy, ctx)) is not None

    def scope_at(i: int) -> _Scope:
        own = list(function.input) + _outputs(function.node[:i])
        return scope._replace(outer=tuple(dict.fromkeys(own)))

    place = function_place(function)
    return _in_nodes(function.node, fails, scope_at, place, "", None, error, place)


#: Who refuses what `across_functions` finds: ONNX's IR rules. onnx checks them from some
#: release after 1.19 (1.23 does, 1.19 does not), onnxruntime 1.32 refuses both (1.19 runs
#: the last of two definitions, and crashes on a recursive call).
_ONNX_RULE = "ONNX forbids it"


def across_functions(functions: Sequence[onnx.FunctionProto], ir_version: int,
                     opsets: dict[str, int]) -> Iterator[CheckerFailure]:
    """What the ONNX rules forbid across the model-local functions, which checking each
    alone does not see: two functions of one (domain, name, overload), and a call cycle, a
    function calling itself directly or through others, in its nodes or their bodies.
    Found by ge, not by asking onnx: onnx 1.23's `check_model` refuses both, 1.19's
    neither, and onnxruntime 1.19 runs the last of two definitions and crashes on a
    recursive call, while 1.32 refuses both. From IR version 8, as onnx checks functions."""
    if ir_version < _FUNCTIONS_CHECKED_FROM_IR:
        return
    by_key: dict[FunctionKey, list[onnx.FunctionProto]] = {}
    for function in functions:
        by_key.setdefault(function_key(function), []).append(function)
    for key, same in by_key.items():
        if len(same) > 1:
            yield CheckerFailure(
                function_place(same[0], len(same)), "", "", "",
                f"the model defines {_qualified(key)} {len(same)} times; a model holds one "
                "function per (domain, name, overload)", _ONNX_RULE)
    calls = {key: {c for f in same for c in _calls(f.node) if c in by_key}
             for key, same in by_key.items()}
    for cycle in _call_cycles(list(by_key), calls):
        places = [function_place(by_key[key][0]) for key in cycle]
        named = [_qualified(key) for key in cycle]
        said = (f"{named[0]} calls itself" if len(cycle) == 1 else
                f"{_listed(named)} call each other")
        yield CheckerFailure(_listed(places), "", "", "",
                             f"{said}: model-local functions must not be recursive",
                             _ONNX_RULE)


def _qualified(key: FunctionKey) -> str:
    """A function key as onnx writes it: `local::F`, `local::F::overload`."""
    return "::".join(part for part in key if part)


def _calls(nodes: Iterable[onnx.NodeProto]) -> Iterator[FunctionKey]:
    """What `nodes` and the nodes of their bodies, at any depth, call, as function keys."""
    for node in nodes:
        yield call_key(node)
        for _, body in _bodies(node):
            yield from _calls(body.node)


def _call_cycles(keys: list[FunctionKey], calls: dict[FunctionKey, set[FunctionKey]]
                 ) -> list[list[FunctionKey]]:
    """The functions of each call cycle (a strongly connected set of `calls` that calls
    itself), each in the model's order, by their first function (Tarjan's algorithm,
    iterative: a chain of thousands of functions would pass Python's recursion limit)."""
    index: dict[FunctionKey, int] = {}
    low: dict[FunctionKey, int] = {}
    stack: list[FunctionKey] = []
    on_stack: set[FunctionKey] = set()
    found: list[list[FunctionKey]] = []

    def enter(key: FunctionKey) -> tuple[FunctionKey, Iterator[FunctionKey]]:
        index[key] = low[key] = len(index)
        stack.append(key)
        on_stack.add(key)
        return key, iter(sorted(calls[key]))

    for root in keys:
        if root in index:
            continue
        work = [enter(root)]
        while work:
            key, pending = work[-1]
            callee = next(pending, None)
            if callee is not None:
                if callee not in index:
                    work.append(enter(callee))
                elif callee in on_stack:
                    low[key] = min(low[key], index[callee])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[key])
            if low[key] != index[key]:
                continue
            component: list[FunctionKey] = []
            while not component or component[-1] != key:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1 or key in calls[key]:
                found.append(component)
    order = {key: i for i, key in enumerate(keys)}
    return sorted((sorted(c, key=order.__getitem__) for c in found),
                  key=lambda c: order[c[0]])


def _listed(places: list[str]) -> str:
    """"function 'f' (...)", "function 'f' (...) and function 'g' (...)", "a, b and c"."""
    return places[0] if len(places) == 1 else f"{', '.join(places[:-1])} and {places[-1]}"


def function_problems(graph: Graph) -> list[ValidationProblem]:
    """The `function` problems of the model whose root graph is `graph`: each model-local
    function onnx's checker refuses (checked as `check_model` checks it: the model's IR
    version and opsets), named by the function, the body inside it and the node. Functions
    are few and small beside the graph: the check costs little."""
    model = graph.model if graph._parent_node is None else None
    if model is None or not model.functions:
        return []
    return [_function_problem(graph, failure)
            for failure in function_failures(model.functions, model.ir_version,
                                             model.opset_imports)]


def function_set_problems(graph: Graph) -> list[ValidationProblem]:
    """The `function` problems across the model-local functions of the model whose root
    graph is `graph` (`across_functions`): two of one (domain, name, overload), a call
    cycle, which the ONNX rules forbid (onnxruntime 1.32 refuses the model for either).
    Cheap: no onnx call."""
    model = graph.model if graph._parent_node is None else None
    if model is None or not model.functions:
        return []
    return [_function_problem(graph, failure) for failure in across_functions(
        model.functions, model.ir_version, model.opset_imports)]


def _function_problem(graph: Graph, failure: CheckerFailure) -> ValidationProblem:
    return ValidationProblem("function", (failure.name,) if failure.name else (),
                             (f"{failure.node}: " if failure.node else "")
                             + f"{failure.verdict}: {failure.message}",
                             graph.name, place=failure.place)
