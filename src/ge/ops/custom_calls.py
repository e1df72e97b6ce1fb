"""Calling a custom operator's own functions (its registered inference function and kernel)
and judging what they give back.

An exception in either, or a result that does not fit the node (another number of
outputs, a kernel's value of another dtype or static shape than the output's desc), is
the operator author's bug: `InferenceFunctionError` / `KernelError` say which operator,
which function (its `def` line and where it was registered), the line that raised and what
the function was given, so the author is not left with "list index out of range" or a
numeric difference at --verify.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ge._user_code import innermost_user_location, is_internal_file, traceback_location
from ge.errors import InferenceFunctionError, KernelError, SourceLocation
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType, data_type_from_numpy
from ge.ops.registry import CustomOp, InferContext

__all__ = [
    "call_infer",
    "call_kernel",
    "function_location",
    "inference_function_text",
    "value_contradiction",
]

def _unwrapped(fn: object) -> Any:
    """The plain function behind `fn` (a bound method, a `functools.partial`, a decorated
    function, an object's `__call__`), whose code says where it is."""
    for _ in range(8):
        inner = (getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
                 or getattr(fn, "__func__", None))
        if inner is None:
            break
        fn = inner
    if getattr(fn, "__code__", None) is None and callable(fn):
        call = type(fn).__call__
        fn = getattr(call, "__func__", call)
    return fn


def function_location(fn: object) -> SourceLocation | None:
    """The file and `def` line of a user's function (None for a builtin or ge's own)."""
    code = getattr(_unwrapped(fn), "__code__", None)
    if code is None or is_internal_file(code.co_filename):
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno)


def _function_text(fn: object) -> str:
    """`fn` as a message names it: its qualified name and `def` line."""
    plain = _unwrapped(fn)
    name = getattr(plain, "__qualname__", None) or repr(fn)
    where = function_location(fn)
    return f"{name} ({where})" if where is not None else name


def inference_function_text(custom: CustomOp) -> str:
    """"the registered inference function infer_x (p.py:12) of com.example::X (registered at
    p.py:30)": what gave a node's descs, for a message blaming them."""
    spec = custom.spec
    registered = f", registered at {custom.where}" if custom.where else ""
    return (f"the registered inference function {_function_text(custom.infer)} of "
            f"{spec.domain}::{spec.op_type}{registered}")


def raised_at(err: BaseException, fn: object) -> SourceLocation | None:
    """The user's line `err` was raised at inside `fn`: the innermost frame in `fn`'s file,
    else the innermost frame of the user's code (neither ge's, nor the standard library's
    nor an installed package's); None when the call itself failed (no frame inside)."""
    where = function_location(fn)
    return ((traceback_location(err.__traceback__, [where.file], only_within=True)
             if where is not None else None)
            or innermost_user_location(err.__traceback__))


def _called_inside(err: BaseException) -> bool:
    """Whether `err` came from inside the function called (its traceback goes beyond the
    caller's frame), not from calling it (a TypeError of arguments it does not take)."""
    tb = err.__traceback__
    return tb is not None and tb.tb_next is not None


def _raised_text(err: BaseException, fn: object) -> str:
    """"ValueError: boom (raised at p.py:48)", one line."""
    said = " ".join(str(err).split())
    text = f"{type(err).__name__}: {said}" if said else type(err).__name__
    at = raised_at(err, fn)
    return f"{text} (raised at {at})" if at is not None else text


def descs_text(descs: Sequence[TensorDesc | None]) -> str:
    """Input descs as messages list them: their reprs, None for an absent input."""
    return ", ".join("None" if d is None else repr(d) for d in descs)


def call_infer(custom: CustomOp, ctx: InferContext, label: str, node_name: str
               ) -> list[TensorDesc]:
    """`custom.infer(ctx)` for the node `label` names, checked: one `TensorDesc` per output.
    `InferenceFunctionError` (at the user's line) when it raises or returns anything else."""
    given = f"given input descs ({descs_text(ctx.input_descs)})"
    try:
        result = custom.infer(ctx)
        found = list(result) if not isinstance(result, TensorDesc) else None
    except Exception as err:
        raise InferenceFunctionError(
            f"{label}: {inference_function_text(custom)} failed with "
            f"{_raised_text(err, custom.infer)}, {given}",
            location=raised_at(err, custom.infer) or function_location(custom.infer),
            nodes=[node_name]) from err
    if found is None or len(found) != ctx.num_outputs or not all(
            isinstance(d, TensorDesc) for d in found):
        got = repr(result) if found is None else (
            f"{len(found)} value(s): {', '.join(repr(d) for d in found[:4])}"
            f"{' ...' if len(found) > 4 else ''}" if found else "an empty sequence")
        raise InferenceFunctionError(
            f"{label}: {inference_function_text(custom)} must return one TensorDesc per "
            f"output ({ctx.num_outputs}), a list; it returned {got}, {given}",
            location=function_location(custom.infer), nodes=[node_name])
    return found


def value_contradiction(value: Any, desc: TensorDesc | None) -> str | None:
    """Why an array computed for an output cannot be the value its `desc` describes (another
    element type, rank or static dim), or None when it fits (or nothing is known)."""
    if desc is None:
        return None
    array = np.asarray(value)
    if desc.data_type != DataType.DT_UNDEFINED:
        try:
            dtype = data_type_from_numpy(array.dtype)
        except Exception:  # (an object array ...: no ONNX type at all)
            dtype = DataType.DT_UNDEFINED
        if dtype != desc.data_type:
            return f"dtype {array.dtype}"
    shape = desc.get_shape()
    if shape.is_unknown_rank():
        return None
    dims = list(shape)
    if len(dims) != array.ndim or any(isinstance(d, int) and d >= 0 and d != n
                                      for d, n in zip(dims, array.shape)):
        return f"shape {list(array.shape)}"
    return None


def call_kernel(custom: CustomOp, inputs: Sequence[Any], attrs: Mapping[str, Any],
                label: str, expected: Sequence[TensorDesc | None], *,
                node_name: str = "", error: Callable[..., Exception] = KernelError
                ) -> list[Any]:
    """`custom.kernel(*inputs, **attrs)` for the node `label` names, its values checked
    against the output descs `expected` (None where one is unknown): `KernelError` (or
    `error(message, location=..., nodes=...)`) when it raises, gives fewer values than
    outputs, or a value of another dtype or static shape."""
    kernel = custom.kernel
    assert kernel is not None
    spec = custom.spec
    registered = f", registered at {custom.where}" if custom.where else ""
    what = (f"{label}: the kernel {_function_text(kernel)} of {spec.domain}::{spec.op_type}"
            f"{registered}")
    nodes = [node_name] if node_name else []
    try:
        result = kernel(*inputs, **attrs)
    except Exception as err:
        note = ""
        if isinstance(err, TypeError) and not _called_inside(err):
            names = ", ".join(attrs) or "none"
            note = (f"; ge calls it as kernel(*inputs, **attributes): every attribute of the "
                    f"node (defaults filled in) is passed as a keyword argument ({names})")
        raise error(f"{what} failed with {_raised_text(err, kernel)}{note}",
                    location=raised_at(err, kernel) or function_location(kernel),
                    nodes=nodes) from err
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(results) < len(expected):
        raise error(f"{what} returned {len(results)} value(s) for the node's "
                    f"{len(expected)} output(s)", location=function_location(kernel),
                    nodes=nodes)
    for i, (value, desc) in enumerate(zip(results, expected)):
        wrong = value_contradiction(value, desc)
        if wrong is not None:
            array = np.asarray(value)
            raise error(f"{what} returned {wrong} for output {i} "
                        f"(an array of {array.dtype}{list(array.shape)}), where the node's "
                        "output desc (its inference's, or the type the model declares) is "
                        f"{desc!r}",
                        location=function_location(kernel), nodes=nodes)
    return results[:len(expected)]
