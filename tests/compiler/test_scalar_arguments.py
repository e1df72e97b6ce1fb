"""The single-valued arguments of `ge.compile` and `compile_graph` of the wrong type are
`CompilerOptionTypeError` (GE1202, a `TypeError`) naming the type: `opset='20'` was "opset
must be an ONNX opset from 1 to 28, got '20'", a value error for a type mistake, and
`builtin_passes="false"` ran the built-in passes. Each is refused before any plugin is
imported or the model converted, the graph unchanged, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

import ge
from ge.compiler import compile_graph
from ge.compiler.dumping import GraphDumper
from ge.errors import CompileInputError, CompilerOptionError, CompilerOptionTypeError, GeError
from ge.graph import Graph
from plugin_fixtures import small_graph

#: (arguments, message) refused by ge.compile and compile_graph alike.
BOTH = [
    ({"builtin_passes": "false"}, "builtin_passes must be True or False, got the str 'false'"),
    ({"builtin_passes": 0}, "builtin_passes must be True or False, got the int 0"),
    ({"check": 1}, "check must be a str (one of ('region', 'full', 'none')), got the int 1"),
    ({"check": True},
     "check must be a str (one of ('region', 'full', 'none')), got the bool True"),
    ({"on_pass_failure": False},
     "on_pass_failure must be a str ('stop' or 'skip'), got the bool False"),
]

#: Refused by ge.compile only (its own arguments).
COMPILE_ONLY = [
    ({"opset": "20"}, "opset must be an int, got the str '20': write 20"),
    ({"opset": True}, "opset must be an int, got the bool True"),
    ({"rtol": "1e-3", "verify": True}, "rtol must be a number, got the str '1e-3'"),
    ({"atol": [0.1], "verify": True}, "atol must be a number, got the list [0.1]"),
    ({"dims": {"batch": "4"}},
     "dims must map symbolic dim names to sizes (int), got the str '4' for 'batch': write 4"),
    ({"dims": {"batch": 4.0}},
     "dims must map symbolic dim names to sizes (int), got the float 4.0 for 'batch'"),
    ({"dims": {"batch": True}},
     "dims must map symbolic dim names to sizes (int), got the bool True for 'batch'"),
    ({"value_info": True},
     "value_info must be a str (one of ('auto', 'all', 'none')), got the bool True"),
    ({"verify": 1},
     "verify must be True, False or one of ('none', 'final', 'each-pass'), got the int 1"),
    ({"dump": True}, "dump must be the path of a folder (a str or os.PathLike), got the bool "
                     "True"),
    ({"dump_level": 2},
     "dump_level must be a str (as DUMP_GRAPH_LEVEL: '1' to '4' or '|'-separated names), got "
     "the int 2: write '2'"),
]

#: A plugin that leaves a mark when it is imported: a refused call must not import it.
MARKING = """
from pathlib import Path
Path(__file__).with_name("imported").write_text("yes")
"""


def _refused(tmp_path: Path, call: object, arguments: dict[str, object],
             message: str, error: type[GeError] = CompilerOptionTypeError) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "marking.py").write_text(MARKING)
    graph = small_graph()
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(error) as info:
        call(graph, pass_paths=[plugins], **arguments)  # type: ignore[operator]
    assert type(info.value) is error and isinstance(info.value, TypeError)
    assert (info.value.code, info.value.message) == (error.code, message)
    assert graph.to_onnx().SerializeToString() == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["marking.py", "plugins"]


@pytest.mark.parametrize(("arguments", "message"), BOTH + COMPILE_ONLY)
def test_ge_compile_names_the_type_it_got(tmp_path: Path, arguments: dict[str, object],
                                          message: str) -> None:
    def call(graph: Graph, **kwargs: object) -> object:
        kwargs.setdefault("dump", tmp_path / "dumps")
        return ge.compile(graph, **kwargs)  # type: ignore[arg-type]

    _refused(tmp_path, call, arguments, message)


@pytest.mark.parametrize(("arguments", "message"), BOTH)
def test_compile_graph_names_the_type_it_got(tmp_path: Path, arguments: dict[str, object],
                                             message: str) -> None:
    _refused(tmp_path, compile_graph, arguments, message)


def test_compile_graph_takes_a_graph_only(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    _refused(tmp_path, lambda graph, **kwargs: compile_graph(str(model), **kwargs), {},
             f"compile_graph compiles a ge.graph.Graph in place, got the str '{model}': load "
             "it with ge.graph.load, or call ge.compile (it takes paths and ModelProtos)",
             CompileInputError)


def test_ge_compile_names_the_type_of_a_model_it_cannot_take(tmp_path: Path) -> None:
    _refused(tmp_path, lambda graph, **kwargs: ge.compile([graph], **kwargs), {},
             "ge.compile expects a model path, an onnx.ModelProto, its serialized bytes or a "
             "ge.graph.Graph, got the list [<Graph 'g' nodes=4>]", CompileInputError)


def test_a_value_of_the_right_type_keeps_its_value_error(tmp_path: Path) -> None:
    for arguments, message in (
            ({"check": "some"}, "check must be one of ('region', 'full', 'none'), got 'some'"),
            ({"opset": 99}, "opset must be an ONNX opset from 1 to "),
            ({"verify": "yes"}, "verify must be True, False or one of ('none', 'final', "
                                "'each-pass'), got 'yes'")):
        with pytest.raises(CompilerOptionError) as info:
            ge.compile(small_graph(), **arguments)  # type: ignore[arg-type]
        assert not isinstance(info.value, TypeError)
        assert info.value.message.startswith(message)


def test_graph_dumper_names_the_type_of_a_level(tmp_path: Path) -> None:
    with pytest.raises(CompilerOptionTypeError) as info:
        GraphDumper(tmp_path / "dumps", level=2)  # type: ignore[arg-type]
    assert info.value.message == ("dump level must be a str ('1' to '4' or '|'-separated "
                                  "names), got the int 2")
    assert list(tmp_path.iterdir()) == []
