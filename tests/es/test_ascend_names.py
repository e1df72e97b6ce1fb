"""An Ascend operator's name looked up as an ES function (`es.BatchMatMulV2`, `from
ge.es.math import ConcatV2`) says which ONNX function to call (D1), however it is looked up,
and is not swallowed by the `except ImportError` GE's samples put around their imports."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx.defs
import pytest

import ge.es
import ge.es.all
import ge.es.custom
import ge.es.math
import ge.es.nn
import ge.es.onnx
import ge.passes.registry
from ge.errors import OpNotFoundError
from ge.ops import register_op, unregister_op
from ge.ops.ascend import ASCEND_OP_TYPES, ASCEND_OPS

NAMESPACES = ("ge.es", "ge.es.onnx", "ge.es.math", "ge.es.nn", "ge.es.all", "ge.es.custom")


@pytest.mark.parametrize("module", NAMESPACES)
def test_attribute_access_names_the_onnx_function(module: str) -> None:
    namespace = importlib.import_module(module)
    with pytest.raises(OpNotFoundError) as caught:
        namespace.BatchMatMulV2  # noqa: B018
    message = str(caught.value)
    assert caught.value.code == "GE1302"
    assert "GE's BatchMatMulV2(x1, x2, bias, offset_w, adj_x1=, adj_x2=) is ONNX's MatMul " \
           "here (D1): es.MatMul(A, B)" in message
    assert "no bias input" in message and "Porting from GE" in message


@pytest.mark.parametrize("module", ["ge.es.math", "ge.es.nn", "ge.es.all", "ge.es"])
def test_from_import_shows_the_hint_not_cannot_import_name(module: str) -> None:
    with pytest.raises(OpNotFoundError, match=r"GE's ConcatV2\(x, concat_dim, N=\) is "
                       r"ONNX's Concat here \(D1\): es\.Concat\(x, axis=\)"):
        exec(f"from {module} import ConcatV2", {})


def test_a_ge_style_guarded_import_tells_why_instead_of_setting_none() -> None:
    """GE's samples write `try: from ge.es.math import X except ImportError: X = None` and
    later fail with "source the CANN environment"; the hint must escape the `except`."""
    code = textwrap.dedent("""
        try:
            from ge.es.math import ConcatV2, Relu
        except ImportError:
            ConcatV2 = None
            Relu = None
    """)
    scope: dict[str, object] = {}
    with pytest.raises(OpNotFoundError, match="ONNX's Concat here") as caught:
        exec(code, scope)
    assert not isinstance(caught.value, ImportError | AttributeError)
    assert "ConcatV2" not in scope


def test_a_script_importing_as_a_plugin_does_shows_the_hint(tmp_path: Path) -> None:
    """`from m import X` would drop an AttributeError's text ("cannot import name") on
    every Python version; the error is none, so the hint reaches the traceback."""
    plugin = tmp_path / "p.py"
    plugin.write_text("try:\n    from ge.es.nn import Relu, Conv2D\nexcept ImportError:\n"
                      "    Conv2D = None\n")
    src = Path(ge.es.__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, str(plugin)], capture_output=True, text=True,
                            env={"PYTHONPATH": str(src)}, check=False)
    assert result.returncode == 1
    assert "cannot import name" not in result.stderr
    assert "GE's Conv2D(x, filter, bias, offset_w" in result.stderr
    assert "es.Conv(X, W, B, strides=, pads=, dilations=, group=)" in result.stderr


def test_other_missing_names_stay_attribute_errors() -> None:
    for namespace in (ge.es, ge.es.onnx, ge.es.math, ge.es.nn, ge.es.all, ge.es.custom):
        assert not hasattr(namespace, "NoSuchOperator")
        assert not hasattr(namespace, "__wrapped__")
    with pytest.raises(ImportError, match="cannot import name 'NoSuchOperator'"):
        exec("from ge.es.math import NoSuchOperator", {})
    assert ge.es.math.Relu is ge.es.onnx.Relu
    from ge.es import math  # a submodule through the package's __getattr__

    assert math is ge.es.math


def test_a_custom_operator_of_an_ascend_name_wins() -> None:
    register_op("TensorMove", domain="test.ascend", inputs=["x"], outputs=["y"],
                infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x)
    try:
        assert ge.es.all.TensorMove.__name__ == "TensorMove"
        assert ge.es.custom.TensorMove.__name__ == "TensorMove"
    finally:
        unregister_op("TensorMove", "test.ascend")
    with pytest.raises(OpNotFoundError, match="ONNX's Identity here"):
        ge.es.all.TensorMove  # noqa: B018


def test_one_map_of_ascend_names() -> None:
    assert ge.passes.registry.ASCEND_OP_TYPES is ASCEND_OP_TYPES
    for name, op in ASCEND_OPS.items():
        assert not onnx.defs.has(name), name       # an ONNX name is never shadowed
        assert onnx.defs.has(op.onnx), op.onnx
        assert ASCEND_OP_TYPES[name] == op.onnx
        if op.onnx_call:
            assert op.onnx_call.startswith(f"{op.onnx}(") and op.ge_call.startswith(f"{name}(")


def test_the_op_types_of_ges_samples_are_mapped() -> None:
    """The Ascend op types GE's samples (examples/fusion_pass) compare node types with, name
    in op_types or call as ES functions."""
    for name in ("Conv2D", "Conv2DV2", "ConcatV2", "BatchMatMulV2", "GEMM", "TensorMove"):
        assert name in ASCEND_OP_TYPES, name
