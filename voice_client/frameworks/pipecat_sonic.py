"""Pipecat text-to-speech service for the Sonic endpoint on SageMaker: :class:`SonicTTSService`.

A thin adapter over :class:`~voice_client.frameworks.sonic_stream.SonicSynthesizer`: one
``InvokeEndpointWithResponseStream`` request per sentence Pipecat aggregates, audio frames at the
pipeline's output rate as Sonic sends them (Sonic is asked for that rate: no resampling), Pipecat's
TTFB metric at the first audio. On an interruption Pipecat cancels the task running :meth:`run_tts`;
the generator's exit closes the request's connection, so no more of its audio is read. A refused
request (Sonic's 422 and 429, an unknown endpoint, refused credentials) is one ``ErrorFrame`` naming
the cause.

Usage::

    tts = SonicTTSService(target=SonicTarget("sonic-tts", region="us-east-1"),
                          voice_id="<Cartesia voice id>")
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from voice_client.frameworks.extras import framework_missing

try:
    from pipecat.frames.frames import (
        CancelFrame,
        EndFrame,
        ErrorFrame,
        Frame,
        StartFrame,
        TTSAudioRawFrame,
    )
    from pipecat.services.settings import TTSSettings
    from pipecat.services.tts_service import TTSService
except ModuleNotFoundError as missing:  # the 'pipecat' extra is not installed
    raise framework_missing(missing, "pipecat") from None

from voice_client.errors import UsageError
from voice_client.frameworks.sonic_stream import (
    DEFAULT_VOICE_LANGUAGE,
    SonicError,
    SonicSynthesizer,
)
from voice_client.frameworks.targets import SonicTarget
from voice_client.sonic import SONIC_SAMPLE_RATES_HZ


class SonicTTSService(TTSService):
    """Cartesia Sonic on SageMaker as a Pipecat TTS service.

    Args:
        target: the Sonic endpoint (:class:`SonicTarget`).
        voice_id: a Cartesia voice ID.
        language: a language code Sonic accepts.
        sample_rate: output rate; None = the pipeline's (it must be one Sonic offers:
            :data:`~voice_client.sonic.SONIC_SAMPLE_RATES_HZ`).
        **kwargs: passed to Pipecat's ``TTSService``.
    """

    def __init__(
        self,
        *,
        target: SonicTarget,
        voice_id: str,
        language: str = DEFAULT_VOICE_LANGUAGE,
        sample_rate: int | None = None,
        **kwargs: Any,
    ) -> None:
        settings = TTSSettings(model=None, voice=voice_id, language=language)
        super().__init__(
            sample_rate=sample_rate,
            push_start_frame=True,
            push_stop_frames=True,
            settings=settings,
            **kwargs,
        )
        self._synthesizer = SonicSynthesizer(target, voice_id=voice_id, language=language)
        self._target = target

    @property
    def synthesizer(self) -> SonicSynthesizer:
        """The synthesizer (its time to first audio and interrupted-request count)."""
        return self._synthesizer

    def can_generate_metrics(self) -> bool:
        return True

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        if self.sample_rate not in SONIC_SAMPLE_RATES_HZ:
            allowed = ", ".join(str(rate) for rate in SONIC_SAMPLE_RATES_HZ)
            await self.push_error(
                f"Sonic cannot speak at {self.sample_rate} Hz; set the "
                "pipeline's audio_out_sample_rate (or sample_rate=) to one of "
                f"{allowed}",
                force_treat_as_permanent=True,
            )
            return
        try:
            await self._synthesizer.start()
        except (SonicError, UsageError) as error:
            await self.push_error(
                f"Sonic endpoint {self._target.endpoint_name!r}: {error}",
                force_treat_as_permanent=True,
            )

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)
        await self._synthesizer.aclose()

    async def cancel(self, frame: CancelFrame) -> None:
        await super().cancel(frame)
        await self._synthesizer.aclose()

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        audio = self._synthesizer.stream(text, self.sample_rate)
        try:
            await self.start_tts_usage_metrics(text)
            async for pcm16 in audio:
                await self.stop_ttfb_metrics()
                yield TTSAudioRawFrame(pcm16, self.sample_rate, 1, context_id=context_id)
        except SonicError as error:
            if error.permanent:  # Pipecat then gives the service no more sentences
                await self.push_error(str(error), force_treat_as_permanent=True)
            else:
                yield ErrorFrame(error=str(error))
        except ValueError as error:  # an empty sentence, or a rate Sonic does not offer
            yield ErrorFrame(error=f"Sonic request not sent: {error}")
        finally:
            await audio.aclose()  # an interruption closes the request's connection here
            await self.stop_ttfb_metrics()
