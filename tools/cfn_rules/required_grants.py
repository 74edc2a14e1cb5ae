"""Required grants: for each resource the app creates, what AWS says its role or key policy must
hold. IAM and KMS accept a policy that leaves out what a service later needs; the template
synthesizes, lints clean and fails only when the service acts (a Model in a VPC cannot create its
network interfaces, an encrypted bus cannot encrypt). These rules read what is granted, across the
app's stacks (keys live in the Foundation stack, their users elsewhere), and name what is missing.

Each rule is a cfn-lint custom rule like those of :mod:`aws_rules` (ids E90xx) and an app-level
check the gate (``_gate.template_findings``) runs over every synthesized variant. A key or role
given by ARN (the user's own) is not in any template: ``voicectl preflight`` reads a user's key
instead. Where AWS does not document a fact, the rule's text says "unconfirmed".
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

SAGEMAKER_DG = "https://docs.aws.amazon.com/sagemaker/latest/dg"

#: What the AWS managed policies the app attaches allow (AWS Managed Policy Reference guide, each
#: policy's page).
AWS_MANAGED_POLICIES: dict[str, tuple[str, ...]] = {
    "service-role/AWSLambdaBasicExecutionRole": (
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    ),
    "service-role/AWSLambdaVPCAccessExecutionRole": (
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    ),
    "service-role/AmazonECSTaskExecutionRolePolicy": (
        "ecr:GetAuthorizationToken",
        "ecr:BatchCheckLayerAvailability",
        "ecr:GetDownloadUrlForLayer",
        "ecr:BatchGetImage",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    ),
}

#: A Model with VpcConfig: "If you use your own IAM policy, you must add the following permissions"
#: (SageMaker developer guide, "CreateModel API: Execution Role Permissions"); "Give SageMaker
#: Hosted Endpoints Access to Resources in Your Amazon VPC" adds ec2:DescribeVpcEndpoints.
SAGEMAKER_VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeVpcEndpoints",
)
ECR_PULL_ACTIONS = ("ecr:GetAuthorizationToken", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
LOG_WRITE_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
#: Lambda developer guide, "Giving Lambda functions access to resources in an Amazon VPC" (execution
#: role).
LAMBDA_VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
)
EVENTS = "events.amazonaws.com"


# ------------------------------------------------------------------------------------------ helpers
def _matches(pattern: str, action: str) -> bool:
    return fnmatch.fnmatchcase(action.lower(), str(pattern).lower())


def allows(statements: list[dict], action: str, resource=None) -> bool:
    """Some Allow statement of ``statements`` grants ``action`` (its Action patterns), on ``*`` or
    ``resource`` (a template value, compared as written, or by the logical ids it names) when
    given."""
    for s in statements:
        if s.get("Effect") != "Allow" or not any(
            _matches(a, action) for a in t.as_list(s.get("Action"))
        ):
            continue
        if resource is None or _covers(s.get("Resource"), resource):
            return True
    return False


def _covers(resources, wanted) -> bool:
    text = json.dumps(wanted, sort_keys=True)
    names = t.references(wanted)
    for r in t.as_list(resources):
        if (
            r == "*"
            or json.dumps(r, sort_keys=True) == text
            or (names and names <= t.references(r))
        ):
            return True
        if isinstance(r, str) and isinstance(wanted, str) and fnmatch.fnmatchcase(wanted, r):
            return True
    return False


def role_statements(template: dict, role: str) -> list[dict]:
    """Every statement of role ``role`` (a logical id of ``template``): its inline policies, the
    AWS::IAM::Policy and ManagedPolicy resources attached to it, and the AWS managed policies of
    :data:`AWS_MANAGED_POLICIES`."""
    props = t.resources(template, "AWS::IAM::Role").get(role)
    if props is None:
        return []
    found = [
        s
        for p in t.as_list(props.get("Policies"))
        for s in t.as_list((p.get("PolicyDocument") or {}).get("Statement"))
    ]
    for kind, key in (("AWS::IAM::Policy", "Roles"), ("AWS::IAM::ManagedPolicy", "Roles")):
        for policy in t.resources(template, kind).values():
            if role in t.references(policy.get(key)):
                found += t.as_list((policy.get("PolicyDocument") or {}).get("Statement"))
    for arn in t.as_list(props.get("ManagedPolicyArns")):
        text = t.joined_text(arn) or ""
        for name, actions in AWS_MANAGED_POLICIES.items():
            if text.endswith(f":policy/{name}"):
                found.append({"Effect": "Allow", "Action": list(actions), "Resource": "*"})
    return found


def key_statements(templates: dict[str, dict], key: tuple[str, str]) -> list[dict]:
    props = t.resources(templates[key[0]], "AWS::KMS::Key").get(key[1]) or {}
    return t.as_list((props.get("KeyPolicy") or {}).get("Statement"))


def service_statements(statements: list[dict], service: str) -> list[dict]:
    return [
        s
        for s in statements
        if service in t.as_list((s.get("Principal") or {}).get("Service"))
        or any(
            service == (t.joined_text(p) or "")
            for p in t.as_list((s.get("Principal") or {}).get("Service"))
        )
    ]


def account_root_manages(statements: list[dict]) -> bool:
    """The key policy gives the account (its root principal) kms:*: IAM policies may then grant the
    key (KMS developer guide, "Default key policy": "Allows access to the AWS account and enables
    IAM policies")."""
    for s in statements:
        aws = [t.joined_text(p) or "" for p in t.as_list((s.get("Principal") or {}).get("AWS"))]
        if (
            s.get("Effect") == "Allow"
            and any(a.endswith(":root") for a in aws)
            and {"kms:*", "*"} & set(t.as_list(s.get("Action")))
        ):
            return True
    return False


def _key(templates: dict[str, dict], stack: str, value) -> tuple[str, str] | None:
    found = t.resolve(templates, stack, value)
    if found and found[1] in t.resources(templates[found[0]], "AWS::KMS::Key"):
        return found
    return None


def _role(templates: dict[str, dict], stack: str, value) -> tuple[str, str] | None:
    found = t.resolve(templates, stack, value)
    if found and found[1] in t.resources(templates[found[0]], "AWS::IAM::Role"):
        return found
    return None


class AppRule(TemplateRule):
    """A rule over the app's templates (``{stack: template}``); one template alone is an app of one
    stack."""

    app_level = True

    def findings(self, template):
        for _stack, path, message in self.app_findings({"Template": template}):
            yield path, message

    def app_findings(
        self, templates: dict[str, dict]
    ) -> Iterator[tuple[str, tuple, str]]:  # pragma: no cover
        raise NotImplementedError


# ---------------------------------------------------------------------------------------- SageMaker
def _model_roles(templates, stack, template, model_ids=None):
    for lid, props in t.resources(template, "AWS::SageMaker::Model").items():
        if model_ids is not None and lid not in model_ids:
            continue
        role = _role(templates, stack, props.get("ExecutionRoleArn"))
        if role is not None:
            yield lid, props, role, role_statements(templates[role[0]], role[1])


class SageMakerModelInVpcRole(AppRule, CloudFormationLintRule):
    id = "E9001"
    shortdesc = (
        "A SageMaker Model with VpcConfig: its execution role must allow "
        "ec2:CreateNetworkInterface, CreateNetworkInterfacePermission, DeleteNetworkInterface, "
        "DeleteNetworkInterfacePermission, DescribeNetworkInterfaces, DescribeVpcs, "
        "DescribeDhcpOptions, DescribeSubnets, DescribeSecurityGroups and DescribeVpcEndpoints"
    )
    description = (
        "SageMaker developer guide, 'CreateModel API: Execution Role Permissions': 'If you use "
        "your own IAM policy, you must add the following permissions' (the first nine); 'Give "
        "SageMaker Hosted Endpoints Access to Resources in Your Amazon VPC' lists "
        "ec2:DescribeVpcEndpoints too. SageMaker creates and deletes the endpoint's network "
        "interfaces as that role."
    )
    source_url = f"{SAGEMAKER_DG}/sagemaker-roles.html#sagemaker-roles-createmodel-perms"
    tags: ClassVar[list[str]] = ["sagemaker", "iam", "ec2"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props, role, statements in _model_roles(templates, stack, template):
                if not props.get("VpcConfig"):
                    continue
                missing = [a for a in SAGEMAKER_VPC_ACTIONS if not allows(statements, a)]
                if missing:
                    yield (
                        stack,
                        ("Resources", lid, "Properties", "ExecutionRoleArn"),
                        (
                            f"{lid} has VpcConfig but its role {role[1]} does not allow "
                            f"{', '.join(missing)}"
                        ),
                    )


class SageMakerModelRoleBasics(AppRule, CloudFormationLintRule):
    id = "E9002"
    shortdesc = (
        "A SageMaker Model's execution role must allow cloudwatch:PutMetricData, "
        "logs:CreateLogStream and logs:PutLogEvents, and for an image in Amazon ECR "
        "ecr:GetAuthorizationToken, ecr:BatchGetImage and ecr:GetDownloadUrlForLayer"
    )
    description = (
        "SageMaker developer guide, 'CreateModel API: Execution Role Permissions' (the policy's "
        "cloudwatch, logs and ecr actions). A model package (Marketplace) image is pulled by "
        "SageMaker, not checked. logs:CreateLogGroup is not required here: the app makes the "
        "endpoint's group."
    )
    source_url = f"{SAGEMAKER_DG}/sagemaker-roles.html#sagemaker-roles-createmodel-perms"
    tags: ClassVar[list[str]] = ["sagemaker", "iam"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props, role, statements in _model_roles(templates, stack, template):
                wanted = ["cloudwatch:PutMetricData", *LOG_WRITE_ACTIONS]
                images = [
                    c.get("Image")
                    for c in [props.get("PrimaryContainer"), *t.as_list(props.get("Containers"))]
                    if isinstance(c, dict)
                ]
                if any(".dkr.ecr." in json.dumps(i) for i in images):
                    wanted += ECR_PULL_ACTIONS
                missing = [a for a in wanted if not allows(statements, a)]
                if missing:
                    yield (
                        stack,
                        ("Resources", lid, "Properties", "ExecutionRoleArn"),
                        (f"the role {role[1]} of {lid} does not allow {', '.join(missing)}"),
                    )


class SageMakerRollbackAlarmsRole(AppRule, CloudFormationLintRule):
    id = "E9003"
    shortdesc = (
        "An endpoint with auto-rollback alarms: the execution role of its Models must allow "
        "cloudwatch:DescribeAlarms on those alarms"
    )
    description = (
        "SageMaker developer guide, deployment guardrails, 'Auto-Rollback Configuration and "
        "Monitoring': 'Ensure that your IAM execution role has permission to perform the "
        "cloudwatch:DescribeAlarms action on the auto-rollback alarms you specify.'"
    )
    source_url = f"{SAGEMAKER_DG}/deployment-guardrails.html"
    tags: ClassVar[list[str]] = ["sagemaker", "iam", "cloudwatch"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            configs = t.resources(template, "AWS::SageMaker::EndpointConfig")
            for lid, props in t.resources(template, "AWS::SageMaker::Endpoint").items():
                rollback = (props.get("DeploymentConfig") or {}).get(
                    "AutoRollbackConfiguration"
                ) or {}
                if not t.as_list(rollback.get("Alarms")):
                    continue
                config = configs.get(
                    t.ref_target(template, props.get("EndpointConfigName")) or "", {}
                )
                models = {
                    m for v in t.as_list(config.get("ProductionVariants")) for m in t.references(v)
                }
                for model, _props, role, statements in _model_roles(
                    templates, stack, template, models
                ):
                    if not allows(statements, "cloudwatch:DescribeAlarms"):
                        yield (
                            stack,
                            ("Resources", lid, "Properties", "DeploymentConfig"),
                            (
                                f"{lid} rolls back on alarms but {role[1]} (role of {model}) may "
                                "not describe them"
                            ),
                        )


class SageMakerVolumeKeyPolicy(AppRule, CloudFormationLintRule):
    id = "E9004"
    shortdesc = (
        "CreateEndpointConfig KmsKeyId: the key policy must let the account's IAM principals use "
        "the key (the caller's role creates the endpoint with it)"
    )
    description = (
        "CreateEndpointConfig KmsKeyId: 'The KMS key policy must grant permission to the IAM "
        "role that you specify in your CreateEndpoint, UpdateEndpoint requests.' Checked as the "
        "key policy giving the account root kms:* (IAM policies then decide), for a key the app "
        "makes."
    )
    source_url = (
        "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html"
    )
    tags: ClassVar[list[str]] = ["sagemaker", "kms"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props in t.resources(template, "AWS::SageMaker::EndpointConfig").items():
                key = _key(templates, stack, props.get("KmsKeyId"))
                if key and not account_root_manages(key_statements(templates, key)):
                    yield (
                        stack,
                        ("Resources", lid, "Properties", "KmsKeyId"),
                        (f"the policy of key {key[1]} does not let the account's IAM roles use it"),
                    )


# ---------------------------------------------------------------------------------------------- ECS
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
                role = _role(templates, stack, props.get("ExecutionRoleArn"))
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


# ------------------------------------------------------------------------------------------- Lambda
class LambdaInVpcRole(AppRule, CloudFormationLintRule):
    id = "E9006"
    shortdesc = (
        "A Lambda function with VpcConfig: its execution role must allow "
        "ec2:CreateNetworkInterface, ec2:DescribeNetworkInterfaces and "
        "ec2:DeleteNetworkInterface (AWSLambdaVPCAccessExecutionRole holds them)"
    )
    description = (
        "Lambda developer guide, 'Giving Lambda functions access to resources in an Amazon VPC': "
        "'Lambda uses your function's permissions to create and manage network interfaces'; "
        "DescribeNetworkInterfaces 'only works if it's allowed on all resources'."
    )
    source_url = "https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html"
    tags: ClassVar[list[str]] = ["lambda", "iam", "ec2"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props in t.resources(template, "AWS::Lambda::Function").items():
                if not t.as_list((props.get("VpcConfig") or {}).get("SubnetIds")):
                    continue
                role = _role(templates, stack, props.get("Role"))
                if role is None:
                    continue
                statements = role_statements(templates[role[0]], role[1])
                missing = [a for a in LAMBDA_VPC_ACTIONS if not allows(statements, a)]
                if missing:
                    yield (
                        stack,
                        ("Resources", lid, "Properties", "Role"),
                        (
                            f"{lid} runs in a VPC but its role {role[1]} does not allow "
                            f"{', '.join(missing)}"
                        ),
                    )


# -------------------------------------------------------------------------------------- EventBridge
class EventBusKeyPolicy(AppRule, CloudFormationLintRule):
    id = "E9007"
    shortdesc = (
        "An event bus with a customer managed key: the key policy must allow "
        "events.amazonaws.com kms:DescribeKey, kms:GenerateDataKey and kms:Decrypt; DescribeKey "
        "without the aws:SourceArn condition the guide's example puts on the other two "
        "(CreateEventBus calls it)"
    )
    description = (
        "EventBridge user guide, 'Authorizing EventBridge to use a customer managed key': the "
        "three permissions, and the example statement conditioning kms:GenerateDataKey and "
        "kms:Decrypt on aws:SourceAccount, aws:SourceArn and the bus's encryption context. "
        "Whether DescribeKey requests carry aws:SourceArn: unconfirmed, so it must not depend on "
        "it."
    )
    source_url = (
        "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-encryption-key-policy.html"
    )
    tags: ClassVar[list[str]] = ["events", "kms"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props in t.resources(template, "AWS::Events::EventBus").items():
                key = _key(templates, stack, props.get("KmsKeyIdentifier"))
                if key is None:
                    continue
                statements = service_statements(key_statements(templates, key), EVENTS)
                where = ("Resources", lid, "Properties", "KmsKeyIdentifier")
                missing = [
                    a
                    for a in ("kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt")
                    if not allows(statements, a)
                ]
                if missing:
                    yield stack, where, f"key {key[1]} does not allow {EVENTS} {', '.join(missing)}"
                elif not any(
                    allows([s], "kms:DescribeKey")
                    and "aws:sourcearn" not in json.dumps(s.get("Condition") or {}).lower()
                    for s in statements
                ):
                    yield (
                        stack,
                        where,
                        f"key {key[1]} allows {EVENTS} kms:DescribeKey only under aws:SourceArn",
                    )


class EncryptedEventBusDeadLetters(AppRule, CloudFormationLintRule):
    id = "E9008"
    shortdesc = (
        "An event bus with a customer managed key has a dead-letter queue: a standard SQS "
        "queue whose policy lets events.amazonaws.com sqs:SendMessage, not under the "
        "bus's own key nor an AWS managed key, and whose key (if the app's) lets "
        "events.amazonaws.com kms:GenerateDataKey and kms:Decrypt"
    )
    description = (
        "EventBridge user guide, 'Encrypting EventBridge event buses with AWS KMS keys': 'We "
        "strongly recommend specifying a DLQ for event buses, to ensure events are preserved if "
        "encryption or decryption errors occur'; 'Using dead-letter queues to process "
        "undelivered events': DLQs are standard SQS queues, the queue policy grants "
        "events.amazonaws.com sqs:SendMessage, and an encrypted queue's key must let EventBridge "
        "use it. 'Using dead-letter queues to capture encrypted event errors': the bus's DLQ "
        "receives events on non-retriable errors 'such as the specified customer managed key "
        "being disabled or missing', which would refuse a DLQ under the same key too; SQS "
        "developer guide, 'Key management': an AWS managed key's policy cannot be changed, so "
        "services sending to a queue need a customer managed key."
    )
    source_url = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-encryption-event-bus-cmkey.html"
    tags: ClassVar[list[str]] = ["events", "sqs", "kms"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            queues = t.resources(template, "AWS::SQS::Queue")
            for lid, props in t.resources(template, "AWS::Events::EventBus").items():
                if props.get("KmsKeyIdentifier") is None:
                    continue
                where = ("Resources", lid, "Properties", "DeadLetterConfig")
                queue = t.ref_target(template, (props.get("DeadLetterConfig") or {}).get("Arn"))
                if queue is None or queue not in queues:
                    yield (
                        stack,
                        where,
                        (
                            f"{lid} is encrypted with a customer managed key and has no "
                            "dead-letter queue"
                        ),
                    )
                    continue
                if t.literal_bool(queues[queue].get("FifoQueue")):
                    yield (
                        stack,
                        where,
                        f"{queue} is a FIFO queue; EventBridge DLQs are standard queues",
                    )
                sends = [
                    s
                    for p in t.resources(template, "AWS::SQS::QueuePolicy").values()
                    if queue in t.references(p.get("Queues"))
                    for s in service_statements(
                        t.as_list((p.get("PolicyDocument") or {}).get("Statement")), EVENTS
                    )
                ]
                if not allows(sends, "sqs:SendMessage"):
                    yield stack, where, f"the policy of {queue} does not let {EVENTS} send to it"
                queue_key = queues[queue].get("KmsMasterKeyId")
                key = _key(templates, stack, queue_key)
                bus_key = _key(templates, stack, props.get("KmsKeyIdentifier"))
                if str(queue_key).startswith("alias/aws/"):
                    yield (
                        stack,
                        where,
                        (
                            f"{queue} is under the AWS managed key {queue_key}, whose "
                            f"policy cannot let {EVENTS} use it"
                        ),
                    )
                elif key is not None and key == bus_key:
                    yield (
                        stack,
                        where,
                        (
                            f"{queue} is under the bus's own key {key[1]}: the key "
                            "disabled or missing, the errors it is for, would refuse "
                            "its messages too"
                        ),
                    )
                elif key is not None:
                    statements = service_statements(key_statements(templates, key), EVENTS)
                    missing = [
                        a
                        for a in ("kms:GenerateDataKey", "kms:Decrypt")
                        if not allows(statements, a)
                    ]
                    if missing:
                        yield (
                            stack,
                            where,
                            f"{queue}'s key {key[1]} does not allow {EVENTS} {', '.join(missing)}",
                        )


# ---------------------------------------------------------------------------------------------- SQS
SQS_SEND = ("sqs:SendMessage",)
SQS_RECEIVE = ("sqs:ReceiveMessage",)


class SqsKeyForProducersAndConsumers(AppRule, CloudFormationLintRule):
    id = "E9009"
    shortdesc = (
        "A queue encrypted with a customer managed key: a role that sends to it must also allow "
        "kms:GenerateDataKey and kms:Decrypt on the key, a role that receives from it kms:Decrypt"
    )
    description = (
        "Amazon SQS developer guide, 'Key management' (configuring KMS permissions for "
        "producers: kms:GenerateDataKey and kms:Decrypt; for consumers: kms:Decrypt). Checked "
        "for the roles of the app's templates whose statements name the queue."
    )
    source_url = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html"
    tags: ClassVar[list[str]] = ["sqs", "kms", "iam"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props in t.resources(template, "AWS::SQS::Queue").items():
                key_value = props.get("KmsMasterKeyId")
                if key_value is None or key_value == "alias/aws/sqs":
                    continue
                queue_arn = {"Fn::GetAtt": [lid, "Arn"]}
                for role in t.resources(template, "AWS::IAM::Role"):
                    statements = role_statements(template, role)
                    named = [
                        s
                        for s in statements
                        if _covers(s.get("Resource"), queue_arn) and s.get("Resource") != "*"
                    ]
                    wanted = []
                    if allows(named, "sqs:SendMessage"):
                        wanted += ["kms:GenerateDataKey", "kms:Decrypt"]
                    if allows(named, "sqs:ReceiveMessage"):
                        wanted += ["kms:Decrypt"]
                    missing = sorted({a for a in wanted if not allows(statements, a, key_value)})
                    if missing:
                        yield (
                            stack,
                            ("Resources", role),
                            (
                                f"{role} uses queue {lid} but may not {', '.join(missing)} with "
                                "its key"
                            ),
                        )


# ----------------------------------------------------------------------------------------- DynamoDB
class DynamoDbTableKey(AppRule, CloudFormationLintRule):
    id = "E9010"
    shortdesc = (
        "A DynamoDB table under a customer managed key: the key policy must let the account's IAM "
        "principals use the key (DynamoDB creates grants with the creator's permissions)"
    )
    description = (
        "DynamoDB developer guide, 'How Amazon DynamoDB uses AWS KMS': the key policy must allow "
        "the principal creating and using the table kms:CreateGrant, kms:DescribeKey, "
        "kms:Encrypt, kms:Decrypt, kms:ReEncrypt* and kms:GenerateDataKey* (directly, or by "
        "delegating to IAM through the account root). Checked as that delegation or an explicit "
        "kms:CreateGrant."
    )
    source_url = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/encryption.usagenotes.html"
    tags: ClassVar[list[str]] = ["dynamodb", "kms"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, props in t.resources(template, "AWS::DynamoDB::Table").items():
                key = _key(
                    templates, stack, (props.get("SSESpecification") or {}).get("KMSMasterKeyId")
                )
                if key is None:
                    continue
                statements = key_statements(templates, key)
                if not (account_root_manages(statements) or allows(statements, "kms:CreateGrant")):
                    yield (
                        stack,
                        ("Resources", lid, "Properties", "SSESpecification"),
                        (f"the policy of key {key[1]} lets no principal use it for DynamoDB"),
                    )


# ------------------------------------------------------------------------------------------ Connect
# and streams
def _stream_keys(templates, stack, template):
    for lid, props in t.resources(template, "AWS::Connect::InstanceStorageConfig").items():
        config = props.get("KinesisVideoStreamConfig") or {}
        key = (config.get("EncryptionConfig") or {}).get("KeyId")
        if key is not None:
            yield lid, config.get("Prefix"), key


class KinesisVideoStreamKeyForConsumers(AppRule, CloudFormationLintRule):
    id = "E9011"
    shortdesc = (
        "Connect's media streams under a customer managed key: a role that reads the streams "
        "(kinesisvideo:GetMedia) must allow kms:Decrypt on that key, and a key the app makes "
        "must let the account's IAM principals use it"
    )
    description = (
        "Kinesis Video Streams developer guide, 'Data protection in Kinesis Video Streams' "
        "(server-side encryption: consumers need kms:Decrypt on the stream's key; producers "
        "kms:GenerateDataKey, which Connect holds through its service-linked role). Connect "
        "admin guide, 'Enable live media streaming': the streams use the key of the instance's "
        "storage config."
    )
    source_url = "https://docs.aws.amazon.com/kinesisvideostreams/latest/dg/how-kms.html"
    tags: ClassVar[list[str]] = ["kinesisvideo", "connect", "kms"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, prefix, key_value in _stream_keys(templates, stack, template):
                key = _key(templates, stack, key_value)
                if key is not None and not account_root_manages(key_statements(templates, key)):
                    yield (
                        stack,
                        ("Resources", lid),
                        f"the policy of stream key {key[1]} does not delegate to IAM",
                    )
                for role in t.resources(template, "AWS::IAM::Role"):
                    statements = role_statements(template, role)
                    if not allows(statements, "kinesisvideo:GetMedia"):
                        continue  # a grant on "*" reads the streams too
                    if not allows(statements, "kms:Decrypt", key_value):
                        yield (
                            stack,
                            ("Resources", role),
                            (
                                f"{role} reads Connect's streams ({prefix}) but may not "
                                "kms:Decrypt with their key"
                            ),
                        )


def _sub_names(value) -> set[str]:
    """The logical ids an Fn::Sub template string names (``${Name}``, ``${Name.Attribute}``), at
    any depth."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, arg in value.items():
            text = arg[0] if key == "Fn::Sub" and isinstance(arg, list) and arg else arg
            if key == "Fn::Sub" and isinstance(text, str):
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text)}
            found |= _sub_names(arg)
    elif isinstance(value, list):
        for item in value:
            found |= _sub_names(item)
    return found


class ConnectFunctionAssociation(AppRule, CloudFormationLintRule):
    id = "E9012"
    shortdesc = (
        "A Lambda function associated with a Connect instance: its resource policy must let "
        "connect.amazonaws.com invoke it for that instance (SourceArn, SourceAccount the "
        "instance's account), and a flow of the template that invokes it must be created after "
        "the association"
    )
    description = (
        "Connect admin guide, 'Grant Amazon Connect access to your AWS Lambda functions': "
        "'Before you can use an AWS Lambda function in a flow, you must add it to your Amazon "
        "Connect instance'; the association adds a resource policy for connect.amazonaws.com "
        "limited to the instance. The instance ARN's account is the request's source account "
        "(Lambda developer guide, resource-based policies)."
    )
    source_url = (
        "https://docs.aws.amazon.com/connect/latest/adminguide/connect-lambda-functions.html"
    )
    tags: ClassVar[list[str]] = ["connect", "lambda"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            resources = template.get("Resources") or {}
            permissions = t.resources(template, "AWS::Lambda::Permission")
            for lid, props in t.resources(template, "AWS::Connect::IntegrationAssociation").items():
                if props.get("IntegrationType") != "LAMBDA_FUNCTION":
                    continue
                function = t.ref_target(template, props.get("IntegrationArn"))
                if function is None:
                    continue
                instance = props.get("InstanceId")
                account = (
                    instance.split(":")[4]
                    if isinstance(instance, str) and instance.count(":") >= 5
                    else None
                )
                granted = [
                    p
                    for p in permissions.values()
                    if function in t.references(p.get("FunctionName"))
                    and p.get("Principal") == "connect.amazonaws.com"
                    and p.get("SourceArn") == instance
                ]
                where = ("Resources", lid)
                if not granted:
                    yield (
                        stack,
                        where,
                        (
                            f"no permission lets connect.amazonaws.com invoke {function} for "
                            f"{instance}"
                        ),
                    )
                elif account and not any(p.get("SourceAccount") == account for p in granted):
                    yield (
                        stack,
                        where,
                        (
                            f"{function}'s permission for {instance} names another SourceAccount "
                            f"than the instance's {account}"
                        ),
                    )
                for flow_id, flow in t.resources(template, "AWS::Connect::ContactFlow").items():
                    named = t.references(flow.get("Content")) | _sub_names(flow.get("Content"))
                    waits_for = t.as_list(resources[flow_id].get("DependsOn"))
                    if function in named and lid not in waits_for:
                        yield (
                            stack,
                            ("Resources", flow_id, "DependsOn"),
                            (
                                f"{flow_id} invokes {function} but is not created after its "
                                f"association {lid}"
                            ),
                        )


#: Every rule of this module, in id order.
RULES: tuple[type[TemplateRule], ...] = tuple(
    sorted(
        (
            c
            for c in list(globals().values())
            if isinstance(c, type)
            and issubclass(c, TemplateRule)
            and c not in (TemplateRule, AppRule)
        ),
        key=lambda c: c.id,
    )
)
