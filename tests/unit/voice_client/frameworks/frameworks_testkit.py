"""In-process stand-ins for the framework services' unit tests: a realtime server behind a
:class:`~voice_client.realtime.transport.RealtimeTransport` (vLLM's protocol as
``voice_devtools.local.fake_vllm`` describes it, reduced to one delta per append), and a SageMaker
runtime on loopback answering ``InvokeEndpointWithResponseStream`` with AWS event stream
``PayloadPart`` events (no signature check)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from voice_client.realtime.protocol import RealtimeError
from voice_client.realtime.transport import TransportClosed
from voice_devtools.local.shapes import exception_event, payload_part


@dataclass
class ScriptedServer:
    """Streams that answer as vLLM does: ``session.created``; one ``transcription.delta`` (``word<n>
    ``) per append during a generation; ``transcription.done`` with the deltas' text at the final
    commit (unless ``drop_done``).

    Attributes:
        refuse: raise this from every open (a refused stream).
        drop_done: never send ``transcription.done`` (vllm-project/vllm#33962).
        cut_after_appends: the first stream drops (TransportClosed) after this many appends.
        streams: every stream opened, in order.
    """

    refuse: RealtimeError | None = None
    drop_done: bool = False
    cut_after_appends: int | None = None
    streams: list[ScriptedStream] = field(default_factory=list)

    async def open(self) -> ScriptedStream:
        if self.refuse is not None:
            raise self.refuse
        stream = ScriptedStream(self)
        self.streams.append(stream)
        return stream

    @property
    def audio(self) -> bytes:
        """Every PCM16 byte appended, over every stream, in order."""
        return b"".join(bytes(stream.audio) for stream in self.streams)


class ScriptedStream:
    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.inbox: asyncio.Queue[str | TransportClosed | None] = asyncio.Queue()
        self.inbox.put_nowait(json.dumps({"type": "session.created", "id": "sess-1"}))
        self.received: list[dict[str, Any]] = []
        self.audio = bytearray()
        self.generating = False
        self.text = ""
        self.closed = False

    async def send_text(self, text: str) -> None:
        if self.closed:
            raise TransportClosed("closed")
        event = json.loads(text)
        self.received.append(event)
        if event["type"] == "input_audio_buffer.append":
            cut = self.server.cut_after_appends
            if cut is not None and self is self.server.streams[0] and len(self.audio) >= cut * 4096:
                self.closed = True
                self.inbox.put_nowait(TransportClosed("the network dropped the stream"))
                raise TransportClosed("the network dropped the stream")
            self.audio += base64.b64decode(event["audio"])
            if self.generating:
                delta = f"word{len(self.text.split()) + 1} "
                self.text += delta
                self.inbox.put_nowait(json.dumps({"type": "transcription.delta", "delta": delta}))
        elif event["type"] == "input_audio_buffer.commit":
            if not event.get("final"):
                self.generating = True
            elif self.generating and not self.server.drop_done:
                self.inbox.put_nowait(json.dumps({"type": "transcription.done", "text": self.text}))
                self.generating, self.text = False, ""

    async def receive_text(self) -> str | None:
        message = await self.inbox.get()
        if isinstance(message, TransportClosed):
            raise message
        return message

    async def close(self) -> None:
        self.closed = True
        self.inbox.put_nowait(None)


def sonic_line(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"


def sonic_chunk(pcm16: bytes) -> bytes:
    return sonic_line(
        {
            "type": "chunk",
            "status_code": 206,
            "done": False,
            "data": base64.b64encode(pcm16).decode(),
        }
    )


SONIC_DONE = sonic_line({"type": "done", "status_code": 200, "done": True})


@dataclass
class FakeRuntime:
    """``POST /endpoints/<name>/invocations-response-stream`` on loopback.

    Attributes:
        parts: the payload parts to send (bytes each).
        raw: event stream messages written as they are after the parts (``exception_event(...)``).
        refusal: (HTTP status, ``X-Amzn-ErrorType``, JSON body) to answer instead.
        hold: keep the response open after the parts (until the caller goes).
        requests: each request's path and parsed body.
        disconnected: set when a caller closed a response before its end.
    """

    parts: list[bytes] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    refusal: tuple[int, str, dict[str, Any]] | None = None
    hold: bool = False
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        self.requests.append((request.raw_path, json.loads(await request.read())))
        if self.refusal is not None:
            status, code, body = self.refusal
            return web.json_response(body, status=status, headers={"X-Amzn-ErrorType": code})
        response = web.StreamResponse(
            headers={"Content-Type": "application/vnd.amazon.eventstream"}
        )
        await response.prepare(request)
        try:
            for part in self.parts:
                await response.write(payload_part(part))
            for message in self.raw:
                await response.write(message)
            while self.hold:
                await asyncio.sleep(0.01)
                await response.write(payload_part(b""))
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        await response.write_eof()
        return response


@contextlib.asynccontextmanager
async def fake_runtime(runtime: FakeRuntime) -> AsyncIterator[FakeRuntime]:
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/endpoints/{name}/invocations-response-stream", runtime.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    runtime.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    try:
        yield runtime
    finally:
        await runner.cleanup()


def aws_env(monkeypatch: Any, tmp_path: Any) -> None:
    """Static credentials and a Region in the standard variables; no profile or configuration
    file."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
        "AWS_CA_BUNDLE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNITTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unit-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


__all__ = [
    "SONIC_DONE",
    "FakeRuntime",
    "ScriptedServer",
    "aws_env",
    "exception_event",
    "fake_runtime",
    "sonic_chunk",
    "sonic_line",
]
