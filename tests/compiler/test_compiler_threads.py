"""Eight threads compiling at once: each compilation has its own pass instances."""

from __future__ import annotations

import threading

import pytest

import ge
import ge.graph
from ge.compiler import compile_graph
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from model_paths import shared_model

MODEL = shared_model("mobilenet_like")
THREADS = 8

TAGGING_PASS = """
import threading, time
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity

@register_fusion_pass(name="{name}", stage="{stage}")
class {name}(FusionBasePass):
    def __init__(self):
        self.owner = None
        self.seen = []

    def run(self, graph, context):
        if self.owner is None:
            self.owner = graph.root_graph().get_attr("compile_id")
        assert self.owner == graph.root_graph().get_attr("compile_id"), "instance shared"
        for node in graph.nodes_of_type("Conv"):
            node.set_metadata("{name}_owner", self.owner)
            self.seen.append(node.name)
            time.sleep(0)  # let other threads interleave
        insert_identity(graph, "{name}_" + self.owner + "_" + str(len(self.seen)))
"""


def test_eight_threads_compile_concurrently_with_their_own_instances(
    write, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = write(
        "plugins/tag_a.py", TAGGING_PASS.format(name="TagA", stage="BeforeInferShape")
    )
    write("plugins/tag_b.py", TAGGING_PASS.format(name="TagB", stage="AfterInferShape"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(directory.parent))
    ge.initialize()

    graphs = []
    for index in range(THREADS):
        graph = ge.graph.load(MODEL)
        graph.set_attr("compile_id", f"c{index}")
        graphs.append(graph)
    conv_count = len(graphs[0].nodes_of_type("Conv"))
    assert conv_count > 5
    barrier = threading.Barrier(THREADS)
    reports: dict[int, object] = {}
    errors: list[BaseException] = []

    def compile_one(index: int) -> None:
        try:
            barrier.wait()
            for _ in range(3):  # several compilations per thread, each with fresh instances
                graph = ge.graph.load(MODEL)
                graph.set_attr("compile_id", f"c{index}")
                compile_graph(graph)
            reports[index] = compile_graph(graphs[index])
        except BaseException as exc:  # collected: pytest sees thread failures only this way
            errors.append(exc)

    threads = [threading.Thread(target=compile_one, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for index, graph in enumerate(graphs):
        owner = f"c{index}"
        convs = graph.nodes_of_type("Conv")
        assert {n.get_metadata()["TagA_owner"] for n in convs} == {owner}
        assert {n.get_metadata()["TagB_owner"] for n in convs} == {owner}
        names = {n.name for n in graph.get_direct_nodes()}
        # a fresh instance per compilation: its counter starts at zero in each one
        assert f"TagA_{owner}_{conv_count}" in names
        assert f"TagB_{owner}_{conv_count}" in names
        assert [r.pass_name for r in reports[index].records] == ["TagA", "TagB"]
