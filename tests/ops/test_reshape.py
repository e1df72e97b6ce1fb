"""`ge.ops.reshape.reshaped_dims`, the one Reshape arithmetic of inference and of the
built-in passes: 0 copies an input dim (a size with `allowzero`), one -1 takes what the
other axes leave, by sizes and by symbols that cancel; what cannot be told is None."""

from __future__ import annotations

import pytest

from ge.graph import Graph
from ge.ops.reshape import allow_zero, reshaped_dims


@pytest.mark.parametrize(("dims", "target", "expected"), [
    ([2, 3, 4], [6, 4], [6, 4]),
    ([2, 3, 4], [0, -1], [2, 12]),             # 0 copies, -1 by the element count
    ([2, 3, 4], [-1, 5], [None, 5]),           # 24 / 5 does not divide: not told
    (["B", "S", 4], [0, 0, 2, 2], ["B", "S", 2, 2]),
    (["B", "S", 4], [-1, 0, 4], ["B", "S", 4]),
    (["B", 4, 8], [-1, 32], ["B", 32]),        # the symbols cancel across ranks
    (["B", "S", 4], [-1, 0, 2, 2], ["B", "S", 2, 2]),
    (["B", "S", 4], [-1, 4], [None, 4]),       # B * S is no single dim
    (["B", "S", 4], [0, 4, -1], ["B", 4, "S"]),
    (["B", 0], [-1, 0], [None, 0]),            # 0 copies a 0: the -1 is undefined
    ([2, 3], [0, 0, 0], [2, 3, None]),         # a 0 beyond the input's rank copies nothing
    ([None, 3], [0, -1], [None, None]),        # an unknown dim stays unknown
    (None, [0, 3], [None, 3]),                 # so does an unknown rank
    ([2, 3], [-1, -1], None),                  # no Reshape takes two -1s
    ([2, 3], [-2, 3], None),
])
def test_reshaped_dims(dims, target, expected) -> None:
    assert reshaped_dims(dims, target, zero_is_size=False) == expected


def test_allowzero_makes_0_a_size() -> None:
    assert reshaped_dims([0, 3], [3, 0], zero_is_size=True) == [3, 0]
    assert reshaped_dims([0, 3], [-1, 0], zero_is_size=True) == [None, 0]  # 0 / 0
    assert reshaped_dims(["B", 3], [0, -1], zero_is_size=True) == [0, None]


def test_symbols_in_the_target_cancel_the_input_s() -> None:
    """A computed target holds symbols (`Shape` of the input): they cancel like sizes."""
    assert reshaped_dims(["B", "S", 8], ["B", "S", -1, 4], False) == ["B", "S", 2, 4]
    assert reshaped_dims(["B", "S", 8], ["B", -1], False) == ["B", None]
    assert reshaped_dims(["B", 8], ["T", -1], False) == ["T", None]


@pytest.mark.parametrize(("attrs", "expected"), [({}, False), ({"allowzero": 0}, False),
                                                 ({"allowzero": 1}, True)])
def test_allow_zero_reads_the_attribute_as_onnxruntime_does(attrs, expected) -> None:
    node = Graph().add_node("Reshape", num_inputs=2, attrs=attrs)
    assert allow_zero(node) is expected
