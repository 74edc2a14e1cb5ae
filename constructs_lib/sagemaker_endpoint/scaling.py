"""ScalableInstanceCount: Application Auto Scaling of a SageMaker variant's instance count, and its
target-tracking policies (props and checks: :mod:`constructs_lib.sagemaker_endpoint.scaling_props`).

* Scalable target: service namespace ``sagemaker``, resource id
  ``endpoint/<name>/variant/<variant>``, dimension ``sagemaker:variant:DesiredInstanceCount``
  (Application Auto Scaling API reference, RegisterScalableTarget). No RoleARN: SageMaker supports
  the service-linked role ``AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint``, which
  Application Auto Scaling creates and uses when none is given (the CDK's L2 ScalableTarget would
  create an extra, unused role, hence the L1 resources here).
* The target depends on the Endpoint, so CloudFormation registers it after the endpoint exists and,
  on destroy, deregisters it (deleting its policies first) before deleting the endpoint.
* A scaled variant keeps the instance count autoscaling chose across endpoint updates (the endpoint
  sets ``RetainAllVariantProperties``).

Changing the instance type of a variant registered for scaling fails the update (SageMaker developer
guide, "Update endpoints that use auto scaling"); a model or image change is allowed. Set min = max
instances (no scaling) for the deployment that changes the instance type, then restore them (README,
"Scaling").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, Unpack

from aws_cdk import aws_applicationautoscaling as appscaling
from constructs import Construct

from constructs_lib.sagemaker_endpoint.scaling_props import (
    CONCURRENT_REQUESTS_PER_MODEL,
    INVOCATIONS_PER_INSTANCE,
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    TargetTracking,
    check_capacity,
    variant_resource_id,
)
from constructs_lib.validation import Problems


class Cooldowns(TypedDict, total=False):
    """The cooldowns :class:`TargetTracking` takes, in seconds."""

    scale_in_cooldown_s: int
    scale_out_cooldown_s: int


if TYPE_CHECKING:
    from constructs_lib.sagemaker_endpoint.interface import IEndpoint


class ScalableInstanceCount(Construct):
    """The instance count of one endpoint variant as an Application Auto Scaling scalable target;
    add policies with :meth:`scale_to_track` (or :meth:`scale_on_invocations`,
    :meth:`scale_on_concurrent_requests`).

    Usually made by
    :meth:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint.auto_scale_instance_count`.

    Args:
        endpoint: the endpoint whose variant scales.
        min_capacity / max_capacity: the count stays within these (1 <= min <= max, and the
            variant's initial count between them).

    Attributes:
        scalable_target_id: the scalable target's id (``Ref``).

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: IEndpoint,
        min_capacity: int,
        max_capacity: int,
    ) -> None:
        problems = Problems()
        check_capacity(problems, min_capacity, max_capacity, endpoint.initial_instance_count)
        if endpoint.scalable_instance_count is not None:
            problems.note(
                "endpoint: its instance count already scales "
                f"({endpoint.scalable_instance_count.node.path}); add policies to that "
                "ScalableInstanceCount (one scalable target per variant)"
            )
        problems.raise_if_any(f"ScalableInstanceCount {construct_id}")
        super().__init__(scope, construct_id)
        self._endpoint = endpoint
        #: The largest instance count this target allows.
        self.max_capacity = max_capacity
        self._target = appscaling.CfnScalableTarget(
            self,
            "Target",
            service_namespace=SERVICE_NAMESPACE,
            resource_id=variant_resource_id(endpoint.endpoint_name, endpoint.variant_name),
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=min_capacity,
            max_capacity=max_capacity,
        )
        if endpoint.when_in_service is not None:
            self._target.node.add_dependency(endpoint.when_in_service)
        endpoint.register_scaling(self)
        self.scalable_target_id: str = self._target.ref

    def scale_to_track(self, construct_id: str, tracking: TargetTracking) -> str:
        """Add a target-tracking policy; returns its ARN.

        Raises:
            constructs_lib.validation.PropsError: listing every invalid field of ``tracking``.
        """
        problems = Problems()
        tracking.problems(problems)
        problems.raise_if_any(f"ScalableInstanceCount policy {construct_id}")
        policy = appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty
        if tracking.metric is not None:
            metric = tracking.metric
            configuration = policy(
                target_value=tracking.target_value,
                customized_metric_specification=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                    namespace=metric.namespace,
                    metric_name=metric.metric_name,
                    dimensions=[
                        appscaling.CfnScalingPolicy.MetricDimensionProperty(name=name, value=value)
                        for name, value in (metric.dimensions or {}).items()
                    ],
                    statistic=metric.statistic,
                ),
                scale_in_cooldown=tracking.scale_in_cooldown_s,
                scale_out_cooldown=tracking.scale_out_cooldown_s,
            )
        else:
            assert (
                tracking.predefined_metric is not None
            )  # exactly one of the two (TargetTracking's check)
            configuration = policy(
                target_value=tracking.target_value,
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type=tracking.predefined_metric,
                ),
                scale_in_cooldown=tracking.scale_in_cooldown_s,
                scale_out_cooldown=tracking.scale_out_cooldown_s,
            )
        resource = appscaling.CfnScalingPolicy(
            self,
            construct_id,
            policy_name=tracking.policy_name
            or f"{self._endpoint.endpoint_name}-track-{tracking.metric_label}",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self._target.ref,
            target_tracking_scaling_policy_configuration=configuration,
        )
        return resource.ref  # Ref of a scaling policy is its ARN

    def scale_on_invocations(
        self, construct_id: str, *, invocations_per_minute: float, **cooldowns: Unpack[Cooldowns]
    ) -> str:
        """Track SageMaker's predefined invocations per instance (requests per instance per
        minute)."""
        return self.scale_to_track(
            construct_id,
            TargetTracking(
                target_value=invocations_per_minute,
                predefined_metric=INVOCATIONS_PER_INSTANCE,
                **cooldowns,
            ),
        )

    def scale_on_concurrent_requests(
        self, construct_id: str, *, requests_per_instance: float, **cooldowns: Unpack[Cooldowns]
    ) -> str:
        """Track SageMaker's predefined concurrent requests per model (high resolution: requests in
        flight)."""
        return self.scale_to_track(
            construct_id,
            TargetTracking(
                target_value=requests_per_instance,
                predefined_metric=CONCURRENT_REQUESTS_PER_MODEL,
                **cooldowns,
            ),
        )
