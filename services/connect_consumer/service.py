"""The consumer service's process (the ECS task): calls from the SQS queue, each transcribed until
it ends.

Environment: ``CALLS_QUEUE_URL``, ``BUS_NAME``, ``TABLE_NAME``, ``MAX_CALLS`` (calls per task), and
the target: ``ENDPOINT_NAME`` (SageMaker bidirectional streaming) or ``ENDPOINT_URL`` +
``TOKEN_SECRET_ARN`` (the ECS target's bearer-token URL). ``AWS_REGION`` as ECS sets it.

A call runs in one task at a time: SQS standard queues deliver a message at least once, so a task
first claims the call in the table (:meth:`connect_consumer.sink.AwsSink.claim_call`, a conditional
write with a lease the task renews every :data:`VISIBILITY_EXTEND_S`). A copy of a call this task
runs joins it (every copy is kept invisible, then deleted); a copy of a call another task's claim
holds is kept on standby (invisible, checked every round: run here if that claim runs out, deleted
once the call is over); a copy of a finished call is deleted. A conditional claim rather than a FIFO
queue: deduplication by contact id on a FIFO queue holds for its 5-minute deduplication interval
only (SQS developer guide, "Exactly-once processing in Amazon SQS"), so a copy that comes back later
(after a visibility timeout, a task's stop) would still run a finished call again; and the standard
queue stays as it is deployed (a FIFO queue is a new resource).

A message stays invisible while its call runs (extended every :data:`VISIBILITY_EXTEND_S`; SQS's
ceiling of 12 hours from receipt is met by handing the message on, :data:`MAX_VISIBILITY_S`) and is
deleted when the call's outcome is recorded. Each message's SQS error is logged and counted
(``MessageErrors``) and the others go on. A task that stops (SIGTERM: scale-in, a deployment) starts
no new call; every message it received but did not start (the poll in flight included) and those of
its cancelled calls are made visible at once (ChangeMessageVisibility 0) with their claims given up,
so another task resumes each call from its checkpoint without waiting. Metrics go to CloudWatch as
embedded metric format log lines (namespace :data:`METRIC_NAMESPACE`): ``ActiveCalls``,
``MillisBehindNow``, ``CallsFailed``, ``CallsWaiting`` (calls waiting for a full endpoint, every
minute), ``CallsUntranscribed`` (a call that ended while it waited), ``OutcomesNotRecorded``,
``MessageErrors``, ``ClaimErrors``, ``ClaimsLost``, ``DuplicateMessages``, ``MessagesHandedOn``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

import boto3

from connect_consumer.call import CallRequest
from connect_consumer.consumer import Consumer
from connect_consumer.kvs import KvsMedia
from connect_consumer.sink import MAX_REASON_BYTES, AwsSink, cut_utf8
from connect_consumer.transcriber import CallTranscriber

METRIC_NAMESPACE = "VoiceConnect"
VISIBILITY_TIMEOUT_S = 120
"""Seconds a received call message stays invisible; extended while the call runs (SQS allows up to
12 h)."""
VISIBILITY_EXTEND_S = 60
"""Seconds between two extensions of the held messages' visibility (and renewals of the calls'
claims)."""
MAX_VISIBILITY_S = 12 * 3600
"""SQS: a message's visibility can be extended to 12 hours at most, counted from when it was
received (ChangeMessageVisibility API reference: "If you try to extend the visibility timeout beyond
the maximum, your request is rejected"; SQS developer guide, "Amazon SQS visibility timeout"). A
call that outlives it has its message handed on: a new copy sent, the old one deleted (the call's
claim keeps the call where it runs)."""
HAND_ON_MARGIN_S = 600
"""Seconds before that ceiling the message is handed on (a late round, a slow SendMessage)."""
RECEIVE_ERROR_PAUSE_S = 1.0
"""Seconds after a failed ReceiveMessage before the next (SQS unreachable: not a busy loop)."""
RECEIVE_WAIT_S = 20
"""SQS long polling: ReceiveMessage's WaitTimeSeconds is at most 20."""
RECEIVE_MAX = 10
"""ReceiveMessage's MaxNumberOfMessages is at most 10."""

LOG = logging.getLogger("connect_consumer")


def emit_metric(name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
    """One CloudWatch embedded-metric-format line on stdout (the awslogs driver ships it). The
    deployment's dimensions come first: ``METRIC_DIMENSIONS``, a JSON object the task definition
    sets (e.g. ``{"Deployment": "RealtimeVoice"}``), so that two deployments in one account and
    Region write separate series."""
    dimensions = {**json.loads(os.environ.get("METRIC_DIMENSIONS") or "{}"), **dimensions}
    record: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": METRIC_NAMESPACE,
                    "Dimensions": [list(dimensions)] if dimensions else [[]],
                    "Metrics": [{"Name": name, "Unit": unit}],
                }
            ],
        },
        name: value,
        **dimensions,
    }
    print(json.dumps(record), flush=True)


@contextlib.asynccontextmanager
async def opener_from_env(session: Any):
    """The endpoint opener the environment names: ``ENDPOINT_NAME`` (SageMaker; the SDK client
    closed on exit) or ``ENDPOINT_URL`` with the bearer token from ``TOKEN_SECRET_ARN`` (the ECS
    target)."""
    from voice_client.realtime import BearerToken, WebSocketTransport

    if os.environ.get("ENDPOINT_NAME"):
        from voice_client.sagemaker_stream import open_endpoint

        async with open_endpoint(os.environ["ENDPOINT_NAME"], region=session.region_name) as opener:
            yield opener
        return
    url = os.environ["ENDPOINT_URL"]
    secret_arn = os.environ["TOKEN_SECRET_ARN"]
    secret = session.client("secretsmanager").get_secret_value(SecretId=secret_arn)
    token = BearerToken(secret["SecretString"], source=f"Secrets Manager secret {secret_arn}")

    async def open_websocket() -> WebSocketTransport:
        return await WebSocketTransport.connect(url, token=token)

    yield open_websocket


@dataclass
class _Message:
    """One received copy of a call's message: its receipt handle, its body (re-sent when handed on)
    and when it was received (the 12-hour visibility ceiling counts from there)."""

    receipt: str
    body: str
    received_at: float


class _Messages:
    """The call messages a task holds, by contact: ``running`` (its calls), ``standby`` (calls
    another task's claim holds: kept invisible and checked every round, run here if that claim runs
    out, dropped when the call is over), and the SQS calls made on them, each message's error logged
    and counted alone."""

    def __init__(self, sqs: Any, queue_url: str, clock: Any) -> None:
        self.sqs, self.queue_url, self.clock = sqs, queue_url, clock
        self.running: dict[str, list[_Message]] = {}
        self.standby: dict[str, list[_Message]] = {}

    def all(self) -> list[tuple[str, list[_Message]]]:
        return [*self.running.items(), *self.standby.items()]

    async def call(self, operation: str, contact: str, **kwargs: Any) -> bool:
        """One SQS call about one message; an error is logged and counted for that message alone."""
        try:
            await asyncio.to_thread(getattr(self.sqs, operation), QueueUrl=self.queue_url, **kwargs)
            return True
        except Exception as error:  # any SDK or network error: reported, the others go on
            LOG.warning(
                "call %s: %s failed: %s", contact, operation, cut_utf8(str(error), MAX_REASON_BYTES)
            )
            emit_metric("MessageErrors", 1)
            return False

    async def keep(self, contact: str, messages: list[_Message]) -> None:
        """Each message invisible for :data:`VISIBILITY_TIMEOUT_S` more, or handed on near SQS's
        ceiling: a new copy sent, then this one deleted (the copy starts its own 12 hours; the
        call's claim keeps the call where it runs, so whichever task receives the copy does not run
        it again)."""
        for message in list(messages):
            if (
                self.clock() - message.received_at + VISIBILITY_TIMEOUT_S + HAND_ON_MARGIN_S
                >= MAX_VISIBILITY_S
            ):
                if await self.call("send_message", contact, MessageBody=message.body):
                    emit_metric("MessagesHandedOn", 1)
                    await self.call("delete_message", contact, ReceiptHandle=message.receipt)
                    messages.remove(message)
                continue
            await self.call(
                "change_message_visibility",
                contact,
                ReceiptHandle=message.receipt,
                VisibilityTimeout=VISIBILITY_TIMEOUT_S,
            )

    async def give_back(self, contact: str, messages: list[_Message]) -> None:
        """Visible again at once (ChangeMessageVisibility 0): another task takes the call without
        waiting."""
        for message in messages:
            await self.call(
                "change_message_visibility",
                contact,
                ReceiptHandle=message.receipt,
                VisibilityTimeout=0,
            )

    async def delete(self, contact: str, messages: list[_Message]) -> None:
        for message in messages:
            await self.call("delete_message", contact, ReceiptHandle=message.receipt)

    async def receive(self, room: int, wait_s: int, stop: asyncio.Event) -> list[dict[str, Any]]:
        """One long poll; a stop meanwhile does not lose what it returns (the poll cannot be
        cancelled)."""
        poll = asyncio.ensure_future(
            asyncio.to_thread(
                self.sqs.receive_message,
                QueueUrl=self.queue_url,
                WaitTimeSeconds=wait_s,
                MaxNumberOfMessages=min(RECEIVE_MAX, room),
                VisibilityTimeout=VISIBILITY_TIMEOUT_S,
            )
        )
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({poll, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        try:
            return (await poll).get("Messages", [])
        except Exception as error:  # a failed poll: logged, the next one follows
            LOG.warning("ReceiveMessage failed: %s", cut_utf8(str(error), MAX_REASON_BYTES))
            emit_metric("MessageErrors", 1)
            await asyncio.sleep(RECEIVE_ERROR_PAUSE_S)
            return []


async def serve(
    *,
    sqs: Any,
    queue_url: str,
    sink: AwsSink,
    media: KvsMedia,
    opener: Any,
    stop: asyncio.Event,
    max_calls: int = 50,
    on_segment: Any = None,
    on_call_done: Any = None,
    receive_wait_s: int = RECEIVE_WAIT_S,
    transcriber_options: dict[str, Any] | None = None,
    clock: Any = time.monotonic,
    extend_every_s: float = VISIBILITY_EXTEND_S,
) -> None:
    """Take calls from the queue until ``stop`` is set; each runs on its own (see the module
    docstring).

    ``sink`` needs :meth:`~connect_consumer.sink.AwsSink.claim_call` and ``release_call`` besides
    the consumer's store methods. ``clock`` (monotonic seconds) dates each message's receipt for
    SQS's 12-hour ceiling; ``extend_every_s`` is the visibility loop's period (tests shorten
    both)."""

    def factory(call: CallRequest) -> CallTranscriber:
        return CallTranscriber(
            call,
            media=media,
            opener=opener,
            store=sink,
            on_segment=on_segment or (lambda segment: None),
            on_metric=lambda name, value: emit_metric(name, value, "Milliseconds"),
            **(transcriber_options or {}),
        )

    consumer = Consumer(
        factory, sink, max_calls=max_calls, on_metric=lambda name, value: emit_metric(name, value)
    )
    server = _Server(
        consumer,
        _Messages(sqs, queue_url, clock),
        sink,
        stop,
        on_call_done=on_call_done,
        clock=clock,
        extend_every_s=extend_every_s,
    )
    await server.run(max_calls, receive_wait_s)


class _Server:
    """One task serving the call queue (:func:`serve`): each message taken (claimed and started,
    joined, kept on standby, deleted or given back), each claim renewed or checked and each held
    message kept invisible every ``extend_every_s``, and each call's end settled on its messages
    and its claim."""

    def __init__(
        self,
        consumer: Consumer,
        held: _Messages,
        sink: AwsSink,
        stop: asyncio.Event,
        *,
        on_call_done: Any,
        clock: Any,
        extend_every_s: float,
    ) -> None:
        self.consumer, self.held, self.sink, self.stop = consumer, held, sink, stop
        self.on_call_done, self.clock, self.extend_every_s = on_call_done, clock, extend_every_s
        # Set when a call ends: a full task takes the next call from the queue at once.
        self.slot_freed = asyncio.Event()
        self.finishing: set[asyncio.Task] = set()

    async def run(self, max_calls: int, receive_wait_s: int) -> None:
        held = self.held
        keeper = asyncio.create_task(self.keep_invisible())
        try:
            while not self.stop.is_set():
                room = max_calls - len(held.running)
                if (
                    room <= 0
                ):  # full: leave the calls in the queue (the scaling signal), never refuse them
                    self.slot_freed.clear()
                    await _first_of(self.stop.wait(), self.slot_freed.wait())
                    continue
                for message in await held.receive(room, receive_wait_s, self.stop):
                    await self.take(message)  # after a stop: each returned at once, none started
        finally:
            keeper.cancel()
            await self.consumer.close()
            await asyncio.gather(*self.finishing, return_exceptions=True)
            for contact, messages in list(held.standby.items()):
                await held.give_back(contact, messages)

    async def check_claim(self, contact: str) -> None:
        """Renew this task's claim on a running call; try to take a standby call over."""
        held = self.held
        if contact not in held.running and contact not in held.standby:
            # it ended while this round ran: a claim given up (release_call) must not be taken back
            return
        try:
            claim = await self.sink.claim_call(contact)
        except Exception as error:  # DynamoDB unreachable: tried again next round
            LOG.warning(
                "call %s: its claim could not be renewed or checked: %s",
                contact,
                cut_utf8(str(error), MAX_REASON_BYTES),
            )
            emit_metric("ClaimErrors", 1)
            return
        if contact in held.running:
            if claim == "elsewhere":
                # The lease ran out (renewals failed, a stalled loop) and another task claimed the
                # call: it runs there from the checkpoint, so it stops here (its messages given
                # back), never runs in both.
                LOG.error(
                    "call %s: this task's claim was lost to another task; the call stops here",
                    contact,
                )
                emit_metric("ClaimsLost", 1)
                if (task := self.consumer.calls.get(contact)) is not None:
                    task.cancel()
            elif claim != "claimed":
                LOG.error("call %s: this task's claim was lost (%s)", contact, claim)
                emit_metric("ClaimsLost", 1)
        elif contact in held.standby:
            if claim == "claimed" and not self.stop.is_set():
                held.running[contact] = held.standby.pop(contact)
                self.start(contact, held.running[contact][0])
            elif claim == "finished":
                await held.delete(contact, held.standby.pop(contact))

    async def keep_invisible(self) -> None:
        """Every ``extend_every_s``: each held message kept invisible (or handed on before SQS's
        ceiling), each claim renewed or checked. One message's or call's error never stops the loop
        for the others."""
        while True:
            await asyncio.sleep(self.extend_every_s)
            for contact, messages in self.held.all():
                await self.held.keep(contact, messages)
                await self.check_claim(contact)
            emit_metric("ActiveCalls", len(self.held.running))
            emit_metric("CallsWaiting", len(self.consumer.waiting))

    async def finish(self, contact: str, task: asyncio.Task) -> None:
        (reason,) = await asyncio.gather(task, return_exceptions=True)
        messages = self.held.running.pop(contact, [])
        try:
            if isinstance(reason, str) and reason.startswith("failed:"):
                emit_metric("CallsFailed", 1)
            if isinstance(reason, BaseException) or contact in self.consumer.unrecorded:
                # Stopped, or its outcome not written: the claim is given up and the message comes
                # back, so another task resumes the call from its checkpoint (at once when stopped).
                with contextlib.suppress(Exception):
                    await self.sink.release_call(contact)
                if isinstance(reason, asyncio.CancelledError):
                    await self.held.give_back(contact, messages)
            else:
                await self.held.delete(
                    contact, messages
                )  # every copy this task held (duplicates, a handed-on copy)
            if self.on_call_done is not None:
                self.on_call_done(contact, reason)
        finally:
            # The slot is free whatever failed above (a refused DeleteMessage leaves the message to
            # come back after its visibility timeout); set after on_call_done, which may have set
            # stop (connect-replay: one call).
            self.slot_freed.set()

    def start(self, contact: str, message: _Message) -> None:
        call = CallRequest.from_message(json.loads(message.body))
        task = asyncio.create_task(self.finish(contact, self.consumer.start(call)))
        self.finishing.add(task)
        task.add_done_callback(self.finishing.discard)

    async def take(self, message: dict[str, Any]) -> None:
        """One received message: a new call is claimed and started; a copy of a call held here joins
        it; a copy of a call claimed elsewhere waits on standby; a copy of a finished call is
        deleted; after a stop, returned."""
        held = self.held
        body, receipt = message["Body"], message["ReceiptHandle"]
        try:
            call = CallRequest.from_message(json.loads(body))
        except (ValueError, KeyError) as error:
            LOG.error("a call message was refused (%s): %s", error, body[:500])
            emit_metric("CallsFailed", 1)
            return  # left in the queue: after maxReceiveCount it moves to the dead-letter queue
        contact, copy = call.contact_id, _Message(receipt, body, self.clock())
        for group in (held.running, held.standby):
            if contact in group:
                group[contact].append(
                    copy
                )  # never in place of the first: each copy is kept invisible, then deleted
                emit_metric("DuplicateMessages", 1)
                return
        if self.stop.is_set():
            await held.give_back(contact, [copy])
            return
        try:
            claim = await self.sink.claim_call(contact)
        except Exception as error:  # left invisible: it comes back after its visibility timeout
            LOG.warning(
                "call %s: claim failed: %s", contact, cut_utf8(str(error), MAX_REASON_BYTES)
            )
            emit_metric("ClaimErrors", 1)
            return
        if claim == "claimed":
            held.running[contact] = [copy]
            self.start(contact, copy)
        elif claim == "finished":
            LOG.info("call %s is over: a copy of its message is deleted", contact)
            emit_metric("DuplicateMessages", 1)
            await held.delete(contact, [copy])
        else:
            held.standby[contact] = [copy]


async def _first_of(*waits: Any) -> None:
    """Wait until the first of ``waits`` (coroutines) completes; the others are cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    session = boto3.Session()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        sink = AwsSink(
            session, bus_name=os.environ["BUS_NAME"], table_name=os.environ["TABLE_NAME"]
        )
        async with opener_from_env(session) as opener:
            await serve(
                sqs=session.client("sqs"),
                queue_url=os.environ["CALLS_QUEUE_URL"],
                sink=sink,
                media=KvsMedia(session),
                opener=opener,
                stop=stop,
                max_calls=int(os.environ.get("MAX_CALLS", "50")),
            )

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
