"""`ge compile` and `ge dump`: a compiled file on success, one clean error line and no file
on failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import run_ge, run_process
from click.testing import CliRunner

import ge
from ge.cli import cli
from sample_models import double_negation_model, readme_pass_source

RAISING = """
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="Broken", stage=PassStage.BEFORE_INFER_SHAPE)
class Broken(FusionBasePass):
    def run(self, graph, context):
        raise ValueError("the pattern is wrong")
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """x -> Neg -> Neg -> Relu = y."""
    path = tmp_path / "model.onnx"
    onnx.save(double_negation_model(), path)
    return path


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_compile_writes_the_optimised_model(model: Path, write) -> None:
    plugin = write("passes/fold.py", readme_pass_source())
    out = model.parent / "out.onnx"
    code, stdout, _ = _run("compile", str(model), "-o", str(out), "--pass-path", str(plugin),
                           "--json")
    assert code == 0
    report = json.loads(stdout)
    # operators only (Data and NetOutput are not counted); in-process, no built-in passes run
    assert (report["nodes_before"], report["nodes_after"]) == (3, 1)
    assert (report["ops_before"], report["ops_after"]) == ({"Neg": 2, "Relu": 1}, {"Relu": 1})
    assert [(p["name"], p["changed"]) for p in report["passes"]] == [("FoldDoubleNeg", 1)]
    assert report["output"] == str(out) and report["verification"] is None
    compiled = onnx.load(out)
    assert [n.op_type for n in compiled.graph.node] == ["Relu"]
    x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
    session = ort.InferenceSession(out.read_bytes(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(["y"], {"x": x})[0], np.maximum(x, 0))


def test_a_long_origin_is_cut_at_its_start_never_folded(model: Path, write) -> None:
    """In a narrow terminal the pass table folded `file:line`, and the line number's last
    digit, on a line of its own, read as another line (trial U)."""
    name = "a_plugin_file_with_a_rather_long_name.py"
    plugin = write(f"passes/{name}", "\n" * 9 + readme_pass_source())  # a 2-digit line
    line = 9 + next(i for i, text in enumerate(readme_pass_source().splitlines(), 1)
                    if text.startswith("class "))
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(model.parent / "o.onnx"),
                                      "--pass-path", str(plugin)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert f"…_rather_long_name.py:{line} │" in result.stdout, result.stdout


@pytest.mark.parametrize(("columns", "left_out"), [
    ("100", []), ("80", ["Kind", "Graph"]), ("50", ["Stage", "Kind", "Origin", "Graph", "ms"])])
def test_a_narrow_terminal_gets_fewer_columns_not_folded_names(
        model: Path, write, columns: str, left_out: list[str]) -> None:
    """Trial V: at 80 columns the nine columns folded every pass name over three lines, at
    60 Stage/Pass/Kind/Graph/Outcome were two characters wide. The table leaves columns out
    (kind, graph and time first) until the rest fits, and its caption says which."""
    plugin = write("passes/p.py", readme_pass_source())
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(model.parent / "o.onnx"),
                                      "--pass-path", str(plugin)], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("┃"))
    names = [n.strip() for n in header.strip("┃ ").split("┃")]
    every = ["Stage", "Pass", "Kind", "Origin", "Graph", "Outcome", "M/R/F", "Nodes", "ms"]
    assert names == [n for n in every if n not in left_out]
    # the table fits; text lines are not wrapped written to a pipe (trial AG: grep)
    assert all(len(line) <= int(columns) for line in result.stdout.splitlines()
               if line[:1] in "┏┃┡│└")
    pass_row = next(line for line in result.stdout.splitlines() if "FoldDoubleNeg" in line)
    assert "success" in pass_row  # (the pass's name and outcome on one line)
    caption = " ".join(result.stdout.split())
    if left_out:
        assert (f"columns {', '.join(left_out)} left out for the terminal's width "
                f"({columns}; a wider terminal, or --json, has them)") in caption
    else:
        assert "left out for the terminal" not in caption


def test_a_failing_pass_is_one_error_line_and_writes_nothing(model: Path, write) -> None:
    plugin = write("passes/broken.py", RAISING)
    out = model.parent / "out.onnx"
    before = sorted(p.name for p in model.parent.iterdir())
    code, _, stderr = _run("compile", str(model), "-o", str(out), "--pass-path", str(plugin))
    assert code == 1
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith("ge: [E13028] Failed to run custom fusion pass Broken.")
    assert "the pattern is wrong" in stderr
    assert f"{plugin}:7" in stderr  # the raising line of the user's file
    assert sorted(p.name for p in model.parent.iterdir()) == before


def test_an_error_message_with_escape_sequences_is_printed_escaped(model: Path,
                                                                    write) -> None:
    """Trial NN: a pass's set_error_message holding an escape sequence (a terminal title)
    was printed raw in the E13028 line; every character that is not printable is escaped."""
    plugin = write("passes/loud.py", RAISING.replace(
        'raise ValueError("the pattern is wrong")',
        'context.set_error_message("boom \\x1b]0;title\\x07 end")\n        return False'))
    code, _, stderr = _run("compile", str(model), "-o", str(model.parent / "out.onnx"),
                           "--pass-path", str(plugin))
    assert code == 1 and stderr.startswith("ge: [E13028] ")
    assert "boom \\x1b]0;title\\x07 end" in stderr and "\x1b" not in stderr
    assert stderr.rstrip("\n").isprintable()


def test_an_unknown_decorator_keyword_is_one_e13030_line_and_writes_nothing(
    model: Path, write
) -> None:
    """`@register_fusion_pass(..., priority=5)` in a plugin: E13030 naming the keyword, the
    ones it takes, the pass and the decorator's line; nothing written (trial KK)."""
    plugin = write("passes/ordered.py", RAISING.replace(
        "stage=PassStage.BEFORE_INFER_SHAPE)", "stage=PassStage.BEFORE_INFER_SHAPE, priority=5)"))
    out = model.parent / "out.onnx"
    before = sorted(p.name for p in model.parent.iterdir())
    code, _, stderr = _run("compile", str(model), "-o", str(out), "--pass-path", str(plugin))
    assert code == 1
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr == (
        "ge: [E13030] register_fusion_pass got unknown keyword argument(s) 'priority'; it "
        'takes name, stage, kind: @register_fusion_pass(name="MyPass", '
        "stage=PassStage.AFTER_INFER_SHAPE) above the class; passes of one stage run in "
        f"lexicographic order of their names: name them to order them (pass Broken, at "
        f"{plugin}:4)\n")
    assert sorted(p.name for p in model.parent.iterdir()) == before


def test_debug_shows_the_traceback(model: Path, write) -> None:
    plugin = write("passes/broken.py", RAISING)
    result = CliRunner().invoke(cli, ["--debug", "compile", str(model), "-o",
                                      str(model.parent / "out.onnx"), "--pass-path",
                                      str(plugin)])
    assert result.exit_code == 1
    assert result.exc_info is not None and result.exc_info[0].__name__ == "PassRunError"
    # with --json too, stdout still has the error as JSON (it had nothing: audit)
    result = CliRunner().invoke(cli, ["--debug", "compile", str(model), "-o",
                                      str(model.parent / "out.onnx"), "--pass-path",
                                      str(plugin), "--json"])
    assert result.exit_code == 1 and result.exc_info is not None
    assert json.loads(result.stdout)["code"] == "E13028"


def test_a_missing_model_is_named_with_its_code(tmp_path: Path) -> None:
    code, _, stderr = _run("compile", str(tmp_path / "nope.onnx"), "-o",
                           str(tmp_path / "out.onnx"))
    assert code == 1
    assert stderr == f"ge: [GE1102] model file not found: {tmp_path / 'nope.onnx'}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_bad_option_is_a_usage_error(model: Path) -> None:
    code, _, stderr = _run("compile", str(model), "-o", str(model.parent / "o.onnx"),
                           "--option", "no-equals-sign")
    assert code == 2
    assert "is not KEY=VALUE" in stderr


def test_dump_prints_one_line_per_node(model: Path) -> None:
    code, stdout, _ = _run("dump", str(model))
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0] == "graph g (opset ai.onnx=17)"
    assert [line.split("# ")[-1] for line in lines[1:]] == ["x", "n1", "n2", "relu",
                                                            "NetOutput"]
    code, stdout, _ = _run("dump", str(model), "--format", "onnx")
    assert code == 0 and "Neg (x)" in stdout


def _listing(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of `folder` with its bytes and mode."""
    return {p.name: (p.read_bytes(), p.stat().st_mode) for p in sorted(folder.iterdir())
            if p.is_file()}


@pytest.mark.parametrize("spelling", ["same", "relative", "symlink"])
def test_compiling_onto_the_input_is_refused_before_compiling(
        model: Path, write, monkeypatch: pytest.MonkeyPatch, spelling: str) -> None:
    """`ge compile IN -o IN` (or another spelling of IN) is one GE1104 line, exit 1, and IN
    untouched; it is refused before the passes run (the raising plugin never gets to)."""
    plugin = write("passes/broken.py", RAISING)
    monkeypatch.chdir(model.parent)
    if spelling == "symlink":
        (model.parent / "link.onnx").symlink_to(model.name)
    output = {"same": str(model), "relative": f"passes/../{model.name}",
              "symlink": "link.onnx"}[spelling]
    before = _listing(model.parent)
    code, _, stderr = _run("compile", str(model), "-o", output, "--pass-path", str(plugin))
    assert code == 1
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith(f"ge: [GE1104] cannot save to {output}: it would replace "
                             f"{model.resolve()}, the model file this graph was loaded from")
    assert "(ge compile: --overwrite-input)" in stderr
    assert _listing(model.parent) == before


def test_overwrite_input_writes_the_compiled_model_over_it(model: Path, write) -> None:
    """`--overwrite-input` allows OUTPUT to be MODEL; the file keeps its mode."""
    plugin = write("passes/fold.py", readme_pass_source())
    model.chmod(0o640)
    code, _, stderr = _run("compile", str(model), "-o", str(model), "--overwrite-input",
                           "--pass-path", str(plugin))
    assert code == 0, stderr
    assert [n.op_type for n in onnx.load(model).graph.node] == ["Relu"]
    assert model.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in model.parent.iterdir() if p.is_file()) == ["model.onnx"]


def _with_external_data(folder: Path, location: str = "model.onnx_data",
                        name: str = "model.onnx") -> tuple[Path, Path]:
    """DistilBERT saved with its weights in `location` beside it (not ge's `.data`)."""
    from cli_helpers import DISTILBERT

    folder.mkdir(exist_ok=True)
    path = folder / name
    onnx.save(onnx.load(DISTILBERT), path, save_as_external_data=True,
              all_tensors_to_one_file=True, location=location, size_threshold=1024)
    return path, folder / location


def _outputs(path: Path) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: np.ones([d if isinstance(d, int) else 2 for d in i.shape], np.int64)
             for i in session.get_inputs()}
    return session.run(None, feeds)


@pytest.mark.parametrize("flags", [(), ("--external-data",), ("--opset", "20")],
                         ids=["default", "external-data", "opset"])
def test_overwrite_input_keeps_the_weights_in_the_data_file_the_model_had(
        tmp_path: Path, flags: tuple[str, ...]) -> None:
    """Trial JJ: `--overwrite-input` on a model with external data wrote the weights inline
    and left the data file behind, unread; the model keeps its weights in the file it had,
    written anew and renamed into place with the model."""
    path, data = _with_external_data(tmp_path / "m")
    expected = _outputs(path)
    code, stdout, stderr = _run("compile", str(path), "-o", str(path), "--overwrite-input",
                                *flags)
    assert code == 0, stderr
    assert "warning" not in stderr
    assert " ".join(stdout.split()).endswith(f"wrote {path} (its weights in {data})")
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx", "model.onnx_data"]
    written = onnx.load(path, load_external_data=False)
    locations = {e.value for t in written.graph.initializer for e in t.external_data
                 if e.key == "location"}
    assert locations == {"model.onnx_data"}
    for got, want in zip(_outputs(path), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_overwrite_input_never_writes_over_a_data_file_another_model_may_read(
        tmp_path: Path) -> None:
    """Trial LL: two models read `weights.bin`; compiling one over itself rewrote that file
    in place, and the other (same size) then computed other values in silence. A data
    file not named after the model stays as it was: the weights go to the model's own
    `.data` file, and a warning names the one left."""
    path, data = _with_external_data(tmp_path / "m", "weights.bin", "a.onnx")
    other, _ = _with_external_data(tmp_path / "m", "weights.bin", "b.onnx")
    weights, expected = data.read_bytes(), _outputs(other)
    code, stdout, stderr = _run("compile", str(path), "-o", str(path), "--overwrite-input")
    assert code == 0, stderr
    assert data.read_bytes() == weights
    for got, want in zip(_outputs(other), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert " ".join(stdout.split()).endswith(f"wrote {path}")  # (small: inline)
    assert stderr == (
        f"ge: warning: {path} replaced the model it was loaded from, whose weights were in "
        f"{data.resolve()}; the model written does not read it (its weights are inside it: "
        "under protobuf's 2 GB limit a model is written as one file; --external-data, "
        "external_data=True, writes them to a data file), so it is left in place: delete it "
        "if no other model reads it\n")
    for got, want in zip(_outputs(path), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _two_weights(path: Path, size: int) -> None:
    """y = (x + w0) * w1, w0 and w1 of `size` floats each, in data files `w0` and `w1`."""
    inits = [onnx.numpy_helper.from_array(np.full(size, i + 2.0, np.float32), f"w{i}")
             for i in range(2)]
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "w0"], ["t"]),
         onnx.helper.make_node("Mul", ["t", "w1"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [size])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [size])], inits)
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              path, save_as_external_data=True, all_tensors_to_one_file=False,
              size_threshold=0)


@pytest.mark.parametrize(("size", "flags", "why"), [
    (1024, (), "under protobuf's 2 GB limit a model is written as one file; "
               "--external-data, external_data=True, writes them to a data file"),
    (16, ("--external-data",), "no tensor is of 1 KiB or more")])
def test_the_warning_of_data_files_left_says_why_and_is_grammatical(
        tmp_path: Path, size: int, flags: tuple[str, ...], why: str) -> None:
    """Trial VV: weights in several data files, compiled over the model inline, were
    'left in place' as 'so them are', for a reason that was not true (tensors of 4 KiB
    were 'none over the external data threshold': the model was simply under 2 GB)."""
    path = tmp_path / "m.onnx"
    _two_weights(path, size)
    code, _, stderr = _run("compile", str(path), "-o", str(path), "--overwrite-input", *flags)
    assert code == 0, stderr
    files = ", ".join(str((tmp_path / name).resolve()) for name in ("w0", "w1"))
    assert stderr == (
        f"ge: warning: {path} replaced the model it was loaded from, whose weights were in "
        f"{files}; the model written does not read them (its weights are inside it: {why}), "
        "so they are left in place: delete them if no other model reads them\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "w0", "w1"]


def test_overwrite_input_without_external_data_says_the_data_file_is_left(
        tmp_path: Path) -> None:
    """`--no-external-data` puts the weights inside the model: the former data file, which
    another model may read, is left as it was, and a warning says so (it was left without
    a word)."""
    path, data = _with_external_data(tmp_path / "m")
    weights = data.read_bytes()
    code, stdout, stderr = _run("compile", str(path), "-o", str(path), "--overwrite-input",
                                "--no-external-data")
    assert code == 0, stderr
    assert stderr == (
        f"ge: warning: {path} replaced the model it was loaded from, whose weights were in "
        f"{data.resolve()}; the model written does not read it (its weights are inside it: "
        "--no-external-data, external_data=False), so it is left in place: delete it if no "
        "other model reads it\n")
    assert " ".join(stdout.split()).endswith(f"wrote {path}")
    assert data.read_bytes() == weights
    written = onnx.load(path, load_external_data=False)
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in written.graph.initializer)


def test_overwrite_input_that_fails_leaves_the_model_and_its_data_file(
        tmp_path: Path, write) -> None:
    path, _ = _with_external_data(tmp_path / "m")
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    plugin = write("passes/broken.py", RAISING)
    code, _, stderr = _run("compile", str(path), "-o", str(path), "--overwrite-input",
                           "--pass-path", str(plugin))
    assert code == 1 and stderr.startswith("ge: [E13028] ")
    assert {p.name: p.read_bytes() for p in path.parent.iterdir()} == before


def test_external_data_without_large_weights_writes_no_data_file(model: Path) -> None:
    """`--external-data` on a model without weights over the threshold: no empty .data."""
    out = model.parent / "out.onnx"
    code, stdout, stderr = _run("compile", str(model), "-o", str(out), "--external-data")
    assert code == 0, stderr
    assert sorted(p.name for p in model.parent.iterdir()) == ["model.onnx", "out.onnx"]
    assert " ".join(stdout.split()).endswith(f"wrote {out}")


def test_the_data_file_written_is_named(tmp_path: Path) -> None:
    """Whoever copies what ge reports must not lose the weights: the `wrote` line and the
    JSON name the data file beside the model."""
    from cli_helpers import DISTILBERT

    out = tmp_path / "out.onnx"
    code, stdout, stderr = _run("compile", str(DISTILBERT), "-o", str(out), "--external-data")
    assert code == 0, stderr
    assert " ".join(stdout.split()).endswith(f"wrote {out} (its weights in {out}.data)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.onnx", "out.onnx.data"]
    code, stdout, stderr = _run("compile", str(DISTILBERT), "-o", str(out), "--external-data",
                                "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert (data["output"], data["output_data"]) == (str(out), f"{out}.data")
    code, stdout, _ = _run("compile", str(DISTILBERT), "-o", str(tmp_path / "in.onnx"),
                           "--json")
    assert json.loads(stdout)["output_data"] is None


def test_a_pipe_as_output_and_report_is_written_through(model: Path, tmp_path: Path) -> None:
    """`-o /dev/null`-style targets: devices and pipes are written to, never replaced by a
    regular file."""
    import os
    import stat
    import threading

    out, report = tmp_path / "out_pipe", tmp_path / "report_pipe"
    received: dict[str, bytes] = {}

    def drain(path: Path) -> threading.Thread:
        def read() -> None:
            with open(path, "rb") as stream:
                received[path.name] = stream.read()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread

    os.mkfifo(out)
    os.mkfifo(report)
    readers = [drain(out), drain(report)]
    code, _, stderr = _run("compile", str(model), "-o", str(out), "--report", str(report))
    for reader in readers:
        reader.join(timeout=10)
    assert code == 0, stderr
    assert all(stat.S_ISFIFO(os.lstat(p).st_mode) for p in (out, report))
    onnx.checker.check_model(onnx.load_from_string(received["out_pipe"]))
    assert json.loads(received["report_pipe"])["output"] == str(out)


def test_a_pass_returning_not_changed_after_a_change_is_a_changed_row_and_a_warning(
        model: Path, tmp_path: Path) -> None:
    """`ge compile`: the row of a run() that removed a node and returned NOT_CHANGED says
    success and nodes 3→2, and a `ge: warning:` line names the pass and its def line; the
    model written is the changed one."""
    plugin = tmp_path / "liar.py"
    plugin.write_text("""\
from ge.passes import NOT_CHANGED, FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="Liar", stage=PassStage.BEFORE_INFER_SHAPE)
class Liar(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        graph.replace_all_uses(relu, 0, *relu.get_in_data_nodes_and_port_indexes(0))
        graph.remove_node(relu)
        return NOT_CHANGED
""")
    out = tmp_path / "out.onnx"
    code, stdout, stderr = _run("compile", str(model), "-o", str(out), "--pass-path",
                                str(plugin))
    assert code == 0, stderr
    (row,) = [line for line in stdout.splitlines() if " Liar " in line and line[0] == "│"]
    cells = [cell.strip() for cell in row.split("│")]
    assert cells[6:9] == ["success", "-", "3→2"]
    assert stderr.splitlines() == [
        f"ge: warning: pass Liar returned NOT_CHANGED from run() but changed graph "
        f"'g' (nodes 3 -> 2; removed 'relu'; changed 'NetOutput'): ge records the run as "
        f"changed; return True, None or SUCCESS when run() changes the graph, NOT_CHANGED "
        f"only when it leaves the graph as it was (at {plugin}:5)"]
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Neg", "Neg"]


def test_a_pass_printing_does_not_break_json(model: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "chatty.py"
    plugin.write_text("""
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="Chatty", stage=PassStage.BEFORE_INFER_SHAPE)
class Chatty(FusionBasePass):
    def run(self, graph, context):
        print("hello from the pass")
        return 1  # NOT_CHANGED
""")
    out = tmp_path / "out.onnx"
    code, stdout, stderr = _run("compile", str(model), "-o", str(out), "--pass-path",
                                str(plugin), "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["output"] == str(out)
    assert json.loads(stdout)["ge_version"] == ge.__version__  # what wrote the report
    assert "hello from the pass" in stderr



def test_what_a_pass_writes_to_descriptor_1_does_not_break_json(model: Path,
                                                              tmp_path: Path) -> None:
    """A subprocess (or native code) a plugin runs writes to the process's descriptor 1,
    past Python's sys.stdout: with --json it goes to stderr too, stdout is the JSON."""
    plugin = tmp_path / "tool.py"
    plugin.write_text("""
import subprocess
import sys

from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="RunsATool", stage=PassStage.BEFORE_INFER_SHAPE)
class RunsATool(FusionBasePass):
    def run(self, graph, context):
        subprocess.run([sys.executable, "-c", "print('output of a tool')"], check=True)
        return 1  # NOT_CHANGED
""")
    out = tmp_path / "out.onnx"
    result = run_process("-m", "ge", "compile", str(model), "-o", str(out), "--pass-path",
                         str(plugin), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["output"] == str(out)
    assert "output of a tool" in result.stderr

def test_each_pass_verification_names_the_pass_whose_model_cannot_run(tmp_path: Path) -> None:
    """A pass leaving a model onnxruntime cannot run: GE1601 names that pass and stage."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
        [numpy_helper.from_array(np.array([6], np.int64), "shape")])
    model = tmp_path / "reshape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    plugin = tmp_path / "break_reshape.py"
    plugin.write_text("""
import numpy as np
from ge.graph import Tensor
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="BreakReshape", stage=PassStage.AFTER_INFER_SHAPE)
class BreakReshape(FusionBasePass):
    def run(self, graph, context):
        shape = graph.find_node_by_name("shape")
        shape.set_attr("value", Tensor(np.array([5], np.int64)))
""")
    out = tmp_path / "out.onnx"
    code, stdout, stderr = _run("compile", str(model), "-o", str(out), "--pass-path",
                                str(plugin), "--verify=each-pass", "--json")
    assert code == 1
    error = json.loads(stdout)
    assert (error["code"], error["pass_name"], error["stage"]) == (
        "GE1601", "BreakReshape", "AfterInferShape")
    assert error["message"].startswith("after pass BreakReshape (graph g) the model cannot be "
                                       "run: onnxruntime failed to run graph")
    assert not out.exists() and stderr == ""


def test_a_checker_refusal_says_when_the_input_fails_the_check_too(tmp_path: Path) -> None:
    """A graph output typed without a shape field: onnxruntime runs it, onnx's full checker
    refuses it, before any pass as after. GE1003 says the input fails too; nothing written."""
    from onnx import TensorProto as TP
    from onnx import helper as h

    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", TP.FLOAT, None)])
    model = tmp_path / "noshape.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), model)
    out = tmp_path / "out.onnx"
    code, _, err = run_ge("compile", str(model), "-o", str(out))
    assert code != 0
    assert err.startswith("ge: [GE1003] graph is invalid (1 problem(s)): graph g: onnx-checker: "
                          f"onnx.checker rejects the model, nothing was written to {out}")
    assert f"(the input model {model} fails this check too: it is not the compilation's " \
           "doing)" in err
    assert not out.exists()


@pytest.mark.parametrize("failing", ["report", "page"])
def test_a_report_or_page_that_cannot_be_written_leaves_the_previous_model(
        model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """The page and the report are written before the model is renamed into place: a full
    disk while writing them fails the command (exit 1) with the previous model untouched (it
    had been replaced before, and a Makefile took the failed target as up to date)."""
    import ge.cli.compile
    import ge.cli.html_page
    from ge.errors import GeError

    out = tmp_path / "out.onnx"
    out.write_bytes(b"the previous model")

    def full_disk(*args: object, **kwargs: object) -> None:
        raise GeError("cannot write: No space left on device")

    if failing == "report":
        monkeypatch.setattr(ge.cli.compile, "write_json_atomically", full_disk)
    else:
        monkeypatch.setattr(ge.cli.html_page, "write_page", full_disk)
    code, _, stderr = _run("compile", str(model), "-o", str(out), "--report",
                           str(tmp_path / "r.json"), "--html", str(tmp_path / "page.html"))
    assert code == 1 and "No space left on device" in stderr
    assert out.read_bytes() == b"the previous model"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("existing", [True, False], ids=["existing", "missing"])
def test_an_output_ending_with_a_separator_is_refused_before_any_work(
        model: Path, existing: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-o out/` names a folder: an existing one was refused ("it is a folder") but a
    missing one became a file named `out` (the separator dropped). Both are GE1104 now,
    before the model is read (a missing model is not what is reported), nothing written;
    `Graph.save` and `CompileResult.save` refuse it the same way."""
    import ge
    from ge.errors import ModelSaveError

    monkeypatch.chdir(model.parent)
    if existing:
        (model.parent / "out").mkdir()
    before = _listing(model.parent)
    message = ("cannot save to 'out/': it names a folder (it ends with a path separator); give "
               "a file name, such as out/model.onnx")
    for source in (model.name, "missing.onnx"):
        code, _, stderr = _run("compile", source, "-o", "out/")
        assert (code, stderr) == (1, f"ge: [GE1104] {message}\n")
        code, stdout, _ = _run("compile", source, "-o", "out/", "--json")
        assert code == 1 and json.loads(stdout)["message"] == message
        assert json.loads(stdout)["code"] == "GE1104"
    assert _listing(model.parent) == before

    result = ge.compile(model)
    for save in (result.save, result.graph.save):
        with pytest.raises(ModelSaveError) as caught:
            save("out/")
        assert (caught.value.code, caught.value.message) == ("GE1104", message)
    assert _listing(model.parent) == before


@pytest.mark.parametrize(("command", "flag", "metavar"), [
    ("compile", "--report", "FILE"), ("compile", "--html", "FILE"), ("run", "--output", "FILE.npz"),
    ("diff", "--html", "FILE")])
def test_a_file_option_ending_with_a_separator_is_bad_usage(
        model: Path, monkeypatch: pytest.MonkeyPatch, command: str, flag: str,
        metavar: str) -> None:
    """`--report out/` names a folder; as a Path it lost the separator and a file named `out`
    was written. A usage error (exit 2) now, before any work."""
    monkeypatch.chdir(model.parent)
    before = _listing(model.parent)
    args = {"compile": ["compile", model.name, "-o", "o.onnx"], "run": ["run", model.name],
            "diff": ["diff", model.name, model.name]}[command]
    result = CliRunner().invoke(cli, [*args, flag, "out/"])
    assert result.exit_code == 2
    assert (f"Invalid value for '{flag}': 'out/': it names a folder (it ends with a path "
            f"separator); give a file name, such as out/{metavar}") in result.stderr
    assert _listing(model.parent) == before


def test_an_empty_output_names_no_file(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-o ""` (an empty Makefile variable) was reported as "cannot save to .: it is a
    folder"; it names no file, and says so (GE1104); `--report ""` is bad usage."""
    import ge
    from ge.errors import ModelSaveError

    monkeypatch.chdir(model.parent)
    before = _listing(model.parent)
    message = ("cannot save to '': no file is named (the path is empty); give a file name, "
               "such as model.onnx")
    code, _, stderr = _run("compile", model.name, "-o", "")
    assert (code, stderr) == (1, f"ge: [GE1104] {message}\n")
    with pytest.raises(ModelSaveError) as caught:
        ge.compile(model).save("")
    assert caught.value.message == message
    result = CliRunner().invoke(cli, ["compile", model.name, "-o", "o.onnx", "--report", ""])
    assert result.exit_code == 2 and "'': no file is named (the path is empty)" in result.stderr
    assert _listing(model.parent) == before


def test_running_out_of_memory_is_one_line(model: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A model too large for the machine (MemoryError while loading or compiling, where ge has
    no more precise error) was a traceback; it is one line (GE1801), JSON with --json, and
    nothing is written."""
    import ge.graph

    def too_large(*args: object, **kwargs: object) -> None:
        raise MemoryError()

    monkeypatch.setattr(ge.graph, "load", too_large)
    out = tmp_path / "out.onnx"
    message = ("out of memory: the command needed more memory than this machine could give; "
               "nothing was written (ge --debug shows where)")
    code, stdout, stderr = _run("compile", str(model), "-o", str(out))
    assert (code, stdout, stderr) == (1, "", f"ge: [GE1801] {message}\n")
    code, stdout, _ = _run("compile", str(model), "-o", str(out), "--json")
    assert code == 1
    assert (json.loads(stdout)["code"], json.loads(stdout)["type"]) == ("GE1801",
                                                                        "OutOfMemoryError")
    assert not out.exists()


def test_inline_functions_flag(tmp_path: Path) -> None:
    """`--inline-functions` replaces each call of a model-local function by its body."""
    from onnx import TensorProto, helper

    body = [helper.make_node("Neg", ["X"], ["n"]), helper.make_node("Neg", ["n"], ["Y"])]
    twice = helper.make_function("local", "twice", ["X"], ["Y"], body,
                                 [helper.make_opsetid("", 17)])
    graph = helper.make_graph(
        [helper.make_node("twice", ["x"], ["y"], domain="local")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, functions=[twice], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]), source)
    out = tmp_path / "out.onnx"
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--inline-functions",
                                  "--json")
    assert code == 0, stderr
    saved = onnx.load(out)
    assert not saved.functions and [n.op_type for n in saved.graph.node] == ["Neg", "Neg"]
    # before: the model as given, the call (the inlining is part of the change)
    assert json.loads(stdout)["ops_before"] == {"local.twice": 1}
    assert json.loads(stdout)["ops_after"] == {"Neg": 2}
    assert json.loads(stdout)["hints"] == []  # nothing left to inline
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--inline-functions")
    assert code == 0, stderr
    assert "\nnodes 1 → 2 (+1), constants 0 → 0; " in stdout  # as docs/cli.md says
    # without the flag, a hint says what it would do
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out))
    assert code == 0, stderr
    text = ("1 call(s) of model-local function(s) local.twice compiled as calls, their "
            "bodies not optimised (--inline-functions inlines them)")
    assert f"hint: {text}" in stdout
    code, stdout, _ = run_ge("compile", str(source), "-o", str(out), "--json")
    assert json.loads(stdout)["hints"] == [
        {"functions": ["local.twice"], "count": 1, "text": text}]


REFUSED_CALL = """
from ge.passes import FusionBasePass, PassStage, SubgraphInput, register_fusion_pass

@register_fusion_pass(name="AsksTooMuch", stage=PassStage.BEFORE_INFER_SHAPE)
class AsksTooMuch(FusionBasePass):
    def run(self, graph, context):
        (relu,) = graph.nodes_of_type("Relu")
        SubgraphInput().add_input(relu, 7)  # returns FAILED and logs why, as GE does
        return True
"""


@pytest.mark.parametrize("as_json", [False, True])
def test_a_refused_pass_api_call_is_a_warning_line_not_a_bare_log_line(
        model: Path, write, as_json: bool) -> None:
    """Trial G: a status-returning call of the pass API (`SubgraphInput.add_input` of an
    input the node lacks) logged its reason to the `ge.passes` logger, which `ge` left
    without a handler: Python printed it bare on stderr, also under --json."""
    plugin = write("passes/asks.py", REFUSED_CALL)
    out = model.parent / "out.onnx"
    result = run_process("-m", "ge", "compile", str(model), "-o", str(out), "--no-builtin",
                         "--pass-path", str(plugin), *(["--json"] if as_json else []))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "has no input 7" in line]
    want = "node 'relu' has no input 7"
    if as_json:
        assert lines == []  # stderr stays clean: the warning is in the JSON
        (warning,) = [w for w in json.loads(result.stdout)["warnings"]
                      if want in w["message"]]
        assert warning["category"] == "PassDefinitionWarning"
    else:
        assert len(lines) == 1 and lines[0].startswith("ge: warning: ") and want in lines[0]


DOUBLE_RELU = """
import numpy as np

import ge.es.all as es
from ge.es.custom import operator
from ge.ops import register_op
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

register_op("DoubleRelu", domain="trial.ops", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]],
            kernel=lambda x: np.maximum(np.asarray(x), 0) * 2)


@register_fusion_pass(name="FuseDoubleRelu", stage=PassStage.AFTER_INFER_SHAPE)
class FuseDoubleRelu(PatternFusionPass):
    @pattern
    def relu_twice(self, inputs):
        return es.Relu(inputs[0]) * 2.0

    def replacement(self, inputs):
        return operator("DoubleRelu", "trial.ops")(inputs[0])
"""


def test_a_model_written_with_a_custom_operator_says_onnxruntime_will_not_load_it(
        tmp_path: Path) -> None:
    """Trial XX: `ge compile --verify` said "verification ok" (run with the plugin's kernel
    in onnx's reference evaluator) and onnxruntime then refused the file; the compile now
    says so (a call of a model-local function is not one: test_inline_functions_flag)."""
    from onnx import TensorProto, helper

    plugin = tmp_path / "double_relu.py"
    plugin.write_text(DOUBLE_RELU)
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [two])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    out = tmp_path / "out.onnx"
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--pass-path",
                                  str(plugin), "--verify")
    assert code == 0, stderr
    text = ("the model uses custom operator(s) trial.ops::DoubleRelu (1 node(s)), which "
            "onnxruntime loads only with an implementation of its own (a custom-op library); "
            "ge runs them with their registered kernels in onnx's reference evaluator (ge run "
            "--pass-path), as its verification did")
    assert f"hint: {text}" in " ".join(stdout.split())
    assert [n.op_type for n in onnx.load(out).graph.node] == ["DoubleRelu"]
    with pytest.raises(Exception, match="DoubleRelu"):  # what the hint warns of
        ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    code, stdout, _ = run_ge("compile", str(source), "-o", str(out), "--pass-path",
                             str(plugin), "--json")
    unverified = text.removesuffix(", as its verification did")  # (trial V: it said so)
    assert json.loads(stdout)["hints"][0] == {
        "operators": ["trial.ops::DoubleRelu"], "count": 1, "unregistered": [],
        "verified": False, "text": unverified}
    code, stdout, _ = run_ge("compile", str(source), "-o", str(out), "--json")  # no plugin
    assert code == 0 and json.loads(stdout)["hints"] == []
    # a model read with the operator, and nothing registering it: no kernel in ge either
    custom = tmp_path / "custom.onnx"
    assert run_ge("compile", str(source), "-o", str(custom), "--pass-path", str(plugin))[0] == 0
    code, stdout, _ = run_ge("compile", str(custom), "-o", str(tmp_path / "again.onnx"),
                             "--json")
    (hint,) = json.loads(stdout)["hints"]
    assert code == 0 and hint["unregistered"] == ["trial.ops::DoubleRelu"]
    assert hint["text"].endswith("(a custom-op library); nothing registers them in ge either "
                                 "(ge.ops.register_op)")


NONE_ANSWER = '''\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="Silent", stage=PassStage.AFTER_INFER_SHAPE)
class Silent(PatternFusionPass):
    @pattern
    def neg_neg(self, inputs):
        return es.Neg(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        match_result.get_matched_nodes()

    def replacement(self, inputs):
        return es.Identity(inputs[0])
'''


def test_the_json_report_says_where_a_warning_about_a_pass_is(tmp_path: Path) -> None:
    """Trial U: every warning of ge's had `"location": null` in the JSON report, though its
    message ended with `(at p.py:11)`: a tool reading the report had to parse the text. A
    warning about the user's code has its file:line; one about the model stays null."""
    plugin = tmp_path / "silent.py"
    plugin.write_text(NONE_ANSWER)
    model = tmp_path / "m.onnx"
    onnx.save(double_negation_model(), model)
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                                  "--pass-path", str(plugin), "--json")
    assert code == 0, stderr
    warned = [w for w in json.loads(stdout)["warnings"]
              if w["category"] == "PassDefinitionWarning"]
    line = 1 + NONE_ANSWER.splitlines().index("    def meet_requirements(self, match_result):")
    assert len(warned) == 1 and warned[0]["location"] == f"{plugin}:{line}"
    assert warned[0]["message"].endswith(f"(at {plugin}:{line})")
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                                  "--pass-path", str(plugin))
    assert stderr.count(f"{plugin}:{line}") == 1  # (the text line does not say it twice)


RAISES = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="Raises", stage=PassStage.AFTER_INFER_SHAPE)
class Raises(FusionBasePass):
    def run(self, graph, context):
        raise ValueError("no")
'''


def test_a_rolled_back_pass_warning_has_the_pass_line_as_location(tmp_path: Path) -> None:
    """Trial V: the warning of a pass rolled back under --on-pass-failure skip had
    `"location": null` in the JSON, its message ending `at raises.py:7`."""
    plugin = tmp_path / "raises.py"
    plugin.write_text(RAISES)
    model = tmp_path / "m.onnx"
    onnx.save(double_negation_model(), model)
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                                  "--pass-path", str(plugin), "--on-pass-failure", "skip",
                                  "--json")
    assert code == 0, stderr
    (warned,) = [w for w in json.loads(stdout)["warnings"] if "rolled back" in w["message"]]
    assert warned["location"] == f"{plugin}:7" and warned["message"].endswith(f"{plugin}:7)")


def test_a_plugin_refusing_every_match_without_a_reason_is_pointed_to_explain(
        tmp_path: Path) -> None:
    """Trial Y: a pass whose meet_requirements refused all its matches (M/R/F 12/0/0)
    without set_error_message got no line under the table, where one that matched
    nothing is pointed to ge passes explain."""
    plugin = tmp_path / "silent.py"
    plugin.write_text(NONE_ANSWER.replace("        match_result.get_matched_nodes()\n",
                                          "        return False\n"))
    model = tmp_path / "m.onnx"
    onnx.save(double_negation_model(), model)
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                                  "--pass-path", str(plugin), "-q")
    assert code == 0, stderr
    assert (f"Silent's meet_requirements refused 1 match(es), giving no reason: ge passes "
            f"explain Silent {model} --pass-path {plugin} shows each refusal and its inputs "
            "(context.set_error_message gives a reason here)") in " ".join(stdout.split())


def test_a_plugin_pass_changing_the_graph_unverified_gets_a_hint(model: Path, write) -> None:
    """Trial AD: three wrong plugin passes compiled with "success" and nothing suggested
    checking the numbers; with --verify the hint goes (the check ran)."""
    plugin = write("passes/fold.py", readme_pass_source())
    out = model.parent / "o.onnx"
    hint = ("hint: plugin pass(es) FoldDoubleNeg changed the graph, and nothing compared its "
            "outputs with the original's: --verify does (--verify each-pass names the first "
            "pass after which they differ)")
    code, stdout, stderr = _run("compile", str(model), "-o", str(out), "--pass-path",
                                str(plugin), "-q")
    assert code == 0, stderr
    assert hint in " ".join(stdout.split())
    code, stdout, _ = _run("compile", str(model), "-o", str(out), "--pass-path",
                           str(plugin), "--json")  # (trial AE: CI reads the JSON)
    assert {"passes": ["FoldDoubleNeg"], "text": hint.removeprefix("hint: ")} in json.loads(
        stdout)["hints"]
    code, stdout, stderr = _run("compile", str(model), "-o", str(out), "--pass-path",
                                str(plugin), "-q", "--verify")
    assert code == 0, stderr
    assert "hint: plugin pass" not in stdout
    code, stdout, _ = _run("compile", str(model), "-o", str(out), "-q")  # (no plugin)
    assert "hint: plugin pass" not in stdout


@pytest.mark.parametrize("columns", [None, "60"])
def test_text_lines_are_not_wrapped_written_to_a_pipe(model: Path, tmp_path: Path,
                                                      columns: str | None) -> None:
    """Trial AG: a CI log (stdout a pipe, 160 columns) had `wrote` and the path on one line,
    the file name cut over the next two: grep for the output path found nothing."""
    folder = tmp_path / ("deep_" * 40)
    folder.mkdir()
    out = folder / "compiled_model_of_a_long_name.onnx"
    env = {"COLUMNS": columns} if columns else {}
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out), "-q"], env=env)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"wrote {out}" in lines, lines
    assert any(line.startswith("nodes ") and line.endswith(" ms") for line in lines), lines


@pytest.mark.builtin_passes
def test_a_count_cut_short_by_a_narrow_terminal_says_so(tmp_path: Path) -> None:
    """Trial AG: at 20 columns ConstantFolding's `104→76` showed as `104→7`."""
    from model_paths import shared_model

    result = CliRunner().invoke(cli, ["compile", str(shared_model("vit_tiny")), "-o",
                                      str(tmp_path / "o.onnx")], env={"COLUMNS": "20"})
    assert result.exit_code == 0, result.output
    rows = [line.split("│") for line in result.stdout.splitlines() if line.startswith("│")]
    header = next(line for line in result.stdout.splitlines() if "Nodes" in line)
    assert header.split("┃")[-2].strip() == "Nodes"
    nodes = [row[-2].strip() for row in rows[:11]]
    assert "104→…" in nodes
    assert all(re.fullmatch(r"\d+(→\d+)?|\d+→…", cell) for cell in nodes), nodes


@pytest.mark.parametrize(("args", "code", "said"), [
    (("-o", "-"), 1, "ge: [GE1701] -o -: '-' is not standard output here"),
    (("-o", "out.onnx", "--report", "-"), 2, "Invalid value for '--report': '-' is not "
                                             "standard output here"),
    (("-o", "out.onnx", "--html", "-"), 2, "Invalid value for '--html': '-' is not "
                                           "standard output here"),
])
def test_a_dash_is_not_standard_output_and_nothing_is_written(
        model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        args: tuple[str, ...], code: int, said: str) -> None:
    """Trial AG: `-o -` wrote a file called "-" where many tools write to stdout."""
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = CliRunner().invoke(cli, ["compile", str(model), *args])
    assert result.exit_code == code
    assert said in result.stderr
    assert "ge writes its outputs to files only; give a file name" \
        in " ".join(result.stderr.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_run_output_dash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from model_paths import shared_model

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["run", str(shared_model("vit_tiny")), "--output", "-"])
    assert result.exit_code == 2
    assert "Invalid value for '--output': '-' is not standard output here" in result.stderr
    assert list(tmp_path.iterdir()) == []


def _random_model(folder: Path) -> Path:
    """`random_output_model()` saved: `--verify` warns that its y is not compared."""
    from sample_models import random_output_model

    path = folder / "rand.onnx"
    onnx.save(random_output_model(), path)
    return path


def test_fail_on_warning_fails_before_writing_anything(tmp_path: Path) -> None:
    """Trial AG: a pipeline failing the build on any problem had to parse the JSON's
    warnings; --fail-on-warning makes a warning GE1702, and nothing is written but the
    --report, which records the failure."""
    model = _random_model(tmp_path)
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(out), "--verify",
                                  "--fail-on-warning", "--report", str(report))
    assert code == 1
    lines = stderr.splitlines()
    assert lines[0].startswith("ge: warning: verification does not compare output(s) 'y'")
    assert lines[-1].startswith(
        "ge: [GE1702] the compilation issued 1 warning(s) and --fail-on-warning makes that a "
        f"failure; {out} was not written: CompileWarning: verification does not compare "
        "output(s) 'y'"), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rand.onnx", "report.json"]
    assert json.loads(report.read_text())["code"] == "GE1702"
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--verify",
                             "--fail-on-warning", "--json")
    data = json.loads(stdout)
    assert code == 1 and data["code"] == "GE1702" and len(data["warnings"]) == 1
    assert not out.exists()


def test_fail_on_warning_without_a_warning_compiles(tmp_path: Path) -> None:
    model = _random_model(tmp_path)
    out = tmp_path / "out.onnx"
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "--fail-on-warning", "-q")
    assert code == 0, stderr
    assert out.exists() and stderr == ""
