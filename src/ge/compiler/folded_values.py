"""When a node rejects a value that constant folding made known, the model is invalid as given.

A pass whose rewrites put in place of nodes the constants those nodes compute (a class with
`exact_folds = True`: `ConstantFolding`) changes no value the model computes. When the
check after it finds that a node it did not change now fails shape inference, and the
inputs it rejects are those new constants, the node rejects what the model computes at run
time for every input: `Tile` given repeats that a `Reshape` of a `Concat` makes 2-D (the
checker passes the model, onnxruntime refuses it when it runs). That was E13028, "a bug
in ge" (trial PP); `model_rejects_folded_values` says it is the model's, naming the node,
the constants and the pass that computed them (`FoldedValueRejected`, GE1305; under
`on_pass_failure="skip"` the run is rolled back and skipped with a warning, as any failing
run). Not when a plugin pass before it last changed the node (that pass is blamed, as
before), nor when onnx accepts the node and only its outputs now differ from the desc it
holds (a declared output shape the folded value contradicts: runtimes run such a model).
"""

from __future__ import annotations

from collections.abc import Sequence

from ge.errors import ShapeInferenceError, ValidationProblem
from ge.graph import Node
from ge.graph.changes import ChangeSet
from ge.graph.node import is_const
from ge.graph.places import ir_node_label
from ge.graph.tensor_desc import format_desc
from ge.ops.inference import STALE_DESC_ADVICE

__all__ = ["FoldedValueRejected", "model_rejects_folded_values"]


class FoldedValueRejected(ShapeInferenceError):
    """A node rejects the constants an exact fold computed for it: the input model's
    problem (GE1305, naming the model's file: `about_model`), which
    `on_pass_failure="skip"` skips as a failing run."""

    about_model = True


def _folded_inputs(node: Node, changes: ChangeSet) -> list[str]:
    """The inputs of `node` now read from constants the pass added: `'rep' (int64[1,1])`."""
    found = []
    for i in range(node.get_inputs_size()):
        producer = node.get_input_producer(i)
        if producer is None or not is_const(producer[0]) or producer[0] not in changes.added:
            continue
        found.append(f"{producer[0].get_output_name(0)!r} "
                     f"({format_desc(producer[0].get_output_desc(0))})")
    return found


def model_rejects_folded_values(pass_name: str, problems: Sequence[ValidationProblem],
                                changes: ChangeSet) -> FoldedValueRejected | None:
    """The error to raise instead of the pass's failure when every problem is a node the
    pass left as it was (not added, its attributes untouched) that onnx's inference rejects
    with inputs that are constants the pass computed; None otherwise (then the pass is
    blamed)."""
    sentences = []
    nodes = []
    for problem in problems:
        subjects = [s for s in problem.subjects if isinstance(s, Node)]
        if problem.kind != "shape" or len(subjects) != 1 or problem.advice == STALE_DESC_ADVICE:
            return None  # (a stale desc: onnx accepts the node, its outputs differ)
        node = subjects[0]
        if node in changes.added or changes.attributes_set(node):
            return None
        folded = _folded_inputs(node, changes)
        if not folded:
            return None
        nodes.append(problem.nodes[0])
        label = ir_node_label(node)  # (an unnamed node by what it computes, as read)
        said = problem.message  # ("Tile node 'x': shape inference ..." names it again)
        if said.startswith(f"{label}: "):
            said = said[len(label) + 2:]
        sentences.append(
            f"{label} rejects its input(s) "
            f"{', '.join(folded)}, which the model computes from constants alone "
            f"({pass_name} computed them): {said}")
    if not sentences:
        return None
    return FoldedValueRejected(
        f"{'; '.join(sentences)}. The input model is invalid as given (onnxruntime refuses "
        "it when it runs that node); fix it in the model or in the "
        f"exporter that wrote it (--disable {pass_name} compiles it as invalid as it is)",
        nodes=nodes)
