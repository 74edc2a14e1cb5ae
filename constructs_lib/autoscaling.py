"""EndpointAutoscaling: Application Auto Scaling of a SageMaker variant's instance count, with one target-tracking
policy.

* Scalable target: service namespace ``sagemaker``, resource id ``endpoint/<name>/variant/<variant>``, dimension
  ``sagemaker:variant:DesiredInstanceCount`` (Application Auto Scaling API reference, RegisterScalableTarget).
  No RoleARN: SageMaker supports the service-linked role ``AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint``,
  which Application Auto Scaling creates and uses when none is given (the CDK's L2 ScalableTarget would create an
  extra, unused role, hence the L1 resources here).
* The target depends on the Endpoint, so CloudFormation registers it after the endpoint exists and, on destroy,
  deregisters it (deleting its policy first) before deleting the endpoint.
* Target tracking either on a CloudWatch metric (Voxtral: the bridge's live streams per instance) or on a metric
  Application Auto Scaling predefines for SageMaker variants (Sonic: invocations per instance, or concurrent requests).

Changing the instance type of a variant registered for scaling fails the update (SageMaker developer guide, "Update
endpoints that use auto scaling"); a model or image change is allowed. Set min = max instances (no scaling) for the
deployment that changes the instance type, then restore them (README, "Scaling").
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct, IDependable

SERVICE_NAMESPACE = "sagemaker"
SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
#: Predefined metric types for SageMaker variants (Application Auto Scaling PredefinedMetricSpecification; SageMaker
#: developer guide, "Define a scaling policy"). Invocations per instance is per minute; concurrent requests is the
#: high-resolution ConcurrentRequestsPerModel metric.
INVOCATIONS_PER_INSTANCE = "SageMakerVariantInvocationsPerInstance"
CONCURRENT_REQUESTS_PER_MODEL = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
#: After a scale-out, the next scale-out waits this long. GPU instances take minutes to download the model and start,
#: so a shorter wait would only stack requests for capacity that is already on its way.
SCALE_OUT_COOLDOWN_S = 300


def variant_resource_id(endpoint_name: str, variant_name: str) -> str:
    """Application Auto Scaling resource id of a SageMaker variant: ``endpoint/<name>/variant/<variant>``."""
    return f"endpoint/{endpoint_name}/variant/{variant_name}"


@dataclass(frozen=True)
class MetricTarget:
    """Keep ``metric`` (its namespace, name, dimensions and statistic) at ``target_value``."""

    metric: cloudwatch.Metric
    target_value: float


@dataclass(frozen=True)
class PredefinedTarget:
    """Keep a predefined metric (``INVOCATIONS_PER_INSTANCE`` or ``CONCURRENT_REQUESTS_PER_MODEL``) at
    ``target_value``."""

    metric_type: str
    target_value: float


@dataclass(frozen=True)
class EndpointAutoscalingProps:
    """Props of :class:`EndpointAutoscaling`.

    Attributes:
        endpoint_name / variant_name: the variant to scale.
        endpoint: the Endpoint resource, so that the target is registered after it and deregistered before it.
        min_instances / max_instances: the instance count stays within these (1 <= min <= max).
        target: what to track.
        scale_in_cooldown_s: after a scale-in, the next scale-in waits this long (seconds). For Voxtral it is longer
            than the container's drain time, so one instance's streams have drained before another is removed.
        scale_out_cooldown_s: after a scale-out, the next scale-out waits this long (seconds).
    """

    endpoint_name: str
    variant_name: str
    endpoint: IDependable
    min_instances: int
    max_instances: int
    target: MetricTarget | PredefinedTarget
    scale_in_cooldown_s: int
    scale_out_cooldown_s: int = SCALE_OUT_COOLDOWN_S


class EndpointAutoscaling(Construct):
    """A scalable target for one SageMaker variant and one target-tracking policy.

    Attributes:
        scalable_target: the ``AWS::ApplicationAutoScaling::ScalableTarget``.
        policy: the ``AWS::ApplicationAutoScaling::ScalingPolicy``.
    """

    def __init__(self, scope: Construct, construct_id: str, props: EndpointAutoscalingProps) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= props.min_instances <= props.max_instances:
            raise ValueError(f"min_instances={props.min_instances}, max_instances={props.max_instances}: "
                             "need 1 <= min_instances <= max_instances")

        self.scalable_target = appscaling.CfnScalableTarget(
            self,
            "Target",
            service_namespace=SERVICE_NAMESPACE,
            resource_id=variant_resource_id(props.endpoint_name, props.variant_name),
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=props.min_instances,
            max_capacity=props.max_instances,
        )
        self.scalable_target.node.add_dependency(props.endpoint)

        target = props.target
        if isinstance(target, MetricTarget):
            metric = target.metric
            tracking = appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=target.target_value,
                customized_metric_specification=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                    namespace=metric.namespace,
                    metric_name=metric.metric_name,
                    dimensions=[
                        appscaling.CfnScalingPolicy.MetricDimensionProperty(name=name, value=value)
                        for name, value in (metric.dimensions or {}).items()
                    ],
                    statistic=metric.statistic,
                ),
                scale_in_cooldown=props.scale_in_cooldown_s,
                scale_out_cooldown=props.scale_out_cooldown_s,
            )
            metric_label = metric.metric_name
        else:
            tracking = appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=target.target_value,
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type=target.metric_type,
                ),
                scale_in_cooldown=props.scale_in_cooldown_s,
                scale_out_cooldown=props.scale_out_cooldown_s,
            )
            metric_label = target.metric_type

        self.policy = appscaling.CfnScalingPolicy(
            self,
            "Policy",
            policy_name=f"{props.endpoint_name}-track-{metric_label}",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.scalable_target.ref,
            target_tracking_scaling_policy_configuration=tracking,
        )
