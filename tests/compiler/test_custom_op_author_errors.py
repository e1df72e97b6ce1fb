"""A custom operator's own functions (its registered inference function and kernel) are its
author's code: ge calls the inference function only once the op's inputs are final, and
when either function fails or gives what does not fit the node, the error says which
function, at which line, with what it was given, and nothing is written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.cli import cli
from ge.errors import PassRunError, SessionError, ShapeInferenceError
from ge.testing import make_model

DOMAIN = "test.authors"

# `Twice` doubles its input; its inference reads the input's first two dims (as a conv's
# does), which a placeholder of unknown rank does not have.
PLUGIN = '''
import numpy as np

from ge.es.custom import operator
from ge.graph import DataType, Shape, TensorDesc
from ge.ops import register_op
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


def infer_twice(ctx):
    dims = list(ctx.input_descs[0].get_shape())
    desc = TensorDesc(Shape([dims[0], dims[1]]), ctx.input_descs[0].get_format(),
                      ctx.input_descs[0].get_data_type())
    return [desc]  # RESULT


def twice_kernel(x, *, scale=2.0):
    return (x * scale).astype(x.dtype)  # KERNEL


register_op("Twice", domain="test.authors", inputs=["x"], outputs=["y"],
            attributes={"scale": ("float", 2.0)}, infer=infer_twice, kernel=twice_kernel)
Twice = operator("Twice", "test.authors")


@register_fusion_pass(name="FuseTwice", stage=PassStage.AFTER_INFER_SHAPE)
class FuseTwice(PatternFusionPass):
    @pattern
    def add_self(self, inputs):
        return inputs[0] + inputs[0]

    def replacement(self, inputs):
        return Twice(inputs[0])
'''


def _plugin(folder: Path, *edits: tuple[str, str]) -> Path:
    source = textwrap.dedent(PLUGIN)
    for old, new in edits:
        assert old in source
        source = source.replace(old, new)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "twice.py"
    path.write_text(source)
    return path


def _with_domain(model: onnx.ModelProto) -> onnx.ModelProto:
    model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return model


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _add_model() -> onnx.ModelProto:
    """x + x, which FuseTwice makes Twice(x)."""
    return make_model([helper.make_node("Add", ["x", "x"], ["y"], name="add")],
                      [("x", [2, 3])], [("y", [2, 3])])


def _refused_by_cli(tmp_path: Path, model: onnx.ModelProto, plugin: Path, *extra: str) -> str:
    """`ge compile` of `model` with `plugin`: it fails and writes no output; its output."""
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    ran = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--pass-path",
                                   str(plugin), *extra])
    assert ran.exit_code != 0, ran.output
    assert not out.exists()
    return " ".join(ran.output.split())


# -- 1. inference waits for final inputs -----------------------------------------------------


def _chain_model() -> onnx.ModelProto:
    """A model holding Twice already (as ge writes it, no value_info): c3 reads
    Mul(p, Sigmoid(c2)), which onnx's first runs type `float32` of unknown rank while c2
    has no type yet."""
    nodes = [
        helper.make_node("Twice", ["x"], ["c1"], domain=DOMAIN, name="c1"),
        helper.make_node("Relu", ["c1"], ["p"], name="relu"),
        helper.make_node("Twice", ["p"], ["c2"], domain=DOMAIN, name="c2"),
        helper.make_node("Sigmoid", ["c2"], ["g"], name="gate"),
        helper.make_node("Mul", ["p", "g"], ["m"], name="mul"),
        helper.make_node("Twice", ["m"], ["c3"], domain=DOMAIN, name="c3"),
        helper.make_node("Relu", ["c3"], ["y"], name="out"),  # (c3's type is not declared)
    ]
    return _with_domain(make_model(nodes, [("x", [1, 4])], [("y", [1, 4])], check=False))


def test_an_op_behind_an_untyped_one_is_inferred_from_final_inputs(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path / "p")
    result = ge.compile(_chain_model(), pass_paths=[plugin], verify=True)
    assert result.verification is not None and result.verification.ok
    node = result.graph.find_node_by_name("c3")
    assert repr(node.get_output_desc(0)) == "TensorDesc(float32[1,4])"


def test_an_input_unknown_for_good_reaches_the_function_and_its_failure_says_so(
        tmp_path: Path) -> None:
    """x has no shape in the model: the function is called with float32 of unknown rank
    (docs/ops.md), and its IndexError names the type, the line and the descs it got."""
    plugin = _plugin(tmp_path / "p")
    graph = helper.make_graph(
        [helper.make_node("Twice", ["x"], ["t"], domain=DOMAIN, name="tw"),
         helper.make_node("Relu", ["t"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = _with_domain(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                           ir_version=8))
    with pytest.raises(ShapeInferenceError) as info:
        ge.compile(model, pass_paths=[plugin])
    err = info.value
    assert type(err).__name__ == "InferenceFunctionError" and err.code == "GE1305"
    assert err.stage == "InferShape" and err.nodes == ("tw",)
    raised = _line(plugin, "desc = TensorDesc(Shape([dims[0], dims[1]])")
    assert err.location is not None and (err.location.file, err.location.line) == (
        str(plugin), raised)
    assert (f"the registered inference function infer_twice ({plugin}:"
            f"{_line(plugin, 'def infer_twice')}) of test.authors::Twice, registered at "
            f"{plugin}:{_line(plugin, 'register_op(')} failed with IndexError: list index "
            f"out of range (raised at {plugin}:{raised}), given input descs "
            "(TensorDesc(float32?))") in err.message


# -- 2. a broken function fails the pass that builds the op ----------------------------------


@pytest.mark.parametrize(("edit", "said"), [
    (("    return [desc]  # RESULT", "    return [desc, desc]  # RESULT"),
     "must return one TensorDesc per output (1), a list; it returned 2 value(s): "
     "TensorDesc(float32[2,3]), TensorDesc(float32[2,3]), given input descs "
     "(TensorDesc(float32[2,3]))"),
    (("    return [desc]  # RESULT", "    return []  # RESULT"),
     "must return one TensorDesc per output (1), a list; it returned an empty sequence"),
    (("    return [desc]  # RESULT", "    return [ctx.attrs['nope']]  # RESULT"),
     "failed with KeyError: 'nope' (raised at {plugin}:{result})"),
])
def test_a_broken_inference_function_fails_the_building_pass(
        tmp_path: Path, edit: tuple[str, str], said: str) -> None:
    plugin = _plugin(tmp_path / "p", edit)
    said = said.format(plugin=plugin, result=_line(plugin, "# RESULT"))
    with pytest.raises(PassRunError) as info:
        ge.compile(_add_model(), pass_paths=[plugin], verify=True)
    err = info.value
    assert err.code == "E13028" and err.pass_name == "FuseTwice"
    assert "Reason: InferenceFunctionError: [GE1305]" in err.message
    assert (f"the registered inference function infer_twice "
            f"({plugin}:{_line(plugin, 'def infer_twice')})") in err.message
    assert said in err.message
    assert "FuseTwice" in _refused_by_cli(tmp_path, _add_model(), plugin, "--verify")


# -- 3. a wrong desc is put down to the inference function -----------------------------------


def test_a_wrong_inferred_type_names_the_inference_function(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path / "p", ("ctx.input_descs[0].get_data_type())",
                                      "DataType.DT_INT64)"))
    with pytest.raises(PassRunError) as info:
        ge.compile(_add_model(), pass_paths=[plugin])
    err = info.value
    infer_line = _line(plugin, "def infer_twice")
    assert err.code == "E13028" and err.pass_name == "FuseTwice"
    assert "[GE1502] output 0 of the replacement" in err.message
    assert (f"output 0 of test.authors::Twice is typed by the registered inference function "
            f"infer_twice ({plugin}:{infer_line}) of test.authors::Twice, registered at "
            f"{plugin}:{_line(plugin, 'register_op(')}, which gave it for input descs "
            "(TensorDesc(float32[2,3])): if the replacement is the operator the match needs, "
            "that function is wrong") in err.message
    assert err.location is not None and err.location.line == infer_line  # not `replacement`
    _refused_by_cli(tmp_path, _add_model(), plugin)


@pytest.mark.parametrize("declared_in", ["output", "value_info"])
def test_a_declared_type_its_inference_contradicts_is_refused(tmp_path: Path,
                                                               declared_in: str) -> None:
    """Trial V: the model declares Twice's output [2, 3], its inference gives [4, 3]. The
    declared type spared the function's call, and the model was written in silence (its
    kernel then failed `ge run`); now the compilation fails at InferShape, naming both."""
    plugin = _plugin(tmp_path / "p", ("Shape([dims[0], dims[1]])",
                                      "Shape([dims[0] * 2, dims[1]])"))
    nodes = [helper.make_node("Twice", ["x"], ["t"], domain=DOMAIN, name="tw")]
    if declared_in == "output":
        model = _with_domain(make_model(nodes, [("x", [2, 3])], [("t", [2, 3])], check=False))
    else:
        nodes.append(helper.make_node("Relu", ["t"], ["y"], name="out"))
        model = _with_domain(make_model(nodes, [("x", [2, 3])], [("y", [2, 3])], check=False))
        model.graph.value_info.append(
            helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3]))
    before = model.SerializeToString()
    with pytest.raises(ShapeInferenceError) as info:
        ge.compile(model, pass_paths=[plugin])
    err = info.value
    assert (err.code, err.stage) == ("GE1305", "InferShape")
    infer_line = _line(plugin, "def infer_twice")
    assert (f"test.authors.Twice node 'tw': the model declares output 0 as "
            f"TensorDesc(float32[2,3]), the registered inference function infer_twice "
            f"({plugin}:{infer_line}) of test.authors::Twice, registered at "
            f"{plugin}:{_line(plugin, 'register_op(')}, gives TensorDesc(float32[4,3]) from "
            "its inputs (TensorDesc(float32[2,3])): correct the model's declared type or the "
            "function") in err.message
    assert err.location is not None and err.location.line == infer_line
    assert model.SerializeToString() == before
    said = _refused_by_cli(tmp_path, model, plugin)
    assert "[GE1305]" in said and "gives TensorDesc(float32[4,3])" in said


def test_a_declared_type_its_inference_agrees_with_compiles(tmp_path: Path) -> None:
    """The same model with the function as registered: the declared [2, 3] is what it
    gives, and the compilation runs the kernel at verification."""
    plugin = _plugin(tmp_path / "p")
    model = _with_domain(make_model(
        [helper.make_node("Twice", ["x"], ["t"], domain=DOMAIN, name="tw")],
        [("x", [2, 3])], [("t", [2, 3])], check=False))
    result = ge.compile(model, pass_paths=[plugin], verify=True)
    assert [n.type for n in result.graph.get_direct_nodes() if n.domain] == ["Twice"]


# -- 4. kernels are checked against the node's descs -----------------------------------------


@pytest.mark.parametrize(("edit", "said"), [
    (("(x * scale).astype(x.dtype)  # KERNEL", "(x * scale)[:1].astype(x.dtype)  # KERNEL"),
     "returned shape [1, 3] for output 0 (an array of float32[1, 3]), where the node's "
     "output desc (its inference's, or the type the model declares) is TensorDesc(float32[2,3])"),
    (("(x * scale).astype(x.dtype)  # KERNEL", "(x * scale).astype(np.float64)  # KERNEL"),
     "returned dtype float64 for output 0 (an array of float64[2, 3]), where the node's "
     "output desc (its inference's, or the type the model declares) is TensorDesc(float32[2,3])"),
    (("(x * scale).astype(x.dtype)  # KERNEL", "x.undefined  # KERNEL"),
     "failed with AttributeError: 'numpy.ndarray' object has no attribute 'undefined' "
     "(raised at {plugin}:{kernel})"),
    (("kernel=twice_kernel)", "kernel=lambda x: x * 2)"),
     "failed with TypeError: <lambda>() got an unexpected keyword argument 'scale'; ge calls "
     "it as kernel(*inputs, **attributes): every attribute of the node (defaults filled in) "
     "is passed as a keyword argument (scale)"),
])
def test_a_wrong_kernel_is_said_at_verification(tmp_path: Path, edit: tuple[str, str],
                                                said: str) -> None:
    plugin = _plugin(tmp_path / "p", edit)
    said = said.format(plugin=plugin, kernel=_line(plugin, "# KERNEL"))
    with pytest.raises(SessionError) as info:
        ge.compile(_add_model(), pass_paths=[plugin], verify=True)
    err = info.value
    assert err.code == "GE1601"
    assert "[GE1306] test.authors.Twice node 'Twice': the kernel " in err.message
    assert " of test.authors::Twice, registered at " in err.message
    assert said in err.message
    _refused_by_cli(tmp_path, _add_model(), plugin, "--verify")


@pytest.mark.builtin_passes  # (the conftest runs plugin passes alone unless marked)
def test_a_wrong_kernel_is_said_when_constant_folding_runs_it(tmp_path: Path) -> None:
    """Twice of an initializer: ConstantFolding runs the kernel, which returns one row of
    two. It skipped the node in silence before; now the fold fails, blaming the kernel."""
    plugin = _plugin(tmp_path / "p", ("(x * scale).astype(x.dtype)  # KERNEL",
                                      "(x * scale)[:1].astype(x.dtype)  # KERNEL"))
    weight = numpy_helper.from_array(np.ones((2, 3), np.float32), "c")
    model = _with_domain(make_model(
        [helper.make_node("Twice", ["c"], ["t"], domain=DOMAIN, name="tw"),
         helper.make_node("Add", ["x", "t"], ["y"], name="add")],
        [("x", [2, 3])], [("y", [2, 3])], [weight], check=False))
    with pytest.raises(PassRunError) as info:
        ge.compile(model, pass_paths=[plugin])
    err = info.value
    assert (err.code, err.pass_name) == ("E13028", "ConstantFolding")
    kernel, registered = _line(plugin, "# KERNEL") - 1, _line(plugin, "register_op(")
    assert (f"KernelError: [GE1306] test.authors.Twice node 'tw': the kernel twice_kernel "
            f"({plugin}:{kernel}) of test.authors::Twice, registered at {plugin}:{registered} "
            "returned shape [1, 3] for output 0 (an array of float32[1, 3]), where the "
            "node's output desc (its inference's, or the type the model declares) is "
            "TensorDesc(float32[2,3]). The custom operator's registered function is at fault "
            "(its plugin's code, not ge)"
            ) in err.message
    _refused_by_cli(tmp_path, model, plugin)


# -- 5. inference again after folding fails as inference anywhere ---------------------------

# `RepeatRows` tiles its input `times` times along each axis; its inference reads `times`
# when it is a constant, taking it for a scalar (the rows' count): the model's is a vector
# of two, which only folding makes a constant (`Mul` of two initializers), so the function
# fails only then.
REPEAT_PLUGIN = '''
import numpy as np

from ge.graph import TensorDesc
from ge.ops import register_op


def infer_repeat(ctx):
    x, times = ctx.input_descs[0], ctx.input_values[1]
    rows = -1 if times is None else x.get_shape()[0] * int(times)  # SCALAR
    return [TensorDesc([rows, *x.get_shape()[1:]], data_type=x.data_type)]


def repeat_kernel(x, times):
    return np.tile(x, times)


register_op("RepeatRows", domain="test.authors", inputs=["x", "times"], outputs=["y"],
            infer=infer_repeat, kernel=repeat_kernel)
'''


@pytest.mark.builtin_passes
def test_an_inference_function_failing_on_what_folding_computed_fails_the_fold(
        tmp_path: Path) -> None:
    """`refine_output_descs` kept the node's earlier descs in silence when the function
    raised there; now it is the GE1305 it is anywhere else, put down to the plugin."""
    plugin = tmp_path / "p" / "repeat.py"
    plugin.parent.mkdir()
    plugin.write_text(textwrap.dedent(REPEAT_PLUGIN))
    model = _with_domain(make_model(
        [helper.make_node("Mul", ["k", "k"], ["t"], name="mul"),
         helper.make_node("RepeatRows", ["x", "t"], ["r"], domain=DOMAIN, name="rep"),
         helper.make_node("Relu", ["r"], ["y"], name="relu")],
        [("x", [4, 3])], [("y", [-1, 3])],
        [numpy_helper.from_array(np.array([1, 1], np.int64), "k")], check=False))
    ge.compile(model, pass_paths=[plugin], disable=["ConstantFolding"])  # typed before it
    with pytest.raises(PassRunError) as info:
        ge.compile(model, pass_paths=[plugin])
    err = info.value
    assert (err.code, err.pass_name, err.stage) == ("E13028", "ConstantFolding",
                                                    "OriginGraphOptimize")
    raised = _line(plugin, "# SCALAR")
    assert err.location is not None and (err.location.file, err.location.line) == (
        str(plugin), raised)
    assert (f"InferenceFunctionError: [GE1305] test.authors.RepeatRows node 'rep': the "
            f"registered inference function infer_repeat ({plugin}:"
            f"{_line(plugin, 'def infer_repeat')}) of test.authors::RepeatRows, registered at "
            f"{plugin}:{_line(plugin, 'register_op(')} failed with TypeError: ") in err.message
    assert (f"(raised at {plugin}:{raised}), given input descs (TensorDesc(float32[4,3]), "
            "TensorDesc(int64[2]))") in err.message
    assert "The custom operator's registered function is at fault" in err.message
