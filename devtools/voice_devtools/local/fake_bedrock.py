"""A stand-in for Amazon Bedrock's ConverseStream, for ``make local AGENT=1`` and the tests: boto3's
``bedrock-runtime`` client, pointed at it with ``endpoint_url``, calls it unmodified.

What it speaks (botocore's ``bedrock-runtime`` service model, operation ``ConverseStream``; the
tests check the shapes against that model):

- ``POST /model/{modelId}/converse-stream`` with the Converse JSON body (``messages``, ``system``,
  ``inferenceConfig``); the SigV4 signature is not checked (a local stand-in on loopback).
- The answer: ``application/vnd.amazon.eventstream``, AWS's binary event stream framing (a prelude
  of total and header lengths with its CRC32, typed headers, the payload, the message's CRC32),
  events ``messageStart`` (``role``), ``contentBlockDelta`` (``contentBlockIndex``,
  ``delta.text``), ``contentBlockStop``, ``messageStop`` (``stopReason``) and ``metadata``
  (``usage``, ``metrics.latencyMs``), each with the headers ``:message-type: event``,
  ``:event-type`` and ``:content-type: application/json``.

The reply repeats what the user said last and adds :data:`REPLY` (several sentences, so that an
agent speaks long enough to be interrupted). The first token comes after ``first_token_s``, each
next word after ``token_interval_s``.

As a process: ``python -m voice_devtools.local.fake_bedrock --port 8095 [--first-token-ms 350]``.
"""

from __future__ import annotations

import argparse
import asyncio
import binascii
import contextlib
import json
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from voice_devtools.local.serving import listen_sockets, serve_asgi

REPLY = (
    "I heard you. This is the local stand-in for Amazon Bedrock speaking. It answers every "
    "turn with these few sentences, so that there is time to interrupt it. Go ahead and say "
    "something while it talks."
)
"""What follows the echo of the user's last words."""

FIRST_TOKEN_S = 0.35
"""Default seconds to the first token (a fast hosted model's order of magnitude)."""

TOKEN_INTERVAL_S = 0.02
"""Default seconds between words after the first (about 50 tokens a second)."""

EVENT_STREAM_TYPE = "application/vnd.amazon.eventstream"
"""The response's content type (AWS event stream encoding)."""

STRING_HEADER = 7
"""The event stream's header value type for a UTF-8 string (2-byte length, then the bytes)."""

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event stream message: prelude (total length, headers length, CRC32 of those 8 bytes),
    string headers, payload, CRC32 of everything before it (big-endian, as botocore's
    ``EventStreamBuffer`` reads them)."""
    encoded = b""
    for name, value in headers.items():
        name_bytes, value_bytes = name.encode(), value.encode()
        encoded += (
            struct.pack("!B", len(name_bytes))
            + name_bytes
            + struct.pack("!B", STRING_HEADER)
            + struct.pack("!H", len(value_bytes))
            + value_bytes
        )
    total = 4 + 4 + 4 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message))


def event(event_type: str, body: dict[str, Any]) -> bytes:
    """A ConverseStream event message of type ``event_type`` with the JSON ``body``."""
    return encode_message(
        {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
        json.dumps(body).encode(),
    )


def reply_words(request: dict[str, Any]) -> list[str]:
    """The reply to a Converse request: an echo of the user's last text, then :data:`REPLY`."""
    said = ""
    for message in request.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            texts = [
                block.get("text", "")
                for block in message.get("content") or []
                if isinstance(block, dict)
            ]
            said = " ".join(text for text in texts if text).strip() or said
    echo = f"You said: {said.rstrip('.!?')}. " if said else ""
    return (echo + REPLY).split(" ")


@dataclass
class BedrockCall:
    """One ConverseStream call as the stand-in saw it.

    Attributes:
        model_id: the model in the path.
        request: the parsed body.
        text: the text sent so far.
        client_closed: the caller closed the connection before ``messageStop``.
    """

    model_id: str
    request: dict[str, Any]
    text: str = ""
    client_closed: bool = False
    events: list[str] = field(default_factory=list)


class FakeBedrock:
    """The stand-in on ``127.0.0.1`` (an async context manager; ``port`` 0 lets the OS choose)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        first_token_s: float = FIRST_TOKEN_S,
        token_interval_s: float = TOKEN_INTERVAL_S,
    ) -> None:
        self.host = host
        self.port = port
        self.first_token_s = first_token_s
        self.token_interval_s = token_interval_s
        self.calls: list[BedrockCall] = []
        self._shutdown = asyncio.Event()
        self._server: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> FakeBedrock:
        sockets = listen_sockets(self.host, self.port)
        self.port = sockets[0].getsockname()[1]
        self._shutdown = asyncio.Event()
        self._server = asyncio.create_task(serve_asgi(self, sockets, self._shutdown))
        return self

    async def stop(self) -> None:
        self._shutdown.set()
        if self._server is not None:
            await self._server

    async def __aenter__(self) -> FakeBedrock:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                await send({"type": f"{kind}.complete"})
                if kind == "lifespan.shutdown":
                    return
        if scope["type"] != "http":
            return
        parts = scope["path"].split("/")
        if scope["method"] == "GET" and scope["path"] == "/ping":
            await _answer(send, 200, {})
        elif (
            scope["method"] == "POST"
            and len(parts) == 4
            and parts[1] == "model"
            and parts[3] == "converse-stream"
        ):
            await self._converse_stream(parts[2], receive, send)
        else:
            await _answer(
                send,
                404,
                {
                    "message": f"{scope['method']} {scope['path']}: the stand-in "
                    "serves POST /model/{modelId}/converse-stream"
                },
                error_type="UnknownOperationException",
            )

    async def _converse_stream(self, model_id: str, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            request = json.loads(body)
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise ValueError("the body needs a messages list")
        except ValueError as error:
            await _answer(
                send,
                400,
                {"message": f"malformed request: {error}"},
                error_type="ValidationException",
            )
            return
        call = BedrockCall(model_id, request)
        self.calls.append(call)
        answering = asyncio.ensure_future(self._answer_events(call, send))

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        watch = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({answering, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if watch.done() and not answering.done():
                call.client_closed = True
            for task in (answering, watch):
                task.cancel()
            await asyncio.gather(answering, watch, return_exceptions=True)

    async def _answer_events(self, call: BedrockCall, send: Send) -> None:
        started = time.monotonic()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", EVENT_STREAM_TYPE.encode())],
            }
        )

        async def emit(kind: str, body: dict[str, Any]) -> None:
            call.events.append(kind)
            await send({"type": "http.response.body", "body": event(kind, body), "more_body": True})

        await emit("messageStart", {"role": "assistant"})
        await asyncio.sleep(self.first_token_s)
        words = reply_words(call.request)
        for index, word in enumerate(words):
            text = word if index == len(words) - 1 else word + " "
            call.text += text
            await emit("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}})
            await asyncio.sleep(self.token_interval_s)
        await emit("contentBlockStop", {"contentBlockIndex": 0})
        await emit("messageStop", {"stopReason": "end_turn"})
        output_tokens = len(words)
        input_tokens = len(json.dumps(call.request)) // 4  # ~4 characters a token
        await emit(
            "metadata",
            {
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": round((time.monotonic() - started) * 1000)},
            },
        )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _answer(send: Send, status: int, body: dict[str, Any], error_type: str = "") -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if error_type:
        headers.append((b"x-amzn-errortype", error_type.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def _main() -> None:
    parser = argparse.ArgumentParser(description="Bedrock ConverseStream stand-in (loopback only).")
    parser.add_argument("--port", type=int, default=8095)
    parser.add_argument(
        "--first-token-ms",
        type=float,
        default=FIRST_TOKEN_S * 1000,
        help=f"milliseconds to the first token (default {FIRST_TOKEN_S * 1000:.0f})",
    )
    parser.add_argument(
        "--token-interval-ms",
        type=float,
        default=TOKEN_INTERVAL_S * 1000,
        help=f"milliseconds between words (default {TOKEN_INTERVAL_S * 1000:.0f})",
    )
    args = parser.parse_args()
    async with FakeBedrock(
        port=args.port,
        first_token_s=args.first_token_ms / 1000,
        token_interval_s=args.token_interval_ms / 1000,
    ) as bedrock:
        print(f"Bedrock stand-in listening on {bedrock.url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main())
