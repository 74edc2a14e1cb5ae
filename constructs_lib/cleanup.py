"""The Lambda functions behind the custom resources that let `cdk destroy` finish
(services/handlers/cleanup/): each with its own role (only the statements given plus writing
its own log group), log group and the reasons for the findings a CloudFormation custom resource
handler raises in cdk-nag's and checkov's Lambda checks."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import (
    Duration,
    RemovalPolicy,
    aws_iam as iam,
    aws_kms as kms,
    aws_lambda as lambda_,
    aws_logs as logs,
)
from constructs import Construct

from constructs_lib.nag import CUSTOM_RESOURCE_HANDLER_SKIPS, acknowledge_compliance, skip_checkov
from constructs_lib.sagemaker_endpoint.props import LOG_RETENTION
from constructs_lib.service_code import handler_dir

#: The handlers' code (``services/handlers/cleanup/``): one directory, one module per custom
#: resource, ``cfn_response`` shared.
CLEANUP_HANDLERS_DIR = handler_dir("cleanup")


def cleanup_function(
    scope: Construct,
    construct_id: str,
    *,
    handler: str,
    statements: Sequence[iam.PolicyStatement],
    description: str,
    timeout: Duration,
    key: kms.IKey | None,
    log_retention_days: int = 30,
) -> tuple[lambda_.Function, iam.Role]:
    """``(function, role)``: a Python function ``handler`` (``module.function`` in
    :data:`CLEANUP_HANDLERS_DIR`), outside any VPC (it calls AWS APIs and CloudFormation's response
    URL, which a private VPC may not reach)."""
    log_group = logs.LogGroup(
        scope,
        f"{construct_id}Logs",
        removal_policy=RemovalPolicy.DESTROY,
        encryption_key=key,
        retention=getattr(logs.RetentionDays, LOG_RETENTION[log_retention_days]),
    )
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        description=description[:1000],
    )
    for statement in statements:
        role.add_to_policy(statement)
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn],
        )
    )
    function = lambda_.Function(
        scope,
        construct_id,
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler=handler,
        code=lambda_.Code.from_asset(str(CLEANUP_HANDLERS_DIR), exclude=["__pycache__"]),
        timeout=timeout,
        memory_size=128,
        role=role,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        log_group=log_group,
        description=description[:256],
    )
    skip_checkov(function, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)
    acknowledge_compliance(
        function,
        {
            "LambdaConcurrency": "The handler runs only when CloudFormation creates, updates or "
            "deletes its custom resource; nothing else can invoke it.",
            "LambdaDLQ": "The handler serves a CloudFormation custom resource: a failure fails "
            "the stack operation with its reason, where it must be seen; there is no event to "
            "keep for a retry.",
            "LambdaInsideVPC": "The handler calls only AWS control-plane APIs and "
            "CloudFormation's response URL and handles no inference data; the private VPC may "
            "have no route to either.",
        },
    )
    acknowledge_compliance(
        role,
        {
            "IAMNoInlinePolicy": "The handler's role holds only its own statements (scoped to "
            "this stack's resources) and its log group's; an inline policy belongs to that one "
            "role and goes with it.",
        },
    )
    return function, role
