"""LiveKit Agents text-to-speech plugin for the Sonic endpoint on SageMaker: :class:`SonicTTS`.

A thin adapter over :class:`~voice_client.frameworks.sonic_stream.SonicSynthesizer`, as the
Pipecat service is: a chunked TTS (``TTSCapabilities(streaming=False)``; LiveKit's
``tts.StreamAdapter`` cuts an LLM's text into sentences for it), one
``InvokeEndpointWithResponseStream`` request per ``synthesize`` call, audio pushed as Sonic sends
it. When LiveKit interrupts the speech it closes the chunked stream, which cancels the request's
task: the request's connection is closed. Sonic's 422 and 429 end the stream with an
``APIStatusError`` carrying that status and its cause (429 retryable, 422 not).

Usage::

    tts = SonicTTS(target=SonicTarget("sonic-tts"), voice_id="<Cartesia voice id>")
    session = AgentSession(tts=tts, ...)
"""

from __future__ import annotations

import uuid

from voice_client.frameworks.extras import framework_missing

try:
    from livekit.agents import APIConnectionError, APIConnectOptions, APIStatusError, tts
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
except ModuleNotFoundError as missing:  # the 'livekit' extra is not installed
    raise framework_missing(missing, "livekit") from None

from voice_client.frameworks.sonic_stream import (
    DEFAULT_VOICE_LANGUAGE,
    SonicError,
    SonicSynthesizer,
)
from voice_client.frameworks.targets import SonicTarget
from voice_client.sonic import SONIC_SAMPLE_RATES_HZ

DEFAULT_SAMPLE_RATE_HZ = 24000
"""LiveKit's usual output rate (its plugins' default), one Sonic offers."""

RETRYABLE_STATUSES = frozenset({429})
"""Container statuses worth a retry: 429, no free generation slot (Cartesia's listing, "Error
Handling")."""


class SonicTTS(tts.TTS):
    """Cartesia Sonic on SageMaker as a LiveKit chunked TTS.

    Args:
        target: the Sonic endpoint (:class:`SonicTarget`).
        voice_id: a Cartesia voice ID.
        language: a language code Sonic accepts.
        sample_rate: output rate, one of :data:`~voice_client.sonic.SONIC_SAMPLE_RATES_HZ`.

    Raises:
        ValueError: the rate, voice or language is not one Sonic accepts.
    """

    def __init__(
        self,
        *,
        target: SonicTarget,
        voice_id: str,
        language: str = DEFAULT_VOICE_LANGUAGE,
        sample_rate: int = DEFAULT_SAMPLE_RATE_HZ,
    ) -> None:
        if sample_rate not in SONIC_SAMPLE_RATES_HZ:
            raise ValueError(
                f"Sonic cannot speak at {sample_rate} Hz; use one of "
                f"{', '.join(str(rate) for rate in SONIC_SAMPLE_RATES_HZ)}"
            )
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self.synthesizer = SonicSynthesizer(target, voice_id=voice_id, language=language)

    @property
    def model(self) -> str:
        return "sonic"

    @property
    def provider(self) -> str:
        return "Amazon SageMaker"

    def synthesize(
        self,
        text: str,
        *,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> SonicChunkedStream:
        return SonicChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    async def aclose(self) -> None:
        await self.synthesizer.aclose()


class SonicChunkedStream(tts.ChunkedStream):
    """One sentence's request."""

    def __init__(self, *, tts: SonicTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._sonic = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=str(uuid.uuid4()),
            sample_rate=self._sonic.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        audio = self._sonic.synthesizer.stream(self.input_text, self._sonic.sample_rate)
        try:
            async for pcm16 in audio:
                output_emitter.push(pcm16)
        except SonicError as error:
            if error.status is not None:
                raise APIStatusError(
                    str(error),
                    status_code=error.status,
                    retryable=error.status in RETRYABLE_STATUSES,
                ) from None
            retryable = error.code == "InternalStreamFailure"
            raise APIConnectionError(str(error), retryable=retryable) from None
        finally:
            # A cancelled stream (an interruption) closes the request's connection here.
            await audio.aclose()
        output_emitter.flush()
