"""contracts/agent_env.py: the voice agent's environment, written by the Agent stack and read by the
bot."""

from __future__ import annotations

import json

import pytest

from contracts.agent_env import VARIABLES, AgentEnv

BASE = {"sonic_endpoint": "sonic-tts", "sonic_voice": "v", "language": "en",
        "system_prompt": "Be brief.", "greeting": "Hello.", "max_sessions": 4,
        "max_session_s": 900, "idle_s": 30}
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:t"


def test_what_is_written_reads_back_and_unset_fields_are_left_out():
    env = AgentEnv(**BASE, voxtral_url="wss://stt/invocations-bidirectional-stream",
                   voxtral_token_secret_arn=SECRET, llm_model_id="amazon.nova-lite-v1:0",
                   metric_dimensions={"Service": "agent"})
    written = env.to_env()
    assert written["AGENT_MAX_SESSIONS"] == "4"
    assert json.loads(written["METRIC_DIMENSIONS"]) == {"Service": "agent"}
    assert "AGENT_VOXTRAL_ENDPOINT" not in written and "AGENT_LLM_URL" not in written
    assert set(written) <= set(VARIABLES.values())
    assert AgentEnv.from_env(written) == env


@pytest.mark.parametrize(("env", "message"), [
    ({"voxtral_endpoint": "stt", "voxtral_url": "wss://stt", "llm_url": "http://llm"},
     "exactly one of AGENT_VOXTRAL_ENDPOINT and AGENT_VOXTRAL_URL is needed"),
    ({"voxtral_endpoint": "stt"}, "exactly one of AGENT_LLM_MODEL_ID and AGENT_LLM_URL is needed"),
])
def test_exactly_one_speech_to_text_and_one_llm(env, message):
    with pytest.raises(ValueError, match=message):
        AgentEnv(**BASE, **env)


def test_a_missing_or_mistyped_variable_is_named():
    written = AgentEnv(**BASE, voxtral_endpoint="stt", llm_url="http://llm").to_env()
    with pytest.raises(ValueError, match="AGENT_IDLE_S='soon': must be a whole number"):
        AgentEnv.from_env({**written, "AGENT_IDLE_S": "soon"})
    with pytest.raises(ValueError, match="agent environment incomplete"):
        AgentEnv.from_env({k: v for k, v in written.items() if k != "AGENT_SONIC_VOICE"})
