"""The start function: Connect's documented event in, a call message on the queue (moto SQS), and
the example flow's blocks consistent with what the function reads."""

from __future__ import annotations

import importlib.util
import json

import boto3
import pytest
from moto import mock_aws

from connect_consumer.call import CallRequest
from tests.conftest import ROOT

FLOW = (
    ROOT / "services" / "handlers" / "connect_start" / "example_flow.json"
)  # the stack's ExampleFlow
STREAM_ARN = (
    "arn:aws:kinesisvideo:us-east-1:123456789012:stream/connect-live-contact-1/1700000000000"
)


def load_function():
    spec = importlib.util.spec_from_file_location(
        "connect_start", ROOT / "services" / "handlers" / "connect_start" / "index.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def connect_event(**audio):
    """The event an "Invoke AWS Lambda function" block sends after "Start media streaming" (Connect
    admin guide, "Grant Amazon Connect access to your Lambda functions": Details.ContactData with
    MediaStreams.Customer.Audio)."""
    return {
        "Name": "ContactFlowEvent",
        "Details": {
            "Parameters": {},
            "ContactData": {
                "ContactId": "0a1b2c3d-1111-2222-3333-444455556666",
                "Channel": "VOICE",
                "InitiationMethod": "INBOUND",
                "InstanceARN": "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-"
                "3333-4444-555555555555",
                "Attributes": {},
                "MediaStreams": {
                    "Customer": {
                        "Audio": {
                            "StreamARN": STREAM_ARN,
                            "StartFragmentNumber": "91343852333181432392682062607743920146264001",
                            "StartTimestamp": "1700000000000",
                            **audio,
                        }
                    }
                },
            },
        },
    }


@mock_aws
def test_a_connect_event_becomes_a_call_message_the_consumer_accepts(monkeypatch):
    queue = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="calls")["QueueUrl"]
    monkeypatch.setenv("CALLS_QUEUE_URL", queue)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("STREAM_NAME_PREFIX", "connect-live")
    function = load_function()
    assert function.handler(connect_event(), Context()) == {
        "transcription": "started",
        "contactId": "0a1b2c3d-1111-2222-3333-444455556666",
    }
    messages = boto3.client("sqs", region_name="us-east-1").receive_message(QueueUrl=queue)[
        "Messages"
    ]
    call = CallRequest.from_message(json.loads(messages[0]["Body"]))
    assert call == CallRequest(
        "0a1b2c3d-1111-2222-3333-444455556666",
        STREAM_ARN,
        "91343852333181432392682062607743920146264001",
        "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555",
    )


INSTANCE_ARN = (
    "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"
)


def with_contact(contact_id: str) -> dict:
    event = connect_event()
    event["Details"]["ContactData"]["ContactId"] = contact_id
    return event


def with_instance(instance_arn: str) -> dict:
    event = connect_event()
    event["Details"]["ContactData"]["InstanceARN"] = instance_arn
    return event


class Context:
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:start-transcription"


@pytest.mark.parametrize(
    "event, expected",
    [
        (connect_event(StreamARN="arn:aws:s3:::bucket"), "bad-stream-arn"),
        (
            connect_event(StreamARN=STREAM_ARN + "\n"),
            "bad-stream-arn",
        ),  # `$` let a trailing newline through
        (connect_event(StartFragmentNumber="12ab"), "bad-fragment-number"),
        (
            connect_event(StartFragmentNumber="91343852333181432392682062607743920146264001\n"),
            "bad-fragment-number",
        ),
        (
            connect_event(StreamARN=STREAM_ARN.replace("connect-live", "other")),
            "other-stream-prefix",
        ),
        (
            connect_event(StreamARN=STREAM_ARN.replace("123456789012", "210987654321")),
            "other-account-region-or-partition",
        ),  # another account's stream
        (
            connect_event(StreamARN=STREAM_ARN.replace("us-east-1", "eu-west-1")),
            "other-account-region-or-partition",
        ),
        (
            connect_event(StreamARN=STREAM_ARN.replace("arn:aws:", "arn:aws-cn:")),
            "other-account-region-or-partition",
        ),
        (with_contact("not-a-contact"), "bad-contact-id"),
        (with_contact("0a1b2c3d-1111-2222-3333-444455556666\n"), "bad-contact-id"),
        (with_contact("x" * 300_000), "bad-contact-id"),
        (with_instance("arn:aws:connect:us-east-1:123456789012:instance/bad"), "bad-instance-arn"),
        (
            with_instance(INSTANCE_ARN.replace("123456789012", "210987654321")),
            "other-account-region-or-partition",
        ),
    ],
)
def test_a_bad_event_is_refused_with_a_flat_answer_naming_the_problem(
    monkeypatch, capsys, event, expected
):
    """Refused calls: Connect is told why in characters a STRING_MAP answer allows; the log says
    what was wrong."""
    monkeypatch.setenv("CALLS_QUEUE_URL", "unused")
    monkeypatch.setenv("STREAM_NAME_PREFIX", "connect-live")
    function = load_function()
    answer = function.handler(event, Context())
    assert (
        answer == {"transcription": "refused", "reason": expected} and expected in function.REFUSALS
    )
    assert all(function.ANSWER_VALUE_PATTERN.fullmatch(value) for value in answer.values())
    (logged,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (
        logged["refused"] == expected and len(logged["message"]) < 1000
    )  # a huge value is shown cut


def test_the_configured_instance_is_the_only_one_accepted(monkeypatch):
    monkeypatch.setenv("CALLS_QUEUE_URL", "unused")
    monkeypatch.setenv("INSTANCE_ARN", INSTANCE_ARN.replace("-555555555555", "-000000000000"))
    answer = load_function().handler(connect_event(), Context())
    assert answer == {"transcription": "refused", "reason": "other-instance"}


def test_an_answer_holds_only_characters_connect_allows_in_a_string_map(monkeypatch):
    function = load_function()
    for reason in function.REFUSALS:
        assert function.ANSWER_VALUE_PATTERN.fullmatch(reason)
    assert function.CONTACT_ID_PATTERN.fullmatch("0a1b2c3d-1111-2222-3333-444455556666")
    assert function.ANSWER_VALUE_PATTERN.fullmatch(
        "0a1b2c3d-1111-2222-3333-444455556666"
    )  # "started" carries it


def test_an_event_without_media_streams_names_the_missing_block(monkeypatch, capsys):
    monkeypatch.setenv("CALLS_QUEUE_URL", "unused")
    event = connect_event()
    del event["Details"]["ContactData"]["MediaStreams"]
    answer = load_function().handler(event, None)
    assert answer == {"transcription": "refused", "reason": "no-media-streaming"}
    assert (
        'is "Start media streaming" before this block?'
        in json.loads(capsys.readouterr().out)["message"]
    )


def test_the_example_flow_starts_streaming_before_it_invokes_the_function_that_reads_its_attributes():  # noqa: E501 (a test's name says what it checks)
    flow = json.loads(FLOW.read_text())
    actions = {action["Identifier"]: action for action in flow["Actions"]}
    order, current = [], flow["StartAction"]
    while current and current not in order:
        order.append(current)
        current = actions[current]["Transitions"].get("NextAction")
    types = [actions[name]["Type"] for name in order]
    # The flow language's action behind the "Start media streaming" block is
    # UpdateContactMediaStreamingBehavior (Amazon Connect API reference, "Flow language",
    # UpdateContactMediaStreamingBehavior: MediaStreamingState "Enabled" or "Disabled",
    # MediaStreamType "Audio" only, Participants "Customer" only, MediaDirections "From" and "To");
    # there is no StartMediaStreaming action, and CreateContactFlow refuses content naming one.
    start_type = "UpdateContactMediaStreamingBehavior"
    assert types.index(start_type) < types.index("InvokeLambdaFunction")
    start = actions[order[types.index(start_type)]]["Parameters"]
    assert start["MediaStreamingState"] == "Enabled" and start["MediaStreamType"] == "Audio"
    assert start["Participants"] == [
        {"ParticipantType": "Customer", "MediaDirections": ["To", "From"]}
    ]  # both tracks
    # TransferContactToQueue "places a contact that is not already in a queue into the contact's
    # TargetQueue"; an inbound call has none until UpdateContactTargetQueue ("Set working queue")
    # sets it (flow language reference): without it every call would take the transfer's error
    # branch.
    assert types.index("UpdateContactTargetQueue") < types.index("TransferContactToQueue")
    target = actions[order[types.index("UpdateContactTargetQueue")]]
    assert target["Parameters"] == {
        "QueueId": "${QueueArn}"
    }  # connect.queue_arn, substituted by the stack
    transfer = actions[order[types.index("TransferContactToQueue")]]
    assert transfer["Parameters"] == {}  # "No parameters are expected"
    assert {e["ErrorType"] for e in transfer["Transitions"]["Errors"]} == {
        "QueueAtCapacity",
        "NoMatchingError",
    }
    # Transcription is best effort: a call whose streaming or hand-off fails (live media streaming
    # not enabled on the instance, the function refusing or timing out) still reaches the queue,
    # never a hang-up.
    for kind in (start_type, "InvokeLambdaFunction"):
        errors = actions[order[types.index(kind)]]["Transitions"]["Errors"]
        assert {e["NextAction"] for e in errors} == {target["Identifier"]}, kind
    invoke = actions[order[types.index("InvokeLambdaFunction")]]["Parameters"]
    # Connect gives an "Invoke AWS Lambda function" block at most 8 s; the function answers a flat
    # string map.
    assert int(invoke["InvocationTimeLimitSeconds"]) <= 8
    assert invoke["ResponseValidation"]["ResponseType"] == "STRING_MAP"
    reads = load_function().READS
    # Every attribute the function reads is Connect's own contact data or the Start media streaming
    # block's $.MediaStreams.Customer.Audio.* attributes (documented in "Contact attributes for live
    # media streaming").
    for path in reads:
        assert path.startswith("Details.ContactData.")
        attribute = "$." + path.removeprefix("Details.ContactData.")
        assert attribute in {
            "$.ContactId",
            "$.InstanceARN",
            "$.MediaStreams.Customer.Audio.StreamARN",
            "$.MediaStreams.Customer.Audio.StartFragmentNumber",
            "$.MediaStreams.Customer.Audio.StartTimestamp",
        }
