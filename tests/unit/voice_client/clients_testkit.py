"""What the client tests share: a parser of the client subcommands, the committed recording, an
in-memory realtime server, the real bridge in front of the fake vLLM, a container that stops
answering, a loopback HTTP server that answers SageMaker's InvokeEndpointWithResponseStream, and a
command started to be stopped with Ctrl-C. The fixtures over them: ``conftest.py`` beside this
file."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from tests.conftest import ROOT
from voice_client import mic
from voice_client.realtime import TransportClosed
from voice_devtools.local.fake_vllm import FakeVllm
from voicectl.commands import (
    mic as mic_command,
    speak as speak_command,
    transcribe as transcribe_command,
)


def popen_interruptible(args: list[str], **popen_options) -> subprocess.Popen:
    """``subprocess.Popen(args, **popen_options)`` with SIGINT at its default action in the command,
    as a terminal starts it, also when this process ignores SIGINT: a test run started in the
    background by a shell without job control ignores it, the command would inherit that, and the
    test's Ctrl-C would do nothing (the command then runs to its end: exit 0, or never). A handler,
    unlike an ignored signal, does not survive ``exec``."""
    ignoring = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignoring:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(args, **popen_options)
    finally:
        if ignoring:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


RECORDING = ROOT / "tests" / "clients" / "data" / "speech_22k_stereo.wav"
"""espeak-ng speech, 22.05 kHz, 2 channels, 16-bit, 3.66 s (see tests/clients/data/README.md; the
README's commands use this path)."""


def client_parser() -> argparse.ArgumentParser:
    """A parser with only the client subcommands (``voicectl.operations.preflight`` belongs to
    another branch)."""
    parser = argparse.ArgumentParser(prog="voicectl")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in (transcribe_command, speak_command, mic_command):
        module.register(subparsers)
    return parser


def serve_mic_page(args: argparse.Namespace) -> contextlib.AbstractContextManager[str]:
    """Serve the mic page for ``voicectl mic`` arguments as the command does (its settings, its
    terminal lines), without waiting for Ctrl-C; yields the page's URL."""
    return mic.serve(mic_command.page_settings(args), log=mic_command.log)


# ---- an in-memory realtime server --------------------------------------------------------------


@dataclass
class MemorySession:
    """What the in-memory server saw on one stream."""

    events: list[dict] = field(default_factory=list)
    audio: bytearray = field(default_factory=bytearray)
    closed: bool = False

    def types(self) -> list[str]:
        return [event["type"] for event in self.events]


class MemoryTransport:
    """A RealtimeTransport that answers like vLLM: one delta per append (from the script), done on
    final commit; a later commit starts the next generation on the same stream."""

    def __init__(self, server: MemoryServer, session: MemorySession) -> None:
        self.server = server
        self.session = session
        self.inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self.inbox.put_nowait(json.dumps({"type": "session.created"}))
        self.text = ""  # the current generation's
        self.generation_audio = (
            0  # PCM16 bytes of the current generation, as the bridge counts them
        )

    async def send_text(self, text: str) -> None:
        if self.session.closed:
            raise TransportClosed("closed")
        event = json.loads(text)
        appends = sum(1 for e in self.session.events if e["type"] == "input_audio_buffer.append")
        if event["type"] == "input_audio_buffer.append" and self.server.drop_at == (
            len(self.server.sessions),
            appends,
        ):
            self.server.drop_at = None
            self.session.closed = True
            self.inbox.put_nowait(None)
            raise TransportClosed("network drop (scripted)")
        self.session.events.append(event)
        if event["type"] == "input_audio_buffer.append":
            pcm = base64.b64decode(event["audio"])
            self.session.audio += pcm
            self.generation_audio += len(pcm)
            number = len(self.server.sessions)
            if self.server.error_at is not None and self.server.error_at[:2] == (number, appends):
                _, _, code, message = self.server.error_at
                self.server.error_at = None
                self.inbox.put_nowait(json.dumps({"type": "error", "error": message, "code": code}))
                self.inbox.put_nowait(None)  # the bridge closes the stream after its own errors
                return
            limit = self.server.audio_limit_bytes
            if limit is not None and self.generation_audio > limit:
                self.inbox.put_nowait(
                    json.dumps(
                        {
                            "type": "error",
                            "code": "session_limit",
                            "error": "the session reached its audio limit (the model's ...)",
                            "limit_s": limit / 32000,
                            "audio_s": (self.generation_audio - len(pcm)) / 32000,
                        }
                    )
                )
                self.inbox.put_nowait(None)
                self.session.closed = True
                return
            if self.server.error_on_append is not None:
                self.inbox.put_nowait(
                    json.dumps(
                        {"type": "error", "error": "boom", "code": self.server.error_on_append}
                    )
                )
                return
            delta = f"w{len(self.server.sessions)}.{appends} "
            self.text += delta
            self.inbox.put_nowait(json.dumps({"type": "transcription.delta", "delta": delta}))
        elif event["type"] == "input_audio_buffer.commit" and event.get("final"):
            if self.server.drop_on_final == len(self.server.sessions):
                self.server.drop_on_final = None
                self.inbox.put_nowait(None if self.server.drop_cleanly else "")
                self.session.closed = True
            elif not self.server.never_done:
                done_text = None if self.server.null_done_text else self.text
                self.inbox.put_nowait(json.dumps({"type": "transcription.done", "text": done_text}))
                self.text, self.generation_audio = "", 0

    async def receive_text(self) -> str | None:
        message = await self.inbox.get()
        if message == "":  # scripted reset: the connection broke rather than closed
            raise TransportClosed("connection reset (scripted)")
        return message

    async def close(self) -> None:
        self.session.closed = True
        self.inbox.put_nowait(None)


class MemoryServer:
    """Opens MemoryTransports. Switches: ``drop_at=(session number, append index)`` (the send
    fails), ``error_at=(session number, append index, code, message)`` (an error event, then the
    stream ends), ``drop_on_final=session number`` (reset instead of done), ``audio_limit_bytes``
    (``session_limit`` per generation, with the bridge's fields), ``error_on_append``,
    ``never_done``, ``null_done_text``."""

    def __init__(self) -> None:
        self.sessions: list[MemorySession] = []
        self.drop_at: tuple[int, int] | None = None
        self.error_at: tuple[int, int, str, str] | None = None
        self.drop_on_final: int | None = None
        self.drop_cleanly = False
        self.audio_limit_bytes: int | None = None
        self.error_on_append: str | None = None
        self.never_done = False
        self.null_done_text = False

    async def open(self) -> MemoryTransport:
        session = MemorySession()
        self.sessions.append(session)
        return MemoryTransport(self, session)


# ---- a container that stops answering (the mic page's watchdog) --------------------------------


class QuietBridge:
    """A container WebSocket on 127.0.0.1 that answers ``answers`` appends with a delta each (then
    nothing more), and the final commit with ``transcription.done`` only while ``answer_done``;
    ``answers=None`` answers everything.

    ``gate``: when an Event, each stream accepts the WebSocket at once (as the bridge does,
    SageMaker requires it) but sends its first event only once the test sets it (``held`` counts the
    streams that reached it). ``refusal``: when set, that first event is the bridge's refusal
    instead of ``session.created``: its ``upstream_unavailable`` error event, then a 1011 close
    (services/bridge/server.py, vLLM not reachable). ``audio_bytes``: PCM16 bytes received in
    appends, over all streams."""

    REFUSAL: ClassVar[dict[str, str]] = {
        "type": "error",
        "error": "the model server is not reachable (Connect call failed); retry later",
        "code": "upstream_unavailable",
    }

    def __init__(self) -> None:
        self.answers: int | None = None
        self.answer_done = True
        self.gate: threading.Event | None = None
        self.refusal: dict | None = None
        self.held = 0
        self.streams = 0
        self.closed = 0
        self.audio_bytes = 0

    async def handle(self, connection) -> None:
        self.streams += 1
        text, appends = "", 0
        if (gate := self.gate) is not None:
            self.held += 1
            while not gate.is_set():  # the client's events wait in the socket meanwhile
                await asyncio.sleep(0.005)
        if self.refusal is not None:
            await connection.send(json.dumps(self.refusal))
            await connection.close(1011)
            self.closed += 1
            return
        await connection.send(json.dumps({"type": "session.created"}))
        try:
            async for message in connection:
                event = json.loads(message)
                if event["type"] == "input_audio_buffer.append":
                    appends += 1
                    self.audio_bytes += len(base64.b64decode(event["audio"]))
                    if self.answers is None or appends <= self.answers:
                        text += "word "
                        await connection.send(
                            json.dumps({"type": "transcription.delta", "delta": "word "})
                        )
                elif (
                    event["type"] == "input_audio_buffer.commit"
                    and event.get("final")
                    and self.answer_done
                ):
                    await connection.send(json.dumps({"type": "transcription.done", "text": text}))
                    text = ""
        finally:
            self.closed += 1

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        """Serve on 127.0.0.1 from a thread of its own; yields the container URL."""
        from websockets.asyncio.server import serve

        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()

        async def start():
            return await serve(self.handle, "127.0.0.1", 0)

        server = asyncio.run_coroutine_threadsafe(start(), loop).result(5)

        async def stop():
            server.close()
            await server.wait_closed()

        try:
            yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/invocations-bidirectional-stream"
        finally:
            if self.gate is not None:
                self.gate.set()  # a held stream would keep the server from closing
            with contextlib.suppress(TimeoutError):
                asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)


# ---- the real bridge and the fake vLLM on a background event loop ------------------------------


class Servers:
    """Fake vLLM + bridge on a background event loop."""

    def __init__(self, bridge_token: str | None = None, **fake_options) -> None:
        self.bridge_token = bridge_token
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.vllm = FakeVllm(**fake_options)
        self.bridge = None

    def call(self, coroutine, timeout: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def __enter__(self) -> Servers:
        self.thread.start()

        from bridge.server import Bridge
        from contracts.bridge_env import BridgeEnvironment

        async def start() -> None:
            await self.vllm.start()
            settings = BridgeEnvironment.defaults(
                host="127.0.0.1",
                port=0,
                vllm_port=self.vllm.port,
                drain_s=0,
                bridge_token=self.bridge_token,
            )
            self.bridge = await Bridge(settings).start()

        self.call(start())
        return self

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.bridge.port}/invocations-bidirectional-stream"

    def __exit__(self, *exc_info: object) -> None:
        async def stop() -> None:
            await self.bridge.shutdown(drain_s=0)
            await self.vllm.stop()

        self.call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


# ---- a loopback stand-in for SageMaker's InvokeEndpointWithResponseStream ----------------------


def event_stream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """Encode one AWS event stream message (application/vnd.amazon.eventstream)."""
    from smithy_aws_event_stream.events import EventMessage

    return EventMessage(headers=headers, payload=payload).encode()


def payload_part(data: bytes) -> bytes:
    return event_stream_message(
        {
            ":message-type": "event",
            ":event-type": "PayloadPart",
            ":content-type": "application/octet-stream",
        },
        data,
    )


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: bytes


#: How often a stand-in HTTP server's loop checks whether it was asked to shut down, seconds
#: (``serve_forever``).
SHUTDOWN_POLL_S = 0.01


class ResponseStreamServer:
    """HTTP server on 127.0.0.1 playing SageMaker Runtime for botocore: replies with a queued status
    and body."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.replies: list[tuple[int, dict[str, str], bytes]] = []
        self.missing_bytes = (
            0  # > 0: the reply declares this many bytes more than it sends (a cut connection)
        )
        self.stall_s = 0.0  # seconds to wait before dropping such a connection
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append(
                    RecordedRequest(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body
                    )
                )
                status, headers, reply = server.replies.pop(0)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply) + server.missing_bytes))
                self.end_headers()
                self.wfile.write(reply)
                self.wfile.flush()
                if server.missing_bytes:  # promised more than sent: stall, then drop the connection
                    time.sleep(server.stall_s)
                    self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        # shutdown() returns once serve_forever's loop next looks at its flag: with the default poll
        # interval (0.5 s) every test that used this server waited up to half a second at its end.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
        )

    def reply_stream(self, parts: list[bytes]) -> None:
        """Queue a 200 reply whose body is these payload parts as event stream messages."""
        self.replies.append(
            (
                200,
                {
                    "Content-Type": "application/vnd.amazon.eventstream",
                    "X-Amzn-Invoked-Production-Variant": "AllTraffic",
                },
                b"".join(payload_part(part) for part in parts),
            )
        )

    def reply_raw(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.replies.append((status, headers, body))

    def client(self, read_timeout: float = 60):
        """A boto3 sagemaker-runtime client pointed at this server, with dummy static
        credentials."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "sagemaker-runtime",
            region_name="us-east-1",
            endpoint_url=self.url,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="secret",
            config=Config(retries={"max_attempts": 1}, read_timeout=read_timeout),
        )

    def __enter__(self) -> ResponseStreamServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
