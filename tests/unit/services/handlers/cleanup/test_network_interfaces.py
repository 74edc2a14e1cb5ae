"""The ``Custom::AwaitNetworkInterfaces`` handler
(services/handlers/cleanup/network_interfaces.py) against moto's EC2: it returns once no
interface uses the group, deletes detached interfaces no service manages, stops waiting before the
function's time is up, and answers CloudFormation SUCCESS or FAILED at the response URL. (The other
handler of the directory:
tests/unit/services/handlers/cleanup/test_instance_protection.py.)"""

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
    return load_handler("network_interfaces")


@pytest.fixture
def ec2(monkeypatch):
    moto_environment(monkeypatch)
    with mock_aws():
        client = boto3.client("ec2", region_name=REGION)
        vpc = client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = client.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        group = client.create_security_group(GroupName="models", Description="models", VpcId=vpc)[
            "GroupId"
        ]
        other = client.create_security_group(GroupName="other", Description="other", VpcId=vpc)[
            "GroupId"
        ]
        yield client, subnet, group, other


def interface(client, subnet: str, group: str) -> str:
    return client.create_network_interface(SubnetId=subnet, Groups=[group])["NetworkInterface"][
        "NetworkInterfaceId"
    ]


def test_detached_interfaces_of_the_group_are_deleted_and_others_left(ec2):
    client, subnet, group, other = ec2
    mine = [interface(client, subnet, group) for _ in range(2)]
    theirs = interface(client, subnet, other)
    sleeps = []
    result = handler_module().await_release(client, [group], lambda: 600.0, sleeps.append)
    assert sorted(result["deleted"]) == sorted(mine) and result["remaining"] == [] and sleeps == []
    left = [
        i["NetworkInterfaceId"] for i in client.describe_network_interfaces()["NetworkInterfaces"]
    ]
    assert left == [theirs]


def test_an_interface_in_use_is_waited_for_until_the_time_is_nearly_up(ec2):
    client, subnet, group, _ = ec2
    attached = interface(client, subnet, group)
    instance = client.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet
    )["Instances"][0]
    client.attach_network_interface(
        NetworkInterfaceId=attached, InstanceId=instance["InstanceId"], DeviceIndex=1
    )
    module = handler_module()
    clock = iter([600.0, 300.0, module.POLL_S + module.MARGIN_S - 1])
    sleeps = []
    result = module.await_release(client, [group], lambda: next(clock), sleeps.append)
    assert result == {"remaining": [attached], "deleted": [], "polls": 3}
    assert sleeps == [module.POLL_S, module.POLL_S]


def test_no_interface_left_returns_at_once(ec2):
    client, _, group, _ = ec2
    assert handler_module().await_release(client, [group], lambda: 600.0, lambda s: None) == {
        "remaining": [],
        "deleted": [],
        "polls": 1,
    }


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 600_000


@pytest.mark.parametrize(
    "request_type, properties, status",
    [("Delete", True, "SUCCESS"), ("Create", True, "SUCCESS"), ("Delete", False, "FAILED")],
)
def test_the_handler_answers_cloudformation(ec2, monkeypatch, request_type, properties, status):
    client, subnet, group, _ = ec2
    detached = interface(client, subnet, group)
    module = handler_module()
    monkeypatch.setattr(module.boto3, "client", lambda service: client)
    with response_url() as (url, bodies):
        module.handler(
            {
                "RequestType": request_type,
                "ResponseURL": url,
                "ResourceProperties": {"SecurityGroupIds": [group]} if properties else {},
                "StackId": "stack",
                "RequestId": "request",
                "LogicalResourceId": "Await",
            },
            _Context(),
        )
    (body,) = bodies
    assert body["Status"] == status and body["RequestId"] == "request"
    left = [
        i["NetworkInterfaceId"] for i in client.describe_network_interfaces()["NetworkInterfaces"]
    ]
    if request_type == "Delete" and properties:
        assert body["Data"] == {"Remaining": "0", "Deleted": "1"} and left == []
    else:
        assert left == [detached]
