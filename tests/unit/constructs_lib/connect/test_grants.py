"""constructs_lib/connect/grants.py: the consumers' task role on its own (a bare role, bus, table
and queue): which statements, on what, and each key through the one service that uses it."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb, aws_events as events, aws_iam as iam, aws_sqs as sqs
from aws_cdk.assertions import Template
from constructs import Construct

from constructs_lib.connect.grants import grant_consumers, kms_via
from constructs_lib.connect.props import ConnectTranscriptionProps
from tests.conftest import ROOT
from tests.unit.constructs_lib.construct_kit import bare_stack

INSTANCE = "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"
KEY = "arn:aws:kms:us-east-1:123456789012:key/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:voxtral-token-AbCdEf"
SECRET_KEY = "arn:aws:kms:us-east-1:123456789012:key/11111111-bbbb-cccc-dddd-eeeeeeeeeeee"


def granted(**props) -> dict[str, dict[str, dict]]:
    """``{policy logical id: {Sid: statement}}`` of the stack after grant_consumers."""
    stack = bare_stack()
    role = iam.Role(stack, "TaskRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
    table = dynamodb.Table(
        stack,
        "Table",
        partition_key=dynamodb.Attribute(name="ContactId", type=dynamodb.AttributeType.STRING),
    )
    grant_consumers(
        Construct(stack, "Transcription"),
        role,
        ConnectTranscriptionProps(
            instance_arn=INSTANCE, stream_prefix="voice-live", image_directory=str(ROOT), **props
        ),
        events.EventBus(stack, "Bus"),
        table,
        sqs.Queue(stack, "Calls"),
    )
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    return {
        logical_id: {
            s.get("Sid", ""): s for s in policy["Properties"]["PolicyDocument"]["Statement"]
        }
        for logical_id, policy in policies.items()
    }


def test_the_sagemaker_target_gets_its_own_policy_on_the_endpoint_in_lower_case():
    policies = granted(endpoint_name="Voxtral-Realtime")
    invoke = next(
        p
        for logical_id, p in policies.items()
        if logical_id.startswith("TranscriptionInvokeVoxtral")
    )
    assert invoke["InvokeVoxtral"]["Action"] == "sagemaker:InvokeEndpointWithBidirectionalStream"
    assert invoke["InvokeVoxtral"]["Resource"]["Fn::Join"][1][-1] == (
        ":sagemaker:us-east-1:123456789012:endpoint/voxtral-realtime"
    )
    (default,) = [
        p for logical_id, p in policies.items() if logical_id.startswith("TaskRoleDefaultPolicy")
    ]
    assert default["ReadCallStreams"]["Resource"]["Fn::Join"][1][-1] == (
        ":kinesisvideo:us-east-1:123456789012:stream/voice-live*/*"
    )
    assert "ReadBridgeToken" not in default


def test_every_key_is_used_through_its_service_only():
    statements = {
        sid: s
        for p in granted(endpoint_name="voxtral", kms_key_arn=KEY).values()
        for sid, s in p.items()
    }
    vias = {
        sid: statements[sid]["Condition"]["StringEquals"]["kms:ViaService"]
        for sid in ("DecryptCallStreams", "UseTableKey", "DecryptCalls")
    }
    assert vias == {
        "DecryptCallStreams": "kinesisvideo.us-east-1.amazonaws.com",
        "UseTableKey": "dynamodb.us-east-1.amazonaws.com",
        "DecryptCalls": "sqs.us-east-1.amazonaws.com",
    }
    assert {statements[sid]["Resource"] for sid in vias} == {KEY}


def test_the_ecs_target_reads_its_token_and_decrypts_it_for_that_secret_only():
    statements = {
        sid: s
        for p in granted(
            endpoint_url="http://internal-voxtral.example:80",
            token_secret_arn=SECRET,
            token_secret_kms_key_arn=SECRET_KEY,
        ).values()
        for sid, s in p.items()
    }
    assert "InvokeVoxtral" not in statements
    assert statements["ReadBridgeToken"]["Resource"] == SECRET
    assert statements["DecryptBridgeToken"]["Condition"]["StringEquals"] == {
        "kms:ViaService": "secretsmanager.us-east-1.amazonaws.com",
        "kms:EncryptionContext:SecretARN": SECRET,
    }


def test_kms_via_names_the_service_in_the_stacks_region():
    assert kms_via(bare_stack(), "sqs") == "sqs.us-east-1.amazonaws.com"
