"""A pattern pass's patterns: collected from its `patterns()` as GE checks them, compiled
once per instance and compilation, with a warning for attributes the matcher does not compare.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ge.errors import GeError, PassDefinitionWarning, PatternError
from ge.graph import Graph, Node
from ge.ops.onnx_node import node_spec
from ge.passes.config import PatternMatcherConfig
from ge.passes.matcher import CompiledPattern, compile_pattern
from ge.passes.pattern import Pattern, create_pattern
from ge.passes.source import blame, definition_location, hook_location, warn_user

if TYPE_CHECKING:
    from ge.passes.base import PatternFusionPass
    from ge.passes.execution import PassRun

__all__ = ["collect_patterns", "compiled_patterns", "matcher_config",
           "warn_uncompared_attributes"]


def collect_patterns(instance: PatternFusionPass) -> list[Pattern]:
    """The patterns of `instance.patterns()`, checked as GE checks them (§3.2), built in
    the ES builder's `pattern_scope` (a pattern need not be well typed: an operator onnx
    rejects in it is kept untyped, not refused)."""
    from ge.es.scopes import pattern_scope

    with pattern_scope():  # (a generator builds its patterns as it is iterated, below)
        return _collected(instance)


def _collected(instance: PatternFusionPass) -> list[Pattern]:
    produced = instance.patterns()
    if produced is None:
        return []
    if isinstance(produced, (str, bytes)) or not isinstance(produced, Iterable):
        raise blame(TypeError(
            "PatternFusionPass.patterns must return an iterable of Pattern or Graph"),
            instance.patterns)
    patterns = []
    for item in produced:
        if isinstance(item, Pattern):
            patterns.append(item)
        elif isinstance(item, Graph):
            patterns.append(create_pattern(item))
        else:
            raise blame(TypeError(
                "PatternFusionPass.patterns must return Pattern or Graph objects"),
                instance.patterns)
    return patterns


def matcher_config(instance: PatternFusionPass) -> PatternMatcherConfig:
    """The instance's matcher config; an `__init__` that skipped the base's is to blame."""
    try:
        config = instance.matcher_config
    except AttributeError as exc:
        raise blame(exc, type(instance).__init__) from None
    return config if config is not None else PatternMatcherConfig()


def _compiled(pattern: Pattern, config: PatternMatcherConfig, instance: PatternFusionPass
              ) -> CompiledPattern:
    """`compile_pattern`; a pattern that cannot be matched is the fault of the `@pattern`
    method that built it (else of `patterns()`)."""
    try:
        return compile_pattern(pattern, config)
    except PatternError as err:
        raise blame(err, pattern._source or instance.patterns) from None


def compiled_patterns(instance: PatternFusionPass, run: PassRun) -> list[CompiledPattern]:
    """The instance's patterns, built once per instance and compilation (GE builds a pass's
    patterns once too): a pass may keep on the instance what it learned while building them
    (which capture plays which role), so they are never shared between instances."""
    memo = run.patterns
    if memo is not None:
        kept = memo.get(id(instance))
        if kept is not None and kept[0] is instance:
            return kept[1]
    config = matcher_config(instance)
    patterns = collect_patterns(instance)
    compiled = [_compiled(pattern, config, instance) for pattern in patterns]
    if not config.is_enable_ir_attr_match():
        for pattern in patterns:
            warn_uncompared_attributes(instance, pattern)
    if memo is not None:
        memo[id(instance)] = (instance, compiled)
    if run.patterns_built is not None:
        run.patterns_built(instance, compiled)
    return compiled


def warn_uncompared_attributes(instance: PatternFusionPass, pattern: Pattern) -> None:
    """A `PassDefinitionWarning` for a plugin's pattern that sets attributes on its operators
    while attribute matching is off (GE's default): they are not compared, so the pattern
    matches whatever those attributes are (`Transpose(x, perm=[1, 0])` matches every
    Transpose, `Cast(x, to=DOUBLE)` every Cast: required attributes count when the pass has
    no `meet_requirements` of its own). At the `@pattern` method's line, once per
    compilation (patterns are built once per compilation). The built-in passes, which check
    attributes in their `meet_requirements`, are left out, and so are their patterns in a
    subclass of one (a test's recording subclass of LayerNormFusion got 30 warnings from
    find_matches)."""
    if "__ge_builtin__" in type(instance).__dict__:
        return
    # (the @pattern method that built it, else the patterns() that did)
    source = pattern._source or getattr(type(instance), "patterns", None)
    if (getattr(source, "__module__", None) or "").startswith("ge."):
        return  # (a pattern of ge's own code: a built-in pass's, inherited)
    from ge.passes.base import PatternFusionPass

    # a required attribute only when no meet_requirements could be checking it (trial FF's
    # pass read Concat's axis there: warned on every compilation, it was noise)
    required_too = type(instance).meet_requirements is PatternFusionPass.meet_requirements
    nodes = pattern.get_graph().get_direct_nodes()
    set_attrs = sorted({f"{node.type}({', '.join(names)})" for node in nodes
                        if (names := _attributes_set(node, required_too))})
    if not set_attrs:
        return
    # an optional attribute is warned about whatever meet_requirements checks (it cannot be
    # told): what silences it is leaving it out of the pattern (trial WW)
    optional = [(node.type, names) for node in nodes
                if (names := _attributes_set(node, False))]
    if optional:
        one = sum(len(names) for _, names in optional) == 1
        shown = ", ".join(sorted({f"{op}({', '.join(names)})" for op, names in optional}))
        advice = (f"or leave {'that attribute' if one else 'those attributes'} unset in the "
                  f"pattern ({shown}) and check {'it' if one else 'them'} in "
                  "meet_requirements")
    else:
        advice = "or check them in meet_requirements"
    where = hook_location(pattern._source) or definition_location(type(instance))
    warn_user(PassDefinitionWarning(
        f"pattern {pattern.name!r} of {type(instance).__name__} sets attributes of "
        f"{', '.join(set_attrs)}, which are not compared: the matcher compares attributes "
        "only with PatternMatcherConfigBuilder().enable_ir_attr_match() (GE's rule), so "
        "the pattern matches those operators whatever their attributes are; enable it, "
        f"{advice} (at {where})"), where)


def _attributes_set(node: Node, required_too: bool) -> list[str]:
    """The attributes a pattern's operator node sets; its required ones (which it must give
    to be built at all) only when `required_too`: `Cast(x, to=DOUBLE)` reads as "a Cast to
    double", and matched a Cast to int32 too, whose round trip a user's pass then removed
    (trial EE: values off by 0.94)."""
    if (node.type in ("Data", "Const", "NetOutput") and not node.domain) or (
            not node.get_attr_names()):
        return []
    try:
        spec = node_spec(node)
    except GeError:  # an operator without a schema: every attribute counts
        return sorted(node.get_attr_names())
    return sorted(name for name in node.get_attr_names() if required_too or not (
        name in spec.attributes and spec.attributes[name].required))
