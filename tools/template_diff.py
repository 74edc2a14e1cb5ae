"""List every difference between two synthesized versions of the app, and flag logical ids that must
not change.

Usage (from the repository root)::

    make synth && cp -r cdk.out ../before          # on the old commit
    make synth                                       # on the new one
    .venv/bin/python tools/template_diff.py ../before cdk.out

Both arguments are cloud assemblies (``cdk.out``) or folders holding ``*.template.json`` files. For
each stack it prints the resources added and removed (logical id and type), then, for every resource
in both, each changed property as ``path: old -> new``; outputs, parameters and conditions likewise.
Lists whose items only moved are reported as "order only". ``aws:cdk:path`` metadata is reported
apart: a path may change while the logical id stays (a wrapper construct with the id ``Default``,
which CDK leaves out of logical ids).

Why logical ids matter: CloudFormation identifies a resource by its logical id; a resource whose id
disappears is deleted, and one under a new id is created (CDK Developer Guide, "Identifiers";
"Preserve deployed resources when refactoring CDK code"). For the types in :data:`MUST_KEEP` that
loses data or breaks the deployment (a fixed name created twice), so the exit code is 1 when any of
them was added or removed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Resource types whose logical id must never change for a deployed stack: they hold data, or carry
#: a fixed name that a new resource would collide with, or are referenced from outside the stack by
#: name or ARN.
MUST_KEEP = {
    "AWS::S3::Bucket": "holds the model weights and access logs",
    "AWS::ECR::Repository": "holds the bridge images",
    "AWS::SageMaker::Endpoint": "fixed EndpointName that callers use",
    "AWS::Logs::LogGroup": "holds logs; endpoint log groups have fixed names",
    "AWS::SNS::Topic": "subscriptions of the on-call tools",
    "AWS::KMS::Key": "encrypts data; a new key cannot decrypt the old data",
    "AWS::CloudWatch::Alarm": "fixed AlarmName: a second resource would overwrite, then delete, "
    "the alarm",
    "AWS::CloudWatch::Dashboard": "fixed DashboardName",
    "AWS::ApplicationAutoScaling::ScalableTarget": "one registration per variant: a new one is "
    "deregistered with the old",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "fixed PolicyName",
    "AWS::IAM::ManagedPolicy": "callers attach it by ARN outside the stack",
    "AWS::IAM::Role": "its ARN is in the Model: a new role replaces the Model and rolls the "
    "endpoint's instances",
    "AWS::SageMaker::Model": "a new Model replaces the EndpointConfig and rolls the endpoint's "
    "instances",
    "AWS::SageMaker::EndpointConfig": "a new EndpointConfig rolls the endpoint's instances",
}


def load(folder: Path) -> dict[str, dict]:
    """``{stack name: template}`` of every ``*.template.json`` in ``folder``."""
    return {
        p.name.removesuffix(".template.json"): json.loads(p.read_text())
        for p in sorted(folder.glob("*.template.json"))
    }


def _walk(old: Any, new: Any, path: str) -> Iterator[str]:
    """One line per difference between two JSON values (dict keys recursively, lists as wholes)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            child = (
                f"{path}{key}"
                if str(key).startswith("[")
                else (f"{path}.{key}" if path else str(key))
            )
            if key not in old:
                yield f"{child}: added {_short(new[key])}"
            elif key not in new:
                yield f"{child}: removed (was {_short(old[key])})"
            else:
                yield from _walk(old[key], new[key], child)
    elif (
        isinstance(old, list)
        and isinstance(new, list)
        and old != new
        and _by_sid(old)
        and _by_sid(new)
    ):
        # IAM statements with Sids: compared by Sid, since their order means nothing.
        yield from _walk(_by_sid(old), _by_sid(new), path)
        if list(_by_sid(old)) != list(_by_sid(new)) and set(_by_sid(old)) == set(_by_sid(new)):
            yield f"{path}: order only"
    elif isinstance(old, list) and isinstance(new, list) and old != new:
        if len(old) == len(new) and sorted(map(_key, old)) == sorted(map(_key, new)):
            yield f"{path}: order only"
        elif len(old) == len(new):
            for index, (a, b) in enumerate(zip(old, new, strict=True)):
                yield from _walk(a, b, f"{path}[{index}]")
        else:
            yield f"{path}: {_short(old)} -> {_short(new)}"
    elif isinstance(old, str) and isinstance(new, str) and old != new and _json(old) and _json(new):
        # A JSON document inside a string (a BuildSpec, a dashboard body): its own differences.
        yield from _walk(_json(old), _json(new), f"{path}(json)")
    elif old != new:
        yield f"{path}: {_short(old)} -> {_short(new)}"


def _by_sid(items: list) -> dict[str, Any] | None:
    """``{"Sid=<sid>": statement}`` when every item is a statement with a Sid, else None."""
    if items and all(isinstance(item, dict) and "Sid" in item for item in items):
        return {f"[Sid={item['Sid']}]": item for item in items}
    return None


def _json(text: str) -> Any:
    """``text`` parsed when it holds a JSON object or array, else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _short(value: Any, limit: int = 240) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def diff_stack(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """(lines describing every difference, lines naming each MUST_KEEP logical id added or
    removed)."""
    lines: list[str] = []
    violations: list[str] = []
    old_resources, new_resources = old.get("Resources", {}), new.get("Resources", {})
    for logical_id in sorted(set(old_resources) - set(new_resources)):
        kind = old_resources[logical_id]["Type"]
        lines.append(f"removed {logical_id} ({kind})")
        if kind in MUST_KEEP:
            violations.append(f"{logical_id} ({kind}) removed: {MUST_KEEP[kind]}")
    for logical_id in sorted(set(new_resources) - set(old_resources)):
        kind = new_resources[logical_id]["Type"]
        lines.append(f"added {logical_id} ({kind})")
        if kind in MUST_KEEP:
            violations.append(f"{logical_id} ({kind}) added: {MUST_KEEP[kind]}")
    for logical_id in sorted(set(old_resources) & set(new_resources)):
        a, b = dict(old_resources[logical_id]), dict(new_resources[logical_id])
        path_a, path_b = (r.pop("Metadata", {}).get("aws:cdk:path") for r in (a, b))
        if path_a != path_b:
            lines.append(
                f"{logical_id}: construct path {path_a} -> {path_b} (logical id unchanged)"
            )
        lines += [f"{logical_id}.{line}" for line in _walk(a, b, "")]
    # A resource of a type removed once and added once was most likely renamed: compare the two.
    removed_ids = set(old_resources) - set(new_resources)
    added_ids = set(new_resources) - set(old_resources)
    for kind in sorted({old_resources[i]["Type"] for i in removed_ids}):
        (gone, *more_gone) = [i for i in removed_ids if old_resources[i]["Type"] == kind]
        came = [i for i in added_ids if new_resources[i]["Type"] == kind]
        if more_gone or len(came) != 1:
            continue
        removed, added = {kind: gone}, {kind: came[0]}
        a, b = dict(old_resources[removed[kind]]), dict(new_resources[added[kind]])
        for resource in (a, b):
            resource.pop("Metadata", None)
        pair = f"{removed[kind]} -> {added[kind]}"
        lines += [f"{pair} (renamed?).{line}" for line in _walk(a, b, "")] or [
            f"{pair} (renamed?): same content"
        ]
    for section in ("Outputs", "Parameters", "Conditions", "Rules", "Mappings"):
        lines += [
            f"{section}.{line}" for line in _walk(old.get(section, {}), new.get(section, {}), "")
        ]
    return lines, violations


def compare(before: Path, after: Path) -> tuple[list[str], list[str]]:
    """Every difference between the templates in ``before`` and ``after``, by stack; and the
    MUST_KEEP violations."""
    old, new = load(before), load(after)
    lines: list[str] = []
    violations: list[str] = []
    for stack in sorted(set(old) | set(new)):
        if stack not in new:
            lines.append(f"== {stack}: stack removed")
            continue
        if stack not in old:
            lines.append(f"== {stack}: stack added")
            continue
        stack_lines, stack_violations = diff_stack(old[stack], new[stack])
        lines.append(f"== {stack}: {len(stack_lines) or 'no'} difference(s)")
        lines += [f"  {line}" for line in stack_lines]
        violations += [f"{stack}: {v}" for v in stack_violations]
    return lines, violations


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lines, violations = compare(Path(argv[0]), Path(argv[1]))
    print("\n".join(lines))
    if violations:
        print(
            "\nLogical ids that must not change, changed:\n"
            + "\n".join(f"  {v}" for v in violations)
        )
        return 1
    print("\nNo logical id of a resource that must keep it changed.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
