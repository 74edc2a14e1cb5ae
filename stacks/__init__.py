"""Stacks of the app, one module each, each a :class:`~aws_cdk.Stack` that composes constructs (no
stack inherits from another); what they share is in :mod:`stacks.composition`. :func:`build_app`
composes them from validated settings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import App, Environment, Stack, Tags

from config.models import BRIDGE_CONTAINER_DIR, BRIDGE_CONTEXT_DIR
from config.settings import Settings, SettingsError
from constructs_lib.connect.props import INSTANCE_ARN_PATTERN
from stacks.agent_stack import AgentStack
from stacks.artifacts_stack import ArtifactsStack
from stacks.composition import foundation_refs
from stacks.connect_stack import ConnectStack
from stacks.foundation_stack import FoundationStack
from stacks.operations_stack import OperationsStack
from stacks.sonic_ecs_stack import SonicEcsStack
from stacks.sonic_stack import SonicStack
from stacks.voxtral_ecs_stack import VoxtralEcsStack
from stacks.voxtral_stack import VoxtralStack

CONTAINER_DIR = BRIDGE_CONTAINER_DIR
CONTEXT_DIR = BRIDGE_CONTEXT_DIR


@dataclass(frozen=True)
class VoiceApp:
    """The stacks :func:`build_app` created (None where the settings disable a part)."""

    artifacts: ArtifactsStack | None
    voxtral: VoxtralStack | VoxtralEcsStack | None
    sonic: SonicStack | SonicEcsStack | None
    operations: OperationsStack
    foundation: FoundationStack | None = None
    connect: ConnectStack | None = None
    agent: AgentStack | None = None

    @property
    def stacks(self) -> list[Stack]:
        return [
            s
            for s in (
                self.foundation,
                self.operations,
                self.artifacts,
                self.voxtral,
                self.sonic,
                self.connect,
                self.agent,
            )
            if s is not None
        ]


def _refuse_another_accounts_instance(settings: Settings, account: str | None) -> None:
    """The Connect instance must be in the deploying account (known when the CDK CLI has
    credentials): the start function's permission names the instance's account as
    ``aws:SourceAccount``, and the association, storage config and flow are made in the deploying
    account. Refused here, before any construct, as a settings error (one message, no stack trace);
    the construct refuses it too.

    Raises:
        SettingsError: the instance ARN names another account.
    """
    arn = settings.connect.instance_arn if settings.connect.enabled else None
    match = INSTANCE_ARN_PATTERN.match(arn or "")
    if match is not None and account and match.group(2) != account:
        raise SettingsError(
            [
                f"connect.instance_arn={arn}: the instance is in account {match.group(2)}, this "
                f"deployment in {account}; deploy the app in the instance's account (its function "
                "association, storage config and flow are made there)"
            ]
        )


def build_app(
    app: App,
    settings: Settings,
    container_dir: Path = CONTAINER_DIR,
    context_dir: Path = CONTEXT_DIR,
) -> VoiceApp:
    """Add the enabled stacks to ``app``. Stack names:
    ``<stack_name_prefix>-Operations|-Artifacts|-Voxtral|-Sonic`` (Operations, the alarm topic and
    dashboard, always; the endpoint stacks import its topic), and ``-Foundation`` (data key and VPC)
    when the deployment is private or makes a key; with ``voxtral.target=ecs``, ``-VoxtralEcs``
    instead of ``-Voxtral``, and with ``sonic.target=ecs``, ``-SonicEcs`` instead of ``-Sonic``;
    with ``agent.enabled``, ``-Agent``.

    The account comes from the CDK CLI's credentials (``CDK_DEFAULT_ACCOUNT``) and may be unresolved
    at synth time; the region is the ``region`` setting.

    Raises:
        SettingsError: ``connect.instance_arn`` names another account than ``CDK_DEFAULT_ACCOUNT``.
    """
    env = Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=settings.region)
    _refuse_another_accounts_instance(settings, env.account)
    prefix = settings.stack_name_prefix
    artifacts = voxtral = sonic = foundation_stack = None
    if settings.makes_key or settings.network.private:
        foundation_stack = FoundationStack(
            app,
            f"{prefix}-Foundation",
            settings=settings,
            env=env,
            description="Real-time voice on SageMaker: data key and private network",
        )
    foundation = foundation_refs(settings, foundation_stack)
    operations = OperationsStack(
        app,
        f"{prefix}-Operations",
        settings=settings,
        env=env,
        description="Real-time voice on SageMaker: alarm topic and operations dashboard",
    )
    topic = operations.alarm_topic.topic
    if settings.voxtral.enabled:
        artifacts = ArtifactsStack(
            app,
            f"{prefix}-Artifacts",
            settings=settings,
            foundation=foundation,
            container_dir=container_dir,
            context_dir=context_dir,
            env=env,
            description="Real-time voice on SageMaker: bridge image repository and model bucket",
        )
        if settings.voxtral.target == "ecs":
            voxtral = VoxtralEcsStack(
                app,
                f"{prefix}-VoxtralEcs",
                settings=settings,
                foundation=foundation,
                artifacts=artifacts.refs,
                env=env,
                alarm_topic=topic,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                description="Real-time voice: Voxtral speech-to-text on ECS GPU instances behind "
                "a load balancer",
            )
        else:
            voxtral = VoxtralStack(
                app,
                f"{prefix}-Voxtral",
                settings=settings,
                foundation=foundation,
                artifacts=artifacts.refs,
                env=env,
                alarm_topic=topic,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                description="Real-time voice on SageMaker: Voxtral speech-to-text endpoint (vLLM "
                "realtime)",
            )
        voxtral.add_stack_dependency(artifacts)
    if settings.sonic_on_ecs:
        sonic = SonicEcsStack(
            app,
            f"{prefix}-SonicEcs",
            settings=settings,
            foundation=foundation,
            env=env,
            alarm_topic=topic,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            description="Real-time voice: Cartesia Sonic text-to-speech on ECS GPU instances "
            "behind a load balancer",
        )
    elif settings.sonic.enabled:
        sonic = SonicStack(
            app,
            f"{prefix}-Sonic",
            settings=settings,
            foundation=foundation,
            env=env,
            alarm_topic=topic,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            description="Real-time voice on SageMaker: Cartesia Sonic text-to-speech endpoint",
        )
    connect_stack = None
    if settings.connect.enabled:
        ecs_refs = {}
        if isinstance(voxtral, VoxtralEcsStack):
            secret = voxtral.service.token_secret
            key = secret.encryption_key if secret is not None else None
            ecs_refs = {
                "endpoint_url": voxtral.service.url,
                "token_secret_arn": secret.secret_arn if secret is not None else None,
                "token_secret_kms_key_arn": key.key_arn if key is not None else None,
            }
        connect_stack = ConnectStack(
            app,
            f"{prefix}-Connect",
            settings=settings,
            foundation=foundation,
            env=env,
            alarm_topic=topic,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            description="Real-time voice: live call transcription for Amazon Connect",
            **ecs_refs,
        )
        if voxtral is not None:
            connect_stack.add_stack_dependency(voxtral)
    agent = (
        _agent_stack(app, settings, foundation, topic, voxtral, sonic, env)
        if settings.agent.enabled
        else None
    )
    Tags.of(app).add("project", "sagemaker-realtime-voice")
    return VoiceApp(artifacts, voxtral, sonic, operations, foundation_stack, connect_stack, agent)


def _agent_stack(
    app: App, settings: Settings, foundation, topic, voxtral, sonic, env: Environment
) -> AgentStack:
    """``<prefix>-Agent``: the voice agent, after the Voxtral and Sonic stacks it calls. With
    Voxtral on ECS it takes the service's URL and token secret, and in public mode runs in the
    service's VPC (its load balancer is internal)."""
    refs = {}
    if isinstance(voxtral, VoxtralEcsStack):
        secret = voxtral.service.token_secret
        key = secret.encryption_key if secret is not None else None
        refs = {
            "voxtral_url": voxtral.service.url,
            "token_secret_arn": secret.secret_arn if secret is not None else None,
            "token_secret_kms_key_arn": key.key_arn if key is not None else None,
            "vpc": None if foundation.vpc is not None else voxtral.service.cluster.vpc,
        }
    agent = AgentStack(
        app,
        f"{settings.stack_name_prefix}-Agent",
        settings=settings,
        foundation=foundation,
        alarm_topic=topic,
        env=env,
        **refs,
        description="Real-time voice: the voice agent (Voxtral, an LLM, Sonic) on ECS Fargate",
    )
    for stack in (voxtral, sonic):
        if stack is not None:
            agent.add_stack_dependency(stack)
    return agent
