"""`make demo`: ge's IR round trip, then two compilations as a user runs them.

1. Generates examples/models/demo_mlp.onnx, loads it with `ge.graph.load`, prints its
   inputs, outputs and operator histogram, saves it again with `Graph.save`, and runs both
   files in onnxruntime on the same input, showing that the outputs are identical.
2. Runs `ge compile --verify` (as `python -m ge`) with `ASCEND_GE_PY_PASS_PATH` pointing at
   the example plugin examples/passes/fuse_matmul_add.py (MatMul+Add -> Gemm; the folder
   also holds GE's ported samples, which the demo does not load): on the MLP, where the
   example pass fuses both layers, and on the vendored DistilBERT exported from PyTorch,
   where the built-in passes remove its Identity nodes and fold its constants. Each prints
   the report (passes, node counts, op histogram) and the verification in onnxruntime; the
   DistilBERT report is also written as JSON.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
from rich.console import Console
from rich.markup import escape
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import onnx
from make_demo_model import DEFAULT_PATH, build_demo_model

import ge.graph

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT_DIR = HERE / "out"
EXAMPLE_PASS = HERE / "passes" / "fuse_matmul_add.py"
DISTILBERT = ROOT / "tests" / "models" / "distilbert_tiny.onnx"  # vendored PyTorch export


def run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def op_histogram(graph: ge.graph.Graph, title: str) -> Table:
    table = Table(title=title)
    table.add_column("op type")
    table.add_column("count", justify="right")
    for op_type, count in Counter(n.type for n in graph.get_all_nodes()).most_common():
        table.add_row(op_type, str(count))
    return table


def ge_compile(console: Console, model: Path, *extra: str) -> bool:
    """Part 2: `ge compile MODEL -o OUT --verify ...` with the example plugin from the
    environment, printed as the user would type it; True when it succeeded."""
    output = OUT_DIR / f"{model.stem}.compiled.onnx"
    args = ["compile", str(model.relative_to(ROOT)), "-o", str(output.relative_to(ROOT)),
            "--verify", *extra]
    env = {**os.environ, "ASCEND_GE_PY_PASS_PATH": str(EXAMPLE_PASS.relative_to(ROOT))}
    console.rule()  # (the command under it, whole: a rule's title is cut to the width)
    console.print(f"$ ASCEND_GE_PY_PASS_PATH={env['ASCEND_GE_PY_PASS_PATH']} ge {' '.join(args)}",
                  markup=False, highlight=False, soft_wrap=True)
    done = subprocess.run([sys.executable, "-m", "ge", *args], cwd=ROOT, env=env, check=False)
    return done.returncode == 0 and output.is_file()


def main() -> int:
    console = Console()
    onnx.save(build_demo_model(), DEFAULT_PATH)
    graph = ge.graph.load(DEFAULT_PATH)
    graph.validate()
    console.print(f"[bold]Loaded[/bold] {DEFAULT_PATH.name}: graph [cyan]{graph.name}[/cyan], "
                  f"{len(graph)} nodes, opsets {graph.opset_imports}")

    io_table = Table(title="Inputs and outputs")
    for column in ("kind", "name", "tensor"):
        io_table.add_column(column)
    for node in graph.get_data_nodes():
        io_table.add_row("input", node.get_output_name(0), escape(repr(node.get_output_desc(0))))
    net_output = graph.get_net_output()
    assert net_output is not None
    for i in range(net_output.get_inputs_size()):
        producer, index = net_output.get_in_data_nodes_and_port_indexes(i)
        io_table.add_row("output", producer.get_output_name(index),
                         escape(repr(net_output.get_input_desc(i))))
    console.print(io_table)

    console.print(op_histogram(graph, "Operator histogram"))

    OUT_DIR.mkdir(exist_ok=True)
    saved = OUT_DIR / "demo_mlp.roundtrip.onnx"
    graph.save(saved)
    feeds = {"features": np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)}
    before, after = run(DEFAULT_PATH, feeds), run(saved, feeds)
    identical = all(np.array_equal(a, b) for a, b in zip(before, after))
    same_bytes = DEFAULT_PATH.read_bytes() == saved.read_bytes()
    results = Table(title="onnxruntime: original vs saved by ge")
    for column in ("output", "shape", "max |original - saved|"):
        results.add_column(column)
    for name, a, b in zip(("probs",), before, after):
        results.add_row(name, str(a.shape), f"{float(np.max(np.abs(a - b))):.1e}")
    console.print(results)
    console.print(f"outputs identical: [bold]{identical}[/bold]; files byte-identical: "
                  f"[bold]{same_bytes}[/bold]")
    console.print(f"saved copy: {saved}")
    console.print()
    mlp_ok = ge_compile(console, DEFAULT_PATH)
    bert_ok = ge_compile(console, DISTILBERT, "--report",
                         str((OUT_DIR / "distilbert_tiny.report.json").relative_to(ROOT)))
    return 0 if identical and mlp_ok and bert_ok else 1


if __name__ == "__main__":
    sys.exit(main())
