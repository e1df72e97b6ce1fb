"""Benchmark the peak memory of loading and saving a model with real-size weights, against
`onnx.load` + `onnx.save` measured in the same run.

The model is built here: a chain of Adds reading `--mib` MiB of float32 initializers (4 MiB
each) and two Constant operators of 4 MiB, saved inline. Each run of each side is a fresh
interpreter (`common.run_sides_alternating`) that imports its libraries, then loads the
model and saves it untouched; it reports the peak resident memory (Linux VmHWM) of the load
and of the save, each above the resident memory before it (the save's: above the loaded
model), and the whole run's peak above the start. Both sides must write the source's bytes.

Run: `.venv/bin/python benchmarks/bench_save_memory.py [--mib M] [--runs R]` (Linux).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, min_median, print_table, run_sides_alternating

import ge.graph

SIDES = ("ge", "onnx")
WEIGHT_ELEMENTS = 1 << 20  # float32: 4 MiB per tensor


def make_weights_model(mib: int) -> onnx.ModelProto:
    """x + w0 + w1 + ... over `mib` MiB of weights, two of the tensors Constant operators."""
    count = max(mib // 4, 3)
    shape = [1024, WEIGHT_ELEMENTS // 1024]
    nodes, initializers = [], []
    previous = "x"
    for i in range(count):
        weight = np.full(WEIGHT_ELEMENTS, i, dtype=np.float32).tobytes()
        tensor = helper.make_tensor(f"w{i}", TensorProto.FLOAT, shape, weight, raw=True)
        if i < 2:
            nodes.append(helper.make_node("Constant", [], [f"w{i}"], name=f"c{i}", value=tensor))
        else:
            initializers.append(tensor)
        nodes.append(helper.make_node("Add", [previous, f"w{i}"], [f"v{i}"], name=f"n{i}"))
        previous = f"v{i}"
    graph = helper.make_graph(
        nodes, "weights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, shape)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise SystemExit(f"no {key} in /proc/self/status: this benchmark needs Linux")


def _reset_peak() -> None:
    """Start VmHWM afresh from the current resident memory (Linux 4.0+)."""
    Path("/proc/self/clear_refs").write_text("5")


def child(side: str, source: Path, target: Path) -> None:
    """One measured run in this fresh process: load, then save, each one's peak."""
    start_rss = _status_kib("VmRSS:")
    start = time.perf_counter()
    _reset_peak()
    loaded = ge.graph.load(source) if side == "ge" else onnx.load(source)
    load_peak = _status_kib("VmHWM:")
    before_save = _status_kib("VmRSS:")
    _reset_peak()
    if isinstance(loaded, onnx.ModelProto):
        onnx.save(loaded, target)
    else:
        loaded.save(target)
    save_peak = _status_kib("VmHWM:")
    print(json.dumps({"seconds": time.perf_counter() - start,
                      "load_mib": (load_peak - start_rss) / 1024,
                      "save_mib": (save_peak - before_save) / 1024,
                      "peak_mib": (max(load_peak, save_peak) - start_rss) / 1024}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=400, help="MiB of weights (default: 400)")
    parser.add_argument("--runs", type=int, default=3,
                        help="fresh processes per side (default: 3)")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "SRC", "DST"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, source, target = args.child
        child(side, Path(source), Path(target))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / "weights.onnx"
        onnx.save(make_weights_model(args.mib), source)
        weights = source.stat().st_size / 2**20
        reports = run_sides_alternating(
            __file__, SIDES, lambda side: [side, str(source), str(folder / f"{side}.onnx")],
            args.runs, label="load + save ")
        for side, outs in reports.items():
            if outs and "error" in outs[-1]:
                raise SystemExit(f"{side} failed:\n{outs[-1]['error']}")
            written = (folder / f"{side}.onnx").read_bytes()
            assert written == source.read_bytes(), f"{side} changed the model"
    rows = []
    for key, label in (("save_mib", "save (above the loaded model)"),
                       ("load_mib", "load"), ("peak_mib", "load + save")):
        ge_min, peer_min = (min_median([o[key] for o in reports[side]])[0] for side in SIDES)
        rows.append(Row(f"{label}, peak memory (min)", ge_min, "onnx", peer_min, unit="MiB"))
    print_table(f"Peak memory of an inline model of {weights:.0f} MiB (fresh process per run, "
                f"{args.runs} runs per side)", rows)
    print("outputs checked: both byte-identical to the source")
    return 0


if __name__ == "__main__":
    sys.exit(main())
