"""A BeforeInferShape pattern or decompose pass whose `meet_requirements` refuses every
match while the values it reads are untyped is told so (trial O: GE's capture-tensor sample
checks that the Add's inputs are DT_FLOAT at BeforeInferShape; on a model declaring no
types, as a TorchScript export, it refused both matches and the compilation said nothing)."""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import PassDefinitionWarning

PLUGIN = """
from ge.graph import DataType
from ge.passes import {base}, pattern, register_{api}


@register_{api}(name="FloatOnly", stage="{stage}"{extra})
class FloatOnly({base}):
{body}
    def meet_requirements(self, {what}):
        {check}
"""
PATTERN = dict(base="PatternFusionPass", api="fusion_pass", extra="", what="match_result",
               body="""    @pattern
    def add(self, inputs):
        return inputs[0] + inputs[1]

    def replacement(self, inputs):
        return inputs[0] - inputs[1]
""", check="add = next(n for n in match_result.get_matched_nodes() if n.type == 'Add')\n"
           "        return add.get_input_desc(0).get_data_type() == DataType.DT_FLOAT")
DECOMPOSE = dict(base="DecomposePass", api="decompose_pass", extra=', op_types=["Add"]',
                 what="node", body="""    def replacement(self, node):
        from ge.es.graph_builder import GraphBuilder
        builder = GraphBuilder("sub")
        a, b = builder.create_inputs(2)
        return builder.build_and_reset([a - b])
""", check="return node.get_input_desc(0).get_data_type() == DataType.DT_FLOAT")


def _model(path: Path, *, typed: bool) -> Path:
    """y = (x @ w) + b: the Add reads the MatMul's output, untyped unless `typed`."""
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         helper.make_node("Add", ["m", "b"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info(n, f, [2, 2]) for n in ("x", "w", "b")],
        [helper.make_tensor_value_info("y", f, [2, 2])],
        value_info=[helper.make_tensor_value_info("m", f, [2, 2])] if typed else [])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _compile(tmp_path: Path, form: dict[str, str], stage: str, typed: bool
             ) -> tuple[list[str], list[str]]:
    """The ops compiled (no built-in passes) and the PassDefinitionWarnings given."""
    plugin = tmp_path / "float_only.py"
    plugin.write_text(PLUGIN.format(stage=stage, **form))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ge.compile(_model(tmp_path / "m.onnx", typed=typed), pass_paths=[plugin],
                            builtin_passes=False)
    ops = [n.type for n in result.graph.get_direct_nodes() if n.type in ("Add", "Sub")]
    return ops, [str(w.message) for w in caught if w.category is PassDefinitionWarning]


@pytest.mark.parametrize("form", [PATTERN, DECOMPOSE], ids=["pattern", "decompose"])
def test_refusing_every_match_on_untyped_values_is_told(tmp_path: Path, form) -> None:
    ops, told = _compile(tmp_path, form, "BeforeInferShape", typed=False)
    assert ops == ["Add"] and len(told) == 1
    assert told[0].startswith("pass FloatOnly refused all 1 of its match(es) in graph 'g' at "
                              "BeforeInferShape, 1 after reading a value with no type or "
                              "rank (output 0 of 'mm' first): ")
    assert "register the pass at AfterInferShape" in told[0]
    assert told[0].endswith(f"(at {tmp_path / 'float_only.py'}:{15 if form is PATTERN else 14})")


@pytest.mark.parametrize("form", [PATTERN, DECOMPOSE], ids=["pattern", "decompose"])
@pytest.mark.parametrize("stage, typed", [("AfterInferShape", False),
                                          ("BeforeInferShape", True)])
def test_typed_values_rewrite_and_nothing_is_told(tmp_path: Path, form, stage: str,
                                                  typed: bool) -> None:
    assert _compile(tmp_path, form, stage, typed) == (["Sub"], [])


def test_a_hook_reading_no_type_is_not_told(tmp_path: Path) -> None:
    """Trial R: an opt-in pass (its hook reads an option, off) refused every match while the
    values were untyped, and was told to move to AfterInferShape, which changes nothing:
    only a hook that read a desc nothing was known of is told."""
    off = dict(PATTERN, check='return context.get_option_value("my.on", default="no") == "yes"')
    off["what"] = "match_result, context"
    assert _compile(tmp_path, off, "BeforeInferShape", typed=False) == (["Add"], [])


def test_a_hook_reading_a_type_through_its_own_method_is_told(tmp_path: Path) -> None:
    """Trial S: a hook calling `self._is_float(...)`, the method reading the type, is told;
    one refusing without reading a desc is not."""
    helper_form = dict(PATTERN, body=PATTERN["body"] + """
    def _is_float(self, node):
        return node.get_input_desc(0).get_data_type() == DataType.DT_FLOAT
""", check="add = next(n for n in match_result.get_matched_nodes() if n.type == 'Add')\n"
           "        return self._is_float(add)")
    assert len(_compile(tmp_path, helper_form, "BeforeInferShape", typed=False)[1]) == 1
    commented = dict(PATTERN, check="return False  # not about the shape or the dtype")
    assert _compile(tmp_path, commented, "BeforeInferShape", typed=False)[1] == []


def test_a_hook_reading_only_a_constants_value_is_not_told(tmp_path: Path) -> None:
    """Trial X, GE's P4a sample: its hook reads the matched constant's own `Tensor` (its
    `data_type` and data, always known) and refuses `Add(x, 1.0)`; the values of the match
    being untyped was no reason for it, and the advice to move the pass was wrong (the
    check then went by the words in the hook's source)."""
    const_check = dict(PATTERN, body="""    @pattern
    def add(self, inputs):
        return inputs[0] + 0.0

    def replacement(self, inputs):
        return inputs[0]
""", check="const = next(n for n in match_result.get_matched_nodes() if n.type == 'Const')\n"
           "        value = const.get_attr('value')\n"
           "        return value.data_type == DataType.DT_FLOAT and value.data == 0")
    plugin = tmp_path / "float_only.py"
    plugin.write_text(PLUGIN.format(stage="BeforeInferShape", **const_check))
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Add", ["r", "one"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", f, [2, 2])],
        [helper.make_tensor_value_info("y", f, [2, 2])],
        [helper.make_tensor("one", f, [], [1.0])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "m.onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ge.compile(tmp_path / "m.onnx", pass_paths=[plugin], builtin_passes=False)
    assert [n.type for n in result.graph.get_direct_nodes() if n.type == "Add"] == ["Add"]
    assert [w for w in caught if w.category is PassDefinitionWarning] == []


def test_a_value_typed_without_a_rank_read_by_the_hook_is_told(tmp_path: Path) -> None:
    """Trial AA: a value_info giving the type but no shape is a desc of unknown rank; a hook
    refusing on its rank read it, and is told as for a desc nothing is known of."""
    rank_check = dict(PATTERN, check="add = next(n for n in match_result.get_matched_nodes() "
                                     "if n.type == 'Add')\n"
                                     "        return add.get_input_desc(0).get_shape()"
                                     ".get_dim_num() == 2")
    plugin = tmp_path / "float_only.py"
    plugin.write_text(PLUGIN.format(stage="BeforeInferShape", **rank_check))
    model = tmp_path / "m.onnx"
    _model(model, typed=False)
    proto = onnx.load(model)
    proto.graph.value_info.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, None))
    onnx.save(proto, model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    (told,) = [str(w.message) for w in caught if w.category is PassDefinitionWarning]
    assert "1 after reading a value with no type or rank (output 0 of 'mm' first)" in told


def test_a_refusal_in_a_body_reading_an_enclosing_graphs_value_is_told(tmp_path: Path
                                                                        ) -> None:
    """Trial C: the Add of an If branch reads the MatMul of the graph enclosing it; the read
    was counted on that graph, not on the branch the pass ran on, so the branch's refusal
    was not told (a Loop body's own Add was)."""
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Add", ["m", "b"], ["t"], name="inner_add")],
                             "then_g", [], [vi("t", f, [2, 2])])
    other = helper.make_graph([helper.make_node("Identity", ["m"], ["e"], name="keep")],
                              "else_g", [], [vi("e", f, [2, 2])])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         helper.make_node("If", ["c"], ["y"], name="cond_if", then_branch=then,
                          else_branch=other)], "g",
        [vi("x", f, [2, 2]), vi("w", f, [2, 2]), vi("b", f, [2, 2]),
         vi("c", TensorProto.BOOL, [])], [vi("y", f, [2, 2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "m.onnx")
    plugin = tmp_path / "float_only.py"
    plugin.write_text(PLUGIN.format(stage="BeforeInferShape", **DECOMPOSE))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(tmp_path / "m.onnx", pass_paths=[plugin], builtin_passes=False)
    told = [str(w.message) for w in caught if w.category is PassDefinitionWarning]
    assert len(told) == 1
    assert told[0].startswith(
        "pass FloatOnly refused all 1 of its match(es) in graph 'then_g', then_branch of If "
        "node 'cond_if' at BeforeInferShape, 1 after reading a value with no type or rank "
        "(output 0 of 'mm' first): ")
