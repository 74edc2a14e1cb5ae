"""The props tables of the family READMEs (constructs_lib/<family>/README.md) say what the
dataclasses say: every field of a documented props class has a row (in its own section, or in its
documented base class's), every row names a field, ``required`` exactly where the field has no
default, ``none`` where the default is None or empty, and a default written as one Python literal
equals it."""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

LIBRARY = ROOT / "constructs_lib"
READMES = sorted(LIBRARY.glob("*/README.md"))
ROW = re.compile(
    r"^\| (?P<names>.+?) \| (?P<type>.+?) \| (?P<default>.+?) \| (?P<description>.+) \|$"
)


def family_dataclasses(family: Path) -> dict[str, type]:
    """The dataclasses the family's modules define, by name."""
    found = {}
    for module_path in sorted(family.glob("*.py")):
        module = importlib.import_module(f"constructs_lib.{family.name}.{module_path.stem}")
        for name, value in vars(module).items():
            if (
                dataclasses.is_dataclass(value)
                and isinstance(value, type)
                and value.__module__ == module.__name__
            ):
                found[name] = value
    return found


def split_outside_backticks(text: str) -> list[str]:
    """``"`2` / `4`"`` -> ``["`2`", "`4`"]``; a ``/`` or ``,`` inside backticks stays."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == "`":
            quoted = not quoted
        if char in ",/" and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()]


def rows(readme: Path):
    """``(section, class name or None, field, default text)`` of each props table row."""
    section = None
    for line in readme.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        match = ROW.match(line)
        if (
            not match
            or section is None
            or match["names"] == "Name"
            or match["names"].startswith("---")
        ):
            continue
        names = re.findall(r"`([A-Za-z_][\w.]*)`", match["names"])
        defaults = split_outside_backticks(match["default"])
        if len(defaults) != len(names):
            defaults = [match["default"]] * len(names)
        owner = None
        for name, default in zip(names, defaults, strict=True):
            if "." in name:
                owner, name = name.split(".", 1)
            yield section, owner, name, default


def code_default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


@pytest.mark.parametrize("readme", READMES, ids=lambda path: str(path.relative_to(ROOT)))
def test_props_tables_match_the_dataclasses(readme):
    classes = family_dataclasses(readme.parent)
    documented: dict[str, set[str]] = {}
    problems = []
    for section, owner, name, default in rows(readme):
        in_section = [c for c in re.findall(r"[A-Z]\w+", section) if c in classes]
        owner = owner or next(
            (c for c in in_section if name in {f.name for f in dataclasses.fields(classes[c])}),
            in_section[0] if in_section else None,
        )
        fields = {f.name: f for f in dataclasses.fields(classes[owner])} if owner in classes else {}
        if name not in fields:
            problems.append(f"{section}: `{name}` is no field of {owner}")
            continue
        documented.setdefault(owner, set()).add(name)
        value = code_default(fields[name])
        if (default == "required") != (value is dataclasses.MISSING):
            shown = "no default" if value is dataclasses.MISSING else repr(value)
            problems.append(f"{owner}.{name}: the table says {default!r}, the code {shown}")
        elif default.startswith("none") and value not in (None, (), [], {}):
            problems.append(f"{owner}.{name}: the table says {default!r}, the code {value!r}")
        elif re.fullmatch(r"`[^`<]+`", default):
            try:
                literal = ast.literal_eval(default.strip("`"))
            except (ValueError, SyntaxError):
                continue  # a name (`MEDIUM`) or a call (`EndpointAlarmThresholds()`): not compared
            shown = value.value if isinstance(value, enum.Enum) else value
            if literal != shown:
                problems.append(f"{owner}.{name}: the table says {literal!r}, the code {value!r}")
    for owner, names in documented.items():
        # A props class built over another (GpuEcsServiceWithBridgeProps) has rows for its own
        # fields; the rows of its base's section cover the ones it inherits.
        inherited = {
            name
            for base in classes[owner].__mro__[1:]
            if base.__name__ in documented
            for name in documented[base.__name__]
        }
        missing = {f.name for f in dataclasses.fields(classes[owner])} - names - inherited
        if missing:
            problems.append(f"{owner}: fields without a row: {sorted(missing)}")
    assert problems == []
