"""constructs_lib/ecs_service/monitoring.py: the ECS service's metrics and alarm rules (a
GpuEcsService in a bare stack): which alarms, on what, at which threshold, and what missing data
means; the bridge's own rules with the bridge, a response-time rule in seconds without it."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch, aws_ec2 as ec2, aws_ecs as ecs, aws_s3 as s3

from constructs_lib import GpuCapacity, GpuEcsService, GpuEcsServiceProps, LoadBalancing
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from tests.unit.constructs_lib.construct_kit import bare_stack

SERVICE_ALARMS = [
    "UnhealthyTargets",
    "LoadBalancer5XX",
    "Target5XX",
    "RunningTasks",
    "GPUUtilization",
    "GPUMemoryUsed",
]


def service(**overrides) -> GpuEcsService:
    stack = bare_stack()
    props = {
        "service_name": "stt",
        "vpc": ec2.Vpc(stack, "Vpc", max_azs=2),
        "image": ecs.ContainerImage.from_registry("public.ecr.aws/x/bridge:1"),
        "capacity": GpuCapacity("g5.xlarge", min_tasks=2, max_tasks=3),
        "model_bucket": s3.Bucket.from_bucket_name(stack, "Models", "my-models"),
        "model_prefix": "w/v1/",
        "bridge": BridgeAlarmThresholds(namespace="Team/Bridge", stream_cap=4),
        "streams_target": 3.0,
        **overrides,
    }
    return GpuEcsService(stack, "Stt", GpuEcsServiceProps(**props))


def test_with_the_bridge_the_service_alarms_are_followed_by_the_bridges_and_task_protection():
    built = service()
    names = [rule.name for rule in built.rules]
    assert names[:6] == SERVICE_ALARMS and names[-1] == "TaskProtectionErrors"
    assert "ActiveStreamsNearCap" in names and "TimeToFirstDeltaP90" in names
    rules = {rule.name: rule for rule in built.rules}
    running = rules["RunningTasks"]
    assert (
        running.comparison,
        running.threshold,
        running.evaluation_periods,
        running.treat_missing_data,
    ) == (
        cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        2,
        10,
        cloudwatch.TreatMissingData.BREACHING,
    )
    assert (
        running.metric.namespace == "ECS/ContainerInsights"
        and running.metric.metric_name == "RunningTaskCount"
    )
    gpu = rules["GPUUtilization"].metric
    assert (gpu.namespace, gpu.metric_name, gpu.statistic) == (
        "Team/Bridge/Gpu",
        "nvidia_smi_utilization_gpu",
        "Average",
    )  # the bridge's namespace + /Gpu
    assert (
        rules["GPUMemoryUsed"].metric.expression == "100 * used / total"
        and rules["GPUMemoryUsed"].threshold == 97
    )
    assert sorted(built.alarms) == sorted(names)


def test_another_model_server_gets_a_response_time_alarm_in_seconds_and_no_bridge_rules():
    built = service(
        bridge=None,
        model_bucket=None,
        model_prefix=None,
        streams_target=None,
        load_balancing=LoadBalancing(require_token=False),
        requests_per_target=120,
        gpu_namespace="Team/Gpu",
        response_time_p90_ms=1500,
    )
    names = [rule.name for rule in built.rules]
    assert names == [*SERVICE_ALARMS, "ResponseTimeP90"]
    latency = built.rules[-1]
    assert latency.threshold == 1.5 and latency.metric.statistic == "p90"
    assert (
        latency.metric.metric_name == "TargetResponseTime"
        and latency.metric.namespace == "AWS/ApplicationELB"
    )
    assert built.rules[4].metric.namespace == "Team/Gpu"
