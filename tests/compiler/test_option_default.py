"""`context.get_option_value(key, default)`, the `ge` extension for opt-in passes: the
default when the compilation was not given the option, the option's value when it was;
without a default an absent option is still GE's RuntimeError, failing the pass (E13028).
`ge.testing`'s helpers take `options=` as a compilation does (checked: GE1202)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

import ge
from ge.cli import cli
from ge.errors import CompilerOptionError, PassRunError
from ge.testing import (
    apply_pass,
    assert_matches,
    assert_rewrites,
    find_matches,
    load_passes,
    make_model,
    run_pass,
)

OPTION = "test.neg_to_relu"

# An opt-in pattern pass: Neg -> Relu only when OPTION is "on" (a nonsense rewrite that is
# easy to see); READ is how meet_requirements reads the option.
OPT_IN = '''
from ge.es.all import Neg, Relu
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="OptIn", stage=PassStage.BEFORE_INFER_SHAPE)
class OptIn(PatternFusionPass):
    @pattern
    def neg(self, inputs):
        return Neg(inputs[0])

    def meet_requirements(self, match_result, context):
        return {read} == "on"

    def replacement(self, inputs):
        return Relu(inputs[0])
'''

READS = {
    "keyword": f'context.get_option_value("{OPTION}", default="off")',
    "positional": f'context.get_option_value("{OPTION}", "off")',
    "none": f'(context.get_option_value("{OPTION}", None) or "off")',
}


def _model() -> onnx.ModelProto:
    return make_model([helper.make_node("Neg", ["x"], ["y"], name="neg")],
                      [("x", [2, 3])], [("y", [2, 3])])


@pytest.fixture
def opt_in(tmp_path: Path) -> Callable[[str], Path]:
    def write(read: str) -> Path:
        path = tmp_path / "opt_in.py"
        path.write_text(textwrap.dedent(OPT_IN.format(read=read)))
        return path

    return write


def _ops(graph: ge.graph.Graph) -> list[str]:
    return [n.type for n in graph.get_direct_nodes() if n.type not in ("Data", "NetOutput")]


@pytest.mark.parametrize("read", sorted(READS))
def test_an_opt_in_pass_with_a_default_compiles_with_and_without_its_option(
        opt_in, read: str) -> None:
    plugin = opt_in(READS[read])
    assert _ops(ge.compile(_model(), pass_paths=[plugin]).graph) == ["Neg"]  # absent: "off"
    assert _ops(ge.compile(_model(), pass_paths=[plugin],
                           options={OPTION: "off"}).graph) == ["Neg"]
    assert _ops(ge.compile(_model(), pass_paths=[plugin],
                           options={OPTION: "on"}).graph) == ["Relu"]


def test_without_a_default_an_absent_option_fails_the_pass(opt_in) -> None:
    plugin = opt_in(f'context.get_option_value("{OPTION}")')
    assert _ops(ge.compile(_model(), pass_paths=[plugin],
                           options={OPTION: "on"}).graph) == ["Relu"]
    with pytest.raises(PassRunError) as info:
        ge.compile(_model(), pass_paths=[plugin])
    assert info.value.code == "E13028" and info.value.pass_name == "OptIn"
    assert f"RuntimeError: Failed to get option value for key: {OPTION}. The compilation " \
           "was given no options (ge compile --option KEY=VALUE" in info.value.message
    assert info.value.location is not None and info.value.location.file == str(plugin)
    # trial O: a misspelt option given (or read) is named; GE's own message is unchanged
    with pytest.raises(PassRunError) as info:
        ge.compile(_model(), pass_paths=[plugin], options={OPTION[:-1]: "on", "other": "1"})
    assert info.value.message.count(f"for key: {OPTION}. The compilation was given "
                                    f"{OPTION[:-1]!r}: misspelt?") == 1
    with pytest.raises(PassRunError) as info:
        ge.compile(_model(), pass_paths=[plugin], options={"other": "1"})
    assert f"for key: {OPTION}. The compilation was given 1 other option(s)" \
        in info.value.message


def test_the_cli_option_reaches_the_default_reading_pass(opt_in, tmp_path: Path) -> None:
    plugin = opt_in(READS["keyword"])
    model = tmp_path / "m.onnx"
    onnx.save(_model(), model)
    for extra, expected in (([], "Neg"), (["--option", f"{OPTION}=on"], "Relu")):
        out = tmp_path / "out.onnx"
        result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out), "--no-builtin",
                                          "--pass-path", str(plugin), *extra])
        assert result.exit_code == 0, result.output
        assert [n.op_type for n in onnx.load(out).graph.node] == [expected]


def test_the_testing_helpers_pass_options_as_a_compilation_does(opt_in) -> None:
    with load_passes(opt_in(READS["keyword"])) as passes:
        on = {OPTION: "on"}
        assert _ops(run_pass("OptIn", _model(), passes=passes)) == ["Neg"]
        assert _ops(run_pass("OptIn", _model(), passes=passes, options=on)) == ["Relu"]
        assert apply_pass("OptIn", _model(), passes=passes).rewrites == 0
        assert apply_pass("OptIn", _model(), passes=passes, options=on).rewrites == 1
        assert find_matches("OptIn", _model(), passes=passes) == []
        assert len(find_matches("OptIn", _model(), passes=passes, options=on)) == 1
        assert_matches("OptIn", _model(), 0, passes=passes)
        assert_matches("OptIn", _model(), 1, passes=passes, options=on)
        assert_rewrites("OptIn", _model(), 0, passes=passes)
        assert_rewrites("OptIn", _model(), 1, passes=passes, options=on)


@pytest.mark.parametrize(("options", "message"), [
    ({OPTION: True}, f"options must map str to str, got the bool True for '{OPTION}': "
                     "write 'true'"),
    ({OPTION: 1}, f"options must map str to str, got the int 1 for '{OPTION}': write '1'"),
    ({1: "on"}, "options must map str to str, got the int 1 as a key"),
    (f"{OPTION}=on", f"options must be a mapping of str to str, got the str '{OPTION}=on': "
                     f"write {{'{OPTION}': 'on'}}"),
    ([(OPTION, "on")], "options must be a mapping of str to str, got the list "
                       f"[('{OPTION}', 'on')]"),
    ({"ge.constant_folding.size_limit": "lots"},
     "option ge.constant_folding.size_limit must be a non-negative integer (bytes), "
     "got 'lots'"),
])
def test_the_testing_helpers_check_options_as_a_compilation_does(
        opt_in, options: object, message: str) -> None:
    with load_passes(opt_in(READS["keyword"])) as passes:
        with pytest.raises(CompilerOptionError) as compiled:
            ge.compile(_model(), options=options)  # type: ignore[arg-type]
        calls: list[Callable[..., object]] = [run_pass, apply_pass, find_matches]
        for call in calls:
            with pytest.raises(CompilerOptionError) as info:
                call("OptIn", _model(), passes=passes, options=options)
            assert info.value.code == "GE1202" and info.value.message == message
            assert info.value.message == compiled.value.message
        for check in (assert_matches, assert_rewrites):
            with pytest.raises(CompilerOptionError) as info:
                check("OptIn", _model(), 0, passes=passes, options=options)
            assert info.value.code == "GE1202" and info.value.message == message
