"""LiveKit Agents' own STT and TTS stream machinery (``RecognizeStream``: resampling, flush, events,
retries; ``ChunkedStream``: the audio emitter, errors, close) with the Voxtral and Sonic plugins
against the local runtime, as an ``AgentSession`` drives them: frames pushed and a flush at VAD's
end of speech; a chunked synthesis closed when the speech is interrupted."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

pytest.importorskip(
    "livekit.agents", reason="the livekit extra is not installed (make agents-deps)"
)

from livekit import rtc
from livekit.agents import APIConnectionError, APIStatusError, stt

from tests.e2e.local.conftest import DELTAS, SONIC, VOXTRAL
from voice_client.frameworks.livekit_sonic import SonicTTS
from voice_client.frameworks.livekit_voxtral import VoxtralSTT
from voice_client.frameworks.sonic_stream import SonicSynthesizer
from voice_client.frameworks.targets import SonicTarget, VoxtralTarget

ROOM_RATE_HZ = 48000  # a LiveKit room's audio rate: the stream resamples it to 16 kHz
FRAME_SAMPLES = ROOM_RATE_HZ // 100  # 10 ms frames, as rtc.AudioStream gives them


def speech_frames(seconds: float) -> list[rtc.AudioFrame]:
    samples = int(seconds * ROOM_RATE_HZ)
    tone = (
        (np.sin(np.arange(samples) * 2 * np.pi * 220 / ROOM_RATE_HZ) * 12000)
        .astype("<i2")
        .tobytes()
    )
    step = FRAME_SAMPLES * 2
    return [
        rtc.AudioFrame(tone[start : start + step], ROOM_RATE_HZ, 1, FRAME_SAMPLES)
        for start in range(0, len(tone), step)
    ]


async def recognize(plugin: VoxtralSTT, utterances: int = 1) -> list[stt.SpeechEvent]:
    stream = plugin.stream()
    for _ in range(utterances):
        for frame in speech_frames(1.5):
            stream.push_frame(frame)
        stream.flush()  # VAD's end of speech
    stream.end_input()
    events = [event async for event in stream]
    await stream.aclose()
    return events


def test_utterances_give_interim_then_final_transcripts_in_order(client_env):
    plugin = VoxtralSTT(target=VoxtralTarget(endpoint_name=VOXTRAL, endpoint_url=client_env.url))
    events = asyncio.run(recognize(plugin, utterances=2))
    kinds = [event.type for event in events]
    finals = [
        index for index, kind in enumerate(kinds) if kind == stt.SpeechEventType.FINAL_TRANSCRIPT
    ]
    assert len(finals) == 2
    assert (
        stt.SpeechEventType.INTERIM_TRANSCRIPT in kinds[: finals[0]]
    )  # interims before the first final
    expected = "".join(DELTAS).strip()
    for index in finals:
        assert events[index].alternatives[0].text.startswith(expected)
        assert events[index].alternatives[0].metadata == {"complete": True}
    assert len(client_env.vllm.sessions) == 2  # one stream per utterance


def test_the_ecs_target_url(client_env):
    url = f"ws://127.0.0.1:{client_env.bridge.port}/invocations-bidirectional-stream"
    events = asyncio.run(recognize(VoxtralSTT(target=VoxtralTarget(url=url))))
    finals = [event for event in events if event.type == stt.SpeechEventType.FINAL_TRANSCRIPT]
    assert len(finals) == 1 and finals[0].alternatives[0].text.startswith(
        "Hello from the local runtime."
    )


def test_a_refused_stream_ends_the_stream_with_one_error_naming_the_cause(client_env):
    plugin = VoxtralSTT(
        target=VoxtralTarget(endpoint_name="no-such-endpoint", endpoint_url=client_env.url)
    )
    errors = []
    plugin.on("error", errors.append)
    with pytest.raises(APIConnectionError, match="Endpoint no-such-endpoint"):
        asyncio.run(recognize(plugin))
    assert len(errors) == 1 and not errors[0].recoverable


def test_a_sentence_gives_audio_frames(client_env):
    plugin = SonicTTS(target=SonicTarget(SONIC, endpoint_url=client_env.url), voice_id="voice-1")

    async def run():
        frames = [audio.frame async for audio in plugin.synthesize("Hello there, this is Sonic.")]
        await plugin.aclose()
        return frames

    frames = asyncio.run(run())
    assert frames and {frame.sample_rate for frame in frames} == {24000}
    pcm = b"".join(bytes(frame.data) for frame in frames)
    sent = bytes(client_env.sonic.calls[-1].audio)
    assert pcm[: len(sent)] == sent and not any(
        pcm[len(sent) :]
    )  # Sonic's samples, then the emitter's padding


def test_an_interruption_closes_the_sonic_request(client_env):
    stack = client_env
    stack.sonic.pace = 1.0  # real time: the sentence is still streaming when it is interrupted
    plugin = SonicTTS(target=SonicTarget(SONIC, endpoint_url=stack.url), voice_id="voice-1")

    async def run():
        chunked = plugin.synthesize(
            "A long sentence that takes a few seconds to speak, interrupted halfway."
        )
        first = await anext(chunked)
        await chunked.aclose()  # what AgentSession does when the user interrupts
        after = [audio async for audio in chunked]
        # Before the plugin's HTTP session closes (which would close the request too): a bound on
        # waiting, not a measured time.
        deadline = time.monotonic() + 3.0
        while not stack.sonic.calls[-1].client_closed and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        closed = stack.sonic.calls[-1].client_closed
        await plugin.aclose()
        return first, after, closed

    first, after, closed = asyncio.run(run())
    assert first.frame.samples_per_channel > 0 and after == []
    assert plugin.synthesizer.closed_early == 1
    call = stack.sonic.calls[-1]
    assert closed  # the stand-in saw the request closed (it stopped generating) by the interruption
    assert not any(event["type"] == "done" for event in call.events)


def test_a_sonic_429_is_a_retryable_status_error(client_env):
    stack = client_env
    stack.sonic.pace = 1.0
    target = SonicTarget(SONIC, endpoint_url=stack.url)
    plugin = SonicTTS(target=target, voice_id="voice-1")

    async def run():
        holder = SonicSynthesizer(target, voice_id="voice-1")
        held = [
            holder.stream("A sentence that holds a generation slot for a while.", 24000)
            for _ in range(4)
        ]
        for stream in held:
            await anext(stream)  # each holds one of the container's four slots
        try:
            from livekit.agents import APIConnectOptions

            async for _ in plugin.synthesize("Hello.", conn_options=APIConnectOptions(max_retry=0)):
                pass
        finally:
            for stream in held:
                await stream.aclose()
            await holder.aclose()
            await plugin.aclose()

    with pytest.raises(APIStatusError) as raised:
        asyncio.run(run())
    assert raised.value.status_code == 429 and raised.value.retryable
    assert "no free generation slot" in str(raised.value)
