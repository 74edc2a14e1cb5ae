"""VoxtralSTT through LiveKit's RecognizeStream over in-process streams: 48 kHz frames resampled to
16 kHz, interim events, a final event at each flush (VAD's end of speech), a refusal ending the
stream once."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

pytest.importorskip(
    "livekit.agents", reason="the livekit extra is not installed (make agents-deps)"
)

from livekit import rtc
from livekit.agents import APIConnectionError, stt

from tests.unit.voice_client.frameworks.frameworks_testkit import ScriptedServer
from voice_client.frameworks.livekit_voxtral import VoxtralSTT
from voice_client.frameworks.targets import VoxtralTarget
from voice_client.realtime.protocol import RealtimeError


@pytest.fixture
def server(monkeypatch) -> ScriptedServer:
    server = ScriptedServer()

    @contextlib.asynccontextmanager
    async def opener(self):
        yield server.open

    monkeypatch.setattr(VoxtralTarget, "opener", opener)
    return server


async def recognize(plugin: VoxtralSTT) -> list[stt.SpeechEvent]:
    stream = plugin.stream()
    frame = rtc.AudioFrame(b"\x10\x27\xf0\xd8" * 240, 48000, 1, 480)  # 10 ms at 48 kHz
    for _ in range(2):
        for _ in range(40):
            stream.push_frame(frame)
        stream.flush()
    stream.end_input()
    events = [event async for event in stream]
    await stream.aclose()
    return events


def test_a_final_transcript_at_each_flush(server):
    events = asyncio.run(recognize(VoxtralSTT(target=VoxtralTarget(endpoint_name="voxtral"))))
    finals = [
        event.alternatives[0].text
        for event in events
        if event.type == stt.SpeechEventType.FINAL_TRANSCRIPT
    ]
    assert (
        finals == ["word1 word2 word3 word4"] * 2
    )  # 0.4 s: three 128 ms appends and the rest at the flush
    assert (
        events[0].type == stt.SpeechEventType.INTERIM_TRANSCRIPT
        and events[0].alternatives[0].text == "word1"
    )
    assert [len(stream.audio) for stream in server.streams] == [
        12800,
        12800,
    ]  # 0.4 s at 16 kHz each


def test_a_refusal_ends_the_stream_with_one_error(server):
    server.refuse = RealtimeError(
        "the bridge refused the bearer token (HTTP 401)", code="unauthorized"
    )
    plugin = VoxtralSTT(target=VoxtralTarget(endpoint_name="voxtral"))
    errors = []
    plugin.on("error", errors.append)
    with pytest.raises(APIConnectionError, match="HTTP 401"):
        asyncio.run(recognize(plugin))
    assert len(errors) == 1 and not errors[0].recoverable


def test_stereo_frames_are_mixed_down_to_mono(server):
    async def run() -> None:
        stream = VoxtralSTT(target=VoxtralTarget(endpoint_name="voxtral")).stream()
        for _ in range(40):  # 10 ms stereo frames at 16 kHz: left 10000, right 0
            stream.push_frame(rtc.AudioFrame(b"\x10\x27\x00\x00" * 160, 16000, 2, 160))
        stream.flush()
        stream.end_input()
        [event async for event in stream]
        await stream.aclose()

    asyncio.run(run())
    assert server.audio == b"\x88\x13" * 160 * 40  # 5000 per sample, 0.4 s of mono
