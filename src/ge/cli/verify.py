"""`ge verify ORIGINAL OTHER`: run two models on the same inputs and compare their outputs.

What `ge compile --verify` does for a compilation, for any two files: a model against what
ge, onnxruntime's offline optimiser or another tool made of it. It is
`ge.session.verify(...)` on the command line: inputs read from an `.npz` or generated from
ORIGINAL's input types (then also compared at other sizes of the symbolic dims), outputs
compared by name within `--rtol`/`--atol`; a difference is GE1603 and exit status 1, after
the table of every output.
"""

from __future__ import annotations

from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

import click

from ge.cli.compile import parse_dims
from ge.cli.output import command_output, console
from ge.cli.run import custom_op_plugins
from ge.errors import concerning_model, model_file_named

__all__ = ["verify_command"]


@click.command("verify")
@click.argument("original", type=click.Path(path_type=Path))
@click.argument("other", type=click.Path(path_type=Path))
@click.option("--inputs", type=click.Path(path_type=Path), default=None, metavar="FILE.npz",
              help="The inputs, one array per input name of ORIGINAL (default: generated).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the generated inputs.")
@click.option("--dims", "dim_pairs", multiple=True, metavar="NAME=SIZE",
              help="Size of the symbolic dim NAME in the generated inputs (default 2; "
                   "repeatable).")
@click.option("--rtol", type=float, default=1e-4, show_default=True,
              help="Relative tolerance of the comparison.")
@click.option("--atol", type=float, default=1e-5, show_default=True,
              help="Absolute tolerance of the comparison.")
@click.option("--pass-path", "pass_paths", multiple=True, metavar="PATH",
              help="Also load the plugins of PATH (a .py file or a folder; repeatable): "
                   "custom operators they register run with their kernels.")
@click.option("--quiet", "-q", is_flag=True, help="Only the verdict line, not the table.")
@click.option("--json", "as_json", is_flag=True, help="Print the result (or error) as JSON.")
def verify_command(original: Path, other: Path, inputs: Path | None, seed: int,
                   dim_pairs: tuple[str, ...], rtol: float, atol: float,
                   pass_paths: tuple[str, ...], quiet: bool, as_json: bool) -> None:
    """Run ORIGINAL and OTHER on the same inputs and compare their outputs."""
    dims = parse_dims(dim_pairs, inputs)
    with command_output("ge", as_json=as_json) as out:
        import ge.graph
        from ge.errors import VerificationInputError
        from ge.graph.input_checks import check_model_as_given
        from ge.session.compile_arguments import check_tolerance
        from ge.session.custom_evaluation import runs_in_onnxruntime
        from ge.session.inputs import load_inputs
        from ge.session.verification import verify

        check_tolerance(rtol, "--rtol")
        check_tolerance(atol, "--atol")

        with ExitStack() as stack:
            graphs = []
            for path in (original, other):
                with model_file_named(path):
                    # (closed once compared, as ge run closes its graph)
                    graph = stack.enter_context(closing(ge.graph.load(path)))
                    check_model_as_given(graph, str(path))
                graphs.append(graph)
            feeds = None
            if inputs is not None:
                with model_file_named(original):
                    try:
                        feeds = load_inputs(inputs, graphs[0])
                    except VerificationInputError as err:
                        if not err.message.startswith("inputs do not fit"):
                            raise  # (the file's own problem: it names the file)
                        # (both graphs may have one name: say which model, trial AH)
                        raise type(err)(f"the original {original} model: {err.message}",
                                        nodes=err.nodes) from err
            custom = any(not runs_in_onnxruntime(node.domain)
                         for graph in graphs for node in graph.get_all_nodes())
            with custom_op_plugins(custom, pass_paths), concerning_model():
                report = verify(graphs[0], graphs[1], inputs=feeds, rtol=rtol, atol=atol,
                                seed=seed, dims=dims, names=(f"original {original}",
                                                             f"other {other}"))
        inputs_from = str(inputs) if inputs is not None else f"generated (seed {seed})"
        if out.as_json:
            if report.ok:
                payload: dict[str, Any] = {"original": str(original), "other": str(other),
                                           "inputs_from": inputs_from,
                                           "verification": report.as_dict()}
                out.result(payload)
        else:
            _print_report(report, original, other, inputs_from, quiet)
        report.raise_if_failed(f"{other} differs from {original}")


def _print_report(report: Any, original: Path, other: Path, inputs_from: str,
                  quiet: bool) -> None:
    from rich.markup import escape

    from ge.cli.compile_report import verification_table

    con = console()
    if not quiet:
        con.print(verification_table(report, title=f"{escape(str(other))} against "
                                                   f"{escape(str(original))}, inputs "
                                                   f"{escape(inputs_from)}"))
    if report.ok:
        con.print(f"verification {escape(report.summary())}")
