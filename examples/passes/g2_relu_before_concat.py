"""G2: a FusionBasePass that rewrites by hand: `Relu(Concat(xs))` -> `Concat(Relu(x) for x in xs)`.

Port of GE's `graph_base_pass/2_.../python_move_relu_before_concat_pass.py`
(`PythonMoveReluBeforeConcatPass`): the pass finds the region itself and describes it with a
`SubgraphBoundary` (`SubgraphInput().add_input(concat, i)` per Concat input, the Relu's output
as `SubgraphOutput`), then `SubgraphRewriter.replace(boundary, graph, context=context)`
applies the replacement. GE's ConcatV2 takes its axis as a last input (so its sample leaves
that input out of the Relus); ONNX Concat has an `axis` attribute and every input gets a Relu.
"""

from ge.es import GraphBuilder
from ge.es.all import Concat, Relu
from ge.passes import (
    NOT_CHANGED,
    FusionBasePass,
    PassStage,
    SubgraphBoundary,
    SubgraphInput,
    SubgraphOutput,
    SubgraphRewriter,
    register_fusion_pass,
)


def _only_relu_consumer(concat):
    consumers = concat.get_out_data_nodes_and_port_indexes(0)
    if len(consumers) != 1 or consumers[0][0].type != "Relu" or consumers[0][0].domain:
        return None
    return consumers[0][0]


@register_fusion_pass(name="PythonMoveReluBeforeConcatPass", stage=PassStage.BEFORE_INFER_SHAPE)
class PythonMoveReluBeforeConcatPass(FusionBasePass):
    def run(self, graph, context):
        moved = 0
        for concat in [n for n in graph.get_direct_nodes() if n.type == "Concat"]:
            if concat.domain or concat.get_outputs_size() != 1:
                continue
            relu = _only_relu_consumer(concat)
            count = concat.get_inputs_size()
            if relu is None or any(concat.get_input_producer(i) is None for i in range(count)):
                continue
            builder = GraphBuilder("relu_before_concat")
            relus = [Relu(x) for x in builder.create_inputs(count)]
            replacement = builder.build_and_reset([Concat(relus, axis=concat.get_attr("axis"))])

            boundary = SubgraphBoundary()
            for i in range(count):
                subgraph_input = SubgraphInput()
                subgraph_input.add_input(concat, i)  # consumer anchor: input i of the Concat
                boundary.add_input(i, subgraph_input)
            boundary.add_output(0, SubgraphOutput(relu, 0))
            SubgraphRewriter.replace(boundary, replacement, context=context)
            print(f"[PythonMoveReluBeforeConcatPass] moved {relu.name} before {concat.name}")
            moved += 1
        return True if moved else NOT_CHANGED
