"""The voice agent's environment: what the Agent stack sets on the task and what the bot reads.

Standard library only (the CDK app and the bot's image both import it). One field per variable;
:meth:`AgentEnv.to_env` writes them, :meth:`AgentEnv.from_env` reads them back. Speech to text is
either a SageMaker endpoint (``voxtral_endpoint``) or the ECS target's URL with its bearer token's
secret (``voxtral_url`` and ``voxtral_token_secret_arn``); the LLM is either a Bedrock model or
inference profile id (``llm_model_id``) or an OpenAI-compatible URL (``llm_url``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

#: Environment variable of each field.
VARIABLES = {
    "voxtral_endpoint": "AGENT_VOXTRAL_ENDPOINT",
    "voxtral_url": "AGENT_VOXTRAL_URL",
    "voxtral_token_secret_arn": "AGENT_VOXTRAL_TOKEN_SECRET_ARN",
    "sonic_endpoint": "AGENT_SONIC_ENDPOINT",
    "sonic_voice": "AGENT_SONIC_VOICE",
    "language": "AGENT_LANGUAGE",
    "llm_model_id": "AGENT_LLM_MODEL_ID",
    "llm_url": "AGENT_LLM_URL",
    "system_prompt": "AGENT_SYSTEM_PROMPT",
    "greeting": "AGENT_GREETING",
    "max_sessions": "AGENT_MAX_SESSIONS",
    "max_session_s": "AGENT_MAX_SESSION_S",
    "idle_s": "AGENT_IDLE_S",
    "metric_dimensions": "METRIC_DIMENSIONS",
}


@dataclass(frozen=True)
class AgentEnv:
    """The bot's settings, as the task's environment carries them (see the module docstring)."""

    sonic_endpoint: str
    sonic_voice: str
    language: str
    system_prompt: str
    greeting: str
    max_sessions: int
    max_session_s: int
    idle_s: int
    voxtral_endpoint: str | None = None
    voxtral_url: str | None = None
    voxtral_token_secret_arn: str | None = None
    llm_model_id: str | None = None
    llm_url: str | None = None
    metric_dimensions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.voxtral_endpoint is None) == (self.voxtral_url is None):
            raise ValueError(
                "exactly one of AGENT_VOXTRAL_ENDPOINT and AGENT_VOXTRAL_URL is needed")
        if (self.llm_model_id is None) == (self.llm_url is None):
            raise ValueError("exactly one of AGENT_LLM_MODEL_ID and AGENT_LLM_URL is needed")

    def to_env(self) -> dict[str, str]:
        """``{variable: value}``; fields that are None are left out."""
        env = {}
        for name, variable in VARIABLES.items():
            value = getattr(self, name)
            if value is None:
                continue
            env[variable] = json.dumps(dict(value)) if name == "metric_dimensions" else str(value)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AgentEnv:
        """Read the fields back from ``env`` (e.g. ``os.environ``).

        Raises:
            ValueError: a variable is missing or not of its field's type.
        """
        values: dict[str, object] = {}
        for name, variable in VARIABLES.items():
            raw = env.get(variable)
            if raw is None or raw == "":
                continue
            if name in ("max_sessions", "max_session_s", "idle_s"):
                try:
                    values[name] = int(raw)
                except ValueError:
                    raise ValueError(f"{variable}={raw!r}: must be a whole number") from None
            elif name == "metric_dimensions":
                values[name] = json.loads(raw)
            else:
                values[name] = raw
        try:
            return cls(**values)  # type: ignore[arg-type]
        except TypeError as error:
            raise ValueError(f"agent environment incomplete: {error}") from None
