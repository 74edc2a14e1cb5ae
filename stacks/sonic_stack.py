"""SonicStack: text to speech, Cartesia Sonic 3.6 from its AWS Marketplace model package."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack, aws_sns as sns
from constructs import Construct

from config.models import SONIC_SCALING_METRICS
from config.settings import Settings
from constructs_lib.sagemaker_endpoint.execution_role import SAGEMAKER_INSTANCE_METRICS_NAMESPACE
from constructs_lib.sagemaker_endpoint.props import (
    INVOKE,
    INVOKE_WITH_RESPONSE_STREAM,
    ModelPackageContainer,
)
from constructs_lib.sagemaker_endpoint.scaling_props import TargetTracking
from stacks.composition import Foundation, execution_role, monitored_endpoint


class SonicStack(Stack):
    """The Sonic endpoint: a Model from the model package (network isolation), no rolling update
    (Marketplace containers are excluded from deployment guardrails; SageMaker updates them
    blue/green, all at once: "Exclusions", SageMaker developer guide), scaling on a predefined
    SageMaker metric. Needs a one-time Marketplace subscription (README).

    Attributes:
        role: the endpoint's execution role.
        endpoint: the
            :class:`~constructs_lib.sagemaker_endpoint.monitored_endpoint.MonitoredEndpoint`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        foundation: Foundation,
        alarm_topic: sns.ITopic,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        sonic = settings.sonic
        self.role = execution_role(self, sonic)
        self.role.grant_metrics(SAGEMAKER_INSTANCE_METRICS_NAMESPACE)
        self.endpoint = monitored_endpoint(
            self,
            "Sonic",
            settings=settings,
            section=sonic,
            foundation=foundation,
            role=self.role,
            alarm_topic=alarm_topic,
            container=ModelPackageContainer(settings.sonic_model_package_arn),
            description="Cartesia Sonic text-to-speech",
            invoke_actions=[INVOKE, INVOKE_WITH_RESPONSE_STREAM],
            tracking=sonic.props(
                TargetTracking, predefined_metric=SONIC_SCALING_METRICS[sonic.scaling_metric]
            ),
            outputs={"ModelPackageArn": (settings.sonic_model_package_arn, "Model package")},
        )
