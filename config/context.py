"""Flat CDK context keys <-> the fields of the settings sections, and the conversion of a context
value to a field's type.

Every setting is a flat dotted key (``voxtral.instance_type``): the section's prefix and the field's
name. In ``cdk.json`` a value has its JSON type; with ``-c key=value`` it arrives as a string.
:func:`convert` turns either into the type the field declares, read with
:func:`typing.get_type_hints` (so ``int | None``, ``Literal[...]`` and ``list[str]`` convert by what
they are, not by the spelling of the annotation), and raises ValueError with the allowed form.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"", "null", "none"}


def _optional(hint: Any) -> tuple[bool, Any]:
    """(whether ``hint`` admits None, ``hint`` without None)."""
    if _is_union(hint):
        args = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(args) < len(get_args(hint)):
            return True, (args[0] if len(args) == 1 else Union[tuple(args)])  # noqa: UP007 (built at run time)
    return False, hint


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def convert(raw: Any, hint: Any) -> Any:
    """Convert one context value to the type ``hint``.

    Accepted: ``bool`` (true/false, yes/no, on/off, 1/0), ``int`` (whole numbers, not booleans),
    ``float``, ``str``, ``Literal[...]`` (one of its values), ``list[T]`` (a JSON list, or a string
    holding one or comma-separated items), a union of these (the first that converts, e.g. ``int |
    Literal["auto"]``), and any of them ``| None`` (null, none or an empty string).

    Raises:
        ValueError: the value cannot be converted; the message says what is allowed ("must be ...").
    """
    optional, hint = _optional(hint)
    if optional and (raw is None or (isinstance(raw, str) and raw.strip().lower() in _NONE)):
        return None
    or_null = " or null" if optional else ""
    if _is_union(hint):
        rules = []
        for member in get_args(hint):
            try:
                return convert(raw, member)
            except ValueError as error:
                rules.append(str(error).removeprefix("must be "))
        raise ValueError("must be " + ", or ".join(rules) + or_null)
    if hint is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise ValueError("must be true or false")
    if hint is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"[+-]?\d+", raw.strip()):
            return int(raw.strip())
        raise ValueError("must be a whole number")
    if hint is float:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw.strip())
            except ValueError:
                pass
        raise ValueError("must be a number")
    if get_origin(hint) is Literal:
        allowed = get_args(hint)
        value = raw.strip() if isinstance(raw, str) else raw
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(map(str, allowed))}" + or_null)
        return value
    if get_origin(hint) is list:
        (item,) = get_args(hint)
        items = raw
        if isinstance(raw, str):
            text = raw.strip()
            items = (
                json.loads(text)
                if text.startswith("[")
                else [part for part in text.split(",") if part.strip()]
            )
        if not isinstance(items, list):
            raise ValueError("must be a list (a JSON array, or comma-separated values)" + or_null)
        return [convert(element, item) for element in items]
    if hint is str:
        if not isinstance(raw, str):
            raise ValueError("must be a string" + or_null)
        if raw.strip().lower() in _NONE:
            raise ValueError(
                "must be set: this setting has no 'unset' value (null is allowed for optional "
                "settings only)"
            )
        return raw.strip()
    raise TypeError(f"no conversion for settings of type {hint!r}")


#: Field metadata of a value the app derives from other settings (no context key; ``load_settings``
#: fills it in).
DERIVED = {"derived": True}


def section_fields(section: type) -> dict[str, Any]:
    """``{field name: type}`` of a settings section's own settings (nested sections and
    :data:`DERIVED` values left out)."""
    hints = get_type_hints(section)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(section)
        if not dataclasses.is_dataclass(hints[f.name]) and not f.metadata.get("derived")
    }


def known_keys(sections: Mapping[str, type]) -> dict[str, tuple[str, str, Any]]:
    """``{"voxtral.instance_type": ("voxtral.", "instance_type", type), ...}`` for ``{prefix:
    section}``."""
    return {
        prefix + name: (prefix, name, hint)
        for prefix, section in sections.items()
        for name, hint in section_fields(section).items()
    }


def defaults(sections: Mapping[str, type]) -> dict[str, Any]:
    """Every setting with its default, as flat dotted keys (what ``cdk.json`` lists)."""
    out: dict[str, Any] = {}
    for prefix, section in sections.items():
        instance = section()
        for name in section_fields(section):
            out[prefix + name] = getattr(instance, name)
    return out


def is_cdk_key(key: str) -> bool:
    """CDK's own context keys (feature flags ``@aws-cdk/...``, ``aws:cdk:...``, lookups ``x:y``) are
    not settings."""
    return (
        key.startswith("@") or ":" in key or key in {"acknowledged-issue-numbers", "cli-telemetry"}
    )
