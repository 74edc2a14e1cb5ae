"""constructs_lib/validation.py: problems of a set of props collected, each naming the prop (or the
setting's key) and its value, and raised all at once."""

from __future__ import annotations

import pytest

from constructs_lib.validation import Problems, PropsError, show


def test_values_are_shown_quoted_as_json_or_by_repr():
    assert show("ml.g6.huge") == "'ml.g6.huge'"
    assert (show(True), show(None), show(1.5), show([1, "a"])) == (
        "true",
        "null",
        "1.5",
        '[1, "a"]',
    )
    assert show({1, 2}) == "{1, 2}"  # JSON cannot write a set


def test_every_problem_is_raised_at_once_under_the_name_given():
    p = Problems(name=lambda prop: f"voxtral.{prop}")
    p.add("initial_instance_count", 0, "must be at least 1")
    p.note(f"{p.ref('max_instances', 2)} with {p.ref('min_instances', 3)}: min must not exceed max")
    assert len(p) == 2
    with pytest.raises(PropsError) as caught:
        p.raise_if_any("RealtimeEndpoint Voxtral")
    assert caught.value.problems == [
        "voxtral.initial_instance_count=0: must be at least 1",
        "voxtral.max_instances=2 with voxtral.min_instances=3: min must not exceed max",
    ]
    assert str(caught.value) == (
        "RealtimeEndpoint Voxtral: invalid props:\n"
        "  - voxtral.initial_instance_count=0: must be at least 1\n"
        "  - voxtral.max_instances=2 with voxtral.min_instances=3: min must not exceed max"
    )
    assert isinstance(caught.value, ValueError)


def test_no_problem_raises_nothing_and_iterating_gives_a_copy():
    p = Problems()
    p.raise_if_any("Nothing")
    p.add("a", 1, "must be 2")
    listed = list(p)
    listed.append("extra")
    assert list(p) == ["a=1: must be 2"]
