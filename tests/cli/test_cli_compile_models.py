"""`ge compile` on a vendored real model with the built-in passes: verification, the JSON
report, `--json`; and every bad input refused with its code and nothing written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import DISTILBERT, listing, run_ge

pytestmark = pytest.mark.builtin_passes

OPTION_PASS = """
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="ReadsOption", stage=PassStage.BEFORE_INFER_SHAPE)
class ReadsOption(FusionBasePass):
    def run(self, graph, context):
        context.get_option_value("my.threshold")
        return True
"""

RAISING = """
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="Broken", stage=PassStage.BEFORE_INFER_SHAPE)
class Broken(FusionBasePass):
    def run(self, graph, context):
        raise ValueError("the pattern is wrong")
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A copy of distilbert_tiny in its own folder (so OUT == MODEL can be tried)."""
    path = tmp_path / "m" / "distilbert.onnx"
    path.parent.mkdir()
    shutil.copy(DISTILBERT, path)
    return path


def _inputs(**overrides: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {"input_ids": rng.integers(0, 500, size=(1, 12)).astype(np.int64),
              "attention_mask": np.ones((1, 12), dtype=np.int64)}
    arrays.update(overrides)
    return arrays


def test_compile_verify_and_report(model: Path, tmp_path: Path) -> None:
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(out), "--verify",
                                  "--report", str(report))
    assert code == 0, stderr
    compiled = onnx.load(out)
    onnx.checker.check_model(compiled, full_check=True)
    assert "Identity" not in {n.op_type for n in compiled.graph.node}  # built-ins ran
    data = json.loads(report.read_text())
    assert data["model"] == str(model) and data["output"] == str(out)
    assert [s["name"] for s in data["steps"]][:2] == ["BeforeInferShape", "InferShape"]
    assert data["invocations"] and data["passes"]
    assert {r["origin"] for r in data["invocations"]} == {"built-in"}
    folding = next(p for p in data["passes"] if p["name"] == "ConstantFolding")
    assert folding["outcome"] == "success" and folding["runs"] >= 1
    assert data["ops_before"]["Identity"] > 0 and "Identity" not in data["ops_after"]
    assert data["nodes_after"] < data["nodes_before"]
    assert data["verification"]["ok"] is True
    assert [o["name"] for o in data["verification"]["outputs"]] == ["output"]
    # the text report: pass table, op histogram, totals, verification
    for text in ("Pass runs", "ConstantFolding", "built-in", "Operators before → after",
                 "Identity", "verification ok", f"wrote {out}", f"wrote report {report}"):
        assert text in stdout
    assert stderr == ""


def test_quiet_prints_the_lines_without_the_tables(model: Path, tmp_path: Path) -> None:
    """`-q` drops the pass table (a row per pass, 76 on a Llama export, most finding
    nothing), the operator table and the verification table; the summary, the hints, the
    verification line and what was written stay, and the model written is the same."""
    loud, quiet = tmp_path / "loud.onnx", tmp_path / "quiet.onnx"
    code, full, stderr = run_ge("compile", str(model), "-o", str(loud), "--verify")
    assert code == 0, stderr
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(quiet), "--verify", "-q")
    assert code == 0, stderr
    assert loud.read_bytes() == quiet.read_bytes()
    lines = stdout.splitlines()
    summary = lines[0].rsplit(";", 1)[0]  # (the time differs)
    assert summary.startswith("nodes ") and summary in full  # the summary comes first
    assert [line for line in lines if line.startswith("verification ok")]
    assert lines[-1] == f"wrote {quiet}"
    for table in ("Pass runs", "Operators before → after", "┃"):
        assert table in full and table not in stdout
    assert len(lines) < 10 < len(full.splitlines())


def test_compile_verify_each_pass_with_inputs_json(model: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, **_inputs())
    out = tmp_path / "out.onnx"
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(out), "--verify=each-pass",
                                  "--inputs", str(inputs), "--check", "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["verification"]["ok"] is True
    assert data["warnings"] == []
    assert data["fixed_point"]["converged"] is True
    assert out.is_file()


def test_no_builtin_and_disable(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--no-builtin", "--json")
    assert code == 0
    assert json.loads(stdout)["invocations"] == []
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--json",
                             "--disable", "ConstantFolding", "--disable", "NoOpElimination")
    assert code == 0
    names = {r["name"] for r in json.loads(stdout)["invocations"]}
    assert names and not names & {"ConstantFolding", "NoOpElimination"}


def _refused(model: Path, *args: str, code: str, message: str, as_json: bool = False) -> None:
    """`ge compile MODEL ARGS` fails with `code` and `message`, and writes nothing."""
    root = model.parent.parent
    before = listing(root)
    exit_code, stdout, stderr = run_ge("compile", str(model), *args,
                                       *(["--json"] if as_json else []))
    assert exit_code == 1
    if as_json:
        error = json.loads(stdout)
        assert error["code"] == code and message in error["message"], error
        assert stderr == ""
    else:
        assert stderr.startswith(f"ge: [{code}] ") and message in stderr, stderr
        assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert listing(root) == before


@pytest.mark.parametrize("as_json", [False, True])
def test_a_file_that_is_not_onnx(tmp_path: Path, as_json: bool) -> None:
    bogus = tmp_path / "m" / "bogus.onnx"
    bogus.parent.mkdir()
    bogus.write_bytes(b"this is not a protobuf \xff\xfe" * 10)
    _refused(bogus, "-o", str(tmp_path / "out.onnx"), code="GE1101", message="bogus.onnx",
             as_json=as_json)


def test_output_in_a_missing_folder(model: Path, tmp_path: Path) -> None:
    _refused(model, "-o", str(tmp_path / "absent" / "out.onnx"), code="GE1104",
             message="is not an existing folder")


def test_output_is_the_input(model: Path) -> None:
    _refused(model, "-o", str(model), code="GE1104", message="would replace")


def test_report_in_a_missing_folder(model: Path, tmp_path: Path) -> None:
    _refused(model, "-o", str(tmp_path / "out.onnx"), "--report",
             str(tmp_path / "absent" / "r.json"), code="GE1701",
             message="is not an existing folder")


def test_report_onto_the_model(model: Path, tmp_path: Path) -> None:
    _refused(model, "-o", str(tmp_path / "out.onnx"), "--report", str(model), code="GE1701",
             message="it is the model")


@pytest.mark.parametrize(("arrays", "message"), [
    ({"input_ids": np.zeros((1, 12), np.int64), "tokens": np.zeros((1, 12), np.int64)},
     "tokens"),
    (_inputs(input_ids=np.zeros((1, 7), np.int64)), "input_ids"),
    (_inputs(attention_mask=np.ones((1, 12), np.float32)), "attention_mask"),
], ids=["wrong-name", "wrong-shape", "wrong-dtype"])
def test_bad_inputs(model: Path, tmp_path: Path, arrays: dict[str, np.ndarray],
                    message: str) -> None:
    inputs = tmp_path / "m" / "inputs.npz"
    np.savez(inputs, **arrays)  # type: ignore[arg-type]
    _refused(model, "-o", str(tmp_path / "out.onnx"), "--verify", "--inputs", str(inputs),
             code="GE1602", message=message)


def test_unknown_disable_name(model: Path, tmp_path: Path) -> None:
    _refused(model, "-o", str(tmp_path / "out.onnx"), "--disable", "NoSuchPass",
             code="GE1202", message="cannot disable unknown pass(es) NoSuchPass")


def test_an_option_a_pass_reads(model: Path, tmp_path: Path, write) -> None:
    plugin = write("plugins/reads_option.py", OPTION_PASS)
    out = tmp_path / "out.onnx"
    _refused(model, "-o", str(out), "--pass-path", str(plugin), code="E13028",
             message="Failed to get option value for key: my.threshold")
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "--pass-path", str(plugin),
                             "--option", "my.threshold=3")
    assert code == 0, stderr
    assert out.is_file()


def test_a_failing_pass_under_skip_is_a_warning_line(model: Path, tmp_path: Path,
                                                     write) -> None:
    plugin = write("plugins/broken.py", RAISING)
    out = tmp_path / "out.onnx"
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(out), "--pass-path",
                                  str(plugin), "--on-pass-failure", "skip")
    assert code == 0
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: warning: ")
    assert "Broken" in lines[0] and "the pattern is wrong" in lines[0]
    assert "rolled back" in stdout  # the pass table says so
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(out), "--pass-path",
                                  str(plugin), "--on-pass-failure", "skip", "--json")
    assert code == 0 and stderr == ""
    (warning,) = json.loads(stdout)["warnings"]
    assert warning["category"] == "CompileWarning" and "Broken" in warning["message"]


def test_a_pass_skipped_in_every_body_is_said_once(tmp_path: Path, write) -> None:
    """A FusionBasePass runs on the main graph and on each If/Loop body: failing in all four
    of control_flow's graphs under skip, it gave the same warning four times (trial M)."""
    from model_paths import shared_model

    plugin = write("plugins/broken.py", RAISING)
    out = tmp_path / "out.onnx"
    args = ("compile", str(shared_model("control_flow")), "-o", str(out), "--pass-path",
            str(plugin), "--on-pass-failure", "skip")
    code, stdout, stderr = run_ge(*args)
    assert code == 0 and "rolled back" in stdout
    (line,) = stderr.splitlines()
    assert line.startswith("ge: warning: ") and "Broken" in line
    code, stdout, _ = run_ge(*args, "--json")
    assert code == 0 and len(json.loads(stdout)["warnings"]) == 1


def test_a_verification_failure_in_json_has_the_comparison(model: Path, tmp_path: Path,
                                                           write) -> None:
    """A pass that changes the numbers: GE1603, with the comparison, and no model written;
    the report is the failure (in place of one an earlier run left: a CI job uploads it)."""
    plugin = write("plugins/wrong.py", """
        from ge.graph import Tensor
        from ge.passes import FusionBasePass, PassStage, register_fusion_pass
        import numpy as np

        @register_fusion_pass(name="Wrong", stage=PassStage.AFTER_ORIGIN_GRAPH_OPTIMIZE)
        class Wrong(FusionBasePass):
            def run(self, graph, context):
                for node in graph.get_direct_nodes():
                    if node.type == "LayerNormalization":
                        node.set_attr("epsilon", 0.5)
                        return True
                return False
        """)
    root = model.parent.parent
    before = listing(root)
    report = tmp_path / "r.json"
    report.write_text('{"verification": {"ok": true}}')  # an earlier run's
    code, stdout, _ = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                             "--pass-path", str(plugin), "--verify", "--report",
                             str(report), "--json")
    assert code == 1
    error = json.loads(stdout)
    assert error["code"] == "GE1603"
    assert error["verification"]["ok"] is False
    assert json.loads(report.read_text()) == error
    assert listing(root) == sorted([*before, str(report.relative_to(root))])


@pytest.mark.parametrize(("mode", "typed"), [("all", True), ("none", False)])
def test_value_info(model: Path, tmp_path: Path, mode: str, typed: bool) -> None:
    out = tmp_path / "out.onnx"
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "--value-info", mode)
    assert code == 0, stderr
    assert bool(onnx.load(out).graph.value_info) is typed


def test_a_passs_runs_on_bodies_are_one_row(tmp_path: Path) -> None:
    """The text table sums a pass's runs on the root graph and its bodies into one row (a
    row per run made 56,000 rows for 1,000 If nodes: half a minute of printing); the JSON
    report keeps every run that did something, and counts the others."""
    from model_paths import shared_model

    model = shared_model("control_flow")
    out = tmp_path / "o.onnx"
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(out), "--all-passes")
    assert code == 0, stderr
    rows = [line for line in stdout.splitlines() if "NoOpElimination" in line]
    assert len(rows) == 2 and all("main_graph +3" in row for row in rows)  # two rounds
    assert ("GRAPH +N: N bodies; the JSON report lists each run that did something on one"
            in " ".join(stdout.split()))
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--json")
    data = json.loads(stdout)
    runs = [r for r in data["invocations"] if r["name"] == "NoOpElimination"]
    summary = next(p for p in data["passes"] if p["name"] == "NoOpElimination")
    assert summary["runs"] == 8 and data["quiet_body_invocations"] > 0
    assert all(r["graph_path"] == "" or r["changed"] for r in runs)


def test_a_model_with_a_sparse_initializer(tmp_path: Path) -> None:
    """The user trial's model: a sparse initializer added to a graph input failed GE1305
    (`sparse_tensor(float)`), and the saved model onnx's full checker; it compiles,
    verified, and is written with its sparse initializer as it was (tests/compiler/
    test_sparse_constants.py has the rest)."""
    from onnx import helper, numpy_helper

    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "s"),
        numpy_helper.from_array(np.array([0, 5], np.int64), "s_indices"), [2, 3])
    f = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "s"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", f, [2, 3])],
        [helper.make_tensor_value_info("y", f, [2, 3])], sparse_initializer=[sparse])
    source = tmp_path / "sparse.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    out = tmp_path / "out.onnx"
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--verify", "-q")
    assert code == 0, stderr
    assert "verification ok" in stdout
    written = onnx.load(out)
    assert [s.values.name for s in written.graph.sparse_initializer] == ["s"]


def test_the_pass_table_leaves_out_builtin_passes_that_found_nothing(tmp_path: Path) -> None:
    """Most rows of a compilation were built-in passes reporting not_changed with nothing
    found (46 of the dynamo DistilBERT's 54; rich spent longer laying them out than ge
    compiling): by default the table has the runs that changed, matched, reported or were
    rolled back, and plugin passes whatever they did; its caption counts the others;
    --all-passes lists every run; the JSON report is the same either way."""
    from model_paths import shared_model

    plugin = tmp_path / "idle.py"
    plugin.write_text(
        "from ge.passes import NOT_CHANGED, FusionBasePass, PassStage, "
        "register_fusion_pass\n\n"
        "@register_fusion_pass(name='IdlePass', stage=PassStage.AFTER_INFER_SHAPE)\n"
        "class IdlePass(FusionBasePass):\n"
        "    def run(self, graph, context):\n"
        "        return NOT_CHANGED\n")
    out = tmp_path / "o.onnx"
    args = ["compile", str(shared_model("control_flow")), "-o", str(out), "--pass-path",
            str(plugin)]
    (code, few, stderr), (code_all, every, _) = run_ge(*args), run_ge(*args, "--all-passes")
    assert code == code_all == 0, stderr

    def rows(text: str) -> list[str]:  # (the cells without ms, which differ run to run)
        return [" ".join(cell.strip() for cell in line.split("│")[1:-2])
                for line in text.splitlines()
                if line.startswith("│ ") and ("built-in" in line or "idle.py" in line)]

    few_rows, all_rows = rows(few), rows(every)
    assert few_rows == [row for row in all_rows if "idle.py" in row
                        or row.split()[-3:-1] != ["not_changed", "-"]]
    assert any("IdlePass" in r and "not_changed" in r for r in few_rows)  # a plugin: kept
    assert any("NoOpElimination" in r for r in few_rows)  # changed the graph
    assert not any("CastChainSimplification" in r for r in few_rows)
    assert any("CastChainSimplification" in r for r in all_rows)
    hidden = len(all_rows) - len(few_rows)
    # (control_flow's passes run on the main graph and 3 bodies: a row sums 4 runs)
    assert hidden > 0 and (f"{hidden} row(s) of built-in passes that found nothing are not "
                           f"shown ({4 * hidden} runs, bodies included) (--all-passes lists "
                           "them)") in " ".join(few.split())
    # (trial Y read "Pass runs (216; 2 of 54 row(s) shown)" as 216 rows)
    assert few.startswith(f"Pass runs ({4 * len(all_rows)} in {len(all_rows)} row(s); "
                          f"{len(few_rows)} row(s) shown)")
    assert every.startswith(f"Pass runs ({4 * len(all_rows)} in {len(all_rows)} row(s))")
    assert "are not shown" not in " ".join(every.split())
    first, second = (json.loads(run_ge(*args, "--json", *extra)[1])
                     for extra in ([], ["--all-passes"]))
    assert [r["name"] for r in first["invocations"]] == [
        r["name"] for r in second["invocations"]]


def test_a_pass_table_of_nothing_found_is_one_line(tmp_path: Path) -> None:
    model = tmp_path / "relu.onnx"
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              model)
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"))
    assert code == 0, stderr
    runs = re.search(r"(\d+) pass run\(s\)", stdout)
    assert runs is not None, stdout
    assert stdout.splitlines()[0] == (f"Pass runs ({runs[1]}): no built-in pass found anything "
                                      "to change (--all-passes lists them)")
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                                  "--no-builtin")
    assert code == 0 and stdout.splitlines()[0] == "Pass runs (0): no pass ran", stderr


def test_a_model_whose_output_contradicts_its_declared_size_is_one_line(tmp_path: Path
                                                                      ) -> None:
    """Trial S: a warning promising the declared type would be written back, the whole
    pipeline, then GE1003 at save; now one GE1305 line, nothing written."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "compiler"))
    from test_declared_output_shapes import contradicting_block

    source = tmp_path / "block.onnx"
    onnx.save(contradicting_block(), source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(tmp_path / "out.onnx"))
    assert code == 1 and stdout == ""
    assert stderr.startswith(f"ge: [GE1305] {source}: graph output 'logits' is declared "
                             "[batch, seq, 16] but its inputs give [batch, seq, 4]"), stderr
    assert stderr.endswith("(stage InferShape)\n") and stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["block.onnx"]


def test_a_narrow_table_still_says_bodies_are_summed(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial AC: at 120 columns the Graph column was left out, and the note that a row sums
    a pass's runs on the bodies went with it: Nodes read 16→15 beside a summary of 6 → 5."""
    from model_paths import shared_model

    args = ["compile", str(shared_model("control_flow")), "-o", str(tmp_path / "o.onnx"),
            "--all-passes"]
    for columns, said in (("250", "(GRAPH +N: N bodies; "), ("120", "(its Nodes count theirs "
                                                                   "too; ")):
        monkeypatch.setenv("COLUMNS", columns)
        code, stdout, stderr = run_ge(*args)
        assert code == 0, stderr
        caption = " ".join(stdout.split())
        assert ("a pass's runs on the bodies of If/Loop/Scan nodes are summed into its row "
                + said + "the JSON report lists each run that did something on one)") in caption
        assert ("columns Kind, Graph left out" in caption) == (columns == "120")
