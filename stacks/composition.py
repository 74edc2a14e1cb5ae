"""What the stacks share, in one place: each stack module is a :class:`~aws_cdk.Stack` that composes
constructs with these functions, and no stack inherits from another or imports a sibling stack
module.

- Foundation and artifacts: :class:`Foundation` (what the other stacks take from the settings and
  the Foundation stack), :func:`foundation_refs`, :func:`model_data_role_path`,
  :class:`ArtifactRefs`.
- SageMaker endpoints (Voxtral and Sonic): :func:`execution_role`, :func:`monitored_endpoint`.
- Voxtral on either target: :func:`stream_cap_warning`, :func:`model_weights`,
  :func:`voxtral_tracking`; each reads the settings' capacity plan
  (:attr:`~config.settings.Settings.capacity_plan`), worked out once when they loaded. The bridge
  container's environment comes from :mod:`config.bridge`, which checks it with the settings.
- ECS services (Voxtral and Sonic): :func:`shared_service_props`, :func:`service_dashboard`,
  :func:`ecs_vpc`.

Construct ids are those the stacks used before they shared this module, so the logical ids are
unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_cdk import (
    Annotations,
    Fn,
    RemovalPolicy,
    Stack,
    aws_cloudwatch as cloudwatch,
    aws_ec2 as ec2,
    aws_kms as kms,
    aws_logs as logs,
    aws_s3 as s3,
    aws_secretsmanager as secretsmanager,
    aws_sns as sns,
)
from constructs import Construct, IDependable

from config.capacity_plan import CapacityPlan
from config.settings import EndpointSettings, Settings, VoxtralSettings
from constructs_lib.artifacts.model_staging import ModelStaging, ModelStagingProps
from constructs_lib.ecs_service.service import GpuEcsService
from constructs_lib.monitoring.metrics import BridgeMetrics
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from constructs_lib.sagemaker_endpoint.execution_role import SageMakerExecutionRole
from constructs_lib.sagemaker_endpoint.monitored_endpoint import (
    MonitoredEndpoint,
    MonitoredEndpointProps,
)
from constructs_lib.sagemaker_endpoint.props import (
    LOG_RETENTION,
    ImageContainer,
    ModelPackageContainer,
    RealtimeEndpointProps,
    RollingUpdate,
    normalise_s3_prefix,
)
from constructs_lib.sagemaker_endpoint.scaling_props import InstanceScaling, TargetTracking
from contracts.model import S3Prefix

if TYPE_CHECKING:
    from stacks.foundation_stack import FoundationStack

#: Availability Zones of the network an ECS stack creates in public mode (two: the default placement
#: spreads across zones).
MAX_AZS = 2


# --- Foundation and artifacts -------------------------------------------------------------------


@dataclass(frozen=True)
class Foundation:
    """What the other stacks take from the settings and the Foundation stack (empty in a public
    deployment).

    Attributes:
        key_arn: the data key's ARN (given or made), or None.
        encrypts_repository: whether the ECR repository uses the key (changing it replaces the
            repository).
        subnet_ids / security_group_ids: the Models' VpcConfig (empty in public mode).
        source_vpce_ids: VPC endpoints the caller policies require (aws:SourceVpce), or none.
        model_data_role_path: IAM path of the roles that may use the model bucket's objects (the
            bucket policy names them by it, before they exist), or None when the bucket is not
            restricted.
        vpc / private_subnets: the private network and its subnets (ECS target in vpc mode), or None
            / empty.
        caller_cidrs: who may call the services (network.caller_cidrs; empty = the VPC's CIDR
            block).
    """

    key_arn: str | None = None
    encrypts_repository: bool = False
    subnet_ids: list[str] = field(default_factory=list)
    security_group_ids: list[str] = field(default_factory=list)
    source_vpce_ids: list[str] = field(default_factory=list)
    model_data_role_path: str | None = None
    vpc: ec2.IVpc | None = None
    private_subnets: list[ec2.ISubnet] = field(default_factory=list)
    caller_cidrs: list[str] = field(default_factory=list)


def foundation_refs(settings: Settings, stack: FoundationStack | None) -> Foundation:
    """What the other stacks need of the Foundation stack (None when there is none) and of the
    settings."""
    network = stack.network if stack else None
    key = stack.key if stack else None
    return Foundation(
        key_arn=key.key_arn if key else settings.encryption.kms_key_arn,
        encrypts_repository=settings.encrypts_repository,
        subnet_ids=network.subnet_ids if network else [],
        security_group_ids=network.model_security_group_ids if network else [],
        source_vpce_ids=[network.runtime_endpoint.vpc_endpoint_id]
        if network and network.runtime_endpoint and settings.network.require_source_vpce
        else [],
        model_data_role_path=model_data_role_path(settings) if network else None,
        vpc=network.vpc if network else None,
        private_subnets=network.subnets if network else [],
        # Literal CIDRs (not the VPC's CidrBlock attribute), so the security group rules say what
        # they let in.
        caller_cidrs=list(settings.network.caller_cidrs or [settings.network.network_props().cidr])
        if network
        else [],
    )


def model_data_role_path(settings: Settings) -> str:
    """IAM path of the Voxtral execution role and the staging build role in vpc mode: the model
    bucket's policy lets only roles on this path use its objects."""
    return f"/{settings.stack_name_prefix}/model-data/"


@dataclass(frozen=True)
class ArtifactRefs:
    """What the Voxtral stack needs from the Artifacts stack, by explicit export name.

    The exports are made whatever the settings, and their values never change for a deployed stack
    (a bucket name, a repository ARN and URI): CloudFormation refuses to change or remove an export
    that another stack imports, so anything that varies (image tag, model prefix) is passed as a
    literal or computed in the Voxtral stack.

    Attributes:
        model_bucket_name: export of the model bucket's name.
        repository_arn: export of the bridge repository's ARN.
        repository_uri: export of the bridge repository's URI.
        image_tag: the tag the image copy writes (the asset hash), or None with a prebuilt image.
        prebuilt_image_uri: ``voxtral.image_uri``, or None.
        image_copy: the image copy custom resource (the Model depends on it), or None.
    """

    model_bucket_name: str
    repository_arn: str
    repository_uri: str
    image_tag: str | None
    prebuilt_image_uri: str | None
    image_copy: IDependable | None


# --- SageMaker endpoints (Voxtral and Sonic) ----------------------------------------------------


def execution_role(
    scope: Construct, section: EndpointSettings, role_path: str | None = None
) -> SageMakerExecutionRole:
    """The endpoint's execution role (construct id ``ExecutionRole``); the stack grants what its
    container reads."""
    return SageMakerExecutionRole(
        scope,
        "ExecutionRole",
        path=role_path,
        description=f"SageMaker execution role of {section.endpoint_name}",
    )


def monitored_endpoint(
    scope: Construct,
    name: str,
    *,
    settings: Settings,
    section: EndpointSettings,
    foundation: Foundation,
    role: SageMakerExecutionRole,
    alarm_topic: sns.ITopic,
    container: ImageContainer | ModelPackageContainer,
    description: str,
    invoke_actions: Sequence[str],
    tracking: TargetTracking,
    rolling_update: RollingUpdate | None = None,
    bridge: BridgeAlarmThresholds | None = None,
    outputs: Mapping[str, tuple[str, str]],
    pool_environment: Mapping[str, Mapping[str, str]] | None = None,
) -> MonitoredEndpoint:
    """The endpoint of ``section`` in ``scope`` (construct id ``Default``), its alarms (to the alarm
    topic), its autoscaling (within the section's instance range, by ``tracking`` while it is a
    range) and its outputs ``<name>...``, run by ``role``. ``pool_environment``: the instance pools
    that run a Model of their own, with the environment variables that differ
    (RealtimeEndpointProps)."""
    if foundation.key_arn and section.volume_kms_key_arn is None:
        # The ML storage volumes under the data key unless the section names a key of its own.
        section = dataclasses.replace(section, volume_kms_key_arn=foundation.key_arn)
    return MonitoredEndpoint(
        # Construct id "Default": CDK leaves it out of logical ids, so the endpoint, its alarms and
        # its scaling keep the ids they were first deployed with (CDK Developer Guide,
        # "Identifiers": logical IDs).
        scope,
        "Default",
        MonitoredEndpointProps(
            name=name,
            endpoint=section.props(
                RealtimeEndpointProps,
                container=container,
                variant=section.variant(),
                role=role.role,
                log_retention_days=settings.log_retention_days,
                rolling_update=rolling_update,
                invoke_actions=invoke_actions,
                description=description,
                # Both Models run without network access (the Marketplace package requires it; the
                # bridge image gets its weights from S3 through SageMaker and reaches nothing else).
                enable_network_isolation=True,
                vpc_subnets=foundation.subnet_ids,
                security_groups=foundation.security_group_ids,
                require_source_vpce=foundation.source_vpce_ids,
                log_kms_key_arn=foundation.key_arn,
                pool_environment=dict(pool_environment or {}),
            ),
            thresholds=section.thresholds(),
            bridge=bridge,
            alarm_topic=alarm_topic,
            scaling=section.props(InstanceScaling, tracking=tracking),
            outputs=outputs,
        ),
    )


# --- Voxtral on either target -------------------------------------------------------------------


def stream_cap_warning(stack: Stack, plan: CapacityPlan) -> None:
    """Print (cdk synth) a warning when an explicit max_num_seqs is above the GPU's estimated
    compute cap (:attr:`~config.capacity_plan.CapacityPlan.warning`): allowed, since the cap is an
    estimate, but said."""
    warning = plan.warning
    if warning is not None:
        Annotations.of(stack).add_warning_v2("realtime-voice:stream-cap-above-compute", warning)


def model_weights(
    scope: Construct, voxtral: VoxtralSettings, artifacts: ArtifactRefs, foundation: Foundation
) -> tuple[S3Prefix, str, ModelStaging | None]:
    """(where the weights are, the S3 URI to read them from, the staging or None): the given prefix,
    or the stack's model bucket, staged in ``scope`` first when ``voxtral.stage_model``; then the
    URI is the staging custom resource's attribute, so whatever reads it cannot be created before
    the weights are in place. The staging writes under the Foundation stack's data key (when there
    is one) with a role on its model-data role path (what the bucket policy lets in,
    network.mode=vpc). Shared by the SageMaker and ECS targets."""
    model_bucket = s3.Bucket.from_bucket_name(
        scope, "ModelBucket", Fn.import_value(artifacts.model_bucket_name)
    )
    if voxtral.model_s3_uri:
        weights = S3Prefix.parse(normalise_s3_prefix(voxtral.model_s3_uri))
    else:
        weights = S3Prefix(model_bucket.bucket_name, voxtral.model_prefix_key())
    if not voxtral.stages_model:
        return weights, weights.uri(), None
    staging = ModelStaging(
        scope,
        "ModelStaging",
        ModelStagingProps(
            bucket=model_bucket,
            prefix=weights.prefix,
            repository_id=voxtral.model_id,
            revision=voxtral.model_revision,
            hf_token_secret=(
                secretsmanager.Secret.from_secret_complete_arn(
                    scope, "HubToken", voxtral.hf_token_secret_arn
                )
                if voxtral.hf_token_secret_arn
                else None
            ),
            hf_token_secret_kms_key_arn=voxtral.hf_token_secret_kms_key_arn,
            encryption_key=kms.Key.from_key_arn(scope, "DataKey", foundation.key_arn)
            if foundation.key_arn
            else None,
            # The build runs in CodeBuild's own network, not in the VPC: it downloads from the model
            # hub on the internet, which the VPC cannot reach (no internet or NAT gateway). It
            # writes to S3 with its role.
            role_path=foundation.model_data_role_path,
        ),
    )
    return weights, staging.model_s3_uri, staging


def voxtral_tracking(settings: Settings) -> TargetTracking:
    """Target tracking on live streams per instance at ``scaling_target_fraction`` of the stream
    cap. With instance pools whose caps differ (each pool type's Model has its own), a count of
    streams means something else on each GPU, so it tracks the bridge's StreamCapUsed (percent of
    each instance's own cap) instead: every instance is filled to the same share of what it serves,
    and no larger GPU idles at a smaller GPU's cap."""
    voxtral, plan = settings.voxtral, settings.capacity_plan
    metrics = BridgeMetrics(voxtral.namespace, voxtral.endpoint_name)
    if plan.caps_differ:
        return voxtral.props(
            TargetTracking,
            metric=metrics.metric_stream_cap_used_per_instance(),
            target_value=plan.stream_cap_used_target,
        )
    return voxtral.props(
        TargetTracking,
        metric=metrics.metric_active_streams_per_instance(),
        target_value=plan.streams_target,
    )


# --- ECS services -------------------------------------------------------------------------------


def shared_service_props(
    scope: Construct, settings: Settings, foundation: Foundation, alarm_topic: sns.ITopic
) -> dict[str, Any]:
    """The props of :class:`GpuEcsServiceProps` every ECS service of the app takes alike: where it
    runs (network.mode =vpc: the Foundation stack's private network, whose VPC endpoints include
    ECS's, constructs_lib/network/props.py ECS_INTERFACE_ENDPOINTS; public: a VPC of the stack's
    own, :func:`ecs_vpc`), who may call it, its logs' retention and key, data retention and the
    alarm topic."""
    return {
        "vpc": foundation.vpc or ecs_vpc(scope, settings),
        "subnets": foundation.private_subnets,
        "caller_cidrs": foundation.caller_cidrs,
        "log_kms_key_arn": foundation.key_arn,
        "log_retention_days": settings.log_retention_days,
        "retain_data": settings.retain_data,
        "alarm_topic": alarm_topic,
    }


def service_dashboard(
    scope: Construct, service: GpuEcsService, settings: Settings, name: str, title: str
) -> cloudwatch.Dashboard:
    """The service's own dashboard, ``<prefix>-<name>-<region>`` (dashboard names are unique per
    account)."""
    dashboard = cloudwatch.Dashboard(
        scope, "Dashboard", dashboard_name=f"{settings.stack_name_prefix}-{name}-{settings.region}"
    )
    for row in service.dashboard_rows(title):
        dashboard.add_widgets(*row)
    return dashboard


def ecs_vpc(scope: Construct, settings: Settings) -> ec2.IVpc:
    """The VPC of the ECS target: public subnets (the load balancer, one NAT gateway) and private
    subnets with egress (instances and tasks), across :data:`MAX_AZS` zones, with flow logs to a log
    group.

    Public mode only: with ``network.mode=vpc`` the Foundation stack's private network replaces it
    (everything else takes an ``ec2.IVpc`` and its private subnets). One NAT gateway, not one per
    zone: the tasks reach AWS APIs (ECR, S3, Logs, Secrets Manager, ECS) through it, and the S3
    gateway endpoint carries the weights and image layers, which are nearly all the bytes.
    """
    removal = RemovalPolicy.RETAIN if settings.retain_data else RemovalPolicy.DESTROY
    vpc = ec2.Vpc(
        scope,
        "Vpc",
        max_azs=MAX_AZS,
        nat_gateways=1,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
            ec2.SubnetConfiguration(
                name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20
            ),
        ],
        gateway_endpoints={
            "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
        },
    )
    flow_logs = logs.LogGroup(
        scope,
        "VpcFlowLogs",
        removal_policy=removal,
        retention=getattr(logs.RetentionDays, LOG_RETENTION[settings.log_retention_days]),
    )
    vpc.add_flow_log(
        "FlowLogs",
        destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
        traffic_type=ec2.FlowLogTrafficType.REJECT,
    )
    return vpc
