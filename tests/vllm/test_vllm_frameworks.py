"""The Pipecat Voxtral service with vLLM's real realtime server at the end of the local path (front
door, bridge): one utterance in Pipecat's own test pipeline gives interim frames, then the finalized
transcript."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.local.conftest import VOXTRAL, Stack, StackRunner, front_door_env
from voice_devtools.local.bidi import StreamSettings

pytestmark = pytest.mark.vllm


@pytest.fixture
def real_stack(vllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    runner = StackRunner(tmp_path, StreamSettings(), vllm_port=vllm.port)
    stack = runner.start()
    try:
        yield front_door_env(stack, monkeypatch, tmp_path)
    finally:
        runner.stop()


def test_an_utterance_through_the_real_server_gives_interims_then_the_final(real_stack):
    pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")
    from pipecat.frames.frames import InterimTranscriptionFrame, TranscriptionFrame
    from pipecat.tests.utils import run_test

    from tests.e2e.local.test_local_frameworks_pipecat import PARAMS, errors, utterance_frames
    from voice_client.frameworks.pipecat_voxtral import VoxtralSTTService
    from voice_client.frameworks.targets import VoxtralTarget

    target = VoxtralTarget(endpoint_name=VOXTRAL, endpoint_url=real_stack.url)
    # A CPU decodes some 17 tokens after the final commit.
    stt = VoxtralSTTService(target=target, done_wait_s=30.0)
    down, up = asyncio.run(
        run_test(stt, frames_to_send=utterance_frames(), pipeline_params=PARAMS, start_timeout=60.0)
    )
    kinds = (InterimTranscriptionFrame, TranscriptionFrame)
    texts = [frame for frame in down if isinstance(frame, kinds)]
    assert errors(up) == []
    assert texts and isinstance(texts[-1], TranscriptionFrame) and texts[-1].finalized
    assert all(isinstance(frame, InterimTranscriptionFrame) for frame in texts[:-1])
    final = texts[-1].text
    letters = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ")
    assert final and set(final) <= letters  # the tiny model's letters
    if len(texts) > 1:
        assert final.startswith(texts[-2].text)  # the last interim is a prefix of the final
