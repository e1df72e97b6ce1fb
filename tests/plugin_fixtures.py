"""Fixtures shared by the pass-plugin, compiler and CLI tests: a clean registry, loader and
`sys` state per test, helpers writing plugin files (imported by their conftests), and small
valid graphs to compile.

Compilations infer shapes and validate the result, so the graphs they compile are valid
models with typed inputs, and passes that add a node wire it in (`insert_identity`; plugin
files import it with `from plugin_fixtures import insert_identity`)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

import ge.compiler.builtin
from ge.graph import DataType, Format, Graph, Node, TensorDesc
from ge.testing.isolation import isolated_plugin_state


@pytest.fixture(autouse=True)
def clean_plugin_state(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Each test starts and ends with no plugins, no registrations, sys.path as it was, and
    installed plugins not autoloaded unless it is marked `ge_entry_points`
    (`ge.testing.isolated_plugin_state`, what the `ge_isolated` fixture does).

    In-process compilations run the plugin passes alone, so a test about scheduling or a
    pattern pass sees only its own passes; a test marked `builtin_passes` gets the built-in
    passes as users do (subprocess tests choose with `--no-builtin`).

    It uses a monkeypatch of its own rather than the `monkeypatch` fixture: a test's
    `monkeypatch` is then set up after it and undone before it, so a test that changes
    `GE_DISABLE_PLUGIN_AUTOLOAD` cannot leave the isolation's value behind."""
    entry_points = request.node.get_closest_marker("ge_entry_points") is not None
    with pytest.MonkeyPatch.context() as patch:
        if request.node.get_closest_marker("builtin_passes") is None:
            patch.setattr(ge.compiler.builtin, "BUILTIN_PASSES", ())
        with isolated_plugin_state(module_roots=[tmp_path_factory.getbasetemp()],
                                   entry_points=entry_points):
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
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty site folder on `sys.path` (removed again after the test), for the plugin
    distributions a test installs into it (`install_distribution`)."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def pass_source() -> Callable[..., str]:
    """pass_source(name, stage=..., body=...) is the source of a plugin registering one
    FusionBasePass named `name` whose run() returns True, followed by `body`."""
    return _fusion_pass_source


def install_distribution(site: Path, dist: str, plugins: Mapping[str, str],
                         version: str = "1.0") -> str:
    """Write distribution `dist` into the folder `site` as an installer would: package
    `<dist>_pkg` with one module per entry point of group `ge.passes.plugins` (`plugins`:
    entry-point name -> module source) and its `.dist-info`. With `site` on `sys.path`
    (or PYTHONPATH), `importlib.metadata` finds it like any installed one. Returns the
    package name."""
    package = dist.replace("-", "_") + "_pkg"
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("")
    lines = ["[ge.passes.plugins]"]
    for name, source in plugins.items():
        (site / package / f"{name}.py").write_text(textwrap.dedent(source))
        lines.append(f"{name} = {package}.{name}")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return package


#: A plugin pass (AfterInferShape) putting a Neg after the first Relu of `small_graph`: a
#: pass that changes the graph, for the tests of dumps.
ADDS_NEG = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="AddsNeg", stage="AfterInferShape")
class AddsNeg(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        neg = graph.add_node("Neg", name="neg", num_inputs=1)
        graph.replace_all_uses(relu, 0, neg, 0)
        graph.add_data_edge(relu, 0, neg, 0)
"""

def node_replacing_plugin(pass_name: str, old: str, new_type: str, new_name: str) -> str:
    """The source of a plugin whose pass (at AfterInferShape) replaces node `old` by a node
    of `new_type` it makes, named `new_name`, reading what `old` read and read by its
    reader: a node the plugin made, which the tests of blame then see a later pass change."""
    return f"""\
from ge.ops import infer_node
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="{pass_name}", stage=PassStage.AFTER_INFER_SHAPE)
class {pass_name}(FusionBasePass):
    def run(self, graph, context):
        old = graph.find_node_by_name("{old}")
        src, index = old.get_in_data_nodes_and_port_indexes(0)
        (reader, slot), = old.get_out_data_nodes_and_port_indexes(0)
        new = graph.add_node("{new_type}", name="{new_name}", num_inputs=1)
        graph.remove_edge(src, index, old, 0)
        graph.remove_edge(old, 0, reader, slot)
        graph.add_data_edge(src, index, new, 0)
        graph.add_data_edge(new, 0, reader, slot)
        graph.remove_node(old)
        infer_node(new)
        return True
"""


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
