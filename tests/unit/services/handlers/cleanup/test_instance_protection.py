"""The ``Custom::ReleaseInstanceProtection`` handler
(services/handlers/cleanup/instance_protection.py) against moto's Auto Scaling: Delete lifts
the group's and every instance's scale-in protection (more instances than one SetInstanceProtection
call takes), Create does nothing, an Update that renames the group releases the old one, a missing
group is fine, and CloudFormation gets SUCCESS or FAILED at its response URL."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from tests.unit.services.handlers.cleanup.handler_kit import (
    REGION,
    handler_module as load_handler,
    moto_environment,
    response_url,
)


def handler_module():
    return load_handler("instance_protection")


@pytest.fixture
def autoscaling(monkeypatch):
    moto_environment(monkeypatch)
    with mock_aws():
        client = boto3.client("autoscaling", region_name=REGION)
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        ec2.create_launch_template(
            LaunchTemplateName="gpu",
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g6.xlarge"},
        )
        yield client, subnet


def protected_group(client, subnet: str, name: str, instances: int) -> None:
    client.create_auto_scaling_group(
        AutoScalingGroupName=name,
        MinSize=instances,
        MaxSize=instances,
        DesiredCapacity=instances,
        LaunchTemplate={"LaunchTemplateName": "gpu"},
        VPCZoneIdentifier=subnet,
        NewInstancesProtectedFromScaleIn=True,
    )


def protection(client, name: str) -> tuple[bool, list[bool]]:
    (group,) = client.describe_auto_scaling_groups(AutoScalingGroupNames=[name])[
        "AutoScalingGroups"
    ]
    return group["NewInstancesProtectedFromScaleIn"], [
        i["ProtectedFromScaleIn"] for i in group["Instances"]
    ]


def event(
    request_type: str, name: str, old: str | None = None, url: str = "http://127.0.0.1:9/"
) -> dict:
    return {
        "RequestType": request_type,
        "ResourceProperties": {"AutoScalingGroupName": name},
        **({"OldResourceProperties": {"AutoScalingGroupName": old}} if old else {}),
        "ResponseURL": url,
        "StackId": "stack",
        "RequestId": "request",
        "LogicalResourceId": "Release",
    }


def test_delete_lifts_protection_from_the_group_and_every_instance(autoscaling):
    client, subnet = autoscaling
    protected_group(client, subnet, "gpus", 53)  # more than MAX_IDS_PER_CALL (50)
    assert protection(client, "gpus") == (True, [True] * 53)
    module = handler_module()
    data = module.on_event(event("Delete", "gpus"), client)
    assert data["group"] == "gpus" and len(data["released"]) == 53
    assert protection(client, "gpus") == (False, [False] * 53)


def test_create_does_nothing_and_an_update_releases_only_a_replaced_group(autoscaling):
    client, subnet = autoscaling
    protected_group(client, subnet, "old", 2)
    protected_group(client, subnet, "new", 2)
    module = handler_module()
    assert module.on_event(event("Create", "new"), client) == {"group": "new", "released": []}
    assert module.on_event(event("Update", "new", old="new"), client)["released"] == []
    assert protection(client, "new") == (True, [True, True])
    assert len(module.on_event(event("Update", "new", old="old"), client)["released"]) == 2
    assert protection(client, "old") == (False, [False, False]) and protection(client, "new") == (
        True,
        [True, True],
    )


def test_a_group_that_is_gone_releases_nothing(autoscaling):
    client, _ = autoscaling
    assert handler_module().on_event(event("Delete", "gone"), client) == {
        "group": "gone",
        "released": [],
    }


@pytest.mark.parametrize("group, status", [("gpus", "SUCCESS"), (None, "FAILED")])
def test_the_handler_answers_cloudformation_at_the_response_url(
    autoscaling, monkeypatch, group, status
):
    client, subnet = autoscaling
    protected_group(client, subnet, "gpus", 1)
    module = handler_module()
    monkeypatch.setattr(module.boto3, "client", lambda service: client)
    with response_url() as (url, bodies):
        request = event("Delete", group or "gpus", url=url)
        if (
            group is None
        ):  # a request without the property: the handler reports the error instead of hanging
            del request["ResourceProperties"]["AutoScalingGroupName"]
        module.handler(request, None)
    (body,) = bodies
    assert (
        body["Status"] == status
        and body["LogicalResourceId"] == "Release"
        and body["RequestId"] == "request"
    )
    if status == "SUCCESS":
        assert body["Data"] == {"Group": "gpus", "Released": "1"} and protection(
            client, "gpus"
        ) == (False, [False])
    else:
        assert body["Reason"].startswith("KeyError") and protection(client, "gpus") == (
            True,
            [True],
        )
