"""contracts/agent_env.py: the bot's environment read, written back, and refused with every bad
variable named."""

from __future__ import annotations

import pytest

from contracts.agent_env import DEFAULT_MAX_SESSIONS, DEFAULT_SYSTEM_PROMPT, AgentEnv, AgentEnvError

MINIMAL = {
    "AGENT_SONIC_ENDPOINT": "sonic-tts",
    "AGENT_SONIC_VOICE": "voice-1",
    "AGENT_VOXTRAL_ENDPOINT": "voxtral-realtime",
    "AGENT_LLM_MODEL_ID": "amazon.nova-lite-v1:0",
}


def test_minimal_environment_takes_the_defaults() -> None:
    env = AgentEnv.from_env(MINIMAL)
    assert env.sonic_endpoint == "sonic-tts"
    assert env.voxtral_endpoint == "voxtral-realtime"
    assert env.voxtral_url is None
    assert env.max_sessions == DEFAULT_MAX_SESSIONS == 4
    assert env.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert env.greeting == ""
    assert env.port == 8080
    assert env.metric_dimensions == {}


def test_round_trip_through_to_env() -> None:
    env = AgentEnv(
        sonic_endpoint="sonic",
        sonic_voice="v",
        voxtral_url="wss://lb.example/x",
        voxtral_token_secret_arn="arn:aws:secretsmanager:us-east-1:123456789012:secret:tok-AbCd",
        llm_url="http://127.0.0.1:9000/v1",
        llm_model_id="local",
        greeting="Hi there.",
        max_sessions=2,
        max_session_s=120.5,
        idle_s=30,
        metric_dimensions={"Deployment": "prod"},
        region="eu-west-1",
        bedrock_runtime_url="http://127.0.0.1:8095",
        port=9001,
    )
    written = env.to_env()
    assert written["METRIC_DIMENSIONS"] == '{"Deployment": "prod"}'
    assert written["AGENT_IDLE_S"] == "30"
    assert written["AGENT_MAX_SESSION_S"] == "120.5"
    assert "AGENT_VOXTRAL_ENDPOINT" not in written
    assert AgentEnv.from_env(written) == env


def test_empty_variables_count_as_unset() -> None:
    env = AgentEnv.from_env({**MINIMAL, "AGENT_SYSTEM_PROMPT": "  ", "AGENT_LLM_URL": ""})
    assert env.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert env.llm_url is None


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(AgentEnvError) as caught:
        AgentEnv.from_env(
            {
                "AGENT_VOXTRAL_URL": "https://not-a-websocket",
                "AGENT_VOXTRAL_ENDPOINT": "x",
                "AGENT_MAX_SESSIONS": "four",
                "AGENT_IDLE_S": "-1",
                "METRIC_DIMENSIONS": '["Deployment"]',
            }
        )
    message = str(caught.value)
    assert "AGENT_SONIC_ENDPOINT is required" in message
    assert "AGENT_SONIC_VOICE is required" in message
    assert "AGENT_MAX_SESSIONS='four' is not an integer" in message
    assert "METRIC_DIMENSIONS must be a JSON object" in message
    assert "AGENT_IDLE_S=-1.0 must be a number of seconds above 0" in message
    assert "set exactly one of AGENT_VOXTRAL_ENDPOINT" in message
    assert "AGENT_VOXTRAL_URL='https://not-a-websocket' is not a WebSocket URL" in message
    assert "set AGENT_LLM_MODEL_ID" in message


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("AGENT_SONIC_ENDPOINT", "bad_name", "is not a SageMaker endpoint name"),
        ("METRIC_DIMENSIONS", '{"Deployment": 3}', "must be a non-empty string"),
        ("METRIC_DIMENSIONS", "{not json", "METRIC_DIMENSIONS is not JSON"),
        ("AGENT_LANGUAGE", "english", "is not a language code"),
        ("AGENT_LLM_URL", "ftp://x", "is not an http(s) URL"),
        (
            "AGENT_VOXTRAL_TOKEN_SECRET_ARN",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:t",
            "goes with AGENT_VOXTRAL_URL",
        ),
        ("AGENT_PORT", "70000", "must be 0 to 65535"),
    ],
)
def test_bad_values_are_refused_with_their_variable(
    variable: str, value: str, expected: str
) -> None:
    with pytest.raises(AgentEnvError, match=variable) as caught:
        AgentEnv.from_env({**MINIMAL, variable: value})
    assert expected in str(caught.value)


def test_the_dataclass_is_frozen() -> None:
    env = AgentEnv.from_env(MINIMAL)
    with pytest.raises(AttributeError):
        env.max_sessions = 9  # type: ignore[misc]
