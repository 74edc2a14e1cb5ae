"""constructs_lib/monitoring/alarms.py: the alarm rules of an endpoint on their own, without an app
(every alarm as synthesized in the whole app: tests/app/test_cross_stack_alarms.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from constructs_lib.monitoring.alarms import alarm_rules
from constructs_lib.monitoring.metrics import EndpointMetrics
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds

THRESHOLDS = EndpointAlarmThresholds(
    errors_5xx=0,
    errors_4xx=10,
    model_latency_p90_ms=500,
    overhead_latency_p90_ms=100,
    gpu_utilization_percent=90,
    gpu_memory_percent=95,
    cpu_utilization_percent=90,
    memory_percent=90,
    disk_percent=85,
)


def test_rules_without_synthesis_cpu_only_instance_has_no_gpu_alarms():
    names = [rule.name for rule in alarm_rules(EndpointMetrics("e"), "ml.m5.xlarge", THRESHOLDS)]
    assert "GPUUtilization" not in names and "GPUMemoryUtilization" not in names
    cpu = next(
        rule
        for rule in alarm_rules(EndpointMetrics("e"), "ml.m5.xlarge", THRESHOLDS)
        if rule.name == "CPUUtilization"
    )
    assert cpu.threshold == 360  # 90 % x 4 vCPUs
    with pytest.raises(ValueError, match=r"ml.zz9.huge"):
        alarm_rules(EndpointMetrics("e"), "ml.zz9.huge", THRESHOLDS)


def test_only_the_5xx_error_rate_alarm_rolls_updates_back():
    """Not EndpointHealth (missing data breaching: a late metric would roll back; SageMaker already
    fails an update whose new instances fail /ping), not the 5XX count (a stream cut when an old
    instance stops may count)."""
    bridge = BridgeAlarmThresholds(
        "NS", stream_cap=4, time_to_first_delta_p90_ms=1000, active_streams_fraction=0.75
    )
    metrics = EndpointMetrics("e")
    rules = alarm_rules(
        metrics, "ml.g6.4xlarge", replace(THRESHOLDS, rollback_5xx_error_percent=2.5), bridge
    )
    assert [rule.name for rule in rules if rule.rollback] == ["Invocation5XXErrorRate"]
    (rate,) = [rule for rule in rules if rule.rollback]
    assert (
        rate.metric.statistic,
        rate.threshold,
        rate.evaluation_periods,
        rate.datapoints_to_alarm,
    ) == ("Average", 0.025, 5, 3)
    near_cap = next(rule for rule in rules if rule.name == "ActiveStreamsNearCap")
    assert near_cap.threshold == 3  # 0.75 x 4 streams
    # Without a rollback percent (Sonic: no rolling update) there is no rate alarm and nothing rolls
    # back.
    assert not [
        rule
        for rule in alarm_rules(metrics, "ml.g6.4xlarge", THRESHOLDS, bridge)
        if rule.name == "Invocation5XXErrorRate" or rule.rollback
    ]
