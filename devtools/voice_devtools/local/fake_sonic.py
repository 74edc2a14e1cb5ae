"""A stand-in for Cartesia Sonic's Marketplace container, for ``make local`` and the tests: ``GET
/ping`` and ``POST /invocations`` answering with newline-delimited JSON audio events, as the
container does.

Facts from Cartesia's SageMaker listing documentation (github.com/cartesia-ai/cartesia-aws,
``sonic-3-6-jumpstart/README.md``):

- The request is one JSON object: ``context_id``, ``transcript``, ``voice`` (``{"mode": "id", "id":
  ...}``, only ``id`` mode), ``output_format`` (only ``container: raw``; ``encoding``,
  ``sample_rate``), optional ``language``, ``add_timestamps``.
- The response is a stream of JSON events, each ending with a line break: ``chunk`` (``status_code``
  206, ``done`` false, base64 audio in ``data`` of at most 20 ms, ``sampling_rate``, ``step_time``),
  ``timestamps`` (``word_timestamps``) when asked for, then ``done`` (``done`` true, ``status_code``
  200).
- A malformed request is answered with HTTP 422, a container with no free generation slot with 429
  (at most 4 generations at a time); SageMaker turns both into a ModelError carrying that status.

The audio is not speech: a tone whose length follows the text (:func:`stand_in_audio`), the same for
the same request, so that a test can compare what the client wrote sample for sample. Failure
switches for tests: ``fail_after_chunks`` (an ``error`` event, ``status_code`` 500, after N chunks)
and ``drop_after_chunks`` (the connection is cut after N chunks, without the end of the response).

As a process: ``python -m voice_devtools.local.fake_sonic --port 8090``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voice_client.sonic import SONIC_LANGUAGES, SONIC_SAMPLE_RATES_HZ
from voice_devtools.local.serving import listen_sockets, serve_asgi

CHUNK_MS = 20
"""Largest audio chunk per ``chunk`` event, in milliseconds (the container's documented maximum)."""

MAX_GENERATIONS = 4
"""Generations one container runs at once; one more is answered 429 ("at most 4 concurrent
generation requests")."""

ENCODINGS = ("pcm_s16le", "pcm_f32le")
"""Raw encodings the stand-in produces (Cartesia's raw output also offers mu-law and A-law, which it
does not)."""

SECONDS_PER_CHARACTER = 0.06
"""Length of the stand-in audio per character of the transcript (about the pace of speech)."""

MAX_AUDIO_S = 30.0
"""Longest stand-in audio, seconds."""

TONE_HZ = 440.0
TONE_AMPLITUDE = 0.25
"""The stand-in audio: a 440 Hz sine at a quarter of full scale."""

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class RequestError(Exception):
    """The request is malformed (HTTP 422); the message names the field and what is allowed."""


def stand_in_audio(transcript: str, sample_rate_hz: int) -> np.ndarray:
    """The stand-in's audio for ``transcript``: float32 samples in [-1, 1], mono, at
    ``sample_rate_hz``.

    Length: :data:`SECONDS_PER_CHARACTER` per character, at most :data:`MAX_AUDIO_S`, at least one
    chunk.
    """
    seconds = min(MAX_AUDIO_S, max(CHUNK_MS / 1000, len(transcript) * SECONDS_PER_CHARACTER))
    samples = np.arange(round(seconds * sample_rate_hz), dtype=np.float64)
    return (TONE_AMPLITUDE * np.sin(2 * math.pi * TONE_HZ * samples / sample_rate_hz)).astype(
        np.float32
    )


def encode_audio(samples: np.ndarray, encoding: str) -> bytes:
    """``samples`` (float32) as raw ``pcm_s16le`` or ``pcm_f32le`` bytes."""
    if encoding == "pcm_f32le":
        return samples.astype("<f4").tobytes()
    return np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2").tobytes()


def parse_request(body: bytes) -> dict[str, Any]:
    """Check a request body as the container does; return it parsed.

    Raises:
        RequestError: not JSON, or a field missing or not allowed (every problem named).
    """
    try:
        request = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RequestError(f"the request body is not JSON ({error})") from None
    if not isinstance(request, dict):
        raise RequestError("the request body must be a JSON object")
    problems = []
    if not isinstance(request.get("context_id"), str):
        problems.append("context_id is required (a string)")
    transcript = request.get("transcript")
    if not isinstance(transcript, str) or not transcript.strip():
        problems.append("transcript is required (a non-empty string)")
    voice = request.get("voice")
    if (
        not isinstance(voice, dict)
        or voice.get("mode") != "id"
        or not isinstance(voice.get("id"), str)
    ):
        problems.append(
            'voice must be {"mode": "id", "id": "<voice id>"} (only id mode is supported)'
        )
    output = request.get("output_format")
    if not isinstance(output, dict) or output.get("container") != "raw":
        problems.append(
            'output_format must be {"container": "raw", "encoding": ..., "sample_rate": ...}'
        )
    else:
        if output.get("encoding") not in ENCODINGS:
            problems.append(
                f"output_format.encoding {output.get('encoding')!r} is not one of "
                f"{', '.join(ENCODINGS)}"
            )
        if output.get("sample_rate") not in SONIC_SAMPLE_RATES_HZ:
            problems.append(
                f"output_format.sample_rate {output.get('sample_rate')!r} is not one of "
                f"{', '.join(map(str, SONIC_SAMPLE_RATES_HZ))}"
            )
    if "language" in request and request["language"] not in SONIC_LANGUAGES:
        problems.append(f"language {request['language']!r} is not supported")
    if problems:
        raise RequestError("; ".join(problems))
    return request


@dataclass
class SonicCall:
    """One ``/invocations`` call as the stand-in saw it.

    Attributes:
        request: the parsed request body.
        audio: the raw audio bytes sent in ``chunk`` events, in order (what the client should
            write).
        events: every event sent, parsed.
        client_closed: the caller closed the connection before the response ended (the
            generation stopped then).
        full_audio_bytes: the raw audio bytes of the whole response (``audio`` has fewer when
            it was cut).
    """

    request: dict[str, Any]
    audio: bytearray = field(default_factory=bytearray)
    events: list[dict[str, Any]] = field(default_factory=list)
    client_closed: bool = False
    full_audio_bytes: int = 0

    @property
    def cancelled(self) -> bool:
        """The caller closed the connection before all of the audio was sent: the request was
        cancelled."""
        return self.client_closed and len(self.audio) < self.full_audio_bytes


class FakeSonic:
    """The stand-in container on ``127.0.0.1`` (an async context manager; ``port`` 0 lets the OS
    choose).

    Attributes:
        calls: every accepted call, in order (:class:`SonicCall`).
        fail_after_chunks: when set, an ``error`` event (status 500) follows that many chunks, then
            the response ends.
        drop_after_chunks: when set, the connection is cut after that many chunks.
        pace: wall-clock seconds per second of audio (0: as fast as the events can be written).
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, pace: float = 0.0) -> None:
        self.host = host
        self.port = port
        self.pace = pace
        self.calls: list[SonicCall] = []
        self.fail_after_chunks: int | None = None
        self.drop_after_chunks: int | None = None
        self._generations = 0
        self._shutdown = asyncio.Event()
        self._server: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def generations(self) -> int:
        """Generations running now, each holding one of the :data:`MAX_GENERATIONS` slots."""
        return self._generations

    async def start(self) -> FakeSonic:
        sockets = listen_sockets(self.host, self.port)
        self.port = sockets[0].getsockname()[1]
        self._shutdown = asyncio.Event()
        self._server = asyncio.create_task(serve_asgi(self, sockets, self._shutdown))
        return self

    async def stop(self) -> None:
        self._shutdown.set()
        if self._server is not None:
            await self._server

    async def __aenter__(self) -> FakeSonic:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ---- ASGI -----------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]  # lifespan.startup, then lifespan.shutdown
                await send({"type": f"{kind}.complete"})
                if kind == "lifespan.shutdown":
                    return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and scope["path"] == "/ping":
            await _answer(send, 200, b"")
        elif scope["method"] == "POST" and scope["path"] == "/invocations":
            await self._invocations(receive, send)
        else:
            await _answer(
                send,
                404,
                json.dumps({"error": f"{scope['method']} {scope['path']} not found"}).encode(),
            )

    async def _invocations(self, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            request = parse_request(bytes(body))
        except RequestError as error:
            await _answer(send, 422, json.dumps({"status_code": 422, "error": str(error)}).encode())
            return
        if self._generations >= MAX_GENERATIONS:
            await _answer(
                send,
                429,
                json.dumps(
                    {
                        "status_code": 429,
                        "error": f"all {MAX_GENERATIONS} generation slots are busy",
                    }
                ).encode(),
            )
            return
        self._generations += 1
        try:
            await self._generate_until_closed(request, receive, send)
        finally:
            self._generations -= 1

    async def _generate_until_closed(
        self, request: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        """Generate, stopping when the caller closes the connection (``http.disconnect``): its slot
        is free then."""
        generation = asyncio.ensure_future(self._generate(request, send))
        call_index = len(self.calls)  # the call _generate appends

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        watch = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({generation, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if watch.done() and not generation.done() and len(self.calls) > call_index:
                self.calls[call_index].client_closed = True
            for task in (generation, watch):
                task.cancel()
            await asyncio.gather(generation, watch, return_exceptions=True)
        if not generation.cancelled() and generation.exception() is not None:
            raise generation.exception()  # type: ignore[misc]

    async def _generate(self, request: dict[str, Any], send: Send) -> None:
        call = SonicCall(request)
        self.calls.append(call)
        output = request["output_format"]
        rate, encoding = output["sample_rate"], output["encoding"]
        audio = stand_in_audio(request["transcript"], rate)
        call.full_audio_bytes = len(encode_audio(audio, encoding))
        step = rate * CHUNK_MS // 1000
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/jsonlines")],
            }
        )
        context_id = request["context_id"]

        async def emit(event: dict[str, Any]) -> None:
            call.events.append(event)
            line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
            await send({"type": "http.response.body", "body": line, "more_body": True})

        for index, start in enumerate(range(0, len(audio), step)):
            if index == self.drop_after_chunks:
                raise ConnectionAbortedError("drop_after_chunks: the stand-in cuts the connection")
            if index == self.fail_after_chunks:
                await emit(
                    {
                        "type": "error",
                        "context_id": context_id,
                        "status_code": 500,
                        "done": True,
                        "error": "the stand-in failed mid-generation (fail_after_chunks)",
                    }
                )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            data = encode_audio(audio[start : start + step], encoding)
            call.audio += data
            await emit(
                {
                    "type": "chunk",
                    "context_id": context_id,
                    "status_code": 206,
                    "done": False,
                    "data": base64.b64encode(data).decode(),
                    "sampling_rate": rate,
                    "step_time": round((start + step) / rate, 4),
                }
            )
            await asyncio.sleep(self.pace * CHUNK_MS / 1000)
        if request.get("add_timestamps"):
            words = request["transcript"].split()
            each = len(audio) / rate / max(1, len(words))
            await emit(
                {
                    "type": "timestamps",
                    "context_id": context_id,
                    "status_code": 206,
                    "done": False,
                    "word_timestamps": {
                        "words": words,
                        "start": [round(i * each, 3) for i in range(len(words))],
                        "end": [round((i + 1) * each, 3) for i in range(len(words))],
                    },
                }
            )
        await emit({"type": "done", "context_id": context_id, "status_code": 200, "done": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _main() -> None:
    parser = argparse.ArgumentParser(
        description="Sonic container stand-in (loopback only): GET /ping, POST "
        "/invocations with newline-delimited JSON audio events."
    )
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument(
        "--pace",
        type=float,
        default=0.0,
        help="wall-clock seconds per second of audio (default 0: as fast as possible)",
    )
    args = parser.parse_args()
    async with FakeSonic(port=args.port, pace=args.pace) as sonic:
        print(f"Sonic stand-in listening on {sonic.url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main())
