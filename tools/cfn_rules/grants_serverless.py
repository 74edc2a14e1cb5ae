"""The required grants of the serverless services (E9006-E9010): a Lambda function in a VPC,
an encrypted EventBridge bus and its dead-letter queue, an encrypted SQS queue's producers and
consumers, an encrypted DynamoDB table (:mod:`required_grants` says what they are).
"""

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
    AppRule,
    account_root_manages,
    allows,
    covers,
    key_of,
    key_statements,
    role_of,
    role_statements,
    service_statements,
)

#: Lambda developer guide, "Giving Lambda functions access to resources in an Amazon VPC" (execution
#: role).
LAMBDA_VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
)
EVENTS = "events.amazonaws.com"


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
                role = role_of(templates, stack, props.get("Role"))
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
                key = key_of(templates, stack, props.get("KmsKeyIdentifier"))
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
                key = key_of(templates, stack, queue_key)
                bus_key = key_of(templates, stack, props.get("KmsKeyIdentifier"))
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
                        if covers(s.get("Resource"), queue_arn) and s.get("Resource") != "*"
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
                key = key_of(
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


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
