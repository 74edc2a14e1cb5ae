"""The required grants of Lambda, EventBridge, SQS and DynamoDB
(tools/cfn_rules/grants_serverless.py): each rule holds on a template that grants what AWS documents
and fails, naming what is missing, on the same template with the grant taken out
(test_required_grants.py holds them as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.grants_kit import (
    KEY_REF,
    ROLE_ARN,
    ROOT,
    allow,
    found,
    key_with,
    res,
    role_with,
    template,
    without,
)
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import grants_serverless


# ------------------------------------------------------------------------------------------- Lambda
def test_a_function_in_a_vpc_manages_its_network_interfaces():
    tpl = template(
        **role_with(allow(*grants_serverless.LAMBDA_VPC_ACTIONS)),
        Function=res("AWS::Lambda::Function", Role=ROLE_ARN, VpcConfig={"SubnetIds": ["s"]}),
    )
    assert found(grants_serverless.LambdaInVpcRole, tpl) == []
    assert found(
        grants_serverless.LambdaInVpcRole, without(tpl, "Policy", "ec2:DeleteNetworkInterface")
    ) == ["Function runs in a VPC but its role Role does not allow ec2:DeleteNetworkInterface"]


# -------------------------------------------------------------------------------------- EventBridge
EVENTS = {"Service": "events.amazonaws.com"}
SOURCE = {"ArnLike": {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:event-bus/*"}}


DLQ_KEY_REF = {"Fn::GetAtt": ["DlqKey", "Arn"]}


def bus(describe_condition=None) -> dict:
    """An encrypted bus whose DLQ is under a key of its own (the bus's key would refuse it the same
    errors)."""
    describe = allow("kms:DescribeKey", Principal=EVENTS)
    if describe_condition:
        describe["Condition"] = describe_condition
    return template(
        **key_with(
            allow("kms:*", Principal=ROOT),
            describe,
            allow("kms:GenerateDataKey", "kms:Decrypt", Principal=EVENTS, Condition=SOURCE),
        ),
        DlqKey=res(
            "AWS::KMS::Key",
            KeyPolicy={
                "Statement": [
                    allow("kms:*", Principal=ROOT),
                    allow("kms:GenerateDataKey", "kms:Decrypt", Principal=EVENTS),
                ]
            },
        ),
        Bus=res(
            "AWS::Events::EventBus",
            Name="b",
            KmsKeyIdentifier=KEY_REF,
            DeadLetterConfig={"Arn": {"Fn::GetAtt": ["Dlq", "Arn"]}},
        ),
        Dlq=res("AWS::SQS::Queue", KmsMasterKeyId=DLQ_KEY_REF),
        DlqPolicy=res(
            "AWS::SQS::QueuePolicy",
            Queues=[{"Ref": "Dlq"}],
            PolicyDocument={
                "Statement": [
                    allow(
                        "sqs:SendMessage", Principal=EVENTS, resource={"Fn::GetAtt": ["Dlq", "Arn"]}
                    )
                ]
            },
        ),
    )


@pytest.mark.parametrize("action", ["kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"])
def test_an_encrypted_bus_key_lets_eventbridge_describe_encrypt_and_decrypt(action):
    assert found(grants_serverless.EventBusKeyPolicy, bus()) == []
    assert found(grants_serverless.EventBusKeyPolicy, without(bus(), "Key", action)) == [
        f"key Key does not allow events.amazonaws.com {action}"
    ]


def test_describe_key_is_not_conditioned_on_the_bus():
    assert found(grants_serverless.EventBusKeyPolicy, bus(describe_condition=SOURCE)) == [
        "key Key allows events.amazonaws.com kms:DescribeKey only under aws:SourceArn"
    ]


def test_an_encrypted_bus_has_a_standard_dead_letter_queue_eventbridge_may_use():
    assert found(grants_serverless.EncryptedEventBusDeadLetters, bus()) == []
    no_dlq = bus()
    del no_dlq["Resources"]["Bus"]["Properties"]["DeadLetterConfig"]
    assert found(grants_serverless.EncryptedEventBusDeadLetters, no_dlq) == [
        "Bus is encrypted with a customer managed key and has no dead-letter queue"
    ]
    fifo = bus()
    fifo["Resources"]["Dlq"]["Properties"]["FifoQueue"] = True
    assert found(grants_serverless.EncryptedEventBusDeadLetters, fifo) == [
        "Dlq is a FIFO queue; EventBridge DLQs are standard queues"
    ]
    assert found(
        grants_serverless.EncryptedEventBusDeadLetters,
        without(bus(), "DlqPolicy", "sqs:SendMessage"),
    ) == ["the policy of Dlq does not let events.amazonaws.com send to it"]
    no_generate = without(bus(), "DlqKey", "kms:GenerateDataKey")
    assert found(grants_serverless.EncryptedEventBusDeadLetters, no_generate) == [
        "Dlq's key DlqKey does not allow events.amazonaws.com kms:GenerateDataKey"
    ]


def test_a_bus_dead_letter_queue_is_not_under_the_bus_key_nor_an_aws_managed_key():
    """The bus's DLQ takes events on 'the specified customer managed key being disabled or
    missing': under the same key it would be refused too. An AWS managed key's policy cannot let
    EventBridge use it. SQS-managed encryption (no key) holds."""
    same = bus()
    same["Resources"]["Dlq"]["Properties"]["KmsMasterKeyId"] = KEY_REF
    assert found(grants_serverless.EncryptedEventBusDeadLetters, same) == [
        "Dlq is under the bus's own key Key: the key disabled or missing, the errors it is for, "
        "would refuse its messages too"
    ]
    managed = bus()
    managed["Resources"]["Dlq"]["Properties"]["KmsMasterKeyId"] = "alias/aws/sqs"
    assert found(grants_serverless.EncryptedEventBusDeadLetters, managed) == [
        "Dlq is under the AWS managed key alias/aws/sqs, whose policy cannot let "
        "events.amazonaws.com use it"
    ]
    sse_sqs = bus()
    sse_sqs["Resources"]["Dlq"]["Properties"] = {"SqsManagedSseEnabled": True}
    assert found(grants_serverless.EncryptedEventBusDeadLetters, sse_sqs) == []


# ------------------------------------------------------------------------------------------- SQS
# and DynamoDB
def queue_users() -> dict:
    arn = {"Fn::GetAtt": ["Queue", "Arn"]}
    return template(
        **role_with(
            allow("sqs:SendMessage", resource=arn),
            allow("sqs:ReceiveMessage", resource=arn),
            allow("kms:GenerateDataKey", "kms:Decrypt", resource=KEY_REF),
        ),
        Queue=res("AWS::SQS::Queue", KmsMasterKeyId=KEY_REF),
    )


@pytest.mark.parametrize("action", ["kms:GenerateDataKey", "kms:Decrypt"])
def test_a_role_using_an_encrypted_queue_may_use_its_key(action):
    assert found(grants_serverless.SqsKeyForProducersAndConsumers, queue_users()) == []
    assert found(
        grants_serverless.SqsKeyForProducersAndConsumers, without(queue_users(), "Policy", action)
    ) == [f"Role uses queue Queue but may not {action} with its key"]


def test_a_grant_on_another_key_does_not_count():
    tpl = queue_users()
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"][2]["Resource"] = (
        "arn:aws:kms:x:1:key/o"
    )
    assert found(grants_serverless.SqsKeyForProducersAndConsumers, tpl) == [
        "Role uses queue Queue but may not kms:Decrypt, kms:GenerateDataKey with its key"
    ]


def test_a_table_key_lets_dynamodb_create_grants():
    tpl = template(
        **key_with(allow("kms:*", Principal=ROOT)),
        Table=res("AWS::DynamoDB::Table", SSESpecification={"KMSMasterKeyId": KEY_REF}),
    )
    assert found(grants_serverless.DynamoDbTableKey, tpl) == []
    assert found(grants_serverless.DynamoDbTableKey, without(tpl, "Key", "kms:*")) == [
        "the policy of key Key lets no principal use it for DynamoDB"
    ]
