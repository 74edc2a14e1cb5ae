"""config/context.py: a context value (JSON from cdk.json, or a string from ``-c``) converted to the
type a settings field declares, and what a value that does not convert is told."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "hint, raw, expected",
    [
        ("bool | None", "null", None),
        ("bool | None", "on", True),
        ("int | None", "", None),
        ("int", " 7 ", 7),
        ("float", 3, 3.0),
        ("str | None", "none", None),
        ("Literal['a', 'b']", " b ", "b"),
        ("Literal['a', 'b'] | None", None, None),
        ("list[int]", "1, 2,3", [1, 2, 3]),
        ("list[int]", "[4, 5]", [4, 5]),
        ("list[str]", ["ml.g6.4xlarge", "ml.g6e.xlarge"], ["ml.g6.4xlarge", "ml.g6e.xlarge"]),
        ("list[str] | None", "null", None),
        ("int | Literal['auto']", "auto", "auto"),
        ("int | Literal['auto']", "4", 4),
    ],
)
def test_values_convert_by_their_type_hints(hint, raw, expected):
    """Conversion reads the field's type with typing.get_type_hints: Optional, Literal and lists
    convert by what they are, whatever the annotation's spelling."""
    from typing import Literal, get_type_hints  # used by the annotation

    from config.context import convert

    holder = type("Holder", (), {"__annotations__": {"value": hint}})
    value = convert(raw, get_type_hints(holder, {"Literal": Literal})["value"])
    assert value == expected and type(value) is type(expected)


#: The refusal of a number beyond what the CDK holds exactly.
TOO_LARGE = "must be at most 9007199254740991 in magnitude (2**53 - 1)"


@pytest.mark.parametrize(
    "hint, raw, message",
    [
        ("bool", "maybe", "must be true or false"),
        ("int", True, "must be a whole number"),
        ("int", "1.5", "must be a whole number"),
        ("float", "fast", "must be a number"),
        ("float", None, "must be a number"),
        ("float", "nan", "must be a finite number"),
        ("float", "-inf", "must be a finite number"),
        ("float", float("inf"), "must be a finite number"),
        # beyond what the CDK's JavaScript numbers hold exactly (a scaled threshold overflows)
        ("float", "1e308", TOO_LARGE),
        ("int", "100000000000000000000", TOO_LARGE),
        ("int", -(2**53), TOO_LARGE),
        ("Literal['a', 'b']", "c", "must be one of a, b"),
        ("Literal['a', 'b'] | None", "c", "must be one of a, b or null"),
        ("list[int]", "1,x", "must be a whole number"),
        ("list[int]", 5, "must be a list (a JSON array, or comma-separated values)"),
        (
            "str",
            "null",
            "must be set: this setting has no 'unset' value (null is allowed for optional "
            "settings only)",
        ),
        ("str | None", 5, "must be a string or null"),
        ("int | Literal['auto']", "many", "must be a whole number, or one of auto"),
    ],
)
def test_values_that_do_not_convert_say_what_is_allowed(hint, raw, message):
    from typing import Literal, get_type_hints

    from config.context import convert

    holder = type("Holder", (), {"__annotations__": {"value": hint}})
    with pytest.raises(ValueError) as caught:
        convert(raw, get_type_hints(holder, {"Literal": Literal})["value"])
    assert str(caught.value) == message
