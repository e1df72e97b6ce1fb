"""GE's (Ascend's) operator vocabulary, as ge holds it: the one map from the Ascend operator
names GE's samples use to the ONNX operators ge's graphs hold in their place (decision D1),
with how GE's ES call of each is written with ge's ES (docs/es.md, "Porting from GE").

Both `ge.es` (an Ascend name looked up as an ES function: `ge.es.math.ConcatV2`) and
`ge.passes` (an Ascend name in a pass's `op_types`: a warning) read it; both import `ge.ops`
already, and this module imports nothing of ge but `ge.errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NoReturn

from ge.errors import OpNotFoundError

__all__ = ["ASCEND_OPS", "ASCEND_OP_TYPES", "AscendOp", "ascend_name_error", "es_getattr",
           "no_es_function"]


@dataclass(frozen=True)
class AscendOp:
    """An Ascend operator: the ONNX operator a ge graph holds instead (`onnx`), and, where
    known, GE's ES call as GE's samples write it (`ge_call`), ge's call (`onnx_call`, what
    `es.<onnx>` takes) and what differs (`note`)."""

    onnx: str
    ge_call: str = ""
    onnx_call: str = ""
    note: str = ""


_MATMUL_NOTE = ("no bias input: add it, MatMul(x1, x2) + bias; no transpose attributes: "
                "transpose the input first, Transpose(x1, perm=[...])")
_CONCAT_NOTE = ("the tensors are one list; the axis is an int attribute, not a tensor input; "
                "no N (ge counts the list)")
_SPLIT_NOTE = ("the axis is an int attribute, not a tensor input; num_outputs= is the number "
               "of equal parts")
_CONV_NOTE = ("NCHW only (no data_format); strides and dilations name the spatial dims only "
              "([sh, sw], not GE's 4 values with N and C); pads are [top, left, bottom, right] "
              "(GE: top, bottom, left, right); groups is group; no offset_w")

#: Ascend operator name -> the ONNX operator, with the ES signature difference where known.
ASCEND_OPS: Final[dict[str, AscendOp]] = {
    "Conv2D": AscendOp(
        "Conv", "Conv2D(x, filter, bias, offset_w, strides=, pads=, dilations=, groups=, "
        "data_format=)", "Conv(X, W, B, strides=, pads=, dilations=, group=)", _CONV_NOTE),
    "Conv2DV2": AscendOp("Conv"),
    "Conv3D": AscendOp("Conv"),
    "Conv2DTranspose": AscendOp("ConvTranspose"),
    "MatMulV2": AscendOp(
        "MatMul", "MatMulV2(x1, x2, bias, offset_w, transpose_x1=, transpose_x2=)",
        "MatMul(A, B)", _MATMUL_NOTE),
    "BatchMatMul": AscendOp(
        "MatMul", "BatchMatMul(x1, x2, adj_x1=, adj_x2=)", "MatMul(A, B)",
        "no adj attributes: transpose the input first, Transpose(x1, perm=[...])"),
    "BatchMatMulV2": AscendOp(
        "MatMul", "BatchMatMulV2(x1, x2, bias, offset_w, adj_x1=, adj_x2=)", "MatMul(A, B)",
        _MATMUL_NOTE.replace("transpose attributes", "adj attributes")),
    "GEMM": AscendOp(
        "Gemm", "GEMM(a, b, c, alpha, beta, transpose_a=, transpose_b=)",
        "Gemm(A, B, C, alpha=, beta=, transA=, transB=)",
        "alpha and beta are float attributes, not tensor inputs; transA and transB "
        "(0 or 1) for transpose_a and transpose_b"),
    "ConcatV2": AscendOp("Concat", "ConcatV2(x, concat_dim, N=)", "Concat(x, axis=)",
                         _CONCAT_NOTE),
    "ConcatD": AscendOp("Concat", "ConcatD(x, concat_dim=, N=)", "Concat(x, axis=)",
                        "axis for concat_dim; no N (ge counts the list)"),
    "ConcatV2D": AscendOp("Concat", "ConcatV2D(x, concat_dim=, N=)", "Concat(x, axis=)",
                          "axis for concat_dim; no N (ge counts the list)"),
    "SplitD": AscendOp("Split", "SplitD(x, split_dim=, num_split=)",
                       "Split(x, axis=, num_outputs=)", "axis for split_dim, num_outputs for "
                       "num_split"),
    "SplitV": AscendOp("Split", "SplitV(x, size_splits, split_dim, num_split=)",
                       "Split(x, sizes, axis=)", "the sizes are the second input (an int64 "
                       "list), the axis an int attribute"),
    "SplitVD": AscendOp("Split", "SplitVD(x, size_splits=, split_dim=, num_split=)",
                        "Split(x, sizes, axis=)", "the sizes are the second input (an int64 "
                        "list), the axis an int attribute"),
    "TransposeD": AscendOp("Transpose", "TransposeD(x, perm=)", "Transpose(data, perm=)",
                           "the same"),
    "TensorMove": AscendOp("Identity", "TensorMove(x)", "Identity(input)", "the same"),
    "RealDiv": AscendOp("Div", "RealDiv(x1, x2)", "Div(A, B)", "the same"),
    "BiasAdd": AscendOp(
        "Add", "BiasAdd(x, bias, data_format=)", "Add(A, B)",
        "ONNX broadcasts from the last axis: for NCHW reshape the bias to [C, 1, 1] first"),
}

#: Ascend operator name -> the ONNX operator a ge graph holds in its place: no node is ever
#: of these types (`ge.passes.registry` warns about them in `op_types`).
ASCEND_OP_TYPES: Final[dict[str, str]] = {name: op.onnx for name, op in ASCEND_OPS.items()}

PORTING_DOC: Final = 'docs/es.md, "Porting from GE"'


def ascend_name_error(module: str, name: str) -> OpNotFoundError | None:
    """The error for an Ascend operator's name looked up as an ES function in `module`
    (`ge.es.math.BatchMatMulV2`), naming the ONNX function to call instead; None for other
    names. An `OpNotFoundError`, not an AttributeError or ImportError: `from m import X`
    turns an AttributeError into "cannot import name" (its text lost), and GE's samples
    catch ImportError around their imports, setting the names to None."""
    op = ASCEND_OPS.get(name)
    if op is None:
        return None
    call = op.onnx_call or f"{op.onnx}(...)"
    how = f"; {op.note}" if op.note and op.note != "the same" else ""
    ge = f"GE's {op.ge_call}" if op.ge_call else f"GE's {name}"
    source = module if module in _OPERATOR_NAMESPACES else "ge.es.math"
    return OpNotFoundError(
        f"module {module!r} has no {name}: {ge} is ONNX's {op.onnx} here (D1): "
        f"es.{call}{how}. Import {op.onnx} from {source}; see {PORTING_DOC}")


#: The ES namespaces that hold the ONNX operator functions.
_OPERATOR_NAMESPACES: Final = frozenset({"ge.es.onnx", "ge.es.math", "ge.es.nn", "ge.es.all"})


def no_es_function(module: str, name: str) -> NoReturn:
    """Raise for a name an ES namespace's `__getattr__` does not resolve: the Ascend
    operator's error of `ascend_name_error`, or Python's usual AttributeError."""
    error = ascend_name_error(module, name)
    if error is not None:
        raise error
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def es_getattr(module: str) -> Callable[[str], NoReturn]:
    """The module `__getattr__` of an ES namespace `module` (`ge.es`, `ge.es.onnx`,
    `ge.es.math`, `ge.es.nn`): an Ascend operator's name says which ONNX function to call
    instead (`no_es_function`)."""

    def __getattr__(name: str) -> NoReturn:
        no_es_function(module, name)

    return __getattr__
