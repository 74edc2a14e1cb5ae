"""What every endpoint of the app has (``voxtral.*`` and ``sonic.*``): switch, target, instance type
and pools, counts and timeouts, scaling range, alarm thresholds. :class:`EndpointSettings` is the
base of both sections.

Each field is named after the props field it gives (:class:`ProductionVariant`,
:class:`InstanceScaling`, :class:`EndpointAlarmThresholds`...); the key users write is the field's
own ``key`` where it differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from config.context import setting
from config.section import Section
from constructs_lib.facts import instance_types
from constructs_lib.facts.names import check_endpoint_name, check_kms_key_arn
from constructs_lib.monitoring.thresholds import EndpointAlarmThresholds
from constructs_lib.sagemaker_endpoint.props import ProductionVariant
from constructs_lib.sagemaker_endpoint.scaling_props import (
    InstanceScaling,
    check_capacity,
    check_cooldown_s,
)
from constructs_lib.validation import Problems

if TYPE_CHECKING:
    from config.settings import Settings


@dataclass(frozen=True)
class EndpointSettings(Section):
    """What every endpoint of the app has: switch, instance counts and timeouts, scaling range,
    alarm thresholds.

    Subclasses add their own keys and may give a field another default by declaring it again.
    """

    #: Deploy this service (voxtral.enabled also deploys the Artifacts stack: repository and model
    #: bucket).
    enabled: bool = True
    #: Where the service runs: a SageMaker real-time endpoint, or an ECS service on EC2 GPU
    #: instances behind a load balancer (docs/ecs.md).
    target: Literal["sagemaker", "ecs"] = "sagemaker"
    # Each endpoint's section gives its own name and instance type; these only complete the base
    # class.
    #: Stable SageMaker EndpointName.
    endpoint_name: str = "endpoint"
    #: Instance type of the endpoint's ProductionVariant.
    instance_type: str = "ml.g6.xlarge"
    #: Capacity fallback: up to 5 instance types in priority order, the first being instance_type
    #: (empty = instance_type only). Synthesized as the variant's InstancePools (no InstanceType
    #: then): when a type has no capacity (InsufficientCapacity) at creation, update or scale-out,
    #: SageMaker tries the next. Each type must pass every check of instance_type; GPU and CPU
    #: alarms scale by the fewest GPUs and vCPUs among them.
    instance_pools: list[str] = setting(default_factory=list)
    #: VariantInstanceProvisionTimeoutInSeconds (300-3600): with instance_pools, seconds SageMaker
    #: may spend getting capacity across them (None = 1800 s with pools, SageMaker's default
    #: without); a rolling update's time limit adds it.
    provision_timeout_s: int | None = setting(
        key="instance_provision_timeout_s", default_from=ProductionVariant
    )
    #: Instances at creation; must lie between min_instances and max_instances.
    initial_instance_count: int = setting(default_from=ProductionVariant)
    #: ModelDataDownloadTimeoutInSeconds (60-3600).
    model_data_download_timeout_s: int = 1200
    #: ContainerStartupHealthCheckTimeoutInSeconds (60-3600); Voxtral's vLLM loads ~9 GB and
    #: captures CUDA graphs.
    container_startup_timeout_s: int = 1200
    #: KMS key of the ML storage volume; applied on EBS-backed instance types only (not on local
    #: NVMe types, where SageMaker refuses a KmsKeyId: docs/private-deployment.md, ML storage
    #: volumes).
    volume_kms_key_arn: str | None = None
    # Operations (docs/operations.md): autoscaling range and alarm thresholds.
    #: Autoscaling minimum (at least 1); min = max means a fixed size, no scalable target.
    min_capacity: int = setting(key="min_instances", default_from=InstanceScaling)
    #: Autoscaling maximum.
    max_capacity: int = setting(2, key="max_instances")
    #: Seconds between two scale-ins (Voxtral's must exceed the bridge's drain time, 25 s).
    scale_in_cooldown_s: int = 600
    #: Alarm (pages) above this many 5xx errors in 5 minutes.
    errors_5xx: int = setting(key="alarm_5xx_errors", default_from=EndpointAlarmThresholds)
    #: Alarm above this many 4xx errors in 5 minutes.
    errors_4xx: int = setting(key="alarm_4xx_errors", default_from=EndpointAlarmThresholds)
    #: ModelLatency p90 alarm threshold, ms (the alarm compares microseconds: x 1000).
    model_latency_p90_ms: float = setting(
        key="alarm_model_latency_p90_ms", default_from=EndpointAlarmThresholds
    )
    #: OverheadLatency p90 alarm threshold, ms (x 1000 in the alarm).
    overhead_latency_p90_ms: float = setting(
        key="alarm_overhead_latency_p90_ms", default_from=EndpointAlarmThresholds
    )
    #: GPU utilization alarm, percent of capacity, more than 0 and less than 100 (x GPUs in the
    #: alarm).
    gpu_utilization_percent: float = setting(
        key="alarm_gpu_utilization_percent", default_from=EndpointAlarmThresholds
    )
    #: GPU memory alarm, percent of capacity (x GPUs in the alarm).
    gpu_memory_percent: float = setting(
        key="alarm_gpu_memory_percent", default_from=EndpointAlarmThresholds
    )
    #: CPU utilization alarm, percent of capacity, more than 0 and less than 100 (x vCPUs in the
    #: alarm).
    cpu_utilization_percent: float = setting(
        key="alarm_cpu_utilization_percent", default_from=EndpointAlarmThresholds
    )
    #: Memory alarm, percent, more than 0 and less than 100 (the metric runs 0-100).
    memory_percent: float = setting(
        key="alarm_memory_percent", default_from=EndpointAlarmThresholds
    )
    #: Disk alarm, percent, more than 0 and less than 100 (the metric runs 0-100).
    disk_percent: float = setting(key="alarm_disk_percent", default_from=EndpointAlarmThresholds)

    #: The scale-in cooldown must be longer than this many seconds, and why (see VoxtralSettings).
    SCALE_IN_FLOOR: ClassVar[tuple[int, str]] = (0, "")

    def variant(self) -> ProductionVariant:
        return self.props(ProductionVariant)

    def thresholds(self) -> EndpointAlarmThresholds:
        return self.props(EndpointAlarmThresholds)

    @property
    def autoscaled(self) -> bool:
        """min < max instances; min = max means a fixed size (also the way to change the instance
        type)."""
        return self.min_capacity < self.max_capacity

    def problems(self, section: str, settings: Settings) -> list[str]:
        """Every problem of this section's settings, named ``<section>.<key>``."""
        p = self.problems_named(f"{section}.")
        check_endpoint_name(p, "endpoint_name", self.endpoint_name)
        self.variant().problems(p)
        if self.volume_kms_key_arn is not None:
            check_kms_key_arn(
                p, "volume_kms_key_arn", self.volume_kms_key_arn, settings.region, alias=True
            )
        # initial_instance_count is SageMaker's; an ECS service starts with its minimum task count.
        initial = self.initial_instance_count if self.target == "sagemaker" else None
        check_capacity(p, self.min_capacity, self.max_capacity, initial)
        floor_s, reason = self.SCALE_IN_FLOOR
        check_cooldown_s(p, "scale_in_cooldown_s", self.scale_in_cooldown_s, floor_s, reason)
        self.thresholds().problems(p)
        self.app_problems(p, settings)
        return list(p)

    def instance_specs(self, p: Problems) -> list[tuple[str, instance_types.InstanceSpec]]:
        """``(key, facts)`` of every instance type the endpoint may run: ``instance_type``, or
        each of ``instance_pools`` (named after that key in problems), so every rule sized by the
        instance holds for each. A type the catalogue lacks is left out with a problem recorded;
        one that is not a SageMaker type is left out silently (the variant's check reports it)."""
        key = "instance_pools" if self.instance_pools else "instance_type"
        specs = []
        # A duplicate is the variant's problem, reported once.
        for name in dict.fromkeys(self.variant().instance_types):
            if instance_types.is_instance_type(name):
                spec = instance_types.check_catalogued(p, key, name)
                if spec is not None:
                    specs.append((key, spec))
        return specs

    def app_problems(self, p: Problems, settings: Settings) -> None:
        """The rules of this app for the section (subclasses)."""
