"""Generated inputs whose name says mask are right-padded 0/1 masks, so that a verification
on generated inputs sees a rewrite that drops or misreads a mask (trial WW: a pass building
MultiHeadAttention without the attention mask verified with max abs diff 0, because the
generated `attention_mask`, integers 0..3, happened to hold no 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import VerificationError
from ge.session.inputs import generate_inputs
from ge.testing import make_model

MODELS = Path(__file__).resolve().parents[1] / "models"

# Drops the mask: Where(Equal(mask, 0), -10000, x) becomes x.
DROP_MASK = '''
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="DropMask", stage=PassStage.AFTER_INFER_SHAPE)
class DropMask(PatternFusionPass):
    @pattern
    def masked(self, inputs):
        return es.Where(es.Equal(inputs[0], inputs[1]), inputs[2], inputs[3])

    def replacement(self, inputs):
        return es.Identity(inputs[3])
'''


def _masked_model(mask_type: int = TensorProto.INT64) -> object:
    """y = Where(mask == 0, -10000, x): x where the mask keeps a position."""
    zero = helper.make_tensor("zero", mask_type, [], [0])
    low = helper.make_tensor("low", TensorProto.FLOAT, [], [-10000.0])
    return make_model(
        [helper.make_node("Equal", ["attention_mask", "zero"], ["padded"]),
         helper.make_node("Where", ["padded", "low", "x"], ["y"])],
        [("x", [1, 12]), ("attention_mask", [1, 12], mask_type)], [("y", [1, 12])],
        [zero, low])


def test_a_dropped_mask_fails_the_verification(tmp_path: Path) -> None:
    plugin = tmp_path / "drop_mask.py"
    plugin.write_text(DROP_MASK)
    out = tmp_path / "out.onnx"
    with pytest.raises(VerificationError) as caught:
        ge.compile(_masked_model(), pass_paths=[plugin], verify=True, builtin_passes=False)
    assert caught.value.code == "GE1603"
    assert "worst output 'y'" in caught.value.message
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["drop_mask.py"]


@pytest.mark.parametrize("mask_type", [TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL,
                                       TensorProto.FLOAT, TensorProto.FLOAT16],
                         ids=["int64", "int32", "bool", "float", "float16"])
def test_every_row_of_a_mask_keeps_a_prefix_of_at_least_half(mask_type: int) -> None:
    model = make_model([helper.make_node("Identity", ["input_mask"], ["y"])],
                       [("input_mask", [3, 2, 9], mask_type)], [("y", [3, 2, 9], mask_type)])
    mask = generate_inputs(model, seed=7)["input_mask"]
    assert mask.shape == (3, 2, 9)
    assert mask.dtype == helper.tensor_dtype_to_np_dtype(mask_type)
    rows = mask.reshape(-1, 9).astype(np.int64)
    kept = rows.sum(axis=1)
    assert set(np.unique(rows)) == {0, 1}
    assert ((kept >= 5) & (kept <= 8)).all()
    assert (rows == (np.arange(9)[None, :] < kept[:, None])).all()  # a prefix, then zeros
    assert len(set(kept.tolist())) > 1  # rows padded differently


def test_what_is_not_a_mask_is_drawn_as_before() -> None:
    """Only names saying mask: the token ids of the vendored DistilBERT stay 0..3, and a
    mask with no room for both values (a last axis of 1) or of strings is drawn as before."""
    drawn = generate_inputs(str(MODELS / "distilbert_tiny.onnx"))
    assert set(np.unique(drawn["input_ids"])) <= {0, 1, 2, 3}
    mask = drawn["attention_mask"]
    assert mask[0, 0] == 1 and mask[0, -1] == 0
    model = make_model([helper.make_node("Identity", ["mask"], ["y"])],
                       [("mask", [4, 1], TensorProto.INT64)], [("y", [4, 1], TensorProto.INT64)])
    narrow = generate_inputs(model, seed=3)["mask"]
    assert narrow.shape == (4, 1) and set(np.unique(narrow)) <= {0, 1, 2, 3}
