"""One Amazon Connect call's two tracks through the Voxtral endpoint, checkpointed
(:class:`CallTranscriber`); :class:`~connect_consumer.consumer.Consumer` runs many in one task.

Per call: GetMedia from the checkpoint (else from Connect's StartFragmentNumber) ->
:class:`~connect_consumer.mkv.FragmentFramer` -> :func:`~connect_consumer.mkv_parser.parse_fragment`
-> each track resampled 8 -> 16 kHz (:class:`voice_client.audio.Pcm16Resampler`) -> one
:class:`voice_client.realtime.TranscriptionMachine` per track, driven like ``voicectl
transcribe`` (generations, stream moves before the platform's stream cap, resends after a cut) ->
:class:`~connect_consumer.sink.Segment` s to EventBridge (partials and finals) and DynamoDB
(finals).

Offsets: a track's audio is counted in samples from the call's first fragment; a fragment in which
one track is shorter than the other is padded with silence on that track, so both clocks stay call
time (unconfirmed: Connect is expected to write both tracks in every fragment).

Checkpoint (exactly once for finals in the table): each final segment is written together with the
checkpoint that covers it, in one DynamoDB transaction: the last fragment whose audio both tracks
have finished, and how far each track's finals reach. Its event follows (EventBridge delivers at
least once: ``segmentId`` names it). A restarted consumer asks GetMedia for the fragments after it
and, per track, skips the audio its finals already cover, so nothing is lost and no final is
published twice (partials may repeat: they are partial).

The call ends cleanly when GetMedia's payload ends after the call's last fragment (the producer
stopped), or a fragment of another contact arrives (Connect reuses a stream for later calls); a
reset or stalled GetMedia is reopened after the last whole fragment a few times
(:data:`GET_MEDIA_RETRIES`); a track is transcribed from its first audio (a flow streaming one side
opens one endpoint stream); a bad fragment (truncated, real AAC, video, over a bound) or a lasting
GetMedia error fails this call only (:class:`~connect_consumer.call.CallFailed`). An endpoint at
its stream cap (``server_busy`` after the client's own retries) raises
:class:`~connect_consumer.call.EndpointBusy`, a ModelError from SageMaker
:class:`~connect_consumer.call.EndpointUnavailable`: the call waits, and while it waits
:meth:`CallTranscriber.probe` reads its new fragments to learn whether it is still live.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from connect_consumer import mkv
from connect_consumer.call import (
    CallFailed,
    CallRequest,
    Checkpoint,
    EndpointBusy,
    EndpointUnavailable,
)
from connect_consumer.kvs import (
    CONTINUATION_TOKEN_PATTERN,
    FRAGMENT_NUMBER_PATTERN,
    MIN_GET_MEDIA_INTERVAL_S,
    MediaError,
    start_selector,
)
from connect_consumer.mkv_parser import parse_fragment
from connect_consumer.sink import (
    CALL_STARTED,
    MAX_REASON_BYTES,
    MAX_TEXT_BYTES,
    SEGMENT,
    Segment,
    cut_utf8,
)
from voice_client.audio import CHUNK_BYTES, Pcm16Resampler
from voice_client.realtime import (
    DEFAULT_MAX_STREAM_S,
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
    SERVER_BUSY_CODE,
    RealtimeError,
    ShowDelta,
    ShowGenerationText,
    TranscriptionMachine,
    TransportOpener,
)
from voice_client.realtime.driver import drive_machine
from voice_client.realtime.policy import DONE_TIMEOUT_GO_ON

LOG = logging.getLogger("connect_consumer.consumer")
"""The consumer's logger: a call's lines under one name, whichever module writes them."""

DEFAULT_QUIET_S = 10.0
"""Seconds an open GetMedia may go without a new fragment before the reader takes it for stalled and
reopens it: a safety only. GetMedia ends its payload 3 s after the last ingested fragment (API
reference), and Connect writes a fragment every 1.024 s while a call streams (real dumps), so a live
stream never gets near it."""
END_OF_STREAM = "the stream ended"
"""Why a call ended when GetMedia's payload ended after its last fragment (the producer stopped)."""
END_STOP_STREAMING = "the producer marked its last fragment (STOP_STREAMING)"
GET_MEDIA_RETRIES = 3
"""GetMedia failures in a row (a reset, a transient error chunk, a stall; none with a new fragment
between them) after which a call fails, its reason naming the last one."""
RETRY_PAUSE_S = 1.0
"""Pause before reopening GetMedia after a failure, times the failures in a row."""
TRACK_QUEUE_CHUNKS = 256
"""Resampled 128 ms chunks held per track between the reader and the transcription (32 s): a slow
endpoint slows the reader, which slows GetMedia (TCP backpressure), never drops audio."""
SAMPLE_BYTES = 2
PROBE_S = 5.0
"""Seconds a waiting call reads its stream (is the call still live?) before it tries the endpoint
again: GetMedia on a live stream never ends by itself; the next probe reads on from the last
fragment read."""
MODEL_ERROR_CODE = "ModelError"
"""The code :func:`voice_client.sagemaker_errors.describe_error` gives SageMaker's ModelError."""


@dataclass
class _FragmentSpan:
    number: str
    end_s: float  # both tracks' offset at its end (they are kept equal)


class _Resume(Exception):
    """A transient GetMedia failure: reopen after the last whole fragment."""


def _frame_and_parse(framer: mkv.FragmentFramer, piece: bytes) -> list[mkv.Fragment]:
    return [parse_fragment(data) for data in framer.feed(piece)]


def _close_and_parse(framer: mkv.FragmentFramer) -> list[mkv.Fragment]:
    return [parse_fragment(data) for data in framer.close()]


class CallTranscriber:
    """Transcribes one call from its checkpoint to its end (see the module docstring).

    Args:
        call: the call.
        media: ``get_media(stream_arn, selector)`` -> async iterator of payload bytes
            (:class:`~.kvs.KvsMedia`).
        opener: opens a stream to the endpoint (SageMaker bidirectional streaming or the
            bearer-token URL).
        store: the sink (events, segments, call state, checkpoint).
        quiet_s: seconds without a fragment that end the call.
    """

    def __init__(
        self,
        call: CallRequest,
        *,
        media: Any,
        opener: TransportOpener,
        store: Any,
        model: str = DEFAULT_MODEL,
        quiet_s: float = DEFAULT_QUIET_S,
        session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
        max_stream_s: float = DEFAULT_MAX_STREAM_S,
        clock: Callable[[], float] = time.monotonic,
        on_segment: Callable[[Segment], None] = lambda segment: None,
        on_metric: Callable[[str, float], None] = lambda name, value: None,
    ) -> None:
        self.call, self.media, self.opener, self.store = call, media, opener, store
        self.model, self.quiet_s = model, quiet_s
        self.session_limit_s, self.max_stream_s = session_limit_s, max_stream_s
        self.clock = clock
        self.on_segment, self.on_metric = on_segment, on_metric
        self.checkpoint = Checkpoint()
        self._spans: list[_FragmentSpan] = []
        self._offset_s = 0.0  # both tracks' offset at the end of the last fragment read
        self._checkpoint_lock = asyncio.Lock()
        # One final written at a time: the two tracks' transactions both write the CHECKPOINT item
        # (two at once conflict), and a later checkpoint must never be overwritten by an earlier one
        # finishing last.
        self._commit_lock = asyncio.Lock()
        self._committing: set[asyncio.Future] = (
            set()
        )  # a final's commit and event, finished even when stopped
        self._last_tags: dict[str, str] = {}
        self._last_number: str | None = None
        self._tracks: dict[
            str, asyncio.Task
        ] = {}  # each track's transcription, from its first audio
        self._track_added = asyncio.Event()
        self._warned: set[str] = set()  # skipped track names already logged
        self._probe_failures = 0
        self.announce = (
            True  # publish Call Started when no checkpoint exists (the Consumer's retries do not)
        )
        self.partials_dropped = (
            0  # partial events the bus refused after the sink's retries (logged, not fatal)
        )

    # ---- the run --------------------------------------------------------------------------------
    async def run(self) -> str:
        """Transcribe until the call ends; returns why it ended. Raises :class:`CallFailed` or
        :class:`EndpointBusy`."""
        saved = await self.store.load_checkpoint(self.call.contact_id)
        if saved:
            self.checkpoint = Checkpoint(**saved)
        elif self.announce:
            await self.store.publish(
                CALL_STARTED, {"contactId": self.call.contact_id, "streamArn": self.call.stream_arn}
            )
        await self.store.set_call(self.call.contact_id, "ACTIVE")
        # A track's transcription starts when its audio first appears: a flow that streams only the
        # customer's side opens one endpoint stream, not a second one of silence.
        queues: dict[str, asyncio.Queue] = {}
        self._track_added = asyncio.Event()
        reader = asyncio.create_task(self._read(queues))
        try:
            while not reader.done():
                self._track_added.clear()
                added = asyncio.create_task(self._track_added.wait())
                running = [task for task in (reader, *self._tracks.values()) if not task.done()]
                await asyncio.wait([*running, added], return_when=asyncio.FIRST_COMPLETED)
                added.cancel()
                for task in (reader, *self._tracks.values()):
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
            await asyncio.gather(*self._tracks.values())
            return reader.result()
        finally:
            for task in (reader, *self._tracks.values()):
                task.cancel()
            await asyncio.gather(reader, *self._tracks.values(), return_exceptions=True)
            # A final being written when the call was stopped is written whole, event included,
            # before the call counts as stopped: the task that resumes it reads a checkpoint that
            # covers it, and never publishes the final again.
            await asyncio.gather(*self._committing, return_exceptions=True)

    def _start_track(self, track: str, queues: dict[str, asyncio.Queue]) -> None:
        queues[track] = asyncio.Queue(TRACK_QUEUE_CHUNKS)
        self._tracks[track] = asyncio.create_task(self._transcribe(track, queues[track]))
        self._track_added.set()

    # ---- reading --------------------------------------------------------------------------------
    async def _read(self, queues: dict[str, asyncio.Queue]) -> str:
        """GetMedia -> fragments -> resampled chunks per track. Returns why the call ended.

        The call ends when GetMedia's payload ends after the last fragment (the producer stopped:
        the reference consumers, amazon-connect-realtime-transcription and the Python consumer
        library, end there), at GetMedia's 4000 "fragment not found" after it, or at a fragment of
        another contact. A transport failure or a transient error chunk reopens GetMedia after the
        last whole fragment read, :data:`GET_MEDIA_RETRIES` times in a row at most, then fails the
        call; so does a stream open without a new fragment for ``quiet_s`` (a stall: GetMedia itself
        ends a payload 3 s after the last ingested fragment).
        """
        cp = self.checkpoint
        after = cp.fragment or self.call.start_fragment
        skip_through = (
            cp.fragment
        )  # GetMedia may return the named fragment itself (unconfirmed either way)
        self._offset_s = max(cp.fragment_end_s.values(), default=0.0)
        resamplers: dict[str, Pcm16Resampler] = {}
        pending: dict[str, bytearray] = {}
        token: str | None = None
        last_open = -math.inf
        failures = 0
        while True:
            wait = last_open + MIN_GET_MEDIA_INTERVAL_S - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            last_open = self.clock()
            selector = (
                start_selector(continuation_token=token)
                if token
                else start_selector(after_fragment=after)
            )
            seen_before = self._last_number
            try:
                reason = await self._read_stream(
                    selector, skip_through, resamplers, pending, queues
                )
                break
            except _Resume as error:
                failures = 0 if self._last_number != seen_before else failures + 1
                if failures >= GET_MEDIA_RETRIES:
                    raise CallFailed(
                        f"GetMedia failed {failures} times in a row after fragment "
                        f"{self._last_number or after}: {error}"
                    ) from error
                LOG.warning(
                    "%s: GetMedia reopened after fragment %s: %s",
                    self.call.contact_id,
                    self._last_number or after,
                    error,
                )
                await asyncio.sleep(RETRY_PAUSE_S * failures)
            except mkv.FragmentError as error:
                raise CallFailed(
                    f"a bad fragment after fragment {self._last_number or after}: {error}"
                ) from error
            token = self._last_tags.get(mkv.TAG_CONTINUATION_TOKEN, token)
            if token is not None and not CONTINUATION_TOKEN_PATTERN.fullmatch(token):
                token = (
                    None  # a producer's tag cannot make the reader build a request the API refuses
                )
            after = self._last_number or after
        for track, queue in queues.items():
            tail = bytes(pending[track]) + resamplers[track].flush()
            for start in range(0, len(tail), CHUNK_BYTES):
                await queue.put(tail[start : start + CHUNK_BYTES])
            await queue.put(None)
        return reason

    async def _read_stream(
        self,
        selector: dict[str, str],
        skip_through: str | None,
        resamplers: dict[str, Pcm16Resampler],
        pending: dict[str, bytearray],
        queues: dict[str, asyncio.Queue],
    ) -> str:
        """One GetMedia payload; returns why the call ended, or raises :class:`_Resume` to reopen
        it."""
        framer = mkv.FragmentFramer()
        pieces = self.media.get_media(self.call.stream_arn, selector)
        last_fragment_at = self.clock()
        async with contextlib.aclosing(pieces):
            while True:
                timeout = max(0.0, last_fragment_at + self.quiet_s - self.clock())
                try:
                    piece = await asyncio.wait_for(anext(pieces), timeout)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise _Resume(
                        f"no fragment for {self.quiet_s:g} s on an open GetMedia: stalled"
                    ) from None
                except MediaError as error:
                    if not error.transient:
                        raise CallFailed(f"GetMedia: {error}") from error
                    raise _Resume(str(error)) from error
                except OSError as error:  # a media object other than KvsMedia: a reset socket
                    raise _Resume(f"{type(error).__name__}: {error}") from error
                # Framing and parsing run in a worker thread: a large or hostile fragment cannot
                # stall other calls.
                fragments = await asyncio.to_thread(_frame_and_parse, framer, piece)
                for fragment in fragments:
                    if ended := await self._fragment(
                        fragment, skip_through, resamplers, pending, queues
                    ):
                        return ended
                    # From here (not from its arrival): a transcription slower than the call holds
                    # the reader in its queues, which is backpressure, not a stall.
                    last_fragment_at = self.clock()
        for fragment in await asyncio.to_thread(_close_and_parse, framer):
            if ended := await self._fragment(fragment, skip_through, resamplers, pending, queues):
                return ended
        return END_OF_STREAM

    async def _fragment(
        self,
        fragment: mkv.Fragment,
        skip_through: str | None,
        resamplers: dict[str, Pcm16Resampler],
        pending: dict[str, bytearray],
        queues: dict[str, asyncio.Queue],
    ) -> str | None:
        """Handle one fragment; returns a reason when the call ends at it."""
        if ended := self._check(fragment):
            return ended
        number = fragment.number
        assert number is not None
        if self._last_number is not None and int(number) <= int(self._last_number):
            return None  # read already (a reopened GetMedia may start at the fragment it was given)
        self._last_tags, self._last_number = fragment.tags, number
        for name in fragment.skipped:
            if name not in self._warned:
                self._warned.add(name)
                LOG.warning(
                    "%s: track %s skipped: not one of Connect's (%s)",
                    self.call.contact_id,
                    name,
                    ", ".join(mkv.CONNECT_TRACKS),
                )
        if skip_through is not None and int(number) <= int(skip_through):
            return None  # finished before the restart
        behind = fragment.tags.get(mkv.TAG_MILLIS_BEHIND_NOW)
        if behind is not None and behind.isdigit():
            self.on_metric("MillisBehindNow", float(behind))
        seconds = max((fragment.seconds(track) for track in fragment.audio), default=0.0)
        start_s = self._offset_s
        for track in fragment.audio:
            if track not in queues:
                self._start_track(track, queues)
                resamplers[track] = Pcm16Resampler(mkv.CONNECT_SAMPLE_RATE_HZ)
                # A track first seen after the call's start begins with silence up to there (call
                # time).
                lead = max(0.0, start_s - self.checkpoint.done_s.get(track, 0.0))
                pending[track] = bytearray(
                    resamplers[track].resample(
                        bytes(round(lead * mkv.CONNECT_SAMPLE_RATE_HZ) * SAMPLE_BYTES)
                    )
                )
        for track in queues:
            pcm = fragment.audio.get(track, b"")
            pcm += bytes(
                round(seconds * mkv.CONNECT_SAMPLE_RATE_HZ) * SAMPLE_BYTES - len(pcm)
            )  # pad to call time
            done = self.checkpoint.done_s.get(track, 0.0)
            skip = min(
                len(pcm) // SAMPLE_BYTES,
                max(0, round((done - start_s) * mkv.CONNECT_SAMPLE_RATE_HZ)),
            )
            pending[track] += resamplers[track].resample(pcm[skip * SAMPLE_BYTES :])
            whole = len(pending[track]) - len(pending[track]) % CHUNK_BYTES
            for at in range(0, whole, CHUNK_BYTES):
                await queues[track].put(bytes(pending[track][at : at + CHUNK_BYTES]))
            del pending[track][:whole]
        self._offset_s = start_s + seconds
        self._spans.append(_FragmentSpan(number, self._offset_s))
        if fragment.stop_streaming:
            return END_STOP_STREAMING
        return None

    def _check(self, fragment: mkv.Fragment) -> str | None:
        """Why the call ends at ``fragment`` (an error chunk, another contact), or None; raises
        :class:`CallFailed` for an error that ends it badly, :class:`_Resume` for a transient
        one."""
        code = fragment.error_code
        if code is not None:
            error = mkv.cut(fragment.error or "")
            if code == mkv.ERROR_FRAGMENT_NOT_FOUND and self._last_number is not None:
                return END_OF_STREAM  # nothing after the last fragment read
            if code == mkv.ERROR_FRAGMENT_NOT_FOUND:
                raise CallFailed(
                    f"GetMedia: {error}: the call's start fragment "
                    f"{self.call.start_fragment[:128]} is not in the stream (past its retention, "
                    "or another stream's)"
                )
            if code in mkv.TRANSIENT_ERROR_CODES:
                raise _Resume(f"GetMedia reported error {error}")
            raise CallFailed(f"GetMedia stopped with error {error}")
        if fragment.contact_id and fragment.contact_id != self.call.contact_id:
            return f"the stream moved on to contact {mkv.cut(fragment.contact_id, 64)}"
        number = fragment.number
        if number is None or not FRAGMENT_NUMBER_PATTERN.fullmatch(number):
            raise CallFailed(
                f"a fragment without a valid AWS_KINESISVIDEO_FRAGMENT_NUMBER "
                f"({mkv.cut(number or '', 64)!r}; 1-128 digits)"
            )
        return None

    # ---- while the call waits -------------------------------------------------------------------
    async def probe(self, after: str | None) -> tuple[str | None, float, str | None]:
        """Read the call's fragments after fragment ``after`` (None: from the checkpoint) without
        transcribing them, for up to :data:`PROBE_S`: is the call still live while it waits for the
        endpoint?

        Returns (the last fragment number read, or ``after`` if none; seconds of call audio in the
        fragments read; why the call ended, or None while it is live). The call ended when
        GetMedia's payload ends (after the last fragment, or at 4000 "fragment not found") or
        another contact's fragment arrives. A transient failure counts as live;
        :data:`GET_MEDIA_RETRIES` of them in a row fail the call. Raises :class:`CallFailed` on a
        bad fragment or a lasting error, as a transcribed call would.
        """
        skip_through = after if after is not None else self.checkpoint.fragment
        start = skip_through or self.call.start_fragment
        last, seconds = skip_through, 0.0
        framer = mkv.FragmentFramer()
        began = self.clock()

        def read(fragment: mkv.Fragment) -> str | None:
            nonlocal last, seconds
            if ended := self._check(fragment):
                return ended
            number = fragment.number
            assert number is not None
            if last is None or int(number) > int(
                last
            ):  # else read already (GetMedia may start at the given one)
                last = number
                seconds += max((fragment.seconds(track) for track in fragment.audio), default=0.0)
            return None

        try:
            pieces = self.media.get_media(
                self.call.stream_arn, start_selector(after_fragment=start)
            )
            async with contextlib.aclosing(pieces):
                while True:
                    try:
                        piece = await asyncio.wait_for(
                            anext(pieces), max(0.0, began + PROBE_S - self.clock())
                        )
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        self._probe_failures = 0
                        return (
                            last,
                            seconds,
                            None,
                        )  # a live stream never ends by itself: the next probe reads on
                    for fragment in await asyncio.to_thread(_frame_and_parse, framer, piece):
                        if ended := read(fragment):
                            return last, seconds, ended
            for fragment in await asyncio.to_thread(_close_and_parse, framer):
                if ended := read(fragment):
                    return last, seconds, ended
        except mkv.FragmentError as error:
            raise CallFailed(f"a bad fragment after fragment {last or start}: {error}") from error
        except (_Resume, MediaError, OSError) as error:
            if isinstance(error, MediaError) and not error.transient:
                raise CallFailed(f"GetMedia: {error}") from error
            self._probe_failures = 0 if last != skip_through else self._probe_failures + 1
            if self._probe_failures >= GET_MEDIA_RETRIES:
                raise CallFailed(
                    f"GetMedia failed {self._probe_failures} times in a row after fragment "
                    f"{last or start}: {error}"
                ) from error
            return last, seconds, None
        self._probe_failures = 0
        return last, seconds, END_OF_STREAM

    # ---- transcribing ---------------------------------------------------------------------------
    async def _transcribe(self, track: str, queue: asyncio.Queue) -> None:
        base_s = self.checkpoint.done_s.get(track, 0.0)
        # The generation's text so far, its tail only however long it runs: a partial event carries
        # its last MAX_TEXT_BYTES (Segment.detail cuts it and says so; more characters than that
        # many bytes are kept here).
        partial = ""

        async def chunks():
            while (chunk := await queue.get()) is not None:
                yield chunk

        async def on_partial(delta: str) -> None:
            nonlocal partial
            partial += delta
            if len(partial) > 2 * MAX_TEXT_BYTES:
                partial = partial[-(MAX_TEXT_BYTES + 1) :]
            segment = Segment(
                self.call.contact_id,
                track,
                partial,
                self.checkpoint.done_s.get(track, base_s),
                self.checkpoint.done_s.get(track, base_s),
                final=False,
            )
            try:
                await self.store.publish(SEGMENT, segment.detail())
            except (
                Exception
            ) as error:  # a partial is superseded by the next and by the final: never fatal
                self.partials_dropped += 1
                LOG.warning(
                    "call %s %s: a partial event was dropped: %s",
                    self.call.contact_id,
                    track,
                    cut_utf8(str(error), MAX_REASON_BYTES),
                )

        async def on_final(action: ShowGenerationText) -> None:
            nonlocal partial
            partial = ""
            segment = Segment(
                self.call.contact_id,
                track,
                action.text,
                base_s + action.start_s,
                base_s + action.end_s,
                final=True,
            )
            async with self._commit_lock:
                state = await self._advance(track, segment.end_s)
                # The segment and the checkpoint that covers it are written in one transaction, then
                # the event is published; shielded, so that a stop (SIGTERM cancels the call tasks)
                # never lands between them.
                commit = asyncio.ensure_future(self._commit(segment, state))
                self._committing.add(commit)
                commit.add_done_callback(self._committing.discard)
                await asyncio.shield(commit)

        async def on_action(action: Any) -> None:
            if isinstance(action, ShowGenerationText):
                await on_final(action)
            elif isinstance(action, ShowDelta) and action.text:
                await on_partial(action.text)

        machine = TranscriptionMachine(
            model=self.model,
            session_limit_s=self.session_limit_s,
            max_stream_s=self.max_stream_s,
            on_done_timeout=DONE_TIMEOUT_GO_ON,
        )
        try:
            await drive_machine(
                machine,
                chunks(),
                self.opener,
                on_action=on_action,
                clock=self.clock,
                on_replay=lambda reason: LOG.info("%s %s: %s", self.call.contact_id, track, reason),
            )
        except RealtimeError as error:
            if error.code == SERVER_BUSY_CODE:
                raise EndpointBusy(str(error)) from error
            if error.code == MODEL_ERROR_CODE:
                raise EndpointUnavailable(f"track {track}: {error}") from error
            raise CallFailed(f"track {track}: {error}") from error

    async def _commit(self, segment: Segment, state: dict[str, Any]) -> None:
        await self.store.commit_final(segment, state)
        await self.store.publish(SEGMENT, segment.detail())
        self.on_segment(segment)

    async def _advance(self, track: str, done_s: float) -> dict[str, Any]:
        """Move the checkpoint to the last fragment both tracks have finished; returns its new
        state."""
        async with self._checkpoint_lock:
            cp = self.checkpoint
            cp.done_s[track] = max(cp.done_s.get(track, 0.0), done_s)
            reached = min(cp.done_s.get(name, 0.0) for name in (self._tracks or mkv.CONNECT_TRACKS))
            # A resampler's rounding may leave a final a sample short of a fragment's end: allow a
            # millisecond.
            while self._spans and self._spans[0].end_s <= reached + 1e-3:
                span = self._spans.pop(0)
                cp.fragment, cp.fragment_end_s = (
                    span.number,
                    dict.fromkeys(mkv.CONNECT_TRACKS, span.end_s),
                )
            return asdict(cp)
