"""Fixtures shared by the pass-plugin, compiler and CLI tests: a clean registry, loader and
`sys` state per test, helpers writing plugin files (imported by their conftests), and small
valid graphs to compile.

Compilations infer shapes and validate the result, so the graphs they compile are valid
models with typed inputs, and passes that add a node wire it in (`insert_identity`; plugin
files import it with `from plugin_fixtures import insert_identity`)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ge.compiler.builtin
from ge.graph import DataType, Format, Graph, Node, TensorDesc
from ge.testing.isolation import isolated_plugin_state


@pytest.fixture(autouse=True)
def clean_plugin_state(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Each test starts and ends with no plugins, no registrations, sys.path as it was
    (`ge.testing.isolated_plugin_state`, what the `ge_isolated` fixture does).

    In-process compilations run the plugin passes alone, so a test about scheduling or a
    pattern pass sees only its own passes; a test marked `builtin_passes` gets the built-in
    passes as users do (subprocess tests choose with `--no-builtin`)."""
    if request.node.get_closest_marker("builtin_passes") is None:
        monkeypatch.setattr(ge.compiler.builtin, "BUILTIN_PASSES", ())
    with isolated_plugin_state(module_roots=[tmp_path_factory.getbasetemp()]):
        yield


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """write("dir/name.py", source) creates a file under tmp_path (dedented) and returns it."""

    def _write(relative: str, source: str = "") -> Path:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
        return path

    return _write


def _fusion_pass_source(name: str, *, stage: str = "BeforeInferShape", body: str = "") -> str:
    return (
        "from ge.passes import FusionBasePass, register_fusion_pass\n"
        f"@register_fusion_pass(name={name!r}, stage={stage!r})\n"
        f"class {name}(FusionBasePass):\n"
        "    def run(self, graph, context):\n"
        "        return True\n"
        f"{textwrap.dedent(body)}"
    )


@pytest.fixture
def pass_source() -> Callable[..., str]:
    """pass_source(name, stage=..., body=...) is the source of a plugin registering one
    FusionBasePass named `name` whose run() returns True, followed by `body`."""
    return _fusion_pass_source


def small_graph(name: str = "g") -> Graph:
    """Data (float [2, 3]) -> Relu -> Relu -> NetOutput, built with the graph API."""
    graph = Graph(name)
    data = graph.add_node("Data", num_inputs=0, attrs={"index": 0})
    data.update_output_desc(0, TensorDesc([2, 3], Format.FORMAT_ND, DataType.DT_FLOAT))
    first = graph.add_node("Relu", num_inputs=1)
    second = graph.add_node("Relu", num_inputs=1)
    output = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    graph.add_data_edge(data, 0, first, 0)
    graph.add_data_edge(first, 0, second, 0)
    graph.add_data_edge(second, 0, output, 0)
    return graph


def insert_identity(graph: Graph, name: str) -> Node:
    """Add an Identity named `name` right after `graph`'s first Data node (its consumers
    read the Identity instead); it takes the Data's desc, so the graph stays valid and typed
    at every stage."""
    data = graph.get_data_nodes()[0]
    identity = graph.add_node("Identity", name=name, num_inputs=1)
    graph.replace_all_uses(data, 0, identity, 0)
    graph.add_data_edge(data, 0, identity, 0)
    identity.update_output_desc(0, data.get_output_desc(0))
    return identity
