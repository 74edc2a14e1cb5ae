"""Props of :class:`constructs_lib.sagemaker_endpoint.scaling.ScalableInstanceCount`: the
instance-count range and target-tracking policies of a SageMaker variant, with the facts and checks
that go with them.

Plain values with their own checks, like :mod:`constructs_lib.sagemaker_endpoint.props`; CDK types
appear in annotations only, so the app's settings layer can run the checks without importing
``aws_cdk``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from constructs_lib.validation import Problems

if TYPE_CHECKING:
    from aws_cdk import aws_cloudwatch as cloudwatch

#: Application Auto Scaling identifies a SageMaker variant by service namespace, resource id and
#: scalable dimension (Application Auto Scaling API reference, RegisterScalableTarget).
SERVICE_NAMESPACE = "sagemaker"
SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
#: Predefined metric types for SageMaker variants (Application Auto Scaling
#: PredefinedMetricSpecification; SageMaker developer guide, "Define a scaling policy"). Invocations
#: per instance is per minute; concurrent requests is the high-resolution ConcurrentRequestsPerModel
#: metric.
INVOCATIONS_PER_INSTANCE = "SageMakerVariantInvocationsPerInstance"
CONCURRENT_REQUESTS_PER_MODEL = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
PREDEFINED_METRICS = (INVOCATIONS_PER_INSTANCE, CONCURRENT_REQUESTS_PER_MODEL)
#: After a scale-out, the next scale-out waits this long. GPU instances take minutes to download the
#: model and start, so a shorter wait would only stack requests for capacity that is already on its
#: way.
SCALE_OUT_COOLDOWN_S = 300
#: Default wait after a scale-in before the next one.
SCALE_IN_COOLDOWN_S = 300
#: Application Auto Scaling cooldowns are seconds; a day is far beyond any useful value and catches
#: unit mistakes.
COOLDOWN_MAX_S = 86400


def variant_resource_id(endpoint_name: str, variant_name: str) -> str:
    """Application Auto Scaling resource id of a SageMaker variant:
    ``endpoint/<name>/variant/<variant>``."""
    return f"endpoint/{endpoint_name}/variant/{variant_name}"


def check_capacity(
    p: Problems, min_capacity: int, max_capacity: int, initial_instance_count: int | None
) -> None:
    """``1 <= min_capacity <= max_capacity``, and the variant's initial count within them (one
    problem at most)."""
    if min_capacity < 1:
        p.add(
            "min_capacity",
            min_capacity,
            "must be at least 1 (a real-time endpoint keeps one instance)",
        )
    elif max_capacity < min_capacity:
        p.add(
            "max_capacity", max_capacity, f"must be at least {p.ref('min_capacity', min_capacity)}"
        )
    elif (
        initial_instance_count is not None
        and initial_instance_count >= 1
        and not min_capacity <= initial_instance_count <= max_capacity
    ):
        p.add(
            "initial_instance_count",
            initial_instance_count,
            f"must be between {p.ref('min_capacity', min_capacity)} and "
            f"{p.ref('max_capacity', max_capacity)}",
        )


def check_cooldown_s(
    p: Problems, prop: str, value: int, floor_s: int = 0, reason: str = ""
) -> None:
    """A cooldown of more than ``floor_s`` and at most :data:`COOLDOWN_MAX_S` seconds; ``reason``
    says why the floor (e.g. a container's drain time)."""
    if not floor_s < value <= COOLDOWN_MAX_S:
        p.add(
            prop, value, f"must be more than {floor_s} and at most {COOLDOWN_MAX_S} seconds{reason}"
        )


def check_target_value(p: Problems, prop: str, value: float, unit: str) -> None:
    """A positive target; ``unit`` says per what (e.g. "live streams per instance")."""
    if not value > 0:
        p.add(prop, value, f"must be a positive number ({unit})")


@dataclass(frozen=True)
class TargetTracking:
    """A target-tracking policy: keep ``metric`` (a CloudWatch metric: namespace, name, dimensions,
    statistic) or a ``predefined_metric`` (:data:`PREDEFINED_METRICS`) at ``target_value`` per
    instance.

    Attributes:
        target_value: the value to hold (required).
        metric: a CloudWatch metric; exactly one of ``metric`` and ``predefined_metric``.
        predefined_metric: an Application Auto Scaling predefined metric type.
        scale_in_cooldown_s: after a scale-in, the next scale-in waits this long. For a container
            that drains its streams after SIGTERM, make it longer than the drain. Default 300.
        scale_out_cooldown_s: after a scale-out, the next scale-out waits this long. Default 300.
        policy_name: default ``<endpoint name>-track-<metric name or type>``.
    """

    target_value: float
    metric: cloudwatch.Metric | None = None
    predefined_metric: str | None = None
    scale_in_cooldown_s: int = SCALE_IN_COOLDOWN_S
    scale_out_cooldown_s: int = SCALE_OUT_COOLDOWN_S
    policy_name: str | None = None

    def problems(self, p: Problems) -> None:
        check_target_value(
            p, "target_value", self.target_value, "the metric's value per instance to hold"
        )
        if (self.metric is None) == (self.predefined_metric is None):
            p.note("TargetTracking: give exactly one of metric and predefined_metric")
        if self.predefined_metric is not None and self.predefined_metric not in PREDEFINED_METRICS:
            p.add(
                "predefined_metric",
                self.predefined_metric,
                f"must be one of {', '.join(PREDEFINED_METRICS)}",
            )
        check_cooldown_s(p, "scale_in_cooldown_s", self.scale_in_cooldown_s)
        check_cooldown_s(p, "scale_out_cooldown_s", self.scale_out_cooldown_s)

    @property
    def metric_label(self) -> str:
        """The metric's name or the predefined type, for the default policy name."""
        return self.metric.metric_name if self.metric is not None else str(self.predefined_metric)


@dataclass(frozen=True)
class InstanceScaling:
    """The instance-count range of a variant and the policy that moves it (for
    :class:`~constructs_lib.sagemaker_endpoint.monitored_endpoint.MonitoredEndpoint`).

    Attributes:
        min_capacity / max_capacity: the range; min = max means a fixed size (no scalable target,
            and updates reset the count to the initial one), which is also how to change the
            instance type of a scaled variant.
        tracking: the target-tracking policy used while min < max (required then).
    """

    min_capacity: int = 1
    max_capacity: int = 1
    tracking: TargetTracking | None = None

    @property
    def scales(self) -> bool:
        """Whether the count moves at all (min < max)."""
        return self.min_capacity < self.max_capacity

    def problems(self, p: Problems, initial_instance_count: int | None = None) -> None:
        check_capacity(p, self.min_capacity, self.max_capacity, initial_instance_count)
        if self.scales:
            if self.tracking is None:
                p.add(
                    "tracking", None, "must be a TargetTracking while min_capacity < max_capacity"
                )
            else:
                self.tracking.problems(p)
