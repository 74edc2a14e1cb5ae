"""The mic page's Speak panel: a text in, Sonic's audio streamed back to the page as it arrives
(:class:`SpeakPanel`, on the :data:`voice_client.mic.SPEAK_PATH` WebSocket), read with the async
client of :mod:`voice_client.frameworks.sonic_stream` so that the page leaving cancels the request
at once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from voice_client.mic_recording import (
    START_MESSAGE_TIMEOUT_S,
    PageClosed,
    PageProtocolError,
    PageSocket,
    json_object,
    stop_task,
    summarize_error,
)

SPEAK_SAMPLE_RATE_HZ = 44_100
"""The Speak panel's audio rate: Sonic's default output rate (``voicectl speak``'s too)."""

MAX_SPEAK_CHARS = 2_000
"""Characters the Speak panel sends in one call (a paragraph; ``voicectl speak`` takes longer texts
from a file)."""


@dataclass
class SpokenAudio:
    """What one Speak request has sent to the page so far."""

    audio_s: float = 0.0
    time_to_first_audio_s: float | None = None


class SpeakPanel:
    """The Speak panel's server side: one text per WebSocket, spoken by Sonic.

    Args:
        sonic_endpoint: the Sonic endpoint's name (None: the panel answers each request with an
            error saying how to start the page with one).
        voice: the Cartesia voice ID (None: as for ``sonic_endpoint``).
        region: AWS Region of the endpoint (None: the standard chain's).
        profile: AWS named profile (None: the standard credential chain).
        log: prints one line for the terminal.
    """

    def __init__(
        self,
        sonic_endpoint: str | None,
        voice: str | None,
        *,
        region: str | None = None,
        profile: str | None = None,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.sonic_endpoint = sonic_endpoint
        self.voice = voice
        self.region = region
        self.profile = profile
        self.log = log

    async def serve(self, websocket: Any) -> None:
        """The :data:`voice_client.mic.SPEAK_PATH` route: one text spoken by Sonic, its audio
        relayed to the page as it streams.

        The page leaving (tab closed, reload, its WebSocket closed) cancels the Sonic request at
        once (see :meth:`_speak`): it does not hold one of the endpoint's generation slots until
        its audio ends.
        """
        await websocket.accept()
        page = PageSocket(websocket)
        began = time.monotonic()
        try:
            event = json_object(await asyncio.wait_for(page.receive(), START_MESSAGE_TIMEOUT_S))
            text = event.get("text")
            if event.get("type") != "speak" or not isinstance(text, str) or not text.strip():
                raise PageProtocolError('expected {"type": "speak", "text": "..."} with some text')
            if len(text) > MAX_SPEAK_CHARS:
                raise PageProtocolError(
                    f"the text has {len(text)} characters; at most {MAX_SPEAK_CHARS} are spoken "
                    "at once (voicectl speak reads longer texts from a file)"
                )
            if not self.sonic_endpoint or not self.voice:
                raise PageProtocolError(
                    "Speak needs a Sonic endpoint: start voicectl mic with --sonic-endpoint NAME "
                    "--voice ID"
                )
            await page.send({"type": "audio", "sample_rate_hz": SPEAK_SAMPLE_RATE_HZ})
            spoken = SpokenAudio()
            try:
                await self._speak(page, text, spoken)
            except PageClosed as closed:
                self.log(
                    f"speak abandoned: the page's WebSocket closed ({closed}) "
                    f"{time.monotonic() - began:.1f} s after the request, after "
                    f"{spoken.audio_s:.2f} s of audio; its Sonic request is cancelled"
                )
                raise
            await page.send(
                {
                    "type": "done",
                    "time_to_first_audio_s": spoken.time_to_first_audio_s,
                    "audio_s": spoken.audio_s,
                }
            )
            self.log(
                f"spoke {len(text)} characters with {self.sonic_endpoint}: first audio after "
                f"{spoken.time_to_first_audio_s or 0:.3f} s"
            )
        except PageClosed:
            pass
        except (PageProtocolError, TimeoutError, ValueError) as error:
            await self._failed(page, str(error) or "the page sent no text in time")
        except Exception as error:  # SonicError, UsageError (no Region): on the page and terminal
            await self._failed(page, str(error))
        finally:
            await page.close()

    async def _speak(self, page: PageSocket, text: str, spoken: SpokenAudio) -> None:
        """Speak ``text`` with Sonic and send each chunk of audio to the page as it arrives, until
        Sonic's end or the page's. The page's socket is read meanwhile, so its close is noticed
        even while Sonic sends nothing; the request is then cancelled, which closes its connection
        (:class:`~voice_client.frameworks.sonic_stream.SonicSynthesizer`: boto3's stream, read
        by a blocking thread, could not be stopped and ran to its end).

        Raises:
            PageClosed: the page went away (the request is cancelled).
            PageProtocolError: the page sent another message (one text per connection).
            SonicError: the request was refused or its stream failed.
        """
        from voice_client.frameworks.sonic_stream import SonicSynthesizer
        from voice_client.frameworks.targets import SonicTarget

        assert self.sonic_endpoint is not None and self.voice is not None
        target = SonicTarget(self.sonic_endpoint, region=self.region, profile=self.profile)
        synthesizer = SonicSynthesizer(target, voice_id=self.voice)

        async def relay() -> None:
            audio = synthesizer.stream(text, SPEAK_SAMPLE_RATE_HZ)
            try:
                async for pcm16 in audio:
                    spoken.time_to_first_audio_s = synthesizer.last_time_to_first_audio_s
                    await page.send_bytes(pcm16)
                    spoken.audio_s += len(pcm16) / 2 / SPEAK_SAMPLE_RATE_HZ
            finally:
                await audio.aclose()  # closes the request's connection unless Sonic had ended it

        async def watch_page() -> NoReturn:
            message = await page.receive()  # raises PageClosed when the page goes away
            raise PageProtocolError(
                f"one text per Speak connection; got another message: {message!r:.200}"
            )

        speaking, watching = asyncio.ensure_future(relay()), asyncio.ensure_future(watch_page())
        try:
            await asyncio.wait({speaking, watching}, return_when=asyncio.FIRST_COMPLETED)
            if not speaking.done():
                watching.result()  # raises
            speaking.result()
        finally:
            for task in (speaking, watching):
                await stop_task(task)
            await synthesizer.aclose()

    async def _failed(self, page: PageSocket, message: str) -> None:
        self.log(f"speak failed: {message}")
        with contextlib.suppress(PageClosed):
            await page.send(
                {
                    "type": "error",
                    "message": message,
                    "summary": summarize_error(message, f"Sonic endpoint {self.sonic_endpoint}"),
                }
            )
