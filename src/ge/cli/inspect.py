"""`ge inspect MODEL`: what a model file holds, without compiling or running it.

Inputs and outputs with their types and shapes, opsets, IR version, producer, node counts
and the operator histogram, initializers of every graph (count and bytes; sparse ones apart:
their count, the bytes of their values and indices, how many values of how many elements;
those whose indices are out of the order onnx's checker requires, `ge.graph.sparse_order`),
what onnx's checker refuses in the model's local functions (`Graph.validate()`'s `function`
problems), what `ge compile` and `ge run` refuse that this reading passes over (loading's
GE1101, the check of the model as given's GE1003: `_load_problems`, a `note:`, exit status
0), the file size and the external data files it refers to, with the bytes its
tensors take of them. The file is read as loading reads it (`read_model_file`: a large one a
piece at a time). What loading would refuse is refused alike, in its words: a tensor whose
data disagrees with its dims (`ge.graph.payload_checks`), an external reference onnx or
onnxruntime would not read or to a range the file does not hold (`external_ranges`: checked
against the file's size; no data file is read); an external data key onnxruntime refuses
and onnx ignores (`basepath`) is noted, tensor by tensor. Nodes are counted as `ge compile` counts
them (`ge.compiler.report.NodeCounts`): what the main graph lists in `node` but the
`Constant` operators loading reads as constants (as initializers are; a sparse one stays an
operator); subgraph nodes apart.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ge.cli.output import cell, command_output, console, one_line

if TYPE_CHECKING:
    import onnx

    from ge.graph.external_data import ExternalRange

__all__ = ["inspect_command", "model_summary"]


def _type_text(type_proto: onnx.TypeProto) -> tuple[str, list[Any] | None]:
    """(element type, dims) of a value's type; dims None for an unknown rank."""
    from ge.graph.types import elem_type_name

    which = type_proto.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        tensor = getattr(type_proto, which)
        elem = elem_type_name(tensor.elem_type) if tensor.elem_type else "?"
        if which == "sparse_tensor_type":
            elem = f"sparse {elem}"
        if not tensor.HasField("shape"):
            return elem, None
        dims: list[Any] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                           for d in tensor.shape.dim]
        return elem, dims
    if which is None:
        return "?", None
    from ge.session.values import ValueType

    return ValueType.from_proto(type_proto).text(), None  # seq(map(int64, float))


def _value(vi: onnx.ValueInfoProto) -> dict[str, Any]:
    elem, dims = _type_text(vi.type)
    which = vi.type.WhichOneof("value")
    kind = "tensor" if which in (None, "tensor_type", "sparse_tensor_type") else (
        which.removesuffix("_type"))
    return {"name": vi.name, "dtype": elem, "shape": dims, "kind": kind}


def _tensor_bytes(tensor: onnx.TensorProto, external: dict[int, int]) -> int:
    """The bytes of a tensor's data as its file holds them: the range of its data file that
    loading reads (`external`: by id of the tensor proto; a string tensor without a
    recorded `length` takes the rest of the file, as onnx reads it), else what its dims and
    element type need, which the payload check found it holds (for a typed field the
    `raw_data` it stands for; int4: two to a byte), else its strings' or raw_data's
    bytes."""
    from onnx import TensorProto

    from ge.graph.payloads import payload_nbytes

    if tensor.data_location == TensorProto.EXTERNAL:
        length = external.get(id(tensor))
        if length is not None:
            return length
    size = payload_nbytes(tensor.data_type, tensor.dims)
    if size is not None:
        return size
    if tensor.string_data:
        return sum(len(s) for s in tensor.string_data)
    return len(tensor.raw_data)  # (an element type the installed onnx does not know)


def _initializers(graphs: list[onnx.GraphProto], external: dict[int, int]) -> dict[str, int]:
    """The dense initializers of the main graph and its bodies (functions have none): how
    many, how many of those in bodies, and the bytes their data takes as stored."""
    return {"count": sum(len(g.initializer) for g in graphs),
            "in_subgraphs": sum(len(g.initializer) for g in graphs[1:]),
            "bytes": sum(_tensor_bytes(t, external) for g in graphs for t in g.initializer)}


def _sparse_initializers(graphs: list[onnx.GraphProto], external: dict[int, int]
                         ) -> dict[str, int]:
    """The sparse initializers of the main graph and its bodies: how many (and in bodies),
    the bytes their values and indices take as stored, how many values they hold and how
    many elements the dense tensors they stand for have (what onnxruntime makes of them
    when it loads the model)."""
    from math import prod

    found = [s for g in graphs for s in g.sparse_initializer]
    return {"count": len(found),
            "in_subgraphs": sum(len(g.sparse_initializer) for g in graphs[1:]),
            "bytes": sum(_tensor_bytes(s.values, external) + _tensor_bytes(s.indices, external)
                         for s in found),
            "values": sum(prod(s.values.dims) for s in found),
            "elements": sum(prod(s.dims) for s in found)}


def _index_order(model: onnx.ModelProto, attributes: bool) -> list[dict[str, Any]]:
    """The sparse tensors whose indices are not in the order onnx's checker requires (read
    when stored inline), with whether ge writes them sorted (`ge.graph.sparse_order`).
    `attributes`: whether the model's bytes hold a sparse attribute's tag at all
    (`SPARSE_ATTRIBUTE_TAGS`): most have none, and looking at every node's attributes costs
    about 0.1 s per 50,000 nodes."""
    from ge.graph.sparse_order import index_order_problem, labelled_sparse_tensors, sorted_sparse

    found = []
    for each in labelled_sparse_tensors(model, attributes=attributes):
        problem = index_order_problem(each.sparse)
        if problem is not None:
            found.append({"tensor": each.label, "problem": problem, "sorted_by_ge": (
                each.sorted_on_load and sorted_sparse(each.sparse) is not None),
                "onnxruntime_runs": not each.in_body})
    return found


def _index_order_text(entry: dict[str, Any]) -> str:
    """`note: sparse initializer 's' has its indices unsorted: ...`: what onnxruntime and
    onnx's checker make of it, and what ge does."""
    ge_does = ("ge writes them sorted (the same dense tensor), which the checker passes"
               if entry["sorted_by_ge"] else
               "ge cannot sort a repeated index away (which of its values counts is the "
               "reader's choice), so ge compile refuses to save it (GE1003)"
               if entry["problem"].startswith("has index ") else
               "ge sorts only those of sparse initializers and sparse Constants (of the "
               "graphs and functions), so ge compile refuses to save it (GE1003)")
    runtime = ("onnxruntime runs it, onnx's checker refuses it" if entry["onnxruntime_runs"]
               else "onnx's checker refuses it, and so does onnxruntime in a body")
    return f"note: {entry['tensor']} {entry['problem']}; {runtime}: {ge_does}"


# (ge.graph is imported where a command runs, so that `ge inspect --help` imports no onnx.
# `read_as_constant`: whether a node is a `Constant` operator loading reads as a constant, as
# an initializer is; a sparse one (`sparse_value`) stays an operator, as ge writes it, so
# `ge compile` counts it as a node, and so does inspect.)


def _function_problems(model: onnx.ModelProto) -> list[dict[str, str]]:
    """What onnx's checker refuses in the model's local functions, where and at which node
    (`Graph.validate()`'s `function` problems, which `ge compile` refuses the model for)."""
    from ge.graph.checker_places import function_failures

    return [{"function": f.place, "node": f.node, "problem": f.message, "verdict": f.verdict}
            for f in function_failures(model.functions, model.ir_version,
                                       {o.domain: o.version for o in model.opset_import})]


def _load_problems(model: onnx.ModelProto) -> list[dict[str, str]]:
    """What `ge compile` and `ge run` refuse the model for that inspect's own reading does
    not: loading's GE1101 (a value defined twice or read and never defined, an output
    nothing produces, an IR version onnx cannot read...; `ge dump` refuses it too) or the
    check of the model as given, GE1003 (a cycle, a node onnx's checker refuses:
    `ge.graph.input_checks`), GE1305 of an operator ONNX does not define at the model's
    opset (a misspelt `Sofmax`: `check_operators_known`, which compiling checks first), or
    GE1601 of operators onnxruntime has no kernel for (ge run says it in onnxruntime's
    words). The IR is built for it, without the weights' data (the
    payloads were checked, the data files are not read): about 1 s per 100,000 nodes."""
    from ge.compiler.steps import check_operators_known
    from ge.errors import (
        GeError,
        GraphValidationError,
        ModelLoadError,
        RuntimeLoadError,
        ShapeInferenceError,
    )
    from ge.graph.allocation import no_gc_pauses
    from ge.graph.input_checks import check_model_as_given, check_runtime_kernels
    from ge.graph.onnx_import import model_to_graph

    commands = "ge compile, run and dump"
    try:
        with no_gc_pauses():
            graph = model_to_graph(model, check_payloads=False)
        commands = "ge compile and run"
        try:
            check_model_as_given(graph)
            check_operators_known(graph)
            check_runtime_kernels(graph)
        finally:
            graph.close()
    except (ModelLoadError, GraphValidationError, ShapeInferenceError, RuntimeLoadError) as err:
        return [{"code": err.code, "message": one_line(err.message), "refused_by": commands}]
    except GeError:  # (another check's error: loading says it in full)
        return []
    return []


def _refused_keys(ranges: list[ExternalRange]) -> list[dict[str, Any]]:
    """Each tensor whose external data entries hold a key onnxruntime refuses to load a
    model for and onnx ignores (`runtime_refused_keys`): the tensor, its data file, the
    keys."""
    from ge.graph.external_references import runtime_refused_keys

    found = []
    for where in ranges:
        keys = runtime_refused_keys(where.tensor)
        if keys:
            found.append({"tensor": where.tensor.name, "file": where.location, "keys": keys})
    return found


def _refused_keys_text(entry: dict[str, Any]) -> str:
    """`note: tensor 'w' (in m.data) has external data key 'basepath', which onnxruntime
    refuses ...`: what each reader makes of it, and that ge's output has it no more."""
    keys = entry["keys"]
    said, it = ((f"key {keys[0]!r}", "it") if len(keys) == 1
                else ("keys " + ", ".join(repr(k) for k in keys), "them"))
    return (f"note: tensor {entry['tensor']!r} (in {entry['file']}) has external data {said}, "
            f"which onnxruntime refuses: it does not load the model (\"model format error!\"); "
            f"onnx ignores {it}, and ge's output drops {it}")


def _constants(graph: onnx.GraphProto, ir_version: int) -> int:
    """The constants of one graph as ge counts them: its initializers (not an input's
    default, from IR version 4), sparse ones too, and its `Constant` operators."""
    from ge.graph.onnx_import import read_as_constant

    inputs = {vi.name for vi in graph.input} if ir_version >= 4 else set()
    return (sum(t.name not in inputs for t in graph.initializer)
            + len(graph.sparse_initializer) + sum(map(read_as_constant, graph.node)))


def model_summary(path: Path) -> dict[str, Any]:
    """The facts `ge inspect` shows, as JSON-ready data."""
    from ge.errors import model_file_named
    from ge.graph.domains import proto_graphs, qualified_op
    from ge.graph.external_data import external_ranges
    from ge.graph.model_io import check_model_path, read_model_file
    from ge.graph.onnx_import import read_as_constant
    from ge.graph.payload_checks import check_model_payloads
    from ge.graph.sparse_order import SPARSE_ATTRIBUTE_TAGS

    check_model_path(path)  # (as loading does)
    file_bytes = path.stat().st_size
    # (in the words of ge compile and ge run, which load it with the same check; a large
    # file a piece at a time, as loading reads it, never whole into memory)
    pieces = read_model_file(path, str(path), SPARSE_ATTRIBUTE_TAGS)
    model = pieces.model
    # (a tensor that disagrees with its dims, inline or in its data file: as loading says,
    # without reading a data file: the ranges are checked against the files' sizes)
    with model_file_named(path):
        check_model_payloads(model, pieces.measured)
        # (a file without the word every external reference has, "location", has none)
        ranges = (external_ranges(model, path.parent) if pieces.may_have_external_data
                  else [])
    graph = model.graph
    initializer_names = {t.name for t in graph.initializer}
    subgraphs = list(proto_graphs(graph))
    ops = Counter(qualified_op(n.op_type, n.domain, n.overload)
                  for g in subgraphs for n in g.node)
    external: dict[str, dict[str, Any]] = {}
    for where in ranges:
        entry = external.setdefault(where.location, {
            "file": where.location, "tensors": 0, "exists": True, "bytes": where.file_size,
            "tensor_bytes": 0})
        entry["tensors"] += 1
        entry["tensor_bytes"] += where.length
    lengths = {id(where.tensor): where.length for where in ranges}
    return {
        "model": str(path),
        "file_bytes": file_bytes,
        "ir_version": model.ir_version,
        "producer": {"name": model.producer_name, "version": model.producer_version},
        "domain": model.domain,
        "model_version": model.model_version,
        "graph": graph.name,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "inputs": [{**_value(vi), "has_default": vi.name in initializer_names,
                    # ir_version < 4: every initializer is listed as an input, and is a
                    # constant (onnxruntime neither lists nor accepts it; ge reads it so)
                    "constant": model.ir_version < 4 and vi.name in initializer_names}
                   for vi in graph.input],
        "outputs": [_value(vi) for vi in graph.output],
        # as `ge compile` counts (`NodeCounts`): Constant operators are constants
        "nodes": sum(not read_as_constant(n) for n in graph.node),
        "subgraph_nodes": sum(not read_as_constant(n) for g in subgraphs[1:] for n in g.node),
        "constants": sum(_constants(g, model.ir_version) for g in subgraphs),
        "constant_nodes": sum(read_as_constant(n) for n in graph.node),
        "graph_nodes": len(graph.node),  # ONNX's len(graph.node), Constant operators included
        "subgraphs": len(subgraphs) - 1,
        "functions": [qualified_op(f.name, f.domain, f.overload) for f in model.functions],
        "ops": dict(ops.most_common()),
        "initializers": _initializers(subgraphs, lengths),
        "sparse_initializers": _sparse_initializers(subgraphs, lengths),
        "sparse_index_order": _index_order(model, bool(pieces.found)),
        "function_problems": _function_problems(model),
        "load_problems": _load_problems(model),
        "external_data": sorted(external.values(), key=lambda e: e["file"]),
        "external_data_keys": _refused_keys(ranges),
        "metadata": {p.key: p.value for p in model.metadata_props},
    }


def _shape_text(value: dict[str, Any]) -> str:
    """A tensor's dims, "(any shape)" for an unknown rank; "-" for a sequence, map or
    optional, whose type (in the dtype column) says what it holds."""
    shape = value["shape"]
    if value["kind"] != "tensor":
        return "-"
    return "(any shape)" if shape is None else f"[{', '.join(map(str, shape))}]"


def _size_text(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit} ({size} B)"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _counts_text(summary: dict[str, Any]) -> str:
    """`104 node(s) and 23 Constant node(s) (127 in graph.node), 13 in 2 subgraph(s); 18
    initializer(s) (2 in subgraphs), 1.2 MiB (...)`: the nodes as `ge compile` counts them,
    how they make ONNX's count, the initializers of every graph; then the sparse ones, when
    there are some (`; 1 sparse initializer(s), 36 B as stored (values and indices: 3
    value(s) of 6 element(s))`)."""
    text = f"{summary['nodes']} node(s)"
    if summary["constant_nodes"]:
        text += (f" and {summary['constant_nodes']} Constant node(s) "
                 f"({summary['graph_nodes']} in graph.node)")
    if summary["subgraphs"]:
        text += f", {summary['subgraph_nodes']} in {summary['subgraphs']} subgraph(s)"
    init = summary["initializers"]
    text += (f"; {init['count']} initializer(s){_in_bodies(init)}, "
             f"{_size_text(init['bytes'])}")
    sparse = summary["sparse_initializers"]
    if sparse["count"]:
        text += (f"; {sparse['count']} sparse initializer(s){_in_bodies(sparse)}, "
                 f"{_size_text(sparse['bytes'])} as stored (values and indices: "
                 f"{sparse['values']} value(s) of {sparse['elements']} element(s))")
    return text


def _in_bodies(counted: dict[str, int]) -> str:
    """` (2 in subgraphs)` of initializers some of which are in bodies, else nothing."""
    return f" ({counted['in_subgraphs']} in subgraphs)" if counted["in_subgraphs"] else ""


def _print(summary: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    con = console()
    producer = summary["producer"]
    con.print(f"model {escape(summary['model'])}: graph {escape(summary['graph'])}, "
              f"{_size_text(summary['file_bytes'])}")
    con.print(f"ir_version {summary['ir_version']}; producer "
              f"{escape(producer['name'] or '-')} {escape(producer['version'])}".rstrip())
    con.print(cell("opsets: " + ", ".join(f"{d}={v}" for d, v in summary["opsets"].items())))
    io_table = Table(title="Inputs and outputs", title_justify="left")
    for column in ("Kind", "Name", "Dtype", "Shape"):
        io_table.add_column(column)
    for value in summary["inputs"]:
        kind = ("constant (initializer)" if value["constant"] else
                "input (default)" if value["has_default"] else "input")
        io_table.add_row(kind, cell(value["name"]), cell(value["dtype"]),
                         cell(_shape_text(value)))
    for value in summary["outputs"]:
        io_table.add_row("output", cell(value["name"]), cell(value["dtype"]),
                         cell(_shape_text(value)))
    con.print(io_table)
    con.print(_counts_text(summary))
    for entry in summary["sparse_index_order"]:
        con.print(escape(_index_order_text(entry)))
    if summary["functions"]:
        con.print("functions: " + escape(", ".join(summary["functions"])))
    for entry in summary["function_problems"]:
        node = f"{entry['node']}: " if entry["node"] else ""
        problem = entry["problem"].rstrip(".")
        con.print(escape(f"note: {entry['function']}: {node}{entry['verdict']}: "
                         f"{problem}; ge compile refuses the model for it (GE1003)"))
    for entry in summary["load_problems"]:
        con.print(escape(f"note: {entry['refused_by']} refuse the model: [{entry['code']}] "
                         f"{entry['message']}"))
    ops = Table(title=f"Operators ({len(summary['ops'])})", title_justify="left")
    ops.add_column("Op")
    ops.add_column("Count", justify="right")
    for op, count in summary["ops"].items():
        ops.add_row(cell(op), str(count))
    con.print(ops)
    if summary["external_data"]:
        ext = Table(title="External data files", title_justify="left")
        for column in ("File", "Tensors", "Tensor bytes", "File bytes"):
            ext.add_column(column, justify="left" if column == "File" else "right")
        for entry in summary["external_data"]:
            ext.add_row(cell(entry["file"]), str(entry["tensors"]), str(entry["tensor_bytes"]),
                        str(entry["bytes"]))
        con.print(ext)
    else:
        con.print("external data: none")
    for entry in summary["external_data_keys"]:
        con.print(escape(_refused_keys_text(entry)))


@click.command("inspect")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the facts (or error) as JSON.")
def inspect_command(model: Path, as_json: bool) -> None:
    """Show a model's inputs, outputs, opsets, operators and weights."""
    with command_output("ge", as_json=as_json) as out:
        summary = model_summary(model)
        if out.as_json:
            out.result(summary)
        else:
            _print(summary)
