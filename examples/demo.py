"""`make demo`: load the bundled model into ge's IR, save it losslessly, then compile it with
an example pass plugin.

1. Generates examples/models/demo_mlp.onnx, loads it with `ge.graph.load`, prints its
   inputs, outputs and operator histogram, saves it again with `Graph.save`, and runs both
   files in onnxruntime on the same input, showing that the outputs are identical.
2. Points `ASCEND_GE_PY_PASS_PATH` at the single plugin file examples/passes/fuse_matmul_add.py
   (a MatMul+Add -> Gemm fusion; the folder also holds GE's ported samples, which the demo
   does not load), compiles the model, prints each pass run and the new histogram, and checks
   the compiled model against the original in onnxruntime.
"""

from __future__ import annotations

import os
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
from ge.compiler import compile_graph

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "out"
EXAMPLE_PASS = HERE / "passes" / "fuse_matmul_add.py"


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


def compile_with_example_pass(console: Console, feeds: dict[str, np.ndarray],
                              expected: list[np.ndarray]) -> bool:
    """Part 2: the plugin chain (env variable -> discovery -> registry -> scheduler)."""
    os.environ["ASCEND_GE_PY_PASS_PATH"] = str(EXAMPLE_PASS)  # read once, at initialisation
    graph = ge.graph.load(DEFAULT_PATH)
    report = compile_graph(graph)
    runs = Table(title=f"Compiling with ASCEND_GE_PY_PASS_PATH={escape(str(EXAMPLE_PASS))}")
    for column in ("pass", "stage", "outcome", "changed"):
        runs.add_column(column)
    for record in report.records:
        runs.add_row(record.pass_name, record.stage, record.outcome.value,
                     "yes" if record.changed else "-")
    console.print(runs)
    console.print(op_histogram(graph, "Operator histogram after compiling"))
    compiled = OUT_DIR / "demo_mlp.compiled.onnx"
    graph.save(compiled)
    got = run(compiled, feeds)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(got, expected))
    close = all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, expected))
    console.print(f"compiled model vs original: max |diff| {diff:.1e}, "
                  f"close: [bold]{close}[/bold]")
    console.print(f"compiled copy: {compiled}")
    return close


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
    compiled_ok = compile_with_example_pass(console, feeds, before)
    return 0 if identical and compiled_ok else 1


if __name__ == "__main__":
    sys.exit(main())
