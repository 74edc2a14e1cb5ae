"""RealtimeEndpoint: Model, EndpointConfig and Endpoint of one SageMaker real-time endpoint, with
its log group and a caller policy; metric helpers, grants, autoscaling and alarms as methods. Props:
:mod:`constructs_lib.sagemaker_endpoint.props`.

Instance pools that need other container settings (``RealtimeEndpointProps.pool_environment``, e.g.
a stream cap sized for that GPU) each get a Model of their own, named in the pool's
``ModelNameOverride``: the variant's Model in everything but environment variables (same image,
data, role, network isolation and VpcConfig).

The Model and the EndpointConfig carry no physical names: CloudFormation replaces them whenever a
property that requires replacement changes (image, instance type, ...), and a fixed name would
collide with the old resource ("already exists"). The Endpoint keeps the stable name that callers
use.

Updates: when the EndpointConfig changes, the Endpoint's DeploymentConfig (optional
``RollingUpdate``) replaces instances in batches, bakes each batch while watching the rollback
alarms and rolls back if one fires. A variant with autoscaling
(:meth:`RealtimeEndpoint.auto_scale_instance_count`) sets ``RetainAllVariantProperties``, so an
update keeps the instance count autoscaling chose instead of resetting it to
``InitialInstanceCount`` (UpdateEndpoint API reference); a fixed-size variant does not, so an update
brings the count back to ``InitialInstanceCount`` (otherwise a switch to a fixed size would keep the
old autoscaled count for ever).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import cast

from aws_cdk import (
    Acknowledgment,
    Annotations,
    ArnFormat,
    CfnOutput,
    CfnResource,
    Names,
    RemovalPolicy,
    Stack,
    Token,
    Validations,
    aws_cloudwatch as cloudwatch,
    aws_iam as iam,
    aws_kms as kms,
    aws_logs as logs,
    aws_sagemaker as sagemaker,
    aws_sns as sns,
)
from constructs import Construct, DependencyGroup, IDependable

from constructs_lib.facts import S3Prefix, instance_types as catalogue
from constructs_lib.facts.names import ECR_IMAGE_RE, is_token, repository_arn_from_image_uri
from constructs_lib.monitoring.alarms import EndpointAlarms, EndpointAlarmsProps
from constructs_lib.monitoring.metrics import EndpointMetrics
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds
from constructs_lib.nag import acknowledge_compliance, nag_render, skip_checkov
from constructs_lib.sagemaker_endpoint.execution_role import (
    SAGEMAKER_INSTANCE_METRICS_NAMESPACE,
    SageMakerExecutionRole,
    grant_vpc_access,
)
from constructs_lib.sagemaker_endpoint.props import (
    INVOKE,
    INVOKE_BIDIRECTIONAL,
    LOG_RETENTION,
    VARIANT_NAME,
    ImageContainer,
    ModelPackageContainer,
    RealtimeEndpointProps,
    RollingUpdate,
    normalise_s3_prefix,
)
from constructs_lib.sagemaker_endpoint.scaling import ScalableInstanceCount
from constructs_lib.validation import Problems

#: Where SageMaker writes an endpoint's container logs (SageMaker developer guide, "Log Amazon
#: SageMaker AI events with Amazon CloudWatch").
LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"


class EndpointBase(Construct, EndpointMetrics):
    """What a :class:`RealtimeEndpoint` and an imported endpoint share (an
    :class:`~constructs_lib.sagemaker_endpoint.interface.IEndpoint`): names, ARN, the ``metric_*``
    helpers (:class:`~constructs_lib.monitoring.metrics.EndpointMetrics`), :meth:`grant_invoke`,
    :meth:`add_alarms` and :meth:`auto_scale_instance_count`.

    Attributes:
        endpoint_name: the EndpointName.
        endpoint_arn: the endpoint's ARN.
        variant_name: the variant the metric helpers and autoscaling address.
        instance_type: the variant's instance type, or None when unknown (an imported endpoint
            without it).
        instance_types: every instance type the variant may run (its instance pools, else
            ``instance_type``); empty when unknown. Alarms scale by the smallest of them
            (:func:`constructs_lib.facts.instance_types.alarm_capacity`).
        initial_instance_count: the variant's initial count, or None when unknown.
        invoke_actions: what :meth:`grant_invoke` allows by default.
        rolling_update: the endpoint's rolling update, or None.
        when_in_service: a dependable met once CloudFormation created the Endpoint (it waits for
            InService), or None for an imported endpoint.
        scalable_instance_count: the variant's autoscaling, once made
            (:meth:`auto_scale_instance_count`).
    """

    endpoint_name: str
    endpoint_arn: str
    variant_name: str

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        instance_type: str | None,
        initial_instance_count: int | None,
        invoke_actions: Sequence[str],
        instance_types: Sequence[str] = (),
    ) -> None:
        # The names come from the subclass (EndpointMetrics.__init__), once it knows them.
        Construct.__init__(self, scope, construct_id)
        self.instance_type = instance_type
        self.instance_types: tuple[str, ...] = tuple(instance_types) or (
            (instance_type,) if instance_type else ()
        )
        self.initial_instance_count = initial_instance_count
        self.invoke_actions = tuple(invoke_actions)
        self.rolling_update: RollingUpdate | None = None
        self.when_in_service: IDependable | None = None
        self.scalable_instance_count: ScalableInstanceCount | None = None

    def grant_invoke(self, grantee: iam.IGrantable, *actions: str) -> iam.Grant:
        """Allow ``grantee`` to invoke this endpoint only: ``actions`` (default:
        :attr:`invoke_actions`) on its ARN."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(actions or self.invoke_actions),
            resource_arns=[self.endpoint_arn],
        )

    def add_alarms(
        self,
        thresholds: EndpointAlarmThresholds | None = None,
        *,
        topic: sns.ITopic | None = None,
        bridge: BridgeAlarmThresholds | None = None,
    ) -> EndpointAlarms:
        """Add the endpoint's alarms (construct id ``Alarms``): errors, latency, utilisation,
        health, and the bridge's when ``bridge`` is given; each sends ALARM and OK to ``topic``. See
        :class:`~constructs_lib.monitoring.alarms.EndpointAlarms`."""
        return EndpointAlarms(
            self,
            "Alarms",
            EndpointAlarmsProps(
                endpoint=self,  # pyright: ignore[reportArgumentType] (a Construct's node is a property; IEndpoint's an attribute)
                thresholds=thresholds or EndpointAlarmThresholds(),
                bridge=bridge,
                topic=topic,
            ),
        )

    def auto_scale_instance_count(
        self, *, min_capacity: int, max_capacity: int
    ) -> ScalableInstanceCount:
        """Let Application Auto Scaling set the variant's instance count within
        ``min_capacity``-``max_capacity`` (construct id ``InstanceCount``); add target-tracking
        policies to what it returns.

        Raises:
            constructs_lib.validation.PropsError: a bad range, or the count already scales (one
                scalable target per variant).
        """
        return ScalableInstanceCount(
            self,
            "InstanceCount",
            endpoint=self,  # pyright: ignore[reportArgumentType] (a Construct's node is a property; IEndpoint's an attribute)
            min_capacity=min_capacity,
            max_capacity=max_capacity,
        )

    def add_rollback_alarm(self, alarm: cloudwatch.IAlarm) -> None:
        """Roll updates back while ``alarm`` is in ALARM. Only an endpoint this app defines with a
        rolling update.

        Raises:
            ValueError: the endpoint has no rolling update (or is imported).
        """
        raise ValueError(
            f"{self.node.path}: rollback alarms need a RealtimeEndpoint with a rolling_update"
        )

    def register_scaling(self, scaling: ScalableInstanceCount) -> None:
        """Called by :class:`~constructs_lib.sagemaker_endpoint.scaling.ScalableInstanceCount` when
        it is made for this endpoint. (An imported endpoint's update settings are not this app's:
        nothing else to do.)"""
        self.scalable_instance_count = scaling


class _ImportedEndpoint(EndpointBase):
    """An endpoint defined elsewhere (see :meth:`RealtimeEndpoint.from_endpoint_attributes`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        endpoint_arn: str,
        variant_name: str,
        **facts,
    ) -> None:
        super().__init__(scope, construct_id, **facts)
        EndpointMetrics.__init__(self, endpoint_name, variant_name)
        self.endpoint_arn = endpoint_arn


class RealtimeEndpoint(EndpointBase):
    """One SageMaker real-time endpoint with one ProductionVariant.

    Resources: ``AWS::Logs::LogGroup`` ``/aws/sagemaker/Endpoints/<name>`` (created here so that
    destroy removes it and retention is ours; always deleted with the stack: it has the fixed name
    SageMaker writes to, so a retained group would make the next deployment of the endpoint fail
    with "already exists"), ``AWS::SageMaker::Model``, ``AWS::SageMaker::EndpointConfig``,
    ``AWS::SageMaker::Endpoint``, an ``AWS::IAM::ManagedPolicy`` that callers attach to invoke this
    endpoint only, and an execution role unless ``props.role`` is given.

    Attributes (besides :class:`EndpointBase`'s):
        endpoint_config_name: the current EndpointConfig's name (it changes when the config is
            replaced).
        model_name: the current Model's name.
        log_group_name / log_group_arn: the endpoint's log group.
        invoke_policy_arn: the managed policy for callers.
        role: the execution role.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    @classmethod
    def from_endpoint_name(
        cls,
        scope: Construct,
        construct_id: str,
        endpoint_name: str,
        *,
        variant_name: str = VARIANT_NAME,
        instance_type: str | None = None,
    ) -> EndpointBase:
        """An endpoint defined elsewhere, by name, in this stack's account and Region: metric
        helpers, alarms, :meth:`grant_invoke` and autoscaling work on it."""
        return cls.from_endpoint_attributes(
            scope,
            construct_id,
            endpoint_name=endpoint_name,
            variant_name=variant_name,
            instance_type=instance_type,
        )

    @classmethod
    def from_endpoint_attributes(
        cls,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str | None = None,
        endpoint_arn: str | None = None,
        variant_name: str = VARIANT_NAME,
        instance_type: str | None = None,
        initial_instance_count: int | None = None,
        invoke_actions: Sequence[str] = (INVOKE,),
    ) -> EndpointBase:
        """An endpoint defined elsewhere, from its name or ARN (one of them; the other is derived;
        SageMaker writes the name in lower case in ARNs). ``instance_type`` lets :meth:`add_alarms`
        scale GPU and CPU thresholds.

        Raises:
            ValueError: neither (or both) of ``endpoint_name`` and ``endpoint_arn``.
        """
        if (endpoint_name is None) == (endpoint_arn is None):
            raise ValueError(
                "from_endpoint_attributes: give exactly one of endpoint_name and endpoint_arn"
            )
        stack = Stack.of(scope)
        if endpoint_arn is None:
            assert endpoint_name is not None  # exactly one of the two, checked above
            name = endpoint_name if is_token(endpoint_name) else endpoint_name.lower()
            endpoint_arn = stack.format_arn(
                service="sagemaker", resource="endpoint", resource_name=name
            )
        else:
            endpoint_name = stack.split_arn(
                endpoint_arn, ArnFormat.SLASH_RESOURCE_NAME
            ).resource_name
            if endpoint_name is None:
                raise ValueError(f"from_endpoint_attributes: {endpoint_arn} names no endpoint")
        return _ImportedEndpoint(
            scope,
            construct_id,
            endpoint_name=endpoint_name,
            endpoint_arn=endpoint_arn,
            variant_name=variant_name,
            instance_type=instance_type,
            initial_instance_count=initial_instance_count,
            invoke_actions=invoke_actions,
        )

    def __init__(self, scope: Construct, construct_id: str, props: RealtimeEndpointProps) -> None:
        region = Stack.of(scope).region
        problems = Problems()
        props.problems(problems, None if Token.is_unresolved(region) else region)
        problems.raise_if_any(f"RealtimeEndpoint {construct_id}")
        variant = props.variant
        super().__init__(
            scope,
            construct_id,
            instance_type=variant.instance_type,
            initial_instance_count=variant.initial_instance_count,
            invoke_actions=props.invoke_actions,
            instance_types=variant.instance_types,
        )
        # The name is needed at synth (it names the log group, which must exist before the
        # endpoint): a default one is made from the construct path, unique in the app and stable
        # across deployments.
        EndpointMetrics.__init__(
            self,
            props.endpoint_name or Names.unique_resource_name(self, max_length=63, separator="-"),
            variant.variant_name,
        )
        self.rolling_update = props.rolling_update
        self._props = props
        self._rollback_alarms: list[cloudwatch.IAlarm] = []
        self._describe_alarms: iam.PolicyStatement | None = None
        #: Largest instance count autoscaling may reach (register_scaling): the number of
        #: one-instance batches.
        self._max_instances: int | None = None

        self.role: iam.IRole = props.role or self._default_role(props)
        if props.vpc_subnets:
            # SageMaker creates and deletes the endpoint's network interfaces as the execution role.
            grant_vpc_access(self.role, props.vpc_subnets, props.security_groups)
        log_group = logs.LogGroup(
            self,
            "LogGroup",
            log_group_name=f"{LOG_GROUP_PREFIX}{self.endpoint_name}",
            retention=getattr(logs.RetentionDays, LOG_RETENTION[props.log_retention_days]),
            encryption_key=kms.Key.from_key_arn(self, "LogKey", props.log_kms_key_arn)
            if props.log_kms_key_arn
            else None,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self._grant_log_write(log_group)
        self.log_group_name: str = log_group.log_group_name
        self.log_group_arn: str = log_group.log_group_arn

        model = self._model("Model", props, props.container)
        # A pool with an environment of its own runs its own Model (InstancePool ModelNameOverride):
        # the variant's Model in everything but environment variables
        # (props.RealtimeEndpointProps.pool_environment).
        pool_models: dict[str, sagemaker.CfnModel] = {}
        if props.pool_environment:
            image = props.container
            assert isinstance(
                image, ImageContainer
            )  # the props' check refuses a model package here
            pool_models = {
                instance_type: self._model(
                    _pool_model_id(instance_type),
                    props,
                    dataclasses.replace(image, environment={**image.environment, **environment}),
                )
                for instance_type, environment in props.pool_environment.items()
            }

        refusal = catalogue.volume_key_refusal(variant.instance_types)
        config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            # None on local-NVMe instance types: CreateEndpointConfig refuses KmsKeyId there
            # (_volume_key).
            kms_key_id=None if refusal else props.volume_kms_key_arn,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=variant.variant_name,
                    model_name=model.attr_model_name,
                    # With instance pools the variant names its types there only (SageMaker
                    # developer guide, "Deploy to multiple instance types with instance pools").
                    instance_type=None if variant.instance_pools else variant.instance_type,
                    instance_pools=[
                        sagemaker.CfnEndpointConfig.InstancePoolProperty(
                            instance_type=instance_type,
                            priority=priority,
                            model_name_override=pool_models[instance_type].attr_model_name
                            if instance_type in pool_models
                            else None,
                        )
                        for priority, instance_type in enumerate(variant.instance_pools, start=1)
                    ]
                    or None,
                    variant_instance_provision_timeout_in_seconds=variant.instance_provision_timeout_s,
                    initial_instance_count=variant.initial_instance_count,
                    initial_variant_weight=1.0,
                    model_data_download_timeout_in_seconds=variant.model_data_download_timeout_s,
                    container_startup_health_check_timeout_in_seconds=variant.container_startup_timeout_s,
                    inference_ami_version=variant.inference_ami_version,
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy=variant.routing_strategy
                    ),
                )
            ],
        )

        self._volume_key(config, props.volume_kms_key_arn, variant.instance_types, refusal)

        self._endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=self.endpoint_name,
            endpoint_config_name=config.attr_endpoint_config_name,
            deployment_config=self._deployment_config(),
            retain_all_variant_properties=False,
        )
        # SageMaker starts writing logs as soon as instances boot: the group (and its retention)
        # must exist first.
        self._endpoint.node.add_dependency(log_group)
        self.when_in_service = DependencyGroup(self._endpoint)
        # Ref of AWS::SageMaker::Endpoint is its ARN (SageMaker lower-cases the name in ARNs).
        self.endpoint_arn = self._endpoint.ref
        self.endpoint_config_name: str = config.attr_endpoint_config_name
        self.model_name: str = model.attr_model_name
        #: ``{instance type: ModelName}`` of the pools that run a Model of their own
        #: (ModelNameOverride).
        self.pool_model_names: dict[str, str] = {
            name: m.attr_model_name for name, m in pool_models.items()
        }
        self.invoke_policy_arn: str = self._invoke_policy(props).managed_policy_arn

    def _model(
        self,
        construct_id: str,
        props: RealtimeEndpointProps,
        container: ImageContainer | ModelPackageContainer,
    ) -> sagemaker.CfnModel:
        """A Model of this endpoint running ``container``, with the endpoint's role, network
        isolation and VpcConfig."""
        model = sagemaker.CfnModel(
            self,
            construct_id,
            execution_role_arn=self.role.role_arn,
            primary_container=_container_definition(container),
            enable_network_isolation=props.network_isolation,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                subnets=list(props.vpc_subnets),
                security_group_ids=list(props.security_groups),
            )
            if props.vpc_subnets
            else None,
        )
        # The role's policy must exist before SageMaker creates the Model (it checks image and data
        # access).
        model.node.add_dependency(self.role)
        if isinstance(container, ImageContainer):
            for dependency in container.depends_on:
                model.node.add_dependency(dependency)
        return model

    @staticmethod
    def _volume_key(
        config: sagemaker.CfnEndpointConfig,
        key: str | None,
        types: Sequence[str],
        refusal: str | None,
    ) -> None:
        """Say what became of the ML storage volumes' key, on the EndpointConfig.

        * A type of the variant has local NVMe storage (``refusal``,
          :func:`constructs_lib.facts.instance_types. volume_key_refusal`): KmsKeyId is off, since
          CreateEndpointConfig fails with it. An info annotation says so when a key was asked for;
          the compliance packs' "endpoint configuration has a KMS key" rule and checkov's CKV_AWS_98
          are acknowledged on the EndpointConfig with the reason (the volumes are encrypted by the
          instance's hardware module, which no key setting can change).
        * A key was asked for and a type's storage is unknown to the catalogue: the key is kept (the
          request is honoured) and a warning says CreateEndpointConfig fails if that type has local
          storage, and where to record the fact. Never a silent guess.
        """
        if refusal is not None:
            if key is not None:
                Annotations.of(config).add_info(f"volume_kms_key_arn is not applied. {refusal}")
            acknowledge_compliance(
                config, {"SageMakerEndpointConfigurationKMSKeyConfigured": refusal}
            )
            skip_checkov(config, "AWS::SageMaker::EndpointConfig", {"CKV_AWS_98": refusal})
            return
        unknown = catalogue.unknown_storage_types(types)
        if key is not None and unknown:
            Annotations.of(config).add_warning_v2(
                "realtime-voice:volume-key-unknown-storage",
                "KmsKeyId is set, but constructs_lib/facts/instance_types.py does not know "
                f"whether {', '.join(unknown)} {'has' if len(unknown) == 1 else 'have'} local "
                "NVMe instance storage: if so, CreateEndpointConfig fails "
                f"({catalogue.KMS_KEY_ID_RULE}). Record the type there (the EC2 instance-store "
                "table, https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html), or leave "
                "volume_kms_key_arn unset.",
            )

    def add_rollback_alarm(self, alarm: cloudwatch.IAlarm) -> None:
        """Roll updates back while ``alarm`` is in ALARM (DeploymentConfig
        AutoRollbackConfiguration). The execution role may then describe it: SageMaker reads the
        rollback alarms' state as that role ("Ensure that your IAM execution role has permission to
        perform the cloudwatch:DescribeAlarms action on the auto-rollback alarms you specify",
        SageMaker developer guide, deployment guardrails, "Auto-Rollback Configuration and
        Monitoring"). DescribeAlarms supports the ``alarm`` resource type, so no wildcard.

        Raises:
            ValueError: the endpoint has no rolling update.
        """
        if self.rolling_update is None:
            super().add_rollback_alarm(alarm)
        self._rollback_alarms.append(alarm)
        self._endpoint.deployment_config = self._deployment_config()
        if self._describe_alarms is None:
            self._describe_alarms = iam.PolicyStatement(
                sid="DescribeRollbackAlarms",
                actions=["cloudwatch:DescribeAlarms"],
                resources=[alarm.alarm_arn],
            )
            self.role.add_to_principal_policy(self._describe_alarms)
        else:
            self._describe_alarms.add_resources(alarm.alarm_arn)

    def register_scaling(self, scaling: ScalableInstanceCount) -> None:
        """Endpoint updates keep the instance count autoscaling chose
        (RetainAllVariantProperties)."""
        super().register_scaling(scaling)
        self._endpoint.retain_all_variant_properties = True
        self._max_instances = scaling.max_capacity
        self._endpoint.deployment_config = self._deployment_config()

    def add_outputs(self, prefix: str, extra: Mapping[str, tuple[str, str]] | None = None) -> None:
        """Add stack outputs ``<prefix>EndpointName``, ``<prefix>Region``,
        ``<prefix>InvokePolicyArn``, ``<prefix>LogGroupName`` and ``extra`` (``{name: (value,
        description)}``), at the stack's top level so that their keys are exactly these names."""
        stack = Stack.of(self)
        outputs = {
            "EndpointName": (self._endpoint.attr_endpoint_name, "SageMaker EndpointName"),
            "Region": (stack.region, "Region of the endpoint"),
            "InvokePolicyArn": (
                self.invoke_policy_arn,
                "Managed policy that lets a caller invoke this endpoint",
            ),
            "LogGroupName": (
                self.log_group_name,
                "CloudWatch log group of the endpoint's containers",
            ),
            **(extra or {}),
        }
        for name, (value, description) in outputs.items():
            CfnOutput(stack, f"{prefix}{name}", value=value, description=description)

    def _deployment_config(self) -> sagemaker.CfnEndpoint.DeploymentConfigProperty | None:
        """The Endpoint's DeploymentConfig for the rolling update and the rollback alarms added so
        far."""
        rolling = self.rolling_update
        if rolling is None:
            return None
        batch_type, batch_value = rolling.maximum_batch_size()
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(
                    type=batch_type, value=batch_value
                ),
                wait_interval_in_seconds=rolling.wait_s,
                maximum_execution_timeout_in_seconds=rolling.timeout_for(
                    self._props.variant, self._max_instances
                ),
                # No RollbackMaximumBatchSize: a rollback brings the whole old fleet back at once,
                # the fastest recovery.
            ),
            auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[
                    sagemaker.CfnEndpoint.AlarmProperty(alarm_name=alarm.alarm_name)
                    for alarm in self._rollback_alarms
                ]
            )
            if self._rollback_alarms
            else None,
        )

    def _default_role(self, props: RealtimeEndpointProps) -> iam.IRole:
        """A new execution role with what this endpoint's container needs, where that is known at
        synth."""
        role = SageMakerExecutionRole(
            self, "ExecutionRole", description=f"SageMaker execution role of {self.endpoint_name}"
        )
        role.grant_metrics(SAGEMAKER_INSTANCE_METRICS_NAMESPACE)
        container = props.container
        if isinstance(container, ImageContainer):
            if not is_token(container.image_uri) and ECR_IMAGE_RE.fullmatch(container.image_uri):
                role.grant_image_pull(repository_arn_from_image_uri(container.image_uri))
            if container.model_data_s3_uri is not None and not is_token(
                container.model_data_s3_uri
            ):
                data = S3Prefix.parse(container.model_data_s3_uri)
                role.grant_model_data_read(data.bucket, data.prefix)
        return role.role  # pyright: ignore[reportReturnType] (jsii binding: parameter names differ from the interface's)

    def _grant_log_write(self, log_group: logs.ILogGroup) -> None:
        """Create streams in and write events to the endpoint's log group, as the execution role."""
        streams = f"{log_group.log_group_arn}:log-stream:*"
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteEndpointLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[log_group.log_group_arn, streams],
            )
        )
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(Stack.of(self), streams)}]",
                reason="Log stream names are chosen by SageMaker per instance; the wildcard is "
                "confined to this endpoint's log group.",
            )
        )

    def _invoke_policy(self, props: RealtimeEndpointProps) -> iam.ManagedPolicy:
        policy = iam.ManagedPolicy(
            self,
            "InvokePolicy",
            description=f"Invoke the {props.description} endpoint {self.endpoint_name} (and "
            "nothing else)",
            statements=[
                iam.PolicyStatement(
                    sid="InvokeEndpoint",
                    actions=list(props.invoke_actions),
                    resources=[self.endpoint_arn],
                    # Only through the given VPC endpoints: aws:SourceVpce is set on requests that
                    # arrive through a VPC endpoint (IAM user guide, "AWS global condition context
                    # keys").
                    conditions={"StringEquals": {"aws:SourceVpce": list(props.require_source_vpce)}}
                    if props.require_source_vpce
                    else None,
                )
            ],
        )
        if INVOKE_BIDIRECTIONAL in props.invoke_actions:
            # cfn-lint's IAM action list predates bidirectional streaming (W3037 "not one of ...");
            # the action is documented in the InvokeEndpointWithBidirectionalStream API reference.
            cast(CfnResource, policy.node.default_child).add_metadata(
                "cfn-lint", {"config": {"ignore_checks": ["W3037"]}}
            )
        return policy


def _pool_model_id(instance_type: str) -> str:
    """Construct id of an instance pool's own Model: ``PoolModelMlG6eXlarge`` for
    ``ml.g6e.xlarge``."""
    return "PoolModel" + "".join(
        part.capitalize() for part in re.split(r"[^a-zA-Z0-9]+", instance_type)
    )


def _container_definition(
    container: ImageContainer | ModelPackageContainer,
) -> sagemaker.CfnModel.ContainerDefinitionProperty:
    """The Model's PrimaryContainer: an image with uncompressed model data from an S3 prefix, or a
    model package."""
    if not isinstance(container, ImageContainer):
        return sagemaker.CfnModel.ContainerDefinitionProperty(
            model_package_name=container.model_package_arn
        )
    data_source = None
    if container.model_data_s3_uri is not None:
        data_source = sagemaker.CfnModel.ModelDataSourceProperty(
            s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                s3_uri=normalise_s3_prefix(container.model_data_s3_uri),
                s3_data_type="S3Prefix",
                compression_type="None",
            )
        )
    return sagemaker.CfnModel.ContainerDefinitionProperty(
        image=container.image_uri,
        mode="SingleModel",
        environment=dict(container.environment) or None,
        model_data_source=data_source,
    )
