"""The ``Custom::AwaitNetworkInterfaces`` handler (constructs_lib/cleanup_handlers/network_interfaces.py) against
moto's EC2: it returns once no interface uses the group, deletes detached interfaces no service manages, stops
waiting before the function's time is up, and answers CloudFormation SUCCESS or FAILED at the response URL. (The
other handler of the directory: tests/ecs/test_release_protection.py.)"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import boto3
import pytest
from moto import mock_aws

from tests.conftest import ROOT

HANDLERS = ROOT / "constructs_lib" / "cleanup_handlers"
REGION = "us-east-1"


def handler_module():
    """The handler as Lambda loads it: its directory on the path (it imports ``cfn_response`` from there)."""
    if str(HANDLERS) not in sys.path:
        sys.path.append(str(HANDLERS))
    spec = importlib.util.spec_from_file_location("network_interfaces", HANDLERS / "network_interfaces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def ec2(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        client = boto3.client("ec2", region_name=REGION)
        vpc = client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = client.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        group = client.create_security_group(GroupName="models", Description="models", VpcId=vpc)["GroupId"]
        other = client.create_security_group(GroupName="other", Description="other", VpcId=vpc)["GroupId"]
        yield client, subnet, group, other


def interface(client, subnet: str, group: str) -> str:
    return client.create_network_interface(SubnetId=subnet, Groups=[group])["NetworkInterface"]["NetworkInterfaceId"]


def test_detached_interfaces_of_the_group_are_deleted_and_others_left(ec2):
    client, subnet, group, other = ec2
    mine = [interface(client, subnet, group) for _ in range(2)]
    theirs = interface(client, subnet, other)
    sleeps = []
    result = handler_module().await_release(client, [group], lambda: 600.0, sleeps.append)
    assert sorted(result["deleted"]) == sorted(mine) and result["remaining"] == [] and sleeps == []
    left = [i["NetworkInterfaceId"] for i in client.describe_network_interfaces()["NetworkInterfaces"]]
    assert left == [theirs]


def test_an_interface_in_use_is_waited_for_until_the_time_is_nearly_up(ec2):
    client, subnet, group, _ = ec2
    attached = interface(client, subnet, group)
    instance = client.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet)["Instances"][0]
    client.attach_network_interface(NetworkInterfaceId=attached, InstanceId=instance["InstanceId"], DeviceIndex=1)
    module = handler_module()
    clock = iter([600.0, 300.0, module.POLL_S + module.MARGIN_S - 1])
    sleeps = []
    result = module.await_release(client, [group], lambda: next(clock), sleeps.append)
    assert result == {"remaining": [attached], "deleted": [], "polls": 3}
    assert sleeps == [module.POLL_S, module.POLL_S]


def test_no_interface_left_returns_at_once(ec2):
    client, _, group, _ = ec2
    assert handler_module().await_release(client, [group], lambda: 600.0, lambda s: None) == {
        "remaining": [], "deleted": [], "polls": 1}


class _Responses(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def do_PUT(self):  # noqa: N802 (http.server's name)
        _Responses.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 600_000


@pytest.mark.parametrize("request_type, properties, status", [
    ("Delete", True, "SUCCESS"), ("Create", True, "SUCCESS"), ("Delete", False, "FAILED")])
def test_the_handler_answers_cloudformation(ec2, monkeypatch, request_type, properties, status):
    client, subnet, group, _ = ec2
    detached = interface(client, subnet, group)
    server = HTTPServer(("127.0.0.1", 0), _Responses)
    threading.Thread(target=server.handle_request, daemon=True).start()
    _Responses.bodies = []
    module = handler_module()
    monkeypatch.setattr(module.boto3, "client", lambda service: client)
    module.handler({"RequestType": request_type, "ResponseURL": f"http://127.0.0.1:{server.server_port}/r",
                    "ResourceProperties": {"SecurityGroupIds": [group]} if properties else {},
                    "StackId": "stack", "RequestId": "request", "LogicalResourceId": "Await"}, _Context())
    server.server_close()
    (body,) = _Responses.bodies
    assert body["Status"] == status and body["RequestId"] == "request"
    left = [i["NetworkInterfaceId"] for i in client.describe_network_interfaces()["NetworkInterfaces"]]
    if request_type == "Delete" and properties:
        assert body["Data"] == {"Remaining": "0", "Deleted": "1"} and left == []
    else:
        assert left == [detached]
