"""The function an Amazon Connect flow invokes after "Start media streaming": it hands the call to
the consumers.

Input (Connect's Lambda event, "Invoke AWS Lambda function" block):
``Details.ContactData.ContactId`` and ``Details.ContactData.MediaStreams.Customer.Audio.StreamARN``
/ ``.StartFragmentNumber`` (the contact attributes ``$.MediaStreams.Customer.Audio.*``). The call
goes to the consumers' SQS queue (``CALLS_QUEUE_URL``) as ``{contactId, streamArn,
startFragmentNumber, startTimestamp, instanceArn}``. A contact may be queued more than once (a flow
that runs the block twice, a retried invocation; SQS itself delivers at least once): the consumers
deduplicate per contact (a conditional claim on the call in the transcripts table), not this
function.

Only a call of this instance is queued: a well-formed ContactId (a UUID, as Connect writes it), a
Kinesis video stream of the instance's own partition, Region and account (``INSTANCE_ARN``, else the
event's ``InstanceARN``, which must then be in the function's own partition, Region and account)
under ``STREAM_NAME_PREFIX``. Every pattern matches the whole value (``re.fullmatch``: ``$`` would
let a trailing newline through).

The answer is a flat map of strings (Connect reads only that: "the output must be a flat object of
key/value pairs, with values that include only alphanumeric, dash, and underscore characters",
Connect admin guide, "Grant Amazon Connect access to your Lambda functions", and less than 32 KB): a
refusal says why with a code of those characters (:data:`REFUSALS`), the details go to the
function's log. It answers well within the block's timeout (up to 8 s).

It imports nothing of ours (a Lambda asset); tests check it against the example flow's attributes.
"""

from __future__ import annotations

import json
import os
import re

import boto3

STREAM_ARN_PATTERN = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):kinesisvideo:(?P<region>[a-z]{2}(-[a-z]+)+-\d):(?P<account>\d{12}):"
    r"stream/(?P<name>[a-zA-Z0-9_.-]{1,256})/\d{1,20}"
)
"""A Kinesis video stream ARN, matched whole (stream names: 1-256 of [a-zA-Z0-9_.-], CreateStream
API reference; the last part is the stream's creation time in epoch milliseconds)."""
INSTANCE_ARN_PATTERN = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):connect:(?P<region>[a-z]{2}(-[a-z]+)+-\d):(?P<account>\d{12}):"
    r"instance/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
"""An Amazon Connect instance ARN, matched whole (the instance id is a UUID)."""
FUNCTION_ARN_PATTERN = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):lambda:(?P<region>[a-z]{2}(-[a-z]+)+-\d):(?P<account>\d{12}):function:.+"
)
CONTACT_ID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""A ContactId as Connect writes it: a UUID in lower-case hexadecimal, matched whole."""
FRAGMENT_NUMBER_PATTERN = re.compile(r"[0-9]{1,128}")
"""GetMedia StartSelector.AfterFragmentNumber: 1-128 digits, matched whole."""
ANSWER_VALUE_PATTERN = re.compile(r"[A-Za-z0-9_-]*")
"""What a STRING_MAP answer's values may hold (Connect admin guide, see the module docstring)."""
REFUSALS = (
    "missing-field",
    "no-media-streaming",
    "bad-contact-id",
    "bad-stream-arn",
    "bad-fragment-number",
    "bad-instance-arn",
    "other-instance",
    "other-account-region-or-partition",
    "other-stream-prefix",
)
"""The codes of a refusal's ``reason``."""
READS = (
    "Details.ContactData.ContactId",
    "Details.ContactData.InstanceARN",
    "Details.ContactData.MediaStreams.Customer.Audio.StreamARN",
    "Details.ContactData.MediaStreams.Customer.Audio.StartFragmentNumber",
    "Details.ContactData.MediaStreams.Customer.Audio.StartTimestamp",
)
"""The fields of Connect's event this function reads (a test compares them with the example
flow)."""
MAX_LOGGED_CHARS = 300
"""Characters of a refused value written to the log at most (the event's values are of any
length)."""

_sqs = None


class BadEvent(ValueError):
    """A refused event: ``code`` (one of :data:`REFUSALS`) for the answer, the message for the
    log."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _shown(value: str) -> str:
    return repr(value[:MAX_LOGGED_CHARS] + ("..." if len(value) > MAX_LOGGED_CHARS else ""))


def _field(event: dict, path: str) -> str:
    node = event
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise BadEvent(
                "no-media-streaming" if ".MediaStreams." in path else "missing-field",
                f'the Connect event has no {path}; is "Start media streaming" before this block?',
            )
        node = node[part]
    return "" if node is None else str(node)


def _home(instance_arn: str, function_arn: str | None) -> tuple[str, str, str]:
    """The instance's (partition, Region, account), checked against the configured instance and this
    function."""
    configured = os.environ.get("INSTANCE_ARN", "")
    if configured and instance_arn != configured:
        raise BadEvent(
            "other-instance", f"InstanceARN {_shown(instance_arn)} is not this stack's {configured}"
        )
    instance = INSTANCE_ARN_PATTERN.fullmatch(instance_arn)
    if instance is None:
        raise BadEvent(
            "bad-instance-arn", f"InstanceARN {_shown(instance_arn)} is not a Connect instance ARN"
        )
    home = (instance["partition"], instance["region"], instance["account"])
    function = FUNCTION_ARN_PATTERN.fullmatch(function_arn or "")
    if (
        function is not None
        and (function["partition"], function["region"], function["account"]) != home
    ):
        raise BadEvent(
            "other-account-region-or-partition",
            f"InstanceARN {instance_arn} is not in this function's partition, Region and account",
        )
    return home


def call_message(event: dict, function_arn: str | None = None) -> dict:
    """The consumers' message for a Connect event. Raises :class:`BadEvent` naming what is missing
    or wrong."""
    contact_id = _field(event, READS[0])
    instance_arn = _field(event, READS[1])
    stream_arn = _field(event, READS[2])
    fragment = _field(event, READS[3])
    if not CONTACT_ID_PATTERN.fullmatch(contact_id):
        raise BadEvent(
            "bad-contact-id",
            f"ContactId {_shown(contact_id)} is not a contact id (a lower-case UUID)",
        )
    stream = STREAM_ARN_PATTERN.fullmatch(stream_arn)
    if stream is None:
        raise BadEvent(
            "bad-stream-arn", f"StreamARN {_shown(stream_arn)} is not a Kinesis video stream ARN"
        )
    if not FRAGMENT_NUMBER_PATTERN.fullmatch(fragment):
        raise BadEvent(
            "bad-fragment-number",
            f"StartFragmentNumber {_shown(fragment)} must be 1-128 decimal digits",
        )
    home = _home(instance_arn, function_arn)
    if (stream["partition"], stream["region"], stream["account"]) != home:
        raise BadEvent(
            "other-account-region-or-partition",
            f"StreamARN {stream_arn} is not in the instance's partition, Region and account {home}",
        )
    prefix = os.environ.get("STREAM_NAME_PREFIX", "")
    if prefix and not stream["name"].startswith(prefix):
        raise BadEvent(
            "other-stream-prefix",
            f"StreamARN {stream_arn} is not under this instance's prefix {prefix!r}",
        )
    audio = event["Details"]["ContactData"]["MediaStreams"]["Customer"]["Audio"]
    return {
        "contactId": contact_id,
        "streamArn": stream_arn,
        "startFragmentNumber": fragment,
        "startTimestamp": str(audio.get("StartTimestamp") or "")[:64],
        "instanceArn": instance_arn,
    }


def handler(event, context):
    global _sqs
    try:
        message = call_message(event, getattr(context, "invoked_function_arn", None))
    except BadEvent as error:
        print(json.dumps({"level": "ERROR", "refused": error.code, "message": str(error)}))
        return {"transcription": "refused", "reason": error.code}
    if _sqs is None:
        _sqs = boto3.client("sqs", endpoint_url=os.environ.get("SQS_ENDPOINT_URL") or None)
    _sqs.send_message(QueueUrl=os.environ["CALLS_QUEUE_URL"], MessageBody=json.dumps(message))
    return {"transcription": "started", "contactId": message["contactId"]}
