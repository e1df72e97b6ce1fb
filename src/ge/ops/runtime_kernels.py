"""Reference kernels replaced where onnxruntime computes another value.

Constant evaluation runs onnx's reference evaluator (`ge.ops.evaluation`), whose operators
are written for clarity; where one of them loses what onnxruntime keeps, folding a model
would change its results. Each class here replaces the evaluator's implementation of one
operator, computing it the way onnxruntime does, and says which difference it removes.
Operators whose difference cannot be removed this way are left to the runtime by constant
folding instead (`ge.compiler.builtin.constant_folding`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx.reference.ops._op import OpRunUnaryNum

__all__ = ["RUNTIME_KERNELS"]


class LogSoftmax(OpRunUnaryNum):
    """x - max - log(sum(exp(x - max))) over `axis`, as onnxruntime computes it: the
    evaluator takes the log of the softmax, which underflows to 0, so [0, -1e30] gave
    [0, -inf] where onnxruntime gives [0, -1e30] (trial Y)."""

    op_domain = ""
    axis: int  # (set from the node's attribute, with its default, by OpRun)

    def _run(self, x: np.ndarray, axis: Any = None) -> tuple[np.ndarray]:
        if x.size == 0:
            return (x,)
        axis = self.axis if axis is None else axis
        wide = x.astype(np.float64)  # then rounded once, to the nearest of x's type
        shifted = wide - wide.max(axis=axis, keepdims=True)
        total = np.exp(shifted).sum(axis=axis, keepdims=True)
        return ((shifted - np.log(total)).astype(x.dtype),)


class Gelu(OpRunUnaryNum):
    """Gelu computed in float64 and rounded once, as onnxruntime computes a float16 one in
    float32: the evaluator runs the operator's function body in the element type, which
    loses a float16's small values (at -3.832 it gave -0.0 for -2.434e-4; -0.004395 at -3
    for -0.004051, 8% off; trial CC)."""

    op_domain = ""
    approximate: str  # (set from the node's attribute, with its default, by OpRun)

    def _run(self, x: np.ndarray, approximate: Any = None) -> tuple[np.ndarray]:
        form = self.approximate if approximate is None else approximate
        wide = x.astype(np.float64)
        if form == "tanh":
            inner = math.sqrt(2.0 / math.pi) * (wide + 0.044715 * wide ** 3)
            y = 0.5 * wide * (1.0 + np.tanh(inner))
        else:
            y = 0.5 * wide * (1.0 + _erf(wide / math.sqrt(2.0)))
        return (y.astype(x.dtype),)


def _erf(values: np.ndarray) -> np.ndarray:
    """The error function, element by element (numpy has none)."""
    return np.vectorize(math.erf, otypes=[np.float64])(values)


#: The replacements, as the reference evaluator takes them (`new_ops`).
RUNTIME_KERNELS: tuple[type, ...] = (Gelu, LogSoftmax)
