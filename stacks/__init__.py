"""Stacks of the app, one module each; :func:`build_app` composes them from validated settings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import App, Environment, Stack, Tags

from config.settings import Settings
from stacks.artifacts_stack import ArtifactsStack
from stacks.operations_stack import OperationsStack
from stacks.sonic_stack import SonicStack
from stacks.voxtral_ecs_stack import VoxtralEcsStack
from stacks.voxtral_stack import VoxtralStack

CONTAINER_DIR = Path(__file__).resolve().parent.parent / "container"


@dataclass(frozen=True)
class VoiceApp:
    """The stacks :func:`build_app` created (None where the settings disable a part)."""

    artifacts: ArtifactsStack | None
    voxtral: VoxtralStack | VoxtralEcsStack | None
    sonic: SonicStack | None
    operations: OperationsStack

    @property
    def stacks(self) -> list[Stack]:
        return [s for s in (self.operations, self.artifacts, self.voxtral, self.sonic) if s is not None]


def build_app(app: App, settings: Settings, container_dir: Path = CONTAINER_DIR) -> VoiceApp:
    """Add the enabled stacks to ``app``. Stack names: ``<stack_name_prefix>-Operations|-Artifacts|-Voxtral|-Sonic``
    (Operations, the alarm topic and dashboard, always; the endpoint stacks import its topic); with
    ``voxtral.target=ecs``, ``-VoxtralEcs`` instead of ``-Voxtral``.

    The account comes from the CDK CLI's credentials (``CDK_DEFAULT_ACCOUNT``) and may be unresolved at synth time;
    the region is the ``region`` setting.
    """
    env = Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=settings.region)
    prefix = settings.stack_name_prefix
    artifacts = voxtral = sonic = None
    operations = OperationsStack(
        app, f"{prefix}-Operations", settings=settings, env=env,
        description="Real-time voice on SageMaker: alarm topic and operations dashboard",
    )
    topic = operations.alarm_topic.topic
    if settings.voxtral.enabled:
        artifacts = ArtifactsStack(
            app, f"{prefix}-Artifacts", settings=settings, container_dir=container_dir, env=env,
            description="Real-time voice on SageMaker: bridge image repository and model bucket",
        )
        if settings.voxtral.target == "ecs":
            voxtral = VoxtralEcsStack(
                app, f"{prefix}-VoxtralEcs", settings=settings, artifacts=artifacts.refs, alarm_topic=topic, env=env,
                description="Real-time voice: Voxtral speech-to-text on ECS GPU instances behind a load balancer",
            )
        else:
            voxtral = VoxtralStack(
                app, f"{prefix}-Voxtral", settings=settings, artifacts=artifacts.refs, alarm_topic=topic, env=env,
                description="Real-time voice on SageMaker: Voxtral speech-to-text endpoint (vLLM realtime)",
            )
        voxtral.add_stack_dependency(artifacts)
    if settings.sonic.enabled:
        sonic = SonicStack(
            app, f"{prefix}-Sonic", settings=settings, alarm_topic=topic, env=env,
            description="Real-time voice on SageMaker: Cartesia Sonic text-to-speech endpoint",
        )
    Tags.of(app).add("project", "sagemaker-realtime-voice")
    return VoiceApp(artifacts, voxtral, sonic, operations)
