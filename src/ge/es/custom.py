"""ES functions of registered custom operators, resolved when first asked for.

`from ge.es.custom import AddCustom` works once `AddCustom` is registered with
`ge.ops.register_op` (in any one domain); `operator(op_type, domain)` names the domain
explicitly when several domains define the same op type, and also gives the operators
onnxruntime defines beyond ONNX (`operator("SkipLayerNormalization", "com.microsoft")`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ge.errors import OpNotFoundError
from ge.es.operators import make_operator
from ge.ops.ascend import ascend_name_error
from ge.ops.registry import get_custom_op, list_custom_ops
from ge.ops.runtime_ops import runtime_op_spec
from ge.ops.schemas import normalize_domain

__all__ = ["operator"]


def operator(op_type: str, domain: str) -> Callable[..., Any]:
    """The ES function of custom operator `domain::op_type`, registered or one onnxruntime
    defines (`operator("FusedMatMul", "com.microsoft")`); `OpNotFoundError` if unknown."""
    if get_custom_op(op_type, domain) is None and (
            runtime_op_spec(op_type, domain, 2**31 - 1) is None):
        raise OpNotFoundError(
            f"custom operator {domain}::{op_type} is not registered (and onnxruntime "
            "defines no such operator)")
    return make_operator(op_type, normalize_domain(domain), __name__)


def __getattr__(name: str) -> Any:
    return resolve(name, __name__)


def resolve(name: str, module: str) -> Any:
    """The ES function of the custom operator registered as `name` (in one domain), looked
    up as an attribute of `module` (`ge.es.custom` or `ge.es.all`). An Ascend operator's
    name (`BatchMatMulV2`) that no custom operator has is `OpNotFoundError` naming the ONNX
    function to call instead (`ge.ops.ascend`)."""
    if name.startswith("__"):
        raise AttributeError(name)
    domains = [op.spec.domain for op in list_custom_ops() if op.spec.op_type == name]
    if not domains:
        error = ascend_name_error(module, name)
        if error is not None:
            raise error
        raise AttributeError(
            f"module {module!r} has no attribute {name!r}: no custom operator {name} is "
            "registered (ge.ops.register_op)"
        )
    if len(domains) > 1:
        raise AttributeError(
            f"custom operator {name} is registered in several domains ({', '.join(domains)}); "
            f"use ge.es.custom.operator({name!r}, domain)"
        )
    return operator(name, domains[0])
