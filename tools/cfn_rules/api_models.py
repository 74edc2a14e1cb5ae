"""Every property of the SageMaker, Application Auto Scaling, CloudWatch and ECS resources of a
template, checked against botocore's service model of the API call CloudFormation makes for it:
members, types, enums, patterns, lengths and ranges. cfn-lint checks CloudFormation's resource
schemas, which lag the APIs and leave out many of their constraints; the service model is what the
SDKs (and so CloudFormation's handlers) send to the service.

How a resource is read (the rules the check follows):

- Each resource type maps to the input shape of its create call (:data:`OPERATIONS`). A few
  CloudFormation properties belong to another call of the same API (:data:`OTHER_OPERATIONS`, e.g.
  an Endpoint's RetainAllVariantProperties is UpdateEndpoint's) or to CloudFormation alone
  (:data:`CFN_ONLY`, e.g. a ScalingPolicy's ScalingTargetId, which CloudFormation turns into
  ResourceId, ScalableDimension and ServiceNamespace); each is listed with its reason.
- Property names match API member names ignoring case (ECS's API is camelCase: ContainerDefinitions
  is containerDefinitions). Where the names differ otherwise, :data:`RENAMES` says so.
- CloudFormation's Tags, a list of {Key, Value}, become the API's map of tags where the API takes a
  map.
- A value CloudFormation computes at deploy time (``Ref``, ``Condition`` or any ``Fn::``) is unknown
  at synth, so its checks are skipped; everything around it is still checked. Numbers and booleans
  in a string member are checked as CloudFormation sends them, as text.
- A pattern must match the whole value: AWS's validation reports "Member must satisfy regular
  expression pattern" for a value with a matching prefix (SageMaker's VariantName pattern has no
  ``$``; "a b" fails). The model's patterns are not anchored in the text; whole-value matching is
  AWS's observed behaviour (unconfirmed in docs).
- A property or member the model does not have is a finding: a typo cannot pass.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import regex  # cfn-lint's own dependency; unlike re it knows Java's \p{...} classes the models use
from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import Finding, TemplateRule

#: CloudFormation resource type -> (botocore service, the operation its create handler calls).
OPERATIONS: dict[str, tuple[str, str]] = {
    "AWS::SageMaker::Model": ("sagemaker", "CreateModel"),
    "AWS::SageMaker::EndpointConfig": ("sagemaker", "CreateEndpointConfig"),
    "AWS::SageMaker::Endpoint": ("sagemaker", "CreateEndpoint"),
    "AWS::ApplicationAutoScaling::ScalableTarget": (
        "application-autoscaling",
        "RegisterScalableTarget",
    ),
    "AWS::ApplicationAutoScaling::ScalingPolicy": ("application-autoscaling", "PutScalingPolicy"),
    "AWS::CloudWatch::Alarm": ("cloudwatch", "PutMetricAlarm"),
    "AWS::CloudWatch::CompositeAlarm": ("cloudwatch", "PutCompositeAlarm"),
    "AWS::CloudWatch::Dashboard": ("cloudwatch", "PutDashboard"),
    "AWS::ECS::Cluster": ("ecs", "CreateCluster"),
    "AWS::ECS::CapacityProvider": ("ecs", "CreateCapacityProvider"),
    "AWS::ECS::ClusterCapacityProviderAssociations": ("ecs", "PutClusterCapacityProviders"),
    "AWS::ECS::Service": ("ecs", "CreateService"),
    "AWS::ECS::TaskDefinition": ("ecs", "RegisterTaskDefinition"),
}

#: (resource type, property) -> (operation of the same API, how): "member" when that operation's
#: input has the property as a member, "items" when the property is a list whose every item is one
#: call of that operation.
OTHER_OPERATIONS: dict[tuple[str, str], tuple[str, str]] = {
    # CloudFormation's update of an Endpoint calls UpdateEndpoint with these.
    ("AWS::SageMaker::Endpoint", "RetainAllVariantProperties"): ("UpdateEndpoint", "member"),
    ("AWS::SageMaker::Endpoint", "ExcludeRetainedVariantProperties"): ("UpdateEndpoint", "member"),
    ("AWS::SageMaker::Endpoint", "RetainDeploymentConfig"): ("UpdateEndpoint", "member"),
    # A scalable target's scheduled actions are PutScheduledAction calls, one per item.
    ("AWS::ApplicationAutoScaling::ScalableTarget", "ScheduledActions"): (
        "PutScheduledAction",
        "items",
    ),
}

#: (resource type, property) -> why it has no API member to be checked against.
CFN_ONLY: dict[tuple[str, str], str] = {
    (
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        "ScalingTargetId",
    ): "CloudFormation resolves it to the target's ResourceId, ScalableDimension and "
    "ServiceNamespace",
    (
        "AWS::ECS::Service",
        "ForceNewDeployment",
    ): "CloudFormation's object {EnableForceNewDeployment, ForceNewDeploymentNonce}, sent as "
    "UpdateService's boolean forceNewDeployment",
}

#: (resource type or API shape name, CloudFormation name) -> API member name, where they differ
#: beyond case.
RENAMES: dict[tuple[str, str], str] = {
    ("AWS::ECS::Cluster", "ClusterSettings"): "settings",
    ("AWS::ECS::Service", "PlacementStrategies"): "placementStrategy",
    ("AWS::ECS::TaskDefinition", "Volumes"): "volumes",
    ("CreateClusterRequest", "ClusterSettings"): "settings",
}


@functools.cache
def _model(service: str):
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


@functools.cache
def _pattern(text: str):
    # botocore carries Java's UTF-16 form of the supplementary planes; Python's engines want code
    # points.
    return regex.compile(text.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF"))


def _member(shape, name: str, owner: str) -> str | None:
    renamed = RENAMES.get((owner, name)) or RENAMES.get((shape.name, name))
    if renamed and renamed in shape.members:
        return renamed
    by_case = {m.lower(): m for m in shape.members}
    return by_case.get(name.lower())


def check_value(value: Any, shape, path: tuple, owner: str = "") -> Iterator[Finding]:
    """Findings of ``value`` (a CloudFormation property value) against the botocore ``shape`` it
    becomes."""
    if t.is_intrinsic(value):
        return
    kind, meta = shape.type_name, shape.metadata
    if kind == "structure":
        if not isinstance(value, dict):
            yield path, f"expected an object ({shape.name}), got {type(value).__name__}"
            return
        for name, item in value.items():
            member = _member(shape, name, owner)
            if member is None:
                yield (
                    (*path, name),
                    f"{shape.name} has no member {name!r} (members: {', '.join(shape.members)})",
                )
            else:
                yield from check_value(item, shape.members[member], (*path, name))
        return
    if kind == "list":
        if not isinstance(value, list):
            yield path, f"expected a list ({shape.name}), got {type(value).__name__}"
            return
        yield from _length(len(value), meta, path, "items")
        for i, item in enumerate(value):
            yield from check_value(item, shape.member, (*path, i))
        return
    if kind == "map":
        if isinstance(value, list) and all(
            isinstance(v, dict) and set(v) <= {"Key", "Value"} for v in value
        ):
            value = {
                v.get("Key"): v.get("Value") for v in value
            }  # CloudFormation's Tags -> the API's tag map
        if not isinstance(value, dict):
            yield path, f"expected a map ({shape.name}), got {type(value).__name__}"
            return
        yield from _length(len(value), meta, path, "entries")
        for key, item in value.items():
            yield from check_value(key, shape.key, (*path, key))
            yield from check_value(item, shape.value, (*path, key))
        return
    if kind == "string":
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            yield path, f"expected a string ({shape.name}), got {type(value).__name__}"
            return
        if shape.enum and value not in shape.enum:
            shown = ", ".join(shape.enum[:12]) + (
                f", ... ({len(shape.enum)} in all)" if len(shape.enum) > 12 else ""
            )
            yield path, f"{value!r} is not one of {shape.name}'s values: {shown}"
        yield from _length(len(value), meta, path, "characters")
        if "pattern" in meta and not _pattern(meta["pattern"]).fullmatch(value):
            yield path, f"{value!r} does not match {shape.name}'s pattern {meta['pattern']!r}"
        return
    if kind in ("integer", "long"):
        number = t.literal_int(value)
        if number is None:
            yield path, f"expected an integer ({shape.name}), got {value!r}"
            return
        yield from _range(number, meta, path)
        return
    if kind in ("float", "double"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            yield path, f"expected a number ({shape.name}), got {value!r}"
            return
        yield from _range(number, meta, path)
        return
    if kind == "boolean":
        if t.literal_bool(value) is None:
            yield path, f"expected a boolean ({shape.name}), got {value!r}"
        return
    # timestamp, blob: CloudFormation passes them as text; nothing more to check.


def _length(n: int, meta: dict, path: tuple, unit: str) -> Iterator[Finding]:
    if "min" in meta and n < meta["min"]:
        yield path, f"{n} {unit}, fewer than the minimum {meta['min']}"
    if "max" in meta and n > meta["max"]:
        yield path, f"{n} {unit}, more than the maximum {meta['max']}"


def _range(number: float, meta: dict, path: tuple) -> Iterator[Finding]:
    if "min" in meta and number < meta["min"]:
        yield path, f"{number:g} is below the minimum {meta['min']}"
    if "max" in meta and number > meta["max"]:
        yield path, f"{number:g} is above the maximum {meta['max']}"


def check_resource(resource_type: str, props: dict, path: tuple) -> Iterator[Finding]:
    """Findings of one resource's Properties against the input of its API call."""
    service, operation = OPERATIONS[resource_type]
    shape = _model(service).operation_model(operation).input_shape
    for name, value in props.items():
        if (resource_type, name) in CFN_ONLY:
            continue
        other, how = OTHER_OPERATIONS.get((resource_type, name), (None, "member"))
        target = _model(service).operation_model(other).input_shape if other else shape
        if how == "items":
            for i, item in enumerate(value if isinstance(value, list) else []):
                yield from check_value(item, target, (*path, name, i), resource_type)
            continue
        member = _member(target, name, resource_type)
        if member is None:
            yield (
                (*path, name),
                f"{operation} has no member {name!r} (members: {', '.join(target.members)})",
            )
        else:
            yield from check_value(value, target.members[member], (*path, name))


class ApiModel(TemplateRule, CloudFormationLintRule):
    id = "E9950"
    shortdesc = (
        "Properties of SageMaker, Application Auto Scaling, CloudWatch and ECS resources fit "
        "botocore's model of the API call they become (members, types, enums, patterns, lengths, "
        "ranges)"
    )
    description = __doc__.split("\n\n")[0]
    source_url = "https://github.com/boto/botocore/tree/develop/botocore/data"
    tags: ClassVar[list[str]] = ["api-model"]

    def findings(self, template):
        for lid, resource in (template.get("Resources") or {}).items():
            if isinstance(resource, dict) and resource.get("Type") in OPERATIONS:
                yield from check_resource(
                    resource["Type"],
                    resource.get("Properties") or {},
                    ("Resources", lid, "Properties"),
                )
