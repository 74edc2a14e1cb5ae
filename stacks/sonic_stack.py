"""SonicStack: text to speech, Cartesia Sonic 3.6 from its AWS Marketplace model package."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.settings import Settings
from constructs_lib.autoscaling import (
    CONCURRENT_REQUESTS_PER_MODEL,
    INVOCATIONS_PER_INSTANCE,
    EndpointAutoscaling,
    EndpointAutoscalingProps,
    PredefinedTarget,
)
from constructs_lib.execution_role import SAGEMAKER_INSTANCE_METRICS_NAMESPACE, SageMakerExecutionRole
from constructs_lib.monitoring import EndpointAlarms, EndpointAlarmsProps
from constructs_lib.realtime_endpoint import (
    INVOKE,
    INVOKE_WITH_RESPONSE_STREAM,
    VARIANT_NAME,
    ModelPackageContainer,
    RealtimeEndpoint,
    RealtimeEndpointProps,
)
from stacks.endpoint_monitoring import sonic_monitoring

#: sonic.scaling_metric -> Application Auto Scaling predefined metric type.
SCALING_METRICS = {"invocations_per_instance": INVOCATIONS_PER_INSTANCE, "concurrent_requests": CONCURRENT_REQUESTS_PER_MODEL}


class SonicStack(Stack):
    """Execution role, Model (model package, network isolation), EndpointConfig, Endpoint, log group, invoke
    policy, alarms, autoscaling and outputs of the Sonic endpoint. Needs a one-time Marketplace subscription
    (README)."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, alarm_topic: sns.ITopic,
                 **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        sonic = settings.sonic
        role = SageMakerExecutionRole(self, "ExecutionRole", description=f"SageMaker execution role of {sonic.endpoint_name}")
        role.grant_metrics(SAGEMAKER_INSTANCE_METRICS_NAMESPACE)
        self.alarms = EndpointAlarms(self, "Alarms", EndpointAlarmsProps(endpoint=sonic_monitoring(settings), topic=alarm_topic))
        # min = max instances means a fixed size: no scalable target, and updates reset the count.
        autoscaled = sonic.min_instances < sonic.max_instances
        self.endpoint = RealtimeEndpoint(
            self,
            "Sonic",
            RealtimeEndpointProps(
                endpoint_name=sonic.endpoint_name,
                container=ModelPackageContainer(settings.sonic_model_package_arn),
                execution_role=role,
                instance_type=sonic.instance_type,
                initial_instance_count=sonic.initial_instance_count,
                model_data_download_timeout_s=sonic.model_data_download_timeout_s,
                container_startup_timeout_s=sonic.container_startup_timeout_s,
                inference_ami_version=None,
                # Marketplace model packages must run without network access.
                enable_network_isolation=True,
                volume_kms_key_arn=sonic.volume_kms_key_arn,
                log_retention_days=settings.log_retention_days,
                invoke_actions=[INVOKE, INVOKE_WITH_RESPONSE_STREAM],
                description="Cartesia Sonic text-to-speech",
                # No rolling update: Marketplace containers are excluded from deployment guardrails; SageMaker
                # updates them blue/green, all at once ("Exclusions", SageMaker developer guide).
                rolling_update=None,
                autoscaled=autoscaled,
            ),
        )
        # The endpoint-health alarm (missing data breaching) starts once the endpoint is InService.
        self.alarms.create_after(self.endpoint.endpoint)
        if autoscaled:
            self.autoscaling = EndpointAutoscaling(
                self,
                "Autoscaling",
                EndpointAutoscalingProps(
                    endpoint_name=sonic.endpoint_name,
                    variant_name=VARIANT_NAME,
                    endpoint=self.endpoint.endpoint,
                    min_instances=sonic.min_instances,
                    max_instances=sonic.max_instances,
                    target=PredefinedTarget(SCALING_METRICS[sonic.scaling_metric], sonic.scaling_target),
                    scale_in_cooldown_s=sonic.scale_in_cooldown_s,
                ),
            )
        self.endpoint.add_outputs("Sonic", {"ModelPackageArn": (settings.sonic_model_package_arn, "Model package")})
