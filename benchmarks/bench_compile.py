"""Benchmark compiling a large model: `ge` against onnxruntime's offline graph optimisation.

`ge`: load + `compile_graph` (no plugins: shape inference and final validation) + save.
Peer: an onnxruntime session with basic graph optimisations writing the optimised model
(`optimized_model_filepath`), the closest thing onnxruntime has to an offline compiler.
Both read and write files, in the same run. No goal is set yet; the ratio is for planning.

Run: `make bench` or `.venv/bin/python benchmarks/bench_compile.py [--nodes N]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_io import make_chain_model
from common import Row, best_time, print_table

import ge.graph
from ge.compiler import compile_graph


def ge_compile(source: Path, target: Path) -> None:
    graph = ge.graph.load(source)
    compile_graph(graph)
    graph.save(target)


def ort_optimise(source: Path, target: Path) -> None:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / "chain.onnx"
        onnx.save(make_chain_model(args.nodes), source)
        ge_time = best_time(lambda: ge_compile(source, folder / "ge.onnx"), repeat=3)
        ort_time = best_time(lambda: ort_optimise(source, folder / "ort.onnx"), repeat=3)
        onnx.checker.check_model(str(folder / "ge.onnx"))
    print_table("Compiling a model file", [
        Row(f"load+compile+save {args.nodes:,}-node model", ge_time,
            "onnxruntime offline optimisation", ort_time),
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
