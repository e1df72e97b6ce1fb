"""The graph a pass sees at its stage, as far as an explanation can rebuild it.

A compilation runs a pass on the graph its stage is given (`ge.compiler.scheduler`): a
`BeforeInferShape` pass gets the model as loaded (the types and shapes of its inputs, its
initializers and the `value_info` it carries, everything else untyped); shape inference
runs next, and every later pass sees the model typed; the built-in fusion and origin-graph
optimisation steps change it before `AfterBuiltinFusionPass` and `AfterOriginGraphOptimize`.
`prepare_graph` brings a loaded model into that state where it can (inferring shapes for
every stage after `BeforeInferShape`, nothing before it) and says which state it is in
(`GraphState.description`) and what it could not rebuild (`GraphState.warnings`: the
built-in steps; the passes of the same stage that run first, `earlier_passes_warning`).
The conversions `ge compile --inline-functions` / `--opset N` make before any stage are
not made here: `ge passes explain` makes them first with the same flags, by compile's code
(`ge.session.onnx_tools.converted_graph`), and passes them on (`flags`) to the `ge compile`
the warnings suggest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ge.graph import Graph
from ge.passes.stage import PassStage

__all__ = [
    "DUMP_BEFORE",
    "SHAPE_INFERENCE_SKIPPED",
    "GraphState",
    "earlier_passes_warning",
    "prepare_graph",
]

#: `GraphState.shape_inference` of a `BeforeInferShape` pass: inference runs after it.
SHAPE_INFERENCE_SKIPPED = "skipped"
#: The stages that start after a built-in step, and the dump of the step just before each.
DUMP_BEFORE = {PassStage.AFTER_BUILTIN_FUSION_PASS.value: "BuiltinFusion",
               PassStage.AFTER_ORIGIN_GRAPH_OPTIMIZE.value: "OriginGraphOptimize"}


@dataclass(frozen=True)
class GraphState:
    """Which state of the model an explanation matches against: whether shape inference
    ran ("ok"), was left out as the pass's stage comes before it ("skipped"), or failed
    (its error), a phrase saying so ("as loaded, before shape inference: the pass's
    stage"), and warnings for what differs from what the pass sees in a compilation."""

    stage: str
    shape_inference: str
    description: str
    warnings: list[str] = field(default_factory=list)

    @property
    def inferred(self) -> bool:
        """Whether the graph explained went through shape inference."""
        return self.shape_inference == "ok"


def _is_dump_before(file_name: str, step: str) -> bool:
    """Whether `file_name` is a `--dump` of the graph after the built-in step `step`."""
    return re.fullmatch(rf"ge_\d+_{re.escape(step)}\.onnx", file_name) is not None


def prepare_graph(graph: Graph, stage: str | PassStage, *, pass_name: str,
                  model_file: str | None = None, flags: str = "") -> GraphState:
    """Bring `graph` (in place) into the state a pass of `stage` (a `PassStage` or a
    built-in step's label: "BuiltinFusion") sees: for `BeforeInferShape` the graph as it
    is, for every later stage after shape inference (as the compiler infers, strict; a
    failure leaves the graph as it was and is a warning). `pass_name` and `model_file`
    (the model's path, to tell a `--dump` of the step before the stage) word the warnings,
    and `flags` (" --inline-functions": how MODEL was converted first) the `ge compile` they
    suggest."""
    from ge.passes.explain import infer_shapes_for_explain

    label = stage.value if isinstance(stage, PassStage) else str(stage)
    if label == PassStage.BEFORE_INFER_SHAPE.value:
        return GraphState(label, SHAPE_INFERENCE_SKIPPED,
                          "as loaded, before shape inference: the pass's stage")
    warnings: list[str] = []
    step = DUMP_BEFORE.get(label)
    dumped = step is not None and model_file is not None and _is_dump_before(
        Path(model_file).name, step)
    if step is not None and not dumped:
        warnings.append(
            f"{pass_name} runs at {label}, after the built-in passes changed the graph; this "
            "explains MODEL as shape inference leaves it. To explain what the pass sees: ge "
            f"compile MODEL -o OUT{flags} --dump DIR, then ge passes explain {pass_name} "
            f"DIR/ge_*_{step}.onnx")
    failed = infer_shapes_for_explain(graph)
    if failed is not None:
        warnings.append("shape inference failed, explaining the untyped graph (checks "
                        f"reading shapes or types may be wrong): {failed}")
        return GraphState(label, failed, "as loaded: shape inference failed (see the "
                          "warning), the pass's stage comes after it", warnings)
    if step is None:
        description = "after shape inference: the pass's stage"
    elif dumped:
        description = f"as dumped after the {step} step, the start of the pass's stage"
    else:
        description = ("after shape inference, without the changes of the built-in steps "
                       "before the pass's stage (see the warning)")
    return GraphState(label, "ok", description, warnings)


def earlier_passes_warning(pass_name: str, stage: str, earlier: Sequence[str],
                           model_file: str | None = None, flags: str = "") -> str | None:
    """The warning for a pass that other passes of its stage run before (a stage runs its
    passes by name, D14): the model is explained without their changes. None when there
    are none, or when `model_file` is a `--dump` made after a pass of that stage. `flags`
    as for `prepare_graph`."""
    if not earlier:
        return None
    if model_file is not None and re.fullmatch(rf"ge_\d+_{re.escape(stage)}_.+\.onnx",
                                               Path(model_file).name):
        return None
    listed = ", ".join(earlier)
    return (f"{pass_name} runs at {stage} after {listed} (the passes of a stage run by name); "
            "this explains MODEL without their changes. To explain what the pass sees: ge "
            f"compile MODEL -o OUT{flags} --dump DIR --dump-level 1, then ge passes explain "
            f"{pass_name} on the last DIR/ge_*_{stage}_*.onnx before {pass_name}'s (if "
            "there is none, they changed nothing and MODEL is what it sees)")
