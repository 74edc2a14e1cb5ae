"""docs/frameworks.md "Example bots": its Python blocks run exactly as written, each in a fresh
interpreter, against the local runtime (the real bridge, the fake vLLM, the Sonic stand-in),
configured only through the standard variables. What the test cannot reach is replaced before the
block runs (a ``sitecustomize`` on ``PYTHONPATH``):

- Pipecat's ``LocalAudioTransport`` (a microphone and a speaker, PortAudio): an input that speaks a
  recording in 20 ms frames, then silence, and an output that ends the bot at the first audio frame
  it is given;
- Pipecat's ``AWSBedrockLLMService`` (Bedrock): an LLM that prints what it heard and answers one
  sentence;
- LiveKit's ``cli.run_app`` (a LiveKit server and a room) and its ``aws`` and ``silero`` plugins:
  the entrypoint runs with a stand-in room, and the session's STT and TTS (the block's own objects)
  transcribe the recording and speak a sentence through the local runtime.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")
pytest.importorskip(
    "livekit.agents", reason="the livekit extra is not installed (make agents-deps)"
)

from tests.e2e.local.conftest import DELTAS, SONIC, VOXTRAL

ROOT = Path(__file__).resolve().parents[3]
RECORDING = ROOT / "tests/clients/data/speech_22k_stereo.wav"

STAND_INS = """
import asyncio, os, sys, types

from pipecat.frames.frames import (
    EndWorkerFrame, InputAudioRawFrame, LLMContextFrame, LLMFullResponseEndFrame,
    LLMFullResponseStartFrame, LLMTextFrame, StartFrame, TTSAudioRawFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from voice_client.audio import load_pcm16

SPEECH = load_pcm16(os.environ["BOT_RECORDING"]).data
FRAME = 640  # 20 ms at 16 kHz


class _Input(FrameProcessor):
    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self.create_task(self._speak())

    async def _speak(self):
        silence = bytes(FRAME)
        for offset in range(0, len(SPEECH), FRAME):
            await self.push_frame(InputAudioRawFrame(SPEECH[offset:offset + FRAME], 16000, 1))
            await asyncio.sleep(0.02)
        for _ in range(1000):  # silence while the bot answers (it ends the pipeline)
            await self.push_frame(InputAudioRawFrame(silence, 16000, 1))
            await asyncio.sleep(0.02)


class _Output(FrameProcessor):
    spoke = False

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame) and not self.spoke:
            self.spoke = True
            print("BOT SPOKE", frame.sample_rate, flush=True)
            await self.push_frame(EndWorkerFrame(), FrameDirection.UPSTREAM)


class LocalAudioTransportParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class LocalAudioTransport:
    def __init__(self, params):
        self._input, self._output = _Input(), _Output()

    def input(self):
        return self._input

    def output(self):
        return self._output


class AWSBedrockLLMService(FrameProcessor):
    def __init__(self, *, model, aws_region, **kwargs):
        super().__init__()

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            print("LLM HEARD", frame.context.get_messages()[-1]["content"], flush=True)
            await self.push_frame(LLMFullResponseStartFrame())
            await self.push_frame(LLMTextFrame("Hello there, how can I help? "))
            await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)


audio_module = types.ModuleType("pipecat.transports.local.audio")
audio_module.LocalAudioTransport = LocalAudioTransport
audio_module.LocalAudioTransportParams = LocalAudioTransportParams
sys.modules["pipecat.transports.local.audio"] = audio_module
llm_module = types.ModuleType("pipecat.services.aws.llm")
llm_module.AWSBedrockLLMService = AWSBedrockLLMService
sys.modules["pipecat.services.aws.llm"] = llm_module

# LiveKit: no server, no Bedrock, no Silero plugin here.
from livekit import agents, rtc
from livekit.agents import AgentSession, stt as lk_stt
import livekit

aws = types.ModuleType("livekit.plugins.aws")
aws.LLM = lambda **kwargs: None
silero = types.ModuleType("livekit.plugins.silero")
silero.VAD = types.SimpleNamespace(load=lambda: None)
# The plugins' namespace package (none is installed here).
plugins = types.ModuleType("livekit.plugins")
plugins.__path__ = []
plugins.aws, plugins.silero = aws, silero
sys.modules.update(
    {"livekit.plugins": plugins, "livekit.plugins.aws": aws, "livekit.plugins.silero": silero})
livekit.plugins = plugins


async def _start(self, *, room, agent, **kwargs):
    stream = self.stt.stream()
    for offset in range(0, len(SPEECH) - FRAME + 1, FRAME):  # whole 20 ms frames
        stream.push_frame(rtc.AudioFrame(SPEECH[offset:offset + FRAME], 16000, 1, FRAME // 2))
    stream.flush()
    stream.end_input()
    finals = [event.alternatives[0].text async for event in stream
              if event.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT]
    await stream.aclose()
    print("LIVEKIT HEARD", finals, flush=True)
    frames = [audio.frame async for audio in self.tts.synthesize("Hello there, how can I help?")]
    await self.tts.aclose()
    print("LIVEKIT SPOKE", len(frames), frames[0].sample_rate, flush=True)


class _Context:
    room = object()

    async def connect(self):
        pass


def _run_app(options):
    asyncio.run(options.entrypoint_fnc(_Context()))


AgentSession.start = _start
agents.cli.run_app = _run_app
"""


def example_blocks() -> list[str]:
    text = (ROOT / "docs" / "frameworks.md").read_text()
    section = text.split("## Example bots\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, flags=re.S | re.M)


def run_block(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(STAND_INS)
    script = tmp_path / "bot.py"
    script.write_text(code.replace('"<Cartesia voice id>"', '"local-voice"'))
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
        "BOT_RECORDING": str(RECORDING),
    }
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )


@pytest.fixture
def local_env(client_env, monkeypatch):
    """The standard variables for the front door (the blocks name no URL): Voxtral's and Sonic's
    runtime URL."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", client_env.url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", client_env.url)
    return client_env


def test_the_section_has_the_three_blocks():
    blocks = example_blocks()
    assert len(blocks) == 3
    assert (
        "VoxtralTarget(url=" in blocks[0]
        and "LocalAudioTransport" in blocks[1]
        and "AgentSession" in blocks[2]
    )
    assert f'endpoint_name="{VOXTRAL}"' in blocks[1] and f'SonicTarget("{SONIC}"' in blocks[1]


def test_the_targets_block_runs(local_env, tmp_path):
    done = run_block(example_blocks()[0], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_pipecat_bot_hears_and_answers(local_env, tmp_path):
    done = run_block(example_blocks()[1], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    heard = re.search(r"^LLM HEARD (.*)$", done.stdout, flags=re.M)
    assert heard and heard.group(1).startswith(
        "".join(DELTAS).strip()
    )  # the final transcript reached the LLM
    assert (
        "BOT SPOKE 24000" in done.stdout
    )  # Sonic's audio reached the output at the pipeline's rate


def test_the_livekit_agent_hears_and_speaks(local_env, tmp_path):
    done = run_block(example_blocks()[2], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    heard = re.search(r"^LIVEKIT HEARD \['(.*)'\]$", done.stdout, flags=re.M)
    assert heard and heard.group(1).startswith("".join(DELTAS).strip())
    assert re.search(r"^LIVEKIT SPOKE [1-9][0-9]* 24000$", done.stdout, flags=re.M)
