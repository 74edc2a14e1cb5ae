"""``voicectl connect-replay CALL.wav``: play a stereo recording as a live Amazon Connect call
through the whole transcription path, offline, and print both speakers' transcripts as they arrive.

What runs (all on 127.0.0.1): the Kinesis Video Streams stand-in (:mod:`voice_devtools.fake_kvs`:
the recording's left channel as ``AUDIO_FROM_CUSTOMER``, the right as ``AUDIO_TO_CUSTOMER``, in real
Matroska fragments released at ``--speed`` x real time), moto (SQS, EventBridge, DynamoDB), the
start function invoked with the event Connect sends, and the consumer, which reads the call with
boto3's GetDataEndpoint/GetMedia and streams each track to the endpoint given as for ``voicectl
transcribe``: ``--endpoint`` (a SageMaker endpoint, or ``make local``'s front door with
``--endpoint-url``) or ``--url`` (a container's bridge, the ECS target's bearer-token URL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import logging
import math
import os
import sys
import uuid
from pathlib import Path

from voice_client.audio import AudioError
from voice_client.errors import UsageError
from voice_client.transcribe import (
    add_target_arguments,
    open_target,
    validate_speed,
    validate_target_arguments,
)

#: What ``--help`` says (the module docstring's second paragraph, in the user's words: no
#: reStructuredText).
DESCRIPTION = (
    "What runs, all on 127.0.0.1: a Kinesis Video Streams stand-in (the recording's left channel "
    "as AUDIO_FROM_CUSTOMER, the right as AUDIO_TO_CUSTOMER, in real Matroska fragments released "
    "at --speed x real time), moto (SQS, EventBridge, DynamoDB), the start function invoked with "
    "the event Connect sends, and the consumer, which reads the call with "
    "GetDataEndpoint/GetMedia and streams each track to the endpoint given as for voicectl "
    "transcribe: --endpoint (a SageMaker endpoint, or make local's front door with "
    "--endpoint-url) or --url (a container's bridge, the ECS target's bearer-token URL)."
)

# The stack's start function, read from the installed construct library without importing it (CDK).
START_FUNCTION = (
    Path(importlib.util.find_spec("constructs_lib").origin).parent  # type: ignore[union-attr]
    / "connect"
    / "start_function"
    / "index.py"
)
REGION = "us-east-1"
BUS = "voice-connect"  # name prefixes: each replay adds its own run id
TABLE = "voice-connect-transcripts"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "connect-replay",
        help="play a stereo recording as a live Amazon Connect call and print both speakers' "
        "transcripts",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "file",
        metavar="CALL.wav",
        help="a stereo recording: left = the customer, right = the agent",
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="release the call's fragments at this multiple of real time; 0: all at once "
        "(default: 1.0, a live call)",
    )
    parser.add_argument(
        "--quiet-s",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="reopen GetMedia after this long without a new fragment on an open stream (a stall; "
        "the call itself ends when its stream ends; default: 5)",
    )
    parser.set_defaults(func=run)


def load_start_function():
    spec = importlib.util.spec_from_file_location("connect_start_function", START_FUNCTION)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def connect_event(contact_id: str, stream_arn: str, fragment: str) -> dict:
    """The event an "Invoke AWS Lambda function" block sends after "Start media streaming"."""
    return {
        "Name": "ContactFlowEvent",
        "Details": {
            "Parameters": {},
            "ContactData": {
                "ContactId": contact_id,
                "Channel": "VOICE",
                "InitiationMethod": "INBOUND",
                "Attributes": {},
                "InstanceARN": "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-"
                "3333-4444-555555555555",
                "MediaStreams": {
                    "Customer": {
                        "Audio": {
                            "StreamARN": stream_arn,
                            "StartFragmentNumber": fragment,
                            "StartTimestamp": "1700000000000",
                        }
                    }
                },
            },
        },
    }


def print_segment(segment, out=None) -> None:
    who = "customer" if segment.speaker == "AUDIO_FROM_CUSTOMER" else "agent"
    print(
        f"[{segment.start_s:7.1f}-{segment.end_s:7.1f} s] {who:8}: {segment.text}",
        file=out or sys.stdout,
        flush=True,
    )


async def replay(args: argparse.Namespace, moto_url: str, customer: bytes, agent: bytes) -> int:
    """Replay the call (``customer`` and ``agent``: PCM16 at 8 kHz, as :func:`load_stereo_call`
    returns them)."""
    import boto3

    from connect_consumer.kvs import KvsMedia
    from connect_consumer.service import serve
    from connect_consumer.sink import AwsSink
    from voice_devtools.fake_kvs import FakeCall, FakeKvs

    session = boto3.Session(
        aws_access_key_id="AKIALOCAL", aws_secret_access_key="local", region_name=REGION
    )
    # moto's in-process server keeps its resources in the process's global backends, which outlive
    # the server: a second replay in the same process (a test run, a notebook) would find the first
    # one's bus and fail to create it. Each replay names its own.
    run_id = uuid.uuid4().hex[:8]
    bus, table = f"{BUS}-{run_id}", f"{TABLE}-{run_id}"
    sqs = session.client("sqs", endpoint_url=moto_url)
    queue_url = sqs.create_queue(QueueName=f"voice-connect-calls-{run_id}")["QueueUrl"]
    session.client("events", endpoint_url=moto_url).create_event_bus(Name=bus)
    session.client("dynamodb", endpoint_url=moto_url).create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": "ContactId", "KeyType": "HASH"},
            {"AttributeName": "Item", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "ContactId", "AttributeType": "S"},
            {"AttributeName": "Item", "AttributeType": "S"},
        ],
    )
    kvs = await FakeKvs().start()
    contact_id = str(uuid.uuid4())
    call = kvs.add(
        FakeCall(contact_id, f"connect-live-{contact_id[:8]}", customer, agent, speed=args.speed)
    )
    function = load_start_function()
    function._sqs = sqs
    with _env(CALLS_QUEUE_URL=queue_url):
        answer = function.handler(connect_event(contact_id, call.stream_arn, call.number(0)), None)
    print(f"start function: {json.dumps(answer)}", file=sys.stderr)
    stop = asyncio.Event()
    outcome: dict[str, object] = {}

    def done(contact: str, reason: object) -> None:
        outcome["reason"] = reason
        stop.set()

    out = sys.stdout
    try:
        async with open_target(args) as opener:
            # The consumer's CloudWatch embedded-metric lines (stdout, for the awslogs driver in
            # ECS) mean nothing here and would be mixed into the transcript: dropped.
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):  # noqa: ASYNC230 (devnull)
                sink = AwsSink(session, bus_name=bus, table_name=table, endpoint_url=moto_url)
                await serve(
                    sqs=sqs,
                    queue_url=queue_url,
                    sink=sink,
                    media=KvsMedia(session, endpoint_url=kvs.url),
                    opener=opener,
                    stop=stop,
                    max_calls=1,
                    on_segment=lambda segment: print_segment(segment, out),
                    on_call_done=done,
                    receive_wait_s=1,
                    transcriber_options={"quiet_s": args.quiet_s},
                )
    finally:
        await kvs.stop()
    reason = outcome.get("reason")
    print(f"call {contact_id} ended: {reason}", file=sys.stderr)
    return 1 if isinstance(reason, BaseException) or str(reason).startswith("failed:") else 0


@contextlib.contextmanager
def _env(**values: str):
    import os

    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(args: argparse.Namespace) -> int:
    validate_target_arguments(args)
    validate_speed(args.speed) if args.speed else None
    if not (math.isfinite(args.quiet_s) and args.quiet_s > 0):
        raise UsageError(
            f"--quiet-s must be a finite number of seconds above 0, got {args.quiet_s:g}: "
            "GetMedia is reopened after that long without a new fragment (nan or inf would "
            "never do it)"
        )
    from voice_devtools import fake_kvs

    if args.quiet_s <= fake_kvs.READ_TIMEOUT_S:
        # GetMedia ends an idle payload after its own timeout, which is how a call's end is seen: a
        # shorter stall guard takes every call's end for a stalled stream and fails the call after
        # its retries.
        raise UsageError(
            f"--quiet-s must be above GetMedia's {fake_kvs.READ_TIMEOUT_S:g} s idle timeout, got "
            f"{args.quiet_s:g}: a call's end would be taken for a stalled stream"
        )
    if not Path(args.file).is_file():
        raise UsageError(
            f"{args.file}: " + ("not a file" if Path(args.file).exists() else "no such file")
        )
    from voice_devtools.fake_kvs import load_stereo_call

    try:  # read before anything starts: a recording it cannot use is refused at once
        customer, agent = load_stereo_call(args.file)
    except AudioError as error:
        raise UsageError(str(error)) from error
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(
        logging.ERROR
    )  # moto's server would log every request it serves

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        return asyncio.run(replay(args, f"http://{host}:{port}", customer, agent))
    finally:
        server.stop()
