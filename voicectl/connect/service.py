"""The consumer service's process (the ECS task): calls from the SQS queue, each transcribed until it ends.

Environment: ``CALLS_QUEUE_URL``, ``BUS_NAME``, ``TABLE_NAME``, ``MAX_CALLS`` (calls per task), and the target:
``ENDPOINT_NAME`` (SageMaker bidirectional streaming) or ``ENDPOINT_URL`` + ``TOKEN_SECRET_ARN`` (the ECS target's
bearer-token URL). ``AWS_REGION`` as ECS sets it.

A message stays invisible while its call runs (the visibility timeout is extended every
:data:`VISIBILITY_EXTEND_S`) and is deleted when the call ends or fails; a task that stops (SIGTERM: scale-in, a
deployment) cancels its calls, whose messages come back after the visibility timeout to another task, which resumes
each from its checkpoint. Metrics go to CloudWatch as embedded metric format log lines (namespace
:data:`METRIC_NAMESPACE`): ``ActiveCalls``, ``MillisBehindNow``, ``CallsFailed``, ``CallsWaiting`` (calls waiting
for a full endpoint, every minute), ``CallsUntranscribed`` (a call that ended while it waited).
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
from typing import Any

import boto3

from voicectl.connect.consumer import CallRequest, CallTranscriber, Consumer
from voicectl.connect.kvs import KvsMedia
from voicectl.connect.sink import AwsSink

METRIC_NAMESPACE = "VoiceConnect"
VISIBILITY_TIMEOUT_S = 120
"""Seconds a received call message stays invisible; extended while the call runs (SQS allows up to 12 h)."""
VISIBILITY_EXTEND_S = 60
RECEIVE_WAIT_S = 20
"""SQS long polling: ReceiveMessage's WaitTimeSeconds is at most 20."""
RECEIVE_MAX = 10
"""ReceiveMessage's MaxNumberOfMessages is at most 10."""

LOG = logging.getLogger("voicectl.connect")


def emit_metric(name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
    """One CloudWatch embedded-metric-format line on stdout (the awslogs driver ships it). The deployment's
    dimensions come first: ``METRIC_DIMENSIONS``, a JSON object the task definition sets (e.g. ``{"Deployment":
    "RealtimeVoice"}``), so that two deployments in one account and Region write separate series."""
    dimensions = {**json.loads(os.environ.get("METRIC_DIMENSIONS") or "{}"), **dimensions}
    record: dict[str, Any] = {"_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [
        {"Namespace": METRIC_NAMESPACE, "Dimensions": [list(dimensions)] if dimensions else [[]],
         "Metrics": [{"Name": name, "Unit": unit}]}]}, name: value, **dimensions}
    print(json.dumps(record), flush=True)


@contextlib.asynccontextmanager
async def opener_from_env(session: Any):
    """The endpoint opener the environment names: ``ENDPOINT_NAME`` (SageMaker; the SDK client closed on exit) or
    ``ENDPOINT_URL`` with the bearer token from ``TOKEN_SECRET_ARN`` (the ECS target)."""
    from voicectl.clients.realtime import BearerToken, WebSocketTransport

    if os.environ.get("ENDPOINT_NAME"):
        from voicectl.clients.sagemaker_stream import open_endpoint

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


async def serve(*, sqs: Any, queue_url: str, sink: AwsSink, media: KvsMedia, opener: Any, stop: asyncio.Event,
                max_calls: int = 50, on_segment: Any = None, on_call_done: Any = None,
                receive_wait_s: int = RECEIVE_WAIT_S, transcriber_options: dict[str, Any] | None = None) -> None:
    """Take calls from the queue until ``stop`` is set; each runs on its own (see the module docstring)."""

    def factory(call: CallRequest) -> CallTranscriber:
        return CallTranscriber(call, media=media, opener=opener, store=sink,
                               on_segment=on_segment or (lambda segment: None),
                               on_metric=lambda name, value: emit_metric(name, value, "Milliseconds"),
                               **(transcriber_options or {}))

    consumer = Consumer(factory, sink, max_calls=max_calls, on_metric=lambda name, value: emit_metric(name, value))
    receipts: dict[str, str] = {}
    slot_freed = asyncio.Event()  # set when a call ends: a full task takes the next call from the queue at once

    async def keep_invisible() -> None:
        while True:
            await asyncio.sleep(VISIBILITY_EXTEND_S)
            for receipt in list(receipts.values()):
                await asyncio.to_thread(sqs.change_message_visibility, QueueUrl=queue_url, ReceiptHandle=receipt,
                                        VisibilityTimeout=VISIBILITY_TIMEOUT_S)
            emit_metric("ActiveCalls", len(receipts))
            emit_metric("CallsWaiting", len(consumer.waiting))

    async def finish(contact: str, task: asyncio.Task) -> None:
        (reason,) = await asyncio.gather(task, return_exceptions=True)
        receipt = receipts.pop(contact, None)
        try:
            if isinstance(reason, str) and reason.startswith("failed:"):
                emit_metric("CallsFailed", 1)
            if receipt is not None and not isinstance(reason, BaseException):
                await asyncio.to_thread(sqs.delete_message, QueueUrl=queue_url, ReceiptHandle=receipt)
            if on_call_done is not None:
                on_call_done(contact, reason)
        finally:
            # The slot is free whatever failed above (a refused DeleteMessage leaves the message to come back after
            # its visibility timeout); set after on_call_done, which may have set stop (connect-replay: one call).
            slot_freed.set()

    keeper = asyncio.create_task(keep_invisible())
    finishing: set[asyncio.Task] = set()
    try:
        while not stop.is_set():
            room = max_calls - len(receipts)
            if room <= 0:  # full: leave the calls in the queue (the scaling signal), never refuse them
                slot_freed.clear()
                await _first_of(stop.wait(), slot_freed.wait())
                continue
            response = await asyncio.to_thread(sqs.receive_message, QueueUrl=queue_url,
                                               WaitTimeSeconds=receive_wait_s,
                                               MaxNumberOfMessages=min(RECEIVE_MAX, room),
                                               VisibilityTimeout=VISIBILITY_TIMEOUT_S)
            for message in response.get("Messages", []):
                try:
                    call = CallRequest.from_message(json.loads(message["Body"]))
                except (ValueError, KeyError) as error:
                    LOG.error("a call message was refused (%s): %s", error, message["Body"][:500])
                    emit_metric("CallsFailed", 1)
                    continue  # left in the queue: after maxReceiveCount it moves to the dead-letter queue
                receipts[call.contact_id] = message["ReceiptHandle"]
                task = asyncio.create_task(finish(call.contact_id, consumer.start(call)))
                finishing.add(task)
                task.add_done_callback(finishing.discard)
    finally:
        keeper.cancel()
        await consumer.close()
        await asyncio.gather(*finishing, return_exceptions=True)


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
        sink = AwsSink(session, bus_name=os.environ["BUS_NAME"], table_name=os.environ["TABLE_NAME"])
        async with opener_from_env(session) as opener:
            await serve(sqs=session.client("sqs"), queue_url=os.environ["CALLS_QUEUE_URL"], sink=sink,
                        media=KvsMedia(session), opener=opener, stop=stop,
                        max_calls=int(os.environ.get("MAX_CALLS", "50")))

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
