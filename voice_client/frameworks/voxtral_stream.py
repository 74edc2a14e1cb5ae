"""Streaming Voxtral transcription cut into utterances by a voice-agent framework's voice activity
detection.

:class:`VoxtralUtteranceStream` takes the pipeline's audio as it comes and the framework's
end-of-speech events, and gives :class:`Interim` texts while the user speaks and one :class:`Final`
text per utterance. Each utterance is one run of :func:`voice_client.realtime.transcribe_stream`
(the project's protocol machine and driver, unchanged): its first audio opens a stream and a
generation, audio goes out as ``input_audio_buffer.append`` events, the end of speech is the end of
its audio (the final commit), and ``transcription.done`` is its final text. Audio that comes after
the end of speech starts the next utterance at once, on a new stream, while the previous one
finishes.

Inside an utterance the machine answers ``session_limit``, ``server_busy`` and streams that end with
a new stream, resending the audio since the last ``transcription.done`` (nothing lost). vLLM's
realtime server can leave a final commit without ``transcription.done`` (vllm-project/vllm#33962):
the utterance then ends after :data:`DONE_WAIT_S` with the deltas that arrived
(:attr:`Final.complete` False, and a warning says so).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import numpy as np

from voice_client.audio import CHUNK_BYTES
from voice_client.realtime.driver import transcribe_stream
from voice_client.realtime.policy import DEFAULT_SESSION_LIMIT_S
from voice_client.realtime.protocol import DEFAULT_MODEL, RealtimeError
from voice_client.realtime.transcript import Transcript
from voice_client.realtime.transport import TransportOpener

logger = logging.getLogger(__name__)

DONE_WAIT_S = 3.0
"""Seconds an utterance waits for ``transcription.done`` after its final commit before it ends with
the deltas that arrived: above the 1.89 s p99 time to final transcript Pipecat measured for hosted
Voxtral (pipecat ``services/stt_latency.py``, ``MISTRAL_TTFS_P99``), so that only a lost ``done``
(vllm-project/vllm#33962) reaches it."""

VOXTRAL_TTFS_P99_S = 1.89
"""P99 seconds from the end of speech to the final transcript, announced to the framework's turn
logic: Pipecat's measurement of hosted Voxtral Realtime (``MISTRAL_TTFS_P99``) until this endpoint's
own GPU figure is measured (``bench/agent_latency_bench.py --voxtral-endpoint``; pass the measured
value as ``ttfs_p99_latency``)."""

TIMEOUT_CODE = "timeout"
"""The machine's error code for a ``transcription.done`` that did not come within the wait."""


@dataclass(frozen=True)
class Interim:
    """The utterance's text so far, stripped (every delta since its start; text replaced after a
    resend is dropped)."""

    text: str


@dataclass(frozen=True)
class Final:
    """The utterance's final text.

    Attributes:
        text: the text (``transcription.done``; the deltas when it did not come).
        complete: False when no ``transcription.done`` came within :data:`DONE_WAIT_S`
            (vllm-project/vllm#33962).
        speech_end_at: the clock when the end of speech was reported (None: the stream was closed
            first).
        final_at: the clock when the text was final.
    """

    text: str
    complete: bool
    speech_end_at: float | None
    final_at: float


@dataclass(frozen=True)
class Failure:
    """An utterance failed (its audio is not transcribed). ``fatal``: nothing was ever accepted by
    the endpoint (an unknown endpoint, refused credentials): the stream stops taking audio."""

    error: RealtimeError
    fatal: bool


SttEvent = Interim | Final | Failure


@dataclass
class _Utterance:
    queue: asyncio.Queue[bytes | None]  # its audio; None ends it
    transcript: Transcript
    pending: bytearray
    # Its events; None ends them.
    out: asyncio.Queue[SttEvent | None] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    speech_end_at: float | None = None


class VoxtralUtteranceStream:
    """Streaming transcription of one audio source, cut into utterances by the caller's
    end-of-speech events.

    Feed it with :meth:`push_audio` (16 kHz mono PCM16) and :meth:`end_of_speech`; read
    :attr:`events` (:data:`SttEvent`, in order: interims then the final of each utterance, finals in
    utterance order). Close it with :meth:`aclose`.

    Args:
        opener: opens a new stream to the endpoint (:meth:`VoxtralTarget.opener`).
        model: the model name for ``session.update``.
        done_wait_s: the bounded wait for ``transcription.done`` (:data:`DONE_WAIT_S`).
        session_limit_s: audio seconds per generation (the machine's limit).
        clock: monotonic clock in seconds.
    """

    def __init__(
        self,
        opener: TransportOpener,
        *,
        model: str = DEFAULT_MODEL,
        done_wait_s: float = DONE_WAIT_S,
        session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.opener = opener
        self.model = model
        self.done_wait_s = done_wait_s
        self.session_limit_s = session_limit_s
        self.clock = clock
        self.events: asyncio.Queue[SttEvent | None] = asyncio.Queue()
        """What the stream gives, in order (None is never put by the stream: a reader may put it
        to stop itself)."""
        self.failed: RealtimeError | None = None
        self.accepted = False
        self._current: _Utterance | None = None
        # Utterances, in order, for the forwarder.
        self._order: asyncio.Queue[_Utterance] = asyncio.Queue()
        self._forwarder: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def push_audio(self, pcm16: bytes) -> None:
        """Add 16 kHz mono PCM16 audio to the current utterance (starting one if none is open).

        Audio goes out in :data:`~voice_client.audio.CHUNK_BYTES` pieces (128 ms, the size the
        machine's quiet detection is tuned for); the rest goes at the end of speech.
        """
        if self.failed is not None or not pcm16:
            return
        utterance = self._current or self._start()
        utterance.pending += pcm16
        while len(utterance.pending) >= CHUNK_BYTES:
            utterance.queue.put_nowait(bytes(utterance.pending[:CHUNK_BYTES]))
            del utterance.pending[:CHUNK_BYTES]

    def end_of_speech(self) -> None:
        """The user stopped speaking: send the utterance's last audio and its final commit. No-op
        without audio."""
        utterance, self._current = self._current, None
        if utterance is None:
            return
        utterance.speech_end_at = self.clock()
        if utterance.pending:
            utterance.queue.put_nowait(bytes(utterance.pending))
            utterance.pending.clear()
        utterance.queue.put_nowait(None)

    async def aclose(self, *, wait_s: float = 0.0) -> None:
        """End the stream: the open utterance ends as after :meth:`end_of_speech`; utterances still
        running after ``wait_s`` seconds are cancelled (their streams closed)."""
        self.end_of_speech()
        tasks = list(self._tasks)
        if tasks and wait_s > 0:
            await asyncio.wait(tasks, timeout=wait_s)
        if self._forwarder is not None:
            # The forwarder ends after what is done.
            self._order.put_nowait(None)  # type: ignore[arg-type]
            tasks.append(self._forwarder)
            if wait_s > 0:
                await asyncio.wait({self._forwarder}, timeout=wait_s)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _start(self) -> _Utterance:
        utterance = _Utterance(asyncio.Queue(), Transcript(), bytearray())
        utterance.task = asyncio.create_task(self._run(utterance))
        self._tasks.add(utterance.task)
        utterance.task.add_done_callback(self._tasks.discard)
        if self._forwarder is None:
            self._forwarder = asyncio.create_task(self._forward())
        self._order.put_nowait(utterance)
        self._current = utterance
        return utterance

    async def _forward(self) -> None:
        """Pass on each utterance's events, one utterance after the other: a later utterance's
        interims wait for the earlier one's final."""
        while (utterance := await self._order.get()) is not None:
            while (event := await utterance.out.get()) is not None:
                self.events.put_nowait(event)
                if not isinstance(event, Interim):
                    break

    async def _run(self, utterance: _Utterance) -> None:
        def on_delta(delta: str) -> None:
            if delta:
                utterance.out.put_nowait(Interim(utterance.transcript.text.strip()))

        def on_accepted() -> None:
            self.accepted = True

        event: SttEvent
        try:
            result = await transcribe_stream(
                _audio_of(utterance.queue),
                self.opener,
                model=self.model,
                on_delta=on_delta,
                on_accepted=on_accepted,
                transcript=utterance.transcript,
                session_limit_s=self.session_limit_s,
                done_timeout_s=self.done_wait_s,
                clock=self.clock,
            )
            event = Final(result.transcript.strip(), True, utterance.speech_end_at, self.clock())
        except RealtimeError as error:
            if error.code == TIMEOUT_CODE and utterance.speech_end_at is not None:
                text = utterance.transcript.text.strip()
                logger.warning(
                    "no transcription.done within %.1f s of the final commit "
                    "(vllm-project/vllm#33962): the utterance ends with the deltas "
                    "received: %r",
                    self.done_wait_s,
                    text,
                )
                event = Final(text, False, utterance.speech_end_at, self.clock())
            else:
                fatal = not self.accepted
                if fatal and self.failed is not None:
                    utterance.out.put_nowait(None)  # an earlier utterance already reported why
                    return
                if fatal:
                    self.failed = error
                event = Failure(error, fatal)
        utterance.out.put_nowait(event)


def mono_pcm16(pcm16: bytes, channels: int) -> bytes:
    """The mono mix (channels averaged) of interleaved PCM16 with ``channels`` channels."""
    if channels <= 1:
        return pcm16
    samples = np.frombuffer(pcm16, dtype="<i2")
    samples = samples[: len(samples) - len(samples) % channels]
    return samples.reshape(-1, channels).mean(axis=1).astype("<i2").tobytes()


async def _audio_of(queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
    while (chunk := await queue.get()) is not None:
        yield chunk
