"""SonicSynthesizer against a loopback SageMaker runtime: audio as it arrives whatever the framing,
refusals named with their cause, stream errors, and the request's connection closed when the caller
stops reading."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.voice_client.frameworks.frameworks_testkit import (
    SONIC_DONE,
    FakeRuntime,
    aws_env,
    exception_event,
    fake_runtime,
    sonic_chunk,
    sonic_line,
)
from voice_client.frameworks.sonic_stream import SonicError, SonicSynthesizer
from voice_client.frameworks.targets import SonicTarget

PCM = [bytes(range(i, i + 40)) for i in range(0, 120, 40)]


@pytest.fixture(autouse=True)
def credentials(monkeypatch, tmp_path):
    aws_env(monkeypatch, tmp_path)


async def speak(runtime: FakeRuntime, text: str = "Hello.") -> tuple[list[bytes], SonicSynthesizer]:
    async with fake_runtime(runtime):
        synthesizer = SonicSynthesizer(
            SonicTarget("sonic tts", endpoint_url=runtime.url), voice_id="voice-1"
        )
        try:
            return [pcm async for pcm in synthesizer.stream(text, 24000)], synthesizer
        finally:
            await synthesizer.aclose()


def sse(event: bytes) -> bytes:
    return b"data: " + event.rstrip(b"\n") + b"\n\n"


@pytest.mark.parametrize("framing", ["lines", "split", "packed", "sse"])
def test_audio_comes_out_as_it_arrives_whatever_the_framing(framing):
    events = [*(sonic_chunk(pcm) for pcm in PCM), SONIC_DONE]
    whole = b"".join(events)
    parts = {
        "lines": events,
        "split": [whole[i : i + 7] for i in range(0, len(whole), 7)],
        "packed": [whole],
        "sse": [sse(event) for event in events],
    }[framing]
    runtime = FakeRuntime(parts=parts)
    audio, synthesizer = asyncio.run(speak(runtime))
    assert b"".join(audio) == b"".join(PCM)
    path, body = runtime.requests[0]
    assert path == "/endpoints/sonic%20tts/invocations-response-stream"
    assert body["transcript"] == "Hello." and body["voice"] == {"mode": "id", "id": "voice-1"}
    assert body["output_format"] == {
        "container": "raw",
        "encoding": "pcm_s16le",
        "sample_rate": 24000,
    }
    assert synthesizer.last_time_to_first_audio_s is not None and synthesizer.closed_early == 0


@pytest.mark.parametrize(
    "status, words", [(422, "malformed (HTTP 422)"), (429, "no free generation slot")]
)
def test_a_model_error_names_the_containers_status_and_cause(status, words):
    runtime = FakeRuntime(
        refusal=(
            424,
            "ModelError",
            {
                "message": "Received client error",
                "OriginalStatusCode": status,
                "OriginalMessage": "refused by the container",
            },
        )
    )
    with pytest.raises(SonicError) as raised:
        asyncio.run(speak(runtime))
    assert raised.value.status == status and raised.value.code == "ModelError"
    assert f"ModelError (status {status}): refused by the container" in str(raised.value)
    assert words in str(raised.value)


def test_an_unknown_endpoint_says_what_to_check():
    runtime = FakeRuntime(
        refusal=(400, "ValidationError", {"message": "Endpoint sonic tts not found."})
    )
    with pytest.raises(
        SonicError, match="ValidationError: Endpoint sonic tts not found; check the endpoint name"
    ):
        asyncio.run(speak(runtime))


def test_a_model_stream_error_mid_stream_is_named():
    runtime = FakeRuntime(
        parts=[sonic_chunk(PCM[0])],
        raw=[exception_event("ModelStreamError", "the container broke", "StreamBroken")],
    )
    with pytest.raises(
        SonicError, match=r"ModelStreamError from Sonic endpoint 'sonic tts' \(StreamBroken\)"
    ):
        asyncio.run(speak(runtime))


@pytest.mark.parametrize(
    "parts, words",
    [
        ([sonic_chunk(PCM[0])], "ended before the done event"),
        (
            [sonic_line({"type": "error", "status_code": 500, "error": "boom"})],
            r"Sonic reported an error \(status 500\): boom",
        ),
    ],
)
def test_a_truncated_or_failed_response_is_an_error(parts, words):
    with pytest.raises(SonicError, match=words):
        asyncio.run(speak(FakeRuntime(parts=parts)))


def test_closing_the_stream_closes_the_requests_connection():
    runtime = FakeRuntime(parts=[sonic_chunk(PCM[0])], hold=True)

    async def run():
        async with fake_runtime(runtime):
            synthesizer = SonicSynthesizer(
                SonicTarget("sonic", endpoint_url=runtime.url), voice_id="voice-1"
            )
            stream = synthesizer.stream("Hello.", 24000)
            first = await anext(stream)
            await stream.aclose()  # an interruption
            await asyncio.wait_for(runtime.disconnected.wait(), 10)
            await synthesizer.aclose()
            return first, synthesizer.closed_early

    assert asyncio.run(run()) == (PCM[0], 1)


def test_no_credentials_is_said_once(monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(SonicError, match="no usable AWS credentials") as raised:
        asyncio.run(speak(FakeRuntime()))
    assert raised.value.code == "credentials"


def test_a_bad_voice_or_language_is_refused_before_any_call():
    with pytest.raises(ValueError, match="language 'xx' is not supported"):
        SonicSynthesizer(SonicTarget("sonic"), voice_id="voice-1", language="xx")
