"""G3: a FusionBasePass editing the graph directly: drop Transpose pairs that undo each other.

Adapted from GE's `graph_base_pass/3_.../python_modify_conv_data_format_pass.py`
(`PythonConvTransFormatPass`), which switches Conv2D nodes from NCHW to NHWC and then removes
the Transposes around them, whose perm is a Const input. ONNX Conv has no data_format (it is
always channels-first) and ONNX Transpose's perm is an attribute, so this keeps the graph-edit
half: a Transpose(perm=[0, 2, 3, 1]) whose only consumer is a Transpose(perm=[0, 3, 1, 2])
is the identity; `can_fuse` checks the pair (a failure sets the context's error message and
fails the pass, as in GE), the second one's consumers move to the first one's producer,
`report_fuse` records the fusion, and both nodes are removed.
"""

from ge.passes import (
    NOT_CHANGED,
    FusionBasePass,
    PassStage,
    can_fuse,
    register_fusion_pass,
    report_fuse,
)

TO_NHWC = [0, 2, 3, 1]
TO_NCHW = [0, 3, 1, 2]


def _perm(node):
    if node.type != "Transpose" or node.domain or not node.has_attr("perm"):
        return None
    return list(node.get_attr("perm"))


@register_fusion_pass(name="PythonRemoveInverseTransposePairsPass",
                      stage=PassStage.BEFORE_INFER_SHAPE)
class PythonRemoveInverseTransposePairsPass(FusionBasePass):
    def run(self, graph, context):
        removed = 0
        for first in [n for n in graph.get_direct_nodes() if _perm(n) == TO_NHWC]:
            consumers = first.get_out_data_nodes_and_port_indexes(0)
            if len(consumers) != 1 or _perm(consumers[0][0]) != TO_NCHW:
                continue
            second = consumers[0][0]
            check = can_fuse([first, second])
            if not check.ok:
                context.set_error_message(check.reason)
                return False
            producer, index = first.get_in_data_nodes_and_port_indexes(0)
            graph.replace_all_uses(second, 0, producer, index)
            report_fuse([first, second], [], context)
            graph.remove_node(second)
            graph.remove_node(first)
            print(f"[{type(self).__name__}] removed {first.name} -> {second.name}")
            removed += 1
        return True if removed else NOT_CHANGED
