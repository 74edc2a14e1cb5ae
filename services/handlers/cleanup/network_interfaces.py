"""Custom resource handler ``Custom::AwaitNetworkInterfaces``: on Delete, wait until no network
interface uses the Models' security group any more, so that CloudFormation can then delete that
group and the subnets.

Why: SageMaker creates the network interfaces of a VPC-connected endpoint outside the stack and
releases them some time after the endpoint is deleted; CloudFormation does not wait for them, so
deleting the security group and the subnets fails with DependencyViolation ("has a dependent
object", "has dependencies and cannot be deleted") once its retries run out
(aws-cloudformation/cloudformation-coverage-roadmap#1327; hashicorp/terraform-provider-aws#34397).
How long SageMaker takes is not documented (unconfirmed): the handler polls every :data:`POLL_S`
seconds until the Lambda function is about to time out, deletes an interface that is left
``available`` (detached) and is not managed by a service, and then answers SUCCESS either way (a
group that still has interfaces fails its own delete, with EC2's message, which is where the user
must look).

Properties: ``SecurityGroupIds`` (the groups to watch). Create and Update do nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import boto3
from cfn_response import respond

#: Seconds between two DescribeNetworkInterfaces calls.
POLL_S = 15
#: Seconds kept back from the function's remaining time for the last call and the response.
MARGIN_S = 30


def interfaces(ec2: Any, groups: list[str]) -> list[dict[str, Any]]:
    """The network interfaces that use any of ``groups``."""
    pages = ec2.get_paginator("describe_network_interfaces").paginate(
        Filters=[{"Name": "group-id", "Values": groups}]
    )
    return [interface for page in pages for interface in page["NetworkInterfaces"]]


def await_release(
    ec2: Any,
    groups: list[str],
    seconds_left: Callable[[], float],
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait while ``seconds_left()`` allows for the interfaces of ``groups`` to go, deleting
    detached ones that no service manages. Returns ``{"remaining": [ids], "deleted": [ids], "polls":
    n}``."""
    deleted: list[str] = []
    polls = 0
    while True:
        polls += 1
        found = interfaces(ec2, groups)
        for interface in found:
            if interface.get("Status") == "available" and not interface.get("RequesterManaged"):
                ec2.delete_network_interface(NetworkInterfaceId=interface["NetworkInterfaceId"])
                deleted.append(interface["NetworkInterfaceId"])
        remaining = [
            i["NetworkInterfaceId"] for i in found if i["NetworkInterfaceId"] not in deleted
        ]
        if not remaining or seconds_left() < POLL_S + MARGIN_S:
            return {"remaining": remaining, "deleted": deleted, "polls": polls}
        sleep(POLL_S)


def handler(event: dict[str, Any], context: Any) -> None:
    """Lambda entry point: waits on Delete, answers SUCCESS (with what remains) or FAILED on an
    error."""
    data: dict[str, Any] = {"remaining": [], "deleted": [], "polls": 0}
    try:
        if event["RequestType"] == "Delete":
            groups = list(event["ResourceProperties"]["SecurityGroupIds"])
            data = await_release(
                boto3.client("ec2"), groups, lambda: context.get_remaining_time_in_millis() / 1000
            )
    except (
        Exception
    ) as error:  # reported to CloudFormation, which fails the operation with this reason
        print(json.dumps({"request": event.get("RequestType"), "error": repr(error)}))
        respond(event, context, "FAILED", f"{type(error).__name__}: {error}", {})
        return
    print(json.dumps({"request": event["RequestType"], **data}))
    respond(
        event,
        context,
        "SUCCESS",
        "",
        {"Remaining": len(data["remaining"]), "Deleted": len(data["deleted"])},
    )
