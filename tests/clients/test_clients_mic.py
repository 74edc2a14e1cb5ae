"""``voicectl mic`` without Gradio installed: launch settings, the page wiring against a stand-in module, and the
microphone transcriber against the real bridge and the fake vLLM."""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest

from tests.clients.conftest import Servers
from voicectl import mic
from voicectl.cli import UsageError


def test_launch_binds_loopback_and_shares_only_with_share(parse):
    default = mic.launch_kwargs(parse(["mic", "--endpoint", "voxtral"]))
    assert default == {"server_name": "127.0.0.1", "server_port": 7860, "share": False, "inbrowser": False}
    shared = mic.launch_kwargs(parse(["mic", "--endpoint", "voxtral", "--share", "--port", "9000"]))
    assert (shared["server_name"], shared["server_port"], shared["share"]) == ("127.0.0.1", 9000, True)


class FakeGradio:
    """Records what the page builds and how it is launched (the subset of the gradio API that mic uses)."""

    def __init__(self) -> None:
        self.launched: dict | None = None
        self.handlers: dict[str, dict] = {}
        gradio = self

        class Page:
            def __enter__(self):
                return self

            def __exit__(self, *exc_info):
                return False

            def queue(self):
                return self

            def launch(self, **kwargs):
                gradio.launched = kwargs

        class Audio:
            def __init__(self, **kwargs):
                gradio.audio_options = kwargs

            def stream(self, fn, **kwargs):
                gradio.handlers["stream"] = {"fn": fn, **kwargs}

            def stop_recording(self, fn, **kwargs):
                gradio.handlers["stop"] = {"fn": fn, **kwargs}

        self.Blocks = lambda **kwargs: Page()
        self.Audio = Audio
        self.Markdown = self.State = self.Textbox = lambda *args, **kwargs: object()
        self.skip = lambda: "SKIP"


def test_run_launches_the_page_on_loopback(parse, capsys):
    gradio = FakeGradio()
    assert mic.run(parse(["mic", "--url", "ws://127.0.0.1:8080/invocations-bidirectional-stream"]),
                   gradio_module=gradio) == 0
    assert gradio.launched["server_name"] == "127.0.0.1"
    assert gradio.launched["share"] is False
    assert gradio.audio_options["streaming"] is True and gradio.audio_options["sources"] == ["microphone"]
    assert gradio.handlers["stream"]["stream_every"] == mic.STREAM_EVERY_S
    assert "--share" not in capsys.readouterr().err


def test_share_warns_about_credentials(parse, capsys):
    gradio = FakeGradio()
    mic.run(parse(["mic", "--endpoint", "voxtral", "--share"]), gradio_module=gradio)
    assert gradio.launched["share"] is True
    assert "anyone who has it can call the endpoint with your AWS credentials" in capsys.readouterr().err


def test_missing_gradio_tells_how_to_install(parse, monkeypatch):
    monkeypatch.setitem(sys.modules, "gradio", None)  # makes `import gradio` raise ImportError
    with pytest.raises(UsageError, match=r"pip install '\.\[mic\]'"):
        mic.run(parse(["mic", "--endpoint", "voxtral"]))


def test_microphone_chunks_reach_vllm_as_16k_mono_and_the_transcript_grows(parse):
    rate, seconds = 48000, 2.0
    t = np.arange(int(rate * seconds)) / rate
    stereo = (np.stack([np.sin(2 * np.pi * 300 * t)] * 2, axis=1) * 12000).astype(np.int16)
    block = int(rate * mic.STREAM_EVERY_S)

    with Servers(deltas=("one ", "two "), delta_per_append=True) as servers:
        args = parse(["mic", "--url", servers.url])

        async def record():
            transcriber = mic.MicTranscriber(args)
            await transcriber.start()
            seen = []
            for start in range(0, len(stereo), block):
                transcriber.feed(rate, stereo[start:start + block])
                await asyncio.sleep(0.02)
                seen.append(transcriber.text)
            result = await transcriber.stop()
            return seen, result

        seen, result = asyncio.run(record())
        (session,) = servers.vllm.sessions

    assert len(session.audio) / 2 / 16000 == pytest.approx(seconds, rel=0.01)
    received = np.frombuffer(bytes(session.audio), dtype="<i2").astype(np.float64)
    spectrum = np.abs(np.fft.rfft(received))
    assert np.argmax(spectrum) * 16000 / len(received) == pytest.approx(300, abs=1)
    assert result.transcript == session.text
    assert seen[-1] and len(seen[-1]) > len(seen[0])  # the transcript grew while recording
