"""`ge._text.first_and_more`: the one way messages list the first few of many things."""

from ge._text import first_and_more


def test_lists_all_when_no_more_than_shown() -> None:
    assert first_and_more([]) == ""
    assert first_and_more(["'a'"]) == "'a'"
    assert first_and_more(["'a'", "'b'", "'c'"]) == "'a', 'b', 'c'"


def test_counts_what_it_leaves_out() -> None:
    assert first_and_more(["'a'", "'b'", "'c'", "'d'", "'e'"]) == "'a', 'b', 'c' and 2 more"
    assert first_and_more(("g", "h"), 1) == "g and 1 more"
