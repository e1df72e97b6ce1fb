"""Example pass plugin: fuse MatMul + Add(bias) into Gemm (GE's MatMul+Add sample, in ONNX).

Load this file alone with `ASCEND_GE_PY_PASS_PATH=examples/passes/fuse_matmul_add.py` (as
`make demo` does) or `ge compile model.onnx -o out.onnx --pass-path
examples/passes/fuse_matmul_add.py`. The folder also holds GE's samples ported to ONNX
(p1_..., g3_...), so pointing at the folder would load them all.
"""

from ge.passes import NOT_CHANGED, FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="FuseMatMulAddByHand", stage=PassStage.AFTER_INFER_SHAPE)
class FuseMatMulAddByHand(FusionBasePass):
    """Add(MatMul(a, b), bias) with a 2-D `a`, a 2-D `b` and a 1-D constant bias -> Gemm,
    found and rewritten with the graph API (the README's `FuseMatMulAdd` is the same rule
    as a pattern pass; the built-in `MatMulAddFusion` does it for every model)."""

    def run(self, graph, context):
        fused = 0
        for add in graph.nodes_of_type("Add"):
            matmul, _ = add.get_in_data_nodes_and_port_indexes(0)
            bias, bias_index = add.get_in_data_nodes_and_port_indexes(1)
            if matmul.type != "MatMul" or bias.type != "Const":
                continue
            if len(matmul.get_out_data_nodes_and_port_indexes(0)) != 1:
                continue  # the product is used elsewhere too: keep it
            a_rank = len(matmul.get_input_desc(0).shape)
            b_rank = len(matmul.get_input_desc(1).shape)
            if (a_rank, b_rank, len(bias.get_output_desc(0).shape)) != (2, 2, 1):
                continue
            gemm = graph.add_node("Gemm", num_inputs=3, attrs={"alpha": 1.0, "beta": 1.0})
            for i in range(2):
                producer, index = matmul.get_in_data_nodes_and_port_indexes(i)
                graph.add_data_edge(producer, index, gemm, i)
            graph.add_data_edge(bias, bias_index, gemm, 2)
            gemm.update_output_desc(0, add.get_output_desc(0))  # after inference: keep descs
            graph.replace_all_uses(add, 0, gemm, 0)
            graph.remove_node(add)
            graph.remove_node(matmul)
            fused += 1
        return True if fused else NOT_CHANGED
