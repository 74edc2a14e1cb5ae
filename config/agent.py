"""``agent.*``: the voice agent (docs/agent.md), the ``<prefix>-Agent`` stack: a Pipecat bot on
ECS Fargate, from Voxtral speech to text through an LLM to Sonic speech. Its sizing fields are
those of :class:`AgentSizing`, whose defaults they take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.context import setting
from config.section import Section
from constructs_lib.agent.props import AgentSizing, check_llm_model_id, check_llm_url
from constructs_lib.ecs_service.props import check_certificate_arn
from contracts.agent_env import DEFAULT_LANGUAGE
from contracts.sonic import SONIC_LANGUAGES

if TYPE_CHECKING:
    from config.settings import Settings

#: The agent's default LLM: Claude Haiku 4.5 through the US system inference profile (Bedrock user
#: guide, "Supported foundation models": anthropic.claude-haiku-4-5-20251001-v1:0, streaming; it is
#: served through inference profiles). Another geography: agent.llm_model_id=eu.<model id> etc.
DEFAULT_LLM_MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful voice assistant. Answer in short, plain spoken sentences."
)
#: The Cartesia voice Cartesia's own API examples use (docs/deploy.md).
DEFAULT_VOICE = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"


@dataclass(frozen=True)
class AgentSettings(Section):
    """The voice agent (docs/agent.md): a Pipecat bot on ECS Fargate behind a load balancer, from
    Voxtral speech to text through an LLM to Sonic speech: the ``<prefix>-Agent`` stack."""

    #: Deploy the <prefix>-Agent stack (needs voxtral.enabled and sonic.enabled, Sonic on
    #: SageMaker).
    enabled: bool = False
    #: Bedrock model id or system inference profile id the bot calls with ConverseStream (Bedrock
    #: user guide, "Supported foundation models"; a 'us.' profile from us-* regions only, 'eu.' from
    #: eu-*, 'global.' from any); null with llm_url.
    llm_model_id: str | None = DEFAULT_LLM_MODEL_ID
    #: An OpenAI-compatible server's base URL instead of Bedrock (then llm_model_id must be null).
    llm_url: str | None = None
    #: The LLM's system prompt.
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    #: Cartesia voice id Sonic speaks with (docs/deploy.md, "Cartesia voice id").
    voice: str = DEFAULT_VOICE
    #: Language of the conversation (a Sonic language code such as en, de, fr-FR).
    language: str = DEFAULT_LANGUAGE
    #: What the bot says when a session starts; null (or empty) = it says nothing and waits for the
    #: caller.
    greeting: str | None = "Hello! How can I help you today?"
    #: Sessions one task takes at once; scaling holds 70 % of it per task.
    max_sessions_per_task: int = setting(default_from=AgentSizing)
    #: Longest session, seconds (60-14400); the task is protected from scale-in while one is live.
    max_session_s: int = setting(default_from=AgentSizing)
    #: A session with no speech either way for this many seconds ends (the load balancer's idle
    #: timeout is 10 s longer).
    idle_s: int = setting(default_from=AgentSizing)
    #: ACM certificate for an HTTPS listener (wss://); required with internet_facing.
    certificate_arn: str | None = None
    #: An internet-facing load balancer (public mode only, needs certificate_arn); default internal.
    internet_facing: bool = False
    #: Fargate task CPU units (1024 = 1 vCPU).
    cpu: int = setting(default_from=AgentSizing)
    #: Fargate task memory, MiB (a value Fargate pairs with cpu).
    memory_mib: int = setting(default_from=AgentSizing)
    #: Task minimum (these always run).
    min_tasks: int = setting(default_from=AgentSizing)
    #: Task maximum.
    max_tasks: int = setting(default_from=AgentSizing)
    #: Alarm when the p95 of voice-to-voice latency (end of speech to first answer audio) is above
    #: this many milliseconds for 3 of 5 minutes.
    alarm_voice_to_voice_p95_ms: float = 1500.0

    def sizing(self) -> AgentSizing:
        return self.props(AgentSizing)

    def problems(self, settings: Settings) -> list[str]:
        if not self.enabled:
            return []
        p = self.problems_named("agent.")
        if not settings.voxtral.enabled or not settings.sonic.enabled:
            endpoints = (("voxtral", settings.voxtral), ("sonic", settings.sonic))
            off = [f"{name}.enabled=false" for name, section in endpoints if not section.enabled]
            p.note(
                f"agent.enabled=true needs voxtral.enabled=true and sonic.enabled=true (the bot "
                f"listens with Voxtral and speaks with Sonic); found {' and '.join(off)}"
            )
        if settings.sonic.enabled and settings.sonic.target != "sagemaker":
            p.note(
                "agent.enabled=true needs sonic.target='sagemaker': the bot streams speech from "
                "the Sonic endpoint (InvokeEndpointWithResponseStream); Sonic on ECS is not "
                "supported yet"
            )
        if (self.llm_model_id is None) == (self.llm_url is None):
            p.add(
                "llm_url",
                self.llm_url,
                "set exactly one of agent.llm_model_id (Bedrock) and agent.llm_url "
                "(OpenAI-compatible; then agent.llm_model_id=null)",
            )
        if self.llm_model_id is not None:
            check_llm_model_id(p, "llm_model_id", self.llm_model_id, settings.region)
        if self.llm_url is not None:
            check_llm_url(p, "llm_url", self.llm_url)
        for name in ("system_prompt", "voice", "language"):
            if not getattr(self, name).strip():
                p.add(name, getattr(self, name), "must not be empty")
        if self.language.strip() and self.language not in SONIC_LANGUAGES:
            p.add(
                "language",
                self.language,
                f"must be a language Sonic speaks: {', '.join(sorted(SONIC_LANGUAGES))}",
            )
        self.sizing().problems(p)
        if self.certificate_arn is not None:
            check_certificate_arn(p, "certificate_arn", self.certificate_arn, settings.region)
        if self.internet_facing and self.certificate_arn is None:
            p.add(
                "certificate_arn",
                None,
                "must be set with agent.internet_facing=true: an "
                "internet-facing load balancer listens on HTTPS only",
            )
        if self.internet_facing and settings.network.private:
            p.add(
                "internet_facing",
                True,
                "must be false with network.mode='vpc': the private "
                "network has no internet gateway",
            )
        network = settings.network
        if network.private and network.vpc_id is None and not network.create_endpoints:
            p.note(
                "agent.enabled=true with network.mode=vpc, no network.vpc_id and "
                "network.create_endpoints=false leaves the agent no way to Bedrock, CloudWatch "
                "Logs and ECR: the VPC this app makes has no route to the internet; keep "
                "network.create_endpoints=true"
            )
        if not self.alarm_voice_to_voice_p95_ms > 0:
            p.add(
                "alarm_voice_to_voice_p95_ms",
                self.alarm_voice_to_voice_p95_ms,
                "must be a positive number of milliseconds",
            )
        return list(p)
