"""bench/agent_turns_bench.py, the whole agent's benchmark, run as a user runs it against a bot on
loopback (the bot of test_local_agent.py: the real bridge, the fake vLLM, the Bedrock and Sonic
stand-ins): one turn gives a row with every column, the p50/p95 rows and the session's summary.
Its figures are printed, never asserted (they depend on the machine)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")

from contracts.agent_env import AgentEnv
from tests.e2e.local.agent_testkit import AgentRunner
from tests.e2e.local.conftest import REGION, SONIC, VOXTRAL
from voice_devtools.local.fake_bedrock import FakeBedrock

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "agent_turns_bench.py"
COLUMNS = [
    "turn",
    "TimeToFinalTranscript",
    "LlmFirstToken",
    "SonicFirstAudio",
    "VoiceToVoice",
    "PageVoiceToVoice",
    "BargeIn",
]


@pytest.fixture
def bot(client_env) -> Iterator[AgentRunner]:
    """The bot with a greeting, as make local AGENT=1 runs it (the bench waits for it to end)."""
    env = AgentEnv(
        sonic_endpoint=SONIC,
        sonic_voice="local-voice",
        voxtral_endpoint=VOXTRAL,
        llm_model_id="local.test-model",
        region=REGION,
        max_sessions=1,
        sagemaker_runtime_url=client_env.url,
        sagemaker_runtime_http2_url=client_env.url,
        host="127.0.0.1",
        port=0,
        greeting="Hello.",
        metric_dimensions={"Deployment": "bench"},
    )
    runner = AgentRunner(env, FakeBedrock(first_token_s=0.05, token_interval_s=0.02))
    yield runner
    runner.stop()


def test_one_turn_prints_every_column_and_the_percentiles(bot):
    done = subprocess.run(
        [sys.executable, str(BENCH), "--url", bot.url, "--turns", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"Whole voice agent at {bot.url}: 1 turn, each answer interrupted 1 s after its first audio"
    )
    header = lines.index(" ".join(f"{name:>4}" for name in COLUMNS))
    rows = {line.split()[0]: line.split()[1:] for line in lines[header + 1 : header + 4]}
    assert list(rows) == ["1", "p50", "p95"]
    # One turn: every figure measured (an integer of ms), and p50 = p95 = that turn's.
    assert all(re.fullmatch(r"-?\d+", cell) for cell in rows["1"]), rows["1"]
    assert rows["p50"] == rows["1"] == rows["p95"]
    # The second utterance interrupted the answer; the session ended before it was answered.
    assert re.fullmatch(
        r"load average at the end [\d. ]+; session [0-9a-f]{12}: answered turns 1, "
        r"interrupts 1, audio messages of a cancelled answer after its interrupt 0",
        lines[-1],
    ), lines[-1]
    assert "error event" not in done.stdout
    # The bot wrote the turn's figures as its EMF metrics, under the contract's names.
    assert any(
        '"VoiceToVoiceMs"' in line and '"Deployment":"bench"' in line for line in bot.metrics
    )
