"""The transcription session shared by ``transcribe`` and ``mic``: vLLM's realtime protocol over any text transport.

Protocol (vLLM ``vllm/entrypoints/speech_to_text/realtime/connection.py`` and ``protocol.py``; see design.md):
the server sends ``session.created`` on accept; the client sends ``session.update {model}`` (required before any
commit), an ``input_audio_buffer.commit`` that starts generation, ``input_audio_buffer.append {audio}`` events
carrying base64 PCM16 at 16 kHz mono, and a final ``input_audio_buffer.commit {final: true}`` that ends the audio.
The server answers with ``transcription.delta {delta}`` events and one ``transcription.done {text, usage}``; errors
arrive in-band as ``error {error, code}`` and leave the socket open, so the client must end the session itself.

A transport carries JSON text messages both ways: :class:`WebSocketTransport` talks to a container's bridge
directly (``--url``); :mod:`voicectl.sagemaker_stream` carries the same messages through SageMaker's
bidirectional streaming API. Each message maps to one WebSocket text frame at the container.

Long audio: the model's context bounds one session (vLLM ``--max-model-len`` tokens, one token per 80 ms of audio
per the Voxtral-Mini-4B-Realtime-2602 model card: 131072 tokens ~ 3 h by default, 45000 tokens = 1 h in the card's
example). :func:`transcribe_stream` ends a session before ``session_limit_s`` of audio, preferring a quiet chunk
in the last :data:`ROLLOVER_WINDOW_S`, opens a new one and joins the transcripts. A stream dropped by the network
is reopened once and the audio not yet handed to the dropped stream is sent on the new one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from voicectl.audio import CHUNK_BYTES, PCM16_BYTES_PER_SAMPLE, TARGET_SAMPLE_RATE_HZ, iter_chunks

DEFAULT_MODEL = "mistralai/Voxtral-Mini-4B-Realtime-2602"
"""Model name sent in ``session.update``; vLLM accepts only its served model name (error ``model_not_found``)."""

DEFAULT_SESSION_LIMIT_S = 3000.0
"""Audio seconds per session before the client starts a new one: 50 min, below the 1 h (45000 tokens x 80 ms)
context of the model card's example ``--max-model-len``; raise it when the endpoint serves a longer context."""

ROLLOVER_WINDOW_S = 10.0
"""Seconds before the session limit in which the client rolls over at the first quiet chunk (cuts fewer words)."""

ROLLOVER_WINDOW_MAX_FRACTION = 0.2
"""The rollover window never exceeds this fraction of the session limit (short limits keep long sessions)."""

QUIET_RMS = 0.01
"""RMS (full scale = 1.0, i.e. -40 dBFS) under which a 128 ms chunk counts as quiet for a rollover."""

DONE_TIMEOUT_S = 60.0
"""Seconds to wait for ``transcription.done`` after the final commit before giving up."""

SETTLE_AFTER_DROP_S = 1.0
"""Seconds allowed, after a drop, for deltas already received to be read before the stream is closed."""

MAX_REOPENS = 1
"""Times a dropped stream is reopened within one transcription."""

ERROR_HINTS: dict[str, str] = {
    "model_not_found": "pass --model with the model name the endpoint serves (vLLM --served-model-name)",
    "model_not_validated": "the server did not accept session.update; check --model",
    "invalid_audio": "the audio chunk was rejected; this is a client bug, please report it with the input file",
    "invalid_json": "the server could not parse a message; check that nothing between client and vLLM rewrites it",
    "invalid_event": "the server rejected an event; check that the endpoint runs the expected vLLM version",
    "unknown_event": "the server does not know an event type; check that the endpoint runs a vLLM realtime server",
    "processing_error": "the model failed while transcribing; see the endpoint's CloudWatch logs",
    # Codes the container's bridge adds (container/bridge/protocol.py).
    "upstream_closed": "the model server ended the session; retry, and see the endpoint's CloudWatch logs if it repeats",
    "upstream_unavailable": "the model server is not reachable (still loading, or crashed); retry in a minute",
    "server_busy": "every stream slot of the endpoint is in use; retry later or scale the endpoint out",
    "idle_timeout": "the endpoint closed the stream because no audio arrived for a while",
    "session_limit": "the session reached the endpoint's audio limit; pass a smaller --session-limit",
    "server_shutdown": "the endpoint's container is stopping (deployment or scale-in); retry",
}
"""What to try for each error code: vLLM's (``realtime/connection.py``) and the bridge's."""


class TransportClosed(Exception):
    """The stream ended unexpectedly (network drop, server went away); the session may be reopened."""


class RealtimeError(Exception):
    """The transcription cannot go on: a server ``error`` event, a stream failure, or a timeout.

    The message says what happened and what to try. ``code`` is the vLLM error code or the SageMaker error name.
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class RealtimeTransport(Protocol):
    """A bidirectional channel of text messages (one JSON event each)."""

    async def send_text(self, text: str) -> None:
        """Send one message. Raises :class:`TransportClosed` when the stream is gone."""

    async def receive_text(self) -> str | None:
        """Return the next message, or None once the peer closed the stream cleanly.

        Raises :class:`TransportClosed` on a drop and :class:`RealtimeError` on a reported stream failure.
        """

    async def close(self) -> None:
        """Close the stream (idempotent)."""


TransportOpener = Callable[[], Awaitable[RealtimeTransport]]
"""Opens a new stream to the endpoint (called once per session and per reopen)."""


def session_update_event(model: str) -> str:
    """JSON of the ``session.update`` event selecting ``model``."""
    return json.dumps({"type": "session.update", "model": model})


def commit_event(final: bool = False) -> str:
    """JSON of ``input_audio_buffer.commit``; ``final=True`` marks the end of the audio."""
    return json.dumps({"type": "input_audio_buffer.commit", "final": True} if final else {"type": "input_audio_buffer.commit"})


def append_event(pcm16: bytes) -> str:
    """JSON of ``input_audio_buffer.append`` carrying ``pcm16`` (16 kHz mono PCM16 bytes) as base64."""
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm16).decode("ascii")})


def chunk_seconds(pcm16: bytes) -> float:
    """Duration of 16 kHz mono PCM16 bytes in seconds."""
    return len(pcm16) / PCM16_BYTES_PER_SAMPLE / TARGET_SAMPLE_RATE_HZ


def chunk_rms(pcm16: bytes) -> float:
    """Root mean square of PCM16 bytes with full scale = 1.0 (0.0 for an empty chunk)."""
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
    return float(np.sqrt(np.mean(samples**2))) if samples.size else 0.0


def join_transcripts(parts: Iterable[str]) -> str:
    """Join session transcripts, adding one space where neither side already has whitespace at the seam."""
    joined = ""
    for part in parts:
        if not part:
            continue
        if joined and not joined[-1].isspace() and not part[0].isspace():
            joined += " "
        joined += part
    return joined


@dataclass
class TranscriptionResult:
    """Outcome of one transcription.

    Attributes:
        transcript: the joined final transcript.
        audio_seconds_sent: seconds of distinct audio delivered (resent audio counted once).
        time_to_first_delta_s: seconds from the first audio append to the first non-empty delta (None if none came).
        elapsed_s: seconds from the first audio append to the last ``transcription.done``.
        sessions: number of sessions (streams) opened, reopens included.
        reopens: number of streams reopened after a drop.
    """

    transcript: str
    audio_seconds_sent: float
    time_to_first_delta_s: float | None
    elapsed_s: float
    sessions: int
    reopens: int

    @property
    def real_time_factor(self) -> float | None:
        """Elapsed wall time over audio duration (1.0 = as fast as real time; below 1.0 = faster)."""
        return self.elapsed_s / self.audio_seconds_sent if self.audio_seconds_sent else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures (seconds rounded to milliseconds)."""
        def ms(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {
            "transcript": self.transcript,
            "time_to_first_delta_s": ms(self.time_to_first_delta_s),
            "real_time_factor": ms(self.real_time_factor),
            "audio_seconds_sent": ms(self.audio_seconds_sent),
            "elapsed_s": ms(self.elapsed_s),
            "sessions": self.sessions,
            "reopens": self.reopens,
        }


@dataclass
class _Session:
    """One stream: sends events, and a background task receives deltas until ``transcription.done``."""

    transport: RealtimeTransport
    on_delta: Callable[[str], None]
    clock: Callable[[], float]
    deltas: list[str] = field(default_factory=list)
    done_text: str | None = None
    audio_s: float = 0.0
    first_delta_at: float | None = None
    failure: BaseException | None = None
    _done: asyncio.Event = field(default_factory=asyncio.Event)
    _receiver: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, opener: TransportOpener, model: str, on_delta: Callable[[str], None],
                   clock: Callable[[], float]) -> _Session:
        session = cls(transport=await opener(), on_delta=on_delta, clock=clock)
        session._receiver = asyncio.create_task(session._receive_loop())
        try:
            await session.send(session_update_event(model))
            await session.send(commit_event())
        except BaseException:
            await session.close()
            raise
        return session

    @property
    def text(self) -> str:
        """The session's transcript: ``transcription.done`` text, else the deltas received so far."""
        return self.done_text if self.done_text is not None else "".join(self.deltas)

    def raise_if_failed(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def send(self, text: str) -> None:
        self.raise_if_failed()
        await self.transport.send_text(text)

    async def append(self, pcm16: bytes) -> None:
        await self.send(append_event(pcm16))
        self.audio_s += chunk_seconds(pcm16)

    async def finish(self, timeout_s: float) -> str:
        """Send the final commit and wait for ``transcription.done``; return the session transcript."""
        await self.send(commit_event(final=True))
        try:
            await asyncio.wait_for(self._done.wait(), timeout_s)
        except TimeoutError:
            raise RealtimeError(
                f"no transcription.done arrived within {timeout_s:.0f} s of the final commit; the endpoint may be "
                "overloaded or stuck: check its CloudWatch logs and metrics", code="timeout"
            ) from None
        self.raise_if_failed()
        return self.text

    async def settle(self, timeout_s: float) -> None:
        """Let the receiver take the messages that arrived before a drop (it ends once the stream reports the end)."""
        if self._receiver is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._done.wait()), timeout_s)

    async def close(self) -> None:
        if self._receiver is not None and not self._receiver.done():
            self._receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._receiver
        with contextlib.suppress(Exception):
            await self.transport.close()

    async def _receive_loop(self) -> None:
        try:
            while True:
                message = await self.transport.receive_text()
                if message is None:
                    raise TransportClosed("the endpoint closed the stream before transcription.done")
                if self._handle(message):
                    return
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # handed to the sender, which raises it in its own task
            self.failure = error
        finally:
            self._done.set()

    def _handle(self, message: str) -> bool:
        """Apply one server event; return True on ``transcription.done``."""
        try:
            event = json.loads(message)
        except json.JSONDecodeError:
            raise RealtimeError(f"the endpoint sent a message that is not JSON: {message[:200]!r}", code="bad_message") from None
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "transcription.delta":
            delta = str(event.get("delta", ""))
            if delta and self.first_delta_at is None:
                self.first_delta_at = self.clock()
            self.deltas.append(delta)
            self.on_delta(delta)
        elif kind == "transcription.done":
            self.done_text = str(event.get("text", "".join(self.deltas)))
            return True
        elif kind == "error":
            code = event.get("code")
            hint = ERROR_HINTS.get(str(code), "see the endpoint's CloudWatch logs")
            raise RealtimeError(f"the endpoint reported an error ({code}): {event.get('error')}; {hint}", code=code)
        # session.created and unknown informational events need no action.
        return False


async def paced_chunks(pcm16: bytes, speed: float, chunk_bytes: int = CHUNK_BYTES,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> AsyncIterator[bytes]:
    """Yield ``pcm16`` in chunks of ``chunk_bytes``, chunk n no earlier than n x chunk duration / ``speed``.

    The schedule is absolute (measured from the first chunk), so sleep overshoot does not accumulate.
    ``speed`` 0 means unpaced (as fast as the consumer takes them).

    Raises:
        ValueError: ``speed`` is negative.
    """
    if speed < 0:
        raise ValueError(f"speed must be 0 (unpaced) or positive, got {speed}")
    start = clock()
    audio_s = 0.0
    for chunk in iter_chunks(pcm16, chunk_bytes):
        if speed > 0:
            delay = start + audio_s / speed - clock()
            if delay > 0:
                await sleep(delay)
        else:
            await sleep(0)
        yield chunk
        audio_s += chunk_seconds(chunk)


async def transcribe_stream(
    chunks: AsyncIterator[bytes],
    opener: TransportOpener,
    *,
    model: str = DEFAULT_MODEL,
    on_delta: Callable[[str], None] = lambda delta: None,
    on_session_text: Callable[[str], None] = lambda text: None,
    session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
    done_timeout_s: float = DONE_TIMEOUT_S,
    clock: Callable[[], float] = time.monotonic,
) -> TranscriptionResult:
    """Stream 16 kHz mono PCM16 ``chunks`` through sessions opened with ``opener`` and return the transcript.

    Args:
        chunks: PCM16 chunks in order (up to 4096 bytes each; pacing is the iterator's business).
        opener: opens a new stream; called for the first session, each rollover and a reopen after a drop.
        model: model name for ``session.update``.
        on_delta: called with each ``transcription.delta`` text as it arrives.
        on_session_text: called with each finished session's transcript (before joining).
        session_limit_s: audio seconds after which a new session is started (see module docstring).
        done_timeout_s: seconds to wait for ``transcription.done`` after a final commit.
        clock: monotonic clock in seconds (tests inject their own).

    Raises:
        RealtimeError: the endpoint reported an error or a stream failure, or the stream dropped twice.
        ValueError: ``session_limit_s`` is not positive.
    """
    if session_limit_s <= 0:
        raise ValueError(f"session limit must be positive seconds, got {session_limit_s}")
    finished: list[str] = []
    sessions = reopens = 0
    total_audio_s = 0.0
    first_append_at: float | None = None
    first_delta_at: float | None = None

    async def open_session() -> _Session:
        nonlocal sessions
        sessions += 1
        return await _Session.open(opener, model, on_delta, clock)

    async def end_session(session: _Session) -> None:
        nonlocal first_delta_at
        try:
            text = await session.finish(done_timeout_s)
        finally:
            if first_delta_at is None:
                first_delta_at = session.first_delta_at
            await session.close()
        finished.append(text)
        on_session_text(text)

    session = await open_session()
    try:
        async for chunk in chunks:
            if not chunk:
                continue
            seconds = chunk_seconds(chunk)
            over_limit = session.audio_s + seconds > session_limit_s
            window_s = min(ROLLOVER_WINDOW_S, session_limit_s * ROLLOVER_WINDOW_MAX_FRACTION)
            quiet_seam = session.audio_s + window_s >= session_limit_s and chunk_rms(chunk) < QUIET_RMS
            if session.audio_s > 0 and (over_limit or quiet_seam):
                await end_session(session)
                session = await open_session()
            if first_append_at is None:
                first_append_at = clock()
            try:
                await session.append(chunk)
            except TransportClosed as drop:
                if reopens >= MAX_REOPENS:
                    raise RealtimeError(
                        f"the stream dropped again after a reopen ({drop}); check the network and the endpoint's "
                        "health (`aws sagemaker describe-endpoint`), then retry", code="stream_dropped"
                    ) from drop
                reopens += 1
                await session.settle(SETTLE_AFTER_DROP_S)
                if first_delta_at is None:
                    first_delta_at = session.first_delta_at
                finished.append(session.text)  # keep what the dropped stream transcribed
                await session.close()
                session = await open_session()
                await session.append(chunk)  # the chunk whose send failed goes on the new stream
            total_audio_s += seconds
        await end_session(session)
    except TransportClosed as drop:
        raise RealtimeError(
            f"the stream dropped while waiting for the transcript ({drop}); the transcript so far is: "
            f"{join_transcripts([*finished, session.text])!r}", code="stream_dropped"
        ) from drop
    finally:
        await session.close()
    end = clock()
    return TranscriptionResult(
        transcript=join_transcripts(finished),
        audio_seconds_sent=total_audio_s,
        time_to_first_delta_s=None if first_delta_at is None or first_append_at is None else first_delta_at - first_append_at,
        elapsed_s=0.0 if first_append_at is None else end - first_append_at,
        sessions=sessions,
        reopens=reopens,
    )


class WebSocketTransport:
    """A :class:`RealtimeTransport` over a plain WebSocket (``--url``, a container's bridge on its own).

    Messages are sent as text frames, as SageMaker's sidecar does for payload parts with DataType ``UTF8``.
    """

    OPEN_TIMEOUT_S = 10.0
    """Seconds allowed for the TCP connect and WebSocket handshake."""

    MAX_MESSAGE_BYTES = 16 * 1024 * 1024
    """Largest message accepted from the server (a ``transcription.done`` of a long session stays far below)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    @classmethod
    async def connect(cls, url: str) -> WebSocketTransport:
        """Open a WebSocket to ``url`` (``ws://HOST:PORT/invocations-bidirectional-stream``).

        Raises:
            RealtimeError: the URL is invalid, or the server refused or did not answer (with what to check).
        """
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidURI

        try:
            connection = await connect(url, open_timeout=cls.OPEN_TIMEOUT_S, max_size=cls.MAX_MESSAGE_BYTES)
        except InvalidURI as error:
            raise RealtimeError(f"{url!r} is not a WebSocket URL; use ws://HOST:PORT/invocations-bidirectional-stream",
                                code="bad_url") from error
        except (OSError, TimeoutError, InvalidHandshake) as error:
            raise RealtimeError(
                f"cannot open a WebSocket to {url} ({error or type(error).__name__}); is the container running and "
                "ready? `curl http://HOST:PORT/ping` must answer 200", code="connect_failed"
            ) from error
        return cls(connection)

    async def send_text(self, text: str) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self._connection.send(text)
        except ConnectionClosed as error:
            raise TransportClosed(f"WebSocket closed ({error})") from error

    async def receive_text(self) -> str | None:
        from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK

        try:
            message = await self._connection.recv()
        except ConnectionClosedOK:
            return None
        except ConnectionClosedError as error:
            raise TransportClosed(f"WebSocket closed ({error})") from error
        return message if isinstance(message, str) else message.decode("utf-8")

    async def close(self) -> None:
        await self._connection.close()
