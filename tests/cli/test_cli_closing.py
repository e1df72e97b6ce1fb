"""The commands close the graphs they load (`Graph.close`) when their work ends, so that
nothing of a model is left for the cyclic collector at the end of the process: with the
collector off, every graph of the model is freed by the time the command returns. What
they write is unchanged, and a plugin that holds nodes still has its atexit callback and
finalizers run, seeing closed nodes by name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from cli_helpers import DISTILBERT, run_ge, run_process

import ge
from function_models import SILU_PASS, silu_model
from ge.graph import Graph
from ge.pyatc import main as pyatc
from model_paths import shared_model

CONTROL_FLOW = shared_model("control_flow")

#: A plugin keeping a node of the graph it runs on, as a module-level cache would; at exit
#: it reads its name and tries its attribute, and an object holding it is finalized.
KEEPER = '''\
import atexit, pathlib
from ge.errors import GraphClosedError
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

MARK = pathlib.Path({mark!r})
HELD = []


class Holder:
    def __init__(self, node):
        self.node = node

    def __del__(self):
        (MARK / "del").write_text(self.node.name)


HOLDER = None


def _at_exit():
    node = HELD[0]
    try:
        node.get_attr("index")
    except GraphClosedError as err:
        (MARK / "atexit").write_text(f"{{node.name}} {{node.type}}: {{err.code}}")


atexit.register(_at_exit)


@register_fusion_pass(name="Keeper", stage=PassStage.AFTER_INFER_SHAPE)
class Keeper(FusionBasePass):
    def run(self, graph, context):
        global HOLDER
        if not HELD:
            HELD.append(graph.get_data_nodes()[0])
            HOLDER = Holder(HELD[0])
        return None
'''


def _graph_name(path: Path) -> str:
    return onnx.load(str(path), load_external_data=False).graph.name


@pytest.mark.builtin_passes
@pytest.mark.parametrize("model", [DISTILBERT, CONTROL_FLOW], ids=["distilbert", "bodies"])
@pytest.mark.parametrize("flags", [[], ["--opset", "20"]], ids=["as-is", "opset"])
def test_ge_compile_writes_what_the_api_writes(tmp_path: Path, model: Path,
                                               flags: list[str]) -> None:
    """The command's output is byte-identical to `ge.compile(...).save(...)`, whose graph
    nobody closes: closing comes after everything the command writes."""
    out = tmp_path / "cli.onnx"
    code, _, err = run_ge("compile", str(model), "-o", str(out), "-q",
                          "--report", str(tmp_path / "r.json"), *flags)
    assert code == 0, err
    expected = tmp_path / "api.onnx"
    ge.compile(model, opset=20 if flags else None).save(expected)
    assert out.read_bytes() == expected.read_bytes()


@pytest.mark.builtin_passes
def test_every_command_frees_the_graphs_it_loaded(
        tmp_path: Path, write: Callable[[str, str], Path],
        made_graphs: Callable[[str], list[Graph]],
        capsys: pytest.CaptureFixture[str]) -> None:
    distilbert = _graph_name(DISTILBERT)
    out = str(tmp_path / "out.onnx")
    commands = [
        ["compile", str(DISTILBERT), "-o", out, "--html", str(tmp_path / "p.html"),
         "--verify"],
        ["compile", str(DISTILBERT), "-o", out, "--opset", "20"],
        ["dump", str(DISTILBERT)],
        ["run", str(DISTILBERT)],
        ["diff", str(DISTILBERT), out],
        ["passes", "explain", "MatMulAddFusion", str(DISTILBERT), "--opset", "20"],
    ]
    for command in commands:
        code, _, err = run_ge(*command)
        assert code == 0, (command, err)
        assert made_graphs(distilbert) == [], command
    assert pyatc(args=[f"--model={DISTILBERT}", f"--output={tmp_path / 'atc'}"]) == 0
    assert made_graphs(distilbert) == []
    # a conversion in two steps (functions inlined, then the opset): the middle graph too
    model = tmp_path / "f.onnx"
    onnx.save(silu_model(), model)
    plugin = str(write("p/silu.py", SILU_PASS))
    for command in (["compile", str(model), "-o", out, "--inline-functions", "--opset", "20"],
                    ["passes", "explain", "FastSiLU", str(model), "--pass-path", plugin,
                     "--inline-functions", "--opset", "20"]):
        code, _, err = run_ge(*command)
        assert code == 0, (command, err)
        assert made_graphs(_graph_name(model)) == [], command
    capsys.readouterr()


@pytest.mark.builtin_passes
def test_a_failed_compile_frees_its_graph_too(
        tmp_path: Path, write: Callable[[str, str], Path],
        made_graphs: Callable[[str], list[Graph]]) -> None:
    plugin = write("p/boom.py", """
        from ge.passes import FusionBasePass, PassStage, register_fusion_pass

        @register_fusion_pass(name="Boom", stage=PassStage.AFTER_INFER_SHAPE)
        class Boom(FusionBasePass):
            def run(self, graph, context):
                raise ValueError("boom")
        """)
    code, _, err = run_ge("compile", str(DISTILBERT), "-o", str(tmp_path / "out.onnx"),
                          "--pass-path", str(plugin), "--html", str(tmp_path / "p.html"))
    assert code == 1 and "[E13028]" in err
    assert (tmp_path / "p.html").exists()  # (the failure page, written before closing)
    # (the error's traceback may hold the graph: closed, it holds nothing of the model)
    assert all(g.closed for g in made_graphs(_graph_name(DISTILBERT)))


def test_a_plugin_holding_nodes_sees_their_names_at_exit(tmp_path: Path) -> None:
    """In a `ge` process: the plugin's atexit callback and the finalizer of an object
    holding a node both run, after the command closed the graph; the node answers its
    name and type, and refuses its attributes with GE1001."""
    mark = tmp_path / "mark"
    mark.mkdir()
    plugin = tmp_path / "keeper.py"
    plugin.write_text(KEEPER.format(mark=str(mark)))
    out = tmp_path / "m.onnx"
    result = run_process("-m", "ge", "compile", str(DISTILBERT), "-o", str(out),
                         "--pass-path", str(plugin), "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(f"wrote {out}\n")
    assert (mark / "atexit").read_text() == "input_ids Data: GE1001"
    assert (mark / "del").read_text() == "input_ids"
