"""Flat CDK context keys <-> the fields of the settings sections, and the conversion of a context
value to a field's type.

Every setting is a flat dotted key (``voxtral.instance_type``): the section's prefix and the field's
key. A field is named after the props field it gives; where users write another key
(``voxtral.min_instances`` for ``min_capacity``) or other words for its values, the field says so
itself (:func:`setting`). In ``cdk.json`` a value has its JSON type; with ``-c key=value`` it
arrives as a string. :func:`convert` turns either into the type the field declares, read with
:func:`typing.get_type_hints` (so ``int | None``, ``Literal[...]`` and ``list[str]`` convert by what
they are, not by the spelling of the annotation), and raises ValueError with the allowed form.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from contracts.bridge_env import MAX_NUMBER

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


def _within[N: (int, float)](number: N) -> N:
    """``number``, or ValueError when its magnitude is above :data:`MAX_NUMBER`: the bridge's bound
    (contracts/bridge_env.py), and JavaScript's Number.MAX_SAFE_INTEGER, the largest whole number
    the CDK, which runs on Node.js, holds exactly. Beyond it a threshold scaled by the monitoring
    overflows to Infinity, which jsii cannot pass (synth fails), and no count or duration is
    meant."""
    if abs(number) > MAX_NUMBER:
        raise ValueError(f"must be at most {MAX_NUMBER} in magnitude (2**53 - 1)")
    return number


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
            return _within(raw)
        if isinstance(raw, str) and re.fullmatch(r"[+-]?\d+", raw.strip()):
            return _within(int(raw.strip()))
        raise ValueError("must be a whole number")
    if hint is float:
        number: float | None = None
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            number = float(raw)
        elif isinstance(raw, str):
            with contextlib.suppress(ValueError):
                number = float(raw.strip())
        if number is None:
            raise ValueError("must be a number")
        if not math.isfinite(number):  # nan and inf: no setting means them
            raise ValueError("must be a finite number")
        return _within(number)
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
                "must be set: this setting has no 'unset' value (null is allowed for "
                "optional settings only)"
            )
        return raw.strip()
    raise TypeError(f"no conversion for settings of type {hint!r}")


# --- Declaring a setting --------------------------------------------------------------------------

#: Field metadata of a value the app derives from other settings (no context key; ``load_settings``
#: fills it in).
DERIVED = {"derived": True}
#: Field metadata: the context key after the section's prefix, when it differs from the field's
#: name.
KEY = "key"
#: Field metadata: ``{spelling: value}``, the words a user writes for the field's values (a choice
#: the props hold as a bool, such as ``ecs.capacity``: ``on_demand`` or ``spot`` for ``spot``).
CHOICES = "choices"
#: Field metadata: the props class whose default for the same field name is the setting's default.
DEFAULT_FROM = "default_from"
#: Field metadata: the field of the bridge container's environment
#: (:class:`contracts.bridge_env.BridgeEnvironment`) the setting's value reaches (config/bridge.py).
BRIDGE = "bridge"


def setting(
    default: Any = dataclasses.MISSING,
    *,
    key: str | None = None,
    choices: Mapping[str, Any] | None = None,
    default_from: type | None = None,
    default_factory: Any = dataclasses.MISSING,
    bridge: str | None = None,
) -> Any:
    """A field of a settings section, named after the props field it gives (``min_capacity``).

    Args:
        default / default_factory: the setting's default, when the app's differs from the props'
            (or no props class declares the field).
        key: the context key after the section's prefix (``min_instances``), when it is not the
            field's name.
        choices: ``{spelling: value}`` when users write words for the field's values.
        default_from: the props class that declares the default (resolved by
            :class:`config.section.Section`).
        bridge: the field of the bridge container's environment
            (:class:`~contracts.bridge_env.BridgeEnvironment`) that carries the setting's value to
            the container on both targets; its problems there are named by this key
            (config/bridge.py).
    """
    metadata: dict[str, Any] = {}
    if key is not None:
        metadata[KEY] = key
    if choices is not None:
        metadata[CHOICES] = dict(choices)
    if default_from is not None:
        metadata[DEFAULT_FROM] = default_from
    if bridge is not None:
        metadata[BRIDGE] = bridge
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class SettingKey:
    """One context key and the section field it sets.

    Attributes:
        prefix: the section's prefix (``voxtral.``; empty for the keys of the whole app).
        key: the key after the prefix, as users write it.
        field: the section's field (the props' name).
        hint: the type :func:`convert` reads: the field's, or with choices ``Literal`` of their
            spellings.
        choices: ``{spelling: value}``, or None.
    """

    prefix: str
    key: str
    field: str
    hint: Any
    choices: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        """The whole context key (``voxtral.min_instances``)."""
        return self.prefix + self.key

    def convert(self, raw: Any) -> Any:
        """The field's value for the context value ``raw`` (:func:`convert`, then the choice's
        value)."""
        value = convert(raw, self.hint)
        return self.choices[value] if self.choices is not None else value

    def spell(self, value: Any) -> Any:
        """``value`` as users write it: the choice's spelling, else the value itself."""
        for spelling, choice in (self.choices or {}).items():
            if type(choice) is type(value) and choice == value:
                return spelling
        return value


def section_keys(section: type, prefix: str = "") -> list[SettingKey]:
    """The keys of a settings section, in field order (nested sections and fields without a key
    left out)."""
    hints = get_type_hints(section)
    keys = []
    for f in dataclasses.fields(section):
        if dataclasses.is_dataclass(hints[f.name]) or f.metadata.get("derived"):
            continue
        choices = f.metadata.get(CHOICES)
        hint = Literal[tuple(choices)] if choices is not None else hints[f.name]
        keys.append(SettingKey(prefix, f.metadata.get(KEY, f.name), f.name, hint, choices))
    return keys


def known_keys(sections: Mapping[str, type]) -> dict[str, SettingKey]:
    """``{"voxtral.min_instances": SettingKey(...), ...}`` for ``{prefix: section}``."""
    return {
        k.name: k for prefix, section in sections.items() for k in section_keys(section, prefix)
    }


def field_default(section: type, name: str) -> Any:
    """The default of field ``name`` of ``section``."""
    f = next(f for f in dataclasses.fields(section) if f.name == name)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def defaults(sections: Mapping[str, type]) -> dict[str, Any]:
    """Every setting with its default as users write it, by its flat dotted key (what
    ``cdk.json`` lists)."""
    return {
        k.name: k.spell(field_default(section, k.field))
        for prefix, section in sections.items()
        for k in section_keys(section, prefix)
    }


def is_cdk_key(key: str) -> bool:
    """CDK's own context keys (feature flags ``@aws-cdk/...``, ``aws:cdk:...``, lookups ``x:y``)
    are not settings."""
    return (
        key.startswith("@") or ":" in key or key in {"acknowledged-issue-numbers", "cli-telemetry"}
    )
