"""What `ge compile` says after compiling: fusions a newer opset would enable, functions
compiled as calls, and custom operators onnxruntime will not load.

Exports are often at opset 13 to 17, where `LayerNormalization` (17), `Gelu` (20) or
`Swish` (24) does not exist yet, so their layer norms, GELUs and SiLUs stay written out in
primitives. The fusion passes themselves count what they would fuse at the newer opset
(their patterns and checks, on the compiled graph with its opset import raised for the
count only: the primitives have the same schemas there), so a hint names a real number,
never a guess. The norm fusions count in the model's ReduceMean form (its axes an
attribute before opset 18, an input from 18), which the converter changes on the way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ge._text import first_and_more
from ge.graph import Graph, Node
from ge.graph.node import is_const

__all__ = ["CustomOpHint", "FunctionHint", "OpsetHint", "UnverifiedHint", "custom_op_hints",
           "function_hints", "fusion_opset", "opset_hints", "unverified_hints"]


@dataclass(frozen=True)
class OpsetHint:
    """`count` written-out `what`s that `pass_name` fuses into `operator` from `opset`."""

    pass_name: str
    what: str
    operator: str
    opset: int
    count: int

    def __str__(self) -> str:
        from ge._compat import runtime_opset
        from ge.ops.runtime_ops import runtime_version

        runs = runtime_opset()
        # (trial AB: the compiled model imports that opset, which the runtime must run)
        newer = "" if runs >= self.opset else (
            f"; the compiled model would then need a newer onnxruntime than this one, "
            f"{runtime_version()}, which runs opsets up to {runs}")
        return (f"{self.count} {self.what}(s) written in primitives would become "
                f"{self.operator} at opset {self.opset} (--opset {self.opset}{newer})")


#: Below this the primitives' schemas differ from those at the targets (ReduceMean, Pow,
#: Erf, ... changed at 13): not counted.
_LOWEST = 13


def _targets() -> list[tuple[type, str, str, int]]:
    """(pass, what it fuses, into which operator, from which opset)."""
    from ge.compiler.builtin.fusion_gelu import GELU_OPSET, GeluFusion
    from ge.compiler.builtin.fusion_norm import (
        LAYER_NORM_OPSET,
        RMS_NORM_OPSET,
        LayerNormFusion,
        RMSNormFusion,
    )
    from ge.compiler.builtin.fusion_swish import SWISH_OPSET, SwishFusion

    return [(LayerNormFusion, "layer norm", "LayerNormalization", LAYER_NORM_OPSET),
            (GeluFusion, "GELU", "Gelu", GELU_OPSET),
            (RMSNormFusion, "RMS norm", "RMSNormalization", RMS_NORM_OPSET),
            (SwishFusion, "SiLU", "Swish", SWISH_OPSET)]


def fusion_opset(pass_name: str) -> tuple[str, int] | None:
    """(the operator, the opset it is ONNX's from) of a built-in fusion into an operator
    newer opsets have (`RMSNormFusion`: RMSNormalization, 23), else None."""
    for pass_class, _, operator, opset in _targets():
        if pass_class.__ge_builtin__.name == pass_name:  # type: ignore[attr-defined]
            return operator, opset
    return None


def opset_hints(graph: Graph, disabled: Iterable[str] = (),
                enabled: Iterable[str] = (), *, late: Iterable[str] = ()) -> list[OpsetHint]:
    """The fusions a newer standard opset would enable in `graph` (a compiled root graph),
    for the fusion passes that run: not in `disabled`, and if off by default, in `enabled`;
    nothing is changed. `late` names the passes that ran after every fusion (at
    AfterOriginGraphOptimize): what they made no fusion would see, so it is not counted."""
    from ge.compiler.builtin.fusion_norm import NormFusion
    from ge.passes.found_matches import find_matches
    from ge.passes.rewrite import ORIGIN_PASS

    imports = graph.root_graph().opset_imports
    current = graph.get_opset_version("") or 0
    key = "" if "" in imports else "ai.onnx"  # the standard domain's entry, as written
    off = set(disabled)
    hints: list[OpsetHint] = []
    graphs = [graph, *graph.get_all_subgraphs()]
    taken: set[Node] = set()  # matched by a pass counted before (it runs first, too)
    after_fusions = set(late)
    for pass_class, what, operator, opset in _targets():
        spec = pass_class.__ge_builtin__  # type: ignore[attr-defined]
        name = spec.name
        if not _LOWEST <= current < opset or name in off or (
                not spec.on_by_default and name not in enabled):
            continue
        # only if a graph holds one of the operators every match contains
        if spec.requires and not any(g.nodes_of_type(t) for g in graphs
                                     for t in spec.requires):
            continue
        imports[key] = opset  # for the count only: restored below
        try:
            instance = (pass_class(reduce_mean_opset=current)
                        if issubclass(pass_class, NormFusion) else pass_class())
            count = 0
            for found in find_matches(instance, graph, bodies=True):
                # A layer norm's inner part has an RMS norm's shape: LayerNormFusion takes it.
                # (Constants are shared between matches: deduplication merges epsilons.)
                operators = {n for n in found.nodes if not is_const(n)}
                if after_fusions and any(n.get_metadata().get(ORIGIN_PASS) in after_fusions
                                         for n in operators):
                    continue  # made after the fusions ran: --opset would not fuse it either
                if taken.isdisjoint(operators):
                    taken.update(operators)
                    count += 1
        except Exception:  # a hint is never worth a failure
            count = 0
        finally:
            imports[key] = current
        if count:
            hints.append(OpsetHint(name, what, operator, opset, count))
    return hints


@dataclass(frozen=True)
class FunctionHint:
    """`count` calls of model-local `functions` ("domain.name"): each is one node to the
    passes, which never see its body unless `--inline-functions` inlines it first."""

    functions: tuple[str, ...]
    count: int

    def __str__(self) -> str:
        shown = first_and_more(self.functions)
        return (f"{self.count} call(s) of model-local function(s) {shown} compiled as calls, "
                "their bodies not optimised (--inline-functions inlines them)")


def function_hints(graph: Graph) -> list[FunctionHint]:
    """A hint when `graph` (a compiled root graph) calls functions its model defines."""
    from ge.compiler.report import op_label
    from ge.ops.functions import function_key, node_call_key

    defined = {function_key(f) for f in graph.root_graph().model.functions}
    if not defined:
        return []
    calls = [node for node in graph.get_all_nodes() if node_call_key(node) in defined]
    if not calls:
        return []
    names = tuple(sorted({op_label(n) for n in calls}))  # (`local.F:neg`: overloads apart)
    return [FunctionHint(names, len(calls))]


@dataclass(frozen=True)
class CustomOpHint:
    """`count` nodes of custom operators `operators` ("domain::op") in the written model,
    which onnxruntime does not load without an implementation of its own: ge runs them with
    their registered kernels (or decompositions) in onnx's reference evaluator, which is
    where `--verify` ran them (trial XX: "verification ok", then onnxruntime refused the
    file). `unregistered`: those of them nothing in this process registers (a model read
    with them: no kernel anywhere); `verified`: whether the compilation verified the model
    (the hint said "as its verification did" without it: trial V)."""

    operators: tuple[str, ...]
    count: int
    unregistered: tuple[str, ...] = ()
    verified: bool = False

    def __str__(self) -> str:
        text = (f"the model uses custom operator(s) {first_and_more(self.operators)} "
                f"({self.count} node(s)), which onnxruntime loads only with an "
                "implementation of its own (a custom-op library)")
        if len(self.unregistered) == len(self.operators):
            return text + "; nothing registers them in ge either (ge.ops.register_op)"
        text += ("; ge runs them with their registered kernels in onnx's reference evaluator "
                 "(ge run --pass-path)" + (", as its verification did" if self.verified
                                           else ""))
        if self.unregistered:
            text += (f", except {first_and_more(self.unregistered)}, which nothing "
                     "registers")
        return text


def custom_op_hints(graph: Graph, verified: bool = False,
                    undefined: Iterable[str] = ()) -> list[CustomOpHint]:
    """A hint when `graph` (a compiled root graph) holds operators of a domain onnxruntime
    does not run itself (a call of a function the model defines is not one), saying which
    of them nothing the compilation saw defines (`undefined`, its report's
    `undefined_operators`: `domain::op`, a body's with ` (in PATH)`) and whether its
    verification (`verified`) ran them."""
    from ge.ops.functions import function_key, node_call_key
    from ge.session.custom_evaluation import foreign_nodes

    nowhere = {text.split(" (in ", 1)[0] for text in undefined}

    defined = {function_key(f) for f in graph.root_graph().model.functions}
    counts: dict[str, int] = {}
    unregistered: set[str] = set()
    for node in foreign_nodes(graph):
        if node_call_key(node) not in defined:
            label = f"{node.domain}::{node.type}"
            counts[label] = counts.get(label, 0) + 1
            if label in nowhere:
                unregistered.add(label)
    if not counts:
        return []
    return [CustomOpHint(tuple(sorted(counts)), sum(counts.values()),
                         tuple(sorted(unregistered)), verified)]


@dataclass(frozen=True)
class UnverifiedHint:
    """The plugin passes that changed the graph of a compilation that did not verify it:
    nothing compared the compiled model's outputs with the original's (trial AD: three
    wrong plugin passes compiled with "success" and nothing else)."""

    passes: tuple[str, ...]

    def __str__(self) -> str:
        return (f"plugin pass(es) {first_and_more(list(self.passes))} changed the graph, and "
                "nothing compared its outputs with the original's: --verify does (--verify "
                "each-pass names the first pass after which they differ)")


def unverified_hints(changing: Iterable[str], verified: bool) -> list[UnverifiedHint]:
    """An `UnverifiedHint` for the plugin passes `changing` (`CompileReport.
    passes_that_changed(plugins_only=True)`), unless the compilation verified the model."""
    passes = tuple(changing)
    return [UnverifiedHint(passes)] if passes and not verified else []
