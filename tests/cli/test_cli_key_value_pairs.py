"""`--dims NAME=SIZE` and `--option KEY=VALUE` as the command line splits them: a dim's name
may hold `=` (ONNX allows any `dim_param`), so `--dims` splits at the last one; a NAME or
KEY given twice is a usage error (two sizes for one dim are a mistake, not an override),
refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from cli_helpers import listing, run_ge
from onnx import TensorProto, helper


def _relu(folder: Path, dim: str) -> Path:
    """A Relu of x [dim, 3], saved in `folder`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    path = folder / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_dims_split_at_the_last_equals_sign(tmp_path: Path) -> None:
    path = _relu(tmp_path, "a=b")
    code, stdout, err = run_ge("run", str(path), "--dims", "a=b=4", "--json")
    assert code == 0, err
    assert json.loads(stdout)["inputs"]["x"]["shape"] == [4, 3]
    out = tmp_path / "out.onnx"
    code, stdout, err = run_ge("compile", str(path), "-o", str(out), "--dims", "a=b=4")
    assert code == 0, err
    assert "verification ok" in stdout and out.exists()


def test_a_dim_given_twice_is_a_usage_error(tmp_path: Path) -> None:
    path = _relu(tmp_path, "B")
    before = listing(tmp_path)
    error = ("Error: Invalid value for --dims: 'B' given twice (B=3 and B=4): give each "
             "NAME once")
    for command in (["compile", str(path), "-o", str(tmp_path / "out.onnx")],
                    ["run", str(path), "--output", str(tmp_path / "out.npz")]):
        code, _, err = run_ge(*command, "--dims", "B=3", "--dims", "B=4")
        assert code == 2, err
        assert err.splitlines()[-1] == error
        code, _, err = run_ge(*command, "--dims", "B=3", "--dims", "B=3")
        assert code == 2 and "'B' given twice (B=3 and B=3)" in err, err
    assert listing(tmp_path) == before  # nothing written


def test_an_option_given_twice_is_a_usage_error(tmp_path: Path) -> None:
    path = _relu(tmp_path, "B")
    before = listing(tmp_path)
    pairs = ["--option", "ge.constant_folding.size_limit=10", "--option",
             "ge.constant_folding.size_limit=20"]
    error = ("Error: Invalid value for --option: 'ge.constant_folding.size_limit' given "
             "twice (ge.constant_folding.size_limit=10 and "
             "ge.constant_folding.size_limit=20): give each KEY once")
    for command in (["compile", str(path), "-o", str(tmp_path / "out.onnx")],
                    ["passes", "list"], ["passes", "explain", "NoOpElimination", str(path)]):
        code, _, err = run_ge(*command, *pairs)
        assert code == 2, err
        assert err.splitlines()[-1] == error
    assert listing(tmp_path) == before


def test_a_malformed_dim_names_its_form(tmp_path: Path) -> None:
    path = _relu(tmp_path, "B")
    for bad in ("B", "=4"):
        code, _, err = run_ge("run", str(path), "--dims", bad)
        assert code == 2
        assert err.splitlines()[-1] == (f"Error: Invalid value for --dims: {bad!r} is not "
                                        "NAME=SIZE")
