"""Helpers the rule modules of this folder share: reading CloudFormation template dicts (resources
by type, references, literal values) and the base of every rule (a pure check over one template
dict, wrapped as a cfn-lint custom rule). cfn-lint loads every ``[A-Za-z1-9]*.py`` file of a folder
given with ``--append-rules``; this file's leading underscore keeps it out, and the rule modules
import it as a module so cfn-lint instantiates only their concrete rules."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The project root (cfn-lint imports the rule modules by file path, not as a package: the root goes
#: on sys.path so that they can import the instance catalogue and this helper).
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: ``(path inside the template, message)``: one rule violation.
Finding = tuple[tuple[str | int, ...], str]


def resources(template: dict, resource_type: str) -> dict[str, dict]:
    """``{logical id: Properties}`` of every resource of ``resource_type``."""
    return {
        lid: r.get("Properties") or {}
        for lid, r in (template.get("Resources") or {}).items()
        if isinstance(r, dict) and r.get("Type") == resource_type
    }


def is_intrinsic(value: Any) -> bool:
    """A value CloudFormation computes at deploy time: ``{"Ref": ...}`` or ``{"Fn::...": ...}`` (one
    key)."""
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in INTRINSICS


INTRINSICS = {"Ref", "Condition"} | {
    f"Fn::{n}"
    for n in (
        "Base64",
        "Cidr",
        "FindInMap",
        "GetAtt",
        "GetAZs",
        "ImportValue",
        "Join",
        "Select",
        "Split",
        "Sub",
        "Transform",
        "If",
        "And",
        "Equals",
        "Not",
        "Or",
        "Length",
        "ToJsonString",
        "ForEach",
    )
}


def ref_target(template: dict, value: Any) -> str | None:
    """The logical id ``value`` points at with ``Ref`` or ``Fn::GetAtt`` when it is a resource of
    ``template``."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        target = (
            arg
            if key == "Ref"
            else (
                arg[0]
                if key == "Fn::GetAtt" and isinstance(arg, list)
                else arg.split(".")[0]
                if key == "Fn::GetAtt" and isinstance(arg, str)
                else None
            )
        )
        if isinstance(target, str) and target in (template.get("Resources") or {}):
            return target
    return None


def references(value: Any) -> set[str]:
    """Every logical id that ``value`` names with Ref or Fn::GetAtt, at any depth."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str):
                found.add(arg)
            elif key == "Fn::GetAtt":
                found.add(arg[0] if isinstance(arg, list) else str(arg).split(".")[0])
            else:
                found |= references(arg)
    elif isinstance(value, list):
        for item in value:
            found |= references(item)
    return found


def resolve(templates: dict[str, dict], stack: str, value: Any) -> tuple[str, str] | None:
    """``(stack, logical id)`` of the resource ``value`` names in the app's ``templates`` (``{stack
    name: template}``): a Ref or Fn::GetAtt in ``stack``, or an Fn::ImportValue of another stack's
    export of one."""
    lid = ref_target(templates.get(stack, {}), value)
    if lid is not None:
        return stack, lid
    if (
        isinstance(value, dict)
        and list(value) == ["Fn::ImportValue"]
        and isinstance(value["Fn::ImportValue"], str)
    ):
        for other, tpl in templates.items():
            for output in (tpl.get("Outputs") or {}).values():
                if (output.get("Export") or {}).get("Name") == value["Fn::ImportValue"]:
                    target = ref_target(tpl, output.get("Value"))
                    return (other, target) if target else None
    return None


def literal_int(value: Any) -> int | None:
    """``value`` as an integer when the template states it (CloudFormation accepts "300" for 300),
    else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def literal_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def joined_text(value: Any) -> str | None:
    """The text of a string, or of an ``Fn::Join`` with the separator "" whose pieces are all
    strings except intrinsic ones, which stand in as ``{}``; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and list(value) == ["Fn::Join"]:
        sep, parts = value["Fn::Join"]
        if isinstance(parts, list):
            return sep.join(p if isinstance(p, str) else "{}" for p in parts)
    return None


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [] if value is None else [value]


def attributes(props: dict, key: str = "LoadBalancerAttributes") -> dict[str, Any]:
    """ELBv2 ``[{Key, Value}]`` attributes as a dict."""
    return {a.get("Key"): a.get("Value") for a in as_list(props.get(key)) if isinstance(a, dict)}


class TemplateRule:
    """A rule over one template dict. Concrete rules subclass this and cfn-lint's
    ``CloudFormationLintRule`` (``id``, ``shortdesc``: the rule as AWS states it, ``description``,
    ``source_url``: where AWS states it) and implement :meth:`findings`; :meth:`match` is cfn-lint's
    entry point."""

    id: str
    shortdesc: str
    source_url: str

    def findings(self, template: dict) -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    def match(self, cfn):  # cfn-lint's API: a list of RuleMatch
        from cfnlint.rules import RuleMatch

        return [
            RuleMatch(list(path), f"{message} [{self.source_url}]")
            for path, message in self.findings(cfn.template)
        ]


def rules_of(namespace: dict[str, Any]) -> tuple[type[TemplateRule], ...]:
    """The rules a rule module defines, in id order: the classes of ``namespace`` (the module's
    ``globals()``) defined in that module that are rules with an ``id``, so neither the bases
    (:class:`TemplateRule` and the like, which have none) nor a class it imports."""
    return tuple(
        sorted(
            (
                c
                for c in list(namespace.values())
                if isinstance(c, type)
                and issubclass(c, TemplateRule)
                and c.__module__ == namespace["__name__"]
                and isinstance(getattr(c, "id", None), str)
            ),
            key=lambda c: c.id,
        )
    )
