"""The differential fuzzer of `ge.compile` (`tools/fuzz_compile.py`): a fixed range of seeds
compiles without a finding, and a wrong compilation or a ge error is reported as one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

import ge
import ge.compiler.builtin
from ge.errors import PassRunError
from ge.testing import isolated_plugin_state
from scripts import load_script
from versions import needs_opset

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "fuzz_compile.py"
#: About 17 seeds a second on the development machine (the models grew with the forms past
#: bugs clustered in): 400 seeds take ~25 s. Every built-in pass has work by seed 151
#: (ReshapeTargetFolding last); the wider ranges run out of band (tools/fuzz_compile.py).
SEEDS = range(0, 400)
#: Built-in passes the generated models give no work (none: opset 23 brings RMSNormFusion).
NEVER_CHANGING: frozenset[str] = frozenset()
BUILTIN = frozenset(cls.__ge_builtin__.name for cls in ge.compiler.builtin.BUILTIN_PASSES)


fuzz = load_script(TOOL, "_ge_fuzz_compile")
#: The seeds run their models in onnxruntime, at opsets up to the fuzzer's newest.
RUNS_SEEDS = needs_opset(max(fuzz.fuzz_models.OPSETS), "the fuzzer draws models at it")


@pytest.fixture(autouse=True)
def _no_plugins() -> Iterator[None]:
    """The built-in passes alone: no pass path, no installed plugin (a developer's own would
    be fuzzed with them)."""
    with isolated_plugin_state():
        yield


@RUNS_SEEDS
def test_a_range_of_seeds_gives_no_finding() -> None:
    outcomes = [fuzz.fuzz_seed(seed) for seed in SEEDS]
    findings = [o for o in outcomes if o.status == "finding"]
    assert not findings, "\n".join(f"seed {o.seed}: {o.kind}: {o.message}" for o in findings)
    # every built-in pass had work on some seed: the fuzzing reaches them all
    changed = {name for o in outcomes for name in o.changed}
    assert not BUILTIN - changed - NEVER_CHANGING, sorted(BUILTIN - changed)
    skipped = [o for o in outcomes if o.status == "skipped"]
    # A skip is a model the generator got wrong; they must stay rare or the fuzzer goes blind.
    assert len(skipped) <= len(SEEDS) // 50, [(o.seed, o.kind, o.message) for o in skipped]


def test_the_models_have_control_flow_and_opset_23() -> None:
    """The generators reach the forms past bugs clustered in: If and Loop bodies reading
    outer values, nesting, identical branches, and opset 23's RMSNorm material."""
    types, tags = fuzz.op_histogram(range(0, 300), None)
    assert {"If", "Loop", "<node in a body>"} <= set(types), types
    forms = {"If:cond-input", "If:cond-const", "If:branches-identical-same-names",
             "If:nested-in-If", "If:nested-in-Loop", "Loop:carried-pass", "Loop:cond-stop",
             "Loop:foldable-body", "output:control-flow", "opset:23", "RMSNorm:pattern"}
    assert not forms - {k for k, n in tags.items() if n}, sorted(forms - set(tags))


def test_symbolic_seeds_declare_symbols_and_run_at_several_sizes() -> None:
    """One seed in 8 (of the range above too) has inputs with named symbolic dims, is run
    at several sizes (each symbol at 1 among them), and builds shape computations."""
    symbolic = [s for s in range(0, 40) if fuzz.fuzz_models.is_symbolic(s)]
    assert symbolic == [7, 15, 23, 31, 39]
    params: set[str] = set()
    for seed in symbolic:
        fm = fuzz.fuzz_models.build(seed, symbolic=True)
        dims = [d for i in fm.model.graph.input for d in i.type.tensor_type.shape.dim]
        assert any(not d.HasField("dim_value") for d in dims), seed  # named or not
        params |= {d.dim_param for d in dims if d.dim_param}
        labels = [label for label, _ in fm.sizes]
        assert len(labels) == 5 and any(label.endswith("=1") for label in labels), labels
        assert fm.inputs is fm.sizes[0][1]
    assert params, "no named symbol"
    _, tags = fuzz.op_histogram(range(0, 200), None, "symbolic")
    forms = {"sym:Reshape-0-and-minus-1", "sym:Expand-ones", "sym:Slice-to-max",
             "sym:Squeeze-all", "sym:Range-of-dim", "sym:input-same-dims", "sym:LayerNorm",
             "sym:Add-neutral", "sym:Reshape-dim-product"}
    assert not forms - set(tags), sorted(forms - set(tags))


class _Specialised:
    """A compilation of the model with its symbolic dims fixed at 2, saved with the
    symbolic inputs back: right at size 2 only."""

    def __init__(self, path: str, tmp: Path) -> None:
        model = onnx.load(path)
        inputs = [onnx.ValueInfoProto.FromString(i.SerializeToString())
                  for i in model.graph.input]
        for info in model.graph.input:
            for dim in info.type.tensor_type.shape.dim:
                if not dim.HasField("dim_value"):
                    dim.dim_value = 2
        onnx.save(model, tmp / "static.onnx")
        self.model = ge.compile(str(tmp / "static.onnx")).to_onnx()
        del self.model.graph.input[:]
        self.model.graph.input.extend(inputs)

    def save(self, path: str) -> None:
        onnx.save(self.model, path)


@RUNS_SEEDS
def test_a_compilation_right_at_one_size_only_is_a_finding(tmp_path: Path) -> None:
    outcomes = [fuzz.fuzz_seed(seed, compile_fn=lambda p: _Specialised(p, tmp_path),
                               dims="symbolic") for seed in range(6)]
    found = [o for o in outcomes if o.status == "finding"]
    assert found and {o.kind for o in found} <= {"ort-compiled", "numerics", "shapes"}, outcomes
    assert all(o.at and o.message.startswith(f"at {o.at}: ") for o in found)


class _AddTurnedIntoSub:
    """A compilation result whose saved model computes its first Add as a Sub."""

    def __init__(self, result: Any) -> None:
        self.result = result

    def save(self, path: str) -> None:
        model = self.result.to_onnx()
        for node in model.graph.node:
            if node.op_type == "Add":
                node.op_type = "Sub"
                break
        onnx.save(model, path)


@RUNS_SEEDS
def test_a_wrong_compilation_is_a_numerics_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ge.compile
    monkeypatch.setattr(ge, "compile", lambda model, **kw: _AddTurnedIntoSub(real(model, **kw)))
    outcomes = [fuzz.fuzz_seed(seed, {"Add"}) for seed in range(10)]
    assert {o.status for o in outcomes} <= {"ok", "finding"}
    assert {o.kind for o in outcomes if o.status == "finding"} == {"numerics"}
    # An Add of zeros that broadcasts is not removed, and is the same as a Sub: "ok" there.
    assert sum(o.kind == "numerics" for o in outcomes) >= 5, outcomes
    assert all(o.model is not None for o in outcomes if o.status == "finding")


@RUNS_SEEDS
def test_a_ge_error_is_a_finding_and_another_exception_a_crash() -> None:
    def refusing(path: str) -> Any:
        raise PassRunError("boom", pass_name="SomePass")

    def crashing(path: str) -> Any:
        raise KeyError("oops")

    refused = fuzz.fuzz_seed(3, compile_fn=refusing)
    assert (refused.status, refused.kind) == ("finding", "ge-error")
    assert "boom" in refused.message
    crashed = fuzz.fuzz_seed(3, compile_fn=crashing)
    assert (crashed.status, crashed.kind) == ("finding", "crash")
    assert "KeyError" in crashed.message


def test_a_model_onnxruntime_cannot_run_is_skipped() -> None:
    fm = fuzz.fuzz_models.build(0)
    model = onnx.ModelProto()
    model.CopyFrom(fm.model)
    feeds = {name: value[..., :0] if value.ndim else value for name, value in fm.inputs.items()}
    outcome = fuzz.check_model(model, feeds, seed=0)  # inputs of the wrong shape
    assert (outcome.status, outcome.kind) == ("skipped", "ort-original")


@RUNS_SEEDS
def test_the_command_line_prints_a_table_and_keeps_findings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fuzz.main(["--seeds", "0:3"]) == 0
    out = capsys.readouterr().out
    assert "seeds 3 in" in out and "findings                 0" in out
    real = ge.compile
    monkeypatch.setattr(ge, "compile", lambda model, **kw: _AddTurnedIntoSub(real(model, **kw)))
    assert fuzz.main(["--seeds", "0:4", "--ops", "Add", "--keep", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    kept = sorted(p.name for p in tmp_path.glob("seed_*.onnx"))
    assert kept and all(f"seed {name[5:-5]}: finding numerics" in out for name in kept)


# -- model-local functions (tools/fuzz_functions.py) ----------------------------------------
#: Function seeds: each compiled as it is and inlined (about 10 a second).
FUNCTION_SEEDS = range(0, 50)


@RUNS_SEEDS
def test_function_seeds_give_no_finding() -> None:
    """Models whose nodes are partly in local functions (called twice, on the same inputs,
    with attributes by reference, random, overloaded, in bodies) compile right both ways."""
    outcomes = [fuzz.fuzz_seed(seed, functions="every") for seed in FUNCTION_SEEDS]
    findings = [o for o in outcomes if o.status == "finding"]
    assert not findings, "\n".join(f"seed {o.seed}: {o.kind}: {o.message}" for o in findings)
    skipped = [o for o in outcomes if o.status == "skipped"]
    assert len(skipped) <= len(FUNCTION_SEEDS) // 25, [(o.seed, o.message) for o in skipped]


def test_function_models_have_the_forms_past_bugs_were_in() -> None:
    """The forms the function bugs users found clustered in, and the mixed mode's share."""
    _, tags = fuzz.op_histogram(range(0, 200), None, functions="every")
    forms = {"model:functions", "fn:call-same-arguments", "fn:called-again",
             "fn:attr-LeakyRelu-default", "fn:attr-Softmax-no-default", "fn:call-omits-attribute",
             "fn:call-sets-attribute", "fn:attr-passed-on-default", "fn:calls-a-function",
             "fn:call-in-If", "fn:call-in-Loop", "fn:form-differ", "fn:form-masked",
             "fn:unread-output", "fn:call-empty-output", "fn:local-names", "fn:opaque",
             *(("fn:overload",) if fuzz.fuzz_functions.OVERLOADS else ())}
    assert not forms - {k for k, n in tags.items() if n}, sorted(forms - set(tags))
    assert tags["model:functions"] >= 190, tags["model:functions"]
    mixed = [s for s in range(0, 40) if fuzz.fuzz_models.has_functions(s)]
    assert mixed == [3, 11, 19, 27, 35]
    assert not fuzz.fuzz_models.build(0).model.functions


class _CallsMerged:
    """A compilation result whose saved model merges calls of one function on the same
    inputs with the same attributes (random or not), as a wrong CSE would; `merges` gets
    how many calls each save merged."""

    def __init__(self, result: Any, merges: list[int]) -> None:
        self.result = result
        self.merges = merges

    def save(self, path: str) -> None:
        model = self.result.to_onnx()
        seen: dict[bytes, onnx.NodeProto] = {}
        kept, renamed = [], {}
        outputs = {o.name for o in model.graph.output}
        merged = 0
        for node in model.graph.node:
            node.input[:] = [renamed.get(i, i) for i in node.input]
            key = onnx.NodeProto(op_type=node.op_type, domain=node.domain, input=node.input,
                                 attribute=node.attribute).SerializeToString()
            first = seen.get(key) if node.domain == fuzz.fuzz_functions.DOMAIN else None
            # (a call giving an output the first one left out cannot be merged into it: an
            # Identity of "" was an invalid model, the checker's finding, trial AI)
            gives = set() if first is None else {i for i, its in enumerate(first.output) if its}
            if first is not None and all(i in gives for i, mine in enumerate(node.output)
                                         if mine):
                for mine, its in zip(node.output, first.output):
                    if mine in outputs:  # (a graph output keeps its name)
                        kept.append(onnx.helper.make_node("Identity", [its], [mine]))
                    elif mine:
                        renamed[mine] = its
                merged += 1
                continue
            seen.setdefault(key, node)
            kept.append(node)
        del model.graph.node[:]
        model.graph.node.extend(kept)
        onnx.save(model, path)
        self.merges.append(merged)


@RUNS_SEEDS
def test_merged_calls_of_a_random_function_are_a_finding(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    seeds = [s for s in range(0, 120)
             if fuzz._build(s, None, "mixed", "every").tags["fn:form-differ"]][:4]
    assert seeds
    real = ge.compile
    merges: list[int] = []
    monkeypatch.setattr(ge, "compile",
                        lambda model, **kw: _CallsMerged(real(model, **kw), merges))
    outcomes = [fuzz.fuzz_seed(seed, functions="every", inline="keep") for seed in seeds]
    assert len(merges) == len(outcomes), merges
    # (a seed whose calls could not be merged compiles as it should: it tells nothing)
    merged = [o for o, count in zip(outcomes, merges, strict=True) if count]
    assert len(merged) >= 2, (merges, outcomes)
    assert all((o.status, o.kind) == ("finding", "numerics") for o in merged), outcomes
    assert all("False" in o.message for o in merged), outcomes
