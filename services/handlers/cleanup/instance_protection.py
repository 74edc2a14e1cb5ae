"""Custom resource handler ``Custom::ReleaseInstanceProtection``: on Delete, lift scale-in
protection from an Auto Scaling group and every instance in it, so that CloudFormation can then
delete the group.

Why: an ECS capacity provider with managed termination protection needs the group's
``NewInstancesProtectedFromScaleIn`` and sets ``ProtectedFromScaleIn`` on its instances; deleting
the capacity provider leaves those flags set (aws/containers-roadmap#2862), and CloudFormation's
delete of the group, which scales it to zero, then waits on instances it may not terminate
(aws/aws-cdk#18179, #14732). The resource sits between the group and the capacity provider in the
template, so CloudFormation deletes it after the capacity provider (ECS no longer manages the group)
and before the group (constructs_lib/ecs_service.py spells out the order).

Properties: ``AutoScalingGroupName``. Create does nothing; Update lifts protection from the previous
group when the name changed (the old group is replaced and deleted after the update); Delete lifts
it from the group. A group that no longer exists is fine. Answers CloudFormation at the pre-signed
``ResponseURL`` itself (no Provider framework: one function, one role; :mod:`cfn_response`), with
the standard library and boto3 of the Lambda runtime only.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
from cfn_response import respond

#: SetInstanceProtection takes at most 50 instance ids per call (Amazon EC2 Auto Scaling API
#: reference, InstanceIds).
MAX_IDS_PER_CALL = 50


def release(autoscaling: Any, group_name: str) -> list[str]:
    """Turn off ``NewInstancesProtectedFromScaleIn`` of ``group_name`` and ``ProtectedFromScaleIn``
    of each of its protected instances; return the instance ids released. A missing group releases
    nothing."""
    groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])[
        "AutoScalingGroups"
    ]
    if not groups:
        return []
    autoscaling.update_auto_scaling_group(
        AutoScalingGroupName=group_name, NewInstancesProtectedFromScaleIn=False
    )
    protected = [
        i["InstanceId"] for i in groups[0].get("Instances", []) if i.get("ProtectedFromScaleIn")
    ]
    for start in range(0, len(protected), MAX_IDS_PER_CALL):
        autoscaling.set_instance_protection(
            AutoScalingGroupName=group_name,
            ProtectedFromScaleIn=False,
            InstanceIds=protected[start : start + MAX_IDS_PER_CALL],
        )
    return protected


def on_event(event: dict[str, Any], autoscaling: Any) -> dict[str, Any]:
    """What the request asks, as ``{"released": [...], "group": name}`` (the response's Data)."""
    name = event["ResourceProperties"]["AutoScalingGroupName"]
    if event["RequestType"] == "Delete":
        return {"group": name, "released": release(autoscaling, name)}
    old = (event.get("OldResourceProperties") or {}).get("AutoScalingGroupName")
    if event["RequestType"] == "Update" and old and old != name:
        return {"group": old, "released": release(autoscaling, old)}
    return {"group": name, "released": []}


def handler(event: dict[str, Any], context: Any) -> None:
    """Lambda entry point. Any failure is reported as FAILED with its message (CloudFormation then
    shows it)."""
    try:
        data = on_event(event, boto3.client("autoscaling"))
    except (
        Exception
    ) as error:  # reported to CloudFormation, which fails the operation with this reason
        print(json.dumps({"request": event.get("RequestType"), "error": repr(error)}))
        respond(event, context, "FAILED", f"{type(error).__name__}: {error}", {})
        return
    print(json.dumps({"request": event["RequestType"], **data}))
    respond(
        event, context, "SUCCESS", "", {"Group": data["group"], "Released": len(data["released"])}
    )
