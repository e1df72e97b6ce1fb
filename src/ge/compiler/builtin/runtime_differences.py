"""Where onnxruntime computes a constant node otherwise than onnx's reference evaluator.

Constant folding (`ge.compiler.builtin.constant_folding`) evaluates nodes with the
reference evaluator; a fold is right only if the value is the one onnxruntime would have
computed from the original model. Where the two differ and ge cannot compute the runtime's
value itself (`ge.ops.runtime_kernels` holds the kernels it can), the node is left to the
runtime: `computed_otherwise` says which, each rule with the case that showed it. Most are
edges of the values (NaN, overflow, out-of-range casts, lengths that do not divide) where
the ONNX spec is silent or undefined and the two implementations choose differently.
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np

from ge.compiler.builtin._support import FLOAT_TYPES, reverses_to_front
from ge.graph import Node, Tensor
from ge.graph.types import DataType, data_type_from_onnx, data_type_to_numpy
from ge.ops.onnx_node import node_opset

__all__ = ["computed_otherwise"]

Inputs = list[Tensor | None]

#: Operators that accumulate over many elements. onnxruntime accumulates float16 and
#: bfloat16 in float32; the reference evaluator in the element type, which overflows or
#: rounds away what the runtime keeps (a float16 ReduceL2 of 60,000s gives inf, not 424.8).
#: On such inputs these are left to the runtime.
_ACCUMULATING_OPS = frozenset({
    "AveragePool", "BatchNormalization", "Conv", "ConvTranspose", "CumSum", "Einsum", "Gemm",
    "GlobalAveragePool", "GlobalLpPool", "GroupNormalization", "InstanceNormalization",
    "LayerNormalization", "LogSoftmax", "LpNormalization", "LpPool", "MatMul", "Mean",
    "MeanVarianceNormalization", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMean", "ReduceProd", "ReduceSum", "ReduceSumSquare", "RMSNormalization", "Softmax",
})
_NARROW_FLOATS = frozenset({DataType.DT_FLOAT16, DataType.DT_BF16})
#: Operators never folded. Normalisations dividing by a standard deviation they compute:
#: with a (near) zero variance the division by sqrt(eps) (1e6 for BERT's 1e-12) amplifies
#: any difference in how the mean is summed, and the reference evaluator's differs from
#: onnxruntime's (a LayerNorm of twenty equal values gave 0.0298 where onnxruntime gives
#: 0). String operators on empty strings (trial CC: StringNormalizer dropped "" from five
#: strings; StringSplit counted one piece in "" where onnxruntime counts none).
_NEVER_FOLDED = frozenset({
    "GroupNormalization", "InstanceNormalization", "LayerNormalization",
    "MeanVarianceNormalization", "RMSNormalization",
    "StringNormalizer", "StringSplit",
    # and (trial GG, onnx's conformance models with constant inputs): DFT and STFT, whose
    # FFT onnxruntime rounds otherwise (-50.000343 for the evaluator's -50.0 among values
    # up to 945); Attention, whose masked scores in qk_matmul_output onnxruntime writes as
    # -3.4e38 where the evaluator writes -inf
    "DFT", "STFT", "Attention",
})
#: ai.onnx.ml's classifiers: onnxruntime gives a binary one (every class weight on one
#: class, as scikit-learn exports them) the scores [1 - p, p] and a label by threshold;
#: onnx's reference evaluator does neither (trial Y: a LOGISTIC tree ensemble folded to
#: labels [0, 0] and scores 0.5 where onnxruntime gives [0, 1], 0.55 and 0.69). Never folded.
_ML_CLASSIFIERS = frozenset({"LinearClassifier", "SVMClassifier", "TreeEnsembleClassifier",
                             # and Normalizer (MAX: onnxruntime divides by the row's maximum,
                             # the evaluator by its largest magnitude; trial AA)
                             "Normalizer"})
#: Operators comparing values: with a NaN among them the reference evaluator lets the NaN
#: win (ReduceMax of [3, nan, -1] is nan, ArgMax 1; Hardmax of [nan, 1, 2] marks the nan)
#: where onnxruntime skips it unless it comes first (3, 0; [0, 0, 1]), and Unique keeps
#: every value where onnxruntime's gave [nan] for [-0, 1, nan] (trial CC); the ONNX spec
#: says nothing. Not folded over a NaN.
_COMPARING_OPS = frozenset({"ArgMax", "ArgMin", "Hardmax", "ReduceMax", "ReduceMin",
                            "Unique"})
#: Reductions onnxruntime computes over integers in a wider type, saturating the result
#: where the reference evaluator wraps around in the element type (an int32 ReduceSum of
#: [2**31 - 1, 5]: 2**31 - 1 against -2**31 + 4; trial Y). Folded only when no partial
#: result can overflow: the bound is over all elements of the data input, by how the
#: operator combines them (the others, LogSum and LogSumExp, are never folded over integers).
_INTEGER_REDUCTIONS = {
    "ReduceL1": "abs", "ReduceMean": "abs", "ReduceSum": "abs",
    "ReduceL2": "square", "ReduceSumSquare": "square",
    "ReduceProd": "product", "ReduceLogSum": "", "ReduceLogSumExp": "",
}


def _array(value: Tensor | None) -> np.ndarray | None:
    return None if value is None else np.asarray(value.numpy())


def _has_nan(value: Tensor | None) -> bool:
    array = _array(value)
    return array is not None and array.dtype.kind == "f" and bool(np.isnan(array).any())


#: Integers onnxruntime computes through double (integer reductions, Pow) are exact only
#: up to 2**53: beyond it an int64 result is rounded (Pow(3, 35) gave 50031545098999704 where
#: the evaluator's exact 50031545098999707 was folded; trial FF).
_EXACT_IN_DOUBLE = float(2**53)


def _beyond(bound: float, dtype: np.dtype) -> bool:
    """Whether a result bounded by `bound` may leave `dtype`'s range or double's exact
    integers (an infinite or NaN bound too)."""
    return not bound <= min(float(np.iinfo(dtype).max), _EXACT_IN_DOUBLE)


def _reduction_overflows(op_type: str, values: np.ndarray) -> bool:
    """Whether an integer reduction (`_INTEGER_REDUCTIONS`) of `values` could leave their
    element type or double's exact integers: a bound of any partial result, in float64."""
    combine = _INTEGER_REDUCTIONS[op_type]
    if not combine:
        return True
    magnitudes = np.abs(values.astype(np.float64))
    if combine == "abs":
        bound = float(magnitudes.sum())
    elif combine == "square":
        bound = float(np.square(magnitudes).sum())
    else:
        bound = float(np.prod(np.maximum(magnitudes, 1.0)))
    return _beyond(bound, values.dtype)


def _integer_reduction(node: Node, inputs: Inputs) -> bool:
    values = _array(inputs[0]) if inputs else None
    return (values is not None and values.dtype.kind in "iu"
            and _reduction_overflows(node.type, values))


def _power_overflows(node: Node, inputs: Inputs) -> bool:
    """An integer Pow whose result may leave its type or double's exact integers:
    onnxruntime computes it through double and converts (3**30 in int32: INT_MIN), the
    evaluator wraps (-1010140999; trial CC) or is exact where double is not (trial FF)."""
    base, exponent = (_array(v) for v in inputs[:2]) if len(inputs) > 1 else (None, None)
    if base is None or exponent is None or base.dtype.kind not in "iu" or not base.size:
        return False
    if not exponent.size:
        return False
    with np.errstate(all="ignore"):  # (numpy's power: an overflow is inf, not an error)
        bound = float(np.power(np.abs(base.astype(np.float64)).max(),
                               max(float(exponent.astype(np.float64).max()), 0.0)))
    return _beyond(bound, base.dtype)


def _cast_target(node: Node, inputs: Inputs) -> DataType | None:
    if node.type == "Cast":
        if not node.has_attr("to"):
            return None
        return data_type_from_onnx(int(node.get_attr("to")))
    like = inputs[1] if len(inputs) > 1 else None  # CastLike: its second input's type
    return None if like is None else like.data_type


def _cast(node: Node, inputs: Inputs) -> bool:
    """A cast whose result the runtime writes otherwise: floats or booleans to strings (the
    runtime writes "NaN", "INF", "3", "1" where numpy writes "nan", "inf", "3.0", "True"; a
    CastLike to a string like-tensor too, trial AA), strings to booleans (onnxruntime
    parses the number: "0.5" and "00" are false where numpy takes any non-empty string as
    true; trial CC), bfloat16 and float8 values that are NaN, infinite or out of an integer
    target's range (undefined in ONNX: float32 -> bfloat16 -> uint8 of [-1.5, 300] gave
    [0, 0] where onnxruntime gives [255, 44]; trial CC; float8 the same, trial FF), and
    anything to a 4-bit or 2-bit integer (`_ml_integer`), and doubles to float16, bfloat16
    or float8 (onnxruntime rounds through float32; trial HH). Other floats convert as
    onnxruntime converts them (T5's relative-position buckets cast log(0) = -inf to int64,
    and fold)."""
    source = inputs[0] if inputs else None
    target = _cast_target(node, inputs)
    if source is None or target is None:
        return False
    if source.data_type == DataType.DT_STRING:
        return target == DataType.DT_BOOL
    source_type = _numpy_type(source.data_type)
    floating = source.data_type in FLOAT_TYPES or _ml_float(source_type)
    if target == DataType.DT_STRING:
        return floating or source.data_type == DataType.DT_BOOL
    target_type = _numpy_type(target)
    if target_type is None:
        return False  # (a type numpy cannot hold: the evaluator's own)
    if source.data_type == DataType.DT_DOUBLE and (
            target == DataType.DT_FLOAT16 or _ml_float(target_type)):
        return True  # onnxruntime rounds through float32: a tie the first rounding makes
        #              rounds to even (1 + 2**-4 + 2**-30 to float8e4m3fn: 1.0, not 1.125)
    if target_type.kind not in "iu":  # ml_dtypes' 4-bit and 2-bit integers
        return _ml_integer(target_type) and source.data_type != target
    if not _ml_float(source_type):
        return False
    limits = np.iinfo(target_type)
    values = np.asarray(source.numpy()).astype(np.float64)
    with np.errstate(invalid="ignore"):
        inside = (values > float(limits.min) - 1.0) & (values < float(limits.max) + 1.0)
    return not bool(inside.all())  # (NaN is never inside)


_NUMPY_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


def _numpy_type(data_type: DataType) -> np.dtype | None:
    try:
        return np.dtype(data_type_to_numpy(data_type))
    except Exception:
        return None


def _ml_float(dtype: np.dtype | None) -> bool:
    """Whether `dtype` is one of ml_dtypes' floats (bfloat16, float8, float4): numpy's own
    casts of them to integers differ from onnxruntime's out of range."""
    if dtype is None or dtype in _NUMPY_FLOATS:  # (float8_e5m2's kind is "f" too)
        return False
    try:
        ml_dtypes.finfo(dtype)
    except Exception:
        return False
    return True


def _ml_integer(dtype: np.dtype) -> bool:
    """Whether `dtype` is one of ml_dtypes' narrow integers (int4, uint4, int2, uint2): a
    cast to them rounds half away from zero and wraps in onnxruntime ([2.5, 7.6] to int4:
    [3, -8]), the evaluator truncates ([2, 7]; trial FF)."""
    try:
        ml_dtypes.iinfo(dtype)
    except Exception:
        return False
    return True


def _clip(node: Node, inputs: Inputs) -> bool:
    """A Clip with a NaN bound: onnxruntime ignores it ([-3.5, 1.5] clipped to [nan, 1]
    gives [-3.5, 1]), the evaluator's result is all NaN (trial CC)."""
    return any(_has_nan(v) for v in inputs[1:3])


def _max_unpool(node: Node, inputs: Inputs) -> bool:
    """A MaxUnpool given an output_shape: onnxruntime places the values at other positions
    than the evaluator (and ONNX's expected output) does, 5..8 at 5, 7, 13, 15 against 6, 8,
    16, 18 (trial GG)."""
    return len(inputs) > 2 and inputs[2] is not None


def _nonzero(node: Node, inputs: Inputs) -> bool:
    """NonZero of a scalar: onnxruntime answers [[0]] (shape 1 x 1) for a non-zero one,
    the evaluator an empty 0 x 1 (trial CC)."""
    values = _array(inputs[0]) if inputs else None
    return values is not None and values.ndim == 0


def _resize(node: Node, inputs: Inputs) -> bool:
    """A Resize (or Upsample) by scales that do not give whole lengths: onnxruntime maps
    coordinates by the output's actual length, the evaluator by the unrounded one (4 x 0.6
    with align_corners gave [0, 2.14] where onnxruntime gives [0, 3]; trial CC); one by
    sizes kept to their aspect ratio, which onnxruntime refuses for some modes; and any
    `tf_crop_and_resize` (its roi's coordinates tie and round otherwise; trial FF)."""
    data = _array(inputs[0]) if inputs else None
    if data is None:
        return True
    if node.has_attr("coordinate_transformation_mode") and node.get_attr(
            "coordinate_transformation_mode") in ("tf_crop_and_resize", b"tf_crop_and_resize"):
        return True  # (a nearest one by sizes with a partial roi rounded its ties otherwise)
    scales = _resize_scales(node, inputs)
    if scales is None:  # by sizes
        policy = node.get_attr("keep_aspect_ratio_policy") if node.has_attr(
            "keep_aspect_ratio_policy") else "stretch"
        return policy != "stretch"
    axes = ([int(a) for a in node.get_attr("axes")] if node.has_attr("axes")
            else list(range(data.ndim)))
    if len(axes) != len(scales):
        return True
    for axis, scale in zip(axes, scales):
        length = data.shape[axis] * float(scale)
        if length != round(length):
            return True
    return False


def _resize_scales(node: Node, inputs: Inputs) -> list[float] | None:
    """The scales of a Resize or Upsample, None when it resizes by sizes."""
    if node.type == "Upsample" and node.has_attr("scales"):  # Upsample-7
        return [float(s) for s in node.get_attr("scales")]
    index = 1 if node.type == "Upsample" or node_opset(node) < 11 else 2
    scales = _array(inputs[index]) if len(inputs) > index else None
    if scales is None or not scales.size:
        return None
    return [float(s) for s in scales.reshape(-1)]


def _batch_normalization(node: Node, inputs: Inputs) -> bool:
    """BatchNormalization before opset 14: the evaluator's BatchNormalization-9 mixes the
    batch's own statistics into the stored ones ([1, 3] normalised by mean 0, var 1 gave
    [0.8, 2.8])."""
    return node_opset(node) < 14 or _narrow_accumulation(node, inputs)


def _grouped_conv_transpose(node: Node, inputs: Inputs) -> bool:
    """A grouped ConvTranspose: onnx 1.23's evaluator puts each group's output in the wrong
    channels, or fails (a depthwise one over 4 channels was folded to values off by 2.6;
    the fuzzer's seed 2752)."""
    if node.has_attr("group") and int(node.get_attr("group")) != 1:
        return True
    return _narrow_accumulation(node, inputs)


def _dropout_mask(node: Node, inputs: Inputs) -> bool:
    """Dropout-10's inference mask, read: the evaluator's is all true, the runtime's
    false."""
    return (node_opset(node) < 12 and node.get_outputs_size() > 1
            and bool(node.get_out_data_nodes_and_port_indexes(1)))


def _narrow_accumulation(node: Node, inputs: Inputs) -> bool:
    return any(v is not None and v.data_type in _NARROW_FLOATS for v in inputs)


def _compares_nan(node: Node, inputs: Inputs) -> bool:
    return bool(inputs) and _has_nan(inputs[0])


def _slice(node: Node, inputs: Inputs) -> bool:
    return reverses_to_front(node)


Rule = Callable[[Node, Inputs], bool]
_RULES: dict[str, list[Rule]] = {}
for _op in _ACCUMULATING_OPS:
    _RULES.setdefault(_op, []).append(_narrow_accumulation)
for _op in _INTEGER_REDUCTIONS:
    _RULES.setdefault(_op, []).append(_integer_reduction)
for _op in _COMPARING_OPS:
    _RULES.setdefault(_op, []).append(_compares_nan)
for _op, _rule in (("BatchNormalization", _batch_normalization),
                   ("ConvTranspose", _grouped_conv_transpose), ("Dropout", _dropout_mask),
                   ("Cast", _cast), ("CastLike", _cast), ("Clip", _clip),
                   ("MaxUnpool", _max_unpool), ("NonZero", _nonzero),
                   ("Pow", _power_overflows), ("Resize", _resize), ("Slice", _slice),
                   ("Upsample", _resize)):
    _RULES[_op] = [_rule]  # (each replaces or includes the accumulation rule above)


def computed_otherwise(node: Node, inputs: Inputs) -> bool:
    """Whether onnxruntime computes `node` (of the standard domain or ai.onnx.ml) otherwise
    than the reference evaluator from these constant `inputs`, so that folding it would
    change the model's results (see the tables and rules of this module)."""
    if node.domain:  # ai.onnx.ml
        return node.type in _ML_CLASSIFIERS
    if node.type in _NEVER_FOLDED:
        return True
    return any(rule(node, inputs) for rule in _RULES.get(node.type, ()))

