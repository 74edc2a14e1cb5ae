"""A protocol-faithful fake of vLLM's realtime transcription WebSocket server, for tests and benchmarks.

It speaks the same events, fields and error codes as vLLM's realtime endpoint, learned from
vllm-project/vllm `vllm/entrypoints/speech_to_text/realtime/`:

- `api_router.py`: the endpoint is `WS /v1/realtime`.
- `protocol.py`: event shapes. Server to client: `session.created {id, created}`,
  `transcription.delta {delta}`, `transcription.done {text, usage}`, `error {error, code}`.
  Client to server: `session.update {model}`, `input_audio_buffer.append {audio}` (base64 PCM16,
  16 kHz, mono), `input_audio_buffer.commit {final}`.
- `connection.py` (`RealtimeConnection`): `session.created` is sent on accept; a frame that is not
  JSON gets `invalid_json`; `session.update` without `model` gets `invalid_event`, with an unknown
  model `model_not_found`; an append whose audio does not decode to whole PCM16 samples (or is
  empty) gets `invalid_audio`; a commit before a successful `session.update` gets
  `model_not_validated`; a non-final commit starts generation, `{"final": true}` ends the audio and
  generation finishes with `transcription.done`; an unknown type gets `unknown_event`; any other
  exception while handling an event (a missing field, a JSON value that is not an object) gets
  `processing_error`. The socket stays open after every in-band error.

Unlike vLLM it generates no text by itself: a test scripts the deltas (`FakeSession.send_delta`,
or `FakeVllm(deltas=..., delta_per_append=True)` for one delta per append, as the benchmark uses).

Usage from a test (everything on 127.0.0.1, a free port chosen by the OS)::

    async with FakeVllm() as vllm:                 # listening on vllm.port
        ...connect a client to f"ws://127.0.0.1:{vllm.port}/v1/realtime"...
        session = await vllm.wait_for_session()    # the first session (FakeSession)
        await session.wait_for_event("input_audio_buffer.append")
        assert bytes(session.audio) == pcm16       # decoded PCM16 bytes received so far
        await session.send_delta("hello")
        vllm.silent = True                         # send nothing more, not even replies
        await session.close(1000)                  # a close frame from vLLM's side
        await vllm.die()                           # drop every TCP connection, stop listening

HTTP: `GET /health` (readiness) and `GET /v1/models` (the served model name) as vLLM answers them.

Failure switches: `silent` (answers nothing after `session.created`), `health_status` (HTTP status of
`GET /health`, 200 by default), `health_hangs` (`/health` never answers), `hang_after_commit` (each
session stops reading after its first commit, as a stopped process: the benchmark's held-memory phase),
`FakeSession.close`,
`FakeSession.abort` (TCP drop without a close frame), `FakeSession.hang` (stops reading: a stopped
process), `FakeVllm.die` (every session aborted and the
port closed: later connections are refused, as when vLLM is down). `free_port()` gives a port on
which nothing listens.

As a process (the benchmark, `make local`): `python -m voicectl.local.fake_vllm --port 8081 --delta-per-append`.
"""

from __future__ import annotations

import argparse
import asyncio
import binascii
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

#: Served model name the fake accepts in `session.update` unless told otherwise (the Voxtral realtime model).
DEFAULT_MODEL = "mistralai/Voxtral-Mini-4B-Realtime-2602"
#: Path of vLLM's realtime WebSocket endpoint (vllm `realtime/api_router.py`).
REALTIME_PATH = "/v1/realtime"
#: Path of vLLM's health check (vLLM's OpenAI-compatible server answers 200 with an empty body).
HEALTH_PATH = "/health"
#: Path of the OpenAI-compatible model list, `{"object": "list", "data": [{"id": <served name>, ...}]}`.
MODELS_PATH = "/v1/models"
#: vLLM's Prometheus metrics; the fake serves only `vllm:cache_config_info` (vllm/v1/metrics/loggers.py).
METRICS_PATH = "/metrics"
#: Frame size limit of the fake's WebSocket, bytes: uvicorn's default `--ws-max-size` (16 MiB), which vLLM uses.
MAX_FRAME_BYTES = 16 * 1024 * 1024

# Error messages copied in meaning from vllm `realtime/connection.py`.
_MSG_INVALID_JSON = "Invalid JSON"
_MSG_MISSING_MODEL = "Missing required field: model"
_MSG_INVALID_AUDIO = "Invalid audio data"
_MSG_NOT_VALIDATED = "Model not validated. Make sure to validate the model by sending a session.update event."


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now (for a "vLLM is down" test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeSession:
    """One realtime session as the fake vLLM sees it.

    Attributes:
        id: the `session.created` id, `sess-<uuid hex>`.
        events: every client event received, parsed (dicts; a non-JSON frame is stored as
            `{"type": None, "raw": <text>}`), in arrival order; appends are stored without their audio
            (`audio_bytes` gives its decoded length) to keep memory flat.
        audio: decoded PCM16 bytes of every accepted append, concatenated (only if `record_audio`).
        audio_bytes: total decoded PCM16 bytes accepted, counted even when `record_audio` is off.
        sent: every event this fake sent to the client, parsed.
        model: the model accepted by the last valid `session.update`, or None.
        close_code: the WebSocket close code once the session ended (1006 for a dropped TCP connection).
        closed: set when the connection has ended, for whatever reason.
    """

    def __init__(self, vllm: FakeVllm, connection: ServerConnection) -> None:
        self.vllm = vllm
        self.connection = connection
        self.id = f"sess-{uuid.uuid4().hex}"
        self.events: list[dict[str, Any]] = []
        self.audio = bytearray()
        self.audio_bytes = 0
        self.sent: list[dict[str, Any]] = []
        self.model: str | None = None
        self.generating = False
        self.text = ""
        self.generation_text = ""
        self.generation_audio_bytes = 0
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self._new_event = asyncio.Event()
        self._delta_index = 0

    # ---- scripted output -------------------------------------------------------------------------
    async def send_event(self, event: dict[str, Any]) -> None:
        """Send one server event (a dict serialised as pydantic's `model_dump_json` does: compact, UTF-8)."""
        self.sent.append(event)
        await self.connection.send(json.dumps(event, separators=(",", ":"), ensure_ascii=False))

    async def send_delta(self, delta: str) -> None:
        """Send `transcription.delta {delta}` and add it to the text `transcription.done` will carry."""
        self.text += delta
        self.generation_text += delta
        await self.send_event({"type": "transcription.delta", "delta": delta})

    async def send_done(self) -> None:
        """Send `transcription.done {text, usage}` for this generation's deltas (usage as vLLM's `UsageInfo`).

        As the real server does, a generation's text and usage start from zero after each `transcription.done`
        (../shared/real-vllm.md: "a commit after `transcription.done` starts a fresh generation whose text and usage
        start from zero"); `text` keeps the whole session's deltas for tests."""
        audio_tokens = (self.audio_bytes - self.generation_audio_bytes) // 2 // 1280  # 80 ms at 16 kHz per token
        completion = len(self.generation_text.split())
        usage = {
            "prompt_tokens": audio_tokens,
            "total_tokens": audio_tokens + completion,
            "completion_tokens": completion,
            "prompt_tokens_details": None,
        }
        await self.send_event({"type": "transcription.done", "text": self.generation_text, "usage": usage})
        self.generation_text, self.generation_audio_bytes = "", self.audio_bytes
        self.generating = False

    async def send_error(self, message: str, code: str | None) -> None:
        """Send an in-band `error {error, code}` event, vLLM's `ErrorEvent`."""
        await self.send_event({"type": "error", "error": message, "code": code})

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the session from vLLM's side with a close frame (waits for the close handshake)."""
        await self.connection.close(code, reason)

    def abort(self) -> None:
        """Drop the TCP connection without a close frame (vLLM crashed)."""
        self.connection.transport.abort()

    def hang(self) -> None:
        """Stop reading the socket (vLLM stopped, e.g. SIGSTOP): nothing is answered, not even pings,
        and what the client sends piles up in the TCP buffers; the connection stays open."""
        self.connection.transport.pause_reading()

    def resume(self) -> None:
        """Read the socket again after `hang` (SIGCONT)."""
        self.connection.transport.resume_reading()

    # ---- observation -----------------------------------------------------------------------------
    def event_types(self) -> list[str | None]:
        """Types of the client events received so far, in order."""
        return [event.get("type") for event in self.events]

    async def wait_for_event(self, event_type: str | None, count: int = 1, timeout: float = 2.0) -> dict[str, Any]:
        """Wait until `count` client events of `event_type` have arrived; return the last of them.

        Raises:
            TimeoutError: if they have not all arrived within `timeout` seconds.
        """
        async with asyncio.timeout(timeout):
            while True:
                matching = [event for event in self.events if event.get("type") == event_type]
                if len(matching) >= count:
                    return matching[count - 1]
                self._new_event.clear()
                await self._new_event.wait()

    async def wait_closed(self, timeout: float = 2.0) -> int | None:
        """Wait until the connection has ended; return its close code (1006 when the TCP connection dropped).

        Raises:
            TimeoutError: if it is still open after `timeout` seconds.
        """
        async with asyncio.timeout(timeout):
            await self.closed.wait()
        return self.close_code

    # ---- vLLM's event handling (realtime/connection.py, RealtimeConnection.handle_event) ----------
    async def _run(self) -> None:
        await self.send_event({"type": "session.created", "id": self.id, "created": int(time.time())})
        try:
            async for message in self.connection:
                if isinstance(message, bytes):
                    # Starlette's receive_text() fails on a binary frame; vLLM logs it and ends the session.
                    break
                await self._handle_message(message)
        except ConnectionClosed:
            pass
        finally:
            await self.connection.wait_closed()
            self.close_code = self.connection.close_code  # 1006 when the TCP connection dropped
            self.closed.set()
            self._new_event.set()

    async def _handle_message(self, message: str) -> None:
        try:
            event = json.loads(message)
        except json.JSONDecodeError:
            self._record({"type": None, "raw": message})
            if not self.vllm.silent:
                await self.send_error(_MSG_INVALID_JSON, "invalid_json")
            return
        if not isinstance(event, dict):
            self._record({"type": None, "raw": message})
            if not self.vllm.silent:  # vLLM: event.get() raises AttributeError -> processing_error
                await self.send_error(f"'{type(event).__name__}' object has no attribute 'get'", "processing_error")
            return
        event_type = event.get("type")
        if event_type == "input_audio_buffer.append":
            self._record({key: value for key, value in event.items() if key != "audio"})
        else:
            self._record(event)
        if self.vllm.silent:
            return
        if event_type == "session.update":
            model = event.get("model")
            if model is None:
                await self.send_error(_MSG_MISSING_MODEL, "invalid_event")
            elif model != self.vllm.model:
                await self.send_error(f"The model `{model}` does not exist.", "model_not_found")
            else:
                self.model = model
        elif event_type == "input_audio_buffer.append":
            audio = event.get("audio")
            if not isinstance(audio, str):  # vLLM: pydantic validation error -> processing_error
                await self.send_error("1 validation error for InputAudioBufferAppend\naudio", "processing_error")
                return
            try:
                pcm = binascii.a2b_base64(audio)
            except binascii.Error:
                pcm = b"\x00"  # undecodable: rejected below like an odd byte count
            if not pcm or len(pcm) % 2:
                await self.send_error(_MSG_INVALID_AUDIO, "invalid_audio")
                return
            self.audio_bytes += len(pcm)
            if self.vllm.record_audio:
                self.audio += pcm
            if self.vllm.delta_per_append and self.generating:
                await self.send_delta(self._next_scripted_delta())
        elif event_type == "input_audio_buffer.commit":
            if self.model is None:
                await self.send_error(_MSG_NOT_VALIDATED, "model_not_validated")
            elif event.get("final"):
                if self.generating:
                    await self.send_done()
            else:
                self.generating = True
                if self.vllm.hang_after_commit:
                    self.hang()
        else:
            await self.send_error(f"Unknown event type: {event_type}", "unknown_event")

    def _next_scripted_delta(self) -> str:
        deltas = self.vllm.deltas
        delta = deltas[self._delta_index % len(deltas)]
        self._delta_index += 1
        return delta

    def _record(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._new_event.set()


class FakeVllm:
    """The fake vLLM server: `WS /v1/realtime` and `GET /health` on 127.0.0.1, as an async context manager.

    Args:
        port: TCP port; 0 (default) lets the OS choose (read `port` after entering).
        model: the served model name `session.update` must carry.
        deltas: texts sent round-robin as `transcription.delta` when `delta_per_append` is on.
        delta_per_append: after a non-final commit, answer every append with one delta (benchmark mode).
        record_audio: keep the decoded PCM16 of every session in `FakeSession.audio` (turn off for long runs).
        hang_after_commit: every session stops reading its socket after its first non-final commit.
        num_gpu_blocks: KV-cache blocks `GET /metrics` reports in `vllm:cache_config_info` (as vLLM 0.31.0 does after
            its profile run); None = `/metrics` answers 404.

    Attributes:
        sessions: every session accepted, in order (`FakeSession`).
        silent: when True, sessions answer nothing (events are still recorded).
        health_status: HTTP status `GET /health` returns (200 = ready).
        health_hangs: when True, `GET /health` never answers.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        model: str = DEFAULT_MODEL,
        deltas: Iterable[str] = ("hello ", "world "),
        delta_per_append: bool = False,
        record_audio: bool = True,
        hang_after_commit: bool = False,
        num_gpu_blocks: int | None = None,
    ) -> None:
        self.port = port
        self.model = model
        self.deltas = tuple(deltas)
        self.delta_per_append = delta_per_append
        self.record_audio = record_audio
        self.hang_after_commit = hang_after_commit
        self.num_gpu_blocks = num_gpu_blocks
        self.silent = False
        self.health_status = HTTPStatus.OK
        self.health_hangs = False
        self.sessions: list[FakeSession] = []
        self._server: Server | None = None
        self._new_session = asyncio.Event()
        self._release_hung = asyncio.Event()

    @property
    def url(self) -> str:
        """WebSocket URL of the realtime endpoint."""
        return f"ws://127.0.0.1:{self.port}{REALTIME_PATH}"

    async def start(self) -> FakeVllm:
        """Start listening on 127.0.0.1 (`port`)."""
        self._server = await serve(
            self._handle,
            "127.0.0.1",
            self.port,
            process_request=self._process_request,
            compression=None,
            max_size=MAX_FRAME_BYTES,
            ping_interval=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Close every session with 1001 and stop listening."""
        self._release_hung.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def die(self) -> None:
        """Crash: drop every open TCP connection without a close frame and stop listening."""
        self._release_hung.set()
        if self._server is None:
            return
        self._server.close(close_connections=False)
        for session in self.sessions:
            session.abort()
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> FakeVllm:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def wait_for_session(self, index: int = 0, timeout: float = 2.0) -> FakeSession:
        """Wait until session number `index` (0-based, in accept order) exists and return it.

        Raises:
            TimeoutError: if fewer sessions were accepted within `timeout` seconds.
        """
        async with asyncio.timeout(timeout):
            while len(self.sessions) <= index:
                self._new_session.clear()
                await self._new_session.wait()
        return self.sessions[index]

    def open_sessions(self) -> list[FakeSession]:
        """Sessions whose connection has not ended yet."""
        return [session for session in self.sessions if not session.closed.is_set()]

    async def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == HEALTH_PATH:
            if self.health_hangs:
                await self._release_hung.wait()  # set by stop()/die()
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "stopping\n")
            status = HTTPStatus(self.health_status)
            return Response(status.value, status.phrase, Headers({"Content-Length": "0"}), b"")
        if request.path == MODELS_PATH:
            body = json.dumps({"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "vllm"}]})
            headers = Headers({"Content-Type": "application/json", "Content-Length": str(len(body))})
            return Response(HTTPStatus.OK.value, HTTPStatus.OK.phrase, headers, body.encode())
        if request.path == METRICS_PATH and self.num_gpu_blocks is not None:
            # One sample whose labels are CacheConfig's fields as strings (CacheConfig.metrics_info), trimmed.
            body = ("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                    "# TYPE vllm:cache_config_info gauge\n"
                    f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",'
                    f'gpu_memory_utilization="0.9",num_gpu_blocks="{self.num_gpu_blocks}"}} 1.0\n')
            headers = Headers({"Content-Type": "text/plain; version=0.0.4", "Content-Length": str(len(body))})
            return Response(HTTPStatus.OK.value, HTTPStatus.OK.phrase, headers, body.encode())
        if request.path != REALTIME_PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _handle(self, connection: ServerConnection) -> None:
        session = FakeSession(self, connection)
        self.sessions.append(session)
        self._new_session.set()
        await session._run()


async def _main() -> None:
    parser = argparse.ArgumentParser(description="Fake vLLM realtime server (loopback only), for benchmarks.")
    parser.add_argument("--port", type=int, default=int(os.environ.get("VLLM_PORT", "8081")),
                        help="port (default: VLLM_PORT, as the bridge reads it, else 8081)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--delta-per-append", action="store_true", help="answer each append with one delta")
    parser.add_argument("--hang-after-commit", action="store_true", help="stop reading each session after its commit")
    parser.add_argument("--num-gpu-blocks", type=int, default=None,
                        help="KV-cache blocks GET /metrics reports (vllm:cache_config_info); default: no /metrics")
    args = parser.parse_args()
    async with FakeVllm(port=args.port, model=args.model, delta_per_append=args.delta_per_append, record_audio=False,
                        hang_after_commit=args.hang_after_commit, num_gpu_blocks=args.num_gpu_blocks):
        print(f"fake vLLM listening on 127.0.0.1:{args.port}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        import uvloop  # optional, as in the bridge: a faster event loop keeps the fake out of the way

        uvloop.run(_main())
    except ImportError:
        asyncio.run(_main())
