"""The consumer service's process (the ECS task): calls from the SQS queue, each transcribed until it ends.

Environment: ``CALLS_QUEUE_URL``, ``BUS_NAME``, ``TABLE_NAME``, ``MAX_CALLS`` (calls per task), and the target:
``ENDPOINT_NAME`` (SageMaker bidirectional streaming) or ``ENDPOINT_URL`` + ``TOKEN_SECRET_ARN`` (the ECS target's
bearer-token URL). ``AWS_REGION`` as ECS sets it.

A message stays invisible while its call runs (the visibility timeout is extended every
:data:`VISIBILITY_EXTEND_S`) and is deleted when the call ends or fails; a task that stops (SIGTERM: scale-in, a
deployment) cancels its calls, whose messages come back after the visibility timeout to another task, which resumes
each from its checkpoint. Metrics go to CloudWatch as embedded metric format log lines (namespace
:data:`METRIC_NAMESPACE`): ``ActiveCalls``, ``MillisBehindNow``, ``CallsFailed``, ``CallsWaiting``.
"""

from __future__ import annotations

import asyncio
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
    """One CloudWatch embedded-metric-format line on stdout (the awslogs driver ships it)."""
    record: dict[str, Any] = {"_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [
        {"Namespace": METRIC_NAMESPACE, "Dimensions": [list(dimensions)] if dimensions else [[]],
         "Metrics": [{"Name": name, "Unit": unit}]}]}, name: value, **dimensions}
    print(json.dumps(record), flush=True)


def opener_from_env(session: Any):
    from voicectl.realtime import BearerToken, WebSocketTransport

    if os.environ.get("ENDPOINT_NAME"):
        from voicectl.sagemaker_stream import open_endpoint

        holder: dict[str, Any] = {}

        async def open_stream():
            if "open" not in holder:
                holder["open"] = await open_endpoint(os.environ["ENDPOINT_NAME"], region=session.region_name)
            return await holder["open"]()

        return open_stream
    url = os.environ["ENDPOINT_URL"]
    secret = session.client("secretsmanager").get_secret_value(SecretId=os.environ["TOKEN_SECRET_ARN"])
    token = BearerToken(secret["SecretString"])
    return lambda: WebSocketTransport.connect(url, token=token)


async def serve(session: Any, stop: asyncio.Event) -> None:
    sqs = session.client("sqs")
    queue = os.environ["CALLS_QUEUE_URL"]
    sink = AwsSink(session, bus_name=os.environ["BUS_NAME"], table_name=os.environ["TABLE_NAME"])
    media = KvsMedia(session)
    opener = opener_from_env(session)
    max_calls = int(os.environ.get("MAX_CALLS", "50"))

    def factory(call: CallRequest) -> CallTranscriber:
        return CallTranscriber(call, media=media, opener=opener, store=sink,
                               on_metric=lambda name, value: emit_metric(name, value, "Milliseconds"))

    consumer = Consumer(factory, sink, max_calls=max_calls)
    receipts: dict[str, str] = {}

    async def keep_invisible() -> None:
        while True:
            await asyncio.sleep(VISIBILITY_EXTEND_S)
            for contact, receipt in list(receipts.items()):
                await asyncio.to_thread(sqs.change_message_visibility, QueueUrl=queue, ReceiptHandle=receipt,
                                        VisibilityTimeout=VISIBILITY_TIMEOUT_S)
            emit_metric("ActiveCalls", len(receipts))

    async def finish(contact: str, task: asyncio.Task) -> None:
        reason = await asyncio.gather(task, return_exceptions=True)
        if isinstance(reason[0], str) and reason[0].startswith("failed:"):
            emit_metric("CallsFailed", 1)
        receipt = receipts.pop(contact, None)
        if receipt is not None:
            await asyncio.to_thread(sqs.delete_message, QueueUrl=queue, ReceiptHandle=receipt)

    keeper = asyncio.create_task(keep_invisible())
    try:
        while not stop.is_set():
            room = max_calls - len(receipts)
            if room <= 0:  # full: leave the calls in the queue (the scaling signal), never refuse them
                await asyncio.sleep(1)
                continue
            response = await asyncio.to_thread(sqs.receive_message, QueueUrl=queue, WaitTimeSeconds=RECEIVE_WAIT_S,
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
                asyncio.create_task(finish(call.contact_id, consumer.start(call)))
    finally:
        keeper.cancel()
        await consumer.close()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    session = boto3.Session()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await serve(session, stop)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
