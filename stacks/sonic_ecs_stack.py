"""SonicEcsStack: text to speech on the self-managed GPU target (``sonic.target=ecs``): the Sonic
container a Cartesia licence provides (``sonic.image_uri``) as an ECS service on EC2 GPU instances
behind an internal Application Load Balancer, with its alarms and dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, aws_ecs as ecs, aws_sns as sns
from constructs import Construct

from config.settings import Settings
from constructs_lib.ecs_service.props import GpuEcsServiceProps
from constructs_lib.ecs_service.service import GpuEcsService
from constructs_lib.facts.names import repository_arn_from_image_uri
from stacks.composition import Foundation, service_dashboard, shared_service_props

#: Namespace of the CloudWatch agent's GPU metrics on Sonic's instances.
SONIC_GPU_NAMESPACE = "RealtimeVoice/Sonic/Gpu"


class SonicEcsStack(Stack):
    """Sonic on ECS (:class:`~constructs_lib.ecs_service.service.GpuEcsService`, the service
    without the bridge's add-on): one GPU per task, the container's port and health path, scaling
    on the load balancer's requests per task (``sonic.scaling_target`` per minute), the shared
    alarms plus a p90 response-time alarm at ``sonic.alarm_model_latency_p90_ms``. The load
    balancer is internal: Sonic's container does not check the bridge's bearer token."""

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
        assert sonic.image_uri is not None  # the settings require it with target=ecs
        self.service = GpuEcsService(
            self,
            "Service",
            GpuEcsServiceProps(
                service_name=sonic.endpoint_name,
                image=ecs.ContainerImage.from_registry(sonic.image_uri),
                image_repository_arn=repository_arn_from_image_uri(sonic.image_uri),
                capacity=sonic.ecs_capacity(settings.ecs),
                load_balancing=sonic.ecs_load_balancing(settings.ecs),
                requests_per_target=sonic.target_value,
                response_time_p90_ms=sonic.model_latency_p90_ms,
                container_port=sonic.container_port,
                health_path=sonic.health_path,
                gpu_namespace=SONIC_GPU_NAMESPACE,
                **shared_service_props(self, settings, foundation, alarm_topic),
            ),
        )
        self.dashboard = service_dashboard(
            self, self.service, settings, "SonicEcs", "Sonic text to speech"
        )

        CfnOutput(
            self, "Url", value=self.service.url, description="Base URL of the Sonic container's API"
        )
        CfnOutput(
            self,
            "HealthUrl",
            value=self.service.health_url,
            description="GET returns 200 when a task can serve",
        )
        CfnOutput(
            self, "ClusterName", value=self.service.cluster.cluster_name, description="ECS cluster"
        )
