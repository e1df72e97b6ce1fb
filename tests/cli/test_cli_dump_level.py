"""`ge compile --dump DIR --dump-level abc` (a typo of a step or pass name) is one GE1202 line
listing what a level may be (JSON with `--json`), nothing written: it dumped nothing, created
no folder, warned nothing and ended with status 0."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import listing, run_ge

from model_paths import shared_model

MODEL = shared_model("mobilenet_like")


@pytest.mark.parametrize("as_json", [False, True])
def test_an_unknown_dump_level_name_is_refused(tmp_path: Path, as_json: bool) -> None:
    before = listing(tmp_path)
    code, out, err = run_ge("compile", str(MODEL), "-o", str(tmp_path / "out.onnx"),
                            "--dump", str(tmp_path / "dumps"), "--dump-level", "abc",
                            *(["--json"] if as_json else []))
    assert code == 1
    message = ("dump level 'abc': 'abc' is part of no step or pass name, so nothing would be "
               "dumped for it; a level is 1 (the input, every step, and every pass that "
               "changed the graph), 2 (the input and every step), 3 (the final graph), 4 "
               "(the input), or '|'-separated parts of these names: steps Input, "
               "BeforeInferShape, InferShape, AfterInferShape, BuiltinFusion, "
               "AfterBuiltinFusionPass, OriginGraphOptimize, AfterOriginGraphOptimize, "
               "FinalValidation; passes ")
    if as_json:
        data = json.loads(out)
        assert (data["code"], data["type"]) == ("GE1202", "CompilerOptionError")
        assert data["message"].startswith(message)
    else:
        assert out == "" and err.startswith(f"ge: [GE1202] {message}")
        assert err.count("\n") == 1
    assert listing(tmp_path) == before


INSERTS_IDENTITY = """
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity

@register_fusion_pass(name="InsertsIdentity", stage="AfterInferShape")
class InsertsIdentity(FusionBasePass):
    def run(self, graph, context):
        if graph.root_graph() is graph:
            insert_identity(graph, "inserted")
"""


def test_a_plugin_pass_name_is_a_dump_level(tmp_path: Path,
                                            write: Callable[[str, str], Path]) -> None:
    plugin = write("plugins/ident.py", INSERTS_IDENTITY)
    code, _, err = run_ge("compile", str(MODEL), "-o", str(tmp_path / "out.onnx"),
                          "--no-builtin", "--pass-path", str(plugin),
                          "--dump", str(tmp_path / "dumps"), "--dump-level", "InsertsIdentity")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "dumps").glob("*.txt")) == [
        "ge_0000_AfterInferShape_InsertsIdentity.txt"]
