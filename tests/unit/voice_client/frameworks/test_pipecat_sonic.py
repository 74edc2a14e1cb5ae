"""SonicTTSService in Pipecat's own test pipeline (``run_test``) against a loopback SageMaker
runtime: audio frames at the pipeline's rate, Sonic's refusals as error frames naming the cause, a
rate Sonic does not offer refused."""

from __future__ import annotations

import asyncio
import functools

import pytest

pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")

from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import run_test as pipecat_run_test

from tests.unit.voice_client.frameworks.frameworks_testkit import (
    SONIC_DONE,
    FakeRuntime,
    aws_env,
    fake_runtime,
    sonic_chunk,
)
from voice_client.frameworks.pipecat_sonic import SonicTTSService
from voice_client.frameworks.targets import SonicTarget

#: pipecat's run_test gives a pipeline 1 s to start, less than a loaded machine needs; a start
#: timeout cancels the pipeline mid-start, which the tests here are not about.
run_test = functools.partial(pipecat_run_test, start_timeout=60.0)

PCM = bytes(range(200)) * 4


@pytest.fixture(autouse=True)
def credentials(monkeypatch, tmp_path):
    aws_env(monkeypatch, tmp_path)


def speak(runtime: FakeRuntime, rate: int = 24000) -> tuple[list, list]:
    async def run():
        async with fake_runtime(runtime):
            tts = SonicTTSService(
                target=SonicTarget("sonic", endpoint_url=runtime.url), voice_id="voice-1"
            )
            return await run_test(
                tts,
                frames_to_send=[TTSSpeakFrame("Hello.")],
                pipeline_params=PipelineParams(audio_out_sample_rate=rate),
            )

    return asyncio.run(run())


def test_audio_frames_at_the_pipelines_rate():
    runtime = FakeRuntime(parts=[sonic_chunk(PCM[:400]), sonic_chunk(PCM[400:]), SONIC_DONE])
    down, up = speak(runtime, rate=16000)
    audio = [frame for frame in down if isinstance(frame, TTSAudioRawFrame)]
    assert b"".join(frame.audio for frame in audio) == PCM and {
        frame.sample_rate for frame in audio
    } == {16000}
    assert runtime.requests[0][1]["output_format"]["sample_rate"] == 16000
    assert not [frame for frame in up if isinstance(frame, ErrorFrame)]


@pytest.mark.parametrize(
    "status, words", [(422, "malformed (HTTP 422)"), (429, "no free generation slot")]
)
def test_sonic_refusals_are_error_frames_naming_the_cause(status, words):
    runtime = FakeRuntime(
        refusal=(
            424,
            "ModelError",
            {"message": "x", "OriginalStatusCode": status, "OriginalMessage": "refused"},
        )
    )
    down, up = speak(runtime)
    ours = [
        frame.error
        for frame in up
        if isinstance(frame, ErrorFrame) and "Sonic endpoint" in frame.error
    ]
    assert (
        len(ours) == 1 and f"ModelError (status {status}): refused" in ours[0] and words in ours[0]
    )
    assert not [frame for frame in down if isinstance(frame, TTSAudioRawFrame)]


def test_a_rate_sonic_does_not_offer_is_refused_at_start():
    _down, up = speak(FakeRuntime(), rate=11025)
    errors = [frame.error for frame in up if isinstance(frame, ErrorFrame)]
    assert errors[0].startswith(
        "Sonic cannot speak at 11025 Hz; set the pipeline's audio_out_sample_rate"
    )


@pytest.mark.parametrize(
    "status, code, words",
    [
        (400, "ValidationError", "Endpoint sonic of account 123456789012 not found"),
        (
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid",
        ),
        (403, "AccessDeniedException", "not authorized to perform: sagemaker:InvokeEndpoint"),
    ],
)
def test_an_endpoint_that_cannot_answer_is_one_permanent_error(status, code, words):
    """An unknown endpoint, refused credentials or a missing permission fail every sentence alike:
    one error frame naming the cause, the service unusable (Pipecat gives it no more sentences and
    adds no "completed with no audio" error of its own per sentence)."""
    runtime = FakeRuntime(refusal=(status, code, {"message": words}))

    async def run():
        async with fake_runtime(runtime):
            tts = SonicTTSService(
                target=SonicTarget("sonic", endpoint_url=runtime.url), voice_id="voice-1"
            )
            return await run_test(
                tts,
                frames_to_send=[TTSSpeakFrame("Hello."), TTSSpeakFrame("Again.")],
                pipeline_params=PipelineParams(audio_out_sample_rate=24000),
            )

    _down, up = asyncio.run(run())
    errors = [frame for frame in up if isinstance(frame, ErrorFrame)]
    assert [frame.error for frame in errors] == [errors[0].error] and f"{code}: {words}" in errors[
        0
    ].error
    assert len(runtime.requests) == 1  # the second sentence was not sent
