"""The arguments of `ge.compile` and `compile_graph` that hold several things take a list
(any iterable) of them, never one alone: `disable="ConstantFolding"` was iterated into
"cannot disable unknown pass(es) C, F, a, d, ...". One str (or one observer, a mapping where
a list belongs, a non-iterable, an item of another type) is `CompilerOptionTypeError`
(GE1202, a `TypeError`) saying how to write it, and the mapping arguments (`options`,
`dims`, `steps`) must be mappings; `pass_paths` keeps its `PluginPathTypeError` (E13029).
All are refused before any plugin is imported, the graph unchanged, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

import ge
from ge.compiler import compile_graph
from ge.compiler.scheduler import PipelineObserver
from ge.errors import CompilerOptionError, CompilerOptionTypeError, GeError, PluginPathTypeError
from ge.graph import Graph
from plugin_fixtures import small_graph

LIST = "must be a list of pass names, got "

#: (arguments, error class, message) refused by ge.compile and compile_graph alike.
BOTH = [
    ({"disable": "ConstantFolding"}, CompilerOptionTypeError,
     "disable " + LIST + "the str 'ConstantFolding': write ['ConstantFolding']"),
    ({"enable": "SwishFusion"}, CompilerOptionTypeError,
     "enable " + LIST + "the str 'SwishFusion': write ['SwishFusion']"),
    ({"disable": ["ConstantFolding", 3]}, CompilerOptionTypeError,
     "disable " + LIST + "the int 3 among them"),
    ({"disable": {"ConstantFolding": False}}, CompilerOptionTypeError,
     "disable " + LIST + "the dict {'ConstantFolding': False}"),
    ({"enable": 1}, CompilerOptionTypeError, "enable " + LIST + "the int 1"),
    ({"observers": PipelineObserver()}, CompilerOptionTypeError,
     "observers must be a list of PipelineObserver objects, got a PipelineObserver object: "
     "put it in a list"),
    ({"observers": "progress"}, CompilerOptionTypeError,
     "observers must be a list of PipelineObserver objects, got the str 'progress'"),
    ({"observers": [print]}, CompilerOptionTypeError,
     "observers must be a list of PipelineObserver objects, got the builtin_function_or_method "
     "<built-in function print> among them"),
    ({"options": "ge.optimize.max_rounds=3"}, CompilerOptionTypeError,
     "options must be a mapping of str to str, got the str 'ge.optimize.max_rounds=3': write "
     "{'ge.optimize.max_rounds': '3'}"),
    ({"options": {"ge.optimize.max_rounds": 3}}, CompilerOptionTypeError,
     "options must map str to str, got the int 3 for 'ge.optimize.max_rounds': write '3'"),
    ({"pass_paths": "plugins/a.py"}, PluginPathTypeError,
     "pass_paths must be a list of plugin files or folders, got the str 'plugins/a.py': write "
     "['plugins/a.py']"),
    ({"pass_paths": 3}, PluginPathTypeError,
     "pass_paths must be a list of plugin files or folders, got the int 3"),
]

#: Refused by ge.compile only (its own arguments).
COMPILE_ONLY = [
    ({"dims": "samples=400"}, CompilerOptionTypeError,
     "dims must be a mapping of symbolic dim names to sizes, got the str 'samples=400': write "
     "{'samples': 400}"),
    ({"dims": [("samples", 400)]}, CompilerOptionTypeError,
     "dims must be a mapping of symbolic dim names to sizes ({'batch': 4, ...}), got the list "
     "[('samples', 400)]"),
    ({"dims": {0: 400}}, CompilerOptionTypeError,
     "dims must map symbolic dim names (str) to sizes, got the int 0 as a name"),
]

#: Refused by compile_graph only (its own arguments).
COMPILE_GRAPH_ONLY = [
    ({"steps": ["infer_shape"]}, CompilerOptionTypeError,
     "steps must be a mapping of engine step names to functions, got the list "
     "['infer_shape']"),
    ({"steps": {"infer_shape": "skip"}}, CompilerOptionTypeError,
     "steps['infer_shape'] must be a function (graph, options) or None, got the str 'skip'"),
    ({"steps": {"nope": None}}, CompilerOptionError,
     "unknown engine step 'nope'; expected one of ('infer_shape', 'builtin_fusion', "
     "'origin_graph_optimize', 'final_validation')"),
]

#: A plugin that leaves a mark when it is imported: a refused call must not import it.
MARKING = """
from pathlib import Path
Path(__file__).with_name("imported").write_text("yes")
"""


def _refused(tmp_path: Path, call: object, graph: Graph, arguments: dict[str, object],
             error: type[GeError], message: str) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "marking.py").write_text(MARKING)
    if "pass_paths" not in arguments:
        arguments = {**arguments, "pass_paths": [plugins]}
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(error) as info:
        call(graph, **arguments)  # type: ignore[operator]
    assert type(info.value) is error
    assert info.value.message == message
    assert info.value.code == ("E13029" if error is PluginPathTypeError else "GE1202")
    if error is not CompilerOptionError:
        assert isinstance(info.value, TypeError)
    assert graph.to_onnx().SerializeToString() == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["marking.py", "plugins"]


@pytest.mark.parametrize(("arguments", "error", "message"), BOTH + COMPILE_ONLY)
def test_ge_compile_refuses_what_is_not_a_collection(
        tmp_path: Path, arguments: dict[str, object], error: type[GeError],
        message: str) -> None:
    def call(graph: Graph, **kwargs: object) -> object:
        return ge.compile(graph, dump=tmp_path / "dumps", **kwargs)  # type: ignore[arg-type]

    _refused(tmp_path, call, small_graph(), arguments, error, message)


@pytest.mark.parametrize(("arguments", "error", "message"), BOTH + COMPILE_GRAPH_ONLY)
def test_compile_graph_refuses_what_is_not_a_collection(
        tmp_path: Path, arguments: dict[str, object], error: type[GeError],
        message: str) -> None:
    _refused(tmp_path, compile_graph, small_graph(), arguments, error, message)


@pytest.mark.builtin_passes
def test_any_iterable_of_names_is_a_list() -> None:
    for disable in (["ConstantFolding"], ("ConstantFolding",), {"ConstantFolding"},
                    (name for name in ["ConstantFolding"])):
        report = ge.compile(small_graph(), disable=disable).report
        assert "ConstantFolding" not in {r.pass_name for r in report.records}
    report = compile_graph(small_graph(), disable=iter(["ConstantFolding"]),
                           enable=iter(()), observers=iter([PipelineObserver()]))
    assert "ConstantFolding" not in {r.pass_name for r in report.records}
