"""`pyatc`: atc's flags over `ge.compile`; errors one line with a code and nothing written."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import DISTILBERT, listing, run_ge, run_process
from onnx import TensorProto, helper, numpy_helper

from ge.compiler.report import NodeCounts
from ge.pyatc import main, parse_input_shape
from model_paths import shared_model
from node_counting import onnx_node_counts

pytestmark = pytest.mark.builtin_passes


@pytest.fixture
def dynamic_model(tmp_path: Path) -> Path:
    """x: float32[batch, 3] -> Relu -> Identity = y."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _dims(value: onnx.ValueInfoProto) -> list[object]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in value.type.tensor_type.shape.dim]


def test_compiles_and_writes_prefix_onnx(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    prefix = tmp_path / "compiled"
    assert main(args=["--model", str(DISTILBERT), "--framework", "5", "--output",
                      str(prefix)]) == 0
    out = tmp_path / "compiled.onnx"
    onnx.checker.check_model(onnx.load(out))
    assert "Identity" not in {n.op_type for n in onnx.load(out).graph.node}
    captured = capsys.readouterr()
    assert f"wrote {out}" in captured.out and captured.err == ""
    assert listing(tmp_path) == ["compiled.onnx"]


def test_framework_3_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(args=["--model", str(DISTILBERT), "--framework=3",
                      f"--output={tmp_path / 'p'}"])
    assert code == 1
    assert capsys.readouterr().err == (
        "pyatc: [GE1701] framework 3 is not supported: ge compiles ONNX models "
        "(--framework=5)\n")
    assert listing(tmp_path) == []


def test_input_shape_fixes_dynamic_dims(dynamic_model: Path, tmp_path: Path) -> None:
    assert main(args=[f"--model={dynamic_model}", "--framework=5", "--output",
                      str(tmp_path / "fixed"), "--input_shape", "x:4,3", "--log", "null"]) == 0
    compiled = onnx.load(tmp_path / "fixed.onnx")
    assert _dims(compiled.graph.input[0]) == [4, 3]
    assert _dims(compiled.graph.output[0]) == [4, 3]  # re-declared from the fixed input
    assert compiled.graph.output[0].name == "y"
    assert [n.op_type for n in compiled.graph.node] == ["Relu"]
    session = ort.InferenceSession(str(tmp_path / "fixed.onnx"),
                                   providers=["CPUExecutionProvider"])
    x = np.array([[-1, 2, -3]] * 4, dtype=np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0))


@pytest.mark.parametrize(("shape", "message"), [
    ("nope:1,3", "'nope' is not an input of the model (inputs: x)"),
    ("x:1,2,3", "has rank 2"),
    ("x:a,3", "dim 0 of input 'x' ('a,3') is 'a', not an integer >= -1 (-1 keeps a dim "
              "dynamic)"),
    ("x", "is not NAME:D1,D2"),
    # atc's ranges, an empty dim (was dropped), inputs not separated by ';', beyond int64
    # (was GE1305 blaming the model's inference): trial A
    ("x:1~8,3", "dim 0 of input 'x' ('1~8,3') is '1~8', a range (atc's n1~n2), which ge "
                "does not support: give -1 to keep the dim dynamic (as the model declares "
                "it), or a size to fix it"),
    ("x:4,,3", "dim 1 of input 'x' ('4,,3') is empty: give every dim, -1 to keep one "
               "dynamic"),
    ("x:4,3,", "dim 2 of input 'x' ('4,3,') is empty"),
    ("x:4,3 y:2", "'x:4,3 y' is not an input of the model (inputs: x); inputs are separated "
                  "by ';' (\"x:1,3;y:4\")"),
    ("x:99999999999999999999,3", "dim 0 of input 'x' ('99999999999999999999,3') is "
                                 "99999999999999999999, beyond the int64 range of ONNX's "
                                 "dims (at most 9223372036854775807)"),
    ("x:+4,3", "is '+4', not an integer >= -1"),
])
def test_bad_input_shapes(dynamic_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                          shape: str, message: str) -> None:
    before = listing(tmp_path)
    code = main(args=["--model", str(dynamic_model), "--output", str(tmp_path / "p"),
                      "--input_shape", shape])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("pyatc: [GE1701] --input_shape: ") and message in err, err
    assert err.count("\n") == 1
    assert listing(tmp_path) == before


def test_output_onto_the_model_is_refused(tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(DISTILBERT, model)
    before = model.read_bytes()
    assert main(args=["--model", str(model), "--output", str(tmp_path / "m")]) == 1
    assert capsys.readouterr().err.startswith("pyatc: [GE1104] cannot save to ")
    assert model.read_bytes() == before


def test_usage_errors_and_help(capsys: pytest.CaptureFixture) -> None:
    assert main(args=[]) == 2  # --model is required
    assert "--model" in capsys.readouterr().err
    assert main("/usr/bin/pyatc", ["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pyatc") and "--input_shape" in out and "--framework" in out
    # atc's `--mode=1` is a flag of its own, not an abbreviation of `--model`
    assert main(args=["--mode=1", "--framework=5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pyatc: [GE1701] --mode=1 is not supported: pyatc builds a model")
    assert main(args=["--mode=0", "--framework=5"]) == 2  # (atc's default: --model needed)
    assert "the following arguments are required: --model" in capsys.readouterr().err


def test_parse_input_shape() -> None:
    assert parse_input_shape("a:1,3,224,224; b:2 ;c:;") == {"a": [1, 3, 224, 224], "b": [2],
                                                            "c": []}
    assert parse_input_shape("in:0:1,-1") == {"in:0": [1, -1]}
    assert parse_input_shape("x: 4, 3, 16 ,16") == {"x": [4, 3, 16, 16]}


def test_module_and_console_script(tmp_path: Path) -> None:
    result = run_process("-m", "ge.pyatc", "--model", str(DISTILBERT), "--framework", "5",
                         "--output", str(tmp_path / "p"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p.onnx").is_file()
    result = run_process("-m", "ge.pyatc", "--model", str(DISTILBERT), "--framework", "3")
    assert result.returncode == 1
    assert result.stderr.startswith("pyatc: [GE1701] framework 3 is not supported")
    script = Path(sys.executable).with_name("pyatc")
    assert script.is_file(), "pip install -e . creates the pyatc console script"


def test_says_the_counts_ge_compile_says(tmp_path: Path) -> None:
    """pyatc said `(nodes 6 -> 5)` of control_flow, the main graph's nodes only, where `ge
    compile` also says the nodes of its If/Loop bodies and its constants: it says all three
    now, in `ge compile`'s words (`NodeCounts.change`), with or without --output. Before: the
    file as ONNX counts it; after: the file written."""
    source = shared_model("control_flow")
    before = NodeCounts(*onnx_node_counts(onnx.load(source)))
    assert before.subgraph_nodes and before.constants  # what the old line left out
    result = run_process("-m", "ge.pyatc", f"--model={source}", "--framework=5",
                         f"--output={tmp_path / 'cf'}")
    assert result.returncode == 0, result.stderr
    after = NodeCounts(*onnx_node_counts(onnx.load(tmp_path / "cf.onnx")))
    change = before.change(after)
    assert change == (
        f"nodes {before.nodes} → {after.nodes} ({after.nodes - before.nodes:+d}) and "
        f"{before.subgraph_nodes} → {after.subgraph_nodes} "
        f"({after.subgraph_nodes - before.subgraph_nodes:+d}) in subgraphs, "
        f"constants {before.constants} → {after.constants}")
    assert result.stdout == f"pyatc: run success: wrote {tmp_path / 'cf.onnx'}; {change}\n"
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(tmp_path / "ge.onnx"))
    assert code == 0, stderr
    assert f"\n{change}; " in stdout  # ge compile's summary line starts so

    result = run_process("-m", "ge.pyatc", f"--model={source}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"pyatc: run success: compiled {source}; {change}; no --output, "
                             "nothing written\n")

    # a stdout that cannot write `→` gets `->`, not an error after the model was written
    result = run_process("-m", "ge.pyatc", f"--model={source}", f"--output={tmp_path / 'a'}",
                         env_vars={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"pyatc: run success: wrote {tmp_path / 'a.onnx'}; "
                             f"{change.replace('→', '->')}\n")


def test_atc_flags_scripts_pass(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A trial's atc script: `--input_format` is accepted (an ONNX model keeps its layout);
    `--fusion_switch_file` turns passes off; flags asking for what ge cannot do (gears,
    precision modes) are GE1701 naming why, nothing written (they were argparse errors)."""
    bn_model = Path(__file__).resolve().parents[1] / "models" / "mobilenet_like_bn.onnx"
    switch = tmp_path / "fusion_switch.cfg"
    switch.write_text('{"Switch": {"GraphFusion": {"ConvBatchNormFusion": "off"}}}')
    prefix = tmp_path / "out"
    assert main(args=["--model", str(bn_model), "--framework=5", f"--output={prefix}",
                      "--input_format=NCHW", f"--fusion_switch_file={switch}"]) == 0
    ops = [n.op_type for n in onnx.load(f"{prefix}.onnx").graph.node]
    assert ops.count("BatchNormalization") == 9
    capsys.readouterr()
    for flag in ("--dynamic_batch_size=1,2,4", "--precision_mode=force_fp16"):
        target = tmp_path / "refused"
        assert main(args=["--model", str(bn_model), f"--output={target}", flag]) == 1
        err = capsys.readouterr().err.strip()
        given = flag if flag.startswith("--precision") else flag.split("=")[0]  # (a value
        assert err.startswith(f"pyatc: [GE1701] {given} is not supported: ")  # of some is
        assert "\n" not in err  # accepted: the one refused is named)
        assert not Path(f"{target}.onnx").exists()


@pytest.mark.parametrize(("shape", "s2", "x"), [
    (None, ["N", 4], ["N", 4]), ("x:-1,4", ["N", 4], ["N", 4]), ("x:3,4", [3, 4], [3, 4])])
def test_an_input_that_is_also_an_output_keeps_the_dims_flowing(
        tmp_path: Path, shape: str | None, s2: list[object], x: list[object]) -> None:
    """s2 = Identity(Add(x, W)), outputs [s2, x]: inference handed onnx the output x
    without its dims, and onnx then gave every value computed from the input x an unnamed
    dim (`Add` [unk__0, 4] where onnx alone says [N, 4]); pyatc re-declared s2 so, for
    `-1` (which keeps a dim) too, and left it [N, 4] once x was fixed at [3, 4] (trial M)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "W"], ["s"]), helper.make_node("Identity", ["s"], ["s2"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("s2", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(np.ones(4, np.float32), "W")])
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    import ge

    (add,) = ge.compile(model).graph.nodes_of_type("Add")
    assert list(add.get_output_desc(0).get_shape()) == ["N", 4]
    args = [f"--model={model}", "--framework=5", f"--output={tmp_path / 'o'}", "--log=null"]
    assert main(args=args + ([f"--input_shape={shape}"] if shape else [])) == 0
    written = onnx.load(tmp_path / "o.onnx")
    assert [(o.name, _dims(o)) for o in written.graph.output] == [("s2", s2), ("x", x)]


@pytest.mark.parametrize("layout", ["NHWC", "nchw", "NC1HWC0"])
def test_input_format_outside_atcs_onnx_set_is_refused(
        layout: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """atc refuses --input_format other than NCHW, ND, NCDHW for an ONNX model (E10001);
    pyatc accepted any value in silence, so a typo in a build script went unnoticed."""
    code = main(args=["--model", str(DISTILBERT), "--framework=5",
                      f"--input_format={layout}", f"--output={tmp_path / 'p'}"])
    assert code == 1
    assert capsys.readouterr().err == (
        f"pyatc: [GE1701] invalid value '{layout}' for --input_format: the value must be "
        "NCHW, ND or NCDHW in an ONNX model\n")
    assert listing(tmp_path) == []


@pytest.mark.parametrize("layout", ["NCHW", "ND", "NCDHW", ""])
def test_input_format_of_atcs_onnx_set_is_accepted(layout: str, tmp_path: Path) -> None:
    assert main(args=["--model", str(DISTILBERT), "--framework=5", "--log=null",
                      f"--input_format={layout}", "--soc_version=Ascend310P3",
                      f"--output={tmp_path / 'p'}"]) == 0
    assert listing(tmp_path) == ["p.onnx"]
