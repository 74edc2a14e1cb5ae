"""Pipecat's own pipelines (``pipecat.tests.utils.run_test``) with the Voxtral and Sonic services
against the local
runtime: SigV4, HTTP/2 bidirectional streams and ``InvokeEndpointWithResponseStream`` through the
front door, the real bridge, the fake vLLM and the Sonic stand-in, all on loopback."""

from __future__ import annotations

import asyncio
import functools
import time

import pytest

pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")

from pipecat.frames.frames import (
    DataFrame,
    ErrorFrame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    STTMetadataFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test as pipecat_run_test

from tests.e2e.local.conftest import DELTAS, SONIC, VOXTRAL
from voice_client.frameworks.pipecat_sonic import SonicTTSService
from voice_client.frameworks.pipecat_voxtral import VoxtralSTTService
from voice_client.frameworks.sonic_stream import SonicSynthesizer
from voice_client.frameworks.targets import SonicTarget, VoxtralTarget
from voice_client.frameworks.voxtral_stream import VOXTRAL_TTFS_P99_S
from voice_client.realtime.auth import BearerToken

SPEECH = (
    b"\x10\x27\xf0\xd8" * 160
)  # 20 ms of a loud square wave at 16 kHz (320 samples): one Pipecat input frame
UTTERANCE_FRAMES = (
    75  # 1.5 s of audio: enough for the fake vLLM's first deltas (after 0.6 s) before the commit
)
PARAMS = PipelineParams(audio_in_sample_rate=16000, audio_out_sample_rate=24000)
#: pipecat's run_test gives a pipeline 1 s to start, less than a loaded machine needs; a start
#: timeout cancels the pipeline mid-start, which the tests here are not about.
run_test = functools.partial(pipecat_run_test, start_timeout=60.0)


def utterance_frames() -> list:
    """An utterance as a Pipecat transport gives it: 20 ms input frames, then VAD's end of
    speech."""
    frames: list = [InputAudioRawFrame(SPEECH, 16000, 1) for _ in range(UTTERANCE_FRAMES)]
    # The VAD frame is a system frame (it overtakes queued audio): let the audio through first, as
    # VAD's own stop_secs of silence does in a live pipeline.
    return [
        *frames,
        SleepFrame(0.5),
        VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=time.time()),
    ]


def errors(frames) -> list[str]:
    return [frame.error for frame in frames if isinstance(frame, ErrorFrame)]


def transcription_frames(frames) -> list:
    return [
        frame
        for frame in frames
        if isinstance(frame, (InterimTranscriptionFrame, TranscriptionFrame))
    ]


def test_an_utterance_gives_interim_then_final_transcription_frames(client_env):
    stt = VoxtralSTTService(
        target=VoxtralTarget(endpoint_name=VOXTRAL, endpoint_url=client_env.url)
    )
    down, up = asyncio.run(run_test(stt, frames_to_send=utterance_frames(), pipeline_params=PARAMS))
    texts = transcription_frames(down)
    assert [type(frame) for frame in texts[:-1]] == [InterimTranscriptionFrame] * (len(texts) - 1)
    assert len(texts) >= 2 and isinstance(texts[-1], TranscriptionFrame)
    final = texts[-1].text
    assert final.startswith("".join(DELTAS).strip())  # the fake vLLM's scripted words, in order
    assert texts[-2].text and final.startswith(
        texts[-2].text.strip()
    )  # the last interim is a prefix of the final
    assert texts[-1].finalized  # confirmed by transcription.done
    assert errors(up) == []
    metadata = [frame for frame in up if isinstance(frame, STTMetadataFrame)]
    assert [frame.ttfs_p99_latency for frame in metadata] == [VOXTRAL_TTFS_P99_S]
    audio = bytes(client_env.vllm.sessions[0].audio)
    assert audio == SPEECH * UTTERANCE_FRAMES  # every sample reached vLLM, in order, once


def test_the_ecs_target_url_and_token(client_env):
    """The ECS target's path: a plain WebSocket to the bridge with a bearer token (the local bridge
    takes any)."""
    url = f"ws://127.0.0.1:{client_env.bridge.port}/invocations-bidirectional-stream"
    stt = VoxtralSTTService(
        target=VoxtralTarget(url=url, token=BearerToken("local-token", "a test"))
    )
    down, up = asyncio.run(run_test(stt, frames_to_send=utterance_frames(), pipeline_params=PARAMS))
    finals = [frame.text for frame in down if isinstance(frame, TranscriptionFrame)]
    assert finals and finals[0].startswith("Hello from the local runtime.")
    assert errors(up) == []


class SilenceOnEndOfSpeech(FrameProcessor):
    """Makes the fake vLLM answer nothing from the end of speech on (no ``transcription.done``)."""

    def __init__(self, vllm) -> None:
        super().__init__()
        self.vllm = vllm

    async def process_frame(self, frame, direction) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            self.vllm.silent = True
        await self.push_frame(frame, direction)


def test_a_done_that_never_comes_ends_the_utterance_with_its_deltas(client_env, caplog):
    stack = client_env
    stt = VoxtralSTTService(
        target=VoxtralTarget(endpoint_name=VOXTRAL, endpoint_url=stack.url), done_wait_s=1.0
    )
    pipeline = Pipeline([SilenceOnEndOfSpeech(stack.vllm), stt])
    down, up = asyncio.run(
        run_test(
            pipeline, frames_to_send=[*utterance_frames(), SleepFrame(1.5)], pipeline_params=PARAMS
        )
    )
    finals = [frame for frame in down if isinstance(frame, TranscriptionFrame)]
    interims = [frame for frame in down if isinstance(frame, InterimTranscriptionFrame)]
    assert (
        stack.vllm.sessions[0].event_types()[-1] == "input_audio_buffer.commit"
    )  # the final commit went out
    assert (
        len(finals) == 1 and interims and finals[0].text == interims[-1].text
    )  # the deltas that arrived
    assert not finals[0].finalized  # not confirmed by a transcription.done
    assert "no transcription.done within 1.0 s" in caplog.text
    assert errors(up) == []


@pytest.mark.parametrize(
    "endpoint, expected",
    [
        ("no-such-endpoint", "Endpoint no-such-endpoint"),
    ],
)
def test_a_refused_stream_is_one_error_frame_naming_the_cause(client_env, endpoint, expected):
    stt = VoxtralSTTService(
        target=VoxtralTarget(endpoint_name=endpoint, endpoint_url=client_env.url)
    )
    down, up = asyncio.run(run_test(stt, frames_to_send=utterance_frames(), pipeline_params=PARAMS))
    assert len(errors(up)) == 1 and expected in errors(up)[0]
    assert transcription_frames(down) == []


def test_a_sentence_gives_audio_frames_at_the_pipeline_rate(client_env):
    tts = SonicTTSService(
        target=SonicTarget(SONIC, endpoint_url=client_env.url), voice_id="voice-1"
    )
    down, up = asyncio.run(
        run_test(
            tts,
            frames_to_send=[TTSSpeakFrame("Hello there, this is Sonic.")],
            pipeline_params=PARAMS,
        )
    )
    audio = [frame for frame in down if isinstance(frame, TTSAudioRawFrame)]
    assert audio and {frame.sample_rate for frame in audio} == {24000}
    call = client_env.sonic.calls[-1]
    assert call.request["output_format"]["sample_rate"] == 24000
    assert call.request["transcript"].strip() == "Hello there, this is Sonic."
    assert b"".join(frame.audio for frame in audio) == bytes(
        call.audio
    )  # every sample Sonic sent, in order
    assert tts.synthesizer.last_time_to_first_audio_s is not None
    assert errors(up) == []


class ProbeFrame(DataFrame):
    """Asks :class:`ClosedProbe` to look (a data frame: it keeps its place after the
    interruption)."""


class ClosedProbe(FrameProcessor):
    """At a :class:`ProbeFrame`, records whether the Sonic stand-in has seen the last request closed
    (waiting up to ``limit_s``, a bound, not a measured time): the pipeline still runs then, so its
    end (which closes the service's HTTP session) is not what closed the request."""

    def __init__(self, sonic, limit_s: float = 3.0) -> None:
        super().__init__()
        self.sonic, self.limit_s, self.closed = sonic, limit_s, None

    async def process_frame(self, frame, direction) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, ProbeFrame):
            deadline = time.monotonic() + self.limit_s
            while not self.sonic.calls[-1].client_closed and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            self.closed = self.sonic.calls[-1].client_closed
            return
        await self.push_frame(frame, direction)


def test_an_interruption_closes_the_sonic_request_and_no_audio_of_it_follows(client_env):
    stack = client_env
    stack.sonic.pace = 1.0  # real time: the sentence is still streaming when the interruption comes
    tts = SonicTTSService(target=SonicTarget(SONIC, endpoint_url=stack.url), voice_id="voice-1")
    probe = ClosedProbe(stack.sonic)
    sentence = (
        "A long sentence that takes a few seconds to speak, so that it can be interrupted "
        "halfway through."
    )
    down, up = asyncio.run(
        run_test(
            Pipeline([tts, probe]),
            frames_to_send=[
                TTSSpeakFrame(sentence),
                SleepFrame(0.8),
                InterruptionFrame(),
                SleepFrame(0.2),
                ProbeFrame(),
                SleepFrame(0.3),
            ],
            pipeline_params=PARAMS,
        )
    )
    assert (
        tts.synthesizer.closed_early == 1
    )  # the request's connection was closed before Sonic's done
    call = stack.sonic.calls[-1]
    assert probe.closed  # the stand-in saw the request closed (it stopped generating) mid-pipeline
    assert not any(event["type"] == "done" for event in call.events)
    kinds = [type(frame) for frame in down]
    assert InterruptionFrame in kinds
    after = kinds[kinds.index(InterruptionFrame) :]
    assert TTSAudioRawFrame in kinds and TTSAudioRawFrame not in after
    assert errors(up) == []


def test_a_sonic_429_is_an_error_frame_naming_the_cause(client_env):
    """Every generation slot of the stand-in busy (4, as Cartesia's container): Sonic answers 429,
    which SageMaker turns into a ModelError carrying it."""
    stack = client_env
    stack.sonic.pace = 1.0
    target = SonicTarget(SONIC, endpoint_url=stack.url)
    tts = SonicTTSService(target=target, voice_id="voice-1")

    async def run():
        holder = SonicSynthesizer(target, voice_id="voice-1")
        held = [
            holder.stream("A sentence that holds a generation slot for a while.", 24000)
            for _ in range(4)
        ]
        for stream in held:
            await anext(stream)  # each holds one of the container's four slots
        try:
            return await run_test(
                tts, frames_to_send=[TTSSpeakFrame("Hello.")], pipeline_params=PARAMS
            )
        finally:
            for stream in held:
                await stream.aclose()
            await holder.aclose()

    down, up = asyncio.run(run())
    ours = [error for error in errors(up) if "Sonic endpoint" in error]
    assert (
        len(ours) == 1
        and "ModelError (status 429)" in ours[0]
        and "no free generation slot" in ours[0]
    )
    assert not [frame for frame in down if isinstance(frame, TTSAudioRawFrame)]


def test_refused_credentials_are_one_error_frame_naming_the_cause(client_env, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    stt = VoxtralSTTService(
        target=VoxtralTarget(endpoint_name=VOXTRAL, endpoint_url=client_env.url)
    )
    down, up = asyncio.run(run_test(stt, frames_to_send=utterance_frames(), pipeline_params=PARAMS))
    assert len(errors(up)) == 1 and "signature" in errors(up)[0].lower()
    assert transcription_frames(down) == []


def test_server_busy_is_retried_then_one_error_frame(tmp_path, monkeypatch):
    """Every stream slot of the bridge taken (MAX_STREAMS 1, held by another client): the machine
    retries server_busy (BUSY_RETRY_DELAYS_S) and then gives up with one error frame naming it."""
    from websockets.sync.client import connect

    from tests.e2e.local.conftest import E2E_ACCEPT_S, StackRunner, front_door_env
    from voice_devtools.local.bidi import StreamSettings

    runner = StackRunner(
        tmp_path, StreamSettings(accept_timeout_s=E2E_ACCEPT_S), bridge_options={"max_streams": 1}
    )
    stack = runner.start()
    try:
        front_door_env(stack, monkeypatch, tmp_path)
        with connect(
            f"ws://127.0.0.1:{stack.bridge.port}/invocations-bidirectional-stream"
        ) as holder:
            holder.recv()  # session.created: the one slot is taken
            stt = VoxtralSTTService(
                target=VoxtralTarget(endpoint_name=VOXTRAL, endpoint_url=stack.url)
            )
            down, up = asyncio.run(
                run_test(
                    stt,
                    frames_to_send=[*utterance_frames(), SleepFrame(12.0)],
                    pipeline_params=PARAMS,
                )
            )
        assert (
            len(errors(up)) == 1 and "server_busy" in errors(up)[0] and "retries" in errors(up)[0]
        )
        assert transcription_frames(down) == []
    finally:
        runner.stop()


def test_credentials_from_the_container_credential_provider(client_env, monkeypatch):
    """As in an ECS task: no access key in the environment, AWS_CONTAINER_CREDENTIALS_FULL_URI and
    AWS_CONTAINER_AUTHORIZATION_TOKEN name a credential endpoint (here a stand-in on loopback
    answering as ECS's
    does: AccessKeyId, SecretAccessKey, Token, Expiration; botocore ContainerProvider)."""
    from aiohttp import web

    from tests.e2e.local.conftest import ACCESS_KEY_ID, SECRET_ACCESS_KEY

    stack = client_env
    seen: list[str | None] = []

    async def credentials(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response(
            {
                "AccessKeyId": ACCESS_KEY_ID,
                "SecretAccessKey": SECRET_ACCESS_KEY,
                "Token": "task-session-token",
                "Expiration": "2099-01-01T00:00:00Z",
            }
        )

    async def start():
        app = web.Application()
        app.router.add_get("/v2/credentials/task", credentials)
        app_runner = web.AppRunner(app)
        await app_runner.setup()
        site = web.TCPSite(app_runner, "127.0.0.1", 0)
        await site.start()
        return app_runner, site._server.sockets[0].getsockname()[1]

    app_runner, port = stack.call(start())
    try:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
        monkeypatch.setenv(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{port}/v2/credentials/task"
        )
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token")
        stt = VoxtralSTTService(target=VoxtralTarget(endpoint_name=VOXTRAL, endpoint_url=stack.url))
        tts = SonicTTSService(target=SonicTarget(SONIC, endpoint_url=stack.url), voice_id="voice-1")
        down, up = asyncio.run(
            run_test(
                Pipeline([stt, tts]),
                frames_to_send=[
                    *utterance_frames(),
                    SleepFrame(0.5),
                    TTSSpeakFrame("Hello from a task role."),
                ],
                pipeline_params=PARAMS,
            )
        )
    finally:
        stack.call(app_runner.cleanup())
    assert errors(up) == []
    assert [frame for frame in down if isinstance(frame, TranscriptionFrame)]
    assert [frame for frame in down if isinstance(frame, TTSAudioRawFrame)]
    assert seen and set(seen) == {"container-auth-token"}


BOT_WITH_A_REFUSED_STREAM = """
import asyncio, sys
from pipecat.frames.frames import InputAudioRawFrame, VADUserStoppedSpeakingFrame
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test
from voice_client.frameworks.pipecat_voxtral import VoxtralSTTService
from voice_client.frameworks.targets import VoxtralTarget

target = VoxtralTarget(endpoint_name="no-such-endpoint", endpoint_url=sys.argv[1])
stt = VoxtralSTTService(target=target)
frames = [InputAudioRawFrame(b"\\x10\\x27" * 320, 16000, 1) for _ in range(50)]
frames += [SleepFrame(0.5), VADUserStoppedSpeakingFrame(0.2)]
params = PipelineParams(audio_in_sample_rate=16000)
down, up = asyncio.run(run_test(stt, frames_to_send=frames, pipeline_params=params,
                                start_timeout=60.0))
print("ERRORS", [frame.error for frame in up if type(frame).__name__ == "ErrorFrame"])
"""


def test_a_refused_stream_leaves_no_traceback_at_exit(client_env, tmp_path):
    """A refused stream's awscrt body writer fails with AWS_ERROR_HTTP_STREAM_HAS_COMPLETED, which
    asyncio would print as "Task exception was never retrieved" when the interpreter exits."""
    import os
    import subprocess
    import sys

    script = tmp_path / "bot.py"
    script.write_text(BOT_WITH_A_REFUSED_STREAM)
    done = subprocess.run(
        [sys.executable, str(script), client_env.url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("Voxtral endpoint no-such-endpoint: SageMaker rejected") == 1
    assert "Traceback" not in done.stderr and "AWS_ERROR" not in done.stderr, done.stderr[-2000:]
