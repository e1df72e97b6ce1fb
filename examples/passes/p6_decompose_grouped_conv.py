"""P6: a DecomposePass: a grouped Conv becomes Split -> one Conv per group -> Concat.

Port of GE's `pattern_base_pass/6_decompose_grouped_conv.../python_decompose_pass.py`
(`PythonDecomposeGroupedConvToSplitedPass`), for ONNX Conv (GE: Conv2D): `meet_requirements`
accepts `group != 1` (ONNX Conv is always channels-first, so GE's `data_format == "NCHW"`
check has nothing to test); the replacement splits the input on axis 1 and the weight (and,
unlike GE's sample, an optional bias) on axis 0 into `group` equal parts, runs one `group=1`
Conv per slice with the node's strides/pads/dilations/kernel_shape/auto_pad, concatenates on
axis 1 and types the result with `infer_shape(graph, node)`. GE resets the slices' descs to
NCHW by hand; here `infer_shape` gives them. Split's equal parts come from `num_outputs=`
(the output count at opsets 13-17, also the attribute of that name from opset 18), so the
pass works at any opset without computing split sizes.
"""

from ge.es import GraphBuilder
from ge.es.all import Concat, Conv, Split
from ge.passes import DecomposePass, PassStage, infer_shape, register_decompose_pass

_CONV_ATTRIBUTES = ("auto_pad", "dilations", "kernel_shape", "pads", "strides")


@register_decompose_pass(name="PythonDecomposeGroupedConvToSplitedPass",
                         stage=PassStage.AFTER_INFER_SHAPE, op_types=["Conv"])
class PythonDecomposeGroupedConvToSplitedPass(DecomposePass):
    def meet_requirements(self, node):
        group = node.get_attr("group") if node.has_attr("group") else 1
        return group != 1

    def replacement(self, node):
        group = node.get_attr("group")
        attrs = {k: node.get_attr(k) for k in _CONV_ATTRIBUTES if node.has_attr(k)}
        # The engine gives the replacement one input per distinct producer of the node's
        # connected inputs, in input order (a Conv with a bias has three).
        slots = {}
        slot_of_input = []
        for i in range(node.get_inputs_size()):
            producer = node.get_input_producer(i)
            slot_of_input.append(None if producer is None else slots.setdefault(
                producer, len(slots)))
        builder = GraphBuilder("decomposed_grouped_conv")
        data = builder.create_inputs(len(slots))
        x, w = data[slot_of_input[0]], data[slot_of_input[1]]
        bias_slot = slot_of_input[2] if len(slot_of_input) > 2 else None
        xs = Split(x, axis=1, num_outputs=group)
        ws = Split(w, axis=0, num_outputs=group)
        bs = Split(data[bias_slot], axis=0, num_outputs=group) if bias_slot is not None else None
        outs = [Conv(xs[i], ws[i], bs[i] if bs is not None else None, group=1, **attrs)
                for i in range(group)]
        graph = builder.build_and_reset([Concat(outs, axis=1)])
        infer_shape(graph, node)
        print(f"[PythonDecomposeGroupedConvToSplitedPass] {node.name}: {group} groups")
        return graph
