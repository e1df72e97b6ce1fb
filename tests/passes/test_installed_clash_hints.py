"""The E13030 hint between installed plugins (`ge.passes.plugin_names.clash_hint`): for each
side, the one value of `ge.passes.disabled_plugins` that runs it (the option is given once:
every other side and what the option holds already), quoted for a shell where a name needs
it, and said impossible for an entry point whose name holds a comma (trial E)."""

from __future__ import annotations

from ge.passes.plugin_cache import PluginOrigin
from ge.passes.plugin_names import clash_hint


def _origin(dist: str, name: str) -> PluginOrigin:
    return PluginOrigin("entry_point", entry_point=f"{name} = pkg.mod", distribution=dist,
                        version="1.0")


def test_each_side_leaves_out_every_other_and_keeps_what_was_given() -> None:
    hint = clash_hint(("B", _origin("team-b", "fuse")), ("A", _origin("team-a", "fuse")),
                      ("C", _origin("team-c", "fuse")), disabled={" other : x "})
    assert ("to run B (team-b), leave the others out: --option "
            "ge.passes.disabled_plugins=other:x,team-a:fuse,team-c:fuse (ge.compile's "
            "options={'ge.passes.disabled_plugins': 'other:x,team-a:fuse,team-c:fuse'})") in hint
    assert "to run C (team-c), leave the others out: --option " \
           "ge.passes.disabled_plugins=other:x,team-b:fuse,team-a:fuse " in hint


def test_a_name_with_a_space_is_quoted_and_one_with_a_comma_cannot_be_left_out() -> None:
    hint = clash_hint(("B", _origin("weird-eps", "has space")),
                      ("A", _origin("weird-eps", "p3,comma")))
    assert ("to run A (weird-eps), leave the other out: --option "
            "'ge.passes.disabled_plugins=weird-eps:has space' (ge.compile's "
            "options={'ge.passes.disabled_plugins': 'weird-eps:has space'})") in hint
    assert ("to run B (weird-eps), leave the other out: entry point 'p3,comma' of weird-eps "
            "cannot be left out: ge.passes.disabled_plugins separates names by commas, and "
            "its name holds one; uninstall weird-eps") in hint


def test_a_side_not_installed_gives_no_hint() -> None:
    assert clash_hint(("B", _origin("team-b", "fuse")),
                      ("A", PluginOrigin("module", "/x/a.py"))) == ""
