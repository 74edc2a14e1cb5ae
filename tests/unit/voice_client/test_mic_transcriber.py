"""voice_client.mic_transcriber: the microphone transcriber against the real bridge and the fake
vLLM (loopback only), and its bound on the audio it holds."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.unit.voice_client.clients_testkit import Servers
from tests.unit.voice_client.mic_testkit import (
    CHUNK_SAMPLES,
    LIVENESS_S,
    RATE_HZ,
    expected_16k_samples,
    tone,
    websocket_opener,
)
from voice_client import mic_transcriber
from voice_client.realtime import RealtimeError
from voice_devtools.local.fake_vllm import free_port

# ---- the microphone transcriber against the bridge and the fake vLLM ---------------------------


def test_every_sample_reaches_vllm_as_16k_mono_including_the_last_partial_chunk():
    seconds = (
        2.0 + 1234 / RATE_HZ
    )  # not a whole number of 128 ms chunks, nor of the 0.25 s blocks fed below
    stereo = (np.stack([tone(seconds)] * 2, axis=1) * 32767).astype(np.int16)
    block = RATE_HZ // 4

    with Servers(deltas=("one ", "two "), generate=True) as servers:

        async def record():
            transcriber = mic_transcriber.MicTranscriber(websocket_opener(servers.url))
            await transcriber.start()
            seen = []
            for start in range(0, len(stereo), block):
                transcriber.feed(RATE_HZ, stereo[start : start + block])
                await asyncio.sleep(0.02)
                seen.append(transcriber.text)
            return seen, await transcriber.stop()

        seen, result = asyncio.run(record())
        (session,) = servers.vllm.sessions

    received_samples = len(session.audio) // 2
    assert abs(received_samples - expected_16k_samples(len(stereo))) <= 1
    assert result.audio_seconds_sent == pytest.approx(received_samples / 16_000, abs=1e-9)
    received = np.frombuffer(bytes(session.audio), dtype="<i2").astype(np.float64)
    spectrum = np.abs(np.fft.rfft(received))
    assert np.argmax(spectrum) * 16_000 / len(received) == pytest.approx(300, abs=1)
    assert (
        session.event_types()[-1] == "input_audio_buffer.commit"
        and session.events[-1]["final"] is True
    )
    assert result.transcript == session.text
    assert seen[0] == "" or len(seen[-1]) > len(seen[0])
    assert seen[-1].startswith("one two one")  # the transcript grew while recording


def test_the_stream_opens_when_the_recording_starts_and_serves_the_whole_recording():
    with Servers() as servers:

        async def record():
            transcriber = mic_transcriber.MicTranscriber(websocket_opener(servers.url))
            await transcriber.start()
            session = await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(
                    servers.vllm.wait_for_session(timeout=LIVENESS_S), servers.loop
                )
            )
            # The session may already carry session.update and a first commit; no audio has been fed
            # yet.
            opened_before_audio = "input_audio_buffer.append" not in session.event_types()
            transcriber.feed(RATE_HZ, tone(0.5))
            return opened_before_audio, await transcriber.stop()

        opened_before_audio, result = asyncio.run(record())
        assert opened_before_audio
        assert (
            len(servers.vllm.sessions) == 1
        )  # the stream opened at the start is the one used: no second connection
        assert result.sessions == 1
        assert servers.vllm.sessions[0].audio_bytes == round(expected_16k_samples(RATE_HZ // 2)) * 2


def test_a_refused_stream_fails_the_start_naming_the_real_address():
    port = free_port()

    async def start():
        await mic_transcriber.MicTranscriber(
            websocket_opener(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream")
        ).start()

    with pytest.raises(RealtimeError) as raised:
        asyncio.run(start())
    assert f"`curl http://127.0.0.1:{port}/ping` must answer 200" in str(raised.value)
    assert "HOST:PORT" not in str(raised.value)


def test_cancel_closes_the_stream_to_vllm_at_once():
    with Servers(generate=True) as servers:

        async def abandon() -> None:
            transcriber = mic_transcriber.MicTranscriber(websocket_opener(servers.url))
            await transcriber.start()
            transcriber.feed(RATE_HZ, tone(0.5))
            session = await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(servers.vllm.wait_for_session(), servers.loop)
            )
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(
                    session.wait_for_event("input_audio_buffer.append"), servers.loop
                )
            )
            await transcriber.cancel()
            # Closed by the cancel itself, not by an idle timeout (the fake vLLM has none); the wait
            # is a liveness bound.
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(
                    session.wait_closed(timeout=LIVENESS_S), servers.loop
                )
            )

        asyncio.run(abandon())
        assert not any(
            event.get("final") for event in servers.vllm.sessions[0].events
        )  # abandoned, not finished


def test_a_stream_that_stops_taking_audio_ends_the_recording_before_holding_more_than_the_bound(
    monkeypatch,
):
    transcriber = mic_transcriber.MicTranscriber(opener=None)
    monkeypatch.setattr(mic_transcriber, "MAX_QUEUED_AUDIO_S", 1.0)
    transcriber.feed(16_000, np.zeros(16_000, np.float32))  # 1 s: at the bound
    with pytest.raises(
        mic_transcriber.AudioOverrun,
        match=r"the endpoint stopped taking audio: 1 s of it is waiting to be sent "
        r"\(at most 1 s is kept\)",
    ):
        transcriber.feed(16_000, np.zeros(CHUNK_SAMPLES, np.float32))
