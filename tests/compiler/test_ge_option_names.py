"""Keys under `ge.`, the prefix reserved for ge's own options, that ge does not know (a typo:
`ge.optimise.max_rounds`, `ge.constant_folding.sizelimit`) are a CompileWarning once per
compilation naming the key and the closest known one: they did nothing, silently. Passes
may read any option, so keys of other prefixes (a plugin's) pass without a word."""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Callable
from typing import Any

import ge
import ge.compiler
from ge.compiler import compile_graph
from ge.compiler.options import GE_OPTIONS, unknown_ge_options
from ge.errors import CompileWarning
from plugin_fixtures import small_graph

TAIL = ("ge ignores it, only passes reading it see it; the prefix 'ge.' is reserved for ge's "
        "and GE's own options (a plugin's options take a prefix of their own)")


def _warnings(compile_: Callable[..., Any] = ge.compile, **kwargs: Any) -> list[str]:
    """The CompileWarnings of one compilation of a small graph."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile_(small_graph(), **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, CompileWarning)]


def test_a_typo_of_an_option_names_the_closest_one() -> None:
    assert _warnings(options={"ge.optimise.max_rounds": "2"}) == [
        "option ge.optimise.max_rounds is not one of ge's options (did you mean "
        f"ge.optimize.max_rounds?): {TAIL}"]
    assert _warnings(options={"ge.constant_folding.sizelimit": "10"}) == [
        "option ge.constant_folding.sizelimit is not one of ge's options (did you mean "
        f"ge.constant_folding.size_limit?): {TAIL}"]


def test_an_option_of_ges_close_to_none_of_ges_is_left_alone() -> None:
    """Code ported from GE passes GE's own options; they mean nothing to ge, but they are
    not mistakes: no warning on every compilation."""
    assert _warnings(options={"ge.exec.deviceId": "0", "ge.graphRunMode": "1"}) == []


def test_known_and_plugin_options_give_no_warning() -> None:
    assert _warnings(options={"ge.optimize.max_rounds": "2", "ge.fusionSwitchFile": "",
                              "my.gelu": "tanh", "gelu": "on", "gex.optimize": "1",
                              "mycompany.ge.optimise": "1"}) == []


def test_each_unknown_key_is_named_once_per_compilation() -> None:
    ge.initialize({"ge.passes.continue_on_plugin_eror": "true"})
    try:
        options = {"ge.passes.continue_on_plugin_eror": "true", "ge.optimise.max_rounds": "1"}
        for _ in range(2):  # the defaults' typo and the compilation's, each compilation
            assert [w.split(" is ")[0] for w in _warnings(options=options)] == [
                "option ge.optimise.max_rounds", "option ge.passes.continue_on_plugin_eror"]
        assert len(_warnings()) == 1  # the defaults' typo alone
    finally:
        ge.finalize()


def test_compile_graph_warns_too() -> None:
    assert _warnings(compile_graph, options={"ge.optimise.max_rounds": "2"}) == [
        "option ge.optimise.max_rounds is not one of ge's options (did you mean "
        f"ge.optimize.max_rounds?): {TAIL}"]


def test_every_option_ge_reads_is_known() -> None:
    """Each `OPTION_*` constant of ge's compiler naming a `ge.` key is one of GE_OPTIONS, so
    that no option ge reads is warned about."""
    found = set()
    for info in pkgutil.walk_packages(ge.compiler.__path__, "ge.compiler."):
        module = importlib.import_module(info.name)
        found |= {value for name, value in vars(module).items()
                  if name.startswith("OPTION_") and isinstance(value, str)
                  and value.startswith("ge.")}
    assert found == GE_OPTIONS
    assert unknown_ge_options(dict.fromkeys(GE_OPTIONS, "")) == []
