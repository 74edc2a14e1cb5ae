"""Runs a :class:`~voice_client.realtime.machine.TranscriptionMachine` with real transports:
:func:`transcribe_stream`, and the pacing of the audio it sends.

Sending is paced below the stream's audio rate limit (:data:`MAX_SEND_SPEED` x real time after a
burst of :data:`SEND_BURST_S`, the contract's pacing: :mod:`contracts.realtime`), so that unpaced
files and replays are never refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from contracts.realtime import CLIENT_BURST_S, CLIENT_SEND_SPEED_X
from voice_client.realtime.actions import (
    Action,
    CloseStream,
    Failed,
    OpenStream,
    Replaying,
    SendEvent,
    ShowDelta,
    ShowGenerationText,
)
from voice_client.realtime.machine import TranscriptionMachine
from voice_client.realtime.policy import (
    DEFAULT_MAX_STREAM_S,
    DEFAULT_SESSION_LIMIT_S,
    DONE_TIMEOUT_S,
    chunk_seconds,
)
from voice_client.realtime.protocol import DEFAULT_MODEL, RealtimeError
from voice_client.realtime.result import TranscriptionResult
from voice_client.realtime.transcript import Transcript
from voice_client.realtime.transport import RealtimeTransport, TransportClosed, TransportOpener

SETTLE_AFTER_CLOSE_S = 1.0
"""Seconds allowed, after a send fails on a closed stream, for the receiver to read the event that
explains it."""

MAX_SEND_SPEED = CLIENT_SEND_SPEED_X
"""Audio sent per stream at most this many times real time (after :data:`SEND_BURST_S`): half the
stream's rate limit (:data:`contracts.realtime.AUDIO_RATE_LIMIT_X`), beyond which the bridge ends a
stream (``rate_limited``)."""

SEND_BURST_S = CLIENT_BURST_S
"""Audio seconds a stream may send at once before :data:`MAX_SEND_SPEED` applies: half the stream's
burst (:data:`contracts.realtime.AUDIO_BURST_S`)."""


async def paced_chunks(
    chunks: Iterable[bytes],
    speed: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[bytes]:
    """Yield PCM16 ``chunks`` (16 kHz mono), chunk n no earlier than (audio before it) / ``speed``
    seconds.

    The schedule is absolute (measured from the first chunk), so sleep overshoot does not
    accumulate, and a consumer that fell behind (a replay after a drop) catches up without waiting.
    ``speed`` 0 means unpaced. ``chunks`` may be a lazy iterator (a file decoded as it is read); it
    is consumed one chunk at a time.

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


def send_delay_s(
    sent_audio_s: float,
    audio_s: float,
    elapsed_s: float,
    speed: float = MAX_SEND_SPEED,
    burst_s: float = SEND_BURST_S,
) -> float:
    """Seconds to wait before sending ``audio_s`` more on a stream that has sent ``sent_audio_s`` in
    ``elapsed_s``, so that it stays within ``burst_s`` + ``speed`` x elapsed (the bridge's
    AUDIO_RATE_LIMIT, with room to spare)."""
    return max(0.0, (sent_audio_s + audio_s - burst_s) / speed - elapsed_s)


def _unexpected(error: Exception) -> RealtimeError:
    return RealtimeError(
        f"the transport failed unexpectedly ({type(error).__name__}: {error}); please report it",
        code="transport_error",
    )


class _Driver:
    """Carries out a :class:`TranscriptionMachine`'s actions with real transports, and feeds it what
    happens.

    One task per stream opens it and reads its events into ``inbox``; the main loop waits for the
    next of: an event, an audio chunk (read only while the machine wants audio), or the machine's
    next deadline. Sends are awaited in order, paced by :func:`send_delay_s`; a failed send marks
    its stream broken (later sends to it are skipped, their audio is kept by the machine) and the
    stream's reader reports the end, preferring the event that explains it (the bridge sends
    ``session_limit``, say, then closes) for up to :data:`SETTLE_AFTER_CLOSE_S`.
    """

    def __init__(
        self,
        machine: TranscriptionMachine,
        chunks: AsyncIterator[bytes],
        opener: TransportOpener,
        on_delta: Callable[[str], None],
        on_session_text: Callable[[str], None],
        on_replay: Callable[[str], None],
        clock: Callable[[], float],
        on_accepted: Callable[[], None] = lambda: None,
        on_action: Callable[[Action], Awaitable[None]] | None = None,
    ) -> None:
        self.machine = machine
        self.on_action = on_action
        self.on_accepted = on_accepted
        self.accepted_told = False
        self.source = aiter(chunks)
        self.opener = opener
        self.on_delta, self.on_session_text, self.on_replay = on_delta, on_session_text, on_replay
        self.clock = clock
        self.inbox: asyncio.Queue[tuple[str, int, Any]] = asyncio.Queue()
        self.transports: dict[int, RealtimeTransport] = {}
        self.readers: dict[int, asyncio.Task[None]] = {}
        self.closing: set[asyncio.Task[None]] = set()
        self.broken: set[int] = set()
        self.sent: dict[
            int, tuple[float, float]
        ] = {}  # stream -> (first send time, audio seconds sent)

    async def run(self) -> TranscriptionResult:
        chunk_task: asyncio.Task[bytes | None] | None = None
        event_task: asyncio.Task[tuple[str, int, Any]] | None = None
        try:
            await self._apply(self.machine.start(self.clock()))
            while not self.machine.finished:
                if chunk_task is None and self.machine.wants_audio:
                    chunk_task = asyncio.ensure_future(self._next_chunk())
                if event_task is None:
                    event_task = asyncio.ensure_future(self.inbox.get())
                deadline = self.machine.next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - self.clock())
                waiting = {event_task} if chunk_task is None else {event_task, chunk_task}
                done, _ = await asyncio.wait(
                    waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                now = self.clock()
                if event_task in done:
                    kind, stream, value = event_task.result()
                    event_task = None
                    actions = self._dispatch(kind, stream, value, now)
                    if not self.accepted_told and self.machine.accepted_at is not None:
                        self.accepted_told = True
                        # before the event's own actions: a caller shows "accepted" first
                        self.on_accepted()
                elif chunk_task is not None and chunk_task in done:
                    chunk = chunk_task.result()
                    chunk_task = None
                    actions = (
                        self.machine.audio(chunk, now)
                        if chunk is not None
                        else self.machine.end_of_audio(now)
                    )
                else:
                    actions = self.machine.tick(now)
                await self._apply(actions)
            return self.machine.result(self.clock())
        finally:
            for task in (chunk_task, event_task):
                if task is not None:
                    task.cancel()
            await self._close_all()

    def _dispatch(self, kind: str, stream: int, value: Any, now: float) -> list[Action]:
        if kind == "opened":
            return self.machine.opened(stream, now)
        if kind == "open_failed":
            return self.machine.open_failed(stream, value, now)
        if kind == "event":
            return self.machine.received(stream, value, now)
        return self.machine.closed(stream, value, now)

    async def _next_chunk(self) -> bytes | None:
        while True:
            try:
                chunk = await anext(self.source)
            except StopAsyncIteration:
                return None
            if chunk:
                return chunk

    async def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if self.on_action is not None:
                await self.on_action(
                    action
                )  # before it is carried out: a caller may checkpoint on a text
            if isinstance(action, SendEvent):
                await self._send(action)
            elif isinstance(action, OpenStream):
                self.readers[action.stream] = asyncio.create_task(self._read(action.stream))
            elif isinstance(action, CloseStream):
                self._close(action.stream)
            elif isinstance(action, ShowDelta):
                self.on_delta(action.text)
            elif isinstance(action, ShowGenerationText):
                self.on_session_text(action.text)
            elif isinstance(action, Replaying):
                self.on_replay(action.reason)
            elif isinstance(action, Failed):
                raise action.error

    async def _send(self, action: SendEvent) -> None:
        transport = self.transports.get(action.stream)
        if transport is None or action.stream in self.broken:
            # the stream is gone: its end is on the way to the machine, which keeps the audio
            return
        if action.audio_s:
            started, sent_s = self.sent.setdefault(action.stream, (self.clock(), 0.0))
            delay = send_delay_s(sent_s, action.audio_s, self.clock() - started)
            self.sent[action.stream] = (started, sent_s + action.audio_s)
            if delay > 0:
                await asyncio.sleep(delay)
        try:
            await transport.send_text(action.text)
        except TransportClosed as error:
            self.broken.add(action.stream)
            reader = self.readers.get(action.stream)
            if reader is not None:  # let it read what explains the close, then report the end
                asyncio.get_running_loop().call_later(
                    SETTLE_AFTER_CLOSE_S, self._give_up, action.stream, reader, error
                )

    def _give_up(self, stream: int, reader: asyncio.Task[None], error: TransportClosed) -> None:
        if not reader.done():
            reader.cancel()
            self.inbox.put_nowait(("closed", stream, error))

    async def _read(self, stream: int) -> None:
        try:
            transport = await self.opener()
        except RealtimeError as error:
            self.inbox.put_nowait(("open_failed", stream, error))
            return
        except (
            Exception
        ) as error:  # a transport that broke its contract: report it, never wait forever
            self.inbox.put_nowait(("open_failed", stream, _unexpected(error)))
            return
        self.transports[stream] = transport
        self.inbox.put_nowait(("opened", stream, None))
        error: BaseException | None = None
        try:
            while (text := await transport.receive_text()) is not None:
                self.inbox.put_nowait(("event", stream, text))
        except (TransportClosed, RealtimeError) as failure:
            error = failure
        except Exception as failure:
            error = _unexpected(failure)
        self.inbox.put_nowait(("closed", stream, error))

    def _close(self, stream: int) -> None:
        reader = self.readers.pop(stream, None)
        if reader is not None:
            reader.cancel()
        transport = self.transports.pop(stream, None)
        if transport is not None:
            task = asyncio.create_task(self._close_transport(transport))
            self.closing.add(task)
            task.add_done_callback(self.closing.discard)

    @staticmethod
    async def _close_transport(transport: RealtimeTransport) -> None:
        with contextlib.suppress(Exception):
            await transport.close()

    async def _close_all(self) -> None:
        for stream in list(self.readers) + list(self.transports):
            self._close(stream)
        if self.closing:
            await asyncio.gather(*list(self.closing), return_exceptions=True)


async def drive_machine(
    machine: TranscriptionMachine,
    chunks: AsyncIterator[bytes],
    opener: TransportOpener,
    *,
    on_action: Callable[[Action], Awaitable[None]],
    on_replay: Callable[[str], None] = lambda reason: None,
    clock: Callable[[], float] = time.monotonic,
) -> TranscriptionResult:
    """Run ``machine`` over ``chunks`` with streams from ``opener``, awaiting ``on_action(action)``
    for each action before it is carried out (the Connect consumer writes each
    :class:`ShowGenerationText` with its checkpoint, and publishes each :class:`ShowDelta`, there).
    Raises :class:`RealtimeError` as :func:`transcribe_stream` does."""
    return await _Driver(
        machine,
        chunks,
        opener,
        lambda delta: None,
        lambda text: None,
        on_replay,
        clock,
        on_action=on_action,
    ).run()


async def transcribe_stream(
    chunks: AsyncIterator[bytes],
    opener: TransportOpener,
    *,
    model: str = DEFAULT_MODEL,
    on_delta: Callable[[str], None] = lambda delta: None,
    on_session_text: Callable[[str], None] = lambda text: None,
    on_replay: Callable[[str], None] = lambda reason: None,
    on_accepted: Callable[[], None] = lambda: None,
    transcript: Transcript | None = None,
    session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
    max_stream_s: float = DEFAULT_MAX_STREAM_S,
    done_timeout_s: float = DONE_TIMEOUT_S,
    clock: Callable[[], float] = time.monotonic,
) -> TranscriptionResult:
    """Stream 16 kHz mono PCM16 ``chunks`` through streams opened with ``opener`` and return the
    transcript.

    Generations, moves to a new stream before ``max_stream_s``, and recovery from cuts follow
    :class:`TranscriptionMachine` (see the module docstring): after a cut only the audio since the
    last ``transcription.done`` is resent, on a new stream, and its partial text is replaced.

    Args:
        chunks: PCM16 chunks in order (up to 4096 bytes each; pacing is the iterator's business; the
            client sends at most :data:`MAX_SEND_SPEED` x real time after :data:`SEND_BURST_S`).
        opener: opens a new stream; called for the first stream, each move, each reopen and each
            retry.
        model: model name for ``session.update``.
        on_delta: called with each ``transcription.delta`` text as it arrives (resent audio repeats
            its deltas).
        on_session_text: called with each generation's final text (before joining).
        on_replay: called with a one-line reason each time audio is resent on a new stream.
        on_accepted: called once, at the first server event that is not an ``error`` (see
            :attr:`TranscriptionMachine.accepted_at`), before that event's delta or text is passed
            on.
        transcript: updated as the transcription goes (pass one to read the partial text after a
            failure).
        session_limit_s: audio seconds one generation may hold (finite, positive).
        max_stream_s: seconds a stream is used before the client moves to a new one (at least
            :data:`MIN_MAX_STREAM_S`; default :data:`DEFAULT_MAX_STREAM_S`).
        done_timeout_s: seconds to wait for ``transcription.done`` after a final commit.
        clock: monotonic clock in seconds (tests inject their own).

    Raises:
        RealtimeError: the endpoint reported an error or a stream failure, or streams dropped again
            after a reopen with no ``transcription.done`` between; ``transcript`` then holds the
            text received so far.
        ValueError: ``session_limit_s`` is not a positive finite number, or ``max_stream_s`` is too
            small.
    """
    machine = TranscriptionMachine(
        model=model,
        transcript=transcript,
        session_limit_s=session_limit_s,
        max_stream_s=max_stream_s,
        done_timeout_s=done_timeout_s,
    )
    return await _Driver(
        machine,
        chunks,
        opener,
        on_delta,
        on_session_text,
        on_replay,
        clock,
        on_accepted=on_accepted,
    ).run()
