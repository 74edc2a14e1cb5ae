"""The required grants of Amazon Connect (tools/cfn_rules/grants_connect.py): each rule holds on a
template that grants what AWS documents and fails, naming what is missing, on the same template with
the grant taken out (test_required_grants.py holds them as a whole)."""

from __future__ import annotations

from tests.unit.tools.cfn_rules.grants_kit import (
    INSTANCE,
    KEY_REF,
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

import grants_connect


def connect(**extra) -> dict:
    return template(
        **key_with(allow("kms:*", Principal=ROOT)),
        **role_with(
            allow(
                "kinesisvideo:GetMedia", resource="arn:aws:kinesisvideo:us-east-1:1:stream/voice*/*"
            ),
            allow("kms:Decrypt", resource=KEY_REF),
        ),
        Storage=res(
            "AWS::Connect::InstanceStorageConfig",
            KinesisVideoStreamConfig={
                "Prefix": "voice",
                "EncryptionConfig": {"EncryptionType": "KMS", "KeyId": KEY_REF},
            },
        ),
        Function=res("AWS::Lambda::Function", Role="r"),
        Invoke=res(
            "AWS::Lambda::Permission",
            FunctionName={"Fn::GetAtt": ["Function", "Arn"]},
            Principal="connect.amazonaws.com",
            SourceArn=INSTANCE,
            SourceAccount="123456789012",
        ),
        Association=res(
            "AWS::Connect::IntegrationAssociation",
            InstanceId=INSTANCE,
            IntegrationType="LAMBDA_FUNCTION",
            IntegrationArn={"Fn::GetAtt": ["Function", "Arn"]},
        ),
        Flow={
            "Type": "AWS::Connect::ContactFlow",
            "DependsOn": ["Association"],
            "Properties": {
                "Content": {"Fn::Sub": ["{...}", {"F": {"Fn::GetAtt": ["Function", "Arn"]}}]}
            },
        },
        **extra,
    )


def test_stream_readers_may_decrypt_with_the_stream_key():
    assert found(grants_connect.KinesisVideoStreamKeyForConsumers, connect()) == []
    assert found(
        grants_connect.KinesisVideoStreamKeyForConsumers,
        without(connect(), "Policy", "kms:Decrypt"),
    ) == ["Role reads Connect's streams (voice) but may not kms:Decrypt with their key"]
    assert found(
        grants_connect.KinesisVideoStreamKeyForConsumers, without(connect(), "Key", "kms:*")
    ) == ["the policy of stream key Key does not delegate to IAM"]


def test_a_stream_reader_on_every_resource_may_decrypt_too():
    """A GetMedia grant on "*" reads Connect's streams as well as one on their ARNs."""
    broad = without(connect(), "Policy", "kms:Decrypt")
    broad["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"][0]["Resource"] = "*"
    assert found(grants_connect.KinesisVideoStreamKeyForConsumers, broad) == [
        "Role reads Connect's streams (voice) but may not kms:Decrypt with their key"
    ]


def test_a_flow_naming_the_function_in_its_fn_sub_text_waits_for_the_association():
    """``${Function.Arn}`` in the Fn::Sub text names the function as a GetAtt would."""
    early = connect()
    del early["Resources"]["Flow"]["DependsOn"]
    early["Resources"]["Flow"]["Properties"]["Content"] = {"Fn::Sub": '{"Arn": "${Function.Arn}"}'}
    assert found(grants_connect.ConnectFunctionAssociation, early) == [
        "Flow invokes Function but is not created after its association Association"
    ]


def test_an_associated_function_lets_connect_invoke_it_and_flows_wait_for_the_association():
    assert found(grants_connect.ConnectFunctionAssociation, connect()) == []
    other = connect()
    other["Resources"]["Invoke"]["Properties"]["SourceAccount"] = "210987654321"
    assert found(grants_connect.ConnectFunctionAssociation, other) == [
        f"Function's permission for {INSTANCE} names another SourceAccount than the instance's "
        "123456789012"
    ]
    none = connect()
    del none["Resources"]["Invoke"]
    assert found(grants_connect.ConnectFunctionAssociation, none) == [
        f"no permission lets connect.amazonaws.com invoke Function for {INSTANCE}"
    ]
    early = connect()
    del early["Resources"]["Flow"]["DependsOn"]
    assert found(grants_connect.ConnectFunctionAssociation, early) == [
        "Flow invokes Function but is not created after its association Association"
    ]
