"""The function an Amazon Connect flow invokes after "Start media streaming": it hands the call to the consumers.

Input (Connect's Lambda event, "Invoke AWS Lambda function" block): ``Details.ContactData.ContactId`` and
``Details.ContactData.MediaStreams.Customer.Audio.StreamARN`` / ``.StartFragmentNumber`` (the contact attributes
``$.MediaStreams.Customer.Audio.*``). The call goes to the consumers' SQS queue (``CALLS_QUEUE_URL``) as
``{contactId, streamArn, startFragmentNumber, startTimestamp, instanceArn}``, deduplicated per contact. The answer
is a flat map of strings (Connect reads only that: "the output must be a flat object of key/value pairs"), and it
answers well within the block's timeout (up to 8 s).

It imports nothing of ours (a Lambda asset); tests check it against the example flow's attributes.
"""

from __future__ import annotations

import json
import os
import re

import boto3

STREAM_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:kinesisvideo:[a-z0-9-]+:\d{12}:stream/[a-zA-Z0-9_.-]{1,256}/\d+$")
"""A Kinesis video stream ARN (stream names: 1-256 of [a-zA-Z0-9_.-], CreateStream API reference)."""
FRAGMENT_NUMBER_PATTERN = re.compile(r"^[0-9]{1,128}$")
"""GetMedia StartSelector.AfterFragmentNumber: 1-128 digits."""
READS = ("Details.ContactData.ContactId", "Details.ContactData.InstanceARN",
         "Details.ContactData.MediaStreams.Customer.Audio.StreamARN",
         "Details.ContactData.MediaStreams.Customer.Audio.StartFragmentNumber",
         "Details.ContactData.MediaStreams.Customer.Audio.StartTimestamp")
"""The fields of Connect's event this function reads (a test compares them with the example flow)."""

_sqs = None


class BadEvent(ValueError):
    pass


def _field(event: dict, path: str) -> str:
    node = event
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise BadEvent(f"the Connect event has no {path}; is \"Start media streaming\" before this block?")
        node = node[part]
    return "" if node is None else str(node)


def call_message(event: dict) -> dict:
    """The consumers' message for a Connect event. Raises :class:`BadEvent` naming what is missing or wrong."""
    contact_id = _field(event, READS[0])
    stream_arn = _field(event, READS[2])
    fragment = _field(event, READS[3])
    if not STREAM_ARN_PATTERN.match(stream_arn):
        raise BadEvent(f"StreamARN {stream_arn!r} is not a Kinesis video stream ARN")
    if not FRAGMENT_NUMBER_PATTERN.match(fragment):
        raise BadEvent(f"StartFragmentNumber {fragment!r} must be 1-128 decimal digits")
    prefix = os.environ.get("STREAM_NAME_PREFIX", "")
    if prefix and not stream_arn.split(":stream/", 1)[1].startswith(prefix):
        raise BadEvent(f"StreamARN {stream_arn!r} is not under this instance's prefix {prefix!r}")
    audio = event["Details"]["ContactData"]["MediaStreams"]["Customer"]["Audio"]
    return {"contactId": contact_id, "streamArn": stream_arn, "startFragmentNumber": fragment,
            "startTimestamp": str(audio.get("StartTimestamp") or ""),
            "instanceArn": str(event["Details"]["ContactData"].get("InstanceARN") or "")}


def handler(event, context):
    global _sqs
    try:
        message = call_message(event)
    except BadEvent as error:
        print(json.dumps({"level": "ERROR", "message": str(error)}))
        return {"transcription": "refused", "reason": str(error)[:256]}
    if _sqs is None:
        _sqs = boto3.client("sqs", endpoint_url=os.environ.get("SQS_ENDPOINT_URL") or None)
    _sqs.send_message(QueueUrl=os.environ["CALLS_QUEUE_URL"], MessageBody=json.dumps(message))
    return {"transcription": "started", "contactId": message["contactId"]}
