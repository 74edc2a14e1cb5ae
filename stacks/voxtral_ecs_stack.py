"""VoxtralEcsStack: speech to text on the self-managed GPU target (``voxtral.target=ecs``): the
bridge image as an ECS service on EC2 GPU instances behind an Application Load Balancer, with its
network, alarms and dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import (
    CfnOutput,
    Fn,
    Stack,
    aws_ecs as ecs,
    aws_iam as iam,
    aws_s3 as s3,
    aws_sns as sns,
)
from constructs import Construct

from config.bridge import bridge_environment
from config.models import BRIDGE_DRAIN_S
from config.settings import Settings
from constructs_lib.ecs_service.bridge_service import GpuEcsServiceWithBridge
from constructs_lib.ecs_service.props import GpuEcsServiceWithBridgeProps
from constructs_lib.facts.names import repository_arn_from_image_uri
from stacks.composition import (
    ArtifactRefs,
    Foundation,
    model_weights,
    service_dashboard,
    shared_service_props,
    stream_cap_warning,
)


class VoxtralEcsStack(Stack):
    """The Voxtral service on ECS: network (its own, or the Foundation stack's private one),
    weights staged as for SageMaker, the service
    (:class:`~constructs_lib.ecs_service.bridge_service.GpuEcsServiceWithBridge`), its dashboard
    and outputs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        foundation: Foundation,
        artifacts: ArtifactRefs,
        alarm_topic: sns.ITopic,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        voxtral, ecs_settings = settings.voxtral, settings.ecs
        stream_cap_warning(self, settings.capacity_plan)
        shared = shared_service_props(self, settings, foundation, alarm_topic)
        weights, _, staging = model_weights(self, voxtral, artifacts, foundation)
        image, repository_arn = self._image(artifacts)
        self.service = GpuEcsServiceWithBridge(
            self,
            "Service",
            GpuEcsServiceWithBridgeProps(
                service_name=voxtral.endpoint_name,
                image=image,
                image_repository_arn=repository_arn,
                capacity=ecs_settings.capacity_props(),
                load_balancing=ecs_settings.load_balancing(),
                model_bucket=s3.Bucket.from_bucket_name(self, "WeightsBucket", weights.bucket),
                model_prefix=weights.prefix,
                bridge=voxtral.bridge_thresholds(settings.capacity_plan),
                streams_target=settings.capacity_plan.streams_target,
                environment=bridge_environment(settings),
                drain_s=BRIDGE_DRAIN_S,
                **shared,
            ),
        )
        if foundation.key_arn and not voxtral.model_s3_uri:
            # The model bucket is under the data key (encryption.*): S3 GetObject needs kms:Decrypt
            # on it.
            self.service.task_definition.task_role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="DecryptModelData",
                    actions=["kms:Decrypt", "kms:DescribeKey"],
                    resources=[foundation.key_arn],
                )
            )
        for dependency in [staging, artifacts.image_copy]:
            if dependency is not None:
                self.service.service.node.add_dependency(dependency)

        self.dashboard = service_dashboard(
            self, self.service, settings, "VoxtralEcs", "Voxtral speech to text"
        )

        CfnOutput(
            self,
            "StreamUrl",
            value=self.service.url,
            description="WebSocket URL callers connect to (voicectl transcribe --url ...)",
        )
        CfnOutput(
            self,
            "HealthUrl",
            value=self.service.health_url,
            description="GET returns 200 when a task can serve",
        )
        if self.service.token_secret is not None:
            CfnOutput(
                self,
                "TokenSecretArn",
                value=self.service.token_secret.secret_arn,
                description="Secrets Manager secret holding the bearer token (voicectl "
                "--token-secret ...)",
            )
        CfnOutput(
            self,
            "ModelS3Uri",
            value=weights.uri(),
            description="S3 prefix the tasks copy to their host",
        )
        CfnOutput(
            self, "ClusterName", value=self.service.cluster.cluster_name, description="ECS cluster"
        )

    def _image(self, artifacts: ArtifactRefs) -> tuple[ecs.ContainerImage, str]:
        """(image, repository ARN): a prebuilt URI, or the copied asset under its hash tag in the
        bridge repository of the Artifacts stack. The construct grants the execution role a pull
        from that repository only."""
        if artifacts.prebuilt_image_uri:
            return (
                ecs.ContainerImage.from_registry(artifacts.prebuilt_image_uri),
                repository_arn_from_image_uri(artifacts.prebuilt_image_uri),
            )
        uri = f"{Fn.import_value(artifacts.repository_uri)}:{artifacts.image_tag}"
        return ecs.ContainerImage.from_registry(uri), Fn.import_value(artifacts.repository_arn)
