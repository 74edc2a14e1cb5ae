"""The required grants of SageMaker (E9001-E9004): what a Model's execution role and an
endpoint's volume key must allow (:mod:`required_grants` says what they are)."""

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
    account_root_manages,
    allows,
    key_of,
    key_statements,
    role_of,
    role_statements,
)

SAGEMAKER_DG = "https://docs.aws.amazon.com/sagemaker/latest/dg"

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


def _model_roles(templates, stack, template, model_ids=None):
    for lid, props in t.resources(template, "AWS::SageMaker::Model").items():
        if model_ids is not None and lid not in model_ids:
            continue
        role = role_of(templates, stack, props.get("ExecutionRoleArn"))
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
                key = key_of(templates, stack, props.get("KmsKeyId"))
                if key and not account_root_manages(key_statements(templates, key)):
                    yield (
                        stack,
                        ("Resources", lid, "Properties", "KmsKeyId"),
                        (f"the policy of key {key[1]} does not let the account's IAM roles use it"),
                    )


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
