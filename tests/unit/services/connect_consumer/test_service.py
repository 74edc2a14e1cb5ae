"""services/connect_consumer/service.py: the consumer task's metrics as embedded metric format
lines, and the endpoint the environment names (the ECS target: its URL with the bearer token from
Secrets Manager, against moto and a WebSocket server on loopback). Taking calls from the queue:
``serve`` with a stand-in queue, and against moto's SQS and DynamoDB (duplicate deliveries, the
visibility loop's errors, SQS's 12-hour ceiling, a SIGTERM during a poll, a call taken over from a
stopped task), and as voicectl connect-replay runs it
(tests/unit/devtools/test_connect_replay.py)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import boto3
import pytest
from moto import mock_aws
from websockets.asyncio.server import serve as serve_websocket

from connect_consumer import service


def test_a_metric_is_one_embedded_metric_format_line(capsys):
    service.emit_metric("MillisBehindNow", 250.0, "Milliseconds", Track="AUDIO_FROM_CUSTOMER")
    service.emit_metric("ActiveCalls", 3)
    with_dimension, plain = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert with_dimension["_aws"]["CloudWatchMetrics"] == [
        {
            "Namespace": "VoiceConnect",
            "Dimensions": [["Track"]],
            "Metrics": [{"Name": "MillisBehindNow", "Unit": "Milliseconds"}],
        }
    ]
    assert (
        with_dimension["MillisBehindNow"] == 250.0
        and with_dimension["Track"] == "AUDIO_FROM_CUSTOMER"
    )
    assert plain["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]] and plain["ActiveCalls"] == 3
    assert isinstance(plain["_aws"]["Timestamp"], int)


def test_sqs_limits_are_kept():
    assert service.RECEIVE_WAIT_S <= 20 and service.RECEIVE_MAX <= 10  # ReceiveMessage's maximums
    assert service.VISIBILITY_EXTEND_S < service.VISIBILITY_TIMEOUT_S <= 12 * 3600
    # A message is handed on before SQS refuses its extension (12 h from its receipt), a round late
    # at worst.
    assert service.MAX_VISIBILITY_S == 12 * 3600
    assert service.VISIBILITY_TIMEOUT_S + service.VISIBILITY_EXTEND_S < service.HAND_ON_MARGIN_S
    # A live task's claim never runs out between two renewals, nor before its message's visibility
    # does.
    from connect_consumer.sink import LEASE_S

    assert LEASE_S >= 2 * service.VISIBILITY_EXTEND_S and LEASE_S >= service.VISIBILITY_TIMEOUT_S


def test_the_ecs_target_is_opened_with_the_bearer_token_of_the_secret(monkeypatch):
    seen: list[str | None] = []

    def record(connection, request):
        seen.append(request.headers.get("Authorization"))

    async def scenario(session) -> None:
        async with serve_websocket(
            lambda connection: connection.wait_closed(), "127.0.0.1", 0, process_request=record
        ) as server:
            port = server.sockets[0].getsockname()[1]
            monkeypatch.setenv(
                "ENDPOINT_URL", f"ws://127.0.0.1:{port}/invocations-bidirectional-stream"
            )
            async with service.opener_from_env(session) as opener:
                transport = await opener()
                await transport.close()

    monkeypatch.delenv("ENDPOINT_NAME", raising=False)
    with mock_aws():
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        )
        arn = session.client("secretsmanager").create_secret(
            Name="bridge-token", SecretString="t0ken"
        )["ARN"]
        monkeypatch.setenv("TOKEN_SECRET_ARN", arn)
        asyncio.run(asyncio.wait_for(scenario(session), 10))
    assert seen == ["Bearer t0ken"]


class ClaimingStore:
    """The in-memory store with the sink's claims (one owner; the claims' conditions are tested
    against moto)."""

    def __new__(cls):
        from tests.unit.services.connect_consumer.connect_testkit import MemoryStore

        store = MemoryStore()

        async def claim_call(contact_id: str) -> str:
            return (
                "finished"
                if store.calls.get(contact_id, [""])[-1] in ("ENDED", "FAILED")
                else "claimed"
            )

        async def release_call(contact_id: str) -> None:
            pass

        store.claim_call, store.release_call = claim_call, release_call
        return store


class FakeQueue:
    """The SQS calls ``serve`` makes (from threads), over a list of call messages: each receive
    hands out what is queued, up to MaxNumberOfMessages; deleted receipt handles are recorded."""

    def __init__(self, contacts: list[str]) -> None:
        self.messages = [
            {
                "Body": json.dumps(
                    {
                        "contactId": contact,
                        "streamArn": f"arn:aws:kinesisvideo:{contact}",
                        "startFragmentNumber": "1",
                    }
                ),
                "ReceiptHandle": f"receipt-{contact}",
            }
            for contact in contacts
        ]
        self.deleted: list[str] = []
        self.visibility: list[tuple[str, int]] = []

    def receive_message(self, *, QueueUrl, WaitTimeSeconds, MaxNumberOfMessages, VisibilityTimeout):
        batch, self.messages[:MaxNumberOfMessages] = self.messages[:MaxNumberOfMessages], []
        if not batch:
            time.sleep(0.01)  # an empty long poll, shortened
        return {"Messages": batch}

    def delete_message(self, *, QueueUrl, ReceiptHandle):
        self.deleted.append(ReceiptHandle)

    def change_message_visibility(self, *, QueueUrl, ReceiptHandle, VisibilityTimeout):
        self.visibility.append((ReceiptHandle, VisibilityTimeout))


@pytest.fixture
def held_calls(monkeypatch) -> tuple[list[str], dict[str, asyncio.Event], list[int]]:
    """``serve`` with calls that end when the test says: yields (contacts whose call started, in
    order; each call's end event; one entry per wait of a full task for a freed slot or the
    stop)."""
    ends: dict[str, asyncio.Event] = {}
    started: list[str] = []
    full_waits: list[int] = []

    class HeldCall:  # a CallTranscriber whose call ends when the test says
        def __init__(self, call, **_options) -> None:
            self.contact_id, self.announce = call.contact_id, True

        async def run(self) -> str:
            started.append(self.contact_id)
            await ends.setdefault(self.contact_id, asyncio.Event()).wait()
            return "quiet"

    first_of = service._first_of

    async def counted_first_of(*waits):
        full_waits.append(1)
        await first_of(*waits)

    monkeypatch.setattr(service, "CallTranscriber", HeldCall)
    monkeypatch.setattr(service, "_first_of", counted_first_of)
    monkeypatch.setattr(service, "emit_metric", lambda *args, **kwargs: None)
    return started, ends, full_waits


async def until(condition) -> None:
    async with asyncio.timeout(10):  # a liveness bound, not a speed target
        while not condition():
            await asyncio.sleep(0.01)


def test_a_full_task_takes_the_next_call_when_one_ends_and_a_stop_while_full_ends_it(held_calls):
    """max_calls=1 and two calls queued: the second is not taken while the first runs (it stays in
    the queue, the scaling signal), and the full task waits once, for the first call's end (not on a
    timer, nor spinning); it takes the second call once the first ends; and a stop while the task is
    full ends ``serve`` with the running call cancelled (its message left for another task)."""
    started, ends, full_waits = held_calls
    queue = FakeQueue(["first", "second"])

    async def scenario() -> None:
        stop = asyncio.Event()
        serving = asyncio.create_task(
            service.serve(
                sqs=queue,
                queue_url="q",
                sink=ClaimingStore(),
                media=None,
                opener=None,
                stop=stop,
                max_calls=1,
                receive_wait_s=1,
            )
        )
        await until(lambda: started == ["first"] and full_waits)
        for _ in range(20):
            await asyncio.sleep(0)  # a task that did not wait on the event would loop meanwhile
        assert len(full_waits) == 1
        assert [json.loads(m["Body"])["contactId"] for m in queue.messages] == [
            "second"
        ]  # left in the queue
        ends.setdefault("first", asyncio.Event()).set()
        await until(lambda: started == ["first", "second"] and len(full_waits) == 2)
        for _ in range(20):
            await asyncio.sleep(0)
        assert (
            len(full_waits) == 2
        )  # full again: one wait, though the event was set by the first call's end
        assert queue.deleted == ["receipt-first"] and queue.messages == []
        stop.set()
        async with asyncio.timeout(10):
            await serving
        assert queue.deleted == [
            "receipt-first"
        ]  # the cancelled call's message comes back to another task ...
        assert ("receipt-second", 0) in queue.visibility  # ... at once

    asyncio.run(scenario())


class RefusedDelete(FakeQueue):
    def delete_message(self, *, QueueUrl, ReceiptHandle):
        raise RuntimeError(
            "An error occurred (AccessDenied) when calling the DeleteMessage operation"
        )


@pytest.mark.parametrize("failing", ["DeleteMessage", "on_call_done"])
def test_a_full_task_takes_the_next_call_even_when_finishing_the_last_one_failed(
    held_calls, failing
):
    """The slot of a call that ended is free even if deleting its message or the caller's callback
    failed (the message then comes back after its visibility timeout): a full task must not wait for
    it until it is stopped."""
    started, ends, _full_waits = held_calls
    queue = (RefusedDelete if failing == "DeleteMessage" else FakeQueue)(["first", "second"])

    def on_call_done(contact: str, reason: object) -> None:
        if failing == "on_call_done":
            raise RuntimeError("the callback failed")

    async def scenario() -> None:
        stop = asyncio.Event()
        serving = asyncio.create_task(
            service.serve(
                sqs=queue,
                queue_url="q",
                sink=ClaimingStore(),
                media=None,
                opener=None,
                stop=stop,
                max_calls=1,
                receive_wait_s=1,
                on_call_done=on_call_done,
            )
        )
        try:
            await until(lambda: started == ["first"])
            ends.setdefault("first", asyncio.Event()).set()
            await until(lambda: started == ["first", "second"])
        finally:
            stop.set()
            async with asyncio.timeout(10):
                await serving

    asyncio.run(scenario())


# ---- against moto: the queue's and the table's real semantics (visibility, receipt handles,
# conditional claims) ----

BUS, TABLE = "voice-connect", "transcripts"


@pytest.fixture
def aws(monkeypatch):
    """moto's SQS queue (120 s visibility, as the stack sets it), the transcripts table and bus;
    yields (session, queue URL)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        )
        url = session.client("sqs").create_queue(
            QueueName="calls", Attributes={"VisibilityTimeout": "120"}
        )["QueueUrl"]
        session.client("dynamodb").create_table(
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
        session.client("events").create_event_bus(Name=BUS)
        yield session, url


def aws_sink(session, owner: str, **options):
    from connect_consumer.sink import AwsSink

    return AwsSink(session, bus_name=BUS, table_name=TABLE, owner=owner, **options)


def body(contact: str) -> str:
    return json.dumps(
        {
            "contactId": contact,
            "streamArn": f"arn:aws:kinesisvideo:us-east-1:1:stream/p-{contact}/1",
            "startFragmentNumber": "1",
        }
    )


def queue_counts(session, url) -> tuple[int, int]:
    """(visible, in flight) messages of the queue."""
    attributes = session.client("sqs").get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


class Recording:
    """The SQS client, with each call recorded as (operation, receipt or body) and faults injected
    per receipt."""

    def __init__(self, client, fail: dict[str, int] | None = None) -> None:
        self.client, self.calls, self.fail = client, [], fail or {}
        self.receipts: dict[str, str] = {}  # receipt handle -> contact

    def receive_message(self, **kwargs):
        response = self.client.receive_message(**kwargs)
        for message in response.get("Messages", []):
            self.receipts[message["ReceiptHandle"]] = json.loads(message["Body"])["contactId"]
        return response

    def _call(self, operation: str, **kwargs):
        contact = self.receipts.get(
            kwargs.get("ReceiptHandle", ""),
            json.loads(kwargs.get("MessageBody", "{}")).get("contactId"),
        )
        self.calls.append((operation, contact, kwargs.get("VisibilityTimeout")))
        if self.fail.get(f"{operation}:{contact}", 0) != 0:
            self.fail[f"{operation}:{contact}"] -= 1
            raise RuntimeError(
                f"An error occurred (InternalError) when calling the {operation} operation"
            )
        return getattr(self.client, operation)(**kwargs)

    def change_message_visibility(self, **kwargs):
        return self._call("change_message_visibility", **kwargs)

    def delete_message(self, **kwargs):
        return self._call("delete_message", **kwargs)

    def send_message(self, **kwargs):
        return self._call("send_message", **kwargs)

    def count(self, operation: str, contact: str, visibility: int | None = None) -> int:
        return sum(
            1
            for call in self.calls
            if call[:2] == (operation, contact) and (visibility is None or call[2] == visibility)
        )


def serving(sqs, url, sink, stop, **options):
    return asyncio.create_task(
        service.serve(
            sqs=sqs,
            queue_url=url,
            sink=sink,
            media=None,
            opener=None,
            stop=stop,
            receive_wait_s=0,
            **options,
        )
    )


def test_a_duplicate_runs_the_call_once_every_copy_is_deleted_and_a_late_copy_never_runs_it_again(
    aws, held_calls
):
    """SQS standard delivers at least once: two copies of a call's message, the second never in
    place of the first (it was: the first copy came back after its visibility timeout and ran the
    finished call again)."""
    session, url = aws
    started, ends, _ = held_calls
    sqs = Recording(session.client("sqs"))

    async def scenario() -> None:
        stop = asyncio.Event()
        for _ in range(2):
            sqs.client.send_message(QueueUrl=url, MessageBody=body("dup"))
        task = serving(sqs, url, aws_sink(session, "task-a"), stop)
        await until(lambda: started == ["dup"] and queue_counts(session, url) == (0, 2))
        ends.setdefault("dup", asyncio.Event()).set()
        await until(lambda: queue_counts(session, url) == (0, 0))  # both copies deleted
        sqs.client.send_message(QueueUrl=url, MessageBody=body("dup"))  # a copy after the end
        await until(
            lambda: queue_counts(session, url) == (0, 0) and sqs.count("delete_message", "dup") == 3
        )
        stop.set()
        await task

    asyncio.run(scenario())
    assert started == ["dup"]


def test_the_visibility_loop_survives_errors_and_reports_each_message_alone(
    aws, held_calls, caplog
):
    """A refused ChangeMessageVisibility (and a refused SendMessage) for one call's message no
    longer stops the loop for every call of the task: the other call's message is still extended
    every round, each error is logged with its call."""
    session, url = aws
    started, _ends, _ = held_calls
    sqs = Recording(
        session.client("sqs"), fail={"change_message_visibility:bad": -1}
    )  # always refused

    async def scenario() -> None:
        stop = asyncio.Event()
        for contact in ("bad", "good"):
            sqs.client.send_message(QueueUrl=url, MessageBody=body(contact))
        task = serving(sqs, url, aws_sink(session, "task-a"), stop, extend_every_s=0.05)
        await until(
            lambda: (
                sqs.count("change_message_visibility", "good", 120) >= 3
                and sqs.count("change_message_visibility", "bad", 120) >= 3
            )
        )
        stop.set()
        await task

    asyncio.run(scenario())
    assert sorted(started) == ["bad", "good"]
    failures = [
        r.getMessage()
        for r in caplog.records
        if "change_message_visibility failed" in r.getMessage()
    ]
    assert failures and all(message.startswith("call bad: ") for message in failures)


def test_a_message_near_sqs_12_hour_ceiling_is_handed_on_and_the_call_is_not_run_twice(
    aws, held_calls
):
    """A call longer than 12 hours: its message cannot stay invisible past 12 h from its receipt
    (SQS refuses the extension), so it is handed on: a new copy sent, the old one deleted. The copy,
    received by another task, waits on standby (the call's claim holds) and is deleted when the call
    ends; no task runs the call twice."""
    session, url = aws
    started, ends, _ = held_calls
    sqs = Recording(session.client("sqs"))
    now = [0.0]

    async def scenario() -> None:
        stop = asyncio.Event()
        sqs.client.send_message(QueueUrl=url, MessageBody=body("long"))
        a = serving(
            sqs, url, aws_sink(session, "task-a"), stop, extend_every_s=0.05, clock=lambda: now[0]
        )
        await until(lambda: started == ["long"])
        b = serving(
            sqs, url, aws_sink(session, "task-b"), stop, extend_every_s=0.05, clock=lambda: now[0]
        )
        await asyncio.sleep(0.2)
        assert sqs.count("send_message", "long") == 0
        now[0] = (
            service.MAX_VISIBILITY_S - service.HAND_ON_MARGIN_S - service.VISIBILITY_TIMEOUT_S + 1
        )
        await until(
            lambda: (
                sqs.count("send_message", "long") == 1
                and queue_counts(session, url) == (0, 1)
                and sqs.count("delete_message", "long") == 1
            )
        )
        await asyncio.sleep(
            0.2
        )  # rounds in which the copy is held (task a: joins its call; task b: standby)
        assert started == ["long"]
        ends.setdefault("long", asyncio.Event()).set()
        await until(lambda: queue_counts(session, url) == (0, 0))
        stop.set()
        await asyncio.gather(a, b)

    asyncio.run(scenario())
    assert started == ["long"]
    assert sqs.count("send_message", "long") == 1 and sqs.count("delete_message", "long") == 2


def test_on_a_stop_nothing_new_starts_and_every_message_held_comes_back_at_once(aws, held_calls):
    """SIGTERM during a long poll: the messages that poll returns are not started but made visible
    at once (ChangeMessageVisibility 0), as is the cancelled call's message, whose claim is given
    up: another task takes both calls at once, the cancelled one from its checkpoint."""
    session, url = aws
    started, _ends, _ = held_calls
    sqs = Recording(session.client("sqs"))
    polled = asyncio.Event()
    stop_seen = __import__("threading").Event()
    real_receive = sqs.receive_message

    def slow_receive(
        **kwargs,
    ):  # the second poll is in flight when the stop comes, and returns a call after it
        if started:
            loop.call_soon_threadsafe(polled.set)
            stop_seen.wait(10)
        return real_receive(**kwargs)

    sqs.receive_message = slow_receive

    async def scenario() -> None:
        nonlocal loop
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        sqs.client.send_message(QueueUrl=url, MessageBody=body("running"))
        task = serving(sqs, url, aws_sink(session, "task-a"), stop)
        await until(lambda: started == ["running"])
        await polled.wait()
        sqs.client.send_message(QueueUrl=url, MessageBody=body("late"))
        stop.set()
        stop_seen.set()
        await task

    loop = None
    asyncio.run(scenario())
    assert started == ["running"]
    assert sqs.count("change_message_visibility", "late", 0) == 1
    assert sqs.count("change_message_visibility", "running", 0) == 1
    assert queue_counts(session, url) == (2, 0)
    assert (
        asyncio.run(aws_sink(session, "task-b").claim_call("running")) == "claimed"
    )  # released: no wait
    assert asyncio.run(aws_sink(session, "task-b").claim_call("late")) == "claimed"


def test_a_call_claimed_by_a_live_task_waits_on_standby_and_is_taken_over_when_that_task_stops(
    aws, held_calls
):
    session, url = aws
    started, _ends, _ = held_calls
    sqs = Recording(session.client("sqs"))

    async def scenario() -> None:
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        sqs.client.send_message(QueueUrl=url, MessageBody=body("call"))
        a = serving(sqs, url, aws_sink(session, "task-a"), stop_a, extend_every_s=0.05)
        await until(lambda: started == ["call"])
        sqs.client.send_message(QueueUrl=url, MessageBody=body("call"))  # a duplicate, for task b
        b = serving(sqs, url, aws_sink(session, "task-b"), stop_b, extend_every_s=0.05)
        await until(lambda: queue_counts(session, url) == (0, 2))
        await asyncio.sleep(0.3)  # rounds of task b's standby checks
        assert started == ["call"]
        stop_a.set()  # task a stops: its claim released, its message back at once
        await a
        await until(lambda: started == ["call", "call"])  # task b resumes the call
        stop_b.set()
        await b

    asyncio.run(scenario())


def test_a_call_whose_outcome_was_not_written_keeps_its_message_and_gives_up_its_claim(held_calls):
    """The table refuses the call's ENDED status: the message is not deleted (it comes back after
    its visibility timeout, and the task that takes it records the outcome) and the claim is
    released so that task may run it."""
    started, ends, _ = held_calls
    queue = FakeQueue(["unwritten"])
    store = ClaimingStore()
    released: list[str] = []

    async def refused(contact_id, status, reason=""):
        raise RuntimeError(
            "An error occurred (InternalServerError) when calling the UpdateItem operation"
        )

    async def release(contact_id):
        released.append(contact_id)

    store.set_call, store.release_call = refused, release

    async def scenario() -> None:
        stop = asyncio.Event()
        done: list[str] = []
        serving = asyncio.create_task(
            service.serve(
                sqs=queue,
                queue_url="q",
                sink=store,
                media=None,
                opener=None,
                stop=stop,
                receive_wait_s=1,
                on_call_done=lambda contact, reason: done.append(contact),
            )
        )
        await until(lambda: started == ["unwritten"])
        ends.setdefault("unwritten", asyncio.Event()).set()
        await until(lambda: done == ["unwritten"])
        stop.set()
        await serving

    asyncio.run(scenario())
    assert queue.deleted == [] and released == ["unwritten"]


def test_a_call_whose_claim_another_task_took_over_stops_here_and_gives_its_message_back(
    held_calls,
):
    """This task's lease ran out (its renewals failed) and another task claimed the call: the call
    stops here (it runs there from the checkpoint; never in two tasks at once) and its message is
    made visible, not deleted."""
    started, _ends, _ = held_calls
    queue = FakeQueue(["taken"])
    store = ClaimingStore()
    claims = iter(["claimed"])

    async def claim_call(contact_id):
        return next(claims, "elsewhere")

    store.claim_call = claim_call

    async def scenario() -> list:
        stop = asyncio.Event()
        done: list = []
        serving = asyncio.create_task(
            service.serve(
                sqs=queue,
                queue_url="q",
                sink=store,
                media=None,
                opener=None,
                stop=stop,
                receive_wait_s=1,
                extend_every_s=0.02,
                on_call_done=lambda contact, reason: done.append((contact, type(reason))),
            )
        )
        await until(lambda: started == ["taken"])
        await until(lambda: done != [])
        stop.set()
        await serving
        return done

    done = asyncio.run(scenario())
    assert done == [("taken", asyncio.CancelledError)]
    assert queue.deleted == [] and ("receipt-taken", 0) in queue.visibility


def test_a_claim_given_up_while_a_visibility_round_runs_is_not_taken_back(held_calls):
    """The call ends (its outcome not written: the claim is released so another task may resume it)
    while the visibility loop is extending its message: that round does not renew the claim it just
    gave up."""
    started, ends, _ = held_calls
    queue = FakeQueue(["released"])
    store = ClaimingStore()
    claims: list[str] = []
    extending = threading.Event()
    release = threading.Event()

    def change_message_visibility(*, QueueUrl, ReceiptHandle, VisibilityTimeout):
        extending.set()
        release.wait(10)  # the loop's SQS call in flight while the call ends

    async def claim_call(contact_id):
        claims.append("claim")
        return "claimed"

    async def refused(contact_id, status, reason=""):
        raise RuntimeError(
            "An error occurred (InternalServerError) when calling the UpdateItem operation"
        )

    async def release_call(contact_id):
        claims.append("release")

    queue.change_message_visibility = change_message_visibility
    store.claim_call, store.set_call, store.release_call = claim_call, refused, release_call

    async def scenario() -> None:
        stop = asyncio.Event()
        done: list[str] = []
        serving = asyncio.create_task(
            service.serve(
                sqs=queue,
                queue_url="q",
                sink=store,
                media=None,
                opener=None,
                stop=stop,
                receive_wait_s=1,
                extend_every_s=0.02,
                on_call_done=lambda contact, reason: done.append(contact),
            )
        )
        await until(lambda: started == ["released"] and extending.is_set())
        ends.setdefault("released", asyncio.Event()).set()
        await until(lambda: done == ["released"])
        release.set()
        await asyncio.sleep(0.1)  # the round goes on, and the next ones
        stop.set()
        await serving

    asyncio.run(scenario())
    assert claims == ["claim", "release"]
