"""PrivateNetwork and an endpoint in a VPC, each in a bare stack: defaults, an existing VPC, the
props' checks (all problems in one error), and the caller policy bound to a VPC endpoint."""

from __future__ import annotations

import json

import pytest

from constructs_lib.network.private_network import PrivateNetwork
from constructs_lib.network.props import ExistingVpc, PrivateNetworkProps
from constructs_lib.sagemaker_endpoint.endpoint import RealtimeEndpoint
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import (
    ACCOUNT,
    bare_stack,
    endpoint_props,
    only,
    resources,
)

KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/0f0e0d0c-0b0a-0908-0706-050403020100"


def test_a_new_network_has_isolated_subnets_in_two_zones_endpoints_and_no_way_out():
    stack = bare_stack()
    network = PrivateNetwork(stack, "Net")
    assert len(network.subnet_ids) == 2 and len(network.model_security_group_ids) == 1
    assert sorted(network.endpoints) == ["EcrApi", "EcrDocker", "S3", "SageMakerRuntime"]
    assert (
        resources(stack, "AWS::EC2::InternetGateway") == {}
        and resources(stack, "AWS::EC2::NatGateway") == {}
    )
    assert resources(stack, "AWS::EC2::Route") == {}
    _, vpc = only(stack, "AWS::EC2::VPC")
    assert vpc["Properties"]["CidrBlock"] == "10.80.0.0/16"
    assert (
        vpc["Properties"]["EnableDnsHostnames"] is True
        and vpc["Properties"]["EnableDnsSupport"] is True
    )
    _, flow_log = only(stack, "AWS::EC2::FlowLog")
    assert flow_log["Properties"]["TrafficType"] == "ALL"


def test_an_existing_vpc_with_its_own_groups_and_no_endpoints():
    stack = bare_stack()
    network = PrivateNetwork(
        stack,
        "Net",
        PrivateNetworkProps(
            existing_vpc=ExistingVpc(
                "vpc-0123456789abcdef0",
                ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                ["us-east-1a", "us-east-1b"],
                "10.1.0.0/16",
            ),
            security_group_ids=["sg-0123456789abcdef0"],
            create_endpoints=False,
        ),
    )
    assert network.subnet_ids == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    assert network.model_security_group_ids == ["sg-0123456789abcdef0"]
    assert network.runtime_endpoint is None
    assert (
        resources(stack, "AWS::EC2::VPC") == {}
        and resources(stack, "AWS::EC2::SecurityGroup") == {}
    )
    # Its own groups: nothing of the stack waits on SageMaker's network interfaces.
    assert resources(stack, "Custom::AwaitNetworkInterfaces") == {}


def test_destroy_waits_for_the_models_network_interfaces_before_the_group_and_subnets_go():
    """cloudformation-coverage-roadmap#1327: SageMaker releases a VPC endpoint's network interfaces
    after the endpoint is deleted, and the group's and subnets' deletion fails while they remain.
    The waiter refers to both (deleted before them), runs outside the VPC, and may delete interfaces
    of this VPC only."""
    stack = bare_stack()
    PrivateNetwork(stack, "Net", PrivateNetworkProps())
    ((_wait_id, wait),) = resources(stack, "Custom::AwaitNetworkInterfaces").items()
    (group_id,) = [
        k
        for k in resources(stack, "AWS::EC2::SecurityGroup")
        if k.startswith("NetModelSecurityGroup")
    ]
    assert wait["Properties"]["SecurityGroupIds"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
    assert sorted(ref["Ref"] for ref in wait["Properties"]["SubnetIds"]) == sorted(
        resources(stack, "AWS::EC2::Subnet")
    )
    function_id = wait["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    function = resources(stack, "AWS::Lambda::Function")[function_id]["Properties"]
    assert function["Handler"] == "network_interfaces.handler" and "VpcConfig" not in function
    assert function["Timeout"] == 900
    (delete,) = [
        s
        for p in resources(stack, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "ec2:DeleteNetworkInterface"
    ]
    vpc_id = next(iter(resources(stack, "AWS::EC2::VPC")))
    assert vpc_id in json.dumps(delete["Condition"]["ArnEquals"]["ec2:Vpc"])


def test_bad_network_props_are_reported_together():
    with pytest.raises(PropsError) as error:
        PrivateNetwork(
            bare_stack(),
            "Net",
            PrivateNetworkProps(
                existing_vpc=ExistingVpc(
                    "vpc-1", ["subnet-0123456789abcdef0"], ["us-west-2a"], "10.1.0.0/33"
                ),
                caller_cidrs=["10.0.0.1/16"],
                flow_log_retention_days=2,
            ),
        )
    assert error.value.problems == [
        "vpc_id='vpc-1': must be a VPC id such as 'vpc-0123456789abcdef0'",
        'availability_zones=["us-west-2a"]: must be Availability Zones of us-east-1 such '
        "as 'us-east-1a'; not: "
        "'us-west-2a'",
        'subnet_ids=["subnet-0123456789abcdef0"]: must be in at least 2 Availability Zones '
        "(SageMaker hosting in a "
        "VPC); all are in us-west-2a",
        "route_table_ids=[]: must name the route table of each of the 1 subnet(s) (the S3 "
        "gateway endpoint is added to them), or set create_endpoints=false if the VPC has its "
        "endpoints",
        "vpc_cidr='10.1.0.0/33': must be an IPv4 CIDR block such as '10.80.0.0/16' (host bits "
        "zero)",
        "caller_cidrs='10.0.0.1/16': must be an IPv4 CIDR block such as '10.80.0.0/16' (host "
        "bits zero)",
        "flow_log_retention_days=2: must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, "
        "365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653",
    ]


def test_an_endpoint_in_a_vpc_bound_to_a_vpc_endpoint():
    stack = bare_stack()
    RealtimeEndpoint(
        stack,
        "Speech",
        endpoint_props(
            vpc_subnets=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
            security_groups=["sg-0123456789abcdef0"],
            require_source_vpce=["vpce-0123456789abcdef0"],
            log_kms_key_arn=KEY,
            enable_network_isolation=True,
        ),
    )
    _, model = only(stack, "AWS::SageMaker::Model")
    assert model["Properties"]["VpcConfig"] == {
        "Subnets": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
    }
    assert model["Properties"]["EnableNetworkIsolation"] is True
    _, policy = only(stack, "AWS::IAM::ManagedPolicy")
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceVpce": ["vpce-0123456789abcdef0"]}
    }
    _, group = only(stack, "AWS::Logs::LogGroup")
    assert group["Properties"]["KmsKeyId"] == KEY


def test_vpc_props_of_an_endpoint_are_checked():
    with pytest.raises(PropsError) as error:
        RealtimeEndpoint(
            bare_stack(),
            "Speech",
            endpoint_props(vpc_subnets=["sg-0123456789abcdef0"], require_source_vpce=["vpc-1"]),
        )
    assert error.value.problems == [
        'vpc_subnets=["sg-0123456789abcdef0"] and security_groups=[]: give both (a '
        "VpcConfig) or neither",
        'vpc_subnets=["sg-0123456789abcdef0"]: must be subnet ids such as '
        "'subnet-0123456789abcdef0'; not: "
        "'sg-0123456789abcdef0'",
        'require_source_vpce=["vpc-1"]: must be VPC endpoint ids such as '
        "'vpce-0123456789abcdef0'; not: 'vpc-1'",
    ]


def _services(stack) -> dict[str, dict]:
    """``{service suffix: endpoint properties}`` (ServiceName a literal or a join with the
    region)."""
    found = {}
    for endpoint in resources(stack, "AWS::EC2::VPCEndpoint").values():
        name = endpoint["Properties"]["ServiceName"]
        text = (
            name
            if isinstance(name, str)
            else "".join(p if isinstance(p, str) else "R" for p in name["Fn::Join"][1])
        )
        assert text.split(".", 3)[3] not in found, f"two endpoints for {text}"
        found[text.split(".", 3)[3]] = endpoint["Properties"]
    return found


def test_connect_endpoints_give_the_consumers_sqs_events_logs_and_a_dynamodb_gateway():
    stack = bare_stack()
    network = PrivateNetwork(stack, "Net", PrivateNetworkProps(connect_endpoints=True))
    assert sorted(network.endpoints) == [
        "DynamoDb",
        "EcrApi",
        "EcrDocker",
        "Events",
        "Logs",
        "S3",
        "SageMakerRuntime",
        "Sqs",
    ]
    services = _services(stack)
    assert services["dynamodb"]["VpcEndpointType"] == "Gateway"
    assert sorted(t["Ref"] for t in services["dynamodb"]["RouteTableIds"]) == sorted(
        resources(stack, "AWS::EC2::RouteTable")
    )
    groups = resources(stack, "AWS::EC2::SecurityGroup")
    (group,) = [k for k in groups if k.startswith("NetConnectEndpointsSecurityGroup")]
    for service in ("sqs", "events", "logs"):
        assert services[service]["PrivateDnsEnabled"] is True
        assert services[service]["SecurityGroupIds"] == [{"Fn::GetAtt": [group, "GroupId"]}]
    assert [
        (r["CidrIp"], r["FromPort"], r["ToPort"])
        for r in groups[group]["Properties"]["SecurityGroupIngress"]
    ] == [("10.80.0.0/16", 443, 443)]
    (registry,) = [
        g for k, g in groups.items() if k.startswith("NetRegistryEndpointsSecurityGroup")
    ]
    assert ("10.80.0.0/16", 443) in {
        (r.get("CidrIp"), r["FromPort"])
        for r in registry["Properties"].get("SecurityGroupIngress", [])
    }


def test_connect_and_ecs_endpoints_share_one_logs_endpoint_and_one_registry_opening():
    stack = bare_stack()
    PrivateNetwork(stack, "Net", PrivateNetworkProps(connect_endpoints=True, ecs_endpoints=True))
    services = _services(stack)  # fails on a second endpoint for one service
    groups = resources(stack, "AWS::EC2::SecurityGroup")
    (ecs_group,) = [k for k in groups if k.startswith("NetEcsEndpointsSecurityGroup")]
    assert services["logs"]["SecurityGroupIds"] == [{"Fn::GetAtt": [ecs_group, "GroupId"]}]
    (registry,) = [
        g for k, g in groups.items() if k.startswith("NetRegistryEndpointsSecurityGroup")
    ]
    cidr_rules = [
        r
        for r in registry["Properties"]["SecurityGroupIngress"]
        if r.get("CidrIp") == "10.80.0.0/16"
    ]
    assert len(cidr_rules) == 1


def test_connect_consumers_reach_the_runtime_endpoint_when_callers_are_elsewhere():
    stack = bare_stack()
    PrivateNetwork(
        stack, "Net", PrivateNetworkProps(connect_endpoints=True, caller_cidrs=["192.168.0.0/24"])
    )
    (runtime,) = [
        g
        for k, g in resources(stack, "AWS::EC2::SecurityGroup").items()
        if k.startswith("NetRuntimeEndpointSecurityGroup")
    ]
    assert sorted(
        (r["CidrIp"], r["FromPort"]) for r in runtime["Properties"]["SecurityGroupIngress"]
    ) == [
        ("10.80.0.0/16", 443),
        ("10.80.0.0/16", 8443),
        ("192.168.0.0/24", 443),
        ("192.168.0.0/24", 8443),
    ]


def test_an_existing_vpc_gets_the_dynamodb_gateway_on_its_route_tables():
    stack = bare_stack()
    PrivateNetwork(
        stack,
        "Net",
        PrivateNetworkProps(
            connect_endpoints=True,
            existing_vpc=ExistingVpc(
                "vpc-0123456789abcdef0",
                ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                ["us-east-1a", "us-east-1b"],
                "10.1.0.0/16",
                ["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"],
            ),
        ),
    )
    assert _services(stack)["dynamodb"]["RouteTableIds"] == [
        "rtb-0123456789abcdef0",
        "rtb-0123456789abcdef1",
    ]


def test_connect_endpoints_need_create_endpoints():
    with pytest.raises(PropsError) as error:
        PrivateNetwork(
            bare_stack(), "Net", PrivateNetworkProps(connect_endpoints=True, create_endpoints=False)
        )
    assert error.value.problems == [
        "connect_endpoints=true: needs create_endpoints=true (the endpoints are made here)"
    ]
