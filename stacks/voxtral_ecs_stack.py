"""VoxtralEcsStack: speech to text on the self-managed GPU target (``voxtral.target=ecs``): the bridge image as an ECS
service on EC2 GPU instances behind an Application Load Balancer, with its network, alarms and dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Fn, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.models import BRIDGE_DRAIN_S
from config.settings import Settings
from constructs_lib.ecs_service.service import GpuEcsService, GpuEcsServiceProps
from constructs_lib.sagemaker_endpoint.props import LOG_RETENTION
from constructs_lib.facts.names import repository_arn_from_image_uri
from stacks.artifacts_stack import ArtifactRefs
from stacks.foundation_stack import Foundation
from stacks.voxtral_stack import container_environment, model_weights, stream_cap_warning

#: Availability Zones of the network this stack creates (two: the default placement spreads across zones).
MAX_AZS = 2


class VoxtralEcsStack(Stack):
    """The Voxtral service on ECS: network (its own, or the Foundation stack's private one), weights staged as for
    SageMaker, the service (:class:`~constructs_lib.ecs_service.service.GpuEcsService`), its dashboard and outputs."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, foundation: Foundation,
                 artifacts: ArtifactRefs, alarm_topic: sns.ITopic, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        voxtral, ecs_settings = settings.voxtral, settings.ecs
        stream_cap_warning(self, voxtral)
        shared = shared_service_props(self, settings, foundation, alarm_topic)
        weights, _, staging = model_weights(self, voxtral, artifacts, foundation)
        image, repository_arn = self._image(artifacts)
        environment = {key: value for key, value in container_environment(voxtral).items()
                       if key not in ("ENDPOINT_NAME", "VARIANT_NAME", "DRAIN_S")}
        self.service = GpuEcsService(
            self, "Service",
            GpuEcsServiceProps(
                service_name=voxtral.endpoint_name,
                image=image,
                image_repository_arn=repository_arn,
                capacity=ecs_settings.capacity_props(),
                load_balancing=ecs_settings.load_balancing(),
                model_bucket=s3.Bucket.from_bucket_name(self, "WeightsBucket", weights.bucket),
                model_prefix=weights.prefix,
                bridge=voxtral.bridge_thresholds(),
                streams_target=voxtral.streams_target,
                environment=environment,
                drain_s=BRIDGE_DRAIN_S,
                **shared,
            ),
        )
        if foundation.key_arn and not voxtral.model_s3_uri:
            # The model bucket is under the data key (encryption.*): S3 GetObject needs kms:Decrypt on it.
            self.service.task_definition.task_role.add_to_principal_policy(iam.PolicyStatement(
                sid="DecryptModelData", actions=["kms:Decrypt", "kms:DescribeKey"], resources=[foundation.key_arn]))
        for dependency in [staging, artifacts.image_copy]:
            if dependency is not None:
                self.service.service.node.add_dependency(dependency)

        self.dashboard = service_dashboard(self, self.service, settings, "VoxtralEcs", "Voxtral speech to text")

        CfnOutput(self, "StreamUrl", value=self.service.url,
                  description="WebSocket URL callers connect to (voicectl transcribe --url ...)")
        CfnOutput(self, "HealthUrl", value=self.service.health_url, description="GET returns 200 when a task can serve")
        if self.service.token_secret is not None:
            CfnOutput(self, "TokenSecretArn", value=self.service.token_secret.secret_arn,
                      description="Secrets Manager secret holding the bearer token (voicectl --token-secret ...)")
        CfnOutput(self, "ModelS3Uri", value=weights.uri(), description="S3 prefix the tasks copy to their host")
        CfnOutput(self, "ClusterName", value=self.service.cluster.cluster_name, description="ECS cluster")

    def _image(self, artifacts: ArtifactRefs) -> tuple[ecs.ContainerImage, str]:
        """(image, repository ARN): a prebuilt URI, or the copied asset under its hash tag in the bridge repository
        of the Artifacts stack. The construct grants the execution role a pull from that repository only."""
        if artifacts.prebuilt_image_uri:
            return (ecs.ContainerImage.from_registry(artifacts.prebuilt_image_uri),
                    repository_arn_from_image_uri(artifacts.prebuilt_image_uri))
        uri = f"{Fn.import_value(artifacts.repository_uri)}:{artifacts.image_tag}"
        return ecs.ContainerImage.from_registry(uri), Fn.import_value(artifacts.repository_arn)


def shared_service_props(scope: Construct, settings: Settings, foundation: Foundation,
                         alarm_topic: sns.ITopic) -> dict[str, Any]:
    """The props of :class:`GpuEcsServiceProps` every ECS service of the app takes alike: where it runs (network.mode
    =vpc: the Foundation stack's private network, whose VPC endpoints include ECS's, constructs_lib/network/props.py
    ECS_INTERFACE_ENDPOINTS; public: a VPC of the stack's own, :func:`network`), who may call it, its logs' retention
    and key, data retention and the alarm topic."""
    return {"vpc": foundation.vpc or network(scope, settings), "subnets": foundation.private_subnets,
            "caller_cidrs": foundation.caller_cidrs, "log_kms_key_arn": foundation.key_arn,
            "log_retention_days": settings.log_retention_days, "retain_data": settings.retain_data,
            "alarm_topic": alarm_topic}


def service_dashboard(scope: Construct, service: GpuEcsService, settings: Settings, name: str,
                      title: str) -> cloudwatch.Dashboard:
    """The service's own dashboard, ``<prefix>-<name>-<region>`` (dashboard names are unique per account)."""
    dashboard = cloudwatch.Dashboard(scope, "Dashboard",
                                     dashboard_name=f"{settings.stack_name_prefix}-{name}-{settings.region}")
    for row in service.dashboard_rows(title):
        dashboard.add_widgets(*row)
    return dashboard


def network(scope: Construct, settings: Settings) -> ec2.IVpc:
    """The VPC of the ECS target: public subnets (the load balancer, one NAT gateway) and private subnets with egress
    (instances and tasks), across :data:`MAX_AZS` zones, with flow logs to a log group.

    Public mode only: with ``network.mode=vpc`` the Foundation stack's private network replaces it (everything else
    takes an ``ec2.IVpc`` and its private subnets). One NAT gateway, not one per zone: the
    tasks reach AWS APIs (ECR, S3, Logs, Secrets Manager, ECS) through it, and the S3 gateway endpoint carries the
    weights and image layers, which are nearly all the bytes.
    """
    removal = RemovalPolicy.RETAIN if settings.retain_data else RemovalPolicy.DESTROY
    vpc = ec2.Vpc(
        scope, "Vpc",
        max_azs=MAX_AZS,
        nat_gateways=1,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
            ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
        ],
        gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
    )
    flow_logs = logs.LogGroup(scope, "VpcFlowLogs", removal_policy=removal,
                              retention=getattr(logs.RetentionDays, LOG_RETENTION[settings.log_retention_days]))
    vpc.add_flow_log("FlowLogs", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                     traffic_type=ec2.FlowLogTrafficType.REJECT)
    return vpc

