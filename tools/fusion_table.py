"""What `ge.compile` does to each model: a markdown table of node counts, passes, accuracy.

    .venv/bin/python tools/fusion_table.py                      # the vendored tests/models/
    .venv/bin/python tools/fusion_table.py --built              # + the built example models
    .venv/bin/python tools/fusion_table.py --models vit_tiny conv_bn
    .venv/bin/python tools/fusion_table.py --built --write README.md

Each model is compiled with `ge.compile(verify=True)` (the built-in passes and any installed
plugins, as `ge compile` would). One row per model: nodes before → after as `ge compile`
counts them (`report.counts_before` / `counts_after`: the main graph's operators, what
ONNX lists in `graph.node` but `Constant` operators, which are constants with the
initializers; a model with If/Loop/Scan bodies adds their nodes, `6 → 6 (10 → 10 in
subgraphs)`), the constants before → after, the passes that
changed the graph in run order (plugins marked, `×N` the rewrites or fusions a pattern pass
reported), and the largest absolute difference between the original and the compiled model
in onnxruntime. A model that fails to compile gets its error in the row, and the exit
status is 1.

Inputs: a vendored model's `.json` sidecar gives each input's shape and dtype, and notes
such as "int64 token ids in [0, 500)", "1=token, 0=padding" or "loop trip count (>= 0)";
the inputs follow them (ids drawn from the range, masks all ones, a trip count of 3, floats
standard normal, seed 0). Inputs the sidecar does not describe, and built models, use the
inputs `ge.compile` generates.

`--write FILE` replaces the lines between `<!-- fusion-table:start -->` and
`<!-- fusion-table:end -->` in FILE (atomically) instead of printing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ge.compiler.report import NodeCounts

ROOT = Path(__file__).resolve().parents[1]
MODELS_DIR = ROOT / "tests" / "models"
BUILT_SCRIPT = ROOT / "examples" / "models" / "make_fusion_models.py"
START, END = "<!-- fusion-table:start -->", "<!-- fusion-table:end -->"

_RANGE = re.compile(r"in \[\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")
_TRIP_COUNT = 3


@dataclass
class Row:
    model: str
    before: NodeCounts | None = None
    after: NodeCounts | None = None
    fired: str = ""
    max_abs_diff: float | None = None
    inputs: str = ""
    error: str = ""

    def markdown(self) -> str:
        if self.error or self.before is None or self.after is None:
            return f"| `{self.model}` | - | - | error: {_cell(self.error)} | - |"
        b, a = self.before, self.after
        nodes = f"{b.nodes} → {a.nodes}"
        if b.subgraph_nodes or a.subgraph_nodes:
            nodes += f" ({b.subgraph_nodes} → {a.subgraph_nodes} in subgraphs)"
        constants = f"{b.constants} → {a.constants}"
        diff = "-" if self.max_abs_diff is None else _number(self.max_abs_diff)
        return (f"| `{self.model}` | {nodes} | {constants} | {self.fired or 'nothing'} | "
                f"{diff} |")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _number(value: float) -> str:
    return "0" if value == 0 else f"{value:.2g}"


def _built_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_fusion_models", BUILT_SCRIPT)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {BUILT_SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def sidecar_inputs(sidecar: dict[str, Any], seed: int = 0) -> dict[str, np.ndarray] | None:
    """Inputs following a sidecar's `inputs` (name, shape, dtype, note), or None when it
    describes none."""
    specs = sidecar.get("inputs")
    if not specs:
        return None
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:
        name, shape, dtype = spec["name"], tuple(spec["shape"]), np.dtype(spec["dtype"])
        note = spec.get("note", "")
        found = _RANGE.search(note)
        if dtype.kind == "f":
            value = rng.standard_normal(shape).astype(dtype)
        elif "1=token" in note or "mask" in name:
            value = np.ones(shape, dtype=dtype)
        elif "trip count" in note:
            value = np.full(shape, _TRIP_COUNT, dtype=dtype)
        elif found is not None:
            value = rng.integers(int(found.group(1)), int(found.group(2)), shape).astype(dtype)
        elif dtype.kind == "b":
            value = rng.random(shape) < 0.5
        else:
            value = rng.integers(0, 4, shape).astype(dtype)
        feeds[name] = value
    return feeds


def _fired(report: Any) -> str:
    counts = report.rewrites_by_pass()
    origins = {r.pass_name: r.origin for r in report.records}
    parts = []
    for name in report.passes_that_changed():
        text = name
        if counts.get(name):
            text += f" ×{counts[name]}"
        if origins.get(name) != "built-in":
            text += " (plugin)"
        parts.append(text)
    return ", ".join(parts)


def table_row(name: str, model: Any, inputs: dict[str, np.ndarray] | None,
              source: str) -> Row:
    """Compile one model (a path or an onnx.ModelProto) and describe it."""
    import ge
    from ge.errors import GeError

    row = Row(name, inputs=source)
    try:
        result = ge.compile(model, verify=True, inputs=inputs)
    except GeError as err:
        row.error = f"[{err.code}] {err.message}"
        return row
    report = result.report
    row.before, row.after = report.counts_before, report.counts_after
    row.fired = _fired(report)
    if result.verification is not None and result.verification.outputs:
        row.max_abs_diff = max(o.max_abs_diff for o in result.verification.outputs)
    return row


def vendored_models() -> list[str]:
    return sorted(p.stem for p in MODELS_DIR.glob("*.onnx"))


def collect(names: list[str] | None, built: bool) -> list[Row]:
    """Rows for `names` (vendored stems or built model names), else for every vendored
    model and, with `built`, every model of make_fusion_models."""
    vendored = vendored_models()
    module = _built_module() if built or names else None
    built_names = list(module.MODELS) if module is not None else []
    if names is None:
        names = vendored + (built_names if built else [])
    unknown = [n for n in names if n not in vendored and n not in built_names]
    if unknown:
        raise SystemExit(f"fusion_table: unknown model(s) {', '.join(unknown)}; vendored: "
                         f"{', '.join(vendored)}; built: {', '.join(built_names)}")
    rows = []
    for name in names:
        if name in vendored:
            path = MODELS_DIR / f"{name}.onnx"
            sidecar = path.with_suffix(".json")
            inputs = (sidecar_inputs(json.loads(sidecar.read_text()))
                      if sidecar.is_file() else None)
            rows.append(table_row(name, path, inputs,
                                  "sidecar" if inputs is not None else "generated"))
        else:
            assert module is not None
            skipped = module.unavailable()
            if name in skipped:
                rows.append(Row(name, error=f"skipped: {skipped[name]}"))
                continue
            rows.append(table_row(name, module.build_model(name), None, "generated"))
    return rows


def render(rows: list[Row]) -> str:
    lines = [
        "| model | nodes before → after | constants | what fired | max abs diff (onnxruntime) |",
        "|---|---|---|---|---|",
        *(row.markdown() for row in rows),
        "",
        "Nodes: the main graph's, as ONNX counts them in the `graph.node` of the model ge",
        "writes; `Constant` operators are constants, with the initializers (an exported file",
        "holding some lists them among its nodes too: `ge inspect` shows both counts); the",
        "nodes of If/Loop bodies apart. ×N: the rewrites or fusions a pass reported. Inputs:",
        "from the `.json` sidecars of the vendored models, generated for the built ones. Made",
        "by `tools/fusion_table.py`.",
    ]
    return "\n".join(lines) + "\n"


def _marker_lines(path: Path, lines: list[str]) -> tuple[int, int]:
    """The indexes of the START and END lines, or SystemExit with what is wrong."""
    starts = [i for i, line in enumerate(lines) if line.strip() == START]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        order = ", the end before the start" if starts and ends and ends[0] < starts[0] else ""
        raise SystemExit(
            f"fusion_table: {path} must hold one line {START} and, after it, one line {END} "
            f"(found {len(starts)} start and {len(ends)} end marker(s){order}); "
            "nothing written")
    return starts[0], ends[0]


def check_markers(path: Path) -> None:
    """SystemExit unless `path` holds the markers (checked before any compilation)."""
    _marker_lines(path, path.read_text(encoding="utf-8").splitlines())


def replace_between_markers(path: Path, table: str) -> None:
    """Put `table` between the START and END lines of `path`, atomically (the way `ge`
    writes its reports: a temporary file in the same folder renamed over it)."""
    from ge.cli.output_files import write_atomically

    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start, end = _marker_lines(path, lines)
    new = ("".join(lines[:start + 1]) + table + "".join(lines[end:])).encode("utf-8")
    write_atomically(path, lambda stream: stream.write(new), "the fusion table")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--built", action="store_true",
                        help="also the models of examples/models/make_fusion_models.py")
    parser.add_argument("--models", nargs="+", metavar="NAME",
                        help="only these models (vendored stems or built model names)")
    parser.add_argument("--write", type=Path, metavar="FILE",
                        help=f"replace the text between {START} and {END} in FILE")
    args = parser.parse_args(argv)
    if args.write is not None and not args.write.is_file():
        parser.error(f"--write: {args.write} is not a file")
    if args.write is not None:
        check_markers(args.write)
    rows = collect(args.models, args.built)
    table = render(rows)
    if args.write is not None:
        replace_between_markers(args.write, table)
        print(f"wrote the fusion table ({len(rows)} model(s)) into {args.write}")
    else:
        sys.stdout.write(table)
    failed = [r.model for r in rows if r.error and not r.error.startswith("skipped:")]
    if failed:
        print(f"fusion_table: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
