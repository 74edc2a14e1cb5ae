"""AgentStack: the voice agent (``agent.enabled``): a Pipecat bot on ECS Fargate behind a load
balancer that listens with Voxtral, thinks with an LLM on Bedrock (or an OpenAI-compatible server)
and speaks with Sonic (constructs_lib/agent/service.py). Composition only."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, aws_ec2 as ec2, aws_sns as sns
from constructs import Construct

from config.settings import Settings
from constructs_lib.agent.service import (
    VoiceAgentService,
    VoiceAgentServiceProps,
    metric_dimensions,
)
from contracts.agent_env import AgentEnv
from stacks.composition import Foundation, ecs_vpc

REPO_DIR = __file__.rsplit("/stacks/", 1)[0]


class AgentStack(Stack):
    """The voice agent's service, in the private network (network.mode=vpc) or a VPC of its own.

    ``voxtral_url``/``token_secret_arn``/``token_secret_kms_key_arn``: the Voxtral ECS target's
    URL, bearer token secret and its key (voxtral.target=ecs); else the Voxtral endpoint's name.
    ``vpc``: the Voxtral service's VPC in public mode (its load balancer is internal, so the agent
    runs beside it); None: the private network, or a VPC of the stack's own.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        foundation: Foundation,
        alarm_topic: sns.ITopic,
        voxtral_url: str | None = None,
        token_secret_arn: str | None = None,
        token_secret_kms_key_arn: str | None = None,
        vpc: ec2.IVpc | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        agent, voxtral = settings.agent, settings.voxtral
        sizing = agent.sizing()
        env = AgentEnv(
            voxtral_endpoint=None if voxtral_url else voxtral.endpoint_name,
            voxtral_url=voxtral_url,
            voxtral_token_secret_arn=token_secret_arn if voxtral_url else None,
            sonic_endpoint=settings.sonic.endpoint_name,
            sonic_voice=agent.voice,
            language=agent.language,
            llm_model_id=agent.llm_model_id,
            llm_url=agent.llm_url,
            system_prompt=agent.system_prompt,
            greeting=agent.greeting or "",  # AGENT_GREETING empty: no greeting
            max_sessions=sizing.max_sessions_per_task,
            max_session_s=sizing.max_session_s,
            idle_s=sizing.idle_s,
            metric_dimensions=metric_dimensions(settings.stack_name_prefix),
        )
        private = foundation.vpc is not None
        self.service = VoiceAgentService(
            self,
            "Service",
            VoiceAgentServiceProps(
                env=env,
                sizing=sizing,
                image_directory=REPO_DIR,
                vpc=foundation.vpc or vpc or ecs_vpc(self, settings),
                subnets=foundation.private_subnets,
                private=private,
                vpc_cidr=settings.network.network_props().cidr if private else None,
                caller_cidrs=foundation.caller_cidrs,
                internet_facing=agent.internet_facing,
                certificate_arn=agent.certificate_arn,
                voxtral_url_port=(443 if settings.ecs.certificate_arn else 80)
                if voxtral_url
                else None,
                token_secret_kms_key_arn=token_secret_kms_key_arn if voxtral_url else None,
                deployment=settings.stack_name_prefix,
                alarm_voice_to_voice_p95_ms=agent.alarm_voice_to_voice_p95_ms,
                log_kms_key_arn=foundation.key_arn,
                log_retention_days=settings.log_retention_days,
                retain_data=settings.retain_data,
                alarm_topic=alarm_topic,
            ),
        )

        CfnOutput(
            self,
            "AgentUrl",
            value=self.service.url,
            description="WebSocket URL of the voice agent (one session per connection)",
        )
        CfnOutput(
            self,
            "HealthUrl",
            value=self.service.health_url,
            description="GET returns 200 when a task can take a session",
        )
        CfnOutput(
            self, "ClusterName", value=self.service.cluster.cluster_name, description="ECS cluster"
        )
