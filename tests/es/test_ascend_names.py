"""An Ascend operator's name looked up as an ES function (`es.BatchMatMulV2`, `from
ge.es.math import ConcatV2`) says which ONNX function to call (D1), however it is looked up,
and is not swallowed by the `except ImportError` GE's samples put around their imports."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
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
from ge.es import GraphBuilder
from ge.ops import register_op, unregister_op
from ge.ops.ascend import ASCEND_OP_TYPES, ASCEND_OPS
from ge.session import Session

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


ROOT = Path(__file__).resolve().parents[2]


def _porting_section() -> str:
    text = (ROOT / "docs" / "es.md").read_text(encoding="utf-8")
    return text[text.index("## Porting from GE"):text.index("## Limits")]


def _table_rows() -> list[tuple[str, str]]:
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", _porting_section(), re.M)
    assert len(rows) > 15
    return rows


def _call_parts(call: str) -> tuple[str, list[str], list[str]]:
    """`Gemm(A, B, C, alpha=, beta=)` -> ("Gemm", ["A", "B", "C"], ["alpha", "beta"])."""
    match = re.fullmatch(r"(\w+)\((.*)\)", call)
    assert match is not None, call
    args = [a.strip() for a in match[2].split(",") if a.strip()]
    return (match[1], [a for a in args if "=" not in a],
            [a.split("=")[0] for a in args if "=" in a])


def test_the_porting_table_is_the_map() -> None:
    documented = {}
    for ge_call, onnx_call in _table_rows():
        name = _call_parts(ge_call)[0]
        if name in ASCEND_OPS:
            documented[name] = (ge_call, onnx_call)
        else:  # a name GE and ONNX share: MatMul, Concat, Split, Transpose
            assert onnx.defs.has(name) and _call_parts(onnx_call)[0] == name, ge_call
    assert documented == {name: (op.ge_call, op.onnx_call)
                          for name, op in ASCEND_OPS.items() if op.ge_call}


@pytest.mark.parametrize("onnx_call", sorted({row[1] for row in _table_rows()}))
def test_the_porting_tables_onnx_calls_fit_ges_functions(onnx_call: str) -> None:
    """The inputs and keywords of each ONNX call are those of ge's function (made from the
    newest schema): no positional beyond its inputs, every keyword one of its attributes."""
    name, positional, keywords = _call_parts(onnx_call)
    schema = onnx.defs.get_schema(name)
    assert callable(getattr(ge.es.math, name))
    variadic = any(p.option == p.option.Variadic for p in schema.inputs)
    assert variadic or len(positional) <= len(schema.inputs), onnx_call
    assert set(keywords) <= set(schema.attributes) | {"num_outputs"}, onnx_call


def test_the_porting_example_runs() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", _porting_section(), re.S)
    scope: dict[str, object] = {"__name__": "__docs__"}
    exec(compile(code, "docs/es.md Porting from GE", "exec"), scope)
    outputs = {name: scope[name].nodes_of_type("NetOutput")[0]  # type: ignore[attr-defined]
               for name in ("grouped", "gemm")}
    assert list(outputs["grouped"].get_input_desc(0).shape) == [1, 4, 8, 8]
    assert [list(outputs["gemm"].get_input_desc(i).shape) for i in (0, 1)] == [[2, 5], [2, 5]]
    # the decomposition computes the grouped Conv it replaces
    b = GraphBuilder("grouped_conv")
    x, w, bias = b.create_inputs(3)
    x.set_shape([1, 4, 8, 8])
    w.set_shape([4, 2, 3, 3])
    bias.set_shape([4])
    whole = b.build_and_reset([ge.es.math.Conv(x, w, bias, pads=[1, 1, 1, 1], group=2)])
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(shape, dtype=np.float32)
              for shape in ([1, 4, 8, 8], [4, 2, 3, 3], [4])]
    session = Session()
    session.add_graph(1, scope["grouped"])  # type: ignore[arg-type]
    session.add_graph(2, whole)
    (got,), (want,) = session.run_graph(1, values), session.run_graph(2, values)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
