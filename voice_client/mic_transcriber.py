"""One recording of the mic page, as a transcription: microphone samples in (any rate, int16 or
float, mono or not), 128 ms chunks of 16 kHz PCM16 out to the endpoint, the transcript growing as it
answers (:class:`MicTranscriber`). The page's server (:mod:`voice_client.mic`) makes one per
recording; :mod:`voice_client.mic_recording` feeds it from the page's WebSocket and watches it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import soxr

from voice_client.audio import (
    CHUNK_BYTES,
    RESAMPLER_QUALITY,
    TARGET_SAMPLE_RATE_HZ,
    float_to_pcm16,
)
from voice_client.realtime import (
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
    Transcript,
    TranscriptionResult,
    TransportOpener,
    transcribe_stream,
)

MAX_QUEUED_AUDIO_S = 60.0
"""Seconds of 16 kHz audio a recording may hold waiting for the endpoint (1.9 MB of PCM16). The
endpoint takes audio faster than real time (a replay after a dropped stream catches up at up to 16
x); more waiting means the stream has stopped taking audio, and the recording ends with an error
instead of growing without bound."""


class AudioOverrun(Exception):
    """More audio than a recording may hold (:data:`voice_client.mic_recording.MAX_AHEAD_S`,
    :data:`MAX_QUEUED_AUDIO_S`); the message says which."""


class MicTranscriber:
    """One recording: microphone samples in, a growing transcript out.

    :meth:`start` opens the stream to the endpoint at once (not at the first chunk), so a recording
    that cannot reach the endpoint fails before any audio is taken. :meth:`feed` takes samples as
    the page delivers them (any sample rate, int16 or float, mono or multi-channel), mixes them
    down, resamples them to 16 kHz with a streaming soxr resampler (which keeps filter state across
    chunks, unlike resampling each chunk alone) and queues 4096-byte PCM16 chunks; :meth:`end_audio`
    flushes the resampler and the last partial chunk, so every sample is sent.

    Args:
        opener: opens a stream to the endpoint (from
            :func:`voice_client.transcribe.open_target`).
        model: model name for ``session.update``.
        session_limit_s: audio seconds per session (see :func:`transcribe_stream`).
        on_delta: called with each ``transcription.delta`` text.
        on_replay: called with a one-line reason when a session is replayed on a new stream.
    """

    def __init__(
        self,
        opener: TransportOpener,
        *,
        model: str = DEFAULT_MODEL,
        session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
        on_delta: Callable[[str], None] = lambda delta: None,
        on_replay: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._opener = opener
        self._model = model
        self._session_limit_s = session_limit_s
        self._on_delta = on_delta
        self._on_replay = on_replay
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._queued_bytes = 0
        self._pending = bytearray()
        self._resampler: soxr.ResampleStream | None = None
        self._sample_rate_hz: int | None = None
        self._audio_ended = False
        self._transcript = Transcript()
        self._first_transport: Any = None
        self.first_sent_at: float | None = None
        """``time.monotonic()`` of the first chunk handed to the endpoint, for the watchdog."""
        self.last_sent_at: float | None = None
        self.last_answer_at: float | None = None
        """``time.monotonic()`` of the last ``transcription.delta`` (empty ones included) or
        ``transcription.done``."""
        self.audio_ended_at: float | None = None
        self.accepted = asyncio.Event()
        """Set at the endpoint's first event that is not an ``error``: it accepted the stream."""
        self.task: asyncio.Task[TranscriptionResult] | None = None
        """The transcription, once :meth:`start` returned; it ends after :meth:`end_audio`, or with
        the failure."""

    async def start(self) -> None:
        """Open the stream to the endpoint and start the transcription.

        Raises:
            RealtimeError: the stream cannot be opened (the message says what to check).
        """
        self._first_transport = await self._opener()
        self.task = asyncio.create_task(
            transcribe_stream(
                self._chunks(),
                self._open,
                model=self._model,
                on_delta=self._answered,
                on_replay=self._on_replay,
                on_session_text=lambda text: self._answered(None),
                on_accepted=self.accepted.set,
                transcript=self._transcript,
                session_limit_s=self._session_limit_s,
            )
        )

    def _answered(self, delta: str | None) -> None:
        self.last_answer_at = time.monotonic()
        if delta is not None:
            self._on_delta(delta)

    @property
    def text(self) -> str:
        """The transcript so far: finished sessions plus the deltas of the current one."""
        return self._transcript.text

    def feed(self, sample_rate_hz: int, samples: np.ndarray) -> None:
        """Queue microphone samples (shape ``(n,)`` or ``(n, channels)``; int16, or float in [-1,
        1])."""
        data = np.asarray(samples)
        if np.issubdtype(data.dtype, np.integer):
            data = data.astype(np.float32) / float(np.iinfo(data.dtype).max + 1)
        mono = data.astype(np.float32) if data.ndim == 1 else data.astype(np.float32).mean(axis=1)
        if self._resampler is None or self._sample_rate_hz != sample_rate_hz:
            self._flush_resampler()
            self._sample_rate_hz = sample_rate_hz
            self._resampler = soxr.ResampleStream(
                sample_rate_hz, TARGET_SAMPLE_RATE_HZ, 1, dtype="float32", quality=RESAMPLER_QUALITY
            )
        self._queue_pcm(float_to_pcm16(self._resampler.resample_chunk(mono)))

    def end_audio(self) -> None:
        """No more samples: queue what the resampler holds and the last partial chunk, then the end
        (idempotent)."""
        if self._audio_ended:
            return
        self._audio_ended = True
        self.audio_ended_at = time.monotonic()
        self._flush_resampler()
        if self._pending:
            self._put(bytes(self._pending))
            self._pending.clear()
        self._queue.put_nowait(None)

    async def stop(self) -> TranscriptionResult:
        """End the audio, wait for the final transcript and return the result.

        Raises:
            RealtimeError: the transcription failed.
        """
        self.end_audio()
        assert self.task is not None, "start() was not called"
        try:
            return await self.task
        finally:
            await self._close_unused_transport()

    async def cancel(self) -> None:
        """Abandon the recording (the page went away): stop the transcription, which closes its
        stream."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await self.task
        await self._close_unused_transport()

    async def _open(self) -> Any:
        """The opener handed to :func:`transcribe_stream`: the stream opened by :meth:`start`
        first."""
        transport, self._first_transport = self._first_transport, None
        return transport if transport is not None else await self._opener()

    async def _close_unused_transport(self) -> None:
        transport, self._first_transport = self._first_transport, None
        if transport is not None:
            with contextlib.suppress(Exception):
                await transport.close()

    def _flush_resampler(self) -> None:
        if self._resampler is not None:
            self._queue_pcm(
                float_to_pcm16(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True))
            )
            self._resampler = None

    def _queue_pcm(self, pcm16: bytes) -> None:
        self._pending += pcm16
        while len(self._pending) >= CHUNK_BYTES:
            self._put(bytes(self._pending[:CHUNK_BYTES]))
            del self._pending[:CHUNK_BYTES]

    def _put(self, chunk: bytes) -> None:
        """Queue a chunk for the endpoint, or raise :class:`AudioOverrun` past
        :data:`MAX_QUEUED_AUDIO_S`."""
        waiting_s = (self._queued_bytes + len(chunk)) / (2 * TARGET_SAMPLE_RATE_HZ)
        if waiting_s > MAX_QUEUED_AUDIO_S:
            raise AudioOverrun(
                f"the endpoint stopped taking audio: {waiting_s:.0f} s of it is waiting to be sent "
                f"(at most {MAX_QUEUED_AUDIO_S:.0f} s is kept)"
            )
        self._queued_bytes += len(chunk)
        self._queue.put_nowait(chunk)

    async def _chunks(self) -> AsyncIterator[bytes]:
        while (chunk := await self._queue.get()) is not None:
            self._queued_bytes -= len(chunk)
            self.last_sent_at = time.monotonic()
            if self.first_sent_at is None:
                self.first_sent_at = self.last_sent_at
            yield chunk
