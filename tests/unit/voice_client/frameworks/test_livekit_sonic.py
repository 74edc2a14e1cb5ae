"""SonicTTS through LiveKit's ChunkedStream against a loopback SageMaker runtime: audio frames,
Sonic's 422 and 429 as status errors (429 retryable), a rate Sonic does not offer refused."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip(
    "livekit.agents", reason="the livekit extra is not installed (make agents-deps)"
)

from livekit.agents import APIConnectOptions, APIStatusError

from tests.unit.voice_client.frameworks.frameworks_testkit import (
    SONIC_DONE,
    FakeRuntime,
    aws_env,
    fake_runtime,
    sonic_chunk,
)
from voice_client.frameworks.livekit_sonic import SonicTTS
from voice_client.frameworks.targets import SonicTarget

PCM = bytes(range(1, 201)) * 24  # 100 ms at 24 kHz


@pytest.fixture(autouse=True)
def credentials(monkeypatch, tmp_path):
    aws_env(monkeypatch, tmp_path)


def synthesize(runtime: FakeRuntime) -> list:
    async def run():
        async with fake_runtime(runtime):
            plugin = SonicTTS(
                target=SonicTarget("sonic", endpoint_url=runtime.url), voice_id="voice-1"
            )
            try:
                return [
                    audio.frame
                    async for audio in plugin.synthesize(
                        "Hello.", conn_options=APIConnectOptions(max_retry=0)
                    )
                ]
            finally:
                await plugin.aclose()

    return asyncio.run(run())


def test_audio_frames_carry_sonics_samples():
    frames = synthesize(FakeRuntime(parts=[sonic_chunk(PCM), SONIC_DONE]))
    pcm = b"".join(bytes(frame.data) for frame in frames)
    assert pcm[: len(PCM)] == PCM and {frame.sample_rate for frame in frames} == {24000}


@pytest.mark.parametrize("status, retryable", [(422, False), (429, True)])
def test_sonic_refusals_are_status_errors(status, retryable):
    runtime = FakeRuntime(
        refusal=(
            424,
            "ModelError",
            {"message": "x", "OriginalStatusCode": status, "OriginalMessage": "refused"},
        )
    )
    with pytest.raises(APIStatusError) as raised:
        synthesize(runtime)
    assert raised.value.status_code == status and raised.value.retryable is retryable
    assert f"ModelError (status {status}): refused" in str(raised.value)


def test_a_rate_sonic_does_not_offer_is_refused():
    with pytest.raises(ValueError, match="Sonic cannot speak at 11025 Hz"):
        SonicTTS(target=SonicTarget("sonic"), voice_id="voice-1", sample_rate=11025)
