"""LiveKit Agents speech-to-text plugin for the Voxtral endpoint: :class:`VoxtralSTT`.

A thin adapter over :class:`~voice_client.frameworks.voxtral_stream.VoxtralUtteranceStream`, as
the Pipecat service is: a streaming STT (``STTCapabilities(streaming=True, interim_results=True,
manual_flush=True)``) whose stream takes 16 kHz frames (LiveKit resamples), turns the stream's flush
into the utterance's final commit (LiveKit flushes a ``manual_flush`` STT at VAD's end of speech, or
at its turn detector's end of turn), deltas into ``INTERIM_TRANSCRIPT`` and ``transcription.done``
into ``FINAL_TRANSCRIPT``. A stream the endpoint refuses ends the stream with a non-retryable
``APIConnectionError`` naming the cause (LiveKit emits it once as the STT's ``error``).

Usage::

    stt = VoxtralSTT(target=VoxtralTarget(endpoint_name="voxtral-realtime"))
    session = AgentSession(stt=stt, vad=..., ...)
"""

from __future__ import annotations

import asyncio
import contextlib

from voice_client.frameworks.extras import framework_missing

try:
    from livekit.agents import APIConnectionError, APIConnectOptions, stt
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr
    from livekit.agents.utils import AudioBuffer
except ModuleNotFoundError as missing:  # the 'livekit' extra is not installed
    raise framework_missing(missing, "livekit") from None

from voice_client.audio import TARGET_SAMPLE_RATE_HZ
from voice_client.errors import UsageError
from voice_client.frameworks.targets import VoxtralTarget
from voice_client.frameworks.voxtral_stream import (
    DONE_WAIT_S,
    Failure,
    Final,
    Interim,
    VoxtralUtteranceStream,
    mono_pcm16,
)
from voice_client.realtime.protocol import DEFAULT_MODEL, RealtimeError

DEFAULT_LANGUAGE = "en"
"""The language LiveKit's speech data carries (Voxtral detects the language itself; it is not
sent)."""


class VoxtralSTT(stt.STT):
    """Voxtral Realtime on SageMaker or ECS as a LiveKit streaming STT.

    Args:
        target: where the endpoint is (:class:`VoxtralTarget`).
        model: the served model name for ``session.update``.
        done_wait_s: the bounded wait for ``transcription.done`` after the end of speech.
        language: the language code put in LiveKit's speech data.
    """

    def __init__(
        self,
        *,
        target: VoxtralTarget,
        model: str = DEFAULT_MODEL,
        done_wait_s: float = DONE_WAIT_S,
        language: str = DEFAULT_LANGUAGE,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, offline_recognize=False, manual_flush=True
            )
        )
        self.target = target
        self._model = model
        self.done_wait_s = done_wait_s
        self.language = language

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "Amazon SageMaker" if self.target.endpoint_name else "Amazon ECS"

    async def _recognize_impl(
        self,
        buffer: AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        raise NotImplementedError("VoxtralSTT is a streaming STT: use stream()")

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> VoxtralSpeechStream:
        return VoxtralSpeechStream(stt=self, conn_options=conn_options)


class VoxtralSpeechStream(stt.RecognizeStream):
    """One audio source's recognition: utterances cut by the stream's flushes."""

    def __init__(self, *, stt: VoxtralSTT, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options, sample_rate=TARGET_SAMPLE_RATE_HZ)
        self._voxtral = stt

    async def _run(self) -> None:
        target = self._voxtral.target
        async with contextlib.AsyncExitStack() as stack:
            try:
                opener = await stack.enter_async_context(target.opener())
            except (RealtimeError, UsageError) as error:
                raise APIConnectionError(
                    f"Voxtral endpoint {target.name}: {error}", retryable=False
                ) from None
            stream = VoxtralUtteranceStream(
                opener, model=self._voxtral.model, done_wait_s=self._voxtral.done_wait_s
            )
            events = asyncio.create_task(self._forward(stream))
            try:
                async for item in self._input_ch:
                    if isinstance(item, self._FlushSentinel):
                        stream.end_of_speech()
                    else:
                        stream.push_audio(mono_pcm16(item.data.tobytes(), item.num_channels))
                    if events.done():
                        break
                await stream.aclose(wait_s=self._voxtral.done_wait_s)
                stream.events.put_nowait(None)  # the forwarder passes on what is queued, then ends
                await events
            finally:
                events.cancel()
                await stream.aclose()
                with contextlib.suppress(asyncio.CancelledError):
                    await events

    async def _forward(self, stream: VoxtralUtteranceStream) -> None:
        language = self._voxtral.language
        while (event := await stream.events.get()) is not None:
            if isinstance(event, Interim) and event.text:
                speech = stt.SpeechData(language=language, text=event.text)  # pyright: ignore[reportArgumentType] (passed as given: LanguageCode() would normalise it)
                self._event_ch.send_nowait(
                    stt.SpeechEvent(
                        type=stt.SpeechEventType.INTERIM_TRANSCRIPT, alternatives=[speech]
                    )
                )
            elif isinstance(event, Final) and event.text:
                complete = {"complete": event.complete}
                speech = stt.SpeechData(language=language, text=event.text, metadata=complete)  # pyright: ignore[reportArgumentType] (passed as given: LanguageCode() would normalise it)
                self._event_ch.send_nowait(
                    stt.SpeechEvent(
                        type=stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives=[speech]
                    )
                )
            elif isinstance(event, Failure):
                error = APIConnectionError(
                    f"Voxtral endpoint {self._voxtral.target.name}: {event.error}", retryable=False
                )
                if event.fatal:
                    raise error
                self._emit_error(error, recoverable=True)
