"""voicectl/connect/service.py: the consumer task's metrics as embedded metric format lines, and the endpoint the
environment names (the ECS target: its URL with the bearer token from Secrets Manager, against moto and a WebSocket
server on loopback). Taking calls from the queue: ``serve`` with a stand-in queue here, and as voicectl
connect-replay runs it (tests/unit/voicectl/test_connect_replay.py)."""

from __future__ import annotations

import asyncio
import json
import time

import boto3
import pytest
from moto import mock_aws
from websockets.asyncio.server import serve as serve_websocket

from voicectl.connect import service


def test_a_metric_is_one_embedded_metric_format_line(capsys):
    service.emit_metric("MillisBehindNow", 250.0, "Milliseconds", Track="AUDIO_FROM_CUSTOMER")
    service.emit_metric("ActiveCalls", 3)
    with_dimension, plain = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert with_dimension["_aws"]["CloudWatchMetrics"] == [{
        "Namespace": "VoiceConnect", "Dimensions": [["Track"]],
        "Metrics": [{"Name": "MillisBehindNow", "Unit": "Milliseconds"}]}]
    assert with_dimension["MillisBehindNow"] == 250.0 and with_dimension["Track"] == "AUDIO_FROM_CUSTOMER"
    assert plain["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]] and plain["ActiveCalls"] == 3
    assert isinstance(plain["_aws"]["Timestamp"], int)


def test_sqs_limits_are_kept():
    assert service.RECEIVE_WAIT_S <= 20 and service.RECEIVE_MAX <= 10  # ReceiveMessage's maximums
    assert service.VISIBILITY_EXTEND_S < service.VISIBILITY_TIMEOUT_S <= 12 * 3600


def test_the_ecs_target_is_opened_with_the_bearer_token_of_the_secret(monkeypatch):
    seen: list[str | None] = []

    def record(connection, request):
        seen.append(request.headers.get("Authorization"))

    async def scenario(session) -> None:
        async with serve_websocket(lambda connection: connection.wait_closed(), "127.0.0.1", 0,
                                   process_request=record) as server:
            port = server.sockets[0].getsockname()[1]
            monkeypatch.setenv("ENDPOINT_URL", f"ws://127.0.0.1:{port}/invocations-bidirectional-stream")
            async with service.opener_from_env(session) as opener:
                transport = await opener()
                await transport.close()

    monkeypatch.delenv("ENDPOINT_NAME", raising=False)
    with mock_aws():
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
        arn = session.client("secretsmanager").create_secret(Name="bridge-token", SecretString="t0ken")["ARN"]
        monkeypatch.setenv("TOKEN_SECRET_ARN", arn)
        asyncio.run(asyncio.wait_for(scenario(session), 10))
    assert seen == ["Bearer t0ken"]


class ClaimingStore:
    """The in-memory store with the sink's claims (one owner; the claims' conditions are tested against moto)."""

    def __new__(cls):
        from tests.unit.voicectl.connect.connect_testkit import MemoryStore

        store = MemoryStore()

        async def claim_call(contact_id: str) -> str:
            return "finished" if store.calls.get(contact_id, [""])[-1] in ("ENDED", "FAILED") else "claimed"

        async def release_call(contact_id: str) -> None:
            pass

        store.claim_call, store.release_call = claim_call, release_call
        return store


class FakeQueue:
    """The SQS calls ``serve`` makes (from threads), over a list of call messages: each receive hands out what is
    queued, up to MaxNumberOfMessages; deleted receipt handles are recorded."""

    def __init__(self, contacts: list[str]) -> None:
        self.messages = [{"Body": json.dumps({"contactId": contact, "streamArn": f"arn:aws:kinesisvideo:{contact}",
                                              "startFragmentNumber": "1"}), "ReceiptHandle": f"receipt-{contact}"}
                         for contact in contacts]
        self.deleted: list[str] = []
        self.visibility: list[tuple[str, int]] = []

    def receive_message(self, *, QueueUrl, WaitTimeSeconds, MaxNumberOfMessages, VisibilityTimeout):  # noqa: N803
        batch, self.messages[:MaxNumberOfMessages] = self.messages[:MaxNumberOfMessages], []
        if not batch:
            time.sleep(0.01)  # an empty long poll, shortened
        return {"Messages": batch}

    def delete_message(self, *, QueueUrl, ReceiptHandle):  # noqa: N803
        self.deleted.append(ReceiptHandle)

    def change_message_visibility(self, *, QueueUrl, ReceiptHandle, VisibilityTimeout):  # noqa: N803
        self.visibility.append((ReceiptHandle, VisibilityTimeout))


@pytest.fixture
def held_calls(monkeypatch) -> tuple[list[str], dict[str, asyncio.Event], list[int]]:
    """``serve`` with calls that end when the test says: yields (contacts whose call started, in order; each call's
    end event; one entry per wait of a full task for a freed slot or the stop)."""
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
    """max_calls=1 and two calls queued: the second is not taken while the first runs (it stays in the queue, the
    scaling signal), and the full task waits once, for the first call's end (not on a timer, nor spinning); it takes
    the second call once the first ends; and a stop while the task is full ends ``serve`` with the running call
    cancelled (its message left for another task)."""
    started, ends, full_waits = held_calls
    queue = FakeQueue(["first", "second"])

    async def scenario() -> None:
        stop = asyncio.Event()
        serving = asyncio.create_task(service.serve(sqs=queue, queue_url="q", sink=ClaimingStore(), media=None,
                                                    opener=None, stop=stop, max_calls=1, receive_wait_s=1))
        await until(lambda: started == ["first"] and full_waits)
        for _ in range(20):
            await asyncio.sleep(0)  # a task that did not wait on the event would loop meanwhile
        assert len(full_waits) == 1
        assert [json.loads(m["Body"])["contactId"] for m in queue.messages] == ["second"]  # left in the queue
        ends.setdefault("first", asyncio.Event()).set()
        await until(lambda: started == ["first", "second"] and len(full_waits) == 2)
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(full_waits) == 2  # full again: one wait, though the event was set by the first call's end
        assert queue.deleted == ["receipt-first"] and queue.messages == []
        stop.set()
        async with asyncio.timeout(10):
            await serving
        assert queue.deleted == ["receipt-first"]  # the cancelled call's message comes back to another task ...
        assert ("receipt-second", 0) in queue.visibility  # ... at once

    asyncio.run(scenario())


class RefusedDelete(FakeQueue):
    def delete_message(self, *, QueueUrl, ReceiptHandle):  # noqa: N803
        raise RuntimeError("An error occurred (AccessDenied) when calling the DeleteMessage operation")


@pytest.mark.parametrize("failing", ["DeleteMessage", "on_call_done"])
def test_a_full_task_takes_the_next_call_even_when_finishing_the_last_one_failed(held_calls, failing):
    """The slot of a call that ended is free even if deleting its message or the caller's callback failed (the
    message then comes back after its visibility timeout): a full task must not wait for it until it is stopped."""
    started, ends, _full_waits = held_calls
    queue = (RefusedDelete if failing == "DeleteMessage" else FakeQueue)(["first", "second"])

    def on_call_done(contact: str, reason: object) -> None:
        if failing == "on_call_done":
            raise RuntimeError("the callback failed")

    async def scenario() -> None:
        stop = asyncio.Event()
        serving = asyncio.create_task(service.serve(sqs=queue, queue_url="q", sink=ClaimingStore(), media=None,
                                                    opener=None, stop=stop, max_calls=1, receive_wait_s=1,
                                                    on_call_done=on_call_done))
        try:
            await until(lambda: started == ["first"])
            ends.setdefault("first", asyncio.Event()).set()
            await until(lambda: started == ["first", "second"])
        finally:
            stop.set()
            async with asyncio.timeout(10):
                await serving

    asyncio.run(scenario())
