"""A protocol-faithful fake of vLLM's realtime transcription WebSocket server, for tests and
benchmarks.

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

Generation follows vLLM 0.31.0's real server on Voxtral-Mini-4B-Realtime-2602's streaming tokenizer,
as the test tier `tests/vllm` measures it against that server (the contract test runs the same
sessions against both):

- `FakeVllm(generate=True)`: one `transcription.delta` per 80 ms of buffered audio (one token), the
  first once about 0.6 s is buffered, then :data:`TAIL_TOKENS` more after the final commit than the
  audio's whole tokens, then `transcription.done`; the texts are `deltas` round-robin (empty strings
  included, as the model's padding tokens give). Without `generate` a test scripts the deltas itself
  (`FakeSession.send_delta`).
- After `transcription.done` the next commit starts a generation from zero: its text, usage and
  audio are its own.
- `usage`: `prompt_tokens` is the constant :data:`PROMPT_TOKENS` of the stream format,
  `completion_tokens` the deltas sent, `prompt_tokens_details` and `completion_tokens_details` null.
- `final` is parsed as pydantic parses a bool (`"no"` is false); a value it refuses gets
  `processing_error`.
- A generation that would pass `max_model_len` tokens kills vLLM 0.31.0's engine (seen in
  tests/vllm, streaming or after the final commit): every running generation gets
  `processing_error`, every session close 1012, and the server exits (`FakeVllm.engine_dies`). The
  bridge's session limit keeps generations below it.
- A binary frame drops the TCP connection without a close frame (the peer sees 1006), as uvicorn
  does when Starlette's `receive_text()` fails.
- `FakeVllm.stop()` is SIGTERM to vLLM's API server (as the image's entrypoint sends it): a running
  generation gets `error` (`processing_error`), then every open session is closed with 1012.
- `GET /metrics` is vLLM's whole Prometheus text (captured from vLLM 0.31.0's CPU build),
  `num_gpu_blocks` and `block_size` as configured (128, the CPU build's block size, by default).

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

Failure switches (knobs the real server has no equivalent of): `silent` (answers nothing after
`session.created`), `health_status` (HTTP status of `GET /health`, 200 by default), `health_hangs`
(`/health` never answers), `hang_after_commit` (each session stops reading after its first commit,
as a stopped process: the benchmark's held-memory phase), `FakeSession.close`, `FakeSession.abort`
(TCP drop without a close frame), `FakeSession.hang` (stops reading: a stopped process),
`FakeVllm.die` (every session aborted and the port closed: later connections are refused, as when
vLLM is down). `free_port()` gives a port on which nothing listens.

As a process (the benchmark, `make local`): `python -m voice_devtools.local.fake_vllm --port 8081
--generate` (SIGTERM closes its sessions as vLLM's does).
"""

from __future__ import annotations

import argparse
import asyncio
import binascii
import contextlib
import functools
import json
import math
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

#: Served model name the fake accepts in `session.update` unless told otherwise (the Voxtral
#: realtime model).
DEFAULT_MODEL = "mistralai/Voxtral-Mini-4B-Realtime-2602"
#: Path of vLLM's realtime WebSocket endpoint (vllm `realtime/api_router.py`).
REALTIME_PATH = "/v1/realtime"
#: Path of vLLM's health check (vLLM's OpenAI-compatible server answers 200 with an empty body).
HEALTH_PATH = "/health"
#: Path of the OpenAI-compatible model list, `{"object": "list", "data": [{"id": <served name>,
#: ...}]}`.
MODELS_PATH = "/v1/models"
#: vLLM's Prometheus metrics; the fake serves only `vllm:cache_config_info`
#: (vllm/v1/metrics/loggers.py).
METRICS_PATH = "/metrics"
#: Frame size limit of the fake's WebSocket, bytes: uvicorn's default `--ws-max-size` (16 MiB),
#: which vLLM uses.
MAX_FRAME_BYTES = 16 * 1024 * 1024

#: The `vllm:cache_config_info` block size the fake reports by default: vLLM's CPU build (the real
#: server in tests/vllm reports 128 on a CPU; on a GPU vLLM's default is 16,
#: constructs_lib/facts/capacity.py VLLM_BLOCK_SIZE).
CPU_BLOCK_SIZE = 128
#: vLLM's whole `/metrics` text as vLLM 0.31.0's CPU build served it here (tests/vllm), the template
#: of `GET /metrics`.
METRICS_TEMPLATE = Path(__file__).with_name("vllm_metrics_0.31.0_cpu.txt")

# Generation as the real server does it with Voxtral-Mini-4B-Realtime-2602's streaming tokenizer
# (tekken.json audio: 16 kHz, 12.5 tokens per second, 480 ms transcription delay, 32 left-pad
# tokens), measured against vLLM 0.31.0 in tests/vllm (test_vllm_contract.py runs the same sessions
# against this fake and the real server).
#: PCM16 samples per audio token: 80 ms at 16 kHz.
SAMPLES_PER_TOKEN = 1280
#: `usage.prompt_tokens` of every generation: BOS, 32 left-pad tokens and 6 delay tokens (480 ms /
#: 80 ms).
PROMPT_TOKENS = 39
#: Audio buffered before the first delta, in samples: 6.5 tokens (the first delta once 7.5 tokens,
#: 0.6 s, are in).
STREAM_LAG_SAMPLES = 8320
#: Tokens a generation emits beyond its audio's tokens (rounded up): after the final commit the
#: model runs through its right padding (delay + 1 + 10 tokens) less the lag above, so
#: completion_tokens = ceil(samples / 1280) + 10.
TAIL_TOKENS = 10
#: vLLM's `--max-model-len` unless told otherwise: the app's default (config/settings.py, voxtral
#: max_model_len).
DEFAULT_MAX_MODEL_LEN = 45000

#: How long the observation waits (``wait_for_event``, ``wait_closed``, ``wait_for_session``) wait
#: by default, seconds: a liveness bound for the tests and tools that watch the fake, never a speed
#: target (they return as soon as what they wait for happens; on a loaded machine an answer has
#: taken over 2 s, the earlier default).
WAIT_S = 10.0

# Error messages copied in meaning from vllm `realtime/connection.py`.
_MSG_INVALID_JSON = "Invalid JSON"
_MSG_MISSING_MODEL = "Missing required field: model"
_MSG_INVALID_AUDIO = "Invalid audio data"
_MSG_NOT_VALIDATED = (
    "Model not validated. Make sure to validate the model by sending a session.update event."
)
#: What a running generation gets when vLLM's engine core is gone (EngineDeadError,
#: vllm/v1/engine/exceptions.py).
_MSG_ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
#: What a running generation gets when vLLM stops (SIGTERM): the engine's output stream ends under
#: it.
_MSG_ENGINE_STOPPED = "Engine core client shut down (vLLM is stopping)"
#: pydantic's lax bool parsing (what `InputAudioBufferCommit.final: bool` accepts): strings
#: case-insensitively.
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


def parse_final(value: Any) -> bool:
    """`final` of a commit as pydantic's bool validator reads it (`"no"` is False).

    Raises:
        ValueError: a value pydantic refuses (vLLM answers `processing_error`).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(
        f"1 validation error for InputAudioBufferCommit\nfinal\n  Input should be a valid boolean, "
        f"unable to interpret input [type=bool_parsing, input_value={value!r}]"
    )


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now (for a "vLLM is down"
    test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@functools.cache
def _metrics_template() -> str:
    return METRICS_TEMPLATE.read_text()


class FakeSession:
    """One realtime session as the fake vLLM sees it.

    Attributes:
        id: the `session.created` id, `sess-<uuid hex>`.
        events: every client event received, parsed (dicts; a non-JSON frame is stored as `{"type":
            None, "raw": <text>}`), in arrival order; appends are stored without their audio
            (`audio_bytes` gives its decoded length) to keep memory flat.
        audio: decoded PCM16 bytes of every accepted append, concatenated (only if `record_audio`).
        audio_bytes: total decoded PCM16 bytes accepted, counted even when `record_audio` is off.
        sent: every event this fake sent to the client, parsed.
        model: the model accepted by the last valid `session.update`, or None.
        text: every delta's text sent in this session, across generations (`transcription.done`
            carries only its own generation's: `generation_text`).
        close_code: the WebSocket close code once the session ended (1006 for a dropped TCP
            connection).
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
        #: Every delta's text this session sent, across generations.
        self.text = ""
        #: The current generation: its text, deltas sent and audio samples buffered (all zero after
        #: each done).
        self.generation_text = ""
        self.deltas_sent = 0
        self.generation_samples = 0
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self._new_event = asyncio.Event()
        self._delta_index = 0

    # ---- scripted output ------------------------------------------------------------------------
    async def send_event(self, event: dict[str, Any]) -> None:
        """Send one server event (a dict serialised as pydantic's `model_dump_json` does: compact,
        UTF-8)."""
        self.sent.append(event)
        await self.connection.send(json.dumps(event, separators=(",", ":"), ensure_ascii=False))

    async def send_delta(self, delta: str) -> None:
        """Send `transcription.delta {delta}` (one token) and add it to the text
        `transcription.done` will carry."""
        self.text += delta
        self.generation_text += delta
        self.deltas_sent += 1
        await self.send_event({"type": "transcription.delta", "delta": delta})

    async def send_done(self) -> None:
        """Send `transcription.done {text, usage}` for this generation's deltas (usage as vLLM's
        `UsageInfo`: the stream format's constant prompt, one completion token per delta), then
        start the next from zero."""
        usage = {
            "prompt_tokens": PROMPT_TOKENS,
            "total_tokens": PROMPT_TOKENS + self.deltas_sent,
            "completion_tokens": self.deltas_sent,
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        }
        await self.send_event(
            {"type": "transcription.done", "text": self.generation_text, "usage": usage}
        )
        self.generating = False
        self.generation_text, self.deltas_sent, self.generation_samples = "", 0, 0

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
        """Stop reading the socket (vLLM stopped, e.g. SIGSTOP): nothing is answered, not even
        pings, and what the client sends piles up in the TCP buffers; the connection stays open."""
        self.connection.transport.pause_reading()

    def resume(self) -> None:
        """Read the socket again after `hang` (SIGCONT)."""
        self.connection.transport.resume_reading()

    # ---- observation ----------------------------------------------------------------------------
    def event_types(self) -> list[str | None]:
        """Types of the client events received so far, in order."""
        return [event.get("type") for event in self.events]

    async def wait_for_event(
        self, event_type: str | None, count: int = 1, timeout: float = WAIT_S
    ) -> dict[str, Any]:
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

    async def wait_closed(self, timeout: float = WAIT_S) -> int | None:
        """Wait until the connection has ended; return its close code (1006 when the TCP connection
        dropped).

        Raises:
            TimeoutError: if it is still open after `timeout` seconds.
        """
        async with asyncio.timeout(timeout):
            await self.closed.wait()
        return self.close_code

    # ---- vLLM's event handling (realtime/connection.py, RealtimeConnection.handle_event)
    # ----------
    async def _run(self) -> None:
        await self.send_event(
            {"type": "session.created", "id": self.id, "created": int(time.time())}
        )
        try:
            async for message in self.connection:
                if isinstance(message, bytes):
                    # Starlette's receive_text() fails on a binary frame; vLLM logs it and ends the
                    # session without a close frame: uvicorn drops the TCP connection (the peer sees
                    # 1006).
                    self.abort()
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
                await self.send_error(
                    f"'{type(event).__name__}' object has no attribute 'get'", "processing_error"
                )
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
                await self.send_error(
                    "1 validation error for InputAudioBufferAppend\naudio", "processing_error"
                )
                return
            try:
                pcm = binascii.a2b_base64(audio)
            except binascii.Error:
                pcm = b"\x00"  # undecodable: rejected below like an odd byte count
            if not pcm or len(pcm) % 2:
                await self.send_error(_MSG_INVALID_AUDIO, "invalid_audio")
                return
            self.audio_bytes += len(pcm)
            self.generation_samples += (
                len(pcm) // 2
            )  # buffered for the generation running or the next one
            if self.vllm.record_audio:
                self.audio += pcm
            if self.vllm.generate and self.generating:
                await self._generate(
                    max(0, (self.generation_samples - STREAM_LAG_SAMPLES) // SAMPLES_PER_TOKEN)
                )
        elif event_type == "input_audio_buffer.commit":
            if self.model is None:
                await self.send_error(_MSG_NOT_VALIDATED, "model_not_validated")
                return
            try:
                final = parse_final(event.get("final", False))
            except ValueError as error:
                await self.send_error(str(error), "processing_error")
                return
            if final:
                if self.generating:
                    if self.vllm.generate:
                        await self._generate(
                            math.ceil(self.generation_samples / SAMPLES_PER_TOKEN) + TAIL_TOKENS
                        )
                    if self.generating:  # not ended at max_model_len on the way
                        await self.send_done()
            elif not self.generating:  # vLLM ignores a commit while a generation runs
                self.generating = True
                if self.vllm.hang_after_commit:
                    self.hang()
                elif self.vllm.generate:
                    await self._generate(
                        max(0, (self.generation_samples - STREAM_LAG_SAMPLES) // SAMPLES_PER_TOKEN)
                    )
        else:
            await self.send_error(f"Unknown event type: {event_type}", "unknown_event")

    async def _generate(self, deltas: int) -> None:
        """Send deltas until this generation has sent `deltas` of them. One more token than
        `max_model_len` holds kills vLLM 0.31.0's engine (seen in tests/vllm: "Sampled token IDs
        exceed the max model length", EngineDeadError): every running generation gets
        `processing_error`, every session close 1012, and the server exits (the fake stops
        listening)."""
        limit = self.vllm.max_model_len - PROMPT_TOKENS
        while self.generating and self.deltas_sent < deltas:
            if self.deltas_sent >= limit:
                # Not awaited here: stopping waits for every session's handler, this one included.
                self.vllm.dying = asyncio.ensure_future(self.vllm.engine_dies())
                return
            await self.send_delta(self._next_scripted_delta())

    def _next_scripted_delta(self) -> str:
        deltas = self.vllm.deltas
        delta = deltas[self._delta_index % len(deltas)]
        self._delta_index += 1
        return delta

    def _record(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._new_event.set()


class FakeVllm:
    """The fake vLLM server: `WS /v1/realtime` and `GET /health` on 127.0.0.1, as an async context
    manager.

    Args:
        port: TCP port; 0 (default) lets the OS choose (read `port` after entering).
        model: the served model name `session.update` must carry.
        deltas: texts sent round-robin as `transcription.delta` when `generate` is on (one per
            token; include "" for the tokens the real model decodes to nothing).
        generate: generate deltas as the real server does (see the module docstring): one per 80 ms
            of audio once 0.6 s is buffered, the rest after the final commit, then
            `transcription.done`.
        delta_per_append: the former name of `generate` (kept for callers of the old name; same
            behaviour).
        record_audio: keep the decoded PCM16 of every session in `FakeSession.audio` (turn off for
            long runs).
        hang_after_commit: every session stops reading its socket after its first non-final commit.
        max_model_len: tokens one generation may hold, prompt included (vLLM's `--max-model-len`).
        num_gpu_blocks: KV-cache blocks `GET /metrics` reports in `vllm:cache_config_info` (2048:
            vLLM's CPU build with 1 GiB of KV cache, as in tests/vllm); None = `/metrics` answers
            404 (a fault knob).
        block_size: the `block_size` label of `vllm:cache_config_info` (128 on a CPU, 16 by default
            on a GPU).

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
        deltas: Iterable[str] = ("hello ", "", "world ", ""),
        generate: bool = False,
        delta_per_append: bool = False,
        record_audio: bool = True,
        hang_after_commit: bool = False,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
        num_gpu_blocks: int | None = 2048,
        block_size: int = CPU_BLOCK_SIZE,
    ) -> None:
        self.port = port
        self.model = model
        self.deltas = tuple(deltas)
        self.generate = generate or delta_per_append
        self.record_audio = record_audio
        self.hang_after_commit = hang_after_commit
        self.max_model_len = max_model_len
        self.num_gpu_blocks = num_gpu_blocks
        self.block_size = block_size
        self.silent = False
        self.health_status = HTTPStatus.OK
        self.health_hangs = False
        self.sessions: list[FakeSession] = []
        #: The engine's death once a generation passed max_model_len (a task: `engine_dies`).
        self.dying: asyncio.Future[None] | None = None
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

    async def engine_dies(self) -> None:
        """vLLM's engine core died (a generation past max_model_len): each running generation gets
        `processing_error`, then the server shuts down as on SIGTERM."""
        for session in self.open_sessions():
            if session.generating:
                session.generating = False
                with contextlib.suppress(ConnectionClosed):
                    await session.send_error(_MSG_ENGINE_DEAD, "processing_error")
        await self.stop()

    async def stop(self) -> None:
        """Stop as vLLM does on SIGTERM: a session with a generation running gets `error`
        (`processing_error`: its generation sees the engine stop), then every open session is closed
        with 1012 (service restart, uvicorn's close code on shutdown); then stop listening. (The
        real server sometimes closes before the generation notices, and sends no error: seen both
        ways in tests/vllm.)"""
        self._release_hung.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.close(close_connections=False)
        for session in self.open_sessions():
            if session.generating:
                session.generating = False
                with contextlib.suppress(ConnectionClosed):
                    await session.send_error(_MSG_ENGINE_STOPPED, "processing_error")
        await asyncio.gather(
            *(session.close(CloseCode.SERVICE_RESTART) for session in self.open_sessions()),
            return_exceptions=True,
        )
        await server.wait_closed()

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

    async def wait_for_session(self, index: int = 0, timeout: float = WAIT_S) -> FakeSession:
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

    def metrics_text(self) -> str:
        """vLLM's `/metrics` text: the captured exposition with this fake's model, KV cache and live
        sessions."""
        values = {
            "@MODEL@": self.model,
            "@NUM_GPU_BLOCKS@": str(self.num_gpu_blocks),
            "@BLOCK_SIZE@": str(self.block_size),
            "@WEBSOCKETS_ACTIVE@": f"{len(self.open_sessions()):.1f}",
            "@WEBSOCKETS_TOTAL@": f"{len(self.sessions):.1f}",
        }
        text = _metrics_template()
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        return text

    async def _process_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        if request.path == HEALTH_PATH:
            if self.health_hangs:
                await self._release_hung.wait()  # set by stop()/die()
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "stopping\n")
            status = HTTPStatus(self.health_status)
            return Response(status.value, status.phrase, Headers({"Content-Length": "0"}), b"")
        if request.path == MODELS_PATH:
            body = json.dumps(
                {
                    "object": "list",
                    "data": [{"id": self.model, "object": "model", "owned_by": "vllm"}],
                }
            )
            headers = Headers(
                {"Content-Type": "application/json", "Content-Length": str(len(body))}
            )
            return Response(HTTPStatus.OK.value, HTTPStatus.OK.phrase, headers, body.encode())
        if request.path == METRICS_PATH and self.num_gpu_blocks is not None:
            body = self.metrics_text().encode()
            headers = Headers(
                {
                    "Content-Type": "text/plain; version=1.0.0; charset=utf-8",
                    "Content-Length": str(len(body)),
                }
            )
            return Response(HTTPStatus.OK.value, HTTPStatus.OK.phrase, headers, body)
        if request.path != REALTIME_PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _handle(self, connection: ServerConnection) -> None:
        session = FakeSession(self, connection)
        self.sessions.append(session)
        self._new_session.set()
        await session._run()


async def _main() -> None:
    parser = argparse.ArgumentParser(
        description="Fake vLLM realtime server (loopback only), for benchmarks."
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("VLLM_PORT", "8081")),
        help="port (default: VLLM_PORT, as the bridge reads it, else 8081)",
    )
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--generate",
        "--delta-per-append",
        action="store_true",
        help="generate deltas as vLLM does (one per 80 ms of audio once 0.6 s is buffered)",
    )
    parser.add_argument(
        "--hang-after-commit",
        action="store_true",
        help="stop reading each session after its commit",
    )
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=DEFAULT_MAX_MODEL_LEN,
        help=f"tokens one generation may hold (default: {DEFAULT_MAX_MODEL_LEN})",
    )
    parser.add_argument(
        "--num-gpu-blocks",
        type=int,
        default=2048,
        help="KV-cache blocks GET /metrics reports (vllm:cache_config_info); default: 2048",
    )
    parser.add_argument("--no-metrics", action="store_true", help="GET /metrics answers 404")
    args = parser.parse_args()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    async with FakeVllm(
        port=args.port,
        model=args.model,
        generate=args.generate,
        record_audio=False,
        hang_after_commit=args.hang_after_commit,
        max_model_len=args.max_model_len,
        num_gpu_blocks=None if args.no_metrics else args.num_gpu_blocks,
    ):
        print(f"fake vLLM listening on 127.0.0.1:{args.port}", flush=True)
        await (
            stopping.wait()
        )  # then stop(): processing_error and close 1012 to every session, as vLLM does


if __name__ == "__main__":
    try:
        # optional, as in the bridge: a faster event loop keeps the fake out of the way
        import uvloop

        uvloop.run(_main())
    except ImportError:
        asyncio.run(_main())
