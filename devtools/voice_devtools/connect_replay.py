"""Play a stereo recording as a live Amazon Connect call through the whole transcription path,
offline, and hand both speakers' transcripts over as they arrive (:func:`replay_call`; ``voicectl
connect-replay CALL.wav``, :mod:`voicectl.commands.connect_replay`, prints them).

What runs (all on 127.0.0.1): the Kinesis Video Streams stand-in (:mod:`voice_devtools.fake_kvs`:
the recording's left channel as ``AUDIO_FROM_CUSTOMER``, the right as ``AUDIO_TO_CUSTOMER``, in real
Matroska fragments released at ``speed`` x real time), moto (SQS, EventBridge, DynamoDB), the
start function invoked with the event Connect sends, and the consumer, which reads the call with
boto3's GetDataEndpoint/GetMedia and streams each track to the target given as for ``voicectl
transcribe`` (:class:`voice_client.transcribe.TranscriptionTarget`: a SageMaker endpoint, ``make
local``'s front door, or a container's bridge).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import math
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voice_client.audio import AudioError
from voice_client.errors import UsageError
from voice_client.transcribe import TranscriptionTarget, open_target

if TYPE_CHECKING:
    from connect_consumer.sink import Segment

# The stack's start function, read from the installed handlers package (services/handlers/, which
# the construct library deploys) without importing it.
START_FUNCTION = (
    Path(importlib.util.find_spec("handlers").origin).parent  # type: ignore[union-attr]
    / "connect_start"
    / "index.py"
)
REGION = "us-east-1"
BUS = "voice-connect"  # name prefixes: each replay adds its own run id
TABLE = "voice-connect-transcripts"


def load_start_function():
    """The stack's start function (:data:`START_FUNCTION`), loaded as a module of its own."""
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


@dataclass(frozen=True)
class ReplayOutcome:
    """How a replayed call ended.

    Attributes:
        contact_id: the call's ContactId (made up for the replay).
        reason: what the consumer reported at the call's end (a text such as ``the stream ended``,
            ``failed: ...``, or the exception that ended it).
    """

    contact_id: str
    reason: object

    @property
    def failed(self) -> bool:
        """Whether the call ended in a failure."""
        return isinstance(self.reason, BaseException) or str(self.reason).startswith("failed:")


def check_quiet_s(quiet_s: float) -> None:
    """Raise :class:`UsageError` unless ``quiet_s`` (seconds without a new fragment before GetMedia
    is reopened) is finite and above GetMedia's idle timeout
    (:data:`voice_devtools.fake_kvs.READ_TIMEOUT_S`)."""
    from voice_devtools import fake_kvs

    if not (math.isfinite(quiet_s) and quiet_s > 0):
        raise UsageError(
            f"--quiet-s must be a finite number of seconds above 0, got {quiet_s:g}: "
            "GetMedia is reopened after that long without a new fragment (nan or inf would "
            "never do it)"
        )
    if quiet_s <= fake_kvs.READ_TIMEOUT_S:
        # GetMedia ends an idle payload after its own timeout, which is how a call's end is seen: a
        # shorter stall guard takes every call's end for a stalled stream and fails the call after
        # its retries.
        raise UsageError(
            f"--quiet-s must be above GetMedia's {fake_kvs.READ_TIMEOUT_S:g} s idle timeout, got "
            f"{quiet_s:g}: a call's end would be taken for a stalled stream"
        )


def load_call(path: str | Path) -> tuple[bytes, bytes]:
    """The customer's and the agent's audio of a stereo recording (PCM16 at 8 kHz, as
    :func:`voice_devtools.fake_kvs.load_stereo_call` returns them), read before anything starts.

    Raises:
        UsageError: ``path`` is not a file, or not a stereo recording with samples.
    """
    from voice_devtools.fake_kvs import load_stereo_call

    if not Path(path).is_file():
        raise UsageError(f"{path}: " + ("not a file" if Path(path).exists() else "no such file"))
    try:
        return load_stereo_call(path)
    except AudioError as error:
        raise UsageError(str(error)) from error


def replay_call(
    customer: bytes,
    agent: bytes,
    target: TranscriptionTarget,
    *,
    speed: float = 1.0,
    quiet_s: float = 5.0,
    on_started: Callable[[dict[str, Any]], None] = lambda answer: None,
    on_segment: Callable[[Segment], None] = lambda segment: None,
) -> ReplayOutcome:
    """Replay a call (``customer`` and ``agent``: PCM16 at 8 kHz, as :func:`load_call` returns them)
    through moto's server, started here on 127.0.0.1 and stopped at the end, and return how it
    ended.

    Args:
        target: where the consumer streams each track.
        speed: release the fragments at this multiple of real time (0: all at once).
        quiet_s: reopen GetMedia after this long without a new fragment (:func:`check_quiet_s`).
        on_started: called with the start function's answer, once Connect's event is handled.
        on_segment: called with each final transcript segment of either speaker, as it arrives
            (while the consumer runs, ``sys.stdout`` is redirected to ``os.devnull``: a callback
            that prints keeps its own stream).
    """
    from moto.server import ThreadedMotoServer

    # moto's server would log every request it serves.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        return asyncio.run(
            replay(
                f"http://{host}:{port}",
                customer,
                agent,
                target,
                speed=speed,
                quiet_s=quiet_s,
                on_started=on_started,
                on_segment=on_segment,
            )
        )
    finally:
        server.stop()


async def replay(
    moto_url: str,
    customer: bytes,
    agent: bytes,
    target: TranscriptionTarget,
    *,
    speed: float,
    quiet_s: float,
    on_started: Callable[[dict[str, Any]], None],
    on_segment: Callable[[Segment], None],
) -> ReplayOutcome:
    """Replay the call against moto's server at ``moto_url`` (:func:`replay_call`)."""
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
        FakeCall(contact_id, f"connect-live-{contact_id[:8]}", customer, agent, speed=speed)
    )
    function = load_start_function()
    function._sqs = sqs
    with _env(CALLS_QUEUE_URL=queue_url):
        answer = function.handler(connect_event(contact_id, call.stream_arn, call.number(0)), None)
    on_started(answer)
    stop = asyncio.Event()
    outcome: dict[str, object] = {}

    def done(contact: str, reason: object) -> None:
        outcome["reason"] = reason
        stop.set()

    try:
        async with open_target(target) as opener:
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
                    on_segment=on_segment,
                    on_call_done=done,
                    receive_wait_s=1,
                    transcriber_options={"quiet_s": quiet_s},
                )
    finally:
        await kvs.stop()
    return ReplayOutcome(contact_id, outcome.get("reason"))


@contextlib.contextmanager
def _env(**values: str):
    """Set the environment variables ``values`` for the body, then restore them."""
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
