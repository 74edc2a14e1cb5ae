"""The voice agent's environment: every variable the bot (``agent/``) reads, with its type, default
and check, in one place.

The agent's stack builds an :class:`AgentEnv` and writes it into the task definition
(:meth:`AgentEnv.to_env`); the bot reads it back (:meth:`AgentEnv.from_env`), refusing bad values
with one message that names every variable that is wrong and what is allowed. ``make local AGENT=1``
starts the bot with its own the same way.

Standard library only and self-contained (no import of the project), so that the bot's image and the
stacks both ship it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

#: Port the bot listens on (GET /health and the WebSocket).
DEFAULT_PORT: Final = 8080
#: Address the bot binds: every interface in its container (the load balancer reaches it there).
DEFAULT_HOST: Final = "0.0.0.0"  # a container's port, published by its task definition
#: Sessions one bot runs at once. Cartesia's Sonic container runs at most 4 generations at a time
#: (its SageMaker listing, "Error Handling": a fifth is answered 429), and each session speaks one
#: sentence at a time.
DEFAULT_MAX_SESSIONS: Final = 4
#: Seconds a session may last before the bot ends it (a quarter of an hour: a long support call).
DEFAULT_MAX_SESSION_S: Final = 900.0
#: Seconds without any audio from the page before the bot ends the session (the page sends audio
#: continuously while its microphone is open, silence included).
DEFAULT_IDLE_S: Final = 60.0
#: The language Sonic speaks and the transcripts are labelled with.
DEFAULT_LANGUAGE: Final = "en"
#: The LLM's instructions when AGENT_SYSTEM_PROMPT is unset: short spoken answers, no markup read
#: aloud.
DEFAULT_SYSTEM_PROMPT: Final = (
    "You are a helpful voice assistant. Your answers are spoken aloud: answer in one to three "
    "short sentences, in plain words, without lists, markdown or emoji."
)
#: Longest system prompt or greeting accepted, characters (a page of text; a longer one is likely a
#: mistake).
MAX_TEXT_CHARS: Final = 8000
#: SageMaker endpoint names: 1-63 characters, letters, digits and hyphens, not starting or ending
#: with a hyphen (SageMaker API Reference, CreateEndpoint, EndpointName pattern).
ENDPOINT_NAME_PATTERN: Final = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: A Secrets Manager secret ARN (arn:<partition>:secretsmanager:<region>:<account>:secret:<name>).
SECRET_ARN_PATTERN: Final = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+$"
)
#: ExpiresInMinutes of each ECS task scale-in protection request when TASK_PROTECTION_MINUTES is
#: unset (the bridge's default); the agent's stack sets one whole session plus a minute.
DEFAULT_TASK_PROTECTION_MINUTES: Final = 10
#: ExpiresInMinutes range (ECS developer guide, "Amazon ECS task scale-in protection endpoint").
TASK_PROTECTION_MINUTES_RANGE: Final = (1, 2880)
#: CloudWatch embedded metric format: at most 30 dimensions per dimension set (CloudWatch User
#: Guide, "Specification: Embedded metric format", DimensionSet); names and values are non-empty
#: strings of at most 255 characters.
MAX_DIMENSIONS: Final = 30
MAX_DIMENSION_CHARS: Final = 255


#: How the AWS CDK writes a value it resolves only at deploy time into a string (``${Token[...]}``):
#: at synth the stack passes endpoint names and ARNs as such tokens; the bot's
#: :meth:`AgentEnv.from_env` sees the real values.
_CDK_TOKEN_MARK: Final = "${Token["


def _known(value: str) -> bool:
    """Whether ``value`` is the value itself, not a CDK token standing for one (checked later, in
    the task)."""
    return _CDK_TOKEN_MARK not in value


class AgentEnvError(ValueError):
    """The environment is not a usable agent configuration; the message names each bad variable."""


@dataclass(frozen=True)
class AgentEnv:
    """The bot's configuration.

    Attributes:
        sonic_endpoint: AGENT_SONIC_ENDPOINT, the Sonic SageMaker endpoint name (required).
        sonic_voice: AGENT_SONIC_VOICE, the Cartesia voice ID (required).
        voxtral_endpoint: AGENT_VOXTRAL_ENDPOINT, the Voxtral SageMaker endpoint name; or
        voxtral_url: AGENT_VOXTRAL_URL, the ECS target's
            ``wss://.../invocations-bidirectional-stream``, with
        voxtral_token_secret_arn: AGENT_VOXTRAL_TOKEN_SECRET_ARN, the secret holding its bearer
            token (optional: a local bridge takes none).
        llm_model_id: AGENT_LLM_MODEL_ID, the Bedrock model or inference profile ID
            (ConverseStream); with ``llm_url``, the model name sent to that server.
        llm_url: AGENT_LLM_URL, an OpenAI-compatible ``/v1`` base URL used instead of Bedrock.
        language: AGENT_LANGUAGE, a language code Sonic speaks.
        system_prompt: AGENT_SYSTEM_PROMPT, the LLM's instructions.
        greeting: AGENT_GREETING, what the agent says when a session starts ("" for nothing).
        max_sessions: AGENT_MAX_SESSIONS, sessions at once; more are refused (HTTP 503).
        max_session_s: AGENT_MAX_SESSION_S, seconds a session may last.
        idle_s: AGENT_IDLE_S, seconds without audio from the page before the session ends.
        metric_dimensions: METRIC_DIMENSIONS, a JSON object of string values (e.g. ``{"Deployment":
            "prod"}``), the dimensions of the bot's CloudWatch metrics.
        region: AWS_REGION.
        sagemaker_runtime_url: AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME, Sonic's runtime URL (a VPC
            endpoint, a local runtime); None = the Region's.
        sagemaker_runtime_http2_url: AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, Voxtral's
            bidirectional runtime URL.
        bedrock_runtime_url: AWS_ENDPOINT_URL_BEDROCK_RUNTIME, Bedrock's runtime URL (the local
            stand-in).
        host: AGENT_HOST, the address to bind.
        port: AGENT_PORT, the port to listen on.
        ecs_agent_uri: ECS_AGENT_URI, set by ECS in every container of a task: the bot protects
            its task from scale-in while a session is live; None off ECS.
        task_protection_minutes: TASK_PROTECTION_MINUTES, ExpiresInMinutes of each protection
            request (None: :data:`DEFAULT_TASK_PROTECTION_MINUTES`).
    """

    sonic_endpoint: str
    sonic_voice: str
    voxtral_endpoint: str | None = None
    voxtral_url: str | None = None
    voxtral_token_secret_arn: str | None = None
    llm_model_id: str | None = None
    llm_url: str | None = None
    language: str = DEFAULT_LANGUAGE
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    greeting: str = ""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_session_s: float = DEFAULT_MAX_SESSION_S
    idle_s: float = DEFAULT_IDLE_S
    metric_dimensions: Mapping[str, str] = field(default_factory=dict)
    region: str | None = None
    sagemaker_runtime_url: str | None = None
    sagemaker_runtime_http2_url: str | None = None
    bedrock_runtime_url: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    ecs_agent_uri: str | None = None
    task_protection_minutes: int | None = None

    @property
    def protection_minutes(self) -> int:
        """ExpiresInMinutes of each task protection request."""
        return self.task_protection_minutes or DEFAULT_TASK_PROTECTION_MINUTES

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise AgentEnvError("the agent's configuration is not usable: " + "; ".join(problems))
        object.__setattr__(self, "metric_dimensions", dict(self.metric_dimensions))

    def problems(self) -> list[str]:
        """Every problem of this configuration, each naming its variable and what is allowed."""
        problems = []
        for variable, value in (
            ("AGENT_SONIC_ENDPOINT", self.sonic_endpoint),
            ("AGENT_VOXTRAL_ENDPOINT", self.voxtral_endpoint),
        ):
            if value is not None and _known(value) and not ENDPOINT_NAME_PATTERN.match(value):
                problems.append(
                    f"{variable}={value!r} is not a SageMaker endpoint name (1-63 letters, "
                    "digits and hyphens)"
                )
        if not self.sonic_voice.strip():
            problems.append("AGENT_SONIC_VOICE is required: a Cartesia voice ID")
        if (self.voxtral_endpoint is None) == (self.voxtral_url is None):
            problems.append(
                "set exactly one of AGENT_VOXTRAL_ENDPOINT (a SageMaker endpoint name) and "
                "AGENT_VOXTRAL_URL (the ECS target's wss:// URL)"
            )
        if self.voxtral_url is not None and not self.voxtral_url.startswith(("ws://", "wss://")):
            problems.append(
                f"AGENT_VOXTRAL_URL={self.voxtral_url!r} is not a WebSocket URL; use "
                "wss://HOST/invocations-bidirectional-stream"
            )
        if self.voxtral_token_secret_arn is not None:
            if self.voxtral_url is None:
                problems.append(
                    "AGENT_VOXTRAL_TOKEN_SECRET_ARN goes with AGENT_VOXTRAL_URL (the ECS target)"
                )
            if _known(self.voxtral_token_secret_arn) and not SECRET_ARN_PATTERN.match(
                self.voxtral_token_secret_arn
            ):
                problems.append(
                    f"AGENT_VOXTRAL_TOKEN_SECRET_ARN={self.voxtral_token_secret_arn!r} is not a "
                    "Secrets Manager secret ARN"
                )
        if self.llm_url is None and not self.llm_model_id:
            problems.append(
                "set AGENT_LLM_MODEL_ID (a Bedrock model or inference profile ID) or AGENT_LLM_URL "
                "(an OpenAI-compatible base URL)"
            )
        if self.llm_url is not None and not self.llm_url.startswith(("http://", "https://")):
            problems.append(f"AGENT_LLM_URL={self.llm_url!r} is not an http(s) URL")
        if not self.language or not re.match(r"^[a-z]{2}(-[A-Z]{2})?$", self.language):
            problems.append(
                f"AGENT_LANGUAGE={self.language!r} is not a language code such as en or pt-BR"
            )
        for variable, text in (
            ("AGENT_SYSTEM_PROMPT", self.system_prompt),
            ("AGENT_GREETING", self.greeting),
        ):
            if len(text) > MAX_TEXT_CHARS:
                problems.append(f"{variable} has {len(text)} characters; at most {MAX_TEXT_CHARS}")
        if not self.system_prompt.strip():
            problems.append("AGENT_SYSTEM_PROMPT is empty; unset it for the default")
        if self.max_sessions < 1:
            problems.append(f"AGENT_MAX_SESSIONS={self.max_sessions} must be at least 1")
        for variable, seconds in (
            ("AGENT_MAX_SESSION_S", self.max_session_s),
            ("AGENT_IDLE_S", self.idle_s),
        ):
            if not math.isfinite(seconds) or seconds <= 0:
                problems.append(f"{variable}={seconds} must be a number of seconds above 0")
        problems += _dimension_problems(self.metric_dimensions)
        low, high = TASK_PROTECTION_MINUTES_RANGE
        if self.task_protection_minutes is not None and not (
            low <= self.task_protection_minutes <= high
        ):
            problems.append(
                f"TASK_PROTECTION_MINUTES={self.task_protection_minutes} must be "
                f"{low} to {high} (ECS task scale-in protection)"
            )
        if self.ecs_agent_uri is not None and not self.ecs_agent_uri.startswith(
            ("http://", "https://")
        ):
            problems.append(f"ECS_AGENT_URI={self.ecs_agent_uri!r} is not an http(s) URL")
        if not 0 <= self.port <= 65535:
            problems.append(f"AGENT_PORT={self.port} must be 0 to 65535")
        for variable, url in (
            ("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", self.sagemaker_runtime_url),
            ("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", self.sagemaker_runtime_http2_url),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", self.bedrock_runtime_url),
        ):
            if url is not None and not url.startswith(("http://", "https://")):
                problems.append(f"{variable}={url!r} is not an http(s) URL")
        return problems

    def to_env(self) -> dict[str, str]:
        """The variables that say this configuration (unset fields left out); :meth:`from_env` reads
        them back."""
        values: dict[str, object] = {
            "AGENT_SONIC_ENDPOINT": self.sonic_endpoint,
            "AGENT_SONIC_VOICE": self.sonic_voice,
            "AGENT_VOXTRAL_ENDPOINT": self.voxtral_endpoint,
            "AGENT_VOXTRAL_URL": self.voxtral_url,
            "AGENT_VOXTRAL_TOKEN_SECRET_ARN": self.voxtral_token_secret_arn,
            "AGENT_LLM_MODEL_ID": self.llm_model_id,
            "AGENT_LLM_URL": self.llm_url,
            "AGENT_LANGUAGE": self.language,
            "AGENT_SYSTEM_PROMPT": self.system_prompt,
            "AGENT_GREETING": self.greeting,
            "AGENT_MAX_SESSIONS": self.max_sessions,
            "AGENT_MAX_SESSION_S": self.max_session_s,
            "AGENT_IDLE_S": self.idle_s,
            "METRIC_DIMENSIONS": json.dumps(dict(self.metric_dimensions), sort_keys=True),
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": self.sagemaker_runtime_url,
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": self.sagemaker_runtime_http2_url,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock_runtime_url,
            "AGENT_HOST": self.host,
            "AGENT_PORT": self.port,
            "TASK_PROTECTION_MINUTES": self.task_protection_minutes,
        }
        return {name: _text(value) for name, value in values.items() if value is not None}

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> AgentEnv:
        """Read the configuration from ``environ`` (``os.environ``); an empty variable counts as
        unset.

        Raises:
            AgentEnvError: naming every variable that is missing or wrong, and what is allowed.
        """

        def get(name: str) -> str | None:
            value = environ.get(name, "").strip()
            return value or None

        problems: list[str] = []

        def number(name: str, kind: type, default: float) -> float:
            value = get(name)
            if value is None:
                return default
            try:
                return kind(value)
            except ValueError:
                problems.append(
                    f"{name}={value!r} is not {'an integer' if kind is int else 'a number'}"
                )
                return default

        dimensions: dict[str, str] = {}
        raw = get("METRIC_DIMENSIONS")
        if raw is not None:
            try:
                parsed = json.loads(raw)
            except ValueError as error:
                problems.append(
                    f"METRIC_DIMENSIONS is not JSON ({error}); use an object such as "
                    '{"Deployment": "prod"}'
                )
            else:
                if isinstance(parsed, dict):
                    dimensions = parsed
                else:
                    problems.append(
                        'METRIC_DIMENSIONS must be a JSON object such as {"Deployment": "prod"}'
                    )
        for required in ("AGENT_SONIC_ENDPOINT", "AGENT_SONIC_VOICE"):
            if get(required) is None:
                problems.append(
                    f"{required} is required"
                    + (
                        " (the Sonic SageMaker endpoint name)"
                        if required.endswith("ENDPOINT")
                        else " (a Cartesia voice ID)"
                    )
                )
        values = {
            "voxtral_endpoint": get("AGENT_VOXTRAL_ENDPOINT"),
            "voxtral_url": get("AGENT_VOXTRAL_URL"),
            "voxtral_token_secret_arn": get("AGENT_VOXTRAL_TOKEN_SECRET_ARN"),
            "llm_model_id": get("AGENT_LLM_MODEL_ID"),
            "llm_url": get("AGENT_LLM_URL"),
            "language": get("AGENT_LANGUAGE") or DEFAULT_LANGUAGE,
            "system_prompt": get("AGENT_SYSTEM_PROMPT") or DEFAULT_SYSTEM_PROMPT,
            "greeting": environ.get("AGENT_GREETING", "").strip(),
            "max_sessions": int(number("AGENT_MAX_SESSIONS", int, DEFAULT_MAX_SESSIONS)),
            "max_session_s": number("AGENT_MAX_SESSION_S", float, DEFAULT_MAX_SESSION_S),
            "idle_s": number("AGENT_IDLE_S", float, DEFAULT_IDLE_S),
            "metric_dimensions": dimensions,
            "region": get("AWS_REGION") or get("AWS_DEFAULT_REGION"),
            "sagemaker_runtime_url": get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"),
            "sagemaker_runtime_http2_url": get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"),
            "bedrock_runtime_url": get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME"),
            "host": get("AGENT_HOST") or DEFAULT_HOST,
            "port": int(number("AGENT_PORT", int, DEFAULT_PORT)),
            "ecs_agent_uri": get("ECS_AGENT_URI"),
            "task_protection_minutes": (
                int(number("TASK_PROTECTION_MINUTES", int, 0))
                if get("TASK_PROTECTION_MINUTES")
                else None
            ),
        }
        sonic_endpoint, sonic_voice = (
            get("AGENT_SONIC_ENDPOINT") or "",
            get("AGENT_SONIC_VOICE") or "",
        )
        try:
            env = cls(
                sonic_endpoint=sonic_endpoint or "missing",
                sonic_voice=sonic_voice or "missing",
                **values,
            )  # type: ignore[arg-type]
        except AgentEnvError as error:
            problems += str(error).split(": ", 1)[1].split("; ")
            env = None
        if problems:
            raise AgentEnvError("the agent's configuration is not usable: " + "; ".join(problems))
        assert env is not None
        return cls(**{**env.__dict__, "sonic_endpoint": sonic_endpoint, "sonic_voice": sonic_voice})


def _dimension_problems(dimensions: Mapping[str, object]) -> list[str]:
    problems = []
    if len(dimensions) > MAX_DIMENSIONS:
        problems.append(
            f"METRIC_DIMENSIONS has {len(dimensions)} dimensions; CloudWatch takes at most "
            f"{MAX_DIMENSIONS}"
        )
    for name, value in dimensions.items():
        if not isinstance(value, str) or not value or len(value) > MAX_DIMENSION_CHARS:
            problems.append(
                f"METRIC_DIMENSIONS[{name!r}] must be a non-empty string of at most "
                f"{MAX_DIMENSION_CHARS} characters, got {value!r}"
            )
        if not name or len(name) > MAX_DIMENSION_CHARS or name.startswith(":"):
            problems.append(
                f"METRIC_DIMENSIONS name {name!r} must be 1-{MAX_DIMENSION_CHARS} characters, not "
                "starting with ':'"
            )
    return problems


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
