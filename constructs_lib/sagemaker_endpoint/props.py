"""Props of :class:`constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint`: what the Model
runs, the ProductionVariant, the rolling update, and the facts and checks that go with them.

Plain values, checked by their own ``problems`` methods: the endpoint raises one error listing every
problem, and the app's settings layer runs the same checks on its keys before any construct is
built. CDK types appear in annotations only, so this module imports no ``aws_cdk`` (``voicectl``
imports the settings layer).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from constructs_lib.facts import S3Prefix
from constructs_lib.facts.cuda_compat import INFERENCE_AMIS
from constructs_lib.facts.instance_types import check_instance_type
from constructs_lib.facts.names import (
    ENDPOINT_NAME_RE,
    SECURITY_GROUP_ID_RE,
    SUBNET_ID_RE,
    VPC_ENDPOINT_ID_RE,
    check_ecr_image_uri,
    check_endpoint_name,
    check_ids,
    check_kms_key_arn,
    check_model_package_arn,
    is_token,
)
from constructs_lib.validation import Problems

if TYPE_CHECKING:
    from aws_cdk import aws_iam as iam
    from constructs import IDependable

#: The variant name when there is one ProductionVariant (the SageMaker console's and SDK's default).
VARIANT_NAME = "AllTraffic"

#: Invoke actions by caller need. InvokeEndpointWithResponseStream is authorized by
#: sagemaker:InvokeEndpoint (InvokeEndpointWithResponseStream API reference: "your IAM permissions
#: must allow the sagemaker:InvokeEndpoint action"); the bidirectional HTTP/2 stream has its own
#: action, sagemaker:InvokeEndpointWithBidirectionalStream (InvokeEndpointWithBidirectionalStream
#: API reference, SageMaker Runtime HTTP2).
INVOKE = "sagemaker:InvokeEndpoint"
INVOKE_WITH_RESPONSE_STREAM = "sagemaker:InvokeEndpointWithResponseStream"
INVOKE_BIDIRECTIONAL = "sagemaker:InvokeEndpointWithBidirectionalStream"
INVOKE_ACTIONS = (INVOKE, INVOKE_WITH_RESPONSE_STREAM, INVOKE_BIDIRECTIONAL)

#: CloudWatch Logs RetentionInDays values accepted by AWS::Logs::LogGroup -> the name of the
#: aws-cdk-lib ``aws_logs.RetentionDays`` member for it (the enum's Python members carry names, not
#: day counts).
LOG_RETENTION = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}
LOG_RETENTION_DAYS = tuple(LOG_RETENTION)
#: ModelDataDownloadTimeoutInSeconds and ContainerStartupHealthCheckTimeoutInSeconds: 60-3600 s
#: (CreateEndpointConfig).
TIMEOUT_RANGE_S = (60, 3600)
#: ProductionVariant.InferenceAmiVersion values (CreateEndpointConfig API reference; botocore's
#: SageMaker model): the GPU AMIs of :data:`constructs_lib.facts.cuda_compat.INFERENCE_AMIS`, whose
#: driver and CUDA are known.
INFERENCE_AMI_VERSIONS = tuple(INFERENCE_AMIS)
#: ProductionVariant.InstancePools: 1-5 pools, priorities 1 (first tried) to 5 (SageMaker API
#: reference, InstancePool and ProductionVariant; CloudFormation AWS::SageMaker::EndpointConfig
#: InstancePool). With pools the variant sets no InstanceType ("replace the InstanceType parameter
#: in the production variant with an InstancePools list", SageMaker developer guide, "Deploy to
#: multiple instance types with instance pools").
MAX_INSTANCE_POOLS = 5
#: VariantInstanceProvisionTimeoutInSeconds: 300-3600 s, the total time SageMaker spends
#: provisioning instances across the pools (after an insufficient-capacity error it tries the next
#: pool) before the operation fails; model download and container start-up are not part of it
#: (ProductionVariant API reference).
PROVISION_TIMEOUT_RANGE_S = (300, 3600)
#: The provisioning timeout synthesized with instance pools when none is given: 30 minutes lets
#: SageMaker work through all pools and retry while capacity frees up, and still fails a deploy well
#: within CloudFormation's wait for the Endpoint (a rolling update's time limit adds it:
#: ProductionVariant.instance_start_s).
DEFAULT_POOL_PROVISION_TIMEOUT_S = 1800
#: ProductionVariant RoutingConfig.RoutingStrategy values. LEAST_OUTSTANDING_REQUESTS sends a
#: request to the instance with the fewest in flight, which suits long streams of uneven length
#: (SageMaker developer guide, "Routing").
ROUTING_STRATEGIES = ("LEAST_OUTSTANDING_REQUESTS", "RANDOM")
#: RollingUpdatePolicy.MaximumBatchSize: 5-50 % of the variant's instance count (RollingUpdatePolicy
#: API reference).
ROLLOUT_BATCH_PERCENT_RANGE = (5, 50)
#: RollingUpdatePolicy.WaitIntervalInSeconds: 0-3600 (RollingUpdatePolicy API reference).
ROLLOUT_WAIT_RANGE_S = (0, 3600)
#: RollingUpdatePolicy.MaximumExecutionTimeoutInSeconds: 600-28800 (RollingUpdatePolicy API
#: reference).
ROLLOUT_TIMEOUT_RANGE_S = (600, 28800)


def check_model_data_s3_uri(p: Problems, prop: str, value: str) -> None:
    """An uncompressed ``S3Prefix`` ModelDataSource: ``s3://<bucket>/<prefix>``, a plain key prefix,
    since SageMaker copies every object under it to ``/opt/ml/model``."""
    if is_token(value):
        return
    try:
        prefix = S3Prefix.parse(value)
    except ValueError:
        p.add(
            prop,
            value,
            "must be 's3://<bucket>/<prefix>' with a valid bucket name (3-63 lower-case letters, "
            "digits, '.' or '-') and a non-empty prefix",
        )
        return
    if re.search(r"[*?\s]|//", prefix.prefix):
        p.add(
            prop,
            value,
            "the prefix must be a plain key prefix, without wildcards ('*', '?'), whitespace or "
            "'//'; SageMaker copies every object under it",
        )


def check_log_retention_days(p: Problems, prop: str, value: int) -> None:
    """A CloudWatch Logs retention (:data:`LOG_RETENTION_DAYS`)."""
    if value not in LOG_RETENTION_DAYS:
        p.add(prop, value, f"must be one of {', '.join(map(str, LOG_RETENTION_DAYS))}")


def check_timeout_s(p: Problems, prop: str, value: int | None) -> None:
    """A model download or container start-up timeout (:data:`TIMEOUT_RANGE_S`); None is SageMaker's
    default."""
    low, high = TIMEOUT_RANGE_S
    if value is not None and not low <= value <= high:
        p.add(prop, value, f"must be between {low} and {high} seconds")


def normalise_s3_prefix(uri: str) -> str:
    """Return ``uri`` ending with exactly one ``/`` (``s3://b/p`` -> ``s3://b/p/``), since SageMaker
    copies every object under the prefix and ``.../model`` would also match ``.../model-old/``. A
    token is returned unchanged: its producer guarantees the trailing ``/``."""
    return uri if is_token(uri) else uri.rstrip("/") + "/"


@dataclass(frozen=True)
class ImageContainer:
    """A Model from an image in ECR, optionally with uncompressed model data copied from an S3
    prefix to ``/opt/ml/model`` (ModelDataSource ``S3Prefix``, compression ``None``).

    Attributes:
        image_uri: private ECR image URI (tag or digest), in the endpoint's Region.
        model_data_s3_uri: ``s3://bucket/prefix``, normalised to end with ``/``; default: no model
            data (weights in the image or fetched by the container).
        environment: container environment variables (no secrets: DescribeModel shows them).
            Default: none.
        depends_on: resources the Model must wait for (e.g. the image copy into the repository).
            Default: none.
    """

    image_uri: str
    model_data_s3_uri: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    depends_on: Sequence[IDependable] = ()

    def problems(self, p: Problems, region: str | None = None) -> None:
        check_ecr_image_uri(p, "image_uri", self.image_uri, region)
        if self.model_data_s3_uri is not None:
            check_model_data_s3_uri(p, "model_data_s3_uri", self.model_data_s3_uri)


@dataclass(frozen=True)
class ModelPackageContainer:
    """A Model from a SageMaker model package, e.g. an AWS Marketplace listing (the seller's
    container and artifacts). Marketplace packages must run with network isolation, and are excluded
    from rolling updates.

    Attributes:
        model_package_arn: the package ARN, in the endpoint's Region.
    """

    model_package_arn: str

    def problems(self, p: Problems, region: str | None = None) -> None:
        check_model_package_arn(p, "model_package_arn", self.model_package_arn, region)


@dataclass(frozen=True)
class ProductionVariant:
    """The endpoint's ProductionVariant (one variant takes all traffic).

    Attributes:
        instance_type: e.g. ``ml.g6.4xlarge`` (required).
        initial_instance_count: instances at creation. Default 1.
        variant_name: default ``AllTraffic``.
        model_data_download_timeout_s: ModelDataDownloadTimeoutInSeconds, 60-3600; default
            SageMaker's.
        container_startup_timeout_s: ContainerStartupHealthCheckTimeoutInSeconds, 60-3600; default
            SageMaker's.
        inference_ami_version: InferenceAmiVersion (driver and CUDA of the host); default
            SageMaker's.
        routing_strategy: default ``LEAST_OUTSTANDING_REQUESTS`` (see :data:`ROUTING_STRATEGIES`).
        instance_pools: capacity fallback: the instance types the variant may run, in priority order
            (1-5 distinct types, synthesized as InstancePools with priorities 1, 2, ...; the first
            must be ``instance_type``). When SageMaker cannot get capacity of one type, at creation,
            update or scale-out, it tries the next. Default: none (``instance_type`` only).
            Everything sized by the instance (model fit, alarm thresholds, quotas) must hold for
            every type in the list.
        provision_timeout_s: VariantInstanceProvisionTimeoutInSeconds, 300-3600. Default: with
            instance pools :data:`DEFAULT_POOL_PROVISION_TIMEOUT_S`, without them SageMaker's.
    """

    instance_type: str
    initial_instance_count: int = 1
    variant_name: str = VARIANT_NAME
    model_data_download_timeout_s: int | None = None
    container_startup_timeout_s: int | None = None
    inference_ami_version: str | None = None
    routing_strategy: str = "LEAST_OUTSTANDING_REQUESTS"
    instance_pools: Sequence[str] = ()
    provision_timeout_s: int | None = None

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Every instance type the variant may run: the instance pools in priority order, else
        ``instance_type``."""
        return tuple(self.instance_pools) or (self.instance_type,)

    @property
    def instance_provision_timeout_s(self) -> int | None:
        """``provision_timeout_s`` with its default applied (None: SageMaker's own, not
        synthesized)."""
        if self.provision_timeout_s is None and self.instance_pools:
            return DEFAULT_POOL_PROVISION_TIMEOUT_S
        return self.provision_timeout_s

    def problems(self, p: Problems) -> None:
        check_instance_type(p, "instance_type", self.instance_type)
        self._pool_problems(p)
        if self.initial_instance_count < 1:
            p.add(
                "initial_instance_count",
                self.initial_instance_count,
                "must be a positive whole number",
            )
        if not ENDPOINT_NAME_RE.fullmatch(self.variant_name):
            p.add(
                "variant_name",
                self.variant_name,
                "must be 1-63 letters, digits or '-', starting and ending with "
                "a letter or digit (SageMaker VariantName)",
            )
        check_timeout_s(p, "model_data_download_timeout_s", self.model_data_download_timeout_s)
        check_timeout_s(p, "container_startup_timeout_s", self.container_startup_timeout_s)
        if (
            self.inference_ami_version is not None
            and self.inference_ami_version not in INFERENCE_AMI_VERSIONS
        ):
            p.add(
                "inference_ami_version",
                self.inference_ami_version,
                f"must be one of {', '.join(INFERENCE_AMI_VERSIONS)}",
            )
        if self.routing_strategy not in ROUTING_STRATEGIES:
            p.add(
                "routing_strategy",
                self.routing_strategy,
                f"must be one of {', '.join(ROUTING_STRATEGIES)}",
            )

    def _pool_problems(self, p: Problems) -> None:
        pools = list(self.instance_pools)
        low, high = PROVISION_TIMEOUT_RANGE_S
        if self.provision_timeout_s is not None and not low <= self.provision_timeout_s <= high:
            p.add(
                "provision_timeout_s",
                self.provision_timeout_s,
                f"must be between {low} and {high} seconds "
                "(VariantInstanceProvisionTimeoutInSeconds)",
            )
        if not pools:
            return
        for instance_type in pools:
            if not is_token(instance_type):
                check_instance_type(p, "instance_pools", instance_type)
        duplicates = sorted({t for t in pools if pools.count(t) > 1})
        if duplicates:
            p.add(
                "instance_pools",
                pools,
                f"lists {', '.join(duplicates)} more than once; each instance type is one pool",
            )
        if len(pools) > MAX_INSTANCE_POOLS:
            p.add(
                "instance_pools",
                pools,
                f"must list at most {MAX_INSTANCE_POOLS} instance types (InstancePools)",
            )
        if pools[0] != self.instance_type:
            p.add(
                "instance_pools",
                pools,
                f"must start with {p.ref('instance_type', self.instance_type)}, the "
                "priority-1 pool (set both: the instance type is the one tried first)",
            )

    @property
    def instance_start_s(self) -> int:
        """Longest time one instance may take to start: capacity provisioning (when its timeout is
        synthesized), model download and container start-up timeouts (SageMaker's default counted as
        the 3600 s maximum, an upper bound)."""
        high = TIMEOUT_RANGE_S[1]
        return (
            (self.instance_provision_timeout_s or 0)
            + (self.model_data_download_timeout_s or high)
            + (self.container_startup_timeout_s or high)
        )


def rolling_update_timeout_s(
    batch_percent: int | None, instance_start_s: int, wait_s: int, instances: int = 1
) -> int:
    """Time limit of a rolling update, seconds: ``ceil(100 / batch_percent)`` batches (one instance
    per batch when ``batch_percent`` is None: ``instances`` batches), each allowed
    ``instance_start_s`` (model download plus container start-up timeouts) and ``wait_s``, within
    600-28800."""
    batches = math.ceil(100 / batch_percent) if batch_percent else max(1, instances)
    low, high = ROLLOUT_TIMEOUT_RANGE_S
    return max(low, min(high, batches * (instance_start_s + wait_s)))


@dataclass(frozen=True)
class RollingUpdate:
    """Rolling deployment of EndpointConfig changes (Endpoint
    ``DeploymentConfig.RollingUpdatePolicy``).

    SageMaker starts a batch of new instances, shifts traffic to them, watches the endpoint's
    rollback alarms for ``wait_s`` (the baking period), then removes a batch of old instances, until
    all are replaced; an alarm in ALARM rolls the whole update back. The rollback alarms are those
    added with
    :meth:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint.add_rollback_alarm`
    (``add_alarms`` adds the 5XX error-rate alarm when its thresholds set a rollback percent).
    Marketplace containers are excluded from rolling updates (SageMaker developer guide, deployment
    guardrails "Exclusions").

    Attributes:
        batch_percent: instances per step as a percent of the variant's count (``CAPACITY_PERCENT``,
            5-50). Default
            None: one instance per step (``INSTANCE_COUNT`` 1). RollingUpdatePolicy allows 5-50 % of
                the variant's
            instances and says nothing of how SageMaker rounds a percent below one instance (25 % of
            one instance: unconfirmed), so the default states the batch as the one instance it
            means.
        wait_s: baking period per step (WaitIntervalInSeconds, 0-3600). Default 600.
        timeout_s: limit of the whole update (MaximumExecutionTimeoutInSeconds, 600-28800). Default:
            computed by :func:`rolling_update_timeout_s` from the variant's timeouts.
    """

    batch_percent: int | None = None
    wait_s: int = 600
    timeout_s: int | None = None

    def problems(self, p: Problems) -> None:
        low, high = ROLLOUT_BATCH_PERCENT_RANGE
        if self.batch_percent is not None and not low <= self.batch_percent <= high:
            p.add(
                "batch_percent",
                self.batch_percent,
                f"must be between {low} and {high} (percent of the variant's "
                "instances; RollingUpdatePolicy MaximumBatchSize)",
            )
        low, high = ROLLOUT_WAIT_RANGE_S
        if not low <= self.wait_s <= high:
            p.add(
                "wait_s",
                self.wait_s,
                f"must be between {low} and {high} seconds (RollingUpdatePolicy "
                "WaitIntervalInSeconds)",
            )
        low, high = ROLLOUT_TIMEOUT_RANGE_S
        if self.timeout_s is not None and not low <= self.timeout_s <= high:
            p.add(
                "timeout_s",
                self.timeout_s,
                f"must be between {low} and {high} seconds (RollingUpdatePolicy "
                "MaximumExecutionTimeoutInSeconds)",
            )

    def timeout_for(self, variant: ProductionVariant, max_instances: int | None = None) -> int:
        """``timeout_s``, or the limit :func:`rolling_update_timeout_s` gives for ``variant`` at up
        to ``max_instances`` instances (default: its initial count)."""
        if self.timeout_s is not None:
            return self.timeout_s
        return rolling_update_timeout_s(
            self.batch_percent,
            variant.instance_start_s,
            self.wait_s,
            max_instances or variant.initial_instance_count,
        )

    def maximum_batch_size(self) -> tuple[str, int]:
        """RollingUpdatePolicy ``MaximumBatchSize`` as ``(Type, Value)``."""
        if self.batch_percent is None:
            return "INSTANCE_COUNT", 1
        return "CAPACITY_PERCENT", self.batch_percent


@dataclass(frozen=True)
class RealtimeEndpointProps:
    """Props of :class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint`.

    Attributes:
        container: what the Model runs (required).
        variant: the ProductionVariant (required: at least its instance type).
        endpoint_name: EndpointName callers use; it also names the log group
            ``/aws/sagemaker/Endpoints/<name>``.
            Default: a name made from the construct path (stable across deployments, unique in the
                app).
        role: the execution role SageMaker assumes for the Model. The endpoint grants it writes to
            its log group and, once rollback alarms are added, cloudwatch:DescribeAlarms on them;
            everything else (image, model data, metrics) is the caller's. Default: a new
            :class:`~constructs_lib.sagemaker_endpoint.execution_role.SageMakerExecutionRole` that
            may also pull the image, read the model data (when their ECR URI and S3 URI are plain
            strings at synth) and put the instance metrics.
        enable_network_isolation: the container gets no network access. Default: True for a model
            package (Marketplace packages require it), False for an image.
        volume_kms_key_arn: KMS key (or alias) ARN for the instances' ML storage volumes
            (EndpointConfig ``KmsKeyId``), applied only when no instance type of the variant
            (instance pools included) has local NVMe
            storage: CreateEndpointConfig refuses a key there, and the instance's hardware module
                encrypts those
            volumes (:func:`constructs_lib.facts.instance_types.volume_key_refusal`; synth says so
            in an info annotation). Default: AWS-managed encryption.
        log_retention_days: retention of the endpoint's log group (:data:`LOG_RETENTION_DAYS`).
            Default 30.
        log_kms_key_arn: KMS key ARN that encrypts the endpoint's log group (its key policy must let
            CloudWatch Logs use it for this log group). Default: CloudWatch Logs' own encryption.
        rolling_update: how EndpointConfig changes roll out. Default: SageMaker's (a new fleet, then
            all traffic at once).
        invoke_actions: what
            :meth:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint.grant_invoke` and
            the caller policy allow (:data:`INVOKE_ACTIONS`). Default: ``sagemaker:InvokeEndpoint``
            (which also authorizes response streaming).
        description: words for the caller policy's description, e.g. "Voxtral speech-to-text".
            Default "SageMaker real-time".
        vpc_subnets: subnet ids of the Model's ``VpcConfig`` (private subnets in at least two
            Availability Zones: SageMaker developer guide, "Give SageMaker AI Hosted Endpoints
            Access to Resources in Your Amazon VPC").
            Default: none (SageMaker-managed networking).
        security_groups: security group ids of the Model's ``VpcConfig``; given exactly when
            ``vpc_subnets`` is.
        require_source_vpce: VPC endpoint ids (``vpce-...``); the caller policy then allows invoking
            only through one of them (``aws:SourceVpce``). Default: any network path.
        pool_environment: ``{instance type: environment}`` for instance pools whose instances need
            other container settings than the variant's Model (e.g. a stream cap sized for that
            GPU). Each such pool gets a Model of its own, the variant's Model with ``environment``
            merged over the container's, named in the pool's ``ModelNameOverride`` ("a SageMaker
            model to use for this instance pool instead of the model specified for the production
            variant. Use this to deploy a different model optimized for the instance type in this
            pool", SageMaker API reference, InstancePool). Keys: instance pools after the first (the
            first pool runs the variant's Model). Default: every pool runs the variant's Model.
    """

    container: ImageContainer | ModelPackageContainer
    variant: ProductionVariant
    endpoint_name: str | None = None
    role: iam.IRole | None = None
    enable_network_isolation: bool | None = None
    volume_kms_key_arn: str | None = None
    log_retention_days: int = 30
    log_kms_key_arn: str | None = None
    rolling_update: RollingUpdate | None = None
    invoke_actions: Sequence[str] = (INVOKE,)
    description: str = "SageMaker real-time"
    vpc_subnets: Sequence[str] = ()
    security_groups: Sequence[str] = ()
    require_source_vpce: Sequence[str] = ()
    pool_environment: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def network_isolation(self) -> bool:
        """``enable_network_isolation`` with its default applied."""
        if self.enable_network_isolation is not None:
            return self.enable_network_isolation
        return isinstance(self.container, ModelPackageContainer)

    def problems(self, p: Problems, region: str | None = None) -> None:
        """Every problem of these props; ``region`` (the stack's, None when unknown) for ARNs and
        image URIs."""
        if self.endpoint_name is not None:
            check_endpoint_name(p, "endpoint_name", self.endpoint_name)
        self.container.problems(p, region)
        self.variant.problems(p)
        if self.volume_kms_key_arn is not None:
            check_kms_key_arn(p, "volume_kms_key_arn", self.volume_kms_key_arn, region, alias=True)
        check_log_retention_days(p, "log_retention_days", self.log_retention_days)
        if self.log_kms_key_arn is not None:
            check_kms_key_arn(p, "log_kms_key_arn", self.log_kms_key_arn, region, alias=False)
        if self.rolling_update is not None:
            self.rolling_update.problems(p)
            if isinstance(self.container, ModelPackageContainer):
                p.add(
                    "rolling_update",
                    "RollingUpdate(...)",
                    "must be None for a model package: Marketplace containers are excluded from "
                    "rolling updates (SageMaker deployment guardrails, Exclusions)",
                )
        if (
            isinstance(self.container, ModelPackageContainer)
            and self.enable_network_isolation is False
        ):
            p.add(
                "enable_network_isolation",
                False,
                "must be true (or unset) for a model package: Marketplace "
                "packages run only without network access",
            )
        if bool(self.vpc_subnets) != bool(self.security_groups):
            p.note(
                f"{p.ref('vpc_subnets', list(self.vpc_subnets))} and "
                f"{p.ref('security_groups', list(self.security_groups))}: give both (a "
                "VpcConfig) or neither"
            )
        for prop, values, pattern, form in (
            (
                "vpc_subnets",
                self.vpc_subnets,
                SUBNET_ID_RE,
                "subnet ids such as 'subnet-0123456789abcdef0'",
            ),
            (
                "security_groups",
                self.security_groups,
                SECURITY_GROUP_ID_RE,
                "security group ids such as 'sg-0123456789abcdef0'",
            ),
            (
                "require_source_vpce",
                self.require_source_vpce,
                VPC_ENDPOINT_ID_RE,
                "VPC endpoint ids such as 'vpce-0123456789abcdef0'",
            ),
        ):
            check_ids(p, prop, values, pattern, form)
        self._pool_environment_problems(p)
        unknown = [action for action in self.invoke_actions if action not in INVOKE_ACTIONS]
        if unknown or not self.invoke_actions:
            p.add(
                "invoke_actions",
                list(self.invoke_actions),
                f"must be one or more of {', '.join(INVOKE_ACTIONS)}",
            )

    def _pool_environment_problems(self, p: Problems) -> None:
        """The rules of a pool's own Model (InstancePool ``ModelNameOverride``), each with its
        source.

        - ``ModelNameOverride`` is a member of ``InstancePool`` only (SageMaker API reference,
          InstancePool; CloudFormation AWS::SageMaker::EndpointConfig InstancePool), so an override
          needs instance pools and names one of them.
        - Its value is a Model name (``ModelName``: at most 63 characters,
          ``[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?``): the construct passes the generated name of
          a Model it creates (``Fn::GetAtt``), so it always is one.
        - Whether the override Model may differ from the variant's in image, execution role,
          VpcConfig or network isolation, and whether bidirectional streaming, ``KmsKeyId`` or
          ``ManagedInstanceScaling`` restrict overrides, the API reference and the developer guide
          ("Deploy to multiple instance types with instance pools") do not say (unconfirmed). The
          construct takes the safe reading: the pool's Model is the variant's Model in everything
          but container environment variables, so whatever holds for the one holds for the other.
        - Ours: not for a model package (the environment is the seller's; a pool's Model would be
          another package); not the priority-1 pool (it runs the variant's Model: give its
          environment in ``container.environment``).
        """
        if not self.pool_environment:
            return
        pools = list(self.variant.instance_pools)
        shown = {name: dict(env) for name, env in self.pool_environment.items()}
        if not pools:
            p.add(
                "pool_environment",
                shown,
                "needs instance pools (variant.instance_pools): ModelNameOverride is a "
                "member of InstancePool only (SageMaker API reference, InstancePool)",
            )
            return
        if isinstance(self.container, ModelPackageContainer):
            p.add(
                "pool_environment",
                shown,
                "must be empty for a model package: a pool's Model differs from the "
                "variant's only in environment variables, which a package has not",
            )
        for name, environment in self.pool_environment.items():
            if name not in pools:
                p.add("pool_environment", name, f"is not one of the instance pools {pools}")
            elif name == pools[0]:
                p.add(
                    "pool_environment",
                    name,
                    "is the priority-1 pool, which runs the variant's Model: give its "
                    "environment in container.environment",
                )
            if not environment or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
            ):
                p.add(
                    "pool_environment",
                    name,
                    "needs a non-empty map of environment variable names to strings",
                )
