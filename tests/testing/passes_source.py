"""Plugin sources the ge.testing tests write into their temporary folders."""

FUSE_MATMUL_ADD = '''
from ge.es.all import Gemm, MatMul
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="FuseMatMulAdd", stage=PassStage.AFTER_INFER_SHAPE)
class FuseMatMulAdd(PatternFusionPass):
    """MatMul(a, b) + c -> Gemm(a, b, c), for 2-D a and b (shapes come from inference)."""

    @pattern
    def matmul_add(self, inputs):
        return MatMul(inputs[0], inputs[1]) + inputs[2]

    def meet_requirements(self, match_result):
        shapes = []
        for i in range(2):
            tensor = match_result.get_captured_tensor(i)
            shapes.append(tensor.node.get_output_desc(tensor.index).get_shape())
        return all(shape.get_dim_num() == 2 for shape in shapes)

    def replacement(self, inputs):
        a, b, c = inputs[:3]
        return Gemm(a, b, c)
'''

# Wrong on purpose: Add(x, y) -> x.
DROP_ADD = '''
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="DropAdd", stage=PassStage.BEFORE_INFER_SHAPE)
class DropAdd(PatternFusionPass):
    @pattern
    def add(self, inputs):
        return inputs[0] + inputs[1]

    def replacement(self, inputs):
        return inputs[0]
'''

FAILING = '''
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="Refuses", stage=PassStage.AFTER_INFER_SHAPE)
class Refuses(FusionBasePass):
    def run(self, graph, context):
        for node in graph.nodes_of_type("Relu"):
            node.set_attr("touched", 1)
        context.set_error_message("relu is not supported here")
        return False
'''

# Records what it saw: for each graph it ran on, whether its Relus' outputs had a type.
OBSERVER = '''
from ge.graph import DataType
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

SEEN = []


class _Observe(FusionBasePass):
    def run(self, graph, context):
        for node in graph.nodes_of_type("Relu"):
            SEEN.append((context.get_pass_name(), graph.name,
                         node.get_output_desc(0).data_type != DataType.DT_UNDEFINED))
        return True


@register_fusion_pass(name="ObserveBefore", stage=PassStage.BEFORE_INFER_SHAPE)
class ObserveBefore(_Observe):
    pass


@register_fusion_pass(name="ObserveAfter", stage=PassStage.AFTER_INFER_SHAPE)
class ObserveAfter(_Observe):
    pass


@register_fusion_pass(name="TagRelu", stage=PassStage.BEFORE_INFER_SHAPE)
class TagRelu(FusionBasePass):
    def run(self, graph, context):
        for node in graph.nodes_of_type("Relu"):
            node.set_metadata("tag", context.get_option_value("tag"))
        return True
'''

EXPAND_SQUARE = '''
from ge.es import GraphBuilder
from ge.passes import DecomposePass, PassStage, register_decompose_pass


@register_decompose_pass(name="ExpandSquare", stage=PassStage.BEFORE_INFER_SHAPE,
                         op_types=["Pow"])
class ExpandSquare(DecomposePass):
    def meet_requirements(self, node):
        exponent, _ = node.get_in_data_nodes_and_port_indexes(1)
        value = exponent.get_attr("value") if exponent.type == "Const" else None
        return value is not None and value.size == 1 and float(value.numpy()) == 2.0

    def replacement(self, node):
        builder = GraphBuilder("square")
        x, _ = builder.create_inputs(2)
        return builder.build_and_reset([x * x])
'''
