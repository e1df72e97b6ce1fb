"""Benchmark ONNX I/O and graph building of `ge.graph` against peers measured in the same run.

1. load + save of a generated 100k-node model: `ge.graph.load` + `Graph.save` against
   `onnx.load` + `onnx.save` (goal: within 2x);
2. building a 1M-node graph through the API: `ge.graph.Graph.add_node/add_data_edge` against
   `onnx_ir` (the IR of the PyTorch exporter, the `bench` extra), time and peak memory, each in
   a fresh process.

Run: `make bench` or `.venv/bin/python benchmarks/bench_io.py [--nodes N] [--build-nodes M]`.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, best_time, print_table, run_child

import ge.graph


def make_chain_model(num_nodes: int) -> onnx.ModelProto:
    """A chain of Add/Relu/LeakyRelu/Mul nodes; every fourth node reads a small initializer."""
    rng = np.random.default_rng(0)
    nodes, initializers = [], []
    previous = "x"
    for i in range(num_nodes):
        out = f"v{i}"
        kind = i % 4
        if kind == 0:
            weight = f"w{i}"
            initializers.append(helper.make_tensor(
                weight, TensorProto.FLOAT, [16], rng.random(16, dtype=np.float32).tobytes(),
                raw=True))
            nodes.append(helper.make_node("Add", [previous, weight], [out], name=f"n{i}"))
        elif kind == 1:
            nodes.append(helper.make_node("Relu", [previous], [out], name=f"n{i}"))
        elif kind == 2:
            nodes.append(helper.make_node("LeakyRelu", [previous], [out], name=f"n{i}",
                                          alpha=0.1))
        else:
            nodes.append(helper.make_node("Mul", [previous, f"v{i - 2}"], [out], name=f"n{i}"))
        previous = out
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [16])],
        initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def bench_load_save(num_nodes: int, folder: Path) -> Row:
    source = folder / "chain.onnx"
    onnx.save(make_chain_model(num_nodes), source)
    ge_out, onnx_out = folder / "ge.onnx", folder / "onnx.onnx"
    ge_time = best_time(lambda: ge.graph.load(source).save(ge_out))
    onnx_time = best_time(lambda: onnx.save(onnx.load(source), onnx_out))
    assert ge_out.read_bytes() == source.read_bytes(), "ge's round trip changed the model"
    return Row(f"load+save {num_nodes:,}-node model", ge_time, "onnx.load+save", onnx_time,
               goal=2.0)


def build_ge(num_nodes: int) -> None:
    graph = ge.graph.Graph("built")
    data = graph.add_node("Data", num_outputs=1, attrs={"index": 0})
    previous = data
    for i in range(num_nodes):
        node = graph.add_node("Relu", name=f"n{i}", num_inputs=1)
        graph.add_data_edge(previous, 0, node, 0)
        previous = node
    out = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    graph.add_data_edge(previous, 0, out, 0)


def build_onnx_ir(num_nodes: int) -> None:
    import onnx_ir as ir

    x = ir.Value(name="x")
    graph = ir.Graph(inputs=[x], outputs=[], nodes=[], opset_imports={"": 17})
    previous = x
    for i in range(num_nodes):
        node = ir.Node("", "Relu", inputs=[previous], num_outputs=1, name=f"n{i}")
        graph.append(node)
        previous = node.outputs[0]
    graph.outputs.append(previous)


def peak_rss_kib() -> int:
    """This process's peak resident memory. Linux's VmHWM starts afresh at exec, unlike
    ru_maxrss, which a child inherits from the process that started it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(kind: str, num_nodes: int) -> None:
    """Build in this fresh process and report time and peak RSS growth."""
    if kind == "onnx_ir":
        import onnx_ir  # noqa: F401  (imported before measuring, as ge is)

    before = peak_rss_kib()
    start = time.perf_counter()
    (build_ge if kind == "ge" else build_onnx_ir)(num_nodes)
    elapsed = time.perf_counter() - start
    peak = peak_rss_kib() - before
    print(json.dumps({"seconds": elapsed, "peak_mib": peak / 1024}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--build-nodes", type=int, default=1_000_000)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(bench_load_save(args.nodes, Path(tmp)))
    try:
        import onnx_ir  # noqa: F401
    except ImportError:
        print("onnx_ir is not installed (pip install -e '.[bench]'); skipping the build peer")
        ge_build = run_child(__file__, "ge", str(args.build_nodes))
        print(f"build {args.build_nodes:,} nodes with ge: {ge_build['seconds']:.2f} s, "
              f"peak +{ge_build['peak_mib']:.0f} MiB")
    else:
        ge_build = run_child(__file__, "ge", str(args.build_nodes))
        ir_build = run_child(__file__, "onnx_ir", str(args.build_nodes))
        rows.append(Row(f"build {args.build_nodes:,}-node graph (time)", ge_build["seconds"],
                        "onnx_ir", ir_build["seconds"]))
        rows.append(Row(f"build {args.build_nodes:,}-node graph (peak memory)",
                        ge_build["peak_mib"], "onnx_ir", ir_build["peak_mib"], unit="MiB"))
    print_table("ge.graph I/O and building", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
