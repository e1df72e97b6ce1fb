"""`PatternMatcherConfig` and its builder: how strictly pattern nodes must match targets.

By default a pattern `Const` matches any constant and attributes are not compared (GE's
defaults). Const-value match compares a pattern constant's dtype, shape and bytes exactly;
IR-attribute match compares the attribute sets after filling unset optional attributes with
their ONNX defaults. Commutative match (an extension, D15) lets Add, Mul, Max, Min, Sum,
And, Or, Xor and Equal match with their inputs in any order.
"""

from __future__ import annotations

__all__ = ["COMMUTATIVE_OPS", "PatternMatcherConfig", "PatternMatcherConfigBuilder"]

#: The operators `enable_commutative_match()` lets match with their inputs in any order.
COMMUTATIVE_OPS = frozenset({"Add", "Mul", "Max", "Min", "Sum", "And", "Or", "Xor", "Equal"})


class PatternMatcherConfig:
    """The matching switches of a `PatternFusionPass` (immutable; made by the builder)."""

    __slots__ = ("_commutative", "_const_value", "_ir_attr")

    def __init__(self, *, const_value_match: bool = False, ir_attr_match: bool = False,
                 commutative_match: bool = False) -> None:
        self._const_value = bool(const_value_match)
        self._ir_attr = bool(ir_attr_match)
        self._commutative = bool(commutative_match)

    def is_enable_const_value_match(self) -> bool:
        """Whether a pattern constant matches only constants of equal dtype, shape, bytes."""
        return self._const_value

    def is_enable_ir_attr_match(self) -> bool:
        """Whether pattern and target nodes must have equal attributes (defaults filled in)."""
        return self._ir_attr

    def is_enable_commutative_match(self) -> bool:
        """Whether commutative operators match with their inputs in any order (extension)."""
        return self._commutative

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PatternMatcherConfig):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[bool, bool, bool]:
        return (self._const_value, self._ir_attr, self._commutative)

    def __repr__(self) -> str:
        return (f"PatternMatcherConfig(const_value_match={self._const_value}, "
                f"ir_attr_match={self._ir_attr}, commutative_match={self._commutative})")


class PatternMatcherConfigBuilder:
    """Builds a `PatternMatcherConfig`; each `enable_*` returns the builder (chainable)."""

    __slots__ = ("_commutative", "_const_value", "_ir_attr")

    def __init__(self) -> None:
        self._const_value = False
        self._ir_attr = False
        self._commutative = False

    def enable_const_value_match(self) -> PatternMatcherConfigBuilder:
        self._const_value = True
        return self

    def enable_ir_attr_match(self) -> PatternMatcherConfigBuilder:
        self._ir_attr = True
        return self

    def enable_commutative_match(self) -> PatternMatcherConfigBuilder:
        """Extension (D15): Add, Mul, Max, Min, Sum, And, Or, Xor, Equal match with their
        inputs in either order, found by backtracking (the pattern is never copied)."""
        self._commutative = True
        return self

    def build(self) -> PatternMatcherConfig:
        return PatternMatcherConfig(const_value_match=self._const_value,
                                    ir_attr_match=self._ir_attr,
                                    commutative_match=self._commutative)
