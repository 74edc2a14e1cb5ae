"""voice_client.bounded_json: JSON parsed with a size and depth bound, and server text made one
line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from voice_client.bounded_json import (
    _TOKENS,
    JsonBoundError,
    check_depth,
    loads_bounded,
    one_line,
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=20,
)


def depth_of(value) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    return 0


@given(JSON_VALUES)
def test_the_depth_counted_is_the_values_nesting_whatever_its_strings_hold(value):
    text = json.dumps(value)
    depth = depth_of(value)
    assert loads_bounded(text, max_bytes=len(text), max_depth=depth) == value
    assert loads_bounded(text.encode(), max_bytes=len(text.encode()), max_depth=depth) == value
    if depth:
        with pytest.raises(JsonBoundError, match=f"nests deeper than {depth - 1} levels"):
            check_depth(text, depth - 1)


def test_brackets_and_escaped_quotes_inside_strings_do_not_nest():
    text = json.dumps({"a": '[[[[{{{{ \\" ["' * 100})
    assert loads_bounded(text, max_bytes=len(text), max_depth=1)["a"].startswith("[[[[")


def test_deep_nesting_is_refused_before_json_loads_recurses():
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(JsonBoundError, match="nests deeper than 32 levels"):
        loads_bounded(text, max_bytes=len(text))


def test_a_text_larger_than_the_bound_is_refused_with_both_sizes():
    with pytest.raises(JsonBoundError, match="the message is 12 bytes, more than the 11 accepted"):
        loads_bounded('"0123456789"', max_bytes=11)


def test_invalid_json_still_raises_the_decoders_error():
    with pytest.raises(json.JSONDecodeError):
        loads_bounded("{oops", max_bytes=100)


def test_one_line_escapes_line_breaks_and_bounds_the_length():
    assert one_line("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert one_line({"k": [1]}) == '{"k": [1]}'
    long = one_line("x" * 1000, 50)
    assert len(long) == 50 and long.endswith("…")


@pytest.mark.parametrize(
    ("text", "tokens"), [('"\\"[', ['"\\"[']), ('"\\"\\', ['"\\"\\']), ('["\\"{', ["[", '"\\"{'])]
)
def test_a_string_left_open_is_one_token_to_the_end_of_the_text(text, tokens):
    # Were it no match, the scan would restart at each later quote and reread the rest: quadratic in
    # the length.
    assert [match.group() for match in _TOKENS.finditer(text)] == tokens


@pytest.mark.parametrize("tail", ["", "\\"])
def test_a_hostile_open_string_of_escaped_quotes_is_rejected_by_the_decoder(tail):
    text = '"' + '\\"' * 50_000 + tail  # 100 KB: before the bound, about 45 s of CPU in one scan
    with pytest.raises(json.JSONDecodeError):
        loads_bounded(text, max_bytes=len(text))
