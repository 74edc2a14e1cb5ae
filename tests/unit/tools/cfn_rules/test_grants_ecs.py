"""The required grants of ECS (tools/cfn_rules/grants_ecs.py): each rule holds on a template that
grants what AWS documents and fails, naming what is missing, on the same template with the grant
taken out (test_required_grants.py holds them as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.grants_kit import (
    ROLE_ARN,
    allow,
    found,
    res,
    role_with,
    template,
    without,
)
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import _grants
import grants_ecs


def task(**props) -> dict:
    return template(
        **role_with(
            allow(*_grants.ECR_PULL_ACTIONS),
            allow(*_grants.LOG_WRITE_ACTIONS),
            allow("secretsmanager:GetSecretValue", resource={"Ref": "Secret"}),
        ),
        Secret=res("AWS::SecretsManager::Secret", GenerateSecretString={}),
        Task=res(
            "AWS::ECS::TaskDefinition",
            RequiresCompatibilities=["FARGATE"],
            ExecutionRoleArn=ROLE_ARN,
            ContainerDefinitions=[
                {
                    "Image": "1.dkr.ecr.us-east-1.amazonaws.com/r:1",
                    "LogConfiguration": {"LogDriver": "awslogs"},
                    "Secrets": [{"Name": "T", "ValueFrom": {"Ref": "Secret"}}],
                }
            ],
            **props,
        ),
    )


@pytest.mark.parametrize(
    "action", ["ecr:GetAuthorizationToken", "logs:CreateLogStream", "secretsmanager:GetSecretValue"]
)
def test_a_task_execution_role_pulls_logs_and_reads_its_secrets(action):
    assert found(grants_ecs.EcsTaskExecutionRole, task()) == []
    assert found(grants_ecs.EcsTaskExecutionRole, without(task(), "Policy", action)) == [
        f"the execution role Role of Task does not allow {action}"
    ]


def test_a_fargate_task_that_pulls_from_ecr_has_an_execution_role():
    tpl = task()
    del tpl["Resources"]["Task"]["Properties"]["ExecutionRoleArn"]
    assert found(grants_ecs.EcsTaskExecutionRole, tpl) == [
        "Task pulls from ECR, logs with awslogs or reads secrets: it needs one"
    ]


def test_the_managed_task_execution_policy_counts():
    tpl = task()
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"] = [
        allow("secretsmanager:GetSecretValue", resource={"Ref": "Secret"})
    ]
    assert len(found(grants_ecs.EcsTaskExecutionRole, tpl)) == 1
    tpl["Resources"]["Role"]["Properties"]["ManagedPolicyArns"] = [
        "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
    ]
    assert found(grants_ecs.EcsTaskExecutionRole, tpl) == []


def fargate_in_private_subnets(*services: str, nat=False) -> dict:
    tpl = task()
    resources = tpl["Resources"]
    resources["Vpc"] = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}
    resources["Subnet"] = {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}}}
    resources["Table"] = {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}}
    resources["Assoc"] = {
        "Type": "AWS::EC2::SubnetRouteTableAssociation",
        "Properties": {"SubnetId": {"Ref": "Subnet"}, "RouteTableId": {"Ref": "Table"}},
    }
    if nat:
        resources["Nat"] = {
            "Type": "AWS::EC2::Route",
            "Properties": {
                "RouteTableId": {"Ref": "Table"},
                "NatGatewayId": "nat-1",
                "DestinationCidrBlock": "0.0.0.0/0",
            },
        }
    for i, service in enumerate(services):
        resources[f"E{i}"] = {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {
                "VpcId": {"Ref": "Vpc"},
                "ServiceName": {
                    "Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, f".{service}"]]
                },
            },
        }
    resources["Service"] = {
        "Type": "AWS::ECS::Service",
        "Properties": {
            "TaskDefinition": {"Ref": "Task"},
            "LaunchType": "FARGATE",
            "NetworkConfiguration": {
                "AwsvpcConfiguration": {
                    "AssignPublicIp": "DISABLED",
                    "Subnets": [{"Ref": "Subnet"}],
                }
            },
        },
    }
    return tpl


def test_fargate_in_private_subnets_reaches_ecr_s3_and_logs_through_endpoints_or_a_nat():
    assert (
        found(
            grants_ecs.FargatePrivateSubnetRoutes,
            fargate_in_private_subnets("ecr.api", "ecr.dkr", "s3", "logs"),
        )
        == []
    )
    assert found(
        grants_ecs.FargatePrivateSubnetRoutes, fargate_in_private_subnets("ecr.api", "s3")
    ) == [
        "Service runs on Fargate in private subnets with no NAT route, and their VPC has no "
        "ecr.dkr, logs endpoint"
    ]
    assert found(grants_ecs.FargatePrivateSubnetRoutes, fargate_in_private_subnets(nat=True)) == []
