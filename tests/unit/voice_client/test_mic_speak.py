"""voice_client.mic_speak: the Speak panel's WebSocket with the page played by a stand-in for
Starlette's WebSocket and Sonic by a stand-in synthesizer: what it refuses, the audio relayed as it
streams, and the page leaving mid-speech, which cancels the request. Against the local runtime's
Sonic stand-in: tests/e2e/local/test_local_mic_speak.py."""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

import pytest

from voice_client import mic_speak

pytest.importorskip("starlette", reason="the mic extra is not installed (requirements-mic.lock)")


class PageWebSocket:
    """What the panel reads of Starlette's WebSocket: the page's messages, and what it was sent."""

    def __init__(self, *texts: str) -> None:
        self.inbox: asyncio.Queue[dict] = asyncio.Queue()
        for text in texts:
            self.inbox.put_nowait({"type": "websocket.receive", "text": text})
        self.sent: list[dict | bytes] = []
        self.closed = False

    def leave(self) -> None:
        self.inbox.put_nowait({"type": "websocket.disconnect", "code": 1001})

    async def accept(self) -> None:
        pass

    async def receive(self) -> dict:
        return await self.inbox.get()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def close(self) -> None:
        self.closed = True


class Synthesizer:
    """Stands in for SonicSynthesizer: two chunks of audio, then the end (or, with ``endless``, no
    end until it is closed)."""

    made: ClassVar[list[Synthesizer]] = []
    endless: ClassVar[bool] = False

    def __init__(self, target, voice_id: str) -> None:
        self.target, self.voice_id = target, voice_id
        self.last_time_to_first_audio_s: float | None = None
        self.requests: list[tuple[str, int]] = []
        self.closed = False
        Synthesizer.made.append(self)

    async def stream(self, text: str, sample_rate_hz: int):
        self.requests.append((text, sample_rate_hz))
        self.last_time_to_first_audio_s = 0.12
        yield b"\x01\x00" * 441
        if self.endless:
            await asyncio.Event().wait()
        yield b"\x02\x00" * 441

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
def synthesizer(monkeypatch):
    monkeypatch.setattr(Synthesizer, "made", [])
    monkeypatch.setattr("voice_client.frameworks.sonic_stream.SonicSynthesizer", Synthesizer)
    return Synthesizer


def speak(text: str) -> str:
    return json.dumps({"type": "speak", "text": text})


def test_the_audio_is_relayed_as_sonic_streams_it_then_done(synthesizer):
    lines: list[str] = []
    panel = mic_speak.SpeakPanel("sonic-tts", "v-1", region="eu-west-1", log=lines.append)
    page = PageWebSocket(speak("Hello."))
    asyncio.run(panel.serve(page))
    assert page.sent == [
        {"type": "audio", "sample_rate_hz": 44_100},
        b"\x01\x00" * 441,
        b"\x02\x00" * 441,
        {"type": "done", "time_to_first_audio_s": 0.12, "audio_s": 2 * 441 / 44_100},
    ]
    (made,) = synthesizer.made
    assert (made.target.endpoint_name, made.target.region, made.voice_id) == (
        "sonic-tts",
        "eu-west-1",
        "v-1",
    )
    assert made.requests == [("Hello.", 44_100)] and made.closed and page.closed
    assert lines == ["spoke 6 characters with sonic-tts: first audio after 0.120 s"]


@pytest.mark.parametrize(
    ("panel", "text", "message"),
    [
        (
            ("sonic-tts", "v-1"),
            json.dumps({"type": "say", "text": "Hi"}),
            'expected {"type": "speak", "text": "..."} with some text',
        ),
        (("sonic-tts", "v-1"), speak("   "), 'expected {"type": "speak", "text": "..."}'),
        (
            ("sonic-tts", "v-1"),
            speak("x" * 2_001),
            "the text has 2001 characters; at most 2000 are spoken at once (voicectl speak "
            "reads longer texts from a file)",
        ),
        (
            (None, None),
            speak("Hi"),
            "Speak needs a Sonic endpoint: start voicectl mic with --sonic-endpoint NAME "
            "--voice ID",
        ),
    ],
)
def test_what_the_panel_cannot_speak_is_one_error_on_the_page_and_the_terminal(
    synthesizer, panel, text, message
):
    lines: list[str] = []
    page = PageWebSocket(text)
    asyncio.run(mic_speak.SpeakPanel(*panel, log=lines.append).serve(page))
    (error,) = page.sent
    assert error["type"] == "error" and error["message"].startswith(message)
    assert "\n" not in error["summary"]
    assert lines == [f"speak failed: {error['message']}"] and page.closed
    assert synthesizer.made == []


def test_the_page_leaving_mid_speech_cancels_the_request(synthesizer, monkeypatch):
    monkeypatch.setattr(synthesizer, "endless", True)
    lines: list[str] = []
    page = PageWebSocket(speak("Hello."))

    async def scenario() -> None:
        panel = mic_speak.SpeakPanel("sonic-tts", "v-1", log=lines.append)
        serving = asyncio.create_task(panel.serve(page))
        while len(page.sent) < 2:  # the first audio reached the page
            await asyncio.sleep(0)
        page.leave()
        await serving

    asyncio.run(scenario())
    (made,) = synthesizer.made
    assert made.closed and page.sent[0] == {"type": "audio", "sample_rate_hz": 44_100}
    assert [item for item in page.sent if isinstance(item, dict)][-1]["type"] == "audio"
    (line,) = lines
    assert line.startswith("speak abandoned: the page's WebSocket closed (WebSocket code 1001) ")
    assert line.endswith(
        " s after the request, after 0.01 s of audio; its Sonic request is cancelled"
    )
