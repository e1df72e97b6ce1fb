"""`ge passes explain PASS MODEL`: why a pass does or does not rewrite what it should.

The pass is found as `ge passes list` finds it (built-in, `ASCEND_GE_PY_PASS_PATH`,
`--pass-path`, entry points). MODEL is brought into the state the pass sees at its stage
(`ge.passes.explain_stage`: as loaded for a `BeforeInferShape` pass, after shape inference
for the later ones; first converted as `ge compile --inline-functions` / `--opset N`
converts it, by the same code, when asked), and what could not be rebuilt (the built-in
steps before a late stage, passes of the same stage that run first) is a warning. A
pattern pass is explained pattern by pattern (`ge.passes.explain`), a decompose pass node by
node (`ge.passes.explain_decompose`); a FusionBasePass finds what it changes in its own
`run()` and cannot be explained. Model-local functions holding what the pass looks for are
named, with `--inline-functions` as the way to show it their bodies.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import Any

import click

from ge.cli.compile import parse_options
from ge.cli.listed_passes import FoundPasses, listing_options, loaded_passes, pass_path_option
from ge.cli.output import command_output
from ge.compiler.pass_registry import RegisteredPass
from ge.errors import CompileWarning, GeError, PluginLoadWarning

__all__ = ["explain_command"]


def _newer_opset_advice(entry: RegisteredPass, graph: Any) -> str:
    """Why a built-in fusion into a newer opset's operator has no pattern here, and the
    flag that gives it one ("" for other passes, or at that opset already)."""
    from ge.session.hints import fusion_opset

    target = fusion_opset(entry.name)
    current = graph.get_opset_version("")
    if target is None or current is None or current >= target[1]:
        return ""
    operator, opset = target
    off = "" if entry.on_by_default else (
        f"; the pass is off by default: ge compile --enable {entry.name} runs it")
    return (f" ({entry.name} fuses into {operator}, an ONNX operator from opset {opset}: "
            f"--opset {opset} explains the model as ge compile --opset {opset} converts it"
            f"{off})")


def _known_pass(name: str, found: FoundPasses) -> RegisteredPass:
    """The pass `name` among those `ge passes list` finds (load failures become
    warnings)."""
    from ge.errors import CommandLineError
    from ge.passes.registry import PASS_KIND_DECOMPOSE, PASS_KIND_PATTERN_FUSION

    entries, failures = found.entries, found.failures
    for err in failures:
        warnings.warn(PluginLoadWarning(f"a pass plugin failed to load: {err}"), stacklevel=2)
    by_name = {e.name: e for e in entries}
    entry = by_name.get(name)
    if entry is None:
        failed = f" ({len(failures)} plugin(s) failed to load)" if failures else ""
        known = ", ".join(sorted(by_name)) or "none"
        raise CommandLineError(f"unknown pass {name!r}{failed}; known passes: {known}")
    kind = entry.descriptor.kind
    if kind not in (PASS_KIND_PATTERN_FUSION, PASS_KIND_DECOMPOSE):
        raise CommandLineError(
            f"pass {name!r} is a FusionBasePass ({kind}), not a pattern or decompose pass: "
            "its run() finds what it changes itself, so it cannot be explained; what it "
            "changed: ge diff MODEL OUT after a compile, or ge compile MODEL -o OUT --dump "
            f"DIR --dump-level {name} (its graph after it ran), and --verify each-pass "
            "checks its numbers")
    return entry


def _check_node(graph: object, node: str) -> None:
    import difflib

    from ge.errors import CommandLineError
    from ge.graph import Graph

    assert isinstance(graph, Graph)
    graphs = [graph, *(g for g in graph.get_all_subgraphs() if not g.is_orphan())]
    if any(g.has_node(node) for g in graphs):
        return
    names = [n.name for g in graphs for n in g.get_direct_nodes()]
    close = [n for n in names if node in n][:3] or difflib.get_close_matches(node, names, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise CommandLineError(f"graph {graph.name!r} has no node named {node!r}{hint}",
                           nodes=[node])


def _conversion_flags(inline_functions: bool, opset: int | None) -> str:
    """The `ge compile` flags converting MODEL as asked (" --inline-functions --opset 20"),
    for the compilation a warning suggests: its dumps are of the converted model too."""
    return ((" --inline-functions" if inline_functions else "")
            + (f" --opset {opset}" if opset is not None else ""))


def _earlier(entry: RegisteredPass, entries: Sequence[RegisteredPass]) -> list[str]:
    """The plugin passes of `entry`'s stage that a compilation runs before it (by name)."""
    if entry.step is not None:  # a built-in step runs its passes in its own order
        return []
    return sorted(e.name for e in entries
                  if e.step is None and e.stage is entry.stage and e.name < entry.name)


@click.command("explain")
@click.argument("pass_name", metavar="PASS")
@click.argument("model", type=click.Path(dir_okay=False))
@pass_path_option
@click.option("--option", "option_pairs", multiple=True, metavar="KEY=VALUE",
              help="A compiler option, readable by the pass's hooks as in ge compile "
                   "(repeatable).")
@click.option("--node", "node", metavar="NAME", default=None,
              help="Explain this target node only (as the anchor, and where a closest match "
                   "binds it to another pattern node; for a decompose pass, that node).")
@click.option("--top", "top", type=click.IntRange(min=1), default=5, show_default=True,
              help="How many closest partial matches (and rewrites) to show per pattern "
                   "(for a decompose pass: refused nodes and rewrites per graph).")
@click.option("--inline-functions", is_flag=True,
              help="Replace every call of a function MODEL defines by its body first, as ge "
                   "compile --inline-functions does, so the pass sees what it computes.")
@click.option("--opset", type=int, default=None, metavar="N",
              help="Convert MODEL to standard opset N first, as ge compile --opset N does "
                   "(after --inline-functions).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def explain_command(pass_name: str, model: str, pass_paths: tuple[str, ...],
                    option_pairs: tuple[str, ...], node: str | None, top: int,
                    inline_functions: bool, opset: int | None, as_json: bool) -> None:
    """Explain why PASS does or does not rewrite in MODEL, on the graph its stage sees: per
    pattern the closest partial matches, each with the first check that failed, and the
    matches it would rewrite; for a decompose pass, each node of its op types and what
    meet_requirements answered. The hooks read the --option values, and --inline-functions
    and --opset convert MODEL first, as in ge compile."""
    import ge.graph
    from ge.compiler.invocation import create_instance
    from ge.compiler.pass_failure import run_error
    from ge.errors import PatternError, concerning_model, model_file_named
    from ge.passes.context import PassContext
    from ge.passes.explain import PatternExplanation, explain
    from ge.passes.explain_decompose import DecomposeExplanation, explain_decompose
    from ge.passes.explain_stage import earlier_passes_warning, prepare_graph
    from ge.passes.explain_text import format_decompositions, format_explanations, undecided
    from ge.passes.registry import PASS_KIND_DECOMPOSE
    from ge.session.onnx_tools import converted_graph

    values = parse_options(option_pairs)  # ge compile's parser: the same usage error
    with command_output("ge", as_json=as_json) as out:
        options = listing_options(values, ())  # checked as a compilation checks them (GE1202)
        # (the graphs are closed when the command's work ends: `Graph.close`, as ge compile)
        with loaded_passes(pass_paths, options) as found, contextlib.ExitStack() as graphs:
            entry = _known_pass(pass_name, found)
            entries = found.entries
            flags = _conversion_flags(inline_functions, opset)
            loaded = ge.graph.load(model)
            graphs.callback(loaded.close)
            with model_file_named(model), concerning_model():  # (as ge compile names it)
                graph = converted_graph(loaded, opset=opset, inline_functions=inline_functions)
            graphs.callback(graph.close)
            if node is not None:
                _check_node(graph, node)
            state = prepare_graph(graph, entry.stage_label, pass_name=entry.name,
                                  model_file=model, flags=flags)
            earlier = earlier_passes_warning(entry.name, entry.stage_label,
                                             _earlier(entry, entries), model, flags)
            for text in [*state.warnings, *([earlier] if earlier is not None else [])]:
                warnings.warn(CompileWarning(text), stacklevel=1)
            decompose = entry.descriptor.kind == PASS_KIND_DECOMPOSE
            instance = create_instance(entry, entry.stage_label)
            context = PassContext(entry.name, options.values)
            patterns: list[PatternExplanation] = []
            decomposed: list[DecomposeExplanation] = []
            try:
                if decompose:
                    decomposed = explain_decompose(instance, graph, node, context=context,
                                                   op_types=list(entry.descriptor.op_types),
                                                   stage=entry.stage_label)
                else:
                    patterns = explain(instance, graph, node, context=context,
                                       stage=entry.stage_label)
            except GeError:
                raise
            except Exception as exc:
                raise run_error(entry, entry.stage_label, "FAILED",
                                f"{type(exc).__name__}: {exc}", exc) from exc
            for line in undecided([*patterns, *decomposed]):
                warnings.warn(CompileWarning(line), stacklevel=1)
            # An invalid pattern fails the pass in a compilation: the command fails too (after
            # the text has shown every pattern; JSON gives the error alone, as a compile would).
            invalid = [e for e in patterns if e.error is not None]
            failure = None if not invalid else PatternError(
                f"{entry.name}: " + "; ".join(str(e.error) for e in invalid))
            opsets = ", ".join(f"{d or 'ai.onnx'}={v}"
                               for d, v in sorted(graph.opset_imports.items()))
            if as_json:
                result: dict[str, Any] = {
                    "pass": entry.name, "kind": entry.descriptor.kind, "stage": entry.stage_label,
                    "source": str(entry.origin), "model": model, "graph": graph.name,
                    "opsets": dict(graph.opset_imports), "shape_inference": state.shape_inference,
                    "state": state.description, "options": values, "node": node, "top": top,
                    "inline_functions": inline_functions, "opset": opset,
                }
                if decompose:
                    result["op_types"] = list(entry.descriptor.op_types)
                    result["graphs"] = [e.as_dict(top) for e in decomposed]
                else:
                    result["patterns"] = [e.as_dict(top) for e in patterns]
                out.result(result)
                if failure is not None:
                    raise failure
                return
            given = ", ".join(f"{k}={v}" for k, v in values.items())
            click.echo(f"{entry.name} ({entry.descriptor.kind}, {entry.stage_label}, "
                       f"{entry.origin}) on {model} (graph {graph.name}, opsets {opsets})"
                       + (f", node {node!r}" if node is not None else "")
                       + (f", options {given}" if given else ""))
            converted = f" as ge compile{flags} converts it," if graph is not loaded else ""
            click.echo(f"matched against the model{converted} {state.description}")
            # The flag is named only where the command has it to give, and not given yet.
            advice = None if inline_functions else "--inline-functions inlines them"
            if decompose:
                lines = format_decompositions(decomposed, top=top, inline_advice=advice)
            else:
                if not patterns:
                    click.echo(f"{entry.name} has no patterns for this model: patterns() returned "
                               f"none at opsets {opsets}{_newer_opset_advice(entry, graph)}")
                lines = format_explanations(patterns, top=top, inline_advice=advice)
            for line in lines:
                click.echo(line)
            if failure is not None:
                raise failure
