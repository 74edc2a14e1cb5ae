"""VoxtralSTTService in Pipecat's own test pipeline (``run_test``) over in-process streams: the
pipeline's audio resampled to 16 kHz, interim frames, a finalized frame after VAD's end of speech,
one error frame for a refusal."""

from __future__ import annotations

import asyncio
import contextlib
import functools

import pytest

pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")

from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test as pipecat_run_test

from tests.unit.voice_client.frameworks.frameworks_testkit import ScriptedServer
from voice_client.frameworks.pipecat_voxtral import VoxtralSTTService
from voice_client.frameworks.targets import VoxtralTarget
from voice_client.realtime.protocol import RealtimeError

#: pipecat's run_test gives a pipeline 1 s to start, less than a loaded machine needs; a start
#: timeout cancels the pipeline mid-start, which the tests here are not about.
run_test = functools.partial(pipecat_run_test, start_timeout=60.0)


@pytest.fixture
def server(monkeypatch) -> ScriptedServer:
    server = ScriptedServer()

    @contextlib.asynccontextmanager
    async def opener(self):
        yield server.open

    monkeypatch.setattr(VoxtralTarget, "opener", opener)
    return server


def run(rate: int, frames: int = 40) -> tuple[list, list]:
    stt = VoxtralSTTService(target=VoxtralTarget(endpoint_name="voxtral"))
    audio = [
        InputAudioRawFrame(b"\x10\x27\xf0\xd8" * (rate // 100), rate, 1) for _ in range(frames)
    ]  # 20 ms each
    return asyncio.run(
        run_test(
            stt,
            frames_to_send=[*audio, SleepFrame(0.3), VADUserStoppedSpeakingFrame(0.2)],
            pipeline_params=PipelineParams(audio_in_sample_rate=rate),
        )
    )


def test_interims_then_a_finalized_transcription(server):
    down, up = run(16000)
    texts = [
        frame
        for frame in down
        if isinstance(frame, (InterimTranscriptionFrame, TranscriptionFrame))
    ]
    # 0.8 s goes out as six 128 ms appends and the rest at the end of speech: one delta each
    assert [type(frame) for frame in texts] == [InterimTranscriptionFrame] * 7 + [
        TranscriptionFrame
    ]
    assert texts[-1].text == " ".join(f"word{n}" for n in range(1, 8)) and texts[-1].finalized
    assert not [frame for frame in up if isinstance(frame, ErrorFrame)]
    assert server.audio == b"\x10\x27\xf0\xd8" * 160 * 40  # every sample, once, in order


def test_audio_at_another_rate_is_resampled_to_16_khz(server):
    down, _up = run(8000)
    finals = [frame for frame in down if isinstance(frame, TranscriptionFrame)]
    assert len(finals) == 1 and finals[0].finalized
    # 0.8 s at 8 kHz is 12800 bytes; at 16 kHz 25600, less the resampler's look-ahead (a few ms)
    assert 24000 < len(server.audio) <= 25600


def test_a_refused_stream_is_one_error_frame(server):
    server.refuse = RealtimeError(
        "SageMaker rejected the request: Endpoint voxtral not found", code="ValidationError"
    )
    down, up = run(16000)
    errors = [frame.error for frame in up if isinstance(frame, ErrorFrame)]
    assert errors == [
        "Voxtral endpoint voxtral: SageMaker rejected the request: Endpoint voxtral not found"
    ]
    assert not [frame for frame in down if isinstance(frame, TranscriptionFrame)]


def test_back_to_back_utterances_are_each_finalized(server):
    """Two utterances with no pause, as Pipecat's VAD frames them (started, stopped, started,
    stopped): each utterance's transcription.done marks its own frame finalized, although the
    second end of speech comes before the first done (Pipecat's single finalize flag would mark
    only one)."""
    stt = VoxtralSTTService(target=VoxtralTarget(endpoint_name="voxtral"))
    speech = [InputAudioRawFrame(b"\x10\x27\xf0\xd8" * 160, 16000, 1) for _ in range(20)]
    utterance = [
        VADUserStartedSpeakingFrame(),
        *speech,
        SleepFrame(0.2),
        VADUserStoppedSpeakingFrame(0.2),
    ]
    down, _up = asyncio.run(
        run_test(
            stt,
            frames_to_send=[*utterance, *utterance, SleepFrame(0.5)],
            pipeline_params=PipelineParams(audio_in_sample_rate=16000),
        )
    )
    finals = [frame for frame in down if isinstance(frame, TranscriptionFrame)]
    assert [frame.finalized for frame in finals] == [True, True]
    assert len(server.streams) == 2


def test_stereo_audio_is_mixed_down_to_mono(server):
    """A transport with audio_in_channels=2 gives interleaved stereo frames: vLLM gets their mono
    mix at 16 kHz (the left and right samples averaged), not the interleaved samples."""
    stt = VoxtralSTTService(target=VoxtralTarget(endpoint_name="voxtral"))
    stereo = b"\x10\x27\x00\x00" * 320  # 20 ms: left 10000, right 0
    audio = [InputAudioRawFrame(stereo, 16000, 2) for _ in range(40)]
    frames = [*audio, SleepFrame(0.3), VADUserStoppedSpeakingFrame(0.2)]
    asyncio.run(
        run_test(
            stt, frames_to_send=frames, pipeline_params=PipelineParams(audio_in_sample_rate=16000)
        )
    )
    assert server.audio == b"\x88\x13" * 320 * 40  # 5000 per sample, 0.8 s of mono
