"""A fault soak of the Connect consumer service: ten calls through one consumer task
(``service.serve``) with the ordinary faults injected at random, then a SIGTERM and a new task that
resumes them.

Everything on loopback: SQS, DynamoDB and EventBridge in moto's server (their real conditions,
visibility and receipt handles), the KVS stand-in (GetMedia), the real bridge and the fake vLLM.
Faults, from a seeded generator, at the boundaries the service owns:

- SQS: duplicate deliveries (copies of call messages), refused ChangeMessageVisibility calls;
- DynamoDB: ``TransactionConflict`` on the final + checkpoint transactions;
- EventBridge: throttled entries (``FailedEntryCount`` with ``ThrottlingException``, as PutEvents
  answers them);
- the endpoint: streams reset mid-call (a send fails as on a dropped connection, after the stream's
  first done);
- a SIGTERM to the task half way through the calls, and a new task that takes them over.

Checked: every call ended (``ENDED`` in the table, one ``Call Ended`` event), every final stored and
published exactly once, no segment missing (each track's finals tile the call), nothing left in the
queue. The figures (faults injected, time taken) are printed; the generator is seeded, but which
fault lands where depends on the tasks' interleaving, so the counts vary a little from run to run
(two runs: 163 s and 163 s, 9-15 stream resets, 6-12 conflicts, about 2,350 throttled entries,
92-103 refused visibility changes).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from connect_consumer import mkv, service
from connect_consumer.sink import CALL_ENDED, SEGMENT, AwsSink, Segment
from tests.unit.services.connect_consumer.connect_testkit import (
    assert_tiles,
    media,
    servers,
    speech_like,
)
from voice_client.realtime import TransportClosed, WebSocketTransport
from voice_devtools.fake_kvs import FRAGMENT_S, FakeCall

pytestmark = [pytest.mark.timeout(600), pytest.mark.starts_first]

SEED = 7
CALLS = 10
CALL_S = 80.0  # seconds of audio a call
# seconds of audio that exist until the first task is stopped (the calls are live): a generation
HELD_S = 40.0
# ends at a quiet point after 30 s (machine.GENERATION_TARGET_S), so its first finals come after 30
# s
DUPLICATES = 4
CONFLICT_RATE = 0.15
THROTTLE_RATE = 0.1
VISIBILITY_ERROR_RATE = 0.2
RESET_RATE = 0.3  # of streams, each reset once after its first transcription.done
BUS, TABLE = "soak-bus", "soak-table"


@pytest.fixture
def moto_url():
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


class Faults:
    """The seeded faults and what was injected (the figures printed at the end)."""

    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.injected: Counter[str] = Counter()

    def roll(self, kind: str, rate: float) -> bool:
        if self.rng.random() < rate:
            self.injected[kind] += 1
            return True
        return False


class FaultySqs:
    """The SQS client with refused ChangeMessageVisibility calls (never a stop's return to
    visibility 0: the soak checks that the new task takes the calls at once)."""

    def __init__(self, client, faults: Faults) -> None:
        self.client, self.faults = client, faults

    def receive_message(self, **kwargs):
        return self.client.receive_message(**kwargs)

    def change_message_visibility(self, **kwargs):
        if kwargs["VisibilityTimeout"] and self.faults.roll(
            "visibility refused", VISIBILITY_ERROR_RATE
        ):
            raise ClientError(
                {"Error": {"Code": "InternalError", "Message": "injected"}},
                "ChangeMessageVisibility",
            )
        return self.client.change_message_visibility(**kwargs)

    def delete_message(self, **kwargs):
        return self.client.delete_message(**kwargs)

    def send_message(self, **kwargs):
        return self.client.send_message(**kwargs)


def faulty_sink(
    session, moto_url: str, owner: str, faults: Faults, published: list[dict]
) -> AwsSink:
    """An AwsSink whose transactions meet conflicts and whose PutEvents entries are throttled;
    ``published`` gets every entry EventBridge accepted."""
    sink = AwsSink(
        session,
        bus_name=BUS,
        table_name=TABLE,
        endpoint_url=moto_url,
        owner=owner,
        sleep=lambda seconds: time.sleep(min(seconds, 0.01)),
    )
    transact, put_events = sink.client.transact_write_items, sink.events.put_events

    def conflicting(**kwargs):
        if faults.roll("transaction conflict", CONFLICT_RATE):
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "injected"},
                    "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
                },
                "TransactWriteItems",
            )
        return transact(**kwargs)

    def throttled(**kwargs):
        results, accepted = [], []
        for entry in kwargs["Entries"]:
            if faults.roll("event throttled", THROTTLE_RATE):
                results.append({"ErrorCode": "ThrottlingException", "ErrorMessage": "injected"})
            else:
                results.append({"EventId": str(len(published))})
                accepted.append(entry)
        if accepted:
            put_events(Entries=accepted)
            published.extend(accepted)
        return {"FailedEntryCount": len(kwargs["Entries"]) - len(accepted), "Entries": results}

    sink.client.transact_write_items, sink.events.put_events = conflicting, throttled
    return sink


class ResettingTransport:
    """A stream that, if chosen, resets once after its first ``transcription.done`` (a later send
    fails as on a dropped connection): never twice before a done, which the client would rightly
    give up on."""

    def __init__(self, inner, faults: Faults) -> None:
        self.inner, self.faults = inner, faults
        self.armed = faults.rng.random() < RESET_RATE
        self.dones = 0
        self.sends_after_done = 0

    async def send_text(self, text: str) -> None:
        if self.armed and self.dones and '"input_audio_buffer.append"' in text:
            self.sends_after_done += 1
            if self.sends_after_done >= 3:
                self.armed = False
                self.faults.injected["stream reset"] += 1
                await self.inner.close()
                raise TransportClosed("connection reset (injected)")
        await self.inner.send_text(text)

    async def receive_text(self):
        text = await self.inner.receive_text()
        if text is not None and '"transcription.done"' in text:
            self.dones += 1
        return text

    async def close(self) -> None:
        await self.inner.close()


def create_queue_bus_and_table(session, moto_url: str) -> tuple[Any, str]:
    """The calls' queue, the transcripts bus and the calls table in moto's server; returns the SQS
    client and the queue's URL."""
    sqs = session.client("sqs", endpoint_url=moto_url)
    queue_url = sqs.create_queue(QueueName="soak-calls", Attributes={"VisibilityTimeout": "120"})[
        "QueueUrl"
    ]
    session.client("events", endpoint_url=moto_url).create_event_bus(Name=BUS)
    session.client("dynamodb", endpoint_url=moto_url).create_table(
        TableName=TABLE,
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
    return sqs, queue_url


def status(reader: AwsSink, contact: str) -> str:
    """The call's status in the table (``ENDED`` once it ended), or empty."""
    item = reader.table.get_item(
        Key={"ContactId": contact, "Item": "CALL"}, ConsistentRead=True
    ).get("Item")
    return (item or {}).get("Status", "")


def reached(reader: AwsSink, contact: str) -> float:
    """How far into the call (seconds) the stored finals of both tracks reach."""
    items = reader.segments(contact)
    return min(
        max((float(i["EndS"]) for i in items if i["Speaker"] == track), default=0.0)
        for track in mkv.CONNECT_TRACKS
    )


def send_calls(sqs, queue_url: str, calls: list[FakeCall], faults: Faults) -> None:
    """One message per call, then :data:`DUPLICATES` copies of random ones."""
    bodies = [
        json.dumps(
            {
                "contactId": c.contact_id,
                "streamArn": c.stream_arn,
                "startFragmentNumber": c.number(0),
            }
        )
        for c in calls
    ]
    for body in bodies + faults.rng.sample(bodies, DUPLICATES):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    faults.injected["duplicate delivery"] += DUPLICATES


def queue_is_empty(sqs, queue_url: str) -> bool:
    """No message left in the queue, visible or in flight."""
    return (
        sum(
            int(v)
            for v in sqs.get_queue_attributes(
                QueueUrl=queue_url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )["Attributes"].values()
        )
        == 0
    )


async def until(condition) -> None:
    """Wait until ``condition()`` (run in a thread) holds."""
    async with asyncio.timeout(300):  # a liveness bound
        while not await asyncio.to_thread(condition):
            await asyncio.sleep(0.2)


def check_every_call_whole_and_once(
    reader: AwsSink, published: list[dict], duration: float
) -> None:
    """Every call ended once, each track's finals tile the call, and every final was stored and
    published exactly once."""
    finals = Counter(
        json.loads(entry["Detail"])["segmentId"] + "@" + json.loads(entry["Detail"])["contactId"]
        for entry in published
        if entry["DetailType"] == SEGMENT and json.loads(entry["Detail"])["final"]
    )
    ended = Counter(
        json.loads(entry["Detail"])["contactId"]
        for entry in published
        if entry["DetailType"] == CALL_ENDED
    )
    for i in range(CALLS):
        contact = f"soak-{i}"
        assert status(reader, contact) == "ENDED"
        assert ended[contact] == 1
        items = reader.segments(contact)
        for track in mkv.CONNECT_TRACKS:
            stored = [
                Segment(
                    contact, track, item["Text"], float(item["StartS"]), float(item["EndS"]), True
                )
                for item in items
                if item["Speaker"] == track
            ]
            assert_tiles(
                sorted(stored, key=lambda s: s.start_s), duration
            )  # none missing, none twice
        assert {f"{item['Item']}@{contact}" for item in items} == {
            key for key in finals if key.endswith(f"@{contact}")
        }
    assert set(finals.values()) == {1}  # every final published exactly once


def test_ten_calls_with_faults_a_sigterm_and_a_new_task_end_whole_and_exactly_once(
    moto_url, monkeypatch
):
    faults = Faults()
    metrics: Counter[str] = Counter()
    monkeypatch.setattr(
        service, "emit_metric", lambda name, value, *args, **kwargs: metrics.update({name: 1})
    )
    published: list[dict] = []
    session = boto3.Session(
        aws_access_key_id="soak", aws_secret_access_key="soak", region_name="us-east-1"
    )
    sqs, queue_url = create_queue_bus_and_table(session, moto_url)
    reader = AwsSink(session, bus_name=BUS, table_name=TABLE, endpoint_url=moto_url, owner="reader")
    fragments, held = (
        math.ceil(CALL_S / FRAGMENT_S),
        math.ceil(HELD_S / FRAGMENT_S),
    )  # Connect's ~1.024 s each
    duration = fragments * FRAGMENT_S

    async def main() -> float:
        async with servers() as (url, kvs, _vllm):
            calls = [
                kvs.add(
                    FakeCall(
                        f"soak-{i}",
                        f"soak-stream-{i}",
                        speech_like(duration, i),
                        speech_like(duration, i + 20),
                        limit=held,
                    )
                )
                for i in range(CALLS)
            ]

            async def opener():
                return ResettingTransport(await WebSocketTransport.connect(url), faults)

            send_calls(sqs, queue_url, calls, faults)
            options = {"quiet_s": 600.0}  # a call ends when its stream moves on to the next contact
            began = time.monotonic()

            async def task(owner: str, stop: asyncio.Event) -> None:
                await service.serve(
                    sqs=FaultySqs(sqs, faults),
                    queue_url=queue_url,
                    media=media(kvs),
                    opener=opener,
                    sink=faulty_sink(session, moto_url, owner, faults, published),
                    stop=stop,
                    max_calls=CALLS,
                    receive_wait_s=1,
                    transcriber_options=options,
                    extend_every_s=0.5,
                )

            stop_first = asyncio.Event()
            first = asyncio.create_task(task("task-1", stop_first))
            # Every call has finals on both tracks for its first fragments: the calls are live and
            # half done.
            await until(lambda: all(reached(reader, c.contact_id) >= FRAGMENT_S for c in calls))
            stop_first.set()  # SIGTERM
            faults.injected["sigterm"] += 1
            await first
            for call in (
                calls
            ):  # the rest of each call is produced, then the stream moves on to the next contact
                call.limit, call.then_contact = None, f"after-{call.contact_id}"
            stop_second = asyncio.Event()
            second = asyncio.create_task(task("task-2", stop_second))
            await until(lambda: all(status(reader, c.contact_id) == "ENDED" for c in calls))
            await until(lambda: queue_is_empty(sqs, queue_url))
            stop_second.set()
            await second
            return time.monotonic() - began

    elapsed = asyncio.run(main())
    print(
        f"fault soak: {CALLS} calls of {duration:g} s in {elapsed:.1f} s; faults injected: "
        f"{dict(sorted(faults.injected.items()))}; metrics emitted: {dict(sorted(metrics.items()))}"
    )

    check_every_call_whole_and_once(reader, published, duration)
    for kind in (
        "duplicate delivery",
        "transaction conflict",
        "event throttled",
        "stream reset",
        "sigterm",
    ):
        assert faults.injected[kind] > 0, kind  # each fault happened
