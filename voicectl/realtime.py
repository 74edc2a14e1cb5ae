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
in the last :data:`ROLLOVER_WINDOW_S`, opens a new one and joins the transcripts.

No silent loss: the current session's audio is kept (PCM16 at 16 kHz is 32 KB per second, bounded by the session
limit). A stream that drops (network, reset, a retryable error code) is reopened once and the whole session is
replayed on it from its start, its partial text discarded; a ``session_limit`` error from the bridge lowers the
limit and replays the session likewise. Whatever ends the transcription early raises :class:`RealtimeError`, with
the text received so far left in the caller's :class:`Transcript`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import numpy as np

from constructs_lib.model_staging_build.stage_model.constants import DEFAULT_REPO_ID
from voicectl.audio import PCM16_BYTES_PER_SAMPLE, TARGET_SAMPLE_RATE_HZ

DEFAULT_MODEL = DEFAULT_REPO_ID
"""Model name sent in ``session.update``; vLLM accepts only its served model name (error ``model_not_found``), which
the Voxtral stack sets to the model hub repository id (``voxtral.model_id``, by default this one)."""

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

SETTLE_AFTER_CLOSE_S = 1.0
"""Seconds allowed, after a send fails on a closed stream, for the receiver to read the event that explains it."""

MAX_REOPENS = 1
"""Times a dropped stream is reopened (its session replayed) within one transcription."""

REOPEN_CODES = frozenset({"upstream_closed", "server_shutdown", "InternalStreamFailure", "ModelStreamError"})
"""Error codes that end a stream but not the endpoint's ability to serve a new one, so they count as a drop: the
bridge's ``upstream_closed`` (vLLM ended the session) and ``server_shutdown`` (the container is stopping: on SageMaker
a new stream lands on a healthy instance), and SageMaker's stream failures."""

SESSION_LIMIT_CODE = "session_limit"
"""The bridge's error code when a session's audio passes vLLM's context (``container/bridge/protocol.py``); the bridge
closes the stream cleanly after it."""

SESSION_LIMIT_MARGIN = 0.9
"""Fraction of the endpoint's session limit the client uses after a ``session_limit`` error (room for audio in flight
and the rollover window)."""

MAX_LIMIT_REPLAYS = 3
"""Times a session is replayed under a lowered limit after ``session_limit`` errors before giving up."""

MIN_SESSION_LIMIT_S = 1.0
"""Smallest session limit in seconds: a session must hold several 128 ms chunks to be worth a stream."""

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
    "session_limit": "the session reached the endpoint's audio limit; pass a --session-limit below it",
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


def decode_frame(frame: bytes, source: str) -> str:
    """Decode a binary frame as UTF-8 text (the realtime protocol is JSON text).

    Raises:
        RealtimeError: the frame is not UTF-8 (code ``bad_message``).
    """
    try:
        return frame.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RealtimeError(f"{source} sent a {len(frame)}-byte binary frame that is not UTF-8 text ({error}); the "
                            "realtime protocol is JSON text: check what answers at that address",
                            code="bad_message") from None


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


class Transcript:
    """The transcript as it grows: finished sessions plus the deltas of the current one.

    :func:`transcribe_stream` updates it as events arrive, so a caller that keeps a reference can show or print the
    text received so far even when the transcription fails or is interrupted. When a session is replayed after a
    drop, its deltas are discarded (the replay transcribes the same audio again).
    """

    def __init__(self) -> None:
        self.finished: list[str] = []
        self.current: list[str] = []

    @property
    def text(self) -> str:
        """Finished sessions joined with :func:`join_transcripts`, then the current session's deltas."""
        return join_transcripts([*self.finished, "".join(self.current)])

    def add_delta(self, delta: str) -> None:
        self.current.append(delta)

    def finish_session(self, text: str) -> None:
        self.finished.append(text)
        self.current.clear()

    def discard_session(self) -> None:
        self.current.clear()


@dataclass
class TranscriptionResult:
    """Outcome of one transcription.

    Attributes:
        transcript: the joined final transcript.
        audio_seconds_sent: seconds of distinct audio delivered (replayed audio counted once).
        time_to_first_delta_s: seconds from the first audio append to the first non-empty delta (None if none came).
        elapsed_s: seconds from the first audio append to the last ``transcription.done``.
        sessions: number of sessions (streams) opened, reopens and replays included.
        reopens: number of streams reopened after a drop (at most :data:`MAX_REOPENS`).
        replayed_audio_s: seconds of audio sent a second time (sessions replayed after a drop or a ``session_limit``).
        session_limit_s: the session limit in force at the end (lower than requested when the endpoint's is lower).
    """

    transcript: str
    audio_seconds_sent: float
    time_to_first_delta_s: float | None
    elapsed_s: float
    sessions: int
    reopens: int
    replayed_audio_s: float = 0.0
    session_limit_s: float = DEFAULT_SESSION_LIMIT_S

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
            "replayed_audio_s": ms(self.replayed_audio_s),
            "session_limit_s": ms(self.session_limit_s),
        }


@dataclass
class _Session:
    """One stream: sends events, and a background task receives deltas until ``transcription.done``.

    ``chunks`` keeps every PCM16 chunk appended on this stream, so that the session can be replayed on a new stream
    after a drop; it is bounded by the session limit (32 KB per second of audio).
    """

    transport: RealtimeTransport
    on_delta: Callable[[str], None]
    clock: Callable[[], float]
    deltas: list[str] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
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
        """Send one chunk; it is kept for a replay before it is sent (a failed send may still have delivered it)."""
        self.chunks.append(pcm16)
        self.audio_s += chunk_seconds(pcm16)
        await self.send(append_event(pcm16))

    async def finish(self, timeout_s: float) -> str:
        """Send the final commit and wait for ``transcription.done``; return the session transcript."""
        await self.send(commit_event(final=True))
        try:
            await asyncio.wait_for(asyncio.shield(self._done.wait()), timeout_s)
        except TimeoutError:
            raise RealtimeError(
                f"no transcription.done arrived within {timeout_s:.0f} s of the final commit; the endpoint may be "
                "overloaded or stuck: check its CloudWatch logs and metrics", code="timeout"
            ) from None
        self.raise_if_failed()
        return self.text

    async def settle(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the receiver to end (it ends once the stream reports its end)."""
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
            delta = _text_field(event, "delta")
            if delta and self.first_delta_at is None:
                self.first_delta_at = self.clock()
            self.deltas.append(delta)
            self.on_delta(delta)
        elif kind == "transcription.done":
            text = event.get("text")
            # A null or missing text falls back to the deltas, which carry the same words.
            self.done_text = "".join(self.deltas) if text is None else _text_field(event, "text")
            return True
        elif kind == "error":
            code = event.get("code")
            hint = ERROR_HINTS.get(str(code), "see the endpoint's CloudWatch logs")
            raise RealtimeError(f"the endpoint reported an error ({code}): {event.get('error')}; {hint}", code=code)
        # session.created and unknown informational events need no action.
        return False


def _text_field(event: dict[str, Any], name: str) -> str:
    """``event[name]`` as text: missing or null is empty, a non-string value (a number) is kept as its JSON text."""
    value = event.get(name)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


async def paced_chunks(chunks: Iterable[bytes], speed: float,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> AsyncIterator[bytes]:
    """Yield PCM16 ``chunks`` (16 kHz mono), chunk n no earlier than (audio before it) / ``speed`` seconds.

    The schedule is absolute (measured from the first chunk), so sleep overshoot does not accumulate, and a consumer
    that fell behind (a replay after a drop) catches up without waiting. ``speed`` 0 means unpaced. ``chunks`` may
    be a lazy iterator (a file decoded as it is read); it is consumed one chunk at a time.

    Raises:
        ValueError: ``speed`` is negative or not finite.
    """
    if not math.isfinite(speed) or speed < 0:
        raise ValueError(f"speed must be 0 (unpaced) or a positive finite number, got {speed}")
    start = clock()
    audio_s = 0.0
    for chunk in chunks:
        if speed > 0:
            delay = start + audio_s / speed - clock()
            if delay > 0:
                await sleep(delay)
        else:
            await sleep(0)
        yield chunk
        audio_s += chunk_seconds(chunk)


def _is_drop(error: BaseException) -> bool:
    """Whether ``error`` ended the stream in a way a new stream can recover from (see :data:`REOPEN_CODES`)."""
    return isinstance(error, TransportClosed) or (isinstance(error, RealtimeError) and error.code in REOPEN_CODES)


def _learned_session_limit(error: RealtimeError, current_limit_s: float, session_audio_s: float) -> float:
    """A session limit below the endpoint's, after its ``session_limit`` error.

    The bridge states its limit in the message ("audio limit of N s", ``container/bridge/server.py``
    ``session_limit_message``); without it, the audio this session sent bounds the limit from above.
    """
    stated = re.search(r"audio limit of (\d+(?:\.\d+)?) s", str(error))
    bound = float(stated.group(1)) if stated else session_audio_s
    return min(current_limit_s, bound) * SESSION_LIMIT_MARGIN


async def transcribe_stream(
    chunks: AsyncIterator[bytes],
    opener: TransportOpener,
    *,
    model: str = DEFAULT_MODEL,
    on_delta: Callable[[str], None] = lambda delta: None,
    on_session_text: Callable[[str], None] = lambda text: None,
    on_replay: Callable[[str], None] = lambda reason: None,
    transcript: Transcript | None = None,
    session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
    done_timeout_s: float = DONE_TIMEOUT_S,
    clock: Callable[[], float] = time.monotonic,
) -> TranscriptionResult:
    """Stream 16 kHz mono PCM16 ``chunks`` through sessions opened with ``opener`` and return the transcript.

    Sessions end before ``session_limit_s`` of audio (see the module docstring). The current session's audio is
    kept: when its stream drops (network, a reset, ``transcription.done`` never coming because the stream broke,
    or a retryable error code in :data:`REOPEN_CODES`), the session is replayed once on a new stream from its
    start, unpaced, and its partial text is discarded, so nothing is lost. A ``session_limit`` error from the
    bridge lowers the limit and replays the session the same way (up to :data:`MAX_LIMIT_REPLAYS` times).

    Args:
        chunks: PCM16 chunks in order (up to 4096 bytes each; pacing is the iterator's business).
        opener: opens a new stream; called for the first session, each rollover and each replay.
        model: model name for ``session.update``.
        on_delta: called with each ``transcription.delta`` text as it arrives (replayed sessions repeat theirs).
        on_session_text: called with each finished session's transcript (before joining).
        on_replay: called with a one-line reason each time a session is replayed on a new stream.
        transcript: updated as the transcription goes (pass one to read the partial text after a failure).
        session_limit_s: audio seconds after which a new session is started (finite, positive).
        done_timeout_s: seconds to wait for ``transcription.done`` after a final commit.
        clock: monotonic clock in seconds (tests inject their own).

    Raises:
        RealtimeError: the endpoint reported an error or a stream failure, or the stream dropped again after a
            reopen; ``transcript`` then holds the text received so far.
        ValueError: ``session_limit_s`` is not a positive finite number.
    """
    if not math.isfinite(session_limit_s) or session_limit_s <= 0:
        raise ValueError(f"session limit must be a positive finite number of seconds, got {session_limit_s}")
    transcript = transcript if transcript is not None else Transcript()
    sessions = reopens = limit_replays = 0
    total_audio_s = replayed_audio_s = 0.0
    first_append_at: float | None = None
    first_delta_at: float | None = None
    replay: deque[bytes] = deque()  # chunks of a replayed session, sent before any new chunk
    source = aiter(chunks)
    source_done = False
    session: _Session | None = None

    def delta_received(delta: str) -> None:
        transcript.add_delta(delta)
        on_delta(delta)

    async def next_chunk() -> tuple[bytes | None, bool]:
        """The next chunk and whether it is new (not a replay); (None, False) at the end of the audio."""
        nonlocal source_done
        if replay:
            return replay.popleft(), False
        while not source_done:
            try:
                chunk = await anext(source)
            except StopAsyncIteration:
                source_done = True
                break
            if chunk:
                return chunk, True
        return None, False

    async def close_session() -> None:
        nonlocal session, first_delta_at
        if session is not None:
            if first_delta_at is None:
                first_delta_at = session.first_delta_at
            await session.close()
            session = None

    async def recover(error: BaseException, unsent: bytes | None) -> None:
        """Replay the current session on a new stream after ``error``, or raise when that is not allowed."""
        nonlocal reopens, limit_replays, session_limit_s, replayed_audio_s
        session_audio_s = session.audio_s if session is not None else 0.0
        if isinstance(error, TransportClosed) and session is not None:
            # A send can fail on the closed stream before the receiver has read the event that explains the close
            # (the bridge sends `session_limit` or `server_shutdown`, then closes): prefer that event.
            await session.settle(SETTLE_AFTER_CLOSE_S)
            if isinstance(session.failure, RealtimeError):
                error = session.failure
        if isinstance(error, RealtimeError) and error.code == SESSION_LIMIT_CODE:
            limit_replays += 1
            new_limit_s = _learned_session_limit(error, session_limit_s, session_audio_s)
            if limit_replays > MAX_LIMIT_REPLAYS or new_limit_s < MIN_SESSION_LIMIT_S:
                raise RealtimeError(
                    f"{error}; the client lowered its session limit {limit_replays - 1} times and still hit the "
                    f"endpoint's, pass --session-limit below the endpoint's limit", code=SESSION_LIMIT_CODE
                ) from error
            reason = (f"the endpoint's session limit is below {session_limit_s:.0f} s: using {new_limit_s:.0f} s and "
                      f"resending this session's {session_audio_s:.1f} s of audio on a new stream")
            session_limit_s = new_limit_s
        elif _is_drop(error):
            if reopens >= MAX_REOPENS:
                raise RealtimeError(
                    f"the stream dropped again after a reopen ({error}); the transcript may be missing the audio "
                    "from the last session on; check the network and the endpoint's health "
                    "(`aws sagemaker describe-endpoint`), then retry", code="stream_dropped"
                ) from error
            reopens += 1
            reason = f"the stream dropped ({error}); resending this session's {session_audio_s:.1f} s of audio on a new stream"
        else:
            raise error
        pending = list(session.chunks) if session is not None else []
        if unsent is not None:
            pending.append(unsent)
        replayed_audio_s += session_audio_s
        await close_session()
        transcript.discard_session()
        replay.extendleft(reversed(pending))
        on_replay(reason)

    async def open_session() -> _Session:
        nonlocal sessions
        sessions += 1
        return await _Session.open(opener, model, delta_received, clock)

    try:
        while True:
            chunk, is_new = await next_chunk()
            appended = False
            if is_new and chunk is not None:
                total_audio_s += chunk_seconds(chunk)
            try:
                if session is None:
                    session = await open_session()
                if chunk is None:
                    text = await session.finish(done_timeout_s)
                    await close_session()
                    transcript.finish_session(text)
                    on_session_text(text)
                    break
                seconds = chunk_seconds(chunk)
                window_s = min(ROLLOVER_WINDOW_S, session_limit_s * ROLLOVER_WINDOW_MAX_FRACTION)
                over_limit = session.audio_s + seconds > session_limit_s
                quiet_seam = session.audio_s + window_s >= session_limit_s and chunk_rms(chunk) < QUIET_RMS
                if session.audio_s > 0 and (over_limit or quiet_seam):
                    text = await session.finish(done_timeout_s)
                    await close_session()
                    transcript.finish_session(text)
                    on_session_text(text)
                    session = await open_session()
                if first_append_at is None:
                    first_append_at = clock()
                appended = True
                await session.append(chunk)
            except (TransportClosed, RealtimeError) as error:
                await recover(error, None if appended or chunk is None else chunk)
    finally:
        await close_session()
    end = clock()
    return TranscriptionResult(
        transcript=transcript.text,
        audio_seconds_sent=total_audio_s,
        time_to_first_delta_s=None if first_delta_at is None or first_append_at is None else first_delta_at - first_append_at,
        elapsed_s=0.0 if first_append_at is None else end - first_append_at,
        sessions=sessions,
        reopens=reopens,
        replayed_audio_s=replayed_audio_s,
        session_limit_s=session_limit_s,
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
        except (InvalidURI, ValueError) as error:
            raise RealtimeError(f"{url!r} is not a WebSocket URL; use ws://HOST:PORT/invocations-bidirectional-stream",
                                code="bad_url") from error
        except (OSError, TimeoutError, InvalidHandshake) as error:
            parts = urlsplit(url)
            ping = f"{'https' if parts.scheme == 'wss' else 'http'}://{parts.netloc}/ping"
            raise RealtimeError(
                f"cannot open a WebSocket to {url} ({error or type(error).__name__}); is the container running and "
                f"ready? `curl {ping}` must answer 200", code="connect_failed"
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
        return message if isinstance(message, str) else decode_frame(message, "the WebSocket server")

    async def close(self) -> None:
        await self._connection.close()
