"""The whole local path with vLLM's real server at its end: the clients -> `make local`'s front door
(HTTPS, HTTP/2, SigV4, event streams) -> the bridge -> vLLM. `voicectl transcribe`, the mic page's
server side and the README's Python example run as users run them, configured only through the
standard AWS variables."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.local.conftest import VOXTRAL, Stack, StackRunner, front_door_env
from tests.e2e.local.test_local_readme_examples import readme_examples, run_example
from tests.unit.voice_client.clients_testkit import client_parser, serve_mic_page
from voice_devtools.local.bidi import StreamSettings
from voice_devtools.local.fake_vllm import free_port
from voicectl.commands import transcribe

pytestmark = pytest.mark.vllm

RECORDING = "tests/clients/data/speech_22k_stereo.wav"


@pytest.fixture
def real_stack(vllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The front door and the bridge in front of the session's vLLM, and the clients' environment
    for them."""
    runner = StackRunner(tmp_path, StreamSettings(), vllm_port=vllm.port)
    stack = runner.start()
    try:
        yield front_door_env(stack, monkeypatch, tmp_path)
    finally:
        runner.stop()


def test_voicectl_transcribe_through_the_front_door_prints_the_real_servers_transcript(
    real_stack, capsys
):
    args = client_parser().parse_args(
        [
            "transcribe",
            RECORDING,
            "--endpoint",
            VOXTRAL,
            "--endpoint-url",
            real_stack.url,
            "--speed",
            "0",
            "--json",
        ]
    )
    assert transcribe.run(args) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["complete"] is True and (result["sessions"], result["reopens"]) == (1, 0)
    assert result["transcript"].strip() and set(result["transcript"]) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    )  # the tiny model's letters, every delta of them
    assert result["time_to_first_delta_s"] is not None
    assert "Traceback" not in err


def test_the_readmes_python_example_streams_through_the_front_door(
    real_stack, monkeypatch, tmp_path
):
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", real_stack.url)
    voxtral, _ = readme_examples()
    done = run_example(voxtral, tmp_path)
    assert done.returncode == 0, done.stderr
    deltas, transcript, figures = done.stdout.splitlines()
    assert (
        transcript.strip() and transcript.split() == deltas.split()
    )  # the transcript is what the deltas said
    assert figures.startswith("time to first delta (s): ")


def test_the_mic_pages_server_side_records_through_the_front_door(real_stack, monkeypatch, capsys):
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test-vllm installs it)"
    )
    from tests.unit.voice_client.mic_testkit import PageClient, recording_url, tone

    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", real_stack.url)
    args = client_parser().parse_args(["mic", "--endpoint", VOXTRAL, "--port", str(free_port())])
    audio = tone(2.0)

    async def record(url: str):
        client = await PageClient.connect(url)
        await client.start()
        assert (await client.next(timeout=30))["type"] == "started"
        for start in range(0, len(audio), 4800):
            await client.connection.send(audio[start : start + 4800].astype("<f4").tobytes())
        await client.connection.send(json.dumps({"type": "stop", "samples": len(audio)}))
        return await client.until("done", timeout=120)

    with serve_mic_page(args) as page_url:
        done = asyncio.run(record(recording_url(page_url)))
    assert done["text"].strip() and done["result"]["audio_seconds_sent"] == pytest.approx(
        2.0, abs=0.01
    )
    assert "voicectl mic: recording 1 done" in capsys.readouterr().err
