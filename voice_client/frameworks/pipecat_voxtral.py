"""Pipecat speech-to-text service for the Voxtral endpoint: :class:`VoxtralSTTService`.

A thin adapter over :class:`~voice_client.frameworks.voxtral_stream.VoxtralUtteranceStream`: the
pipeline's audio goes in (resampled to 16 kHz mono when the pipeline runs at another rate),
Pipecat's ``VADUserStoppedSpeakingFrame`` is the end of the utterance (its final commit), deltas
come out as ``InterimTranscriptionFrame`` (the utterance's text so far) and ``transcription.done``
as one finalized ``TranscriptionFrame``. A refused stream is one ``ErrorFrame`` naming the cause.

Usage::

    target = VoxtralTarget(endpoint_name="voxtral-realtime", region="us-east-1")
    # or the ECS target:
    # VoxtralTarget(url="wss://.../invocations-bidirectional-stream", token=BearerToken(...))
    stt = VoxtralSTTService(target=target)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from voice_client.frameworks.extras import framework_missing

try:
    from pipecat.audio.utils import create_stream_resampler
    from pipecat.frames.frames import (
        CancelFrame,
        EndFrame,
        Frame,
        InputAudioRawFrame,
        InterimTranscriptionFrame,
        StartFrame,
        TranscriptionFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.processors.frame_processor import FrameDirection
    from pipecat.services.settings import STTSettings
    from pipecat.services.stt_service import STTService
    from pipecat.utils.time import time_now_iso8601
except ModuleNotFoundError as missing:  # the 'pipecat' extra is not installed
    raise framework_missing(missing, "pipecat") from None

from voice_client.audio import TARGET_SAMPLE_RATE_HZ
from voice_client.errors import UsageError
from voice_client.frameworks.targets import VoxtralTarget
from voice_client.frameworks.voxtral_stream import (
    DONE_WAIT_S,
    VOXTRAL_TTFS_P99_S,
    Failure,
    Final,
    Interim,
    VoxtralUtteranceStream,
    mono_pcm16,
)
from voice_client.realtime.policy import DEFAULT_SESSION_LIMIT_S
from voice_client.realtime.protocol import DEFAULT_MODEL, RealtimeError


class VoxtralSTTService(STTService):
    """Voxtral Realtime on SageMaker (bidirectional streaming) or ECS (WebSocket), as a Pipecat STT
    service.

    Args:
        target: where the endpoint is (:class:`VoxtralTarget`).
        model: the served model name for ``session.update``.
        done_wait_s: the bounded wait for ``transcription.done`` after the end of speech.
        session_limit_s: audio seconds per generation.
        ttfs_p99_latency: p99 seconds from the end of speech to the final transcript, for Pipecat's
            turn logic (default :data:`VOXTRAL_TTFS_P99_S`; measure yours with
            ``bench/agent_latency_bench.py``).
        **kwargs: passed to Pipecat's ``STTService``.
    """

    def __init__(
        self,
        *,
        target: VoxtralTarget,
        model: str = DEFAULT_MODEL,
        done_wait_s: float = DONE_WAIT_S,
        session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
        ttfs_p99_latency: float | None = VOXTRAL_TTFS_P99_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            ttfs_p99_latency=ttfs_p99_latency,
            settings=STTSettings(model=model, language=None),
            **kwargs,
        )
        self._target = target
        self._model = model
        self._done_wait_s = done_wait_s
        self._session_limit_s = session_limit_s
        self._stream: VoxtralUtteranceStream | None = None
        self._exit = contextlib.AsyncExitStack()
        self._reader: asyncio.Task[None] | None = None
        self._resampler = create_stream_resampler()
        self._channels = 1  # of the audio frame being processed (run_stt gets its bytes only)

    def can_generate_metrics(self) -> bool:
        return True

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        try:
            opener = await self._exit.enter_async_context(self._target.opener())
        except (RealtimeError, UsageError) as error:
            await self.push_error(
                f"Voxtral endpoint {self._target.name}: {error}", force_treat_as_permanent=True
            )
            return
        self._stream = VoxtralUtteranceStream(
            opener,
            model=self._model,
            done_wait_s=self._done_wait_s,
            session_limit_s=self._session_limit_s,
        )
        self._reader = self.create_task(self._read_events(self._stream), name="voxtral_events")

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)
        await self._close(wait_s=self._done_wait_s)

    async def cancel(self, frame: CancelFrame) -> None:
        await super().cancel(frame)
        await self._close(wait_s=0.0)

    async def _close(self, wait_s: float) -> None:
        stream, self._stream = self._stream, None
        reader, self._reader = self._reader, None
        if stream is not None:
            await stream.aclose(wait_s=wait_s)
        if reader is not None:
            if stream is not None and wait_s > 0:
                # The reader passes on what is queued (the last final), then ends.
                stream.events.put_nowait(None)
                await asyncio.wait({reader}, timeout=wait_s)
            await self.cancel_task(reader)
        await self._exit.aclose()

    async def process_audio_frame(
        self, frame: InputAudioRawFrame, direction: FrameDirection
    ) -> None:
        self._channels = frame.num_channels
        await super().process_audio_frame(frame, direction)

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        if self._stream is not None:
            audio = mono_pcm16(audio, self._channels)  # a transport's audio_in_channels=2
            if self.sample_rate != TARGET_SAMPLE_RATE_HZ:
                audio = await self._resampler.resample(
                    audio, self.sample_rate, TARGET_SAMPLE_RATE_HZ
                )
            self._stream.push_audio(audio)
        yield None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStoppedSpeakingFrame) and self._stream is not None:
            self._stream.end_of_speech()

    async def _read_events(self, stream: VoxtralUtteranceStream) -> None:
        while (event := await stream.events.get()) is not None:
            if isinstance(event, Interim):
                if event.text:
                    await self.push_frame(
                        InterimTranscriptionFrame(
                            event.text, self._user_id, time_now_iso8601(), result=event
                        )
                    )
            elif isinstance(event, Final):
                if event.text:
                    await self.emit_stt_usage_metrics()
                    # Each final says itself whether transcription.done confirmed it: Pipecat's
                    # request/confirm_finalize is one flag, wrong when utterances overlap.
                    await self.push_frame(
                        TranscriptionFrame(
                            event.text,
                            self._user_id,
                            time_now_iso8601(),
                            result=event,
                            finalized=event.complete,
                        )
                    )
            elif isinstance(event, Failure):
                await self.push_error(
                    f"Voxtral endpoint {self._target.name}: {event.error}",
                    force_treat_as_permanent=event.fatal,
                )
