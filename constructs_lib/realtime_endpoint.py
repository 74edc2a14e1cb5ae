"""RealtimeEndpoint: Model, EndpointConfig and Endpoint of one SageMaker real-time endpoint, with its log group,
outputs and an invoke policy for callers.

The Model and the EndpointConfig carry no physical names: CloudFormation replaces them whenever a property that
requires replacement changes (image, instance type, ...), and a fixed name would collide with the old resource
("already exists"). The Endpoint keeps the stable, configured name that callers use.

Updates: when the EndpointConfig changes, the Endpoint's DeploymentConfig (optional :class:`RollingUpdate`) replaces
instances in batches, bakes each batch while watching alarms and rolls back if one fires. For an autoscaled variant,
``RetainAllVariantProperties`` keeps the instance count autoscaling chose instead of resetting it to
``InitialInstanceCount`` (UpdateEndpoint API reference); a fixed-size variant does not set it, so an update brings the
count back to ``InitialInstanceCount``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from aws_cdk import CfnOutput, RemovalPolicy, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IDependable

from constructs_lib.execution_role import SageMakerExecutionRole

#: The single ProductionVariant of every endpoint of this app.
VARIANT_NAME = "AllTraffic"

#: Invoke actions by caller need. InvokeEndpointWithResponseStream is authorized by sagemaker:InvokeEndpoint
#: (InvokeEndpointWithResponseStream API reference: "your IAM permissions must allow the sagemaker:InvokeEndpoint
#: action"); the bidirectional HTTP/2 stream has its own action, sagemaker:InvokeEndpointWithBidirectionalStream
#: (InvokeEndpointWithBidirectionalStream API reference, SageMaker Runtime HTTP2).
INVOKE = "sagemaker:InvokeEndpoint"
INVOKE_WITH_RESPONSE_STREAM = "sagemaker:InvokeEndpointWithResponseStream"
INVOKE_BIDIRECTIONAL = "sagemaker:InvokeEndpointWithBidirectionalStream"

#: CloudWatch Logs retention in days -> the CDK enum member (RetentionInDays values of AWS::Logs::LogGroup).
RETENTION_DAYS: dict[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS, 5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK, 14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS, 120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS, 180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS, 545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS, 1096: logs.RetentionDays.THREE_YEARS, 1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS, 2557: logs.RetentionDays.SEVEN_YEARS, 2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS, 3653: logs.RetentionDays.TEN_YEARS,
}


@dataclass(frozen=True)
class ImageContainer:
    """A Model from our own image with uncompressed model data copied from an S3 prefix to ``/opt/ml/model``.

    Attributes:
        image_uri: ECR image URI (tag or digest).
        model_data_s3_uri: ``s3://bucket/prefix``; normalised to end with ``/`` (SageMaker copies every object under
            the prefix, so ``.../model`` would also match ``.../model-old/``).
        environment: container environment variables (no secrets: they are visible in DescribeModel).
        depends_on: resources that must exist before the Model (e.g. the image copy).
    """

    image_uri: str
    model_data_s3_uri: str
    environment: Mapping[str, str] = field(default_factory=dict)
    depends_on: Sequence[IDependable] = ()


@dataclass(frozen=True)
class ModelPackageContainer:
    """A Model from an AWS Marketplace model package (the seller's container and artifacts)."""

    model_package_arn: str


#: RollingUpdatePolicy.MaximumExecutionTimeoutInSeconds: 600-28800 (RollingUpdatePolicy API reference).
ROLLOUT_TIMEOUT_RANGE_S = (600, 28800)


@dataclass(frozen=True)
class RollingUpdate:
    """Rolling deployment of EndpointConfig changes (Endpoint ``DeploymentConfig.RollingUpdatePolicy``).

    SageMaker starts a batch of new instances, shifts traffic to them, watches ``rollback_alarms`` for ``wait_s``
    (the baking period), then removes a batch of old instances, until all are replaced; an alarm in ALARM rolls
    the whole update back. Marketplace containers are excluded from rolling updates (SageMaker developer guide,
    deployment guardrails "Exclusions"), so only endpoints that run our own image use one.

    Attributes:
        batch_percent: instances per step, percent of the variant's count (``CAPACITY_PERCENT``, 5-50); a percent
            rather than a count stays valid whatever count autoscaling has reached.
        wait_s: baking period per step (WaitIntervalInSeconds, 0-3600).
        timeout_s: limit of the whole update (MaximumExecutionTimeoutInSeconds, 600-28800); see
            :func:`rolling_update_timeout_s`.
        rollback_alarms: alarms that roll the update back (they must exist in the endpoint's account and region).
    """

    batch_percent: int
    wait_s: int
    timeout_s: int
    rollback_alarms: Sequence[cloudwatch.IAlarm]


def rolling_update_timeout_s(batch_percent: int, instance_start_s: int, wait_s: int) -> int:
    """Time limit of a rolling update, seconds: ``ceil(100 / batch_percent)`` batches, each allowed
    ``instance_start_s`` (model download plus container start-up timeouts) and ``wait_s``, within 600-28800."""
    batches = math.ceil(100 / batch_percent)
    low, high = ROLLOUT_TIMEOUT_RANGE_S
    return max(low, min(high, batches * (instance_start_s + wait_s)))


@dataclass(frozen=True)
class RealtimeEndpointProps:
    """Props of :class:`RealtimeEndpoint`.

    Attributes:
        endpoint_name: stable EndpointName (callers use it; also names the log group).
        container: what the Model runs.
        execution_role: the role SageMaker assumes for the Model; this construct grants it writes to the log group.
        instance_type: ProductionVariant instance type, e.g. ``ml.g6.4xlarge``.
        initial_instance_count: instances at creation.
        model_data_download_timeout_s: ModelDataDownloadTimeoutInSeconds (60-3600).
        container_startup_timeout_s: ContainerStartupHealthCheckTimeoutInSeconds (60-3600).
        inference_ami_version: ProductionVariant InferenceAmiVersion, or None for SageMaker's default.
        enable_network_isolation: the container gets no network access (required for Marketplace packages).
        volume_kms_key_arn: KMS key for the ML storage volume, or None for AWS-managed encryption.
        log_retention_days: retention of ``/aws/sagemaker/Endpoints/<name>`` in days (a key of RETENTION_DAYS).
        invoke_actions: IAM actions the caller policy allows on this endpoint.
        description: one line for the invoke policy and outputs.
        rolling_update: how EndpointConfig changes roll out, or None for SageMaker's default (a new fleet, then all
            traffic at once).
        autoscaled: a scalable target manages the variant's instance count. True sets RetainAllVariantProperties,
            so an update keeps the count autoscaling chose; False leaves it unset, so an update sets the count to
            InitialInstanceCount (otherwise a switch to a fixed size, min = max instances, would keep the old
            autoscaled count for ever; VariantProperty, CloudFormation and UpdateEndpoint references).
    """

    endpoint_name: str
    container: ImageContainer | ModelPackageContainer
    execution_role: SageMakerExecutionRole
    instance_type: str
    initial_instance_count: int
    model_data_download_timeout_s: int
    container_startup_timeout_s: int
    inference_ami_version: str | None
    enable_network_isolation: bool
    volume_kms_key_arn: str | None
    log_retention_days: int
    invoke_actions: Sequence[str]
    description: str
    rolling_update: RollingUpdate | None = None
    autoscaled: bool = False


def _deployment_config(rolling: RollingUpdate | None) -> sagemaker.CfnEndpoint.DeploymentConfigProperty | None:
    """The Endpoint's DeploymentConfig for ``rolling`` (None: no DeploymentConfig)."""
    if rolling is None:
        return None
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
            maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=rolling.batch_percent),
            wait_interval_in_seconds=rolling.wait_s,
            maximum_execution_timeout_in_seconds=rolling.timeout_s,
            # No RollbackMaximumBatchSize: a rollback brings the whole old fleet back at once, the fastest recovery.
        ),
        auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=alarm.alarm_name) for alarm in rolling.rollback_alarms]
        ),
    )


def normalise_s3_prefix(uri: str) -> str:
    """Return ``uri`` ending with exactly one ``/`` (``s3://b/p`` -> ``s3://b/p/``). A token (resolved at deploy
    time) is returned unchanged: its producer guarantees the trailing ``/``."""
    return uri if Token.is_unresolved(uri) else uri.rstrip("/") + "/"


class RealtimeEndpoint(Construct):
    """One SageMaker real-time endpoint with a single ``AllTraffic`` variant.

    Resources: ``AWS::Logs::LogGroup`` ``/aws/sagemaker/Endpoints/<name>`` (created here so that destroy removes it
    and retention is ours), ``AWS::SageMaker::Model``, ``AWS::SageMaker::EndpointConfig`` (least-outstanding-requests
    routing), ``AWS::SageMaker::Endpoint`` and an ``AWS::IAM::ManagedPolicy`` that callers attach to invoke this
    endpoint only.

    Attributes:
        endpoint_name: the EndpointName.
        endpoint: the CfnEndpoint (``ref`` is its ARN).
        endpoint_config: the CfnEndpointConfig.
        model: the CfnModel.
        log_group: the endpoint's log group.
        invoke_policy: the managed policy for callers.
    """

    def __init__(self, scope: Construct, construct_id: str, props: RealtimeEndpointProps) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = props.endpoint_name

        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            log_group_name=f"/aws/sagemaker/Endpoints/{props.endpoint_name}",
            retention=RETENTION_DAYS[props.log_retention_days],
            # Always deleted with the stack, whatever retain_data says: the group has the fixed name SageMaker
            # writes to, so a retained group would make the next deploy of this endpoint fail ("already exists").
            removal_policy=RemovalPolicy.DESTROY,
        )
        props.execution_role.grant_log_write(self.log_group)

        container = props.container
        if isinstance(container, ImageContainer):
            primary = sagemaker.CfnModel.ContainerDefinitionProperty(
                image=container.image_uri,
                mode="SingleModel",
                environment=dict(container.environment),
                model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                    s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                        s3_uri=normalise_s3_prefix(container.model_data_s3_uri),
                        s3_data_type="S3Prefix",
                        compression_type="None",
                    )
                ),
            )
        else:
            primary = sagemaker.CfnModel.ContainerDefinitionProperty(model_package_name=container.model_package_arn)

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=props.execution_role.role.role_arn,
            primary_container=primary,
            enable_network_isolation=props.enable_network_isolation,
        )
        # The role's policy must exist before SageMaker creates the Model (it checks image and data access).
        self.model.node.add_dependency(props.execution_role)
        if isinstance(container, ImageContainer):
            for dependency in container.depends_on:
                self.model.node.add_dependency(dependency)

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            kms_key_id=props.volume_kms_key_arn,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=props.instance_type,
                    initial_instance_count=props.initial_instance_count,
                    initial_variant_weight=1.0,
                    model_data_download_timeout_in_seconds=props.model_data_download_timeout_s,
                    container_startup_health_check_timeout_in_seconds=props.container_startup_timeout_s,
                    inference_ami_version=props.inference_ami_version,
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy="LEAST_OUTSTANDING_REQUESTS"
                    ),
                )
            ],
        )

        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=props.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            deployment_config=_deployment_config(props.rolling_update),
            retain_all_variant_properties=props.autoscaled,
        )
        # SageMaker starts writing logs as soon as instances boot: the group (and its retention) must exist first.
        self.endpoint.node.add_dependency(self.log_group)

        self.invoke_policy = iam.ManagedPolicy(
            self,
            "InvokePolicy",
            description=f"Invoke the {props.description} endpoint {props.endpoint_name} (and nothing else)",
            statements=[
                iam.PolicyStatement(
                    sid="InvokeEndpoint", actions=list(props.invoke_actions), resources=[self.endpoint_arn]
                )
            ],
        )
        if INVOKE_BIDIRECTIONAL in props.invoke_actions:
            # cfn-lint's IAM action list predates bidirectional streaming (W3037 "not one of ..."); the action is
            # documented in the InvokeEndpointWithBidirectionalStream API reference.
            policy_resource = self.invoke_policy.node.default_child
            policy_resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3037"]}})

    @property
    def endpoint_arn(self) -> str:
        """ARN of the endpoint (``Ref`` of AWS::SageMaker::Endpoint; SageMaker lower-cases the name in ARNs)."""
        return self.endpoint.ref

    def grant_invoke(self, grantee: iam.IGrantable, actions: Sequence[str] = (INVOKE,)) -> iam.Grant:
        """Allow ``grantee`` the given invoke ``actions`` on this endpoint only."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=list(actions), resource_arns=[self.endpoint_arn])

    def add_outputs(self, prefix: str, extra: Mapping[str, tuple[str, str]] = {}) -> None:
        """Add stack outputs: ``<prefix>EndpointName``, ``<prefix>Region``, ``<prefix>InvokePolicyArn`` and ``extra``
        (``{name: (value, description)}``)."""
        stack = Stack.of(self)
        outputs = {
            "EndpointName": (self.endpoint.attr_endpoint_name, "SageMaker EndpointName"),
            "Region": (stack.region, "Region of the endpoint"),
            "InvokePolicyArn": (self.invoke_policy.managed_policy_arn, "Managed policy that lets a caller invoke this endpoint"),
            "LogGroupName": (self.log_group.log_group_name, "CloudWatch log group of the endpoint's containers"),
            **extra,
        }
        for name, (value, description) in outputs.items():
            CfnOutput(stack, f"{prefix}{name}", value=value, description=description)
