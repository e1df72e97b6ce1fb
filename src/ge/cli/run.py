"""`ge run MODEL`: run a model on inputs (read from an `.npz` or generated) and show or save
its outputs.

The model runs in `ge.session` (onnxruntime, or the reference evaluator for custom ops).
A model with operators of a custom domain loads the pass plugins first, as `ge compile`
does (`ASCEND_GE_PY_PASS_PATH`, installed plugins, `--pass-path`), so that the operators
they register with `ge.ops.register_op` have their kernels. Inputs not given are generated
from the input types (`--seed`). `--output FILE.npz` is checked before running and written
atomically: arrays, and sequences, maps and optionals as `ge.session.npz` writes them
(readable by `--inputs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, nullcontext
from pathlib import Path
from typing import IO, Any

import click

from ge.cli.compile import parse_dims
from ge.cli.output import cell, command_output, console
from ge.cli.output_files import (
    check_not_read,
    check_output_folder,
    file_target,
    files_read,
    write_atomically,
)
from ge.errors import CommandLineError, concerning_model, model_file_named

__all__ = ["array_summary", "custom_op_plugins", "run_command"]

#: How many leading values of each output are shown.
_SHOWN_VALUES = 6


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:  # NaN
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, complex):
        return str(value)
    return value


def array_summary(array: Any, *, shown: int = _SHOWN_VALUES) -> dict[str, Any]:
    """dtype, shape, the first `shown` values and (numeric arrays, ml_dtypes' float8 and
    int4 too, as the numbers they hold) min, max and mean; for a
    sequence, map or optional (a list, a dict, None), `_nested_summary`."""
    import numpy as np

    from ge.session.low_bit import is_ml_number
    from ge.session.values import is_nested

    if is_nested(array):
        return _nested_summary(array, shown)
    arr = np.asarray(array)
    flat = arr.reshape(-1)
    data: dict[str, Any] = {**_interface(arr), "size": int(arr.size),
                            "values": [_plain(v) for v in flat[:shown]]}
    # (ml_dtypes' bfloat16, float8 and int4 are numbers too, though numpy calls them void)
    if arr.size and (arr.dtype.kind in "biuf" or is_ml_number(arr.dtype)):
        # reduced in the array's own type (the mean summed in float64), as floats: a
        # float64 copy of a large output took more memory than the output itself
        with np.errstate(all="ignore"):
            data.update(min=_plain(float(np.min(flat))), max=_plain(float(np.max(flat))),
                        mean=_plain(float(np.mean(flat, dtype=np.float64))))
    return data


def _nested_summary(value: Any, shown: int) -> dict[str, Any]:
    """A sequence, map or optional: its type (`seq(map(int64, float))`), its length as
    shape and size, its first `shown` items (a map's as [key, value] pairs; a tensor in it
    as its values when it has at most `shown`, else as `dtype [shape]`), and min, max and
    mean of the numbers in it."""
    items = ([] if value is None else [[k, v] for k, v in value.items()]
             if isinstance(value, dict) else list(value))
    data: dict[str, Any] = {**_interface(value), "size": len(items),
                            "values": [_plain_item(v, shown) for v in items[:shown]]}
    low, high, total, count = float("inf"), float("-inf"), 0.0, 0
    for numbers in _numbers(value):
        if numbers.size:
            low, high = min(low, float(numbers.min())), max(high, float(numbers.max()))
            total, count = total + float(numbers.sum(dtype="float64")), count + numbers.size
    if count:
        data.update(min=_plain(low), max=_plain(high), mean=_plain(total / count))
    return data


def _numbers(value: Any) -> Iterator[Any]:
    """The numbers inside a nested value, as 1-d arrays: each numeric tensor, then the
    Python numbers of its maps all together."""
    import numpy as np

    from ge.session.low_bit import is_ml_number

    scalars: list[float] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
        elif isinstance(item, np.ndarray):
            if item.dtype.kind in "biuf" or is_ml_number(item.dtype):
                yield item.reshape(-1)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            scalars.append(item)
    if scalars:
        yield np.asarray(scalars, dtype=np.float64)


def _plain_item(value: Any, shown: int) -> Any:
    """An item of a nested value as JSON-ready data (see `_nested_summary`)."""
    import numpy as np

    if isinstance(value, dict):
        return {_plain(k): _plain_item(v, shown) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_item(v, shown) for v in value]
    if isinstance(value, np.ndarray):
        if value.size > shown:
            return f"{_interface(value)['dtype']} {list(value.shape)}"
        return _plain_item(value.tolist(), shown)
    return _plain(value)


def _interface(array: Any) -> dict[str, Any]:
    """dtype and shape of an array (what the JSON result says of each input); a sequence or
    map (onnxruntime gives a list: of maps for ZipMap) is its type in ONNX's notation
    (`seq(map(int64, float))`: `ge.session.values.value_label`) and its length as the
    shape, an empty optional `None` with no shape."""
    import numpy as np

    from ge.session.values import is_nested, outer_shape, value_label

    if is_nested(array):
        shape = outer_shape(array)
        return {"dtype": value_label(array), "shape": None if shape is None else list(shape)}
    arr = np.asarray(array)
    return {"dtype": "string" if arr.dtype.kind in "OSU" else arr.dtype.name,
            "shape": list(arr.shape)}


def _values_text(summary: dict[str, Any]) -> str:
    def one(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{one(k)}: {one(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(one(x) for x in v) + "]"
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    text = ", ".join(one(v) for v in summary["values"])
    if summary["size"] > len(summary["values"]):
        text += ", …"
    return f"[{text}]"


def _generated(graph: Any, seed: int, dims: dict[str, int]) -> dict[str, Any]:
    """Inputs generated for the model's input types; an input type that has none (a
    sequence of tensors of unknown rank) is the model's own problem (`about_model`)."""
    from ge.session.inputs import generate_inputs

    with concerning_model():
        return generate_inputs(graph, seed=seed, dims=dims)


def custom_op_plugins(custom: bool, pass_paths: tuple[str, ...]
                      ) -> AbstractContextManager[Any]:
    """The pass plugins loaded while a model runs, when it has operators of a custom domain
    (`custom`: their kernels come from `ge.ops.register_op` in a plugin) or `--pass-path`
    was given; a model of standard operators runs without reading them."""
    if not custom and not pass_paths:
        return nullcontext()
    from ge.compiler.engine import compilation_passes

    return compilation_passes(pass_paths=list(pass_paths) or None)


@click.command("run")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--inputs", type=click.Path(path_type=Path), default=None, metavar="FILE.npz",
              help="The inputs, one array per input name (default: generated).")
@click.option("--output", "output", type=click.Path(), callback=file_target, default=None,
              metavar="FILE.npz", help="Write the outputs to FILE.npz (atomically; "
                                       "sequences and maps as --inputs reads them).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the generated inputs.")
@click.option("--dims", "dim_pairs", multiple=True, metavar="NAME=SIZE",
              help="Size of the symbolic dim NAME in the generated inputs (default 2; "
                   "repeatable).")
@click.option("--pass-path", "pass_paths", multiple=True, metavar="PATH",
              help="Also load the plugins of PATH (a .py file or a folder; repeatable): "
                   "custom operators they register run with their kernels.")
@click.option("--json", "as_json", is_flag=True, help="Print the result (or error) as JSON.")
def run_command(model: Path, inputs: Path | None, output: Path | None, seed: int,
                dim_pairs: tuple[str, ...], pass_paths: tuple[str, ...], as_json: bool) -> None:
    """Run MODEL on inputs (given or generated) and show or save its outputs."""
    dims = parse_dims(dim_pairs, inputs)
    with command_output("ge", as_json=as_json) as out:
        import ge.graph
        from ge.errors import SessionError
        from ge.graph.input_checks import check_model_as_given
        from ge.session.custom_evaluation import runs_in_onnxruntime
        from ge.session.inputs import generated_inputs_failure, load_inputs
        from ge.session.runner import ModelRunner

        if output is not None:
            check_output_folder(output, "the outputs")
            if output.suffix != ".npz":
                raise CommandLineError(f"cannot write the outputs to {output}: the file "
                                       "name must end in .npz", path=str(output))
            check_not_read(output, "the outputs", [
                (model, "the model"), *files_read(inputs=inputs, pass_paths=pass_paths)])
        # (closed once run: `Graph.close`, as ge compile closes its graphs)
        with closing(ge.graph.load(model)) as graph:
            # A graph with a cycle, or a node onnx's checker refuses, cannot be run by any
            # inputs: say so (GE1003, as a compilation does), not as a failed run.
            check_model_as_given(graph, str(model))
            with model_file_named(model):
                feeds = (load_inputs(inputs, graph) if inputs is not None
                         else _generated(graph, seed, dims))
            custom = [node for node in graph.get_all_nodes()
                      if not runs_in_onnxruntime(node.domain)]
            with custom_op_plugins(bool(custom), pass_paths), model_file_named(model):
                try:
                    with concerning_model():  # (the model, as in the file: none of ge's doing)
                        results = ModelRunner(graph).run(feeds)
                except SessionError as err:
                    failed = None if inputs is not None else generated_inputs_failure(
                        err, graph, feeds)
                    if failed is None:
                        raise
                    failed.about_model = True
                    raise failed from err
        if output is not None:
            from ge.session.npz import write_npz

            def write(stream: IO[bytes]) -> None:  # straight to the file: no copy in memory
                write_npz(stream, results)

            write_atomically(output, write, "the outputs")
        inputs_from = str(inputs) if inputs is not None else f"generated (seed {seed})"
        outputs = {name: array_summary(a) for name, a in results.items()}
        payload: dict[str, Any] = {
            "model": str(model),
            "inputs_from": inputs_from,
            "inputs": {name: _interface(a) for name, a in feeds.items()},
            "outputs": outputs,
            "output_file": None if output is None else str(output),
        }
        if out.as_json:
            out.result(payload)
            return
        from rich.markup import escape
        from rich.table import Table

        con = console()
        table = Table(title=f"Outputs of {escape(str(model))} "
                            f"(inputs {escape(inputs_from)})", title_justify="left")
        for column in ("Output", "Dtype", "Shape", "Values", "Min", "Max", "Mean"):
            table.add_column(column, overflow="fold" if column == "Values" else "ellipsis")
        for name, summary in outputs.items():
            stats = [f"{summary[k]:.6g}" if isinstance(summary.get(k), float)
                     else str(summary.get(k, "-")) for k in ("min", "max", "mean")]
            table.add_row(cell(name), summary["dtype"],
                          f"[{', '.join(map(str, summary['shape']))}]",
                          cell(_values_text(summary)), *stats)
        con.print(table)
        if output is not None:
            con.print(f"wrote {escape(str(output))}")
