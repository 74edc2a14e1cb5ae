"""The Connect consumers' task role, least privilege: the instance's call streams (by prefix), the
stream key (through Kinesis Video Streams only), the transcript bus and table, the calls queue and
the Voxtral target (the SageMaker endpoint, or the ECS service's token secret). Each key action is
limited to the service that uses the key (``kms:ViaService``), because the data key may also be the
stream key (``connect.stream_kms_key_arn`` unset).
"""

from __future__ import annotations

from typing import cast

from aws_cdk import (
    Acknowledgment,
    CfnResource,
    Stack,
    Validations,
    aws_dynamodb as dynamodb,
    aws_events as events,
    aws_iam as iam,
    aws_sqs as sqs,
)
from constructs import Construct

from constructs_lib.connect.props import ConnectTranscriptionProps
from constructs_lib.nag import nag_render
from constructs_lib.sagemaker_endpoint.props import INVOKE_BIDIRECTIONAL


def grant_consumers(
    scope: Construct,
    role: iam.IRole,
    props: ConnectTranscriptionProps,
    bus: events.EventBus,
    table: dynamodb.Table,
    queue: sqs.Queue,
) -> None:
    """Least privilege for ``role``: the instance's streams (by prefix), the stream key (through
    Kinesis Video Streams only), the bus, the table, the queue, the endpoint. The endpoint's policy
    (``InvokeVoxtral``) is made in ``scope``."""
    stack = Stack.of(scope)
    streams = stack.format_arn(
        service="kinesisvideo", resource="stream", resource_name=f"{props.stream_prefix}*/*"
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="ReadCallStreams",
            actions=["kinesisvideo:GetDataEndpoint", "kinesisvideo:GetMedia"],
            resources=[streams],
        )
    )
    Validations.of(role).acknowledge(
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, streams)}]",
            reason="Connect creates one stream per live call under the instance's prefix, "
            "named at run time: the read is limited to that prefix (and to GetDataEndpoint "
            "and GetMedia).",
        )
    )
    stream_key = props.stream_kms_key_arn or props.kms_key_arn
    if stream_key:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DecryptCallStreams",
                actions=["kms:Decrypt"],
                resources=[stream_key],
                conditions={"StringEquals": {"kms:ViaService": kms_via(stack, "kinesisvideo")}},
            )
        )
    bus.grant_put_events_to(role)
    # UpdateItem: a call's claim and status (conditional writes that keep the item's other
    # attributes).
    table.grant(
        role, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:Query"
    )
    if props.kms_key_arn:
        # The table's key, through DynamoDB only (Table.grant names no key actions;
        # grant_read_write_data would add them unconditioned, which would void
        # DecryptCallStreams' condition when this key is the stream key).
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="UseTableKey",
                resources=[props.kms_key_arn],
                actions=[
                    "kms:Decrypt",
                    "kms:Encrypt",
                    "kms:GenerateDataKey",
                    "kms:DescribeKey",
                ],
                conditions={"StringEquals": {"kms:ViaService": kms_via(stack, "dynamodb")}},
            )
        )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="CommitSegments",
            actions=["dynamodb:ConditionCheckItem"],
            resources=[table.table_arn],
        )
    )
    # The queue's consume actions as CDK's grant_consume_messages lists them, and its key
    # through SQS only: that grant would add an unconditioned kms:Decrypt on the data key, which
    # may be the stream key too, and so void DecryptCallStreams' condition (every decrypt of the
    # stream key goes through a service).
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="ConsumeCalls",
            resources=[queue.queue_arn],
            actions=[
                "sqs:ReceiveMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:GetQueueUrl",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "sqs:SendMessage",
            ],
        )
    )  # SendMessage: a message handed on at 12 h
    if props.kms_key_arn:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DecryptCalls",
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[props.kms_key_arn],
                conditions={"StringEquals": {"kms:ViaService": kms_via(stack, "sqs")}},
            )
        )
    if props.endpoint_name:
        invoke = iam.Policy(
            scope,
            "InvokeVoxtral",
            statements=[
                iam.PolicyStatement(
                    sid="InvokeVoxtral",
                    actions=[INVOKE_BIDIRECTIONAL],
                    resources=[
                        stack.format_arn(
                            service="sagemaker",
                            resource="endpoint",
                            resource_name=props.endpoint_name.lower(),
                        )
                    ],
                )
            ],
        )
        invoke.attach_to_role(role)  # type: ignore[arg-type]
        # cfn-lint's IAM action list predates bidirectional streaming (W3037); the action is
        # documented in the InvokeEndpointWithBidirectionalStream API reference.
        cast(CfnResource, invoke.node.default_child).add_metadata(
            "cfn-lint", {"config": {"ignore_checks": ["W3037"]}}
        )
    elif props.token_secret_arn:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadBridgeToken",
                actions=["secretsmanager:GetSecretValue"],
                resources=[props.token_secret_arn],
            )
        )
        if props.token_secret_kms_key_arn:
            # GetSecretValue of a secret under a customer managed key needs kms:Decrypt on that
            # key for the caller (Secrets Manager user guide, "Secret encryption and
            # decryption", "Permissions for the KMS key"); Secrets Manager calls Decrypt with
            # the secret's ARN as encryption context (SecretARN).
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="DecryptBridgeToken",
                    actions=["kms:Decrypt"],
                    resources=[props.token_secret_kms_key_arn],
                    conditions={
                        "StringEquals": {
                            "kms:ViaService": kms_via(stack, "secretsmanager"),
                            "kms:EncryptionContext:SecretARN": props.token_secret_arn,
                        }
                    },
                )
            )


def kms_via(stack: Stack, service: str) -> str:
    """The kms:ViaService value of an AWS service in the stack's region (AWS KMS developer guide,
    "kms:ViaService": ``SERVICE.REGION.amazonaws.com``)."""
    return f"{service}.{stack.region}.amazonaws.com"
