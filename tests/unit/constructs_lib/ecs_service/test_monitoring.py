"""constructs_lib/ecs_service/monitoring.py: the ECS service's metrics, alarm rules and dashboard
rows (a GpuEcsService, or its bridge add-on, in a bare stack): which alarms, on what, at which
threshold, and what missing data means; the bridge's own rules with the bridge, a response-time
rule in seconds without it. The module imports no construct of the service."""

from __future__ import annotations

import ast

from aws_cdk import (
    Stack,
    aws_cloudwatch as cloudwatch,
    aws_ec2 as ec2,
    aws_ecs as ecs,
    aws_s3 as s3,
)

from constructs_lib import (
    GpuCapacity,
    GpuEcsService,
    GpuEcsServiceProps,
    GpuEcsServiceWithBridge,
    GpuEcsServiceWithBridgeProps,
    LoadBalancing,
)
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from tests.conftest import ROOT
from tests.unit.constructs_lib.construct_kit import bare_stack

SERVICE_ALARMS = [
    "UnhealthyTargets",
    "LoadBalancer5XX",
    "Target5XX",
    "RunningTasks",
    "GPUUtilization",
    "GPUMemoryUsed",
]


def common(stack: Stack) -> dict:
    return {
        "service_name": "stt",
        "vpc": ec2.Vpc(stack, "Vpc", max_azs=2),
        "image": ecs.ContainerImage.from_registry("public.ecr.aws/x/bridge:1"),
        "capacity": GpuCapacity("g5.xlarge", min_tasks=2, max_tasks=3),
    }


def with_bridge(**overrides) -> GpuEcsServiceWithBridge:
    stack = bare_stack()
    props = {
        **common(stack),
        "model_bucket": s3.Bucket.from_bucket_name(stack, "Models", "my-models"),
        "model_prefix": "w/v1/",
        "bridge": BridgeAlarmThresholds(namespace="Team/Bridge", stream_cap=4),
        "streams_target": 3.0,
        **overrides,
    }
    return GpuEcsServiceWithBridge(stack, "Stt", GpuEcsServiceWithBridgeProps(**props))


def model_server(**overrides) -> GpuEcsService:
    stack = bare_stack()
    props = {**common(stack), "load_balancing": LoadBalancing(require_token=False), **overrides}
    return GpuEcsService(stack, "Stt", GpuEcsServiceProps(**props))


def test_with_the_bridge_the_service_alarms_are_followed_by_the_bridges_and_task_protection():
    built = with_bridge()
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
    assert running.metric.namespace == "ECS/ContainerInsights"
    assert running.metric.metric_name == "RunningTaskCount"
    gpu = rules["GPUUtilization"].metric
    assert (gpu.namespace, gpu.metric_name, gpu.statistic) == (
        "Team/Bridge/Gpu",
        "nvidia_smi_utilization_gpu",
        "Average",
    )  # the bridge's namespace + /Gpu
    assert rules["GPUMemoryUsed"].metric.expression == "100 * used / total"
    assert rules["GPUMemoryUsed"].threshold == 97
    assert rules["Target5XX"].description.startswith(
        "The bridge answered 5xx (not ready, or draining)."
    )
    assert sorted(built.alarms) == sorted(names)
    assert [rule.name for rule in built.alarm_rules()] == names


def test_another_model_server_gets_a_response_time_alarm_in_seconds_and_no_bridge_rules():
    built = model_server(
        requests_per_target=120, gpu_namespace="Team/Gpu", response_time_p90_ms=1500
    )
    names = [rule.name for rule in built.rules]
    assert names == [*SERVICE_ALARMS, "ResponseTimeP90"]
    latency = built.rules[-1]
    assert latency.threshold == 1.5 and latency.metric.statistic == "p90"
    assert latency.metric.metric_name == "TargetResponseTime"
    assert latency.metric.namespace == "AWS/ApplicationELB"
    assert built.rules[4].metric.namespace == "Team/Gpu"
    assert built.rules[2].description.startswith(
        "The container answered 5xx (not ready, or draining)."
    )


def widget_titles(rows: list[list[cloudwatch.IWidget]], stack: Stack) -> list[list[str]]:
    """Each row's widget titles (a text widget's first line)."""

    def title(widget: cloudwatch.IWidget) -> str:
        (properties,) = [item["properties"] for item in stack.resolve(widget.to_json())]
        return properties.get("title") or properties["markdown"].split("\n")[0]

    return [[title(widget) for widget in row] for row in rows]


def test_dashboard_rows_of_the_service_and_of_the_bridge():
    server = model_server(
        requests_per_target=120, gpu_namespace="Team/Gpu", response_time_p90_ms=1500
    )
    bridge = with_bridge()
    stack = Stack.of(server)
    assert widget_titles(server.dashboard_rows("TTS"), stack) == [
        ["## TTS: ECS service `stt`"],
        ["Requests per task", "Load balancer and model errors", "Response time p90"],
        ["GPU use", "GPU memory used", "Running tasks"],
    ]
    assert widget_titles(bridge.dashboard_rows("STT"), Stack.of(bridge)) == [
        ["## STT: ECS service `stt`"],
        ["Live streams per task", "Load balancer and bridge errors", "Time to first delta"],
        ["GPU use", "GPU memory used", "Running tasks"],
    ]


def test_the_monitoring_and_findings_import_no_construct_of_the_service_even_for_type_checking():
    """No import circle with service.py or bridge_service.py, not even one under TYPE_CHECKING."""
    folder = ROOT / "constructs_lib" / "ecs_service"
    for name in ("monitoring.py", "props.py", "findings.py"):
        imported = {
            node.module
            for node in ast.walk(ast.parse((folder / name).read_text()))
            if isinstance(node, ast.ImportFrom)
        }
        assert imported.isdisjoint(
            {"constructs_lib.ecs_service.service", "constructs_lib.ecs_service.bridge_service"}
        ), name
