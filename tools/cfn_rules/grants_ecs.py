"""The required grants of ECS (E9005, E9013): what a task's execution role must allow, and
the routes a Fargate task in private subnets needs to pull its image and send its logs
(:mod:`required_grants` says what they are)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helpers
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _grants import (
    ECR_PULL_ACTIONS,
    LOG_WRITE_ACTIONS,
    AppRule,
    allows,
    role_of,
    role_statements,
)


class EcsTaskExecutionRole(AppRule, CloudFormationLintRule):
    id = "E9005"
    shortdesc = (
        "An ECS task definition that pulls from Amazon ECR, sends logs with awslogs or injects "
        "Secrets Manager secrets needs an execution role allowing ecr:GetAuthorizationToken, "
        "BatchGetImage and GetDownloadUrlForLayer, logs:CreateLogStream and PutLogEvents, "
        "secretsmanager:GetSecretValue on the secret (Fargate tasks included)"
    )
    description = (
        "Amazon ECS developer guide, 'Amazon ECS task execution IAM role': the task execution "
        "role is needed to pull a private ECR image, to use the awslogs log driver and to "
        "reference sensitive data in Secrets Manager (secretsmanager:GetSecretValue on the "
        "secret); the managed AmazonECSTaskExecutionRolePolicy covers the first two."
    )
    source_url = (
        "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task_execution_IAM_role.html"
    )
    tags: ClassVar[list[str]] = ["ecs", "iam"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props in t.resources(template, "AWS::ECS::TaskDefinition").items():
                containers = [
                    c for c in t.as_list(props.get("ContainerDefinitions")) if isinstance(c, dict)
                ]
                wanted: list[tuple[str, object]] = []
                if any(".dkr.ecr." in json.dumps(c.get("Image")) for c in containers):
                    wanted += [(a, None) for a in ECR_PULL_ACTIONS]
                if any(
                    (c.get("LogConfiguration") or {}).get("LogDriver") == "awslogs"
                    for c in containers
                ):
                    wanted += [(a, None) for a in LOG_WRITE_ACTIONS]
                for c in containers:
                    for secret in t.as_list(c.get("Secrets")):
                        value = secret.get("ValueFrom")
                        if ":secretsmanager:" in json.dumps(value) or t.references(value):
                            wanted.append(("secretsmanager:GetSecretValue", value))
                if not wanted:
                    continue
                where = ("Resources", lid, "Properties", "ExecutionRoleArn")
                role = role_of(templates, stack, props.get("ExecutionRoleArn"))
                if props.get("ExecutionRoleArn") is None:
                    yield (
                        stack,
                        where,
                        f"{lid} pulls from ECR, logs with awslogs or reads secrets: it needs one",
                    )
                    continue
                if role is None:
                    continue  # a role given by ARN
                statements = role_statements(templates[role[0]], role[1])
                missing = sorted(
                    {a for a, r in wanted if not allows(statements, a, self._arnish(r))}
                )
                if missing:
                    yield (
                        stack,
                        where,
                        (
                            f"the execution role {role[1]} of {lid} does not allow "
                            f"{', '.join(missing)}"
                        ),
                    )

    @staticmethod
    def _arnish(value):
        """A secret's ValueFrom may name a JSON key (``arn:...:secret:name-AbCdEf:key::``): the
        role's resource is the secret's ARN, so compare the value as written or leave the resource
        unchecked."""
        return value if t.references(value) else None


class FargatePrivateSubnetRoutes(AppRule, CloudFormationLintRule):
    id = "E9013"
    shortdesc = (
        "A Fargate service in subnets the app makes, without a public IP: the subnets route to a "
        "NAT gateway, or the VPC has the endpoints its tasks need (ecr.api, ecr.dkr and the S3 "
        "gateway to pull from ECR, logs for awslogs)"
    )
    description = (
        "Amazon ECS developer guide, 'Amazon ECS interface VPC endpoints (AWS PrivateLink)': "
        "tasks on Fargate that pull private images from Amazon ECR need the "
        "com.amazonaws.region.ecr.dkr and ecr.api interface endpoints and the Amazon S3 gateway "
        "endpoint (image layers), and the logs endpoint to send logs with awslogs, unless a NAT "
        "gateway routes them out. Subnets given by id (an existing VPC) are not visible here."
    )
    source_url = "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/vpc-endpoints.html"
    tags: ClassVar[list[str]] = ["ecs", "fargate", "ec2"]

    def app_findings(self, templates):
        endpoints = [
            (stack, props)
            for stack, tpl in templates.items()
            for props in t.resources(tpl, "AWS::EC2::VPCEndpoint").values()
        ]
        for stack, template in templates.items():
            tasks = t.resources(template, "AWS::ECS::TaskDefinition")
            for lid, props in t.resources(template, "AWS::ECS::Service").items():
                network = (props.get("NetworkConfiguration") or {}).get("AwsvpcConfiguration") or {}
                task = tasks.get(t.ref_target(template, props.get("TaskDefinition")) or "", {})
                fargate = props.get("LaunchType") == "FARGATE" or "FARGATE" in t.as_list(
                    task.get("RequiresCompatibilities")
                )
                if not fargate or network.get("AssignPublicIp") == "ENABLED":
                    continue
                subnets = [
                    found
                    for found in (
                        t.resolve(templates, stack, x) for x in t.as_list(network.get("Subnets"))
                    )
                    if found and found[1] in t.resources(templates[found[0]], "AWS::EC2::Subnet")
                ]
                if not subnets or any(self._has_nat(templates[s], lid_) for s, lid_ in subnets):
                    continue
                net_stack, subnet = subnets[0]
                vpc = t.resolve(
                    templates,
                    net_stack,
                    t.resources(templates[net_stack], "AWS::EC2::Subnet")[subnet].get("VpcId"),
                )
                # com.amazonaws.<region>.<service>: the service part ("ecr.api", "s3", "logs").
                services = {
                    (t.joined_text(e.get("ServiceName")) or "").split(".", 3)[-1]
                    for e_stack, e in endpoints
                    if t.resolve(templates, e_stack, e.get("VpcId")) == vpc
                }
                containers = [
                    c for c in t.as_list(task.get("ContainerDefinitions")) if isinstance(c, dict)
                ]
                wanted = []
                if any(".dkr.ecr." in json.dumps(c.get("Image")) for c in containers):
                    wanted += ["ecr.api", "ecr.dkr", "s3"]
                if any(
                    (c.get("LogConfiguration") or {}).get("LogDriver") == "awslogs"
                    for c in containers
                ):
                    wanted.append("logs")
                missing = [w for w in wanted if w not in services]
                if missing:
                    yield (
                        stack,
                        ("Resources", lid, "Properties", "NetworkConfiguration"),
                        (
                            f"{lid} runs on Fargate in private subnets with no NAT route, and "
                            f"their VPC has no {', '.join(missing)} endpoint"
                        ),
                    )

    @staticmethod
    def _has_nat(template: dict, subnet: str) -> bool:
        tables = {
            t.ref_target(template, a.get("RouteTableId"))
            for a in t.resources(template, "AWS::EC2::SubnetRouteTableAssociation").values()
            if t.ref_target(template, a.get("SubnetId")) == subnet
        }
        return any(
            r.get("NatGatewayId") is not None
            and t.ref_target(template, r.get("RouteTableId")) in tables
            for r in t.resources(template, "AWS::EC2::Route").values()
        )


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
