"""Values of options the built-in passes read are checked when the options are parsed: a bad
`ge.constant_folding.size_limit` is a GE1202 option error before anything runs, like
`ge.optimize.max_rounds`, not a failure (E13028) of ConstantFolding in the pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import ge
from ge.cli import cli
from ge.compiler.options import OPTION_CONSTANT_FOLDING_SIZE_LIMIT, parse_options
from ge.compiler.scheduler import PipelineObserver
from ge.errors import CompilerOptionError, PassRunError
from ge.graph import Graph
from model_paths import shared_model
from plugin_fixtures import small_graph

pytestmark = pytest.mark.builtin_passes  # ConstantFolding is there to read the option

SIZE_LIMIT = "ge.constant_folding.size_limit"


def _message(value: str) -> str:
    return f"option {SIZE_LIMIT} must be a non-negative integer (bytes), got {value!r}"


class _Steps(PipelineObserver):
    def __init__(self) -> None:
        self.started: list[str] = []

    def step_started(self, index: int, label: str, graph: Graph) -> None:
        self.started.append(label)


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "", "1e6"])
def test_a_bad_size_limit_is_an_option_error_before_anything_runs(value: str) -> None:
    graph = small_graph()
    count = graph.mutation_count
    steps = _Steps()
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(graph, options={SIZE_LIMIT: value}, observers=[steps])
    assert not isinstance(info.value, PassRunError)
    assert info.value.code == "GE1202"
    assert info.value.message == _message(value)
    assert info.value.pass_name is None and info.value.location is None
    assert steps.started == []
    assert graph.mutation_count == count


def test_parse_options_checks_the_value() -> None:
    assert OPTION_CONSTANT_FOLDING_SIZE_LIMIT == SIZE_LIMIT
    assert parse_options({SIZE_LIMIT: " 4096 "}).values[SIZE_LIMIT] == " 4096 "
    assert parse_options({SIZE_LIMIT: "0"}).values[SIZE_LIMIT] == "0"
    with pytest.raises(CompilerOptionError, match="got 'abc'"):
        parse_options({SIZE_LIMIT: "abc"})


def test_initialize_refuses_a_bad_size_limit() -> None:
    with pytest.raises(CompilerOptionError) as info:
        ge.initialize({SIZE_LIMIT: "lots"})
    assert info.value.message == _message("lots")


def test_a_good_size_limit_still_works() -> None:
    result = ge.compile(small_graph(), options={SIZE_LIMIT: "1024"})
    assert [r.pass_name for r in result.report.records].count("ConstantFolding") >= 1


def test_ge_compile_prints_one_option_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["compile", str(shared_model("mobilenet_like")), "-o",
                                      str(tmp_path / "out.onnx"), "--option",
                                      f"{SIZE_LIMIT}=abc"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"ge: [GE1202] {_message('abc')}\n"
    assert list(tmp_path.iterdir()) == []
