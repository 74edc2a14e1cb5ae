"""Props of the voice agent's Fargate service (:mod:`constructs_lib.agent.service`), with their
checks and the facts they rest on. CDK-free (no ``aws_cdk`` import): the settings layer runs the
same checks.

Sources (read 2026 for this module):

* Amazon Bedrock user guide, "Supported foundation models in Amazon Bedrock" (models-supported):
  model ids such as ``anthropic.claude-haiku-4-5-20251001-v1:0`` and ``amazon.nova-lite-v1:0``;
  the Streaming column says which support ConverseStream.
* Amazon Bedrock user guide, "Supported Regions and models for inference profiles": a system
  inference profile id is the model id behind a geography prefix (``us.``, ``eu.``, ``apac.``,
  ``global.``...); a request from a source Region is routed to one of the profile's destination
  Regions, which depend on the source Region, and "the destination Regions for Global cross-Region
  inference profiles include all commercial Regions".
* Amazon Bedrock user guide, "Prerequisites for inference profiles": a role that invokes through
  a profile needs the invoke action on the profile and "also ... the foundation model in each
  Region associated with it".
* Amazon Bedrock API reference, ConverseStream: it needs ``bedrock:InvokeModelWithResponseStream``
  (Converse needs ``bedrock:InvokeModel``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from constructs_lib.connect.props import FARGATE_MEMORY_MIB
from constructs_lib.validation import Problems
from contracts import agent_env, agent_metrics

#: Port the bot listens on (GET /health and one WebSocket session per connection).
AGENT_PORT = 8080
#: The bot's health path: 200 when it can take a session.
HEALTH_PATH = "/health"

#: The bot's metrics (namespace, dimension, names, units) are defined once, in the contract the bot
#: imports too: scaling, alarms and the dashboard read these names.
#: ActiveSessions: Count, most sessions live at once in the minute, one value per task per minute
#: (target tracking reads its Average: sessions per task). SessionsFailed: Count, sessions that
#: ended on an error. VoiceToVoiceMs: Milliseconds, from the end of the caller's speech to the
#: first audio of the answer, one value per turn. SttErrors / LlmErrors / TtsErrors: Count.
METRIC_NAMESPACE = agent_metrics.NAMESPACE
METRIC_DIMENSION = agent_metrics.DIMENSION
ACTIVE_SESSIONS = agent_metrics.ACTIVE_SESSIONS
SESSIONS_FAILED = agent_metrics.SESSIONS_FAILED
VOICE_TO_VOICE_MS = agent_metrics.VOICE_TO_VOICE_MS
STAGE_ERRORS = agent_metrics.STAGE_ERRORS

#: The action a bidirectional stream to Voxtral needs (InvokeEndpointWithBidirectionalStream API
#: reference; the same constant as constructs_lib.sagemaker_endpoint.props.INVOKE_BIDIRECTIONAL).
INVOKE_BIDIRECTIONAL = "sagemaker:InvokeEndpointWithBidirectionalStream"
#: The action Sonic's streamed speech needs (InvokeEndpointWithResponseStream API reference).
INVOKE_WITH_RESPONSE_STREAM = "sagemaker:InvokeEndpointWithResponseStream"
#: ConverseStream's IAM action (Bedrock API reference, ConverseStream).
BEDROCK_STREAM = "bedrock:InvokeModelWithResponseStream"

#: A Bedrock foundation model id: ``<provider>.<model>[:<version>[:<context>]]``.
MODEL_ID_RE = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9][a-z0-9.-]*(:\d+){0,2}")
#: Geography prefix of a system inference profile -> the Region prefixes it may be called from
#: (None: any commercial Region). us-gov is checked before us.
PROFILE_GEOGRAPHIES: dict[str, tuple[str, ...] | None] = {
    "us-gov": ("us-gov-",),
    "us": ("us-",),
    "eu": ("eu-",),
    "apac": ("ap-",),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    "global": None,
}

#: The ALB's idle timeout over the bot's idle timeout: the bot, not the load balancer, ends a
#: silent session (the same margin as the bridge's: constructs_lib.ecs_service.props).
IDLE_TIMEOUT_MARGIN_S = 10
#: ALB idle timeout range (Elastic Load Balancing, "Connection idle timeout": 1-4000 s).
ALB_IDLE_TIMEOUT_RANGE_S = (1, 4000)
#: Longest stopTimeout on Fargate (ECS API reference, ContainerDefinition stopTimeout: 120 s).
FARGATE_MAX_STOP_TIMEOUT_S = 120
#: ECS task scale-in protection lasts 1-2880 minutes per request (ECS developer guide, "Amazon ECS
#: task scale-in protection endpoint"); the bot checks it again (contracts.agent_env).
TASK_PROTECTION_MINUTES_RANGE = agent_env.TASK_PROTECTION_MINUTES_RANGE
#: Longest session the settings allow, seconds: protection must outlast one (2880 min = 48 h).
MAX_SESSION_S = 4 * 3600


def split_profile(model_id: str) -> tuple[str | None, str]:
    """(geography prefix or None, foundation model id) of a Bedrock model or profile id."""
    for geography in PROFILE_GEOGRAPHIES:
        if model_id.startswith(f"{geography}."):
            return geography, model_id[len(geography) + 1 :]
    return None, model_id


def check_llm_model_id(p: Problems, prop: str, value: str, region: str | None) -> None:
    """A Bedrock foundation model id, or a system inference profile id whose geography serves
    ``region`` (a ``us.`` profile cannot be called from eu-west-1)."""
    geography, model = split_profile(value)
    if not MODEL_ID_RE.fullmatch(model):
        p.add(
            prop,
            value,
            "must be a Bedrock model id such as 'amazon.nova-lite-v1:0', or an "
            "inference profile id such as "
            "'us.anthropic.claude-haiku-4-5-20251001-v1:0' "
            "(Bedrock user guide, 'Supported foundation models')",
        )
        return
    sources = PROFILE_GEOGRAPHIES.get(geography or "", ())
    if geography is None or sources is None or region is None:
        return
    if geography == "us" and region.startswith("us-gov-"):
        sources = ()
    if not region.startswith(sources):
        fitting = [
            g
            for g, prefixes in PROFILE_GEOGRAPHIES.items()
            if prefixes is None
            or (region.startswith(prefixes) and not (g == "us" and region.startswith("us-gov-")))
        ]
        p.add(
            prop,
            value,
            f"is a '{geography}.' inference profile, which region={region!r} cannot "
            f"call; use a profile of {' or '.join(repr(g + '.') for g in fitting)} "
            f"(e.g. '{fitting[0]}.{model}') or the model id itself",
        )


def check_llm_url(p: Problems, prop: str, value: str) -> None:
    """An OpenAI-compatible base URL: http(s), a host, no query or fragment."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        p.add(
            prop,
            value,
            "must be an http(s) base URL of an OpenAI-compatible server such as "
            "'https://llm.example.internal/v1' (no query or fragment)",
        )


def alb_idle_timeout_s(idle_s: int) -> int:
    """The load balancer's idle timeout: the bot's idle timeout plus the margin."""
    return idle_s + IDLE_TIMEOUT_MARGIN_S


def task_protection_minutes(max_session_s: int) -> int:
    """ExpiresInMinutes of each protection request: one whole session plus a minute, so a live
    session is never left unprotected between renewals."""
    return math.ceil(max_session_s / 60) + 1


@dataclass(frozen=True)
class AgentSizing:
    """The task size and count of the agent's service, with its session limits.

    Attributes:
        cpu / memory_mib: Fargate task CPU units and memory (a pair Fargate accepts).
        min_tasks / max_tasks: service task range.
        max_sessions_per_task: sessions one task takes at once (the bot refuses more).
        max_session_s: longest session, seconds. idle_s: a session silent this long ends.
    """

    cpu: int = 1024
    memory_mib: int = 2048
    min_tasks: int = 1
    max_tasks: int = 4
    max_sessions_per_task: int = 10
    max_session_s: int = 1800
    idle_s: int = 60

    def problems(self, p: Problems) -> None:
        if self.cpu not in FARGATE_MEMORY_MIB:
            p.add(
                "cpu",
                self.cpu,
                "must be Fargate task CPU units, one of "
                f"{', '.join(map(str, FARGATE_MEMORY_MIB))} (1024 = 1 vCPU)",
            )
        elif self.memory_mib not in FARGATE_MEMORY_MIB[self.cpu]:
            allowed = FARGATE_MEMORY_MIB[self.cpu]
            p.add(
                "memory_mib",
                self.memory_mib,
                f"must be a memory Fargate pairs with {p.ref('cpu', self.cpu)}: "
                f"{allowed[0]}-{allowed[-1]} MiB in steps of {allowed[1] - allowed[0]}",
            )
        if self.min_tasks < 1:
            p.add(
                "min_tasks", self.min_tasks, "must be at least 1 (a session needs a running task)"
            )
        elif self.max_tasks < self.min_tasks:
            p.add(
                "max_tasks",
                self.max_tasks,
                f"must be at least {p.ref('min_tasks', self.min_tasks)}",
            )
        if self.max_sessions_per_task < 1:
            p.add("max_sessions_per_task", self.max_sessions_per_task, "must be at least 1")
        if not 60 <= self.max_session_s <= MAX_SESSION_S:
            p.add(
                "max_session_s",
                self.max_session_s,
                f"must be 60-{MAX_SESSION_S} seconds (task scale-in protection covers one session)",
            )
        _low, high = ALB_IDLE_TIMEOUT_RANGE_S
        if not 1 <= self.idle_s <= high - IDLE_TIMEOUT_MARGIN_S:
            p.add(
                "idle_s",
                self.idle_s,
                f"must be 1-{high - IDLE_TIMEOUT_MARGIN_S} seconds (the load balancer's idle "
                f"timeout, at most {high} s, is {IDLE_TIMEOUT_MARGIN_S} s longer)",
            )
        elif self.idle_s >= self.max_session_s:
            p.add(
                "idle_s",
                self.idle_s,
                f"must be less than {p.ref('max_session_s', self.max_session_s)}",
            )

    @property
    def scaling_target(self) -> float:
        """Live sessions per task target tracking holds: 70 % of a task's sessions (the headroom
        takes the sessions that arrive while a new task starts, about a minute on Fargate)."""
        return round(self.max_sessions_per_task * SCALING_TARGET_FRACTION, 1)


#: Share of a task's sessions target tracking fills before adding a task.
SCALING_TARGET_FRACTION = 0.7
