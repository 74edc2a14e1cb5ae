"""Which key the consumers may decrypt the call streams with, as docs/connect.md tells a user who
sets up live media streaming in the console."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Environment, Stack
from aws_cdk.assertions import Template

from constructs_lib.connect.transcription import ConnectTranscription, ConnectTranscriptionProps
from tests.unit.constructs_lib.construct_kit import unit_app

ROOT = Path(__file__).resolve().parents[4]
INSTANCE = "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"
STREAM_KEY = "arn:aws:kms:us-east-1:123456789012:key/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def decrypt_resources(**props) -> list:
    stack = Stack(
        unit_app(), "Connect", env=Environment(account="123456789012", region="us-east-1")
    )
    ConnectTranscription(
        stack,
        "Transcription",
        ConnectTranscriptionProps(
            instance_arn=INSTANCE,
            stream_prefix="voice-live",
            image_directory=str(ROOT),
            image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/consumer:1",
            endpoint_name="voxtral-realtime",
            **props,
        ),
    )
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    return [
        s["Resource"]
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "DecryptCallStreams"
    ]


def test_the_consumers_decrypt_the_streams_with_the_key_named_and_with_none_when_none_is_named():
    assert decrypt_resources(stream_kms_key_arn=STREAM_KEY) == [STREAM_KEY]
    assert (
        decrypt_resources() == []
    )  # public mode, no data key: only an AWS managed key's own policy lets them read
    docs = " ".join((ROOT / "docs" / "connect.md").read_text().split())
    yourself = docs[docs.index("To click it yourself") : docs.index("In `network.mode=vpc`")]
    assert (
        "set `connect.stream_kms_key_arn` to that key's ARN" in yourself
        and "aws/kinesisvideo" in yourself
    )


TOKEN_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:voxtral-token-AbCdEf"
TOKEN_KEY = "arn:aws:kms:us-east-1:123456789012:key/11111111-bbbb-cccc-dddd-eeeeeeeeeeee"


def consumer_statements(**props) -> dict[str, dict]:
    stack = Stack(
        unit_app(), "Connect", env=Environment(account="123456789012", region="us-east-1")
    )
    ConnectTranscription(
        stack,
        "Transcription",
        ConnectTranscriptionProps(
            instance_arn=INSTANCE,
            stream_prefix="voice-live",
            image_directory=str(ROOT),
            image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/consumer:1",
            **props,
        ),
    )
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    return {
        s["Sid"]: s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid")
    }


def test_the_consumers_of_the_ecs_target_read_its_token_and_decrypt_it_with_its_key_through_secrets_manager():  # noqa: E501 (a test's name says what it checks)
    """GetSecretValue of a secret under a customer managed key needs kms:Decrypt on that key
    (Secrets Manager user guide, "Permissions for the KMS key"): without it the consumer's first
    call fails with AccessDeniedException."""
    ecs = {"endpoint_url": "https://voxtral.example.com", "token_secret_arn": TOKEN_SECRET}
    statements = consumer_statements(**ecs, token_secret_kms_key_arn=TOKEN_KEY)
    assert statements["ReadBridgeToken"]["Action"] == "secretsmanager:GetSecretValue"
    assert statements["ReadBridgeToken"]["Resource"] == TOKEN_SECRET
    assert statements["DecryptBridgeToken"]["Action"] == "kms:Decrypt"
    assert statements["DecryptBridgeToken"]["Resource"] == TOKEN_KEY
    assert statements["DecryptBridgeToken"]["Condition"] == {
        "StringEquals": {
            "kms:ViaService": "secretsmanager.us-east-1.amazonaws.com",
            "kms:EncryptionContext:SecretARN": TOKEN_SECRET,
        }
    }
    assert "DecryptBridgeToken" not in consumer_statements(
        **ecs
    )  # the AWS managed key: its own policy lets them


def test_an_instance_of_another_account_is_refused_with_the_accounts_named():
    """Connect invokes the start function for the instance's account (aws:SourceAccount), and the
    association, storage config and flow are made in the deployment's account: an instance elsewhere
    is refused at synth."""
    import pytest

    stack = Stack(
        unit_app(), "Connect", env=Environment(account="210987654321", region="us-east-1")
    )
    with pytest.raises(
        ValueError,
        match=(
            r"connect.instance_arn='arn:aws:connect:us-east-1:123456789012:instance/[0-9a-f-]+': "
            r"the instance is in account 123456789012, this deployment in 210987654321; deploy "
            r"the app in the instance's account"
        ),
    ):
        ConnectTranscription(
            stack,
            "Transcription",
            ConnectTranscriptionProps(
                instance_arn=INSTANCE,
                stream_prefix="voice-live",
                image_directory=str(ROOT),
                image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/consumer:1",
                endpoint_name="voxtral-realtime",
            ),
        )


def start_function_key(**props) -> object:
    stack = Stack(
        unit_app(), "Connect", env=Environment(account="123456789012", region="us-east-1")
    )
    ConnectTranscription(
        stack,
        "Transcription",
        ConnectTranscriptionProps(
            instance_arn=INSTANCE,
            stream_prefix="voice-live",
            image_directory=str(ROOT),
            image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/consumer:1",
            endpoint_name="voxtral-realtime",
            **props,
        ),
    )
    functions = Template.from_stack(stack).find_resources(
        "AWS::Lambda::Function",
        {
            "Properties": {
                "Handler": "index.handler",
                "Description": "Amazon Connect: hands a streaming call to the transcription "
                "consumers",
            }
        },
    )
    (function,) = functions.values()
    return function["Properties"].get("KmsKeyArn")


def test_the_start_function_environment_is_under_the_data_key_when_there_is_one():
    """Under the key that encrypts the queue it names; with no data key (public mode without
    encryption.*), Lambda's own AWS managed key ("Lambda always provides server-side encryption at
    rest", Lambda developer guide, "Securing Lambda environment variables")."""
    assert start_function_key(kms_key_arn=STREAM_KEY) == STREAM_KEY
    assert start_function_key() is None
