"""`ge compile --html FILE` and `ge diff A B [--html FILE] [--json]`: the page's markup
(highlighted removed/new/matched nodes, the per-pass list, the search box, no external
URLs), both layout engines, large graphs, bad inputs, and the page in a headless browser."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto, helper, numpy_helper

import ge.graph
from ge.cli import graph_diff, html_page
from ge.cli.layout import ENGINE_ENV, builtin_layout
from node_counting import onnx_node_counts

pytestmark = pytest.mark.builtin_passes

ROOT = Path(__file__).resolve().parents[2]
MOBILENET_BN = ROOT / "tests" / "models" / "mobilenet_like_bn.onnx"
FUSE_MATMUL_ADD = ROOT / "examples" / "passes" / "fuse_matmul_add.py"


class _Nodes(HTMLParser):
    """The `g.node` elements of each SVG (by svg id), the pass list items, the inputs and
    every src/href attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.svg: str | None = None
        self.nodes: dict[str, dict[str, dict[str, str]]] = {}
        self.engines: dict[str, str] = {}
        self.passes: list[str] = []
        self.inputs: list[dict[str, str]] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for name in ("src", "href", "xlink:href"):
            if name in a:
                self.links.append(a[name])
        if tag == "svg":
            self.svg = a.get("id")
            if self.svg:
                self.engines[self.svg] = a.get("data-engine", "")
        elif tag == "g" and "node" in a.get("class", "").split() and self.svg:
            self.nodes.setdefault(self.svg, {})[a["data-key"]] = a
        elif tag == "li" and "pass" in a.get("class", "").split():
            self.passes.append(a["data-pass"])
        elif tag == "input":
            self.inputs.append(a)

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.svg = None


def _parse(path: Path) -> _Nodes:
    parser = _Nodes()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _classes(node: dict[str, str]) -> set[str]:
    return set(node["class"].split())


def _self_contained(text: str) -> None:
    assert not re.search(r"https?://", text), "the page names an external URL"
    assert not re.search(r"<(link|img|iframe)\b", text)
    assert not re.search(r"<script[^>]+src=", text)
    assert "@import" not in text and "url(http" not in text


def _matmul_add_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         helper.make_node("Add", ["m", "b"], ["s"], name="add"),
         helper.make_node("Relu", ["s"], ["y"], name="relu")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(np.eye(4, dtype=np.float32) * 3, "w"),
         numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def builtin_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENGINE_ENV, "builtin")


@pytest.mark.usefixtures("builtin_engine")
def test_compile_html_marks_the_batchnorm_folding(tmp_path: Path) -> None:
    out, html_file = tmp_path / "out.onnx", tmp_path / "page.html"
    code, stdout, stderr = run_ge("compile", str(MOBILENET_BN), "-o", str(out),
                                  "--html", str(html_file))
    assert code == 0, stderr
    assert f"wrote page {html_file}" in stdout
    text = html_file.read_text(encoding="utf-8")
    _self_contained(text)
    parsed = _parse(html_file)
    assert parsed.engines == {"svg-b": "builtin", "svg-a": "builtin"}
    before, after = parsed.nodes["svg-b"], parsed.nodes["svg-a"]
    batchnorms = [k for k, n in before.items() if n["data-op"] == "BatchNormalization"]
    assert len(batchnorms) == 9
    for key in batchnorms:  # folded away: removed, and matched by the rewrite
        assert {"removed", "matched"} <= _classes(before[key])
        assert key not in after
    # The folded Conv keeps its name: the same node on both sides, matched and changed
    # (its weights); what the fold added are the folded weights.
    conv = "/stem/stem.0/Conv"
    assert {"changed", "matched"} <= _classes(before[conv])
    assert "changed" in _classes(after[conv])
    assert after[conv].get("data-origin-pass") == "ConvBatchNormFusion"
    new = {k: n for k, n in after.items() if "added" in _classes(n)}
    assert "stem.0.weight_folded" in new and "stem.1.bias_folded" in new
    assert all(n.get("data-origin-pass") == "ConvBatchNormFusion" for n in new.values())
    assert not any("removed" in _classes(n) for n in after.values())
    assert not any("added" in _classes(n) for n in before.values())
    assert "ConvBatchNormFusion" in parsed.passes
    assert parsed.passes.index("ConvBatchNormFusion") == 0
    assert [i for i in parsed.inputs if i.get("id") == "search"]
    data = json.loads(re.search(r'<script type="application/json" id="ge-data">(.*?)</script>',
                                text, re.S).group(1))
    fusion = data["passes"][0]
    assert fusion["pass"] == "ConvBatchNormFusion"
    assert set(batchnorms) <= set(fusion["removed"]) and set(batchnorms) <= set(fusion["matched"])
    assert set(new) <= set(fusion["added"])
    assert data["b"]["/stem/stem.1/BatchNormalization"][1] == "BatchNormalization"
    assert listing(tmp_path) == ["out.onnx", "page.html"]
    # The pane headings and the summary count as the compile report and onnx do: nodes
    # (graph.node of the file, constants apart), never the inputs and outputs drawn.
    source, written = onnx.load(MOBILENET_BN), onnx.load(out)
    constants = sum(n.op_type == "Constant" for n in source.graph.node)
    before_size = (f"{len(source.graph.node) - constants} node(s), "
                   f"{len(source.graph.initializer) + constants} constant(s)")
    after_size = f"{len(written.graph.node)} node(s), {len(written.graph.initializer)} constant(s)"
    headings = re.findall(r"<h2>(?:Before|After) <small>\((.*?)\)</small></h2>", text)
    assert headings == [before_size, after_size]
    assert f"Before: {before_size}, After: {after_size}" in text


@pytest.mark.usefixtures("builtin_engine")
def test_compile_html_subtitle_says_the_counts_of_the_summary_line(tmp_path: Path) -> None:
    """The subtitle said `nodes 6 → 5` of control_flow, the main graph's operators only: it
    states the change as `ge compile`'s summary line does, bodies and constants included."""
    source = ROOT / "tests" / "models" / "control_flow.onnx"
    out, html_file = tmp_path / "out.onnx", tmp_path / "page.html"
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out),
                                  "--html", str(html_file))
    assert code == 0, stderr
    (b, bs, bc), (a, as_, ac) = onnx_node_counts(onnx.load(source)), onnx_node_counts(
        onnx.load(out))
    assert bs and bc  # bodies and constants, which the subtitle left out
    change = (f"nodes {b} → {a} ({a - b:+d}) and {bs} → {as_} ({as_ - bs:+d}) in subgraphs, "
              f"constants {bc} → {ac}")
    assert f"\n{change}; " in stdout
    subtitle = re.search(r'<p class="sub">(.*?)</p>', html_file.read_text(encoding="utf-8"))
    assert subtitle is not None
    assert html.unescape(subtitle.group(1)).startswith(f"{source} → {out}; {change}; ")


@pytest.mark.usefixtures("builtin_engine")
def test_compile_html_with_the_fuse_matmul_add_plugin(tmp_path: Path) -> None:
    model = tmp_path / "mm.onnx"
    onnx.save(_matmul_add_model(), model)
    html_file = tmp_path / "page.html"
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                                  "--no-builtin", "--pass-path", str(FUSE_MATMUL_ADD),
                                  "--html", str(html_file), "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["html"] == str(html_file)
    parsed = _parse(html_file)
    before, after = parsed.nodes["svg-b"], parsed.nodes["svg-a"]
    assert {"removed", "matched"} <= _classes(before["mm"])
    assert {"removed", "matched"} <= _classes(before["add"])
    gemms = [n for n in after.values() if n["data-op"] == "Gemm"]
    assert len(gemms) == 1 and "added" in _classes(gemms[0])
    assert "changed" in _classes(before["relu"]) and "changed" in _classes(after["relu"])
    assert parsed.passes == ["FuseMatMulAddByHand"]
    _self_contained(html_file.read_text(encoding="utf-8"))


WRONG_GEMM = """\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="WrongGemm", stage=PassStage.AFTER_INFER_SHAPE)
class WrongGemm(PatternFusionPass):
    @pattern
    def matmul_add(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2], beta=2.0)  # twice the bias: wrong
"""


@pytest.mark.usefixtures("builtin_engine")
def test_a_failed_compilation_still_writes_its_page(tmp_path: Path) -> None:
    """Trial P: a pass verification finds wrong left no page (only --report recorded the
    failure): the page shows the graph as the failure left it, the pass's change marked;
    the model is not written. A failure before the pipeline starts writes no page."""
    model, out, page = tmp_path / "mm.onnx", tmp_path / "o.onnx", tmp_path / "page.html"
    onnx.save(_matmul_add_model(), model)
    plugin = tmp_path / "wrong_gemm.py"
    plugin.write_text(WRONG_GEMM)
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "--no-builtin",
                             "--pass-path", str(plugin), "--verify", "each-pass",
                             "--html", str(page))
    assert code == 1 and stderr.startswith("ge: [GE1603] the outputs differ from the "
                                           "original's after pass WrongGemm")
    assert not out.exists()
    text = page.read_text(encoding="utf-8")
    assert "ge compile mm.onnx: FAILED" in text and "At the failure" in text
    assert html.escape("[GE1603] the outputs differ", quote=False) in text
    parsed = _parse(page)
    assert parsed.passes == ["WrongGemm"]
    gemms = [n for n in parsed.nodes["svg-a"].values() if n["data-op"] == "Gemm"]
    assert len(gemms) == 1 and "added" in _classes(gemms[0])
    _self_contained(text)
    page.unlink()
    # the compiled model failing the final verification: the page shows it
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "--no-builtin",
                             "--pass-path", str(plugin), "--verify", "--html", str(page))
    assert code == 1 and stderr.startswith("ge: [GE1603] the compiled model's outputs differ")
    gemms = [n for n in _parse(page).nodes["svg-a"].values() if n["data-op"] == "Gemm"]
    assert len(gemms) == 1 and "added" in _classes(gemms[0]) and not out.exists()
    page.unlink()
    code, _, _ = run_ge("compile", str(tmp_path / "absent.onnx"), "-o", str(out), "--html",
                        str(page))
    assert code == 1 and not page.exists()


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="graphviz dot is not on PATH (apt-get install graphviz)")
def test_compile_html_with_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENGINE_ENV, "dot")
    html_file = tmp_path / "page.html"
    code, _, stderr = run_ge("compile", str(MOBILENET_BN), "-o", str(tmp_path / "o.onnx"),
                             "--html", str(html_file))
    assert code == 0, stderr
    parsed = _parse(html_file)
    assert parsed.engines == {"svg-b": "dot", "svg-a": "dot"}
    assert "removed" in _classes(parsed.nodes["svg-b"]["/stem/stem.1/BatchNormalization"])
    _self_contained(html_file.read_text(encoding="utf-8"))


def test_a_bad_layout_variable_is_refused_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`GE_HTML_LAYOUT=bogus` was taken as auto in silence (trial QQ): GE1202 before the
    model is read, nothing written, for `ge compile --html` and `ge diff --html` alike."""
    monkeypatch.setenv(ENGINE_ENV, "bogus")
    out, page = tmp_path / "o.onnx", tmp_path / "page.html"
    expected = ("ge: [GE1202] GE_HTML_LAYOUT must be one of auto, dot, builtin (unset: auto), "
                "got 'bogus'\n")
    code, _, stderr = run_ge("compile", str(tmp_path / "absent.onnx"), "-o", str(out),
                             "--html", str(page))
    assert (code, stderr) == (1, expected)
    code, _, stderr = run_ge("diff", str(MOBILENET_BN), str(MOBILENET_BN), "--html", str(page))
    assert (code, stderr) == (1, expected)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(ENGINE_ENV, " Builtin ")  # (case and spaces do not matter)
    code, _, stderr = run_ge("diff", str(MOBILENET_BN), str(MOBILENET_BN), "--html", str(page))
    assert code == 0, stderr


def test_dot_asked_for_by_name_but_missing_is_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `GE_HTML_LAYOUT=dot` and no dot on PATH the page says it used the built-in
    layout, and so does the terminal now (it said nothing)."""
    monkeypatch.setenv(ENGINE_ENV, "dot")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # (no dot there)
    page = tmp_path / "page.html"
    code, _, stderr = run_ge("diff", str(MOBILENET_BN), str(MOBILENET_BN), "--html", str(page))
    assert code == 0, stderr
    assert ("GE_HTML_LAYOUT=dot: graphviz dot is not on PATH: used the built-in layout"
            in stderr)
    assert _parse(page).engines == {"svg-b": "builtin", "svg-a": "builtin"}


def test_the_page_assets_are_package_data() -> None:
    """The page's template, CSS and JavaScript are files in ge/cli/html read with
    importlib.resources: pyproject.toml's package-data must name each, or an installed ge
    writes no page."""
    import fnmatch

    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["ge"]
    package = ROOT / "src" / "ge"
    assets = sorted(p.relative_to(package).as_posix() for p in (package / "cli/html").iterdir())
    assert assets == ["cli/html/page.css", "cli/html/page.html", "cli/html/page.js"]
    assert [a for a in assets if not any(fnmatch.fnmatch(a, p) for p in patterns)] == []


def test_the_built_in_layout_places_layers_top_down() -> None:
    # a diamond and a skip edge: every edge goes down, boxes of a layer do not overlap
    sizes = [(80.0, 30.0)] * 5
    edges = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (0, 4)]
    placed = builtin_layout(sizes, edges)
    ys = [y for _, y in placed.centres]
    assert all(ys[u] < ys[v] for u, v in edges)
    assert abs(placed.centres[1][0] - placed.centres[2][0]) >= 80
    assert all(len(path) >= 4 and (len(path) - 1) % 3 == 0 for path in placed.edges)


@pytest.mark.usefixtures("builtin_engine")
def test_a_large_graph_still_gives_a_page_quickly(tmp_path: Path) -> None:
    count = 3600
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [f"v{i}"], [f"v{i + 1}"],
                              name=f"n{i}") for i in range(count)]
    graph = helper.make_graph(nodes, "big",
                              [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(f"v{count}", TensorProto.FLOAT,
                                                             [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    snap = graph_diff.snapshot(ge.graph.load(model))
    started = time.perf_counter()
    text = html_page.render_page(title="big", subtitle="", before=snap, after=snap)
    assert time.perf_counter() - started < 60
    assert f"more than {html_page.MAX_DRAWN}" in text
    assert text.count('class="node ') <= 2 * html_page.MAX_DRAWN
    data = json.loads(re.search(r'<script type="application/json" id="ge-data">(.*?)</script>',
                                text, re.S).group(1))
    # every node is in the data the search reads (name, type); only those drawn have their
    # inputs and outputs (trial H: a 213k-node model made a 148 MB page, 143 MB of it data)
    assert set(data["b"]) == set(snap.nodes) and data["b"]["n3599"][:2] == ["n3599", "Relu"]
    drawn = set(re.findall(r'<g class="node [^"]*" data-key="([^"]+)"', text))
    assert drawn and all(data["b"][k][3] for k in drawn if k.startswith("n"))
    assert all(data["b"][k][3:6] == [[], [], {}] for k in snap.nodes if k not in drawn)


def test_diff_text_json_and_html(tmp_path: Path, builtin_engine: None) -> None:
    compiled = tmp_path / "out.onnx"
    assert run_ge("compile", str(MOBILENET_BN), "-o", str(compiled))[0] == 0
    code, stdout, stderr = run_ge("diff", str(MOBILENET_BN), str(compiled))
    assert code == 0, stderr
    assert "Removed (in A, not in B)" in stdout
    assert "/stem/stem.1/BatchNormalization  BatchNormalization" in stdout
    assert "BatchNormalization │      9 │     0 │     -9" in stdout
    code, stdout, _ = run_ge("diff", str(MOBILENET_BN), str(compiled), "--json")
    data = json.loads(stdout)
    removed = {r["key"]: r["op"] for r in data["removed"]}
    assert removed["/stem/stem.1/BatchNormalization"] == "BatchNormalization"
    assert data["ops_delta"]["BatchNormalization"] == -9
    assert data["html"] is None and data["warnings"] == []
    assert {"a", "b", "nodes_a", "nodes_b", "added", "changed", "ops_a", "ops_b"} <= set(data)
    code, stdout, _ = run_ge("diff", str(compiled), str(compiled), "--json")
    same = json.loads(stdout)
    assert (same["removed"], same["added"], same["changed"], same["ops_delta"]) == ([], [], [],
                                                                                   {})
    html_file = tmp_path / "diff.html"
    code, stdout, stderr = run_ge("diff", str(MOBILENET_BN), str(compiled), "--html",
                                  str(html_file))
    assert code == 0, stderr and f"wrote page {html_file}" in stdout
    parsed = _parse(html_file)
    before, after = parsed.nodes["svg-b"], parsed.nodes["svg-a"]
    assert "removed" in _classes(before["/stem/stem.1/BatchNormalization"])
    # the saved model keeps ge.origin_nodes: the folded nodes show as matched
    assert "matched" in _classes(before["/stem/stem.1/BatchNormalization"])
    assert any("added" in _classes(n) for n in after.values())
    assert parsed.passes == []
    _self_contained(html_file.read_text(encoding="utf-8"))



def test_diff_shows_attribute_values(tmp_path: Path) -> None:
    """Trial AD: `ge diff` said "c1 Const: attributes" for a constant folded 0.5 -> 1.5, and
    listed an added LayerNormalization without its (wrong) epsilon."""
    from onnx import helper, numpy_helper

    def model(scale: float, epsilon: float, path: Path) -> Path:
        graph = helper.make_graph(
            [helper.make_node("Mul", ["x", "c1"], ["m"], name="mul"),
             helper.make_node("LayerNormalization", ["m", "g"], ["y"], name="ln",
                              epsilon=epsilon)], "g",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])],
            [numpy_helper.from_array(np.float32(scale), "c1"),
             numpy_helper.from_array(np.ones(4, np.float32), "g")])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    a = model(0.5, 1e-5, tmp_path / "a.onnx")
    b = model(1.5, 0.25, tmp_path / "b.onnx")
    code, stdout, stderr = run_ge("diff", str(a), str(b))
    assert code == 0, stderr
    assert ("  c1  Const: attributes (value: tensor float scalar 0.5 → tensor float scalar "
            "1.5)") in stdout.splitlines()
    assert "  ln  LayerNormalization: attributes (epsilon: " in stdout
    assert stdout.split("  ln  LayerNormalization: attributes (epsilon: ")[1].split(
        "\n")[0].endswith(" → 0.25)")
    data = json.loads(run_ge("diff", str(a), str(b), "--json")[1])
    changed = {row["key"]: row["attributes_changed"] for row in data["changed"]}
    assert changed["c1"] == [{"name": "value", "a": "tensor float scalar 0.5",
                              "b": "tensor float scalar 1.5"}]
    b2 = tmp_path / "b2.onnx"
    renamed = onnx.load(b)
    renamed.graph.node[1].name = "ln2"
    onnx.save(renamed, b2)
    code, stdout, _ = run_ge("diff", str(b), str(b2))
    assert "  ln2  LayerNormalization (epsilon=0.25)" in stdout.splitlines()
    assert {"key": "ln2"}.items() <= json.loads(run_ge("diff", str(b), str(b2), "--json")[1])[
        "added"][0].items()


def test_diff_escapes_names_and_says_a_large_tensor_changed(tmp_path: Path) -> None:
    """Trial AE: a node named with a terminal escape sequence was printed raw, a changed
    300x300 weight read "tensor float 300×300 → tensor float 300×300", and a float32
    epsilon as 0.0010000000474974513."""
    from onnx import helper, numpy_helper

    def model(weight: float, name: str, path: Path) -> Path:
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("LayerNormalization", ["m", "g"], ["y"], name=name,
                              epsilon=1e-3)], "g",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 300])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 300])],
            [numpy_helper.from_array(np.full((300, 300), weight, np.float32), "w"),
             numpy_helper.from_array(np.ones(300, np.float32), "g")])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    a = model(1.0, "ln", tmp_path / "a.onnx")
    b = model(2.0, "\x1b]0;title\x07ln", tmp_path / "b.onnx")
    code, stdout, stderr = run_ge("diff", str(a), str(b))
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert "  w  Const: attributes (value: tensor float 300×300 (other values))" in lines
    assert "  \\x1b]0;title\\x07ln  LayerNormalization (epsilon=0.001)" in lines
    assert "\x1b" not in stdout


def test_diff_pairs_a_constant_the_compilation_renamed(tmp_path: Path) -> None:
    """A `Constant` operator `k` is the initializer `k_out` (named by the value it gives)
    once compiled: `ge diff` listed it removed and added and its reader changed (trial XX:
    every constant of a compiled model); now a rename, the reader unchanged. A constant of
    another value under that name is no rename."""
    k = helper.make_tensor("kv", TensorProto.FLOAT, [2], [1.0, 2.0])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["k_out"], name="k", value=k),
         helper.make_node("Identity", ["x"], ["i"], name="noop"),
         helper.make_node("Add", ["i", "k_out"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    source, compiled = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    assert run_ge("compile", str(source), "-o", str(compiled))[0] == 0
    code, stdout, stderr = run_ge("diff", str(source), str(compiled), "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["renamed"] == [{"a": "k", "b": "k_out"}]
    assert [r["key"] for r in data["removed"]] == ["noop"] and data["added"] == []
    assert [(r["key"], r["what"]) for r in data["changed"]] == [("add", ["inputs"])]
    code, stdout, _ = run_ge("diff", str(source), str(compiled))
    assert "Constants renamed (the same value, named by it in B): 1\n  k → k_out\n" in stdout
    assert stdout.rstrip().endswith(
        "1 removed, 0 added, 1 changed (nodes matched by name; 1 constant(s) renamed)")
    other = onnx.load(compiled)  # the constant holding another value: removed and added
    other.graph.initializer[0].CopyFrom(numpy_helper.from_array(
        np.array([5.0, 6.0], np.float32), "k_out"))
    onnx.save(other, compiled)
    _, stdout, _ = run_ge("diff", str(source), str(compiled), "--json")
    data = json.loads(stdout)
    assert data["renamed"] == [] and {r["key"] for r in data["removed"]} == {"k", "noop"}

def test_diff_lists_a_limited_number_of_nodes_per_section(tmp_path: Path,
                                                          builtin_engine: None) -> None:
    """A diff of a 150k-node model and its compiled file printed 134,975 lines (trial DD):
    each section lists `--limit` nodes (50 by default), then counts the rest; 0 lists all,
    and --json all of them whatever the limit. A negative limit is a usage error."""
    compiled = tmp_path / "out.onnx"
    assert run_ge("compile", str(MOBILENET_BN), "-o", str(compiled))[0] == 0
    _, stdout, _ = run_ge("diff", str(MOBILENET_BN), str(compiled), "--json")
    removed = len(json.loads(stdout)["removed"])
    assert removed > 5
    code, stdout, stderr = run_ge("diff", str(MOBILENET_BN), str(compiled), "--limit", "5")
    assert code == 0, stderr
    section = stdout.split("Removed (in A, not in B)")[1].split("Added (in B")[0]
    assert len([line for line in section.splitlines() if line.startswith("  ")]) == 6
    assert f"  ... {removed - 5} more (--limit 0 lists them all)" in section
    _, stdout, _ = run_ge("diff", str(MOBILENET_BN), str(compiled), "--limit", "0")
    assert "more (--limit 0" not in stdout
    from ge.cli.compile_report import TOP_OPS, ops_table  # the operator table: all with 0 too
    before = {f"Op{i}": i + 1 for i in range(TOP_OPS + 5)}
    assert ops_table(before, {}).row_count == TOP_OPS
    assert ops_table(before, {}, top=0).row_count == TOP_OPS + 5
    _, stdout, _ = run_ge("diff", str(MOBILENET_BN), str(compiled), "--limit", "5", "--json")
    assert len(json.loads(stdout)["removed"]) == removed
    code, _, stderr = run_ge("diff", str(MOBILENET_BN), str(compiled), "--limit", "-1")
    assert code == 2 and "--limit" in stderr


def test_bad_inputs_are_one_line_errors_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    code, stdout, stderr = run_ge("compile", str(MOBILENET_BN), "-o", str(out), "--html",
                                  str(tmp_path / "missing" / "page.html"))
    assert code == 1 and stdout == ""
    assert stderr.startswith("ge: [GE1701] cannot write the HTML page") and stderr.count("\n") == 1
    code, _, stderr = run_ge("compile", str(MOBILENET_BN), "-o", str(out), "--html", str(out))
    assert code == 1 and "it is the output model" in stderr
    not_onnx = tmp_path / "model.onnx"
    not_onnx.write_text("not a model")
    code, _, stderr = run_ge("compile", str(not_onnx), "-o", str(out), "--html",
                             str(tmp_path / "page.html"))
    assert code == 1 and stderr.startswith("ge: [GE1101] ") and stderr.count("\n") == 1
    code, _, stderr = run_ge("diff", str(not_onnx), str(MOBILENET_BN), "--html",
                             str(tmp_path / "diff.html"))
    assert code == 1 and stderr.startswith("ge: [GE1101] ") and stderr.count("\n") == 1
    code, _, stderr = run_ge("diff", str(MOBILENET_BN), str(MOBILENET_BN), "--html",
                             str(tmp_path / "nope" / "diff.html"))
    assert code == 1 and stderr.startswith("ge: [GE1701] ")
    code, stdout, _ = run_ge("diff", str(tmp_path / "absent.onnx"), str(MOBILENET_BN),
                             "--json")
    assert code == 1 and json.loads(stdout)["code"] == "GE1102"
    assert listing(tmp_path) == ["model.onnx"]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None,
                    reason="chromium not installed; CI installs it with apt-get")
def test_the_page_runs_in_a_headless_browser(tmp_path: Path, builtin_engine: None) -> None:
    html_file = tmp_path / "page.html"
    code, _, stderr = run_ge("compile", str(MOBILENET_BN), "-o", str(tmp_path / "o.onnx"),
                             "--html", str(html_file))
    assert code == 0, stderr
    browser = _chromium()
    assert browser is not None
    common = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
              "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}",
              "--enable-logging=stderr", "--v=0", "--window-size=1400,900"]
    shot = tmp_path / "shot.png"
    url = html_file.as_uri()
    run = subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True,
                         text=True, timeout=120, check=False)
    assert shot.is_file() and shot.stat().st_size > 1000, run.stderr[-2000:]
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                         timeout=120, check=False)
    errors = [line for line in (run.stderr + dom.stderr).splitlines()
              if "Uncaught" in line or ("CONSOLE" in line and "error" in line.lower())]
    assert errors == []
    # the script ran: it marked the page ready and counted the nodes it indexed
    assert 'data-ready="1"' in dom.stdout, dom.stderr[-2000:]
    drawn = re.search(r'data-nodes="(\d+)/(\d+)"', dom.stdout)
    assert drawn is not None and int(drawn.group(1)) > int(drawn.group(2)) > 0


def _ifs(second_then: str) -> onnx.ModelProto:
    """a = If(c, Relu(x), Neg(x)), b = If(c, `second_then`(x), Neg(x)): every body named
    `sub_graph` and its node unnamed, as exporters and hand-built models write them."""
    vi = helper.make_tensor_value_info

    def body(op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["x"], ["o"])], "sub_graph", [],
                                 [vi("o", TensorProto.FLOAT, [2])])

    nodes = [helper.make_node("If", ["c"], ["a"], name="if1", then_branch=body("Relu"),
                              else_branch=body("Neg")),
             helper.make_node("If", ["c"], ["b"], name="if2", then_branch=body(second_then),
                              else_branch=body("Neg"))]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2]),
                                           vi("c", TensorProto.BOOL, [])],
                              [vi("a", TensorProto.FLOAT, [2]), vi("b", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_nodes_of_bodies_of_one_name_are_kept_apart(tmp_path: Path) -> None:
    """Node keys were `sub_graph::Relu` for both Relus (and both Negs): the snapshot kept one
    of each, and the diff could not say which body changed. They are keyed by where the
    body is (`if1.then_branch::Relu`); the JSON keeps `graph` the body's name."""
    snap = graph_diff.snapshot(ge.graph.load(_ifs("Relu")))
    assert sorted(k for k in snap.nodes if "::" in k and "NetOutput" not in k) == [
        "if1.else_branch::Neg", "if1.then_branch::Relu", "if2.else_branch::Neg",
        "if2.then_branch::Relu"]
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_ifs("Relu"), a)
    onnx.save(_ifs("Abs"), b)
    code, stdout, stderr = run_ge("diff", str(a), str(b), "--json")
    assert code == 0, stderr
    payload = json.loads(stdout)
    assert [(r["key"], r["graph"], r["graph_path"], r["op"]) for r in payload["removed"]] == [
        ("if2.then_branch::Relu", "sub_graph", "if2.then_branch", "Relu")]
    assert [(r["key"], r["op"]) for r in payload["added"]] == [("if2.then_branch::Abs", "Abs")]


def test_a_graph_output_read_by_another_node_has_its_declared_type_on_every_edge(
        tmp_path: Path, builtin_engine: None) -> None:
    """Trial YY: `Relu:0: ? ?` on the edge to Neg, `float [n, 4]` on the edge to the output:
    the type a model declares on a graph output is the value's, whoever reads it."""
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 4]) for n in "xyz"]
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu"),
         helper.make_node("Neg", ["y"], ["z"], name="neg")], "g", vi[:1], vi[1:]),
        opset_imports=[helper.make_opsetid("", 18)])
    path, page = tmp_path / "m.onnx", tmp_path / "page.html"
    onnx.save(model, path)
    snap = graph_diff.snapshot(ge.graph.load(path))
    assert snap.nodes["neg"].inputs == [("relu", 0, "y", "[n, 4]", "float")]
    assert snap.nodes["relu"].outputs == [("y", "[n, 4]", "float")]
    code, _, stderr = run_ge("diff", str(path), str(path), "--html", str(page))
    assert code == 0, stderr
    titles = re.findall(r"<title>([^<]*)", page.read_text(encoding="utf-8"))
    # (both sides of the page draw both edges of y)
    assert sorted(t for t in titles if t.startswith("y:")) == ["y: float [n, 4]"] * 4
