"""The transcription's policy as an explicit state machine, :class:`TranscriptionMachine`, with no
I/O.

It takes inputs (audio chunks, the end of the audio, a stream opened, a server event, a stream gone,
the clock) and returns actions (open, send, close, deltas and texts to show, failure, the end), with
no sockets and no clock of its own, so every transition is tested on its own.
:func:`voice_client.realtime.driver.transcribe_stream` drives it with real transports. A later
commit starts the next generation on the same stream (vLLM drops audio sent between a final commit
and its ``transcription.done``, so the machine holds it back meanwhile).

Long audio, in three layers:

- Generations: one generation holds at most ``session_limit_s`` of audio (the model's context: one
  token per 80 ms per the Voxtral-Mini-4B-Realtime-2602 model card; the bridge's ``session_limit``
  states its own limit in ``limit_s``). The client also ends a generation at the first quiet chunk
  after :data:`GENERATION_TARGET_S`, so that a ``transcription.done`` comes often: the audio since
  the last one is all that is ever resent.
- Streams: a stream may be ended by the platform at any time (a vendor documents a 30-minute cap per
  SageMaker bidirectional stream; unconfirmed: AWS documentation found so far is silent). Before
  ``max_stream_s`` the client opens the next stream in advance and moves to it at the first quiet
  point (at ``max_stream_s`` at the latest): the finishing generation completes on the old stream
  while new audio already flows on the new one, so a live microphone does not fall behind. The two
  streams may answer in either order (a short last generation on the new stream often finishes
  first): a generation's text is released (:class:`ShowGenerationText`) only once every earlier
  generation's has been, so texts come out in audio order and a caller that checkpoints on each one
  (the Connect consumer) never moves past audio whose text has not arrived.
- Cuts: when a stream drops (network, reset, ``upstream_closed``, ``server_shutdown``, SageMaker's
  stream failures) the client opens a new stream and resends only the audio since the last
  ``transcription.done``, discarding that audio's partial text: the transcript has no gap and no
  repeated text. ``server_busy`` is retried after a pause. Whatever ends the transcription early
  raises :class:`RealtimeError`, with the text received so far left in the caller's
  :class:`Transcript`.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from voice_client.bounded_json import JsonBoundError, loads_bounded, one_line
from voice_client.realtime.actions import (
    Action,
    CloseStream,
    Failed,
    Finished,
    OpenStream,
    Replaying,
    SendEvent,
    ShowDelta,
    ShowGenerationText,
)
from voice_client.realtime.policy import (
    BUSY_RETRY_DELAYS_S,
    DEFAULT_MAX_STREAM_S,
    DEFAULT_SESSION_LIMIT_S,
    DONE_TIMEOUT_FAIL,
    DONE_TIMEOUT_GO_ON,
    DONE_TIMEOUT_S,
    GENERATION_TARGET_S,
    MAX_BUFFERED_S,
    MAX_LIMIT_REPLAYS,
    MAX_REOPENS,
    MIN_MAX_STREAM_S,
    MIN_SESSION_LIMIT_S,
    QUIET_FRACTION,
    QUIET_RMS,
    ROLLOVER_WINDOW_MAX_FRACTION,
    ROLLOVER_WINDOW_S,
    SESSION_LIMIT_MARGIN,
    STREAM_WINDOW_S,
    chunk_rms,
    chunk_seconds,
)
from voice_client.realtime.protocol import (
    DEFAULT_MODEL,
    ERROR,
    ERROR_HINTS,
    IDLE_TIMEOUT_CODE,
    MAX_EVENT_BYTES,
    MAX_EVENT_DEPTH,
    REOPEN_CODES,
    SERVER_BUSY_CODE,
    SESSION_LIMIT_CODE,
    TRANSCRIPTION_DELTA,
    TRANSCRIPTION_DONE,
    RealtimeError,
    append_event,
    commit_event,
    session_update_event,
)
from voice_client.realtime.result import TranscriptionResult
from voice_client.realtime.transcript import MAX_TRANSCRIPT_CHARS, Transcript, _Segment
from voice_client.realtime.transport import TransportClosed


def _text_field(event: dict[str, Any], name: str) -> str:
    """``event[name]`` as text: missing or null is empty, a non-string value (a number) is kept as
    its JSON text."""
    value = event.get(name)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class _Generation:
    """One generation: the audio sent in it (kept until its ``transcription.done``, to resend after
    a cut)."""

    stream: int
    segment: _Segment
    chunks: list[bytes] = field(default_factory=list)
    audio_s: float = 0.0
    rms_sum: float = 0.0
    final_at: float | None = None  # when its final commit was sent
    start_s: float = 0.0  # where its audio starts in the source's audio (seconds)
    answered: bool = (
        False  # its transcription.done arrived; held until every earlier generation's has
    )

    @property
    def mean_rms(self) -> float:
        return self.rms_sum / len(self.chunks) if self.chunks else 0.0


@dataclass
class _Stream:
    opened_at: float | None = None  # None while opening
    retiring: bool = False  # moved away from: closes once its last generation is done


class TranscriptionMachine:
    """The transcription's policy, as a state machine with no I/O: inputs in, :data:`Action` lists
    out.

    Inputs (each returns the actions to carry out, in order): :meth:`start`, :meth:`audio` (a PCM16
    chunk), :meth:`end_of_audio`, :meth:`opened`, :meth:`open_failed`, :meth:`received` (a server
    event's text), :meth:`closed` (a stream gone, with the error that ended it), :meth:`tick` (the
    clock passed :meth:`next_deadline`). ``now`` is the caller's monotonic clock in seconds. Streams
    are numbered from 1.

    Args:
        model: model name for ``session.update``.
        transcript: updated as deltas and ``transcription.done`` arrive.
        session_limit_s: audio seconds one generation may hold (finite, positive).
        max_stream_s: seconds a stream is used before moving to a new one (finite, at least
            :data:`MIN_MAX_STREAM_S`).
        done_timeout_s: seconds to wait for ``transcription.done`` after a final commit.
        on_done_timeout: what a ``transcription.done`` that does not come within ``done_timeout_s``
            does: :data:`DONE_TIMEOUT_FAIL` (the transcription fails, code ``timeout``) or
            :data:`DONE_TIMEOUT_GO_ON` (the generation's deltas become its text, its stream is
            closed and the audio after it goes on on a new stream: a live call never ends for a
            server that stopped answering one generation, vLLM #33962).

    Raises:
        ValueError: a limit is not a positive finite number, or ``max_stream_s`` is below
            :data:`MIN_MAX_STREAM_S`.
    """

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        transcript: Transcript | None = None,
        session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
        max_stream_s: float = DEFAULT_MAX_STREAM_S,
        done_timeout_s: float = DONE_TIMEOUT_S,
        on_done_timeout: str = "fail",
    ) -> None:
        if on_done_timeout not in (DONE_TIMEOUT_FAIL, DONE_TIMEOUT_GO_ON):
            raise ValueError(
                f"on_done_timeout must be {DONE_TIMEOUT_FAIL!r} or {DONE_TIMEOUT_GO_ON!r}, "
                f"got {on_done_timeout!r}"
            )
        if not math.isfinite(session_limit_s) or session_limit_s <= 0:
            raise ValueError(
                f"session limit must be a positive finite number of seconds, got {session_limit_s}"
            )
        if not math.isfinite(max_stream_s) or max_stream_s < MIN_MAX_STREAM_S:
            raise ValueError(
                f"max_stream_s must be a finite number of seconds, at least {MIN_MAX_STREAM_S:g}, "
                f"got {max_stream_s}"
            )
        self.model = model
        self.transcript = transcript if transcript is not None else Transcript()
        self.session_limit_s = session_limit_s
        self.max_stream_s = max_stream_s
        self.done_timeout_s = done_timeout_s
        self.on_done_timeout = on_done_timeout
        self.finished = False
        self.accepted_at: float | None = None
        """``now`` of the first server event that is not an ``error``, on any stream: proof the
        endpoint accepted a stream (vLLM sends ``session.created`` on accept; through SageMaker and
        the bridge that is the container's first frame). An opened stream is not proof: SageMaker's
        HTTP/2 call returns before the container answers, and the bridge accepts every WebSocket at
        once and may refuse with an ``error`` event (``server_busy``, ``upstream_unavailable``)."""
        self._streams: dict[int, _Stream] = {}
        self._last_stream = 0
        self._active: int | None = None  # the stream new audio goes to
        self._next: int | None = None  # opened ahead of a move
        self._next_not_before = 0.0  # no new next stream before this (after it failed)
        self._generations: list[
            _Generation
        ] = []  # not released yet (awaiting their done, or held), in audio order
        self._current: _Generation | None = None  # the generation new audio goes to
        self._buffer: deque[bytes] = deque()  # audio not sent yet (resent audio first)
        self._buffered_s = 0.0
        self._source_done = False
        self._reopen_at: float | None = (
            None  # when to open the active stream again after server_busy
        )
        self._busy_retries = 0
        self._reopens_in_a_row = 0
        self._limit_replays = 0
        # Figures for the result.
        self._sessions = self._reopens = self._rollovers = self._generations_done = 0
        self._audio_s = self._replayed_s = 0.0
        self._first_append_at: float | None = None
        self._first_delta_at: float | None = None
        self._last_done_at: float | None = None
        self._now = -math.inf  # the latest time an input brought

    # ---- inputs ---------------------------------------------------------------------------------
    def start(self, now: float) -> list[Action]:
        """Begin: open the first stream."""
        actions: list[Action] = []
        self._active = self._open(actions)
        return actions

    def audio(self, chunk: bytes, now: float) -> list[Action]:
        """A new PCM16 chunk (16 kHz mono) from the source."""
        self._now = max(self._now, now)
        if self.finished:
            return []
        self._audio_s += chunk_seconds(chunk)
        self._buffer.append(chunk)
        self._buffered_s += chunk_seconds(chunk)
        return self._pump(now)

    def end_of_audio(self, now: float) -> list[Action]:
        """The source has no more audio: finish the generations and close."""
        self._now = max(self._now, now)
        self._source_done = True
        return self._pump(now)

    def opened(self, stream: int, now: float) -> list[Action]:
        """Stream ``stream`` is open: select the model, then send what waits."""
        self._now = max(self._now, now)
        state = self._streams.get(stream)
        if state is None:
            return []  # closed meanwhile
        state.opened_at = now
        return [SendEvent(stream, session_update_event(self.model)), *self._pump(now)]

    def open_failed(self, stream: int, error: RealtimeError, now: float) -> list[Action]:
        """Stream ``stream`` could not be opened (``error`` says why)."""
        if stream not in self._streams:
            return []
        del self._streams[stream]
        if stream == self._next:  # the active stream goes on; try again later
            self._next = None
            self._next_not_before = now + BUSY_RETRY_DELAYS_S[0]
            return []
        if (
            stream == 1
        ):  # nothing has worked yet: most likely the target itself (URL, credentials, endpoint)
            return self._fail(error)
        return self._recover(f"opening a new stream failed ({error})", now, drop=error)

    def received(self, stream: int, text: str, now: float) -> list[Action]:
        """One server event (JSON text) on ``stream``."""
        self._now = max(self._now, now)
        if stream not in self._streams or self.finished:
            return []
        if len(text) > MAX_EVENT_BYTES:
            return self._fail(
                RealtimeError(
                    f"the endpoint sent a {len(text):,}-byte event, more than the "
                    f"{MAX_EVENT_BYTES:,} bytes the client accepts (MAX_EVENT_BYTES); check what "
                    "answers at that address",
                    code="message_too_large",
                )
            )
        try:
            event = loads_bounded(text, max_bytes=MAX_EVENT_BYTES, max_depth=MAX_EVENT_DEPTH)
        except JsonBoundError as error:
            return self._fail(
                RealtimeError(
                    f"the endpoint sent an event the client refuses: {error}; check what "
                    "answers at that address",
                    code="bad_message",
                )
            )
        except json.JSONDecodeError:
            return self._fail(
                RealtimeError(
                    f"the endpoint sent a message that is not JSON: {text[:200]!r}",
                    code="bad_message",
                )
            )
        kind = event.get("type") if isinstance(event, dict) else None
        if self.accepted_at is None and isinstance(kind, str) and kind != ERROR:
            self.accepted_at = now
        if kind == TRANSCRIPTION_DELTA:
            generation = self._generation_on(stream)
            if generation is None:
                return []
            delta = _text_field(event, "delta")
            if delta and self._first_delta_at is None:
                self._first_delta_at = now
            self.transcript.add_delta(generation.segment, delta)
            return self._check_kept() or [ShowDelta(delta)]
        if kind == TRANSCRIPTION_DONE:
            return self._done(stream, event, now)
        if kind == ERROR:
            return self._error(stream, event, now)
        return []  # session.created and unknown informational events need no action

    def _check_kept(self) -> list[Action]:
        """Fail (the actions to do so) once the transcript holds more than
        :data:`MAX_TRANSCRIPT_CHARS`."""
        if self.transcript.chars <= MAX_TRANSCRIPT_CHARS:
            return []
        return self._fail(
            RealtimeError(
                f"the endpoint sent more than {MAX_TRANSCRIPT_CHARS:,} characters of transcript, "
                "the most one run keeps (MAX_TRANSCRIPT_CHARS); split the audio into shorter "
                "files",
                code="transcript_too_large",
            )
        )

    def closed(self, stream: int, error: BaseException | None, now: float) -> list[Action]:
        """Stream ``stream`` ended: ``error`` is a :class:`TransportClosed` (a drop), a
        :class:`RealtimeError` (a reported stream failure), or None (closed cleanly, which before
        ``transcription.done`` is a drop too)."""
        if stream not in self._streams or self.finished:
            return []
        if isinstance(error, RealtimeError) and error.code not in REOPEN_CODES:
            return self._fail(error)
        if self._generation_on(stream) is None and stream != self._active:
            del self._streams[stream]  # a stream opened ahead, or one done with: nothing to resend
            if stream == self._next:
                self._next = None
            return []
        cause = error or TransportClosed("the endpoint closed the stream before transcription.done")
        return self._recover(f"the stream dropped ({cause})", now, drop=cause)

    def tick(self, now: float) -> list[Action]:
        """The clock reached :meth:`next_deadline`: time out a ``transcription.done``, retry after
        ``server_busy``, or move to the next stream while the source is silent."""
        self._now = max(self._now, now)
        if self.finished:
            return []
        for generation in self._awaited():
            if generation.final_at is not None and now - generation.final_at >= self.done_timeout_s:
                if self.on_done_timeout == DONE_TIMEOUT_GO_ON:
                    return self._done_without_done(generation, now)
                return self._fail(
                    RealtimeError(
                        f"no transcription.done arrived within {self.done_timeout_s:.0f} s of "
                        "the final commit; the endpoint may be overloaded or stuck: check its "
                        "CloudWatch logs and metrics",
                        code="timeout",
                    )
                )
        actions: list[Action] = []
        if self._reopen_at is not None and now >= self._reopen_at:
            self._reopen_at = None
            self._active = self._open(actions)
        return actions + self._pump(now)

    def next_deadline(self) -> float | None:
        """When :meth:`tick` must be called next (None: no timer is running)."""
        deadlines = [
            generation.final_at + self.done_timeout_s
            for generation in self._awaited()
            if generation.final_at is not None
        ]
        if self._reopen_at is not None:
            deadlines.append(self._reopen_at)
        active = self._streams.get(self._active) if self._active is not None else None
        if active is not None and active.opened_at is not None and not self._source_done:
            due = active.opened_at + self.max_stream_s
            # Opening the next stream, then the move (which waits for a quiet chunk until `due`):
            # each looked at once when its time comes, not again and again while it waits for
            # something else.
            for moment in (max(due - self._stream_window_s, self._next_not_before), due):
                if moment > self._now:
                    deadlines.append(moment)
                    break
        return min(deadlines) if deadlines else None

    @property
    def wants_audio(self) -> bool:
        """Whether the source should be read now (False while :data:`MAX_BUFFERED_S` of audio waits
        unsent)."""
        return not self.finished and not self._source_done and self._buffered_s < MAX_BUFFERED_S

    def result(self, now: float) -> TranscriptionResult:
        """The figures of the transcription (call once :class:`Finished` was returned)."""
        end = self._last_done_at if self._last_done_at is not None else now
        first = self._first_append_at
        return TranscriptionResult(
            transcript=self.transcript.text,
            audio_seconds_sent=self._audio_s,
            time_to_first_delta_s=None
            if first is None or self._first_delta_at is None
            else self._first_delta_at - first,
            elapsed_s=0.0 if first is None else end - first,
            sessions=self._sessions,
            reopens=self._reopens,
            replayed_audio_s=self._replayed_s,
            session_limit_s=self.session_limit_s,
            rollovers=self._rollovers,
            generations=self._generations_done,
        )

    # ---- the policy -----------------------------------------------------------------------------
    @property
    def _stream_window_s(self) -> float:
        return min(STREAM_WINDOW_S, self.max_stream_s * ROLLOVER_WINDOW_MAX_FRACTION)

    def _open(self, actions: list[Action]) -> int:
        self._last_stream += 1
        self._sessions += 1
        self._streams[self._last_stream] = _Stream()
        actions.append(OpenStream(self._last_stream))
        return self._last_stream

    def _awaited(self) -> list[_Generation]:
        """The generations whose ``transcription.done`` has not arrived, in audio order."""
        return [generation for generation in self._generations if not generation.answered]

    def _generation_on(self, stream: int) -> _Generation | None:
        """The oldest generation of ``stream`` whose ``transcription.done`` has not arrived (deltas
        and the done are for it)."""
        return next(
            (
                generation
                for generation in self._generations
                if generation.stream == stream and not generation.answered
            ),
            None,
        )

    def _pump(self, now: float) -> list[Action]:
        """Send what the buffer holds as far as the streams allow; end generations and move streams
        on the way."""
        actions: list[Action] = []
        active = self._streams.get(self._active) if self._active is not None else None
        while active is not None and active.opened_at is not None:
            generation = self._current
            if generation is None:
                if self._generation_on(self._active) is not None:  # type: ignore[arg-type]
                    # the last generation on this stream is finishing: vLLM would drop audio sent
                    # now
                    break
                if not self._buffer and self._source_done:
                    break
                generation = self._start_generation(now, actions)
            if not self._buffer:
                if self._source_done or self._stream_age(now) >= self.max_stream_s:
                    self._end_generation(
                        generation, now, actions
                    )  # the end of the audio, or a move in silence
                    if not self._source_done:
                        self._move(actions)
                        active = self._streams.get(self._active)  # type: ignore[arg-type]
                    continue
                break
            chunk = self._buffer[0]
            if generation.audio_s > 0 and self._should_end(generation, chunk, now):
                self._end_generation(generation, now, actions)
                if self._stream_age(now) >= self.max_stream_s - self._stream_window_s:
                    self._move(actions)
                    active = self._streams.get(self._active)  # type: ignore[arg-type]
                continue
            self._buffer.popleft()
            seconds = chunk_seconds(chunk)
            self._buffered_s -= seconds
            generation.chunks.append(chunk)
            generation.audio_s += seconds
            generation.rms_sum += chunk_rms(chunk)
            if self._first_append_at is None:
                self._first_append_at = now
            actions.append(SendEvent(generation.stream, append_event(chunk), seconds))
        if (
            self._next is None
            and active is not None
            and active.opened_at is not None
            and not self._source_done
            and now >= self._next_not_before
            and self._stream_age(now) >= self.max_stream_s - self._stream_window_s
        ):
            self._next = self._open(actions)  # ready for the move at the next quiet chunk
        if (
            self._source_done
            and not self._buffer
            and not self._generations
            and self._current is None
        ):
            actions += [CloseStream(stream) for stream in self._streams]
            self._streams.clear()
            self.finished = True
            actions.append(Finished())
        return actions

    def _stream_age(self, now: float) -> float:
        active = self._streams.get(self._active) if self._active is not None else None
        if active is None or active.opened_at is None:
            return 0.0
        return now - active.opened_at

    def _should_end(self, generation: _Generation, chunk: bytes, now: float) -> bool:
        """Whether ``generation`` ends before ``chunk``: at its limit, or at a quiet chunk near the
        limit, after :data:`GENERATION_TARGET_S`, or when a move to the next stream is due; at
        ``max_stream_s`` in any case."""
        limit = self.session_limit_s
        seconds = chunk_seconds(chunk)
        if generation.audio_s + seconds > limit or self._stream_age(now) >= self.max_stream_s:
            return True
        rms = chunk_rms(chunk)
        if rms >= QUIET_RMS and rms >= QUIET_FRACTION * generation.mean_rms:
            return False
        return (
            generation.audio_s + min(ROLLOVER_WINDOW_S, limit * ROLLOVER_WINDOW_MAX_FRACTION)
            >= limit
            or generation.audio_s >= GENERATION_TARGET_S
            or self._stream_age(now) >= self.max_stream_s - self._stream_window_s
        )

    def _start_generation(self, now: float, actions: list[Action]) -> _Generation:
        assert self._active is not None
        # The buffer holds the source's audio from the first unsent chunk on (resent audio is put
        # back in front), so that chunk starts at everything received less what waits.
        generation = _Generation(
            stream=self._active,
            segment=self.transcript.open_segment(),
            start_s=self._audio_s - self._buffered_s,
        )
        self._generations.append(generation)
        self._current = generation
        actions.append(SendEvent(self._active, commit_event()))
        return generation

    def _end_generation(self, generation: _Generation, now: float, actions: list[Action]) -> None:
        """Send the final commit (an empty generation is dropped instead: closing its stream ends
        it)."""
        self._current = None
        if generation.audio_s == 0:
            self._generations.remove(generation)
            self.transcript.discard(generation.segment)
            return
        generation.final_at = now
        actions.append(SendEvent(generation.stream, commit_event(final=True)))

    def _move(self, actions: list[Action]) -> None:
        """New audio goes to the next stream (opened ahead, or now); the old one closes once its
        generation is done."""
        old = self._active
        if old is not None and old in self._streams:
            if self._generation_on(old) is None:
                del self._streams[old]
                actions.append(CloseStream(old))
            else:
                self._streams[old].retiring = True
        self._rollovers += 1
        if self._next is not None:
            self._active, self._next = self._next, None
        else:
            self._active = self._open(actions)

    def _done(
        self, stream: int, event: dict[str, Any], now: float, *, closed: bool = False
    ) -> list[Action]:
        generation = self._generation_on(stream)
        if generation is None:
            return []
        if (
            generation is self._current
        ):  # vLLM ended the generation before its final commit: start a new one
            self._current = None
        text = event.get("text")
        # A null or missing text falls back to the deltas, which carry the same words.
        self.transcript.set_done(
            generation.segment,
            "".join(generation.segment.deltas) if text is None else _text_field(event, "text"),
        )
        if failed := self._check_kept():
            return failed
        generation.answered = True
        self._last_done_at = now
        self._reopens_in_a_row = 0
        self._busy_retries = 0
        # Released in audio order: a later generation answered first (on the stream moved to) waits,
        # still resent if an earlier one's stream drops, so that no text is shown, and no checkpoint
        # moves, past a gap.
        actions: list[Action] = []
        while self._generations and self._generations[0].answered:
            released = self._generations.pop(0)
            self._generations_done += 1
            actions.append(
                ShowGenerationText(
                    released.segment.text, released.start_s, released.start_s + released.audio_s
                )
            )
        state = None if closed else self._streams.get(stream)
        if state is not None and state.retiring and self._generation_on(stream) is None:
            del self._streams[stream]
            actions.append(CloseStream(stream))
        return actions + self._pump(now)

    def _done_without_done(self, generation: _Generation, now: float) -> list[Action]:
        """``generation``'s done never came (:data:`DONE_TIMEOUT_GO_ON`): its deltas are its text,
        its stream is closed (nothing else is awaited on it: vLLM holds a stream's audio while a
        generation finishes) and new audio goes to a new stream."""
        stream = generation.stream
        actions: list[Action] = [
            Replaying(
                f"no transcription.done within {self.done_timeout_s:.0f} s of the final commit; "
                "the generation's deltas are its text and the audio after it goes on on a new "
                "stream"
            )
        ]
        self._streams.pop(stream, None)
        actions.append(CloseStream(stream))
        if stream == self._active:
            self._active = self._next if self._next is not None else self._open(actions)
            self._next = None
        return actions + self._done(stream, {"text": None}, now, closed=True)

    def _error(self, stream: int, event: dict[str, Any], now: float) -> list[Action]:
        raw_code = event.get("code")
        # Escaped and bounded like the message: a short code can hold terminal control sequences
        # too.
        code = None if raw_code is None else one_line(raw_code, 64)
        # The server's text, on one line of bounded length.
        message = "(no message)" if event.get("error") is None else one_line(event.get("error"))
        if code == SESSION_LIMIT_CODE:
            return self._session_limit(event, message, now)
        if code in REOPEN_CODES:
            return self._recover(
                f"the stream dropped ({code}: {message})",
                now,
                drop=RealtimeError(f"the endpoint reported {code}: {message}", code=code),
            )
        if code == SERVER_BUSY_CODE:
            return self._busy(stream, message, now)
        if code == IDLE_TIMEOUT_CODE and stream == self._next:
            del self._streams[
                stream
            ]  # the stream opened ahead waited too long: open another when needed
            self._next = None
            return [CloseStream(stream)]
        hint = ERROR_HINTS.get(str(code), "see the endpoint's CloudWatch logs")
        return self._fail(
            RealtimeError(
                f"the endpoint reported an error ({code or 'no code'}): {message}; {hint}",
                code=code,
            )
        )

    def _session_limit(self, event: dict[str, Any], message: Any, now: float) -> list[Action]:
        generation = self._generations[0] if self._generations else None
        stated = event.get("limit_s")
        bound = (
            float(stated)
            if isinstance(stated, (int, float)) and stated > 0
            else (generation.audio_s if generation is not None else self.session_limit_s)
        )
        new_limit_s = min(self.session_limit_s, bound) * SESSION_LIMIT_MARGIN
        self._limit_replays += 1
        if self._limit_replays > MAX_LIMIT_REPLAYS or new_limit_s < MIN_SESSION_LIMIT_S:
            return self._fail(
                RealtimeError(
                    f"the endpoint reported an error (session_limit): {message}; the client "
                    f"lowered its session limit {self._limit_replays - 1} times and still hit "
                    "the endpoint's, pass --session-limit below the endpoint's limit",
                    code=SESSION_LIMIT_CODE,
                )
            )
        old_limit_s, self.session_limit_s = self.session_limit_s, new_limit_s
        return self._recover(
            f"the endpoint's session limit is below {old_limit_s:.0f} s: using {new_limit_s:.0f} s "
            "and",
            now,
        )

    def _busy(self, stream: int, message: Any, now: float) -> list[Action]:
        if stream == self._next:  # the active stream goes on; open the next one later
            del self._streams[stream]
            self._next = None
            self._next_not_before = (
                now + BUSY_RETRY_DELAYS_S[min(self._busy_retries, len(BUSY_RETRY_DELAYS_S) - 1)]
            )
            return [CloseStream(stream)]
        if self._busy_retries >= len(BUSY_RETRY_DELAYS_S):
            return self._fail(
                RealtimeError(
                    f"the endpoint reported an error (server_busy): {message}; still busy after "
                    f"{len(BUSY_RETRY_DELAYS_S)} retries; {ERROR_HINTS[SERVER_BUSY_CODE]}",
                    code=SERVER_BUSY_CODE,
                )
            )
        delay = BUSY_RETRY_DELAYS_S[self._busy_retries]
        self._busy_retries += 1
        return self._recover(
            f"the endpoint is busy ({message}): retrying in {delay:g} s, then",
            now,
            reopen_after=delay,
        )

    def _recover(
        self,
        reason: str,
        now: float,
        *,
        drop: BaseException | None = None,
        reopen_after: float = 0.0,
    ) -> list[Action]:
        """Close every stream and resend the audio since the last ``transcription.done`` on a new
        one."""
        if drop is not None:
            if self._reopens_in_a_row >= MAX_REOPENS:
                return self._fail(
                    RealtimeError(
                        f"the stream dropped again after a reopen ({drop}); the transcript may "
                        "be missing the audio from the last transcription.done on; check the "
                        "network and the endpoint's health (`aws sagemaker describe-endpoint`), "
                        "then retry",
                        code="stream_dropped",
                    )
                )
            self._reopens += 1
            self._reopens_in_a_row += 1
        pending = self._generations
        resend = [chunk for generation in pending for chunk in generation.chunks]
        resend_s = sum(generation.audio_s for generation in pending)
        for generation in pending:
            self.transcript.discard(generation.segment)
        actions: list[Action] = [CloseStream(stream) for stream in self._streams]
        self._streams.clear()
        self._generations, self._current, self._next = [], None, None
        self._buffer.extendleft(reversed(resend))
        self._buffered_s += resend_s
        self._replayed_s += resend_s
        actions.append(
            Replaying(
                f"{reason}; resending this session's {resend_s:.1f} s of audio since the last "
                "transcription.done on a new stream"
            )
        )
        if reopen_after > 0:
            self._active = None
            self._reopen_at = now + reopen_after
        else:
            self._active = self._open(actions)
        return actions

    def _fail(self, error: RealtimeError) -> list[Action]:
        actions: list[Action] = [CloseStream(stream) for stream in self._streams]
        self._streams.clear()
        self.finished = True
        return [*actions, Failed(error)]
