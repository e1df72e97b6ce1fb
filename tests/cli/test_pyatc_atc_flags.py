"""atc's flags in pyatc: those ge knows of but cannot honour are one GE1701 line saying what
ge does instead (they were argparse's "unrecognized arguments"), values asking for what ge
does anyway are accepted, and the command line is read as atc reads it (abbreviations,
`-model=`, `--soc-version`). And `-1` keeps a symbolic dim's name through to the outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import listing
from onnx import TensorProto, helper, numpy_helper

from ge.pyatc import main
from ge.pyatc.atc_flags import atc_argv

pytestmark = pytest.mark.builtin_passes


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """x: float32[N, 3] -> Relu = y, in a folder of its own."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize(("flag", "message"), [
    ("--mode=1", "--mode=1 is not supported: pyatc builds a model (atc's --mode=0); to see "
                 "one, `ge dump MODEL` prints it as text and `ge inspect MODEL --json` its "
                 "inputs, outputs and operators as JSON (atc's --mode=1, 6); `ge inspect "
                 "MODEL` checks one without compiling it (atc's --mode=3)"),
    ("--mode=3", "--mode=3 is not supported: pyatc builds a model"),
    ("--input_shape_range=x:[1~8,3]", "--input_shape_range is not supported: ge has no "
                                      "shape ranges, a dynamic dim stays dynamic; give "
                                      "--input_shape with -1 to keep a dim dynamic"),
    ("--precision_mode=allow_fp32_to_fp16",
     "--precision_mode=allow_fp32_to_fp16 is not supported: ge keeps the model's element "
     "types, which must_keep_origin_dtype asks for (accepted); the other modes (force_fp16, "
     "allow_fp32_to_fp16, allow_mix_precision, force_fp32...) would change them"),
    ("--precision_mode_v2=fp16", "--precision_mode_v2=fp16 is not supported: ge keeps the "
                                 "model's element types, which origin asks for (accepted)"),
    ("--keep_dtype=keep.cfg", "--keep_dtype is not supported: ge keeps the model's element "
                              "types everywhere"),
    ("--output_type=FP16", "--output_type is not supported: ge keeps the model's element "
                           "types, its outputs' too"),
    ("--op_select_implmode=high_precision", "--op_select_implmode is not supported: ge "
                                            "selects no operator implementations"),
    ("--enable_small_channel=1", "--enable_small_channel is not supported: ge has no "
                                 "small-channel optimisation"),
    ("--is_input_adjust_hw_layout=true", "--is_input_adjust_hw_layout is not supported: ge "
                                         "keeps the inputs' layout"),
    ("--dump_mode=1", "--dump_mode is not supported: ge writes no operator dump; `ge compile "
                      "MODEL -o OUT --dump DIR` writes the graph after each pass"),
    ("--check_report=c.json", "--check_report is not supported: ge writes no operator check "
                              "report"),
    ("--weight=w.caffemodel", "--weight is not supported: ge compiles ONNX models"),
    ("--optimization_switch=ConvBatchNormFusion:off", "--optimization_switch is not "
                                                      "supported: ge's passes are switched by "
                                                      "--fusion_switch_file"),
    ("--input_hint_shape=0:[4,3]", "--input_hint_shape is not supported: ge takes no shape "
                                   "hints"),
    ("--dynamic_batch_size=1,2,4", "--dynamic_batch_size is not supported: ge keeps dynamic "
                                   "dims dynamic, there are no gears"),
])
def test_an_atc_flag_ge_cannot_honour_is_one_coded_line(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, flag: str,
        message: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert main(args=[f"--model={model}", f"--output={out / 'm'}", flag]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pyatc: [GE1701] {message}"), err
    assert err.count("\n") == 1
    assert listing(out) == [] and listing(model.parent) == ["m.onnx"]


def test_atc_mode_1_with_its_own_flags_says_what_to_use(capsys: pytest.CaptureFixture) -> None:
    """atc's `--mode=1 --om=M --json=J` needs no --model: said as --mode, not as a missing
    --model (nor as unrecognized --om, --json)."""
    assert main(args=["--mode=1", "--om=m.onnx", "--json=m.json"]) == 1
    assert capsys.readouterr().err.startswith("pyatc: [GE1701] --mode=1 is not supported: ")


@pytest.mark.parametrize("flag", ["--mode=0", "--mode=00", "--mode=+0", "--mode= 0",
                                  "--precision_mode=must_keep_origin_dtype",
                                  "--precision_mode_v2=origin"])
def test_values_asking_for_what_ge_does_are_accepted(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, flag: str) -> None:
    assert main(args=[f"--model={model}", f"--output={tmp_path / 'o'}", flag]) == 0
    assert (tmp_path / "o.onnx").is_file()
    assert capsys.readouterr().err == ""


def test_the_command_line_is_read_as_atc_reads_it(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """atc's getopt_long takes an unambiguous abbreviation, one dash for two and dashes for
    underscores in a name: `-model=` was "the following arguments are required: --model"."""
    assert atc_argv(["-model=m.onnx", "--soc-version=A", "--input_shape", "-1,3", "-h"]) == [
        "--model=m.onnx", "--soc_version=A", "--input_shape", "-1,3", "-h"]
    for args in ([f"-model={model}", f"-output={tmp_path / 'a'}"],
                 [f"--model={model}", f"--output={tmp_path / 'b'}", "--soc=Ascend310"],
                 [f"--model={model}", f"--output={tmp_path / 'c'}", "--soc-version=Ascend310",
                  "--input-shape=x:2,3"]):
        assert main(args=args) == 0, capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == ["a.onnx", "b.onnx", "c.onnx"]
    assert [d.dim_value for d in onnx.load(tmp_path / "c.onnx").graph.input[0].type
            .tensor_type.shape.dim] == [2, 3]
    capsys.readouterr()
    # ambiguous (--output, --output_type, --out_nodes): bad usage, nothing written
    assert main(args=[f"--model={model}", f"--out={tmp_path / 'd'}"]) == 2
    assert "ambiguous option: --out=" in capsys.readouterr().err
    assert not (tmp_path / "d.onnx").exists()
    # trial D: the message quoted the argument as read ("--Model=x"), not as typed
    assert main(args=[f"--model={model}", f"--output={tmp_path / 'e'}", "-Model=x",
                      "--no-such-flag"]) == 2
    assert capsys.readouterr().err.endswith(
        "pyatc: error: unrecognized arguments: -Model=x --no-such-flag\n")
    assert not (tmp_path / "e.onnx").exists()
    # atc's int reads 00 as 0 (accepted above), 01 as 1: refused, as typed
    assert main(args=[f"--model={model}", f"--output={tmp_path / 'f'}", "--mode=01"]) == 1
    assert capsys.readouterr().err.startswith("pyatc: [GE1701] --mode=01 is not supported: ")
    assert not (tmp_path / "f.onnx").exists()


def test_minus_one_keeps_a_symbolic_dims_name_in_the_outputs(tmp_path: Path) -> None:
    """x [N, 3, H, W] -> Conv (same padding) -> feat [N, 8, H, W]; `x:4,3,-1,-1` wrote feat
    as [4, 8, unk__0, unk__1], onnx's names for the dims it cannot compute (trial A)."""
    weight = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["feat"], pads=[1, 1, 1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("feat", TensorProto.FLOAT, ["N", 8, "H", "W"])],
        [weight])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(args=[f"--model={path}", f"--output={tmp_path / 'o'}",
                      "--input_shape=x:4,3,-1,-1", "--log=null"]) == 0
    written = onnx.load(tmp_path / "o.onnx").graph

    def dims(value: onnx.ValueInfoProto) -> list[object]:
        return [d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in value.type.tensor_type.shape.dim]

    assert dims(written.input[0]) == [4, 3, "H", "W"]
    assert dims(written.output[0]) == [4, 8, "H", "W"]
